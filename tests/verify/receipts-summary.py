#!/usr/bin/env python3
"""The summary of tests/verify/receipts-run.sh's results (OUTDIR): the
adversarial set, the committed candidates' verdicts, level-1 wall time
through --serve, six-process reproducibility of the live skills, and the
repeats' wrong verdicts. Exits 1 when a candidate lost its verdict (one
process each, or through --serve), an adversarial candidate was not
caught, a live skill was not faster (or correct) in one of its processes,
a repeat gave a wrong verdict, or a result is missing (each committed
candidate once, each live skill six times, each candidate and each
reference REPEATS times, the environment's, when it is given).

    REPEATS=200 python3 tests/verify/receipts-summary.py OUTDIR
"""
import glob
import json
import os
import statistics
import sys


def want_verdict(task):
    """The verdict a committed candidate keeps: gemm_bf16 ties cuBLAS."""
    return "correct" if task == "gemm_bf16" else "faster"


def lines(path):
    if not os.path.exists(path):
        return []
    out = []
    for l in open(path):
        l = l.strip()
        if l:
            try:
                out.append(json.loads(l))
            except ValueError:
                out.append({"verdict": "unreadable", "reason": l[:100]})
    return out


def level(task):
    try:
        return json.load(open(os.path.join("corpus/tasks", task, "task.json")))["level"]
    except (OSError, KeyError, ValueError):
        return 0


def main(d):
    bad = 0
    dev = json.load(open(os.path.join(d, "device.json")))
    print("device: %s, driver %s, CUDA %s, NVRTC %s" % (
        dev.get("name"), dev.get("driver_version"), dev.get("cuda_driver_version"),
        dev.get("nvrtc_version")))

    adv = lines(os.path.join(d, "adversarial.jsonl"))
    caught = sum(1 for r in adv if r.get("verdict") == r.get("expected"))
    print("adversarial: %d/%d got the verdict they must get" % (caught, len(adv)))
    for r in adv:
        if r.get("verdict") != r.get("expected"):
            bad += 1
            print("  NOT CAUGHT %s: %s (%s)" % (r.get("file"), r.get("verdict"),
                                               r.get("reason", "")[:100]))

    ncand = len(glob.glob("corpus/tasks/*/candidates/*.cu"))
    cands = lines(os.path.join(d, "candidates.jsonl"))
    kept = 0
    for r in cands:
        ok = r.get("verdict") == want_verdict(r.get("task"))
        kept += ok
        ci = r.get("speedup_ci95") or [0, 0]
        print("  %-18s %-28s %-9s x%7.2f [%.2f, %.2f] wall %5.0f ms%s%s%s" % (
            r.get("task"), os.path.basename(r.get("file", "")), r.get("verdict"),
            r.get("speedup_geomean", 0), ci[0], ci[1], r.get("wall_ms", 0),
            " state" if r.get("state") else "", " REVIEW" if r.get("review") else "",
            "" if ok else "  LOST ITS VERDICT: " + r.get("reason", "")[:100]))
        bad += not ok
    print("candidates: %d/%d kept their verdict" % (kept, len(cands)))
    if len(cands) != ncand:
        bad += 1
        print("  MISSING: %d results for %d committed candidates" % (len(cands), ncand))

    serve = lines(os.path.join(d, "serve.jsonl"))
    lost = [r for r in serve if r.get("verdict") != want_verdict(r.get("task"))]
    for r in lost:
        print("  SERVE: %s LOST ITS VERDICT: %s (%s)" % (r.get("id"), r.get("verdict"),
                                                      r.get("reason", "")[:100]))
    if len(serve) != ncand:
        print("  SERVE: %d results for %d committed candidates" % (len(serve), ncand))
    bad += len(lost) + (len(serve) != ncand)
    l1 = sorted(r.get("wall_ms", 0) for r in serve if level(r.get("task", "")) == 1)
    if l1:
        print("serve: level-1 wall p50 %.0f ms (min %.0f, max %.0f, %d candidates); all "
              "%d results: %s" % (statistics.median(l1), l1[0], l1[-1], len(l1), len(serve),
                                  sorted(set(r.get("verdict") for r in serve))))

    by = {}
    for r in lines(os.path.join(d, "repro.jsonl")):
        by.setdefault(r.get("skill"), []).append(r)
    worst = 0
    print("reproducibility (six processes per live skill):")
    for s, rs in sorted(by.items()):
        sp = [r.get("speedup_geomean", 0) for r in rs if r.get("speedup_geomean")]
        vs = sorted(set(r.get("verdict") for r in rs))
        if len(rs) != 6 or any(v not in ("faster", "correct") for v in vs):
            bad += 1
            print("  %-36s NOT KEPT in six processes: %d results, %s" % (s, len(rs), vs))
        if not sp:
            print("  %-36s no speedup: %s" % (s, vs))
            continue
        m = statistics.mean(sp)
        dev_pct = max(abs(x - m) / m for x in sp) * 100
        worst = max(worst, dev_pct)
        spread = next((r["baseline_spread"]["spread"] for r in rs if r.get("baseline_spread")),
                      None)
        sets = next((r["timings"][0].get("baseline_ms_by_set") for r in rs
                     if r.get("timings")), None)
        print("  %-36s %-8s x%.3f..%.3f  +-%.1f %%  baseline spread across 4 processes %s  "
              "by set %s" % (s, ",".join(vs), min(sp), max(sp), dev_pct,
                             "%.1f %%" % (spread * 100) if spread is not None else "?", sets))
    print("reproducibility: worst deviation from the six-process mean +-%.1f %% (target 3 %%)"
          % worst)

    reps = int(os.environ.get("REPEATS", "0") or 0)
    nref = len(glob.glob("corpus/tasks/*/task.json"))
    for what, f, want, n in (("candidates on odd,tiny", "repeats-candidates.jsonl", "correct",
                              ncand),
                             ("references on tiny", "repeats-references.jsonl", "correct",
                              nref)):
        rs = lines(os.path.join(d, f))
        wrong = [r for r in rs if r.get("verdict") != want]
        widened = sum(1 for r in rs if "within_sensitivity" in json.dumps(r) or
                      "tolerance_from_sensitivity" in json.dumps(r))
        per = {}
        for r in rs:
            per[r.get("id") or r.get("task")] = per.get(r.get("id") or r.get("task"), 0) + 1
        print("repeats, %s: %d runs (%d to %d each over %d), %d wrong verdicts; %d runs "
              "judged an element by the reference's sensitivity" % (
                  what, len(rs), min(per.values() or [0]), max(per.values() or [0]),
                  len(per), len(wrong), widened))
        for r in wrong[:10]:
            print("  WRONG %s %s: %s" % (r.get("id") or r.get("task"), r.get("verdict"),
                                          r.get("reason", "")[:160]))
        bad += len(wrong)
        short = [k for k, c in per.items() if c != reps]
        if reps and (len(per) != n or short):
            bad += 1
            print("  MISSING: %d of %d had %d runs each; short: %s" % (
                len(per) - len(short), n, reps, ", ".join(map(str, short[:10]))))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
