#!/usr/bin/env bash
# tier: ci
# kb-verify without a GPU: NVRTC compiles every task's reference and every
# committed candidate (optimised and adversarial); the refusals and the
# compile error get their verdicts; the JSON reports per-kernel resources;
# a launch kernel the candidate does not define is a compile error; the
# text shows NVRTC's log and each kernel's resources; --serve compiles
# only when a request asks; a task is found by name.
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
# an NVRTC that gives an empty ptxas log for --ptxas-options=-v (13.0.88 on
# the H200 machine) leaves no per-kernel resources to report at compile time
# ("kernels":[]): the resources are then checked only where it gives them
ptxas=1
case $("$kv" --compile-only --json corpus/tasks/gelu corpus/tasks/gelu/candidates/vec4.cu) in
    *'"log":""'*) ptxas=0; echo "note: NVRTC gave no ptxas log: resources not checked" ;;
esac
nopt=$(grep -c '^corpus/tasks/[^ ]* corpus/tasks/' "$jobs")
nadv=$(grep -c ' tests/verify/adversarial/' "$jobs")
[ "$nopt" -ge 10 ] && [ "$nadv" -ge 31 ] ||
    fail "expected >= 10 optimised and >= 31 adversarial candidates, got $nopt and $nadv"
# the references first (warms the cache), then the candidates, two at a time
for t in corpus/tasks/*/; do
    out=$("$kv" --compile-only --json "$t") || fail "reference of $t: $out"
    contains "$out" '"verdict":"compiled"'
    [ "$ptxas" -eq 0 ] || contains "$out" '"registers":'
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
# module-scope __device__ state is named in the result (a note, not a verdict)
out=$("$kv" --compile-only --json corpus/tasks/reduce_sum tests/verify/adversarial/memo_recent.cu)
contains "$out" '"state":{"device_variables":["memo_fp","memo_n","memo_seen",'
contains "$out" '"note":"module-scope __device__ variables persist across launches'
out=$("$kv" --compile-only --json corpus/tasks/gelu corpus/tasks/gelu/candidates/vec4.cu)
lacks "$out" '"state"'
# the GELU that hangs on the tiny shape (t4020's) compiles
out=$("$kv" --compile-only --json corpus/tasks/gelu tests/verify/hang_after_timed.cu)
contains "$out" '"verdict":"compiled"'
# --shapes names shapes of the task: one it lacks is an error, not a check
# of nothing (one-shot, --reference, a --serve request's "shapes")
expect_rc 4 "$kv" --compile-only --json --shapes odd,huge corpus/tasks/gelu corpus/tasks/gelu/candidates/vec4.cu
contains "$out" "'huge' in --shapes is no shape of task 'gelu' (its shapes: target, odd, tiny)"
expect_rc 4 "$kv" --reference --shapes '' corpus/tasks/gelu
contains "$out" "--shapes names no shape of task 'gelu'"
expect_rc 0 "$kv" --compile-only --json --shapes odd,tiny corpus/tasks/gelu corpus/tasks/gelu/candidates/vec4.cu
contains "$out" '"verdict":"compiled"'
out=$(printf '{"id":"s","task":"corpus/tasks/gelu","candidate":"corpus/tasks/gelu/candidates/vec4.cu","compile_only":true,"shapes":"tiny,small"}\n' | "$kv" --serve)
contains "$out" '"verdict":"error"'
contains "$out" "'small' in --shapes is no shape of task 'gelu'"
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
# a kernel the launch needs and the candidate does not define: a compile
# error naming it and the kernels found (the task's launch, an override's)
printf 'extern "C" __global__ void gelu_fast(const float *x, float *y, int n) {}\n' >"$KB_TMP/fast.cu"
expect_rc 1 "$kv" --compile-only --json corpus/tasks/gelu "$KB_TMP/fast.cu"
contains "$out" '"verdict":"compile_error"'
contains "$out" "the launch needs kernel 'gelu', which the candidate does not define (it defines 'gelu_fast')"
contains "$out" '"entries":["gelu_fast"]'
printf '// kb-launch: kernel=zero grid=1 block=256\n// kb-launch: kernel=hist grid=1 block=256\nextern "C" __global__ void hist(const unsigned *x, unsigned *b, int n) {}\nextern "C" __global__ void other(const unsigned *x, unsigned *b, int n) {}\n' >"$KB_TMP/hist.cu"
expect_rc 1 "$kv" --compile-only corpus/tasks/histogram "$KB_TMP/hist.cu"
contains "$out" "the launch needs kernel 'zero', which the candidate does not define (it defines '"
contains "$out" "'hist'"
contains "$out" "'other'"
# without extern "C" the name is mangled: said so
printf '__global__ void gelu(const float *x, float *y, int n) {}\n' >"$KB_TMP/mangled.cu"
expect_rc 1 "$kv" --compile-only corpus/tasks/gelu "$KB_TMP/mangled.cu"
contains "$out" "gelu: compile_error"
contains "$out" "'_Z4geluPKfPfi' is 'gelu' without extern \"C\" (C++ mangled its name)"
# the text: NVRTC's log on a compile error; registers, shared memory and
# spills of each kernel
expect_rc 1 "$kv" --compile-only corpus/tasks/gelu tests/verify/adversarial/compile_error.cu
contains "$out" "NVRTC's log:"
contains "$out" 'compile_error.cu(5): error: identifier "i" is undefined'
expect_rc 0 "$kv" --compile-only corpus/tasks/gelu corpus/tasks/gelu/candidates/vec4.cu
if [ "$ptxas" -eq 1 ]; then
    contains "$out" "kernel gelu_vec4: "
    contains "$out" " registers, 0 B static shared memory, "
    contains "$out" ", no spills"
fi
# --serve: compile only, per request
printf '{"id":"a","task":"corpus/tasks/gelu","candidate":"corpus/tasks/gelu/candidates/vec4.cu","compile_only":true}\n{"id":"b","task":"corpus/tasks/gelu","candidate":"%s","compile_only":true}\n' "$KB_TMP/fast.cu" |
    "$kv" --serve >"$KB_TMP/serve.out" || fail "kb-verify --serve exited $?"
[ "$(wc -l <"$KB_TMP/serve.out")" -eq 2 ] || fail "two requests, not two answers: $(cat "$KB_TMP/serve.out")"
out=$(sed -n 1p "$KB_TMP/serve.out")
contains "$out" '"verdict":"compiled"'
contains "$out" '"id":"a"'
out=$(sed -n 2p "$KB_TMP/serve.out")
contains "$out" '"verdict":"compile_error"'
contains "$out" '"id":"b"'
# a task by name: under corpus/tasks here; from another folder the tasks
# beside the executable (<exe>/../corpus/tasks); a lone copy of kb-verify,
# with no tasks beside it, run elsewhere says where it looked
expect_rc 0 "$kv" --compile-only --json gelu corpus/tasks/gelu/candidates/vec4.cu
contains "$out" '"task":"gelu"'
out=$(cd "$KB_TMP" && "$kv" --compile-only gelu "$KB_TOP/corpus/tasks/gelu/candidates/vec4.cu" 2>&1)
contains "$out" "gelu: compiled"
mkdir -p "$KB_TMP/lone/bin" && cp "$kv" "$KB_TMP/lone/bin/kb-verify"
out=$(cd "$KB_TMP" && "$KB_TMP/lone/bin/kb-verify" --compile-only gelu "$KB_TOP/corpus/tasks/gelu/candidates/vec4.cu" 2>&1)
contains "$out" "gelu: error"
contains "$out" "no task 'gelu' (a directory with task.json): looked in 'gelu', 'corpus/tasks/gelu'"
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
