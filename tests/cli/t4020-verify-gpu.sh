#!/usr/bin/env bash
# tier: ci
# On a GPU: every reference matches its CPU float64 implementation, and
# every committed optimised candidate verifies (faster than its baseline;
# gemm_bf16, which ties cuBLAS, correct with parity: within 3% of the
# library); the timing's evidence fields (input sets, the ratio's interval,
# the spread across processes, the driver's version); a timeout after the
# timed shape has no speedup. Prints "skipped: no GPU" elsewhere.
. "$(dirname "$0")/lib.sh"
kv="$KB_BUILD/kb-verify"
[ -x "$kv" ] || { echo "skipped: no kb-verify (no CUDA toolkit)"; exit 0; }
"$kv" --device-info --json >/dev/null 2>&1 || { echo "skipped: no GPU"; exit 0; }
cd "$KB_TOP"
for t in corpus/tasks/*/; do
    out=$(timeout 300 "$kv" --reference "$t") || fail "reference of $t: $out"
    contains "$out" "matches the CPU float64"
done
for c in corpus/tasks/*/candidates/*.cu; do
    t=${c%/candidates/*}
    out=$(timeout 120 "$kv" "$t" "$c")
    case $t in
        */gemm_bf16)
            contains "$out" ": correct"
            contains "$out" "matches the library: " ;;
        *) contains "$out" ": faster" ;;
    esac
done
# the receipt's evidence (issue 23): the timed runs rotate over three input
# sets with elements changed before each run and every run re-checked; the
# ratio's interval; the driver's version; with --spread the baseline timed
# again in processes of its own
out=$(timeout 120 "$kv" --json --spread 2 corpus/tasks/gelu corpus/tasks/gelu/candidates/vec4.cu)
contains "$out" '"verdict":"faster"'
contains "$out" '"input_sets":3,"changed_per_run":1024,"candidate_ms_by_set":['
contains "$out" '"ratio":{"median":'
contains "$out" '"speedup_ci95":['
contains "$out" '"driver_version":"'
contains "$out" '"baseline_spread":{"processes":3,"shapes":[{"shape":"target","baseline_ms":['
lacks "$out" '"state"'
# a run that times out after the timed shape has no speedup: this GELU
# hangs on the tiny shape alone
out=$(timeout 120 "$kv" --json --timeout-ms 1500 corpus/tasks/gelu tests/verify/hang_after_timed.cu)
contains "$out" '"verdict":"timeout"'
contains "$out" '"shape":"target","baseline":"reference"'
lacks "$out" '"speedup_geomean"'
echo ok
