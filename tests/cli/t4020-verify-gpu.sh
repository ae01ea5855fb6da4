#!/usr/bin/env bash
# tier: ci
# On a GPU: every reference matches its CPU float64 implementation, and
# every committed optimised candidate verifies (faster than its baseline;
# gemm_bf16, which ties cuBLAS, correct with parity: within 3% of the
# library). Prints "skipped: no GPU" elsewhere.
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
echo ok
