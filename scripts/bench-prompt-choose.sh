#!/usr/bin/env bash
# bench-prompt-choose.sh - measures the generator's prompt passages chosen
# by the llm relevance stage (docs/generate.md, "The passages an LLM
# chooses"): the on-topic share of the judged tasks' prompts
# (scripts/prompt-ontopic.py) without an LLM (kb's own picks) and with a
# capable model's recorded answers to kb's own choice requests
# (KB_RERANK=llm: the generator's relevance stage is the LLM).
#
#   scripts/bench-prompt-choose.sh record KB OUT
#       runs kb prompt for each judged task against the scripted server
#       in record mode (tests/llm/scripted_llm.py --record), which keeps
#       each choice request's prompt as OUT/requests/KEY.json ({"key",
#       "system", "user", ...}) and answers with the pool's own order. A
#       capable model then answers each request from its system and user
#       text alone (never from the judgments), one file a request:
#       ANSWERS/KEY.txt holding its reply (a JSON array of passage numbers).
#   scripts/bench-prompt-choose.sh replay KB OUT ANSWERS
#       the on-topic share before (no LLM) and after (ANSWERS replayed
#       through the scripted server, --answers; a request without an
#       answer gets a 500 and keeps kb's own picks), per task.
#
# KB is a KB of the whole corpus with vectors (read only); kb is KB_BIN
# (default: build/kb). The answers are not committed: they are a model's
# output, not the project's.
set -euo pipefail
. "$(dirname "$0")/recorded-llm.sh"
ontopic() { python3 "$top/scripts/prompt-ontopic.py" --kb "$kb_dir" --kb-bin "$KB_BIN" "$@"; }
: >"$out/$cmd-requests.jsonl"
if [ "$cmd" = record ]; then
    start_server --record "$out/requests"
    KB_RERANK=llm ontopic --json >"$out/record.json"
    n=$(ls "$out/requests" | wc -l)
    echo "recorded $n requests in $out/requests (one a task: KEY.json)"
    echo "answer each from its system and user text alone into ANSWERS/KEY.txt, then:"
    echo "  $0 replay $kb_dir $out ANSWERS"
    exit 0
fi
ontopic --json >"$out/before.json"
start_server --answers "$answers"
KB_RERANK=llm ontopic --json >"$out/after.json"
python3 - "$out/before.json" "$out/after.json" <<'PY'
import json, sys
b, a = (json.load(open(p)) for p in sys.argv[1:3])
print("%-18s %-22s %-22s" % ("task", "before (kb's picks)", "after (LLM chose)"))
for t in b["tasks"]:
    x, y = b["tasks"][t], a["tasks"][t]
    print("%-18s %2d / %2d (%5d tok)     %2d / %2d (%5d tok)" % (t, x["on_topic"], x["passages"],
          x["tokens"], y["on_topic"], y["passages"], y["tokens"]))
for name, r in (("before", b), ("after", a)):
    print("%s: %d of %d passages on-topic, %.0f %%" % (name, r["on_topic"], r["passages"],
                                                      100 * r["share"]))
PY
