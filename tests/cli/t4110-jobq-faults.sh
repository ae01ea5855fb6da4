#!/usr/bin/env bash
# tier: ci
# The queue's faults on both backends (SQLite, a real redis-server), with
# compile-only jobs: a worker killed with SIGKILL in the middle of a job,
# N times over N jobs; each of those jobs is reclaimed once its lease
# expires and finished by another worker: N results, 0 lost, 0 twice. A
# poisoned job (its kb-verify never answers within the limit and is
# killed) is tried max-deliveries times and then goes to the dead letter
# with its reason; the worker that ran it goes on to the next job, and a
# submitter waiting on it gets an error result with the reason. A killed
# worker's folder in /tmp is removed by the next worker to start.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jobq-lib.sh"
start_redis
N=3
for Q in "sqlite:$KB_TMP/q.sqlite" "redis://127.0.0.1:$REDIS_PORT/t4110"; do
    make_cands $N softmax
    ids=()
    for c in "${CANDS[@]}"; do submit "$Q" softmax "$c"; ids+=("$id"); done
    # N workers, each killed (-9) as soon as it has claimed a job
    killed_pids=()
    for k in $(seq $N); do
        start_worker "$KB_TMP/k$k.log" --queue "$Q" --lease 2 --max-deliveries 5
        wait_for "$KB_TMP/k$k.log" ' claim '
        kill -9 "$WPID"; wait "$WPID" 2>/dev/null
        killed_pids+=("$WPID")
        ls -d /tmp/.kb-worker.tmp."$WPID".* >/dev/null 2>&1 || fail "no folder of worker $WPID's in /tmp"
    done
    killed=$(cat "$KB_TMP"/k*.log)
    [ "$(grep -c ' claim ' <<<"$killed")" -eq $N ] || fail "$Q: $killed"
    lacks "$killed" ' done '
    # one more worker: the killed workers' jobs come back past their lease
    expect_rc 0 "$KB_BIN" verify worker --queue "$Q" --lease 2 --max-deliveries 5 --drain
    survivor=$out
    # the next worker removed the killed workers' folders (their pids are gone)
    for p in "${killed_pids[@]}"; do
        ! ls -d /tmp/.kb-worker.tmp."$p".* 2>/dev/null || fail "worker $p's folder is left in /tmp"
    done
    [ "$(grep -c ' done ' <<<"$survivor")" -eq $N ] || fail "$Q: $N results wanted: $survivor"
    lacks "$survivor" 'worker duplicate'
    j=$("$KB_BIN" verify queue --queue "$Q" --json "${ids[@]}")
    got=$(json_get "$j" "(sorted(x['state'] for x in j['jobs']), sum(x['result']['queue']['deliveries'] > 1 for x in j['jobs']), len(set(x['result']['queue']['job'] for x in j['jobs'])))")
    [ "$got" = "(['done', 'done', 'done'], $N, $N)" ] ||
        fail "$Q: after $N kills: $got (states, jobs delivered again, distinct results)"
    c=$(queue_json "$Q")
    [ "$(json_get "$c" "(j['pending'], j['leased'], j['done'], j['dead'])")" = "(0, 0, $N, 0)" ] ||
        fail "$Q: $N kills, $N jobs: $c"
    echo "$Q: $N kills, $N jobs, 0 lost, 0 duplicated"
    # a poisoned job: killed at its 1 s limit, twice, then dead; the
    # worker goes on to a good job after it
    submit "$Q" gelu "$KB_TOP/tests/verify/queue/hang.cu" --timeout 1
    poison=$id
    make_cands 1 gelu
    submit "$Q" gelu "${CANDS[0]}"
    good=$id
    expect_rc 0 "$KB_BIN" verify worker --queue "$Q" --max-deliveries 2 --drain
    w=$out
    [ "$(grep -c "retry ${poison:0:16}" <<<"$w")" -eq 1 ] || fail "$Q: one retry wanted: $w"
    contains "$w" "dead ${poison:0:16} gelu: no result within 1 s: kb-verify was killed"
    contains "$w" "done ${good:0:16} gelu: compiled"
    c=$(queue_json "$Q")
    [ "$(json_get "$c" "(j['dead'], j['dead_letter'][0]['id'], j['dead_letter'][0]['deliveries'], j['dead_letter'][0]['task'])")" = "(1, '$poison', 2, 'gelu')" ] ||
        fail "$Q: the dead letter: $c"
    contains "$(json_get "$c" "j['dead_letter'][0]['reason']")" "no result within 1 s"
    # a submitter waiting on it gets an error that says why
    expect_rc 4 "$KB_BIN" verify --queue "$Q" --compile-only --timeout 1 "$KB_TOP/corpus/tasks/gelu" "$KB_TOP/tests/verify/queue/hang.cu"
    contains "$out" "no result within 1 s"
    rm -rf "$KB_TMP/cands" "$KB_TMP"/k*.log*
done
# a result that cannot be recorded (Redis down when kb-verify answers) is
# kept and recorded once Redis is back: one claim, one delivery, one result
Q="redis://127.0.0.1:$REDIS_PORT/t4110-down"
make_cands 1 gelu
submit "$Q" gelu "${CANDS[0]}"
printf '#!/bin/sh\nwhile [ ! -e "%s" ]; do sleep 0.05; done\nexec "%s" "$@"\n' \
    "$KB_TMP/go" "$KB_BUILD/kb-verify" >"$KB_TMP/held-kb-verify"
chmod +x "$KB_TMP/held-kb-verify"
KB_VERIFY="$KB_TMP/held-kb-verify" start_worker "$KB_TMP/down.log" --queue "$Q"
wait_for "$KB_TMP/down.log" ' claim '
kill_redis
touch "$KB_TMP/go"
wait_for "$KB_TMP/down.log" 'cannot record a result.*(trying again)'
start_redis "$REDIS_PORT"
wait_for "$KB_TMP/down.log" ' done '
kill -TERM "$WPID"; wait "$WPID" || fail "the worker on SIGTERM: $(cat "$KB_TMP/down.log")"
[ "$(grep -c ' claim ' "$KB_TMP/down.log")" -eq 1 ] || fail "claimed again: $(cat "$KB_TMP/down.log")"
j=$("$KB_BIN" verify queue --queue "$Q" --json "$id")
[ "$(json_get "$j" "(j['jobs'][0]['state'], j['jobs'][0]['result']['verdict'], j['jobs'][0]['result']['queue']['deliveries'])")" = "('done', 'compiled', 1)" ] ||
    fail "the result kept while Redis was down: $j"
echo ok
