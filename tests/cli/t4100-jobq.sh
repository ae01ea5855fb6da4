#!/usr/bin/env bash
# tier: ci
# The verification queue on both backends, a real SQLite file and a real
# redis-server on loopback, with compile-only jobs (no GPU): submitted
# candidates are jobs whose id is their hash (a second submission is the
# same job; once done, its result comes back without a worker); two
# workers drain the queue together and each job gets exactly one result,
# naming where it ran; kb verify --suite goes through the queue; a worker
# ends on SIGTERM; Redis killed and restarted keeps every result;
# KB_QUEUE=inproc verifies in process.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jobq-lib.sh"
start_redis
host=$(hostname)
for Q in "sqlite:$KB_TMP/q.sqlite" "redis://127.0.0.1:$REDIS_PORT/t4100"; do
    make_cands 4 gelu
    ids=()
    for c in "${CANDS[@]}"; do submit "$Q" gelu "$c"; ids+=("$id"); done
    [ "$(printf '%s\n' "${ids[@]}" | sort -u | wc -l)" -eq 4 ] || fail "$Q: 4 candidates, not 4 ids"
    # the same source under another path is the same job
    cp "${CANDS[0]}" "$KB_TMP/cands/again.cu"
    submit "$Q" gelu "$KB_TMP/cands/again.cu"
    [ "$id" = "${ids[0]}" ] || fail "$Q: a duplicate got another id"
    contains "$out" pending
    # another mode is another job
    out=$("$KB_BIN" verify --queue "$Q" --no-wait "$KB_TOP/corpus/tasks/gelu" "${CANDS[0]}")
    [ "${out%% *}" != "${ids[0]}" ] || fail "$Q: a full verification has the compile's id"
    j=$(queue_json "$Q")
    [ "$(json_get "$j" "(j['pending'], j['done'], j['dead'])")" = "(5, 0, 0)" ] ||
        fail "$Q: after 5 submissions: $j"
    # two workers drain the compile-only jobs together (the GPU job stays)
    start_worker "$KB_TMP/w1.log" --queue "$Q" --max-jobs 4 --lease 5; w1=$WPID
    start_worker "$KB_TMP/w2.log" --queue "$Q" --max-jobs 4 --lease 5; w2=$WPID
    for _ in $(seq 600); do
        [ "$(cat "$KB_TMP"/w[12].log | grep -c ' done ')" -ge 4 ] && break; sleep 0.02
    done
    kill -TERM "$w1" "$w2"
    wait "$w1" || fail "$Q: worker 1 did not end cleanly on SIGTERM: $(cat "$KB_TMP/w1.log")"
    wait "$w2" || fail "$Q: worker 2 did not end cleanly on SIGTERM: $(cat "$KB_TMP/w2.log")"
    logs=$(cat "$KB_TMP"/w[12].log)
    [ "$(grep -c ' done ' <<<"$logs")" -eq 4 ] || fail "$Q: 4 results wanted: $logs"
    lacks "$logs" "worker duplicate"
    [ "$(grep -c ' claim ' <<<"$logs")" -eq 4 ] || fail "$Q: a job claimed twice: $logs"
    j=$(queue_json "$Q")
    [ "$(json_get "$j" "(j['pending'], j['leased'], j['done'], j['dead'])")" = "(1, 0, 4, 0)" ] ||
        fail "$Q: after the workers: $j"
    # each result names its job, the candidate as submitted, the host
    j=$("$KB_BIN" verify queue --queue "$Q" --json "${ids[@]}")
    [ "$(json_get "$j" "sorted(set(x['state'] for x in j['jobs']))")" = "['done']" ] || fail "$Q: $j"
    [ "$(json_get "$j" "[x['result']['queue']['job'] == x['id'] for x in j['jobs']].count(True)")" = 4 ] ||
        fail "$Q: results not of their jobs: $j"
    [ "$(json_get "$j" "j['jobs'][1]['result']['candidate']")" = "${CANDS[1]}" ] || fail "$Q: $j"
    [ "$(json_get "$j" "j['jobs'][1]['result']['queue']['host']")" = "$host" ] || fail "$Q: $j"
    [ "$(json_get "$j" "j['jobs'][1]['result']['verdict']")" = compiled ] || fail "$Q: $j"
    # a done job's duplicate is answered at once, with no worker running
    submit "$Q" gelu "$KB_TMP/cands/again.cu"
    contains "$out" "${ids[0]} done"
    expect_json 0 "$KB_BIN" verify --queue "$Q" --compile-only --json "$KB_TOP/corpus/tasks/gelu" "$KB_TMP/cands/again.cu"
    [ "$(json_get "$out" "(j['verdict'], j['queue']['job'])")" = "('compiled', '${ids[0]}')" ] ||
        fail "$Q: the duplicate's result: $out"
    # kb verify --suite submits every candidate, then waits for each
    mkdir -p "$KB_TMP/suite"
    cp "$KB_TOP/corpus/tasks/softmax/reference.cu" "$KB_TMP/suite/softmax.cu"
    { echo "// suite"; cat "$KB_TOP/corpus/tasks/transpose/reference.cu"; } >"$KB_TMP/suite/transpose.cu"
    start_worker "$KB_TMP/w3.log" --queue "$Q" --compile-threads 2; w3=$WPID
    expect_rc 0 "$KB_BIN" verify --queue "$Q" --compile-only --suite "$KB_TOP/corpus/tasks" --candidates "$KB_TMP/suite"
    # the table's rows (its columns as wide as the longest task's name)
    grep -Eq '^softmax +compiled ' <<<"$out" || fail "$Q: suite: $out"
    grep -Eq '^transpose +compiled ' <<<"$out" || fail "$Q: suite: $out"
    kill -TERM "$w3"; wait "$w3" || fail "$Q: worker 3: $(cat "$KB_TMP/w3.log")"
    [ "$(grep -c ' done ' "$KB_TMP/w3.log")" -eq 2 ] || fail "$Q: suite: $(cat "$KB_TMP/w3.log")"
    rm -rf "$KB_TMP/cands" "$KB_TMP/suite"
