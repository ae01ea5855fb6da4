#!/usr/bin/env bash
# tier: ci
# kb generate against the scripted LLM server, verifying with the real
# kb-verify --compile-only (NVRTC: no GPU needed): usage; --dry-run sends
# nothing; a run of rounds whose feedback carries the real compile log,
# the extraction's words for a reply without code or with host code, and
# the kernel to refine; duplicates not verified twice; the transcript and
# summary; --replay with no LLM reaching the same verdicts; population's
# parents; a 429 retried; a 401 stopping the run; the token budget; early
# stop; Anthropic's API; the key never in a transcript.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gen-lib.sh"
need_kb_verify
cd "$KB_TOP"
SK="$KB_TMP/skills"

# usage
expect_rc 2 kb generate
contains "$out" "need a TASK"
expect_rc 2 kb generate gelu --strategy greedy
contains "$out" "--strategy is refine or population"
expect_rc 2 kb generate gelu --samples 0
expect_rc 2 kb generate gelu --floor-fraction 2
expect_rc 2 kb generate gelu --dry-run --replay x
expect_rc 1 kb generate no_such_task --dry-run
contains "$out" "no task 'no_such_task'"
# no LLM configured: a usage error naming the variable
( unset KB_LLM_URL; expect_rc 2 kb generate gelu --compile-only --skills "$SK"; contains "$out" "KB_LLM_URL" ) || exit 1

# --dry-run: the prompt, nothing sent
start_llm "$LLMFIX/rounds.json"
expect_json 0 kb generate gelu --dry-run
contains "$out" "=== system ==="
contains "$out" "extern \"C\" __global__ void gelu"     # the reference kernel
contains "$out" "gelu"
[ "$(requests)" = 0 ] || fail "--dry-run sent a request"
expect_json 0 kb generate gelu --dry-run --json
[ "$(json_get "$out" "j['task'], len(j['hash'])")" = "gelu 64" ] || fail "--dry-run --json: $out"

# rounds: a compile error, then a wrong kernel (compiles), then the good one
expect_json 0 kb generate gelu --compile-only --samples 1 --rounds 3 --json --skills "$SK"
S=$out
D=$(run_dir "$S")
[ "$(json_get "$S" "[c['verdict'] for c in j['candidates']]")" = "['compile_error', 'compiled', 'compiled']" ] ||
    fail "verdicts: $S"
[ "$(json_get "$S" "j['rounds_run'], j['stop'], j['verified'], j['requests'], j['compile_only']")" = "3 rounds 3 3 True" ] ||
    fail "summary: $S"
