#!/usr/bin/env bash
# tier: ci
# kb verify without a GPU: usage errors, the child process's wall-clock
# limit, a child that crashes or prints nothing, fast_p over saved results
# (a fixture written from our own H200 run), a suite whose every candidate
# ended in error, task names found beside the manifest and in an installed
# share directory, the text of a result, --compile-only one-shot and
# through --serve.
. "$(dirname "$0")/lib.sh"
cd "$KB_TOP"
expect_rc 2 kb verify
contains "$out" "need TASK and CANDIDATE.cu"
expect_rc 2 kb verify --suite corpus/tasks
contains "$out" "--candidates DIR or --results DIR"
expect_rc 2 kb verify --frob
expect_rc 1 kb verify no_such_task x.cu
contains "$out" "no task 'no_such_task' (a directory with task.json): looked in 'no_such_task', '$KB_TOP/corpus/tasks/no_such_task'"
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

# --compile-only: nothing ran, so fast_p is not known (n/a; null in JSON),
# and the text says how many compiled; --no-timing: fast_0 alone is known.
# The columns stay aligned past a long task name.
mkdir -p "$KB_TMP/suite/a_task_named_at_length"
echo '{}' >"$KB_TMP/suite/a_task_named_at_length/task.json"
: >"$KB_TMP/c/a_task_named_at_length.cu"
cat >"$KB_TMP/verdict" <<'S'
#!/bin/sh
echo "{\"task\":\"a\",\"verdict\":\"$VERDICT\",\"reason\":\"ok\"}"
S
chmod +x "$KB_TMP/verdict"
VERDICT=compiled KB_VERIFY="$KB_TMP/verdict" expect_json 0 kb verify --suite "$KB_TMP/suite" --candidates "$KB_TMP/c" --compile-only
contains "$out" "fast_0 n/a  fast_1 n/a  fast_1.5 n/a  fast_2 n/a  (3 tasks, 4 candidates)"
contains "$out" "compile-only: compiled 4 of 4 candidates; nothing ran, so fast_p is not known"
printf '%s\n' "$out" | awk '/^(task|a|b|a_task_named_at_length) / { n++; if (index($0, $2) != 24) bad = 1 }
                             END { exit !(n == 4 && !bad) }' || fail "the suite's table is not aligned: $out"
VERDICT=compiled KB_VERIFY="$KB_TMP/verdict" expect_json 0 kb verify --suite "$KB_TMP/suite" --candidates "$KB_TMP/c" --compile-only --json
contains "$out" '"fast_p":{"0":null,"1":null,"1.5":null,"2":null}'
VERDICT=compiled KB_VERIFY="$KB_TMP/verdict" expect_rc 0 kb verify --suite "$KB_TMP/suite" --candidates "$KB_TMP/c" --compile-only
printf '%s\n' "$out" | awk '/^[a-z_]+ +compiled / { n++; if (index($0, "compiled") != 24) bad = 1 }
                             END { exit !(n == 7 && !bad) }' || fail "the progress lines are not aligned: $out"
VERDICT=correct KB_VERIFY="$KB_TMP/verdict" expect_json 0 kb verify --suite "$KB_TMP/suite" --candidates "$KB_TMP/c" --no-timing --json
contains "$out" '"fast_p":{"0":1,"1":null,"1.5":null,"2":null}'
rm -r "$KB_TMP/suite/a_task_named_at_length" "$KB_TMP/c/a_task_named_at_length.cu"

# fast_p from saved results (our H200 runs, trimmed to the fields scored:
# the 10 level-1 and gemm tasks, the 8 of the level-2 suite, gemm_bias_relu
# of 2026-12-01): 19 tasks, 19 correct, 18 faster than 1x, 15 than 1.5x, 14
# than 2x
expect_json 0 kb verify --suite corpus/tasks --results tests/fixtures/verify --json
[ "$(json_get "$out" "{k: round(v, 3) for k, v in j['fast_p'].items()}")" = "{'0': 1, '1': 0.947, '1.5': 0.789, '2': 0.737}" ] ||
    fail "fast_p: $out"
