#!/usr/bin/env python3
"""A kb-verify that replays recorded GPU results, for the write-back paths
of kb generate on a machine without a GPU (as tests/llm/scripted_llm.py
replays recorded replies of a model).

It speaks kb-verify's command line and --serve protocol (docs/verify.md, "GPU
verification"). A candidate whose source is, but for trailing whitespace,
the kernel a recorded result verified (its "candidate" path, relative to
the tree) gets that result, with the request's id and candidate path; the
verdicts, timings and checks are the GPU's. Any other candidate goes to the
real kb-verify with --compile-only: a compile error is the real one, a
kernel that compiles gets verdict "error" ("no recorded GPU result"), as a
machine without a GPU would give.

  RECORDED_RESULTS=FILE.jsonl REAL_KB_VERIFY=build/kb-verify KB_TOP=. \
      recorded_verify.py --serve | --device-info --json | [--json] TASK CAND

--device-info answers with the device of the first recorded result.
Each request is appended to $RECORDED_LOG (when set) as a JSON line.
"""
import json
import os
import subprocess
import sys

TOP = os.environ.get("KB_TOP", ".")
REAL = os.environ.get("REAL_KB_VERIFY", os.path.join(TOP, "build", "kb-verify"))


def recorded():
    out = []
    with open(os.environ["RECORDED_RESULTS"]) as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
    return out


def source_of(path):
    p = path if os.path.isabs(path) else os.path.join(TOP, path)
    try:
        with open(p, encoding="utf-8", errors="replace") as f:
            return f.read().rstrip()
    except OSError:
        return None


def log(entry):
    p = os.environ.get("RECORDED_LOG")
    if p:
        with open(p, "a") as f:
            f.write(json.dumps(entry) + "\n")


def verify(task, cand, compile_only):
    src = source_of(cand)
    name = os.path.basename(task.rstrip("/"))
    for r in recorded():
        if r.get("task") == name and src is not None and source_of(r.get("candidate", "")) == src:
            if compile_only:
                break
            res = dict(r)
            res["candidate"] = cand
            log({"task": name, "candidate": cand, "recorded": r.get("candidate")})
            return res
    args = [REAL, "--json", "--compile-only", task, cand]
    p = subprocess.run(args, capture_output=True, text=True)
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        res = {"kb_verify": 1, "task": name, "candidate": cand, "verdict": "error",
               "reason": "recorded_verify: the real kb-verify gave no result"}
    log({"task": name, "candidate": cand, "recorded": None, "verdict": res.get("verdict")})
    if not compile_only and res.get("verdict") == "compiled":
        res["verdict"] = "error"
        res["reason"] = "no recorded GPU result for this kernel (recorded_verify)"
    return res


def main():
    a = sys.argv[1:]
    if "--device-info" in a:
        dev = recorded()[0].get("device", {})
        print(json.dumps(dev))
        return 0
    if "--serve" in a:
        for line in sys.stdin:
            if not line.strip():
                continue
            req = json.loads(line)
            res = verify(req["task"], req.get("candidate", ""), bool(req.get("compile_only")))
            res["id"] = req.get("id")
            sys.stdout.write(json.dumps(res) + "\n")
            sys.stdout.flush()
        return 0
    pos = [x for x in a if not x.startswith("--")]
    res = verify(pos[0], pos[1], "--compile-only" in a)
    print(json.dumps(res))
    return 0 if res["verdict"] in ("correct", "faster", "compiled") else 1


if __name__ == "__main__":
    sys.exit(main())
