# Sourced by the kb generate tests (t6xxx) after lib.sh: the scripted LLM
# server (tests/llm/scripted_llm.py) on a free loopback port, its request
# log, and readers of a run's transcript.
LLM_PID=
trap '[ -n "$LLM_PID" ] && kill "$LLM_PID" 2>/dev/null; rm -rf "$KB_TMP"' EXIT
FIX="$KB_TOP/tests/fixtures/generate"
LLMFIX="$KB_TOP/tests/fixtures/llm"

# need_kb_verify: the loop verifies through kb-verify, built where a CUDA
# toolkit is
need_kb_verify() {
    [ -x "$KB_BUILD/kb-verify" ] || { echo "skipped: no CUDA toolkit (no build/kb-verify)"; exit 0; }
}

# start_llm SCRIPT [ARG...]: the scripted server replaying SCRIPT; sets
# LLM_PID, LLM_PORT, LLM_LOG (one JSON line per request) and KB_LLM_URL
# (OpenAI's path; start_llm_api anthropic for Anthropic's)
start_llm() {
    [ -n "$LLM_PID" ] && stop_llm
    LLM_LOG="$KB_TMP/llm-$RANDOM.jsonl"
    : >"$LLM_LOG"
    : >"$KB_TMP/llm.port"
    python3 "$KB_TOP/tests/llm/scripted_llm.py" --script "$1" --log "$LLM_LOG" "${@:2}" \
        >"$KB_TMP/llm.port" 2>"$KB_TMP/llm.err" &
    LLM_PID=$!
    for _ in $(seq 200); do
        [ -s "$KB_TMP/llm.port" ] && break
        kill -0 "$LLM_PID" 2>/dev/null || fail "scripted_llm exited: $(cat "$KB_TMP/llm.err")"
        sleep 0.05
    done
    LLM_PORT=$(head -n1 "$KB_TMP/llm.port")
    [ -n "$LLM_PORT" ] || fail "scripted_llm did not start: $(cat "$KB_TMP/llm.err")"
    export KB_LLM_URL="http://127.0.0.1:$LLM_PORT/v1/chat/completions" KB_LLM_MODEL=scripted
    export KB_LLM_API=openai
}
stop_llm() {
    kill "$LLM_PID" 2>/dev/null
    wait "$LLM_PID" 2>/dev/null
    LLM_PID=
}
# start_smollm2 [ARG...]: llama.cpp's server with SmolLM2-135M
# (tests/llm/smollm2-server.py from the test virtualenv, ARGs passed on);
# sets LLM_PID and SMOL_URL (http://127.0.0.1:PORT), or ends the test
# (skip_rest) when the virtualenv or the model is missing
start_smollm2() {
    local py="${KB_VENV:-}/bin/python"
    [ -x "$py" ] || skip_rest "no test virtualenv (KB_VENV; make test makes build/venv)"
    [ -n "$LLM_PID" ] && stop_llm
    "$py" "$KB_TOP/tests/llm/smollm2-server.py" "$@" >"$KB_TMP/smol.url" 2>"$KB_TMP/smol.err" &
    LLM_PID=$!
    for _ in $(seq 900); do
        [ -s "$KB_TMP/smol.url" ] && break
        kill -0 "$LLM_PID" 2>/dev/null || break
        sleep 0.2
    done
    SMOL_URL=$(head -n1 "$KB_TMP/smol.url")
    case $SMOL_URL in
    skipped:*) skip_rest "SmolLM2: ${SMOL_URL#skipped: }" ;;
    http://127.0.0.1:*) ;;
    *) fail "smollm2-server.py did not start: '$SMOL_URL' $(tail -5 "$KB_TMP/smol.err")" ;;
    esac
}
# requests: how many requests the server has had
requests() { wc -l <"$LLM_LOG" | tr -d ' '; }
# request_user N: the user message of request N (1-based), as the server got it
request_user() {
    python3 - "$LLM_LOG" "$1" <<'EOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
b = json.loads(lines[int(sys.argv[2]) - 1])["body"]
print([m["content"] for m in b["messages"] if m["role"] == "user"][-1])
EOF
}
# run_dir JSON: the run's folder from a --json summary
run_dir() { json_get "$1" "j['dir']"; }
# events DIR EVENT EXPR: EXPR over each transcript event e of kind EVENT,
# one line each
events() {
    python3 - "$1/transcript.jsonl" "$2" "$3" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["event"] == sys.argv[2]:
        v = eval(sys.argv[3])
        print(" ".join(map(str, v)) if isinstance(v, tuple) else v)
EOF
}
