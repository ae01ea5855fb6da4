#!/usr/bin/env python3
"""prompt-ontopic.py - the share of a generator prompt's passages that are
on-topic, by the judged rules of tests/fixtures/prompt-judged/judged.json.

For each judged task it runs `KB prompt TASK --json` (the H200 profile of
the judged file as the device) and classes each cited passage:
  skill     on-topic when the skill is one the task's judgment names;
  code      (an exemplar) when its file or function matches the task's
            exemplar pattern, or it is the kernel of a named skill;
  text      (docs, tables) when a topic group of the task matches
            'SOURCE | TITLE | HEADING';
and no passage but a skill is on-topic where the task's 'not' pattern or
an 'off' group matches.
Prints a line per task (on-topic / passages, and the off-topic ones with
-v) and the share over all tasks; --json prints it as one object.

usage: scripts/prompt-ontopic.py [--kb DIR] [--kb-bin build/kb]
                                 [--judged FILE] [-v] [--json] [TASK...]
"""
import argparse
import json
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def classify(cite, rules, groups):
    text = " | ".join(cite.get(k) or "" for k in ("source", "title", "heading"))
    low = text.lower()
    skills = rules.get("skills", [])
    nots = [groups[g] for g in rules.get("off", [])]
    if rules.get("not"):
        nots.append(rules["not"])
    if cite["kind"] != "skill" and any(re.search(p, low, re.I) for p in nots):
        return False
    if cite["kind"] == "skill":
        return cite.get("skill") in skills
    if cite["kind"] == "code":
        m = re.search(r"/skills/([^/]+)/", cite.get("url") or "")
        if m and m.group(1) in skills:
            return True
        return bool(re.search(rules.get("exemplars", "(?!)"), low, re.I))
    pats = [groups[g] for g in rules.get("help", [])]
    if rules.get("also"):
        pats.append(rules["also"])
    return any(re.search(p, low, re.I) for p in pats)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", default=os.environ.get("KB_DIR", "/work/kb-full"))
    ap.add_argument("--kb-bin", default=os.path.join(TOP, "build", "kb"))
    ap.add_argument("--judged", default=os.path.join(TOP, "tests", "fixtures",
                                                     "prompt-judged", "judged.json"))
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("tasks", nargs="*")
    a = ap.parse_args()
    with open(a.judged) as f:
        judged = json.load(f)
    device = os.path.join(TOP, judged["device"])
    tasks = a.tasks or list(judged["tasks"])
    out = {"kb": a.kb, "tasks": {}}
    on_all = n_all = 0
    for t in tasks:
        rules = judged["tasks"][t]
        p = subprocess.run([a.kb_bin, "--kb", a.kb, "prompt", t, "--device-info", device,
                            "--json"], capture_output=True, text=True, cwd=TOP)
        if p.returncode != 0:
            sys.exit("kb prompt %s failed: %s" % (t, p.stderr.strip()))
        prompt = json.loads(p.stdout)
        rows = []
        for c in prompt["cites"]:
            ok = classify(c, rules, judged["groups"])
            rows.append({"on": ok, "kind": c["kind"], "source": c["source"],
                         "heading": c["heading"], "skill": c.get("skill") or ""})
        on = sum(r["on"] for r in rows)
        on_all += on
        n_all += len(rows)
        out["tasks"][t] = {"on_topic": on, "passages": len(rows), "tokens": prompt["tokens"],
                           "hash": prompt["hash"], "cites": rows}
        if not a.json:
            print("%-18s %2d / %2d on-topic  (%5d tokens)" % (t, on, len(rows), prompt["tokens"]))
            for r in rows:
                if a.verbose or not r["on"]:
                    print("    %s %-5s %s | %s" % ("+" if r["on"] else "-", r["kind"],
                                                  r["source"], r["heading"][:100]))
    out["on_topic"] = on_all
    out["passages"] = n_all
    out["share"] = on_all / n_all if n_all else 0.0
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print("on-topic: %d of %d passages, %.0f %%" % (on_all, n_all, 100 * out["share"]))


if __name__ == "__main__":
    main()
