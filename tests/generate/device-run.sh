#!/usr/bin/env bash
# tests/generate/device-run.sh [BUILD] - kb generate on a GPU machine (the
# H200), with the real kb-verify, for the lead to run after `make`:
#
#  1. the scripted LLM server replays a known-good kernel (gelu vec4.cu in
#     prose, then a write-up): the run ends in a draft skill whose
#     evidence.json is kb-verify's record of that very kernel.cu;
#  2. --replay of that run, with no LLM, reaches the same verdicts;
#  3. a throughput run: 12 distinct correct kernels (the reference at 12
#     block sizes, through // kb-launch:), 4 samples x 3 rounds, so every
#     candidate is verified on the GPU (timed);
#  4. SmolLM2-135M (CPU, llama.cpp's server from build/venv) for 3 rounds of
#     2 samples, verified on the GPU: it completes, writes no skill. A GPU
#     machine without build/venv names another Python that has xllamacpp
#     (KB_SMOL_PYTHON) and the .gguf file (KB_SMOL_MODEL);
#  and prints the time per round split into retrieval, prompt, LLM,
#  extraction and verification, and the candidates verified per minute.
# Exit status 0 when 1-4 hold; the numbers go into BENCHMARKS.md.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build="$top/$build" ;; esac
cd "$top"
[ -x "$build/kb" ] && [ -x "$build/kb-verify" ] || { echo "device-run: build kb and kb-verify first (make)"; exit 2; }
"$build/kb-verify" --device-info --json >/dev/null 2>&1 || { echo "device-run: no GPU: $("$build/kb-verify" --device-info 2>&1 | tail -1)"; exit 4; }
W=$(mktemp -d)
LLM_PID= SMOL_PID=
trap '[ -n "$LLM_PID" ] && kill $LLM_PID 2>/dev/null; [ -n "$SMOL_PID" ] && kill $SMOL_PID 2>/dev/null; rm -rf "$W"' EXIT
export KB_DIR="$W/kb" NO_COLOR=1
SK="$W/skills"
cp -rL corpus/skills "$SK"
kb() { "$build/kb" "$@"; }
bad=0
fail() { echo "FAIL: $*"; bad=1; }
jget() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

if [ -n "${KB_MIRROR:-}" ] && [ -f "$KB_MIRROR/MANIFEST.json" ]; then
    kb ingest -q >/dev/null 2>&1 || echo "device-run: ingest of the mirror failed; retrieval is thinner"
fi
kb ingest -q --source skill-copy "$SK" >/dev/null || kb ingest -q --no-embed --source skill-copy "$SK" >/dev/null

start_llm() {   # SCRIPT: the scripted server; sets KB_LLM_URL
    [ -n "$LLM_PID" ] && kill $LLM_PID 2>/dev/null
    : >"$W/port"
    python3 tests/llm/scripted_llm.py --script "$1" --log "$W/llm.jsonl" >"$W/port" 2>"$W/llm.err" &
    LLM_PID=$!
    for _ in $(seq 200); do [ -s "$W/port" ] && break; sleep 0.05; done
    export KB_LLM_URL="http://127.0.0.1:$(head -n1 "$W/port")/v1/chat/completions" KB_LLM_MODEL=scripted KB_LLM_API=openai
}

# the time per round by step, and candidates verified per minute
report() {   # LABEL SUMMARY.json
    python3 - "$1" "$2" <<'EOF'
import json, sys
label, s = sys.argv[1], json.load(open(sys.argv[2]))
rs = s["round_ms"]
steps = ["retrieval", "prompt", "llm", "extraction", "verification", "total"]
avg = {k: sum(r["ms"][k] for r in rs) / max(len(rs), 1) for k in steps}
print("%s: %d rounds x %d samples, %d verified, %s; per round (ms, mean): %s; "
      "%.1f candidates verified per minute (run wall %.1f s)" % (
          label, s["rounds_run"], s["samples"], s["verified"],
          ", ".join("%d %s" % (v, k) for k, v in sorted(s["verdicts"].items())),
          ", ".join("%s %.0f" % (k, avg[k]) for k in steps),
          s["verified_per_minute"], s["ms"] / 1000))
for r in rs:
    print("  round %d: %s" % (r["round"] + 1, ", ".join("%s %.0f" % (k, r["ms"][k]) for k in steps)))
EOF
}

