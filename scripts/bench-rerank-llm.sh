#!/usr/bin/env bash
# bench-rerank-llm.sh - measures the llm reranking stage (kb query --rerank
# llm) with a capable model's answers, recorded and replayed, on both
# development sets (docs/query.md, "Measuring the llm stage").
#
#   scripts/bench-rerank-llm.sh record KB OUT
#       runs kb eval --rerank llm over each set against the scripted server
#       in record mode (tests/llm/scripted_llm.py --record), which keeps
#       each request's prompt as OUT/requests/KEY.json ({"key", "system",
#       "user", ...}) and answers with kb's own order. A capable model then
#       answers each request from its system and user text alone (never
#       from the judgments), one file a request: ANSWERS/KEY.txt holding
#       its reply (a JSON array of passage numbers).
#   scripts/bench-rerank-llm.sh replay KB OUT ANSWERS
#       replays ANSWERS through the scripted server (--answers: each
#       request is answered by the file of its prompt's key; a request
#       without one gets a 500 and keeps kb's order) and reports, per set
#       and per kind, nDCG@10 of hybrid (before) and of hybrid reordered
#       by the answers (after), and the queries better and worse.
#
# KB is a KB of the whole corpus with vectors (read only). The sets are
# SETS (default: ../shared/eval/retrieval-dev.json and
# retrieval-dev2.json); kb is KB_BIN (default: build/kb). The answers are
# not committed: they are a model's output, not the project's.
set -euo pipefail
. "$(dirname "$0")/recorded-llm.sh"
SETS=${SETS:-$top/../shared/eval/retrieval-dev.json $top/../shared/eval/retrieval-dev2.json}
: >"$out/$cmd-requests.jsonl"

if [ "$cmd" = record ]; then
    start_server --record "$out/requests"
else
    start_server --answers "$answers"
fi
for set in $SETS; do
    name=$(basename "$set" .json)
    "$KB_BIN" --kb "$kb_dir" eval --mode hybrid --rerank llm --json -v "$set" \
        >"$out/$cmd-$name.json"
done
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
pid=

if [ "$cmd" = record ]; then
    n=$(ls "$out/requests" | wc -l)
    echo "recorded $n requests in $out/requests (one a query: KEY.json)"
    echo "answer each from its system and user text alone into ANSWERS/KEY.txt, then:"
    echo "  $0 replay $kb_dir $out ANSWERS"
    exit 0
fi

python3 - "$out" $SETS <<'PY'
import json, os, sys
out, sets = sys.argv[1], sys.argv[2:]
print("%-18s %-12s %7s %8s %8s %7s %7s %7s" % ("set", "kind", "queries", "before",
      "after", "better", "worse", "fallbk"))
for s in sets:
    name = os.path.basename(s)[:-5]
    m = json.load(open(os.path.join(out, "replay-%s.json" % name)))["modes"]
    h = {q["id"]: q for q in m["hybrid"]["per_query"]}
    l = {q["id"]: q for q in m["llm"]["per_query"]}
    kinds = {}
    for qid, q in h.items():
        kinds.setdefault("all", []).append(qid)
        kinds.setdefault(q["kind"], []).append(qid)
    for kind in ["all"] + sorted(k for k in kinds if k != "all"):
        ids = kinds[kind]
        b = sum(h[i]["ndcg"] for i in ids) / len(ids)
        a = sum(l[i]["ndcg"] for i in ids) / len(ids)
        better = sum(l[i]["ndcg"] > h[i]["ndcg"] + 1e-9 for i in ids)
        worse = sum(l[i]["ndcg"] < h[i]["ndcg"] - 1e-9 for i in ids)
        fb = sum(1 for i in ids if (l[i].get("rerank") or {}).get("fallback"))
        print("%-18s %-12s %7d %8.3f %8.3f %7d %7d %7d" % (name if kind == "all" else "",
              kind, len(ids), b, a, better, worse, fb))
PY