contains "$out" '"task":"attention_causal","candidate":"corpus/tasks/attention_causal/candidates/flash_mma.cu","verdict":"faster"'
contains "$out" '"task":"scan","candidate":"corpus/tasks/scan/candidates/warp_scan.cu","verdict":"faster"'
expect_rc 0 kb verify --suite corpus/tasks --results tests/fixtures/verify
contains "$out" "fast_0 1.00  fast_1 0.95  fast_1.5 0.79  fast_2 0.74"

# every candidate ended in error (no GPU, say): the table, then exit 4
# with the reason
cat >"$KB_TMP/nogpu" <<'S'
#!/bin/sh
r='{"kb_verify":1,"task":"gelu","candidate":"c.cu","verdict":"error","reason":"no GPU: no CUDA driver (libcuda.so.1 not found)"}'
if [ "$1" = --serve ]; then
    while read -r line; do echo "$r"; done
else
    echo "$r"
fi
S
chmod +x "$KB_TMP/nogpu"
KB_VERIFY="$KB_TMP/nogpu" expect_rc 4 kb verify --suite corpus/tasks --candidates corpus/tasks
contains "$out" "fast_0 0.00"
contains "$out" "kb verify: all $ncand candidates ended in 'error' (no verdict on any kernel): no GPU: no CUDA driver"
KB_VERIFY="$KB_TMP/nogpu" expect_rc 4 kb verify --suite "$KB_TMP/suite" --candidates "$KB_TMP/c" --serve --json
contains "$out" '"verdict":"error"'
contains "$out" "kb verify: all 3 candidates ended in 'error'"
# one that did not end in error is enough for a score
cat >"$KB_TMP/mixed" <<S
#!/bin/sh
case "\$*" in
*suite/b*) echo '{"task":"b","verdict":"incorrect","reason":"wrong"}' ;;
*) echo '{"task":"a","verdict":"error","reason":"no GPU"}' ;;
esac
S
chmod +x "$KB_TMP/mixed"
KB_VERIFY="$KB_TMP/mixed" expect_rc 0 kb verify --suite "$KB_TMP/suite" --candidates "$KB_TMP/c"
lacks "$out" "ended in 'error'"
# no candidates, no results: said, not scored as zero
mkdir -p "$KB_TMP/empty"
KB_VERIFY="$KB_TMP/good" expect_rc 1 kb verify --suite corpus/tasks --candidates "$KB_TMP/empty"
contains "$out" "kb verify: no candidates in '$KB_TMP/empty'"
expect_rc 1 kb verify --suite corpus/tasks --results "$KB_TMP/empty"
contains "$out" "kb verify: no results of the suite's tasks in '$KB_TMP/empty'"

# a task by name from elsewhere: beside KB_MANIFEST, then in the share
# directory beside an installed kb (PREFIX/bin/kb, PREFIX/share/kb/tasks)
mkdir -p "$KB_TMP/away"
out=$(cd "$KB_TMP/away" && KB_VERIFY="$KB_TMP/good" KB_MANIFEST="$KB_TOP/corpus/sources.json" \
      "$KB_BIN" verify gelu "$KB_TOP/$c" 2>&1) || fail "by name beside KB_MANIFEST: $out"
contains "$out" "gelu: faster"
mkdir -p "$KB_TMP/p/bin" "$KB_TMP/p/share/kb"
cp "$KB_BIN" "$KB_TMP/p/bin/kb"
cp -R corpus/tasks corpus/sources.json "$KB_TMP/p/share/kb/"
out=$(cd "$KB_TMP/away" && KB_VERIFY="$KB_TMP/good" "$KB_TMP/p/bin/kb" verify gelu "$KB_TOP/$c" 2>&1) ||
    fail "by name from the installed share directory: $out"
contains "$out" "gelu: faster"
out=$(cd "$KB_TMP/away" && KB_VERIFY="$KB_TMP/good" "$KB_TMP/p/bin/kb" verify no_such "$KB_TOP/$c" 2>&1) &&
    fail "found a task that is not there: $out"