[ "$(json_get "$S" "j['skill']")" = None ] || fail "compile-only wrote a skill: $S"
[ "$(requests)" = 3 ] || fail "requests: $(requests)"
# round 2's prompt carries round 1's verdict: NVRTC's own log, the kernel
# named kernel.cu, and the kernel to refine
u2=$(request_user 2)
contains "$u2" "attempt r0s0 (round 1, sample 1): compile_error"
contains "$u2" "kernel.cu(4): error: expected a \";\""
lacks "$u2" "$D"
contains "$u2" "Its kernel (what the verdict is about):
\`\`\`cuda
extern \"C\" __global__ void gelu(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x
    if (i < n) {"
u3=$(request_user 3)
contains "$u3" "attempt r1s0 (round 2, sample 1): compiled"
# round 3 refines the kernel that compiled
contains "$(request_user 3)" "y[i] = v > 0.0f ? v : 0.0f;"
# the transcript: every event, JSON lines, the kernels beside it
[ -f "$D/transcript.jsonl" ] && [ -f "$D/summary.json" ] || fail "no transcript in $D"
[ "$(events "$D" run "e['task'], e['model'], e['samples'], e['rounds']")" = "gelu scripted 1 3" ] ||
    fail "run event"
[ "$(events "$D" reply "e['key']" | tr '\n' ' ')" = "r0s0 r1s0 r2s0 " ] || fail "reply events"
[ "$(events "$D" verdict "e['verdict']" | tr '\n' ' ')" = "compile_error compiled compiled " ] ||
    fail "verdict events"
[ "$(events "$D" request "e['body']['messages'][-1]['role']" | sort -u)" = user ] || fail "request bodies"
[ "$(events "$D" round "sorted(e['ms'])" | sort -u)" = \
  "['extraction', 'llm', 'llm_requests', 'prompt', 'retrieval', 'total', 'verification']" ] ||
    fail "round timings"
cmp -s "$D/kernels/r2s0.cu" "$KB_TOP/corpus/tasks/gelu/candidates/vec4.cu" ||
    fail "the extracted kernel is not the reply's block"
[ "$(events "$D" candidate "e['technique']" | tail -1)" = vector ] || fail "technique"
[ "$(ls "$KB_DIR/runs" | wc -l)" = 1 ] || fail "runs: $(ls "$KB_DIR/runs")"
ID=$(json_get "$S" "j['id']")

# --replay: the recorded replies, no LLM at all, the same verdicts
stop_llm
( unset KB_LLM_URL
  expect_json 0 kb generate gelu --replay "$ID" --json
  [ "$(json_get "$out" "j['replay']['of'], j['replay']['same_verdicts'], j['replay']['differences']")" = \
    "$ID True []" ] || fail "replay: $out"
  [ "$(json_get "$out" "[c['verdict'] for c in j['candidates']]")" = "['compile_error', 'compiled', 'compiled']" ] ||
      fail "replay verdicts: $out"
  [ "$(json_get "$out" "j['model'], j['compile_only'], j['rounds_run']")" = "scripted True 3" ] ||
      fail "replay options: $out"
  # by folder too; a run that is not there
  expect_json 0 kb generate gelu --replay "$D"
  expect_rc 2 kb generate softmax --replay "$ID"
  contains "$out" "run '$ID' is for task 'gelu', not 'softmax'"
  expect_rc 1 kb generate gelu --replay no-such-run
  contains "$out" "no run 'no-such-run' to replay" ) || exit 1

# feedback on replies without a kernel, a duplicate, then a compile error
start_llm "$FIX/feedback.json"
expect_json 0 kb generate gelu --compile-only --samples 1 --rounds 5 --json --skills "$SK"
S=$out
[ "$(json_get "$S" "[c['verdict'] for c in j['candidates']]")" = \
  "['no_code', 'host_code', 'compiled', 'compiled', 'compile_error']" ] || fail "verdicts: $S"
[ "$(json_get "$S" "j['candidates'][3]['duplicate_of'], j['duplicates'], j['verified'], j['no_kernel']")" = "r2s0 1 2 2" ] ||
    fail "the reformatted kernel was verified again: $S"
contains "$(request_user 2)" "no code"
contains "$(request_user 2)" "no fenced block"
contains "$(request_user 3)" "host code (main, line 9 of its block)"
contains "$(request_user 3)" "kb-verify owns allocation"
contains "$(request_user 5)" "the same kernel as r2s0"
D=$(run_dir "$S")
[ "$(events "$D" candidate "e['status']" | tr '\n' ' ')" = "no_code host_code ok ok ok " ] || fail "candidates"
[ "$(events "$D" verdict "e['key']" | tr '\n' ' ')" = "r2s0 r4s0 " ] || fail "a duplicate was verified"
ID=$(json_get "$S" "j['id']")
stop_llm
( unset KB_LLM_URL; expect_json 0 kb generate gelu --replay "$ID" --json
  [ "$(json_get "$out" "j['replay']['same_verdicts'], j['duplicates']")" = "True 1" ] || fail "replay: $out" ) || exit 1

# population: two parents drawn from the two kept kernels (two techniques)
start_llm "$FIX/population.json"
expect_json 0 kb generate gelu --compile-only --strategy population --samples 2 --rounds 2 --json --skills "$SK"
S=$out
D=$(run_dir "$S")
[ "$(json_get "$S" "j['strategy'], j['requests'], sorted(c['technique'] for c in j['candidates'][:2])")" = \
  "population 4 ['plain', 'vector']" ] || fail "population: $S"
[ "$(events "$D" candidate "e['parent']" | tail -n2 | sort | tr '\n' ' ')" = "r0s0 r0s1 " ] ||
    fail "round 2's parents: $(events "$D" candidate "e['key'], e['parent']")"
[ "$(events "$D" prompt "e['hash']" | sort -u | wc -l)" = 3 ] || fail "one prompt per parent"

# a 429 is retried (Retry-After), and the reply still counts
start_llm "$LLMFIX/rate-limited.json"
expect_json 0 kb generate gelu --compile-only --samples 1 --rounds 1 --json --skills "$SK"
[ "$(json_get "$out" "j['candidates'][0]['verdict']")" = compiled ] || fail "429: $out"
[ "$(events "$(run_dir "$out")" reply "e['attempts']")" = 2 ] || fail "429 attempts"
[ "$(requests)" = 2 ] || fail "429 requests: $(requests)"

# a 401 stops the run: no reply, nothing verified, the error in the summary
start_llm "$LLMFIX/unauthorized.json"
expect_json 1 kb generate gelu --compile-only --samples 1 --rounds 3 --json --skills "$SK"
[ "$(json_get "$out" "j['stop'], j['rounds_run'], j['llm_errors'], j['verified']")" = "llm 1 1 0" ] ||
    fail "401: $out"
contains "$(json_get "$out" "j['candidates'][0]['reason']")" "401"

# the token budget: no round starts past it
start_llm "$LLMFIX/rounds.json"
expect_json 1 kb generate gelu --compile-only --samples 1 --rounds 3 --budget-tokens 20 --json --skills "$SK"
[ "$(json_get "$out" "j['stop'], j['rounds_run'], j['requests']")" = "budget 1 1" ] || fail "budget: $out"

# Anthropic's API, with a key: it goes in x-api-key and nowhere else
start_llm "$LLMFIX/good.json" --key test-key-5f1c9
export KB_LLM_URL="http://127.0.0.1:$LLM_PORT/v1/messages" KB_LLM_API=anthropic
KB_LLM_API_KEY=test-key-5f1c9 expect_json 0 kb generate gelu --compile-only --samples 1 --rounds 1 --json --skills "$SK"
[ "$(json_get "$out" "j['candidates'][0]['verdict']")" = compiled ] || fail "anthropic: $out"
[ "$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['api'], json.loads(open(sys.argv[1]).readline())['key_ok'])" "$LLM_LOG")" = "anthropic True" ] ||
    fail "the request was not Anthropic's with the key: $(cat "$LLM_LOG")"
D=$(run_dir "$out")
[ "$(events "$D" run "e['api']")" = anthropic ] || fail "api in the run event"
! grep -r "test-key-5f1c9" "$KB_DIR/runs" >/dev/null || fail "the key is in a transcript"

# the README's recipe for the generator without a GPU or an LLM, its lines
# run as they stand but for the port (a free one) and the binary (this
# build's): three kernels through NVRTC, a summary that says what compile
# only means, no skill written, the server stopped
stop_llm
recipe=$(sed -n '/^<!-- t6100 runs this block as it stands -->$/,/^```$/p' "$KB_TOP/README.md" | sed '1,2d;$d')
[ "$(printf '%s\n' "$recipe" | wc -l)" = 3 ] || fail "the README's recipe is not three lines: $recipe"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
recipe=${recipe//8399/$port}
recipe=${recipe//build\/kb /$KB_BIN }
expect_json 0 env -u KB_LLM_URL -u KB_LLM_MODEL -u KB_LLM_API -u KB_LLM_API_KEY bash -c "$recipe"
contains "$out" "verdicts: 2 compiled, 1 compile_error"
contains "$out" "compile only: compiled 2 of 3 kernels; none ran, so none is known correct or faster"
lacks "$out" "best: none verified faster"
lacks "$out" "skill:"
python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2>/dev/null &&
    fail "the recipe left its LLM server running"

# a compile error's repair passages, cited, from a KB that has the docs
if [ -n "${KB_MIRROR:-}" ] && [ -f "$KB_MIRROR/MANIFEST.json" ]; then
    expect_rc 0 kb ingest --no-embed -q cuda-best-practices
    start_llm "$LLMFIX/rounds.json"
    expect_json 0 kb generate gelu --compile-only --samples 1 --rounds 2 --json --skills "$SK"
    fb=$(request_user 2)
    fb=${fb#*"### attempt r0s0 (round 1, sample 1): compile_error"}
    contains "$fb" "https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html#"
    contains "$(events "$(run_dir "$out")" round "e['ms']['retrieval'] > 0")" True
fi