done
# Redis killed (as a crash) and started again: every result is still there
Q="redis://127.0.0.1:$REDIS_PORT/t4100"
before=$(queue_json "$Q")
kill_redis
expect_rc 1 "$KB_BIN" verify queue --queue "$Q"
contains "$out" "cannot reach queue"
start_redis "$REDIS_PORT"
after=$(queue_json "$Q")
[ "$(json_get "$before" "j['done']")" = 6 ] || fail "before the restart: $before"
[ "$before" = "$after" ] || fail "Redis restarted: $before became $after"
j=$("$KB_BIN" verify queue --queue "$Q" --json "${ids[0]}")
[ "$(json_get "$j" "j['jobs'][0]['result']['verdict']")" = compiled ] || fail "after the restart: $j"
# KB_QUEUE=inproc is no queue: the candidate is verified here, not queued
KB_QUEUE=inproc expect_json 0 "$KB_BIN" verify --compile-only --json "$KB_TOP/corpus/tasks/gelu" "$KB_TOP/corpus/tasks/gelu/reference.cu"
[ "$(json_get "$out" "(j['verdict'], 'queue' in j)")" = "('compiled', False)" ] || fail "KB_QUEUE=inproc: $out"
KB_QUEUE=inproc expect_rc 2 "$KB_BIN" verify --no-wait --compile-only "$KB_TOP/corpus/tasks/gelu" "$KB_TOP/corpus/tasks/gelu/reference.cu"
contains "$out" "--no-wait is for one candidate, with a queue"
# a URL of no known kind is a usage error
expect_rc 2 "$KB_BIN" verify queue --queue "amqp://x"
contains "$out" "unknown queue"
echo ok