contains "$out" "no task 'no_such' (a directory with task.json): looked in 'no_such', '$KB_TMP/p/share/kb/tasks/no_such', 'corpus/tasks/no_such'"

# the text of a result: NVRTC's log when it did not compile, each
# kernel's resources, parity with a library baseline
cat >"$KB_TMP/text" <<'S'
#!/bin/sh
case "$*" in
*bad.cu*) printf '%s\n' '{"task":"gelu","verdict":"compile_error","reason":"NVRTC could not compile the candidate","compile":{"ok":false,"log":"bad.cu(3): error: identifier \"q\" is undefined\n\n1 error detected\n","kernels":[]}}' ;;
*) printf '%s\n' '{"task":"gemm_bf16","verdict":"correct","reason":"correct on every check","compile":{"ok":true,"log":"ptxas info : Used 168 registers\nc.cu(9): warning #177-D: variable \"z\" was declared but never referenced\n","kernels":[{"name":"gemm_tma","registers":168,"shared_static_bytes":0,"local_bytes":0,"stack_bytes":0,"spill_store_bytes":8,"spill_load_bytes":4,"max_threads_per_block":384}]},"timings":[{"shape":"target","baseline":"cublas_bf16","candidate_ms":{"median":0.1828},"baseline_ms":{"median":0.18},"floor_ms":0.1284,"speedup":0.985}],"speedup_geomean":0.985,"matches_library":true,"library_ratio":0.985,"wall_ms":900}' ;;
esac
S
chmod +x "$KB_TMP/text"
: >"$KB_TMP/bad.cu"
KB_VERIFY="$KB_TMP/text" expect_rc 1 kb verify gelu "$KB_TMP/bad.cu"
contains "$out" "gelu: compile_error"
contains "$out" "NVRTC's log:"
contains "$out" '    bad.cu(3): error: identifier "q" is undefined'
KB_VERIFY="$KB_TMP/text" expect_rc 0 kb verify gemm_bf16 "$c"
contains "$out" 'NVRTC: c.cu(9): warning #177-D'
lacks "$out" "ptxas info"
contains "$out" "kernel gemm_tma: 168 registers, 0 B static shared memory, 0 B local memory, 0 B stack, 384 threads a block at most, spills: 8 B stored, 4 B loaded"
contains "$out" "target: candidate 0.1828 ms, cublas_bf16 0.1800 ms, roofline floor 0.1284 ms, speedup 0.98x"
contains "$out" "matches the library: 0.985x (parity is within 3% either way)"

# --compile-only with the real kb-verify (no GPU needed), one-shot and
# through --serve: a missing launch kernel is a compile error
if [ -x "$KB_BUILD/kb-verify" ]; then
    export KB_VERIFY="$KB_BUILD/kb-verify" KB_VERIFY_CACHE="$KB_TMP/cache"
    printf 'extern "C" __global__ void gelu_fast(const float *x, float *y, int n) {}\n' >"$KB_TMP/fast.cu"
    expect_rc 1 kb verify --compile-only gelu "$KB_TMP/fast.cu"
    contains "$out" "gelu: compile_error"
    contains "$out" "the launch needs kernel 'gelu', which the candidate does not define (it defines 'gelu_fast')"
    expect_rc 0 kb verify --compile-only --serve gelu "$c"
    contains "$out" "gelu: compiled"
    contains "$out" "kernel gelu_vec4: "
    expect_json 0 kb verify --compile-only --suite corpus/tasks --candidates corpus/tasks --serve --json
    # every candidate run, each task's best reported (t4000 compiles each one)
    [ "$(json_get "$out" '(j["candidates"], len(j["tasks"]), all(t["verdict"] == "compiled" for t in j["tasks"]))')" = \
      "($ncand, $(ls -d corpus/tasks/*/ | wc -l), True)" ] ||
        fail "not every candidate compiled through --serve: $out"
    unset KB_VERIFY
fi
echo ok
