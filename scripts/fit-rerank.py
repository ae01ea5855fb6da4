#!/usr/bin/env python3
"""Fits the local reranker's weights (query/rerank.c) on the features that
`kb eval --mode hybrid --features FILE` dumps, by coordinate ascent on the
mean nDCG@10 of the development sets (each set weighs the same), and
reports k-fold cross-validation: each fold's weights are fit on the other
folds and scored on it.

    rm -f /tmp/f.jsonl
    for s in retrieval-dev retrieval-dev2; do
      build/kb --kb build/bench-kb-full eval --mode hybrid \\
        --features /tmp/f.jsonl ../shared/eval/$s.json; done
    scripts/fit-rerank.py /tmp/f.jsonl [--use lex_norm,vec_rr,...]

The simulation ranks each query's pool by the weighted sum, keeps at most
5 sections of one document (query.c's cap, backfilled when short), and
scores the top 10 as kb eval does (binary gain, each judgment once).
Standard library only."""
import argparse
import json
import math
import random
import sys

NAMES = ["lex_norm", "lex_rr", "vec_rr", "sec_cos", "sec_cos_rel", "lex_sec",
         "cover", "title_cover", "ident", "code", "paper", "table", "boiler",
         "doc_pool", "short", "rrf", "ident_title", "arch"]
PER_DOC = 5
K = 10


def ndcg(query, w):
    pool = query["pool"]
    scored = sorted(range(len(pool)), key=lambda i: -sum(
        a * b for a, b in zip(w, pool[i]["f"])))
    top, per_doc = [], {}
    for i in scored:
        d = pool[i]["doc"]
        if per_doc.get(d, 0) < PER_DOC:
            top.append(i)
            per_doc[d] = per_doc.get(d, 0) + 1
        if len(top) == K:
            break
    if len(top) < K:
        top += [i for i in scored if i not in top][:K - len(top)]
    seen, dcg = set(), 0.0
    for r, i in enumerate(top):
        new = set(pool[i]["match"]) - seen
        if new:
            dcg += 1 / math.log2(r + 2)
            seen |= set(pool[i]["match"])
    ideal = sum(1 / math.log2(r + 2) for r in range(min(query["judgments"], K)))
    return dcg / ideal if ideal else 0.0


def objective(queries, w):
    by_set = {}
    for q in queries:
        by_set.setdefault(q["set"], []).append(ndcg(q, w))
    means = [sum(v) / len(v) for v in by_set.values()]
    return sum(means) / len(means), {s: sum(v) / len(v) for s, v in by_set.items()}


STEPS = [-1, -0.3, -0.1, 0.1, 0.3, 1]


def fit(queries, w0, use, rounds=3):
    w = list(w0)
    best, _ = objective(queries, w)
    for _ in range(rounds):
        improved = False
        for i in use:
            if NAMES[i] == "rrf":
                continue   # fusion's weight fixes the scale
            for s in STEPS:
                t = list(w)
                t[i] = round(t[i] + s, 4)
                v, _ = objective(queries, t)
                if v > best + 1e-9:
                    best, w, improved = v, t, True
        if not improved:
            break
    return w, best


def fit_pairwise(queries, use, l2=1.0, epochs=300, lr=0.5):
    """Pairwise logistic regression (RankNet's loss, linear): for each
    query, each judged section against each unjudged one of its pool, the
    feature difference should score above 0. Features are standardised on
    the training queries; L2 on the weights; full-batch gradient descent.
    Returns weights on the raw features with rrf's weight 1 (the ranking
    is the same at any positive scale)."""
    cols = [i for i in use]
    rows = [p["f"] for q in queries for p in q["pool"]]
    mean = [sum(r[i] for r in rows) / len(rows) for i in range(len(NAMES))]
    sd = [max(1e-9, math.sqrt(sum((r[i] - mean[i]) ** 2 for r in rows) / len(rows)))
          for i in range(len(NAMES))]
    pairs = []
    for q in queries:
        pool = q["pool"]
        pos = [p for p in pool if p["match"]]
        neg = [p for p in pool if not p["match"]]
        if not pos or not neg:
            continue
        wq = 1.0 / (len(pos) * len(neg))   # each query weighs the same
        for a in pos:
            for b in neg:
                pairs.append(([(a["f"][i] - b["f"][i]) / sd[i] for i in cols], wq))
    w = [0.0] * len(cols)
    w[cols.index(NAMES.index("rrf"))] = 1.0
    total = sum(wq for _, wq in pairs)
    for _ in range(epochs):
        g = [l2 * x / len(queries) for x in w]
        for d, wq in pairs:
            z = sum(a * b for a, b in zip(w, d))
            e = -wq / (1 + math.exp(min(30, z))) / total
            for k in range(len(cols)):
                g[k] += e * d[k]
        w = [x - lr * y for x, y in zip(w, g)]
    raw = [0.0] * len(NAMES)
    for k, i in enumerate(cols):
        raw[i] = w[k] / sd[i]
    r = raw[NAMES.index("rrf")]
    return [round(x / r, 4) if r > 0 else x for x in raw]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("features")
    ap.add_argument("--use", default=",".join(NAMES))
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--method", choices=["ascent", "pairwise"], default="ascent",
                    help="coordinate ascent on nDCG (default), or pairwise "
                    "logistic regression with L2 (--l2)")
    ap.add_argument("--l2", type=float, default=1.0)
    a = ap.parse_args()
    queries = [json.loads(line) for line in open(a.features)]
    use = [NAMES.index(n) for n in a.use.split(",")]
    w0 = [0.0] * len(NAMES)
    w0[NAMES.index("rrf")] = 1.0
    base, per = objective(queries, w0)
    print("start (fusion's order): %.4f %s" % (base, per))
    # folds: each set's queries dealt out in a shuffled order
    rnd = random.Random(a.seed)
    fold_of = {}
    for s in sorted({q["set"] for q in queries}):
        ids = [q["id"] for q in queries if q["set"] == s]
        rnd.shuffle(ids)
        for j, i in enumerate(ids):
            fold_of[(s, i)] = j % a.folds
    tests = []
    for f in range(a.folds):
        train = [q for q in queries if fold_of[(q["set"], q["id"])] != f]
        test = [q for q in queries if fold_of[(q["set"], q["id"])] == f]
        if a.method == "pairwise":
            w = fit_pairwise(train, use, a.l2)
            tr, _ = objective(train, w)
        else:
            w, tr = fit(train, w0, use)
        te, te_per = objective(test, w)
        b, _ = objective(test, w0)
        tests.append((te, b))
        print("fold %d: train %.4f  test %.4f (start weights %.4f)  %s" % (
            f, tr, te, b, " ".join("%s=%.3f" % (s.split("/")[-1], v)
                                  for s, v in te_per.items())))
    print("cross-validated: test %.4f vs start %.4f" % (
        sum(t for t, _ in tests) / len(tests), sum(b for _, b in tests) / len(tests)))
    if a.method == "pairwise":
        w = fit_pairwise(queries, use, a.l2)
        best, _ = objective(queries, w)
    else:
        w, best = fit(queries, w0, use)
    _, per = objective(queries, w)
    print("all queries: %.4f %s" % (best, per))
    print("weights: " + ", ".join("%s %g" % (NAMES[i], w[i])
                                  for i in range(len(NAMES)) if w[i]))
    print("C: {" + ", ".join("%g" % x for x in w) + "}")


if __name__ == "__main__":
    sys.exit(main())
