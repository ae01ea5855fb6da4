#!/usr/bin/env bash
# Runs every adversarial candidate (tests/verify/adversarial/*.cu) through
# kb-verify and checks that each gets the verdict its first line expects,
# and (where a second line gives one) a reason that names the cheat:
#   // expect: TASK VERDICT
#   // reason: TEXT THE REASON MUST HOLD
# Usage: tests/verify/run-adversarial.sh [RESULTS.jsonl]
# Needs build/kb-verify and a GPU; prints "skipped: no GPU" without one.
# Exits non-zero when a candidate did not get its verdict and reason.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/verify/lib.sh"
kv=${KB_VERIFY:-$top/build/kb-verify}
log=${1:-/dev/null}
[ -x "$kv" ] || { echo "skipped: no kb-verify (no CUDA toolkit)"; exit 0; }
need_device "$kv"
pass=0 fail=0
for c in "$top"/tests/verify/adversarial/*.cu; do
    read -r _ _ task want < <(grep -m1 '^// expect:' "$c")
    need=$(grep -m1 '^// reason:' "$c" | sed 's|^// reason: *||')
    t0=$(date +%s%N)
    res=$(timeout 120 "$kv" --json --timeout-ms 2000 "$top/corpus/tasks/$task" "$c" 2>/dev/null)
    rc=$?
    t1=$(date +%s%N)
    # no result is a failure of kb-verify itself, whatever was expected
    had=1
    [ -n "$res" ] || { had=0; res="{\"verdict\":\"none\",\"reason\":\"kb-verify printed no result (exit $rc)\"}"; }
    got=$(printf '%s' "$res" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("verdict","?"))' 2>/dev/null || echo '?')
    full=$(printf '%s' "$res" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("reason",""))' 2>/dev/null)
    why=${full:0:150}
    named=1
    [ -z "$need" ] || case "$full" in *"$need"*) ;; *) named=0; why="reason lacks '$need': $why" ;; esac
    printf '%s\n' "$res" | python3 -c "import json,sys; r=json.load(sys.stdin); r['file']='$(basename "$c")'; r['expected']='$want'; r['process_ms']=$(( (t1 - t0) / 1000000 )); print(json.dumps(r))" >>"$log" 2>/dev/null
    if [ "$had" -eq 1 ] && [ "$got" = "$want" ] && [ "$named" -eq 1 ]; then
        pass=$((pass + 1)); printf 'ok    %-24s %-14s %s\n' "$(basename "$c")" "$got" "$why"
    else
        fail=$((fail + 1)); printf 'FAIL  %-24s got %s, wanted %s: %s\n' "$(basename "$c")" "$got" "$want" "$why"
    fi
done
echo "adversarial: $pass caught as expected, $fail not"
[ "$fail" -eq 0 ]
