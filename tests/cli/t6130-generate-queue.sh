#!/usr/bin/env bash
# tier: ci
# kb generate through the verification queue (KB_QUEUE, a SQLite queue
# here, served by a kb verify worker with two compile-only slots): with
# --workers 2 each round's samples are submitted as their replies come and
# are in flight together; each round's verdicts are the same as in process
# (as a set: the scripted server gives its replies in the order requests
# arrive, and two samples in flight may ask in either order), and each came
# back from the worker (its result names the queue's job).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gen-lib.sh"
need_kb_verify
cd "$KB_TOP"
SK="$KB_TMP/skills"
export KB_VERIFY_CACHE="$KB_TMP/cache"
# in process, for the verdicts to compare with
start_llm "$FIX/population.json"
expect_json 0 kb generate gelu --compile-only --strategy population --samples 2 --rounds 2 --json --skills "$SK"
by_round="[sorted(c['verdict'] for c in j['candidates'] if c['round'] == r) for r in (0, 1)]"
want=$(json_get "$out" "$by_round")
# through the queue
export KB_QUEUE="sqlite:$KB_TMP/q.sqlite"
"$KB_BIN" verify worker --compile-threads 2 >"$KB_TMP/w.out" 2>"$KB_TMP/w.log" &
W=$!
trap 'kill -9 "$W" 2>/dev/null; [ -n "$LLM_PID" ] && kill "$LLM_PID" 2>/dev/null; rm -rf "$KB_TMP"' EXIT
start_llm "$FIX/population.json"
expect_json 0 kb generate gelu --compile-only --strategy population --samples 2 --rounds 2 --workers 2 --json --skills "$SK"
S=$out
[ "$(json_get "$S" "$by_round")" = "$want" ] ||
    fail "through the queue: $S (in process: $want)"
[ "$(json_get "$S" "j['strategy'], j['requests']")" = "population 4" ] || fail "$S"
D=$(run_dir "$S")
jobs=$(events "$D" verdict "e['result']['queue']['job']" | sort -u | wc -l)
[ "$jobs" -ge 2 ] || fail "the verdicts did not come from the queue: $(events "$D" verdict "e['result'].get('queue')")"
kill -TERM "$W"; wait "$W" || fail "the worker: $(cat "$KB_TMP/w.log")"
[ "$(grep -c ' done ' "$KB_TMP/w.log")" -eq "$jobs" ] || fail "worker: $(cat "$KB_TMP/w.log")"
expect_rc 2 kb generate gelu --workers 0
echo ok
