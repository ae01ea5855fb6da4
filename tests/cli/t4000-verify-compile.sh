#!/usr/bin/env bash
# kb-verify without a GPU: NVRTC compiles every task's reference and every
# committed candidate (optimised and adversarial); the refusals and the
# compile error get their verdicts; the JSON reports per-kernel resources.
. "$(dirname "$0")/lib.sh"
kv="$KB_BUILD/kb-verify"
[ -x "$kv" ] || { echo "skipped: no kb-verify (no CUDA toolkit)"; exit 0; }
export KB_VERIFY_CACHE="$KB_TMP/cache"
cd "$KB_TOP"
jobs=$KB_TMP/jobs
: >"$jobs"
for c in corpus/tasks/*/candidates/*.cu; do
    echo "${c%/candidates/*} $c compiled" >>"$jobs"
done
for c in tests/verify/adversarial/*.cu; do
    read -r _ _ task want < <(grep -m1 '^// expect:' "$c")
    case $want in refused|compile_error) ;; *) want=compiled ;; esac
    echo "corpus/tasks/$task $c $want" >>"$jobs"
done
nopt=$(grep -c '^corpus/tasks/[^ ]* corpus/tasks/' "$jobs")
nadv=$(grep -c ' tests/verify/adversarial/' "$jobs")
[ "$nopt" -ge 10 ] && [ "$nadv" -ge 20 ] ||
    fail "expected >= 10 optimised and >= 20 adversarial candidates, got $nopt and $nadv"
# the references first (warms the cache), then the candidates, two at a time
for t in corpus/tasks/*/; do
    out=$("$kv" --compile-only --json "$t") || fail "reference of $t: $out"
    contains "$out" '"verdict":"compiled"'
    contains "$out" '"registers":'
done
xargs -P 2 -L 1 sh -c '
    out=$("$0" --compile-only --json "$1" "$2")
    case "$out" in *"\"verdict\":\"$3\""*) ;; *) echo "FAIL: $2: wanted $3: $out" >&2; exit 255 ;; esac
' "$kv" <"$jobs" || fail "a candidate did not get its compile verdict"
# a compile error carries NVRTC's log; a refusal says why
out=$("$kv" --compile-only --json corpus/tasks/gelu tests/verify/adversarial/compile_error.cu)
contains "$out" '"verdict":"compile_error"'
contains "$out" '"log":"'
out=$("$kv" --compile-only corpus/tasks/gelu tests/verify/adversarial/globaltimer.cu)
contains "$out" "refused"
contains "$out" "globaltimer"
# the launch is reported as written, dynamic shared memory included
out=$("$kv" --compile-only --json corpus/tasks/gemm_bf16 corpus/tasks/gemm_bf16/candidates/tma_persistent.cu)
contains "$out" '"launches":[{"kernel":"gemm_tma","from":"candidate","grid":["min(132,ceil_div(M,128)*ceil_div(N,256))"],"block":["384"],"shared_dynamic":"230400"}]'
# a tensor map must name one of the task's buffers
printf '// kb-tensormap: buffer=Q dims=K box=64\nextern "C" __global__ void gemm_bf16() {}\n' >"$KB_TMP/map.cu"
out=$("$kv" --compile-only --json corpus/tasks/gemm_bf16 "$KB_TMP/map.cu")
contains "$out" '"verdict":"refused"'
contains "$out" "kb-tensormap: the task has no buffer 'Q'"
printf '// kb-tensormap: buffer=A dims=K box=64 swizzle=7\n' >"$KB_TMP/map.cu"
out=$("$kv" --compile-only --json corpus/tasks/gemm_bf16 "$KB_TMP/map.cu")
contains "$out" "swizzle must be"
# bad arguments and tasks
expect_rc 2 "$kv"
expect_rc 2 "$kv" --frob
expect_rc 4 "$kv" --compile-only --json /nonexistent/task
contains "$out" "cannot open '/nonexistent/task/task.json'"
echo '{"name":"t","dtype":"f32"}' >"$KB_TMP/task.json"
out=$("$kv" --compile-only --json "$KB_TMP" 2>&1)
contains "$out" '"verdict":"error"'
contains "$out" "params"
echo "ok"
