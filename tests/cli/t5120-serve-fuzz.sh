#!/usr/bin/env bash
# tier: ci
# kb serve's REST API fuzzed against its own OpenAPI document with
# schemathesis (tests/requirements.txt): schema-valid and schema-invalid
# requests on every operation, with and without the token, every check on
# (no 5xx, statuses and content types as documented, answers that conform
# to the result schemas, invalid input refused, 405 with Allow for other
# methods, the token enforced). Bounded: a fixed seed, a few examples per
# operation, a time limit. Strings hold no NUL (--generation-allow-x00
# false): kb's strings are C strings, so a body with \u0000 is refused
# with a 400 of its own (t5100), which the fuzzer would count as a valid
# request refused. Every warning is on but missing_test_data: the task and
# prompt endpoints answer the names it makes up with 404, no such task, as
# they must (t6000 calls them with real tasks).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve-lib.sh"
need_mirror
st="${KB_VENV:-}/bin/schemathesis"
[ -x "$st" ] || fail "no schemathesis in the test virtualenv (KB_VENV): run through make test"
use_kb small-skills   # ingest_small, then the skill library

printf 'fuzz-%s\n' "$RANDOM$RANDOM" >"$KB_TMP/token"
tok=$(head -n1 "$KB_TMP/token")
start_server --token-file "$KB_TMP/token" --threads 2 --skills "$KB_TOP/corpus/skills"
cd "$KB_TMP" || fail "cd"
# one refusal the schema cannot describe: budget_tokens' floor (1000) is
# the prompt tool's, and a large task's own definition and contract can
# take more (gemm_bf16's some 1,600 tokens), which is a 400 that names the
# size; the fuzzer finds real task names in the skill list's answers
cat >"$KB_TMP/schemathesis.toml" <<'TOML'
[[operations]]
include-path = "/v1/prompt"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "404"]
TOML
timeout 90 "$st" --config-file "$KB_TMP/schemathesis.toml" run "$URL/openapi.json" --checks all --max-examples 25 --seed 5100 \
    --generation-database none --generation-allow-x00 false --header "Authorization: Bearer $tok" \
    --warnings missing_auth,base_url_mismatch,validation_mismatch,missing_deserializer,unused_openapi_auth,unsupported_regex,method_not_allowed,constants_extraction,unmatched_filter,unresolvable_reference,low_valid_rate,rate_limited,dictionary_mismatch,timeout_units \
    --request-timeout 30 --no-color >"$KB_TMP/fuzz.out" 2>&1 ||
    fail "schemathesis found problems: $(tail -n 60 "$KB_TMP/fuzz.out")"
contains "$(cat "$KB_TMP/fuzz.out")" "No issues found"
tested=$(sed -n 's/^ *Tested: *\([0-9]*\).*/\1/p' "$KB_TMP/fuzz.out")
[ "$tested" = 10 ] || fail "schemathesis tested $tested operations, not 10: $(tail -n 30 "$KB_TMP/fuzz.out")"
cases=$(sed -n 's/^ *\([0-9]*\) generated.*/\1/p' "$KB_TMP/fuzz.out")
[ "${cases:-0}" -ge 50 ] || fail "only ${cases:-0} test cases"
# every request it made is in the access log; none was a 5xx; and the
# fuzzing reached the tools (answers and refusals both)
grep -qE ' 5[0-9][0-9] [0-9]+ [0-9.]+ms' "$KB_TMP/serve.err" && fail "a 5xx: $(grep -E ' 5[0-9][0-9] ' "$KB_TMP/serve.err" | head -3)"
for s in 200 400 401 405; do
    grep -qE " $s [0-9]+ [0-9.]+ms" "$KB_TMP/serve.err" || fail "no $s during fuzzing"
done
grep -q "$tok" "$KB_TMP/serve.err" && fail "the token was logged"
stop_server
[ "$stop_rc" -eq 0 ] || fail "exit $stop_rc"
echo ok
