#!/usr/bin/env bash
# tier: ci
# The generator's relevance stage chooses its prompt's doc passages when it
# is the LLM (KB_RERANK=llm), against the scripted LLM server: one request
# a prompt (the task and device as the question, the candidate passages
# numbered), the passages its reply names in its order and no others,
# kb prompt --json's "chosen"; --dry-run prints that same prompt (the hash
# kb prompt printed); a reply of words keeps kb's own picks with the
# reason; without KB_RERANK=llm nothing is asked and nothing changes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gen-lib.sh"
need_mirror
use_kb cbp-survey-skills   # the Best Practices Guide, the survey, the skill library
export KB_MANIFEST="$MANIFEST"
cd "$KB_TOP"
DEV="$KB_TOP/tests/fixtures/skills/h200-device.json"
docs() { json_get "$1" "'|'.join(c['heading'].split(' > ')[-1] for c in j['cites'] if c['kind'] in ('text', 'table'))"; }
printf '%s\n' '{"replies": [{"text": "[3, 1]"}, {"text": "[3, 1]"}, {"text": "[3, 1]"},' \
    '{"text": "The third passage is best."}]}' \
    >"$KB_TMP/script.json"
start_llm "$KB_TMP/script.json"

# the stage is not the LLM: nothing asked, kb's own picks
unset KB_RERANK
expect_json 0 kb prompt --json --device-info "$DEV" softmax
own=$out
[ "$(requests)" = 0 ] || fail "a request without KB_RERANK=llm"
json_get "$own" "'chosen' in j" | grep -qx False || fail "chosen without the stage"
[ -n "$(docs "$own")" ] || fail "no doc passages: $own"

# the LLM chooses: passages 3 and 1 of its pool, in that order, alone
export KB_RERANK=llm
expect_json 0 kb prompt --json --device-info "$DEV" softmax
chose=$out
[ "$(requests)" = 1 ] || fail "one request a prompt, not $(requests)"
pool=$(python3 - "$LLM_LOG" <<'PY'
import json, re, sys
b = json.loads(open(sys.argv[1]).readline())["body"]
user = b["messages"][-1]["content"]
assert user.startswith("Question: Which passages help an engineer write a fast CUDA kernel "
                       "for this task? softmax: "), user[:200]
assert "on NVIDIA H200, sm_90" in user.split("\n")[0], user.split("\n")[0]
assert "passage numbers only" in b["messages"][0]["content"] and b["temperature"] == 0, b
secs = re.findall(r"^\[(\d+)\] source: .*\nsection: (.*)$", user, re.M)
assert [int(n) for n, _ in secs] == list(range(1, len(secs) + 1)), secs
print("|".join(s.split(" > ")[-1] for _, s in secs))
PY
) || fail "the choice request: $(head -c 600 "$LLM_LOG")"
IFS='|' read -r p1 p2 p3 _ <<<"$pool"
[ -n "$p3" ] || fail "three candidates at least: $pool"
[ "$(docs "$chose")" = "$p3|$p1" ] || fail "doc passages $(docs "$chose"), wanted $p3|$p1 (pool $pool)"
json_get "$chose" "(j['chosen']['model'], j['chosen']['ordered'], j['chosen']['fallback'], j['chosen']['pool'] >= 3)" |
    grep -qx "('scripted', 2, None, True)" || fail "chosen: $(json_get "$chose" "j['chosen']")"
# the rest of the prompt (skills, the kernel to refine) is kb's
[ "$(json_get "$chose" "[c['chunk_id'] for c in j['cites'] if c['kind'] not in ('text', 'table')]")" = \
  "$(json_get "$own" "[c['chunk_id'] for c in j['cites'] if c['kind'] not in ('text', 'table')]")" ] ||
    fail "the choice changed more than the doc passages"

# --dry-run prints the prompt round 1 sends: kb prompt's (both ask
# kb-verify for the device)
expect_json 0 kb prompt --json softmax
printed=$out
expect_json 0 kb generate softmax --dry-run --json
[ "$(json_get "$out" "j['hash']")" = "$(json_get "$printed" "j['hash']")" ] ||
    fail "--dry-run's prompt is not kb prompt's: $(docs "$out") against $(docs "$printed")"
json_get "$out" "j['chosen']['ordered']" | grep -qx 2 || fail "--dry-run: $(json_get "$out" "j.get('chosen')")"
[ "$(requests)" = 3 ] || fail "--dry-run: $(requests) requests in all, wanted 3"

# a reply of words: kb's own picks, and why
expect_json 0 kb prompt --json --device-info "$DEV" softmax
json_get "$out" "j['chosen']['fallback']" | grep -q "not a list of passage ids" ||
    fail "fallback: $(json_get "$out" "j['chosen']")"
json_get "$out" "j['chosen']['ordered']" | grep -qx 0 || fail "ordered after a fallback"
contains "$(cat "$KB_TMP/.stderr")" "the llm reranking stage failed"
[ -n "$(docs "$out")" ] || fail "no doc passages after a fallback"
echo ok
