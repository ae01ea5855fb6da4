#!/usr/bin/env bash
# The GPU run behind BENCHMARKS.md's "GPU verification" numbers, for the
# device machine: device info, every reference against the CPU float64
# implementation, every optimised candidate (one-shot processes, then one
# --serve process), and the adversarial set. Results go to $OUT (JSON lines).
# Exits non-zero when any step failed (each is named on stderr), after
# running them all.
#   tests/verify/device-run.sh [OUTDIR]
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/verify/lib.sh"
cd "$top"
kv=${KB_VERIFY:-$top/build/kb-verify}
out=${1:-${OUT:-/tmp/kb-verify-run}}
mkdir -p "$out"
export LD_LIBRARY_PATH="$top/.vrt:${CUDA_HOME:-/usr/local/cuda}/lib64:${LD_LIBRARY_PATH:-}"
export KB_VERIFY_CACHE=/tmp/kb-verify-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$out/nvidia-smi.txt" 2>&1
need_device "$kv" "$out/device.json"
cat "$out/device.json"; echo
echo "== references vs CPU float64"
for t in corpus/tasks/*/; do
    r=$(timeout 300 "$kv" --reference --json "$t") || step_failed "reference $t"
    printf '%s\n' "$r" >>"$out/references.jsonl"
    printf '%s\n' "$r" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%-12s %-10s %s" % (r["task"], r["verdict"], r["reason"][:110]))' ||
        step_failed "reference $t: no result"
done
echo "== optimised candidates, one process each"
for c in corpus/tasks/*/candidates/*.cu; do
    t=${c%/candidates/*}
    t0=$(date +%s%N)
    r=$(timeout 120 "$kv" --json "$t" "$c") || step_failed "candidate $c"
    t1=$(date +%s%N)
    printf '%s\n' "$r" | python3 -c "import json,sys; r=json.load(sys.stdin); r['file']='$c'; r['process_ms']=$(( (t1 - t0) / 1000000 )); print(json.dumps(r))" >>"$out/candidates.jsonl" ||
        step_failed "candidate $c: no result"
done
python3 - "$out/candidates.jsonl" <<'P'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    t = (r.get("timings") or [{}])[0]
    c = t.get("candidate_ms", {}).get("median", 0); b = t.get("baseline_ms", {}).get("median", 0)
    print("%-11s %-10s cand %8.4f ms  base %8.4f ms  floor %8.4f  x%6.2f  wall %6.0f ms  proc %5d ms  %s" % (
        r["task"], r["verdict"], c, b, t.get("floor_ms", 0), r.get("speedup_geomean", 0),
        r.get("wall_ms", 0), r.get("process_ms", 0), r["reason"][:80]))
P
[ $? -eq 0 ] || step_failed "candidates: results unreadable"
echo "== the same candidates through one --serve process"
for c in corpus/tasks/*/candidates/*.cu; do
    printf '{"id":"%s","task":"%s","candidate":"%s"}\n' "$c" "${c%/candidates/*}" "$c"
done >"$out/serve-requests.jsonl"
t0=$(date +%s%N)
timeout 300 "$kv" --serve <"$out/serve-requests.jsonl" >"$out/serve.jsonl" || step_failed "serve"
t1=$(date +%s%N)
echo "serve: $(wc -l <"$out/serve.jsonl") results in $(( (t1 - t0) / 1000000 )) ms"
python3 -c "
import json,sys
for l in open('$out/serve.jsonl'):
    r=json.loads(l); print('%-11s %-10s x%6.2f wall %6.0f ms' % (r['task'], r['verdict'], r.get('speedup_geomean',0), r.get('wall_ms',0)))" ||
    step_failed "serve: results unreadable"
echo "== adversarial set"
tests/verify/run-adversarial.sh "$out/adversarial.jsonl" || step_failed "adversarial set"
echo "== the GPU CLI tests"
KB_BIN=/bin/true KB_BUILD="$top/build" KB_TOP="$top" bash tests/cli/t4020-verify-gpu.sh
rc=$?
echo "t4020 rc=$rc"
[ "$rc" -eq 0 ] || step_failed t4020
if [ -n "${KB_TORCH_COMPARE:-}" ]; then
    echo "== PyTorch load_inline comparison"
    PYTHONUNBUFFERED=1 timeout 400 python3 tests/verify/torch_compare.py "$out/torch.jsonl" 2>&1 | grep -v Warning
    [ "${PIPESTATUS[0]}" -eq 0 ] || step_failed "torch comparison"
fi
finish device-run