# 1. a known-good kernel ends in a draft skill with kb-verify's evidence
start_llm tests/fixtures/generate/device-good.json
kb generate gelu --samples 1 --rounds 1 --skills "$SK" --json >"$W/good.json" 2>"$W/good.err"
rc=$?
[ $rc = 0 ] || fail "the good kernel's run exited $rc: $(cat "$W/good.err")"
if [ -s "$W/good.json" ]; then
    echo "1. $(jget "$W/good.json" "j['candidates'][0]['verdict'], round(j['best_speedup'] or 0, 2), j['skill'] and j['skill']['dir']")"
    D=$(jget "$W/good.json" "j['skill']['dir'] if j['skill'] else ''")
    if [ -n "$D" ] && [ -f "$D/evidence.json" ]; then
        [ "$(jget "$D/evidence.json" "j['records'][0]['kernel_sha256']")" = "$(sha256sum "$D/kernel.cu" | cut -d' ' -f1)" ] ||
            fail "the evidence is not for kernel.cu"
        case $(jget "$D/evidence.json" "j['records'][0]['how']") in "kb-verify, in kb generate run"*) ;;
            *) fail "the evidence is not kb-verify's: $(cat "$D/evidence.json")" ;; esac
        grep -q "kb-status: draft" "$D/SKILL.md" || fail "not a draft"
        kb skill lint --dir "$SK" --no-compile "$D" >/dev/null || fail "lint: $(kb skill lint --dir "$SK" --no-compile "$D" 2>&1)"
        echo "   skill $D: $(jget "$D/evidence.json" "j['records'][0]['verdict'], j['records'][0]['device']['name'], j['records'][0]['speedup']")"
    else
        fail "no skill written: $(cat "$W/good.json")"
    fi
    report "good kernel" "$W/good.json"
    # 2. its replay, no LLM
    ID=$(jget "$W/good.json" "j['id']")
    kill $LLM_PID; LLM_PID=
    ( unset KB_LLM_URL; kb generate gelu --replay "$ID" --json >"$W/replay.json" 2>"$W/replay.err" )
    [ "$(jget "$W/replay.json" "j['replay']['same_verdicts']")" = True ] ||
        fail "the replay's verdicts differ: $(jget "$W/replay.json" "j['replay']")"
    echo "2. replay of $ID: same verdicts: $(jget "$W/replay.json" "j['replay']['same_verdicts']")"
fi

# 3. throughput: 12 distinct correct kernels
python3 - "$W/many.json" <<'EOF'
import json, sys
ref = open("corpus/tasks/gelu/reference.cu").read()
rep = []
for b in (32, 64, 96, 128, 160, 192, 224, 256, 320, 384, 512, 1024):
    src = "// kb-launch: kernel=gelu grid=ceil_div(N,%d) block=%d\n%s" % (b, b, ref)
    rep.append({"text": "Block size %d:\n\n```cuda\n%s```\n" % (b, src)})
json.dump({"replies": rep}, open(sys.argv[1], "w"))
EOF
start_llm "$W/many.json"
kb generate gelu --samples 4 --rounds 3 --floor-fraction 1 --no-write --json >"$W/many.out" 2>"$W/many.err"
if [ -s "$W/many.out" ]; then
    [ "$(jget "$W/many.out" "j['verified']")" = 12 ] || fail "throughput run: $(jget "$W/many.out" "j['verdicts'], j['stop']")"
    report "throughput (12 distinct kernels)" "$W/many.out"
else
    fail "throughput run: $(cat "$W/many.err")"
fi
kill $LLM_PID; LLM_PID=

# 4. SmolLM2 on the CPU, verification on the GPU
PY=${KB_SMOL_PYTHON:-$build/venv/bin/python}
if [ -x "$PY" ] || command -v "$PY" >/dev/null; then
    "$PY" tests/llm/smollm2-server.py --ctx 4096 ${KB_SMOL_MODEL:+--model "$KB_SMOL_MODEL"} \
        --threads "${KB_SMOL_THREADS:-2}" --parallel 4 >"$W/smol.url" 2>"$W/smol.err" &
    SMOL_PID=$!
    for _ in $(seq 600); do [ -s "$W/smol.url" ] && break; sleep 0.2; done
    URL=$(head -n1 "$W/smol.url")
    case $URL in
    http*)
        KB_LLM_URL="$URL/v1/chat/completions" KB_LLM_MODEL=smollm2 KB_LLM_API=openai \
            kb generate gelu --samples 4 --rounds 3 --prompt-tokens 2400 --max-tokens 512 \
            --skills "$SK" --json >"$W/smol.json" 2>"$W/smol.gen.err"
        rc=$?
        if [ -s "$W/smol.json" ] && [ "$(jget "$W/smol.json" "j['rounds_run']")" = 3 ]; then
            echo "4. SmolLM2: exit $rc, skill $(jget "$W/smol.json" "j['skill']"), what the replies came to: $(jget "$W/smol.json" "sorted(__import__('collections').Counter(c.get('verdict') or c.get('status') for c in j['candidates']).items())")"
            # every later round's prompt carries the last round's verdicts
            python3 - "$(jget "$W/smol.json" "j['dir']")/transcript.jsonl" <<'EOF' || fail "SmolLM2: a later prompt without feedback"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
ps = [e for e in ev if e["event"] == "prompt"]
later = [p for p in ps[1:] if "## Last attempts" not in p["user"]]
print("   prompts (tokens, feedback): %s" % ", ".join(
    "%d %s" % (p["tokens"], "## Last attempts" in p["user"]) for p in ps))
sys.exit(1 if later or len({p["hash"] for p in ps}) != len(ps) else 0)
EOF
            # the transcript, for BENCHMARKS and for reading what the model wrote
            [ -n "${KB_DEVICE_KEEP:-}" ] && cp "$(jget "$W/smol.json" "j['dir']")/transcript.jsonl" "$KB_DEVICE_KEEP/smollm2-transcript.jsonl"
            report "SmolLM2-135M (CPU) + GPU verification" "$W/smol.json"
        else
            fail "the SmolLM2 run did not complete (exit $rc): $(cat "$W/smol.gen.err")"
        fi ;;
    *) fail "smollm2-server.py did not start: $URL $(tail -3 "$W/smol.err")" ;;
    esac
else
    fail "no $PY (make test makes build/venv; or set KB_SMOL_PYTHON): the SmolLM2 run was not made"
fi
[ $bad = 0 ] && echo "device-run: ok" || echo "device-run: FAILED"
exit $bad
