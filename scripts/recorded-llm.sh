# recorded-llm.sh - sourced by the bench scripts that measure kb against a
# capable model's recorded answers (bench-rerank-llm.sh,
# bench-prompt-choose.sh): their arguments (record KB OUT | replay KB OUT
# ANSWERS) and the scripted loopback LLM server (tests/llm/scripted_llm.py).
# Sets top, KB_BIN, cmd, kb_dir, out and (replay) answers; start_server
# sets KB_LLM_URL. The sourcing script's header comment is its usage.
top=$(cd "$(dirname "$0")/.." && pwd)
KB_BIN=${KB_BIN:-$top/build/kb}
usage() { sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//; /^set -e/d' >&2; exit 2; }
[ $# -ge 3 ] || usage
cmd=$1 kb_dir=$2 out=$3
case $cmd in
record) [ $# -eq 3 ] || usage ;;
replay) [ $# -eq 4 ] || usage; answers=$(cd "$4" && pwd) ;;
*) usage ;;
esac
[ -f "$kb_dir/kb.sqlite" ] || { echo "no KB at '$kb_dir'" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; true' EXIT
# start_server ARG...: the scripted server on a free port; sets KB_LLM_URL
start_server() {
    python3 "$top/tests/llm/scripted_llm.py" "$@" --log "$out/$cmd-requests.jsonl" \
        >"$out/.port" 2>"$out/.server.err" &
    pid=$!
    for _ in $(seq 200); do [ -s "$out/.port" ] && break; sleep 0.05; done
    [ -s "$out/.port" ] || { echo "scripted_llm.py did not start: $(cat "$out/.server.err")" >&2; exit 1; }
    export KB_LLM_URL="http://127.0.0.1:$(head -n1 "$out/.port")/v1/chat/completions"
}
unset KB_LLM_URL KB_LLM_API_KEY KB_RERANK KB_RERANK_URL
export KB_LLM_API=openai KB_LLM_MODEL=recorded KB_RERANK_TIMEOUT_MS=600000
