#!/usr/bin/env bash
# tier: ci
# kill -9 at random points of kb skill new, kb skill verify and kb skill
# export (issue 28 item 4; the ingest kill test's idea, many kills): each
# leaves the library and the agent's folder as they were or as they will
# be. new: no half-made draft that blocks making it again; verify:
# SKILL.md names the last record of evidence.json (lint clean), one
# record at most added; export: every skill of the first export still
# there, whole. Temp folders are hidden and swept by the next run: none
# is left once a run completes. Prints "kills: N, inconsistent: M" per
# command (BENCHMARKS.md's fault figures; KB_KILL_SCALE=4 for 4x the kills).
. "$(dirname "$0")/lib.sh"
cd "$KB_TOP"
L="$KB_TMP/lib"
mkdir -p "$L"
cp -rL corpus/skills/. "$L/"
cat >"$KB_TMP/fake" <<S
#!/bin/sh
cat "$KB_TMP/result.json"; echo
S
chmod +x "$KB_TMP/fake"
tr -d '\n' >"$KB_TMP/result.json" <<'J'
{"kb_verify":1,"task":"gelu","candidate":"kernel.cu","device":{"name":"NVIDIA H200","compute_capability":"9.0","sms":132},
 "checks":[{"shape":"target","seed":11,"ok":true}],
 "timings":[{"shape":"target","baseline":"reference","runs":50,
   "candidate_ms":{"median":0.135,"ci95_lo":0.134,"ci95_hi":0.136,"min":0.133},
   "baseline_ms":{"median":0.218,"ci95_lo":0.217,"ci95_hi":0.219,"min":0.216},"speedup":1.61,"floor_ms":0.11}],
 "speedup_geomean":1.61,"verdict":"faster","reason":"correct on every check","wall_ms":300}
J
expect_rc 0 kb skill new --dir "$L" gelu-kill --task gelu --from corpus/tasks/gelu/candidates/vec4.cu \
    --description "Vectorised GELU."
KB_VERIFY="$KB_TMP/fake" expect_rc 0 kb skill verify --dir "$L" gelu-kill
expect_rc 0 kb skill export --dir "$L" "$KB_TMP/agent"

KB_VERIFY="$KB_TMP/fake" "$KB_VENV/bin/python3" - "$KB_BIN" "$L" "$KB_TMP/agent" <<'PY' >"$KB_TMP/kills" ||
import json, os, random, subprocess, sys, time
kb, lib, agent = sys.argv[1:4]
random.seed(28)
def run(*args):
    return subprocess.run([kb, *args], capture_output=True, text=True)
def visible_junk(d):
    return [n for n in os.listdir(d) if ".tmp" in n and not n.startswith(".")]
def hidden(d):
    return [n for n in os.listdir(d) if n.startswith(".")]
def kill_runs(name, args, check, n):
    t0 = time.monotonic(); run(*args); span = time.monotonic() - t0
    kills = bad = 0
    for i in range(n):
        p = subprocess.Popen([kb, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(random.uniform(0, span))
        if p.poll() is None:
            p.kill(); kills += 1
        p.wait()
        why = check()
        if why:
            bad += 1
            print(f"{name} kill {i}: {why}", file=sys.stderr)
    print(f"{name}: kills: {kills}, inconsistent: {bad}")
    print(f"{name}: kills: {kills}, inconsistent: {bad}", file=sys.stderr)
    return kills, bad

def records():
    return len(json.load(open(f"{lib}/gelu-kill/evidence.json"))["records"])

# kb skill new: the draft is whole or absent, and making it again works
def check_new():
    d = f"{lib}/new-kill"
    if os.path.exists(d):
        if sorted(os.listdir(d)) != ["SKILL.md", "kernel.cu"]:
            return "a half-made draft: %s" % os.listdir(d)
        r = run("skill", "new", "--dir", lib, "new-kill", "--task", "gelu")
        if "already exists" not in r.stderr:
            return "a whole draft not seen: " + r.stderr
        subprocess.run(["rm", "-rf", d])
    if visible_junk(lib):
        return "visible temp files: %s" % visible_junk(lib)
    r = run("skill", "new", "--dir", lib, "new-kill", "--task", "gelu",
            "--from", "corpus/tasks/gelu/candidates/vec4.cu", "--description", "x.")
    if r.returncode != 0:
        return "making it again: " + r.stderr
    subprocess.run(["rm", "-rf", d])
    return None
new_args = ["skill", "new", "--dir", lib, "new-kill", "--task", "gelu",
            "--from", "corpus/tasks/gelu/candidates/vec4.cu", "--description", "x."]

# kb skill verify: SKILL.md agrees with evidence.json, one record at most added
state = {"n": records()}
def check_verify():
    n = records()
    r = run("skill", "lint", "--dir", lib, "--no-compile", "--json", f"{lib}/gelu-kill")
    errs = [f for f in json.loads(r.stdout)["findings"] if f["severity"] == "error"]
    ok = n in (state["n"], state["n"] + 1) and not errs and not visible_junk(f"{lib}/gelu-kill")
    state["n"] = n
    return None if ok else f"{n} records, errors {errs}"
verify_args = ["skill", "verify", "--dir", lib, "gelu-kill"]

# kb skill export: every skill of the first export there, whole
want = sorted(os.listdir(agent))
def check_export():
    have = sorted(n for n in os.listdir(agent) if not n.startswith("."))
    if have != want:
        return f"the agent's folder holds {have}"
    for n in want:
        if not os.path.isfile(f"{agent}/{n}/SKILL.md"):
            return f"{n} is not whole: {os.listdir(f'{agent}/{n}')}"
    return None
export_args = ["skill", "export", "--dir", lib, agent]

total = 0
scale = float(os.environ.get("KB_KILL_SCALE", "1"))   # BENCHMARKS' runs: more
for name, args, check, n in (("new", new_args, check_new, 30),
                             ("verify", verify_args, check_verify, 30),
                             ("export", export_args, check_export, 40)):
    k, b = kill_runs(name, args, check, int(n * scale))
    total += b
# a run that completes sweeps what the kills left
run(*export_args)
run(*verify_args)
left = hidden(agent) + hidden(lib) + hidden(f"{lib}/gelu-kill")
if left:
    print("temp folders left after a complete run: %s" % left, file=sys.stderr)
    total += 1
sys.exit(1 if total else 0)
PY
    fail "inconsistent after kills: $(cat "$KB_TMP/kills")"
cat "$KB_TMP/kills"
for c in new verify export; do
    k=$(sed -n "s/^$c: kills: \([0-9]*\),.*/\1/p" "$KB_TMP/kills")
    [ "${k:-0}" -ge 5 ] || fail "$c: only ${k:-0} kills hit a running process"
done
echo ok
