#!/usr/bin/env bash
# tier: ci
# The level-2 suite without a GPU: at least 8 fusion tasks besides
# gemm_bf16, each with a target, an odd and a tiny shape, a roofline floor,
# exactly one optimised candidate, a reference and a candidate that NVRTC
# compiles (defining the kernels their launches name); a library baseline
# with an epilogue names its operands and kernels, and a bad one is an
# error that says what is wrong.
. "$(dirname "$0")/lib.sh"
kv="$KB_BUILD/kb-verify"
[ -x "$kv" ] || { echo "skipped: no kb-verify (no CUDA toolkit)"; exit 0; }
export KB_VERIFY_CACHE="$KB_TMP/cache"
cd "$KB_TOP"
suite="adamw rmsnorm_residual rotary gemv_int4 conv3x3 softmax_topk attention_causal gemm_bias_gelu"
n=0
for t in $suite; do
    d=corpus/tasks/$t
    [ -f "$d/task.json" ] && [ -f "$d/reference.cu" ] || fail "$t: no task.json or reference.cu"
    python3 - "$d/task.json" <<'P' || fail "$t: task.json"
import json, sys
t = json.load(open(sys.argv[1]))
assert t["level"] == 2, "level"
names = [s["name"] for s in t["shapes"]]
assert names[0] == "target" and "odd" in names and "tiny" in names, names
assert t["shapes"][0]["timed"], "target not timed"
assert t["roofline"]["floor_us_target"] > 0, "no floor"
assert t.get("cpu_ref", t["name"]) == t["name"]
P
    set -- "$d"/candidates/*.cu
    [ $# -eq 1 ] && [ -f "$1" ] || fail "$t: wanted one candidate, found $*"
    expect_json 0 "$kv" --compile-only --json "$d"
    contains "$out" '"verdict":"compiled"'
    contains "$out" "\"task\":\"$t\""
    expect_json 0 "$kv" --compile-only --json "$d" "$1"
    contains "$out" '"verdict":"compiled"'
    contains "$out" '"from":"candidate"'
    # an NVRTC with an empty ptxas log (13.0.88 on the H200 machine)
    # reports no per-kernel resources at compile time
    case $out in *'"log":""'*) ;; *) contains "$out" '"registers":' ;; esac
    lacks "$out" '"local_bytes":4'     # no spills to speak of
    n=$((n + 1))
done
[ "$n" -ge 8 ] || fail "level-2 suite: $n tasks"
# every level-2 task has an optimised candidate (gemm_bf16 included)
nl2=$(grep -l '"level": 2' corpus/tasks/*/task.json | wc -l)
[ "$nl2" -ge 9 ] || fail "expected >= 9 level-2 tasks, found $nl2"
# several kernels in the task's launch: the reference defines each
expect_json 0 "$kv" --compile-only --json corpus/tasks/attention_causal
for k in attn_scores attn_softmax attn_pv; do contains "$out" "\"name\":\"$k\""; done
# a baseline's epilogue must name a kernel of the task's launch
mkdir -p "$KB_TMP/bad"
cp corpus/tasks/gemm_bias_gelu/reference.cu "$KB_TMP/bad/"
sed 's/"then": \[/"then": ["no_such_kernel", /' corpus/tasks/gemm_bias_gelu/task.json >"$KB_TMP/bad/task.json"
expect_json 4 "$kv" --compile-only --json "$KB_TMP/bad"
contains "$out" '"verdict":"error"'
contains "$out" "names no kernel of the task's launch ('no_such_kernel')"
sed 's/"C": "acc"/"C": "nowhere"/' corpus/tasks/gemm_bias_gelu/task.json >"$KB_TMP/bad/task.json"
expect_json 4 "$kv" --compile-only --json "$KB_TMP/bad"
contains "$out" "the library baseline's C is no buffer of the task ('nowhere')"
# a task.json expression nested past the limit is a parse error, not a crash
python3 -c "
import json; t = json.load(open('corpus/tasks/gelu/task.json'))
t['launch']['grid'] = '(' * 200000 + 'N' + ')' * 200000
json.dump(t, open('$KB_TMP/bad/task.json', 'w'))"
cp corpus/tasks/gelu/reference.cu "$KB_TMP/bad/"
expect_json 4 "$kv" --compile-only --json "$KB_TMP/bad"
contains "$out" "nested too deeply (at most 64 levels)"
# so is a candidate's header, and a repeated key is refused, not overwritten
printf '// kb-launch: kernel=gelu grid=64,64 grid=8 block=256\nextern "C" __global__ void gelu(const float *x, float *y, int n) {}\n' >"$KB_TMP/twice.cu"
expect_json 1 "$kv" --compile-only --json corpus/tasks/gelu "$KB_TMP/twice.cu"
contains "$out" "kb-launch key 'grid' given twice"
echo ok
