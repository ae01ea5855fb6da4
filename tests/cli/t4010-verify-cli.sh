#!/usr/bin/env bash
# kb verify without a GPU: usage errors, the child process's wall-clock
# limit, a child that crashes or prints nothing, and fast_p over saved
# results (a fixture written from our own H200 run).
. "$(dirname "$0")/lib.sh"
cd "$KB_TOP"
expect_rc 2 kb verify
contains "$out" "need TASK and CANDIDATE.cu"
expect_rc 2 kb verify --suite corpus/tasks
contains "$out" "--candidates DIR or --results DIR"
expect_rc 2 kb verify --frob
expect_rc 1 kb verify no_such_task x.cu
contains "$out" "no task 'no_such_task'"
expect_rc 1 kb verify gelu /nonexistent.cu
contains "$out" "cannot open '/nonexistent.cu'"
expect_rc 0 kb verify --help
contains "$out" "--suite DIR"

# fake kb-verify children: one that hangs, one that crashes, one that answers
cat >"$KB_TMP/hang" <<'S'
#!/bin/sh
sleep 30
S
cat >"$KB_TMP/segv" <<'S'
#!/bin/sh
kill -SEGV $$
S
cat >"$KB_TMP/good" <<'S'
#!/bin/sh
echo '{"kb_verify":1,"task":"gelu","candidate":"c.cu","verdict":"faster","reason":"ok","speedup_geomean":1.5,"wall_ms":3}'
S
chmod +x "$KB_TMP/hang" "$KB_TMP/segv" "$KB_TMP/good"
c=corpus/tasks/gelu/candidates/vec4.cu
start=$(date +%s)
KB_VERIFY="$KB_TMP/hang" expect_rc 1 kb verify --timeout 1 --json gelu "$c"
contains "$out" '"verdict":"timeout"'
[ $(( $(date +%s) - start )) -lt 10 ] || fail "the wall-clock limit did not stop the child"
KB_VERIFY="$KB_TMP/segv" expect_rc 1 kb verify --json gelu "$c"
contains "$out" '"verdict":"crash"'
contains "$out" "signal 11"
KB_VERIFY="$KB_TMP/good" expect_rc 0 kb verify gelu "$c"
contains "$out" "gelu: faster"
KB_VERIFY=/nonexistent/kb-verify expect_rc 4 kb verify gelu "$c"
contains "$out" "cannot run '/nonexistent/kb-verify'"
# a --serve child that cannot start: the same message, and kb is not
# killed by the write to it
KB_VERIFY=/nonexistent/kb-verify expect_rc 4 kb verify --serve gelu "$c"
contains "$out" "cannot run '/nonexistent/kb-verify'"

# the suite against a fake child: every task gets its candidates run
KB_VERIFY="$KB_TMP/good" expect_rc 0 kb verify --suite corpus/tasks --candidates corpus/tasks --json
ncand=$(ls corpus/tasks/*/candidates/*.cu | wc -l)
contains "$out" "\"candidates\":$ncand,"
# --serve: one process for many candidates, restarted after a sticky error
mkdir -p "$KB_TMP/suite/a" "$KB_TMP/suite/b" "$KB_TMP/c/a"
echo '{}' >"$KB_TMP/suite/a/task.json"
echo '{}' >"$KB_TMP/suite/b/task.json"
: >"$KB_TMP/c/a.cu"; : >"$KB_TMP/c/a/sticky.cu"; : >"$KB_TMP/c/b.cu"
cat >"$KB_TMP/serve" <<S
#!/bin/sh
[ "\$1" = --serve ] || exit 9
echo start >>"$KB_TMP/starts"
while read -r line; do
    case "\$line" in
    *sticky*) echo '{"task":"a","verdict":"crash","reason":"boom","sticky_error":true}'; exit 3 ;;
    *suite/b*) echo '{"task":"b","verdict":"faster","speedup_geomean":2.5,"reason":"ok"}' ;;
    *) echo '{"task":"a","verdict":"correct","speedup_geomean":1.2,"reason":"ok"}' ;;
    esac
done
S
chmod +x "$KB_TMP/serve"
KB_VERIFY="$KB_TMP/serve" expect_rc 0 kb verify --suite "$KB_TMP/suite" --candidates "$KB_TMP/c" --serve --json
contains "$out" '"candidates":3,'
contains "$out" '"fast_p":{"0":1,"1":1,"1.5":0.5,"2":0.5}'
[ "$(wc -l <"$KB_TMP/starts")" -eq 2 ] || fail "kb-verify --serve was not restarted once after the sticky error"

# fast_p from saved results (our H200 run, trimmed to the fields scored)
expect_rc 0 kb verify --suite corpus/tasks --results tests/fixtures/verify --json
contains "$out" '"fast_p":{"0":1,"1":0.9,"1.5":0.7,"2":0.6}'
contains "$out" '"task":"scan","candidate":"corpus/tasks/scan/candidates/warp_scan.cu","verdict":"faster"'
expect_rc 0 kb verify --suite corpus/tasks --results tests/fixtures/verify
contains "$out" "fast_0 1.00  fast_1 0.90  fast_1.5 0.70  fast_2 0.60"
echo ok
