#!/usr/bin/env bash
# The GPU run behind BENCHMARKS.md's "Evidence you can trust" (issue 23),
# for the device machine, its steps most important first:
#   1. the adversarial set (each caught, its reason naming the cheat);
#   2. every committed candidate keeps its verdict (one process each);
#   3. the same candidates through one --serve process (level-1 wall p50);
#   4. every live skill of corpus/skills re-verified in six processes (the
#      first with --spread 3: the baseline in three processes of its own);
#   5. repeats: every candidate's correctness on its odd and tiny shapes
#      (--no-timing --shapes odd,tiny) REPEATS times through --serve, and
#      every reference against the CPU float64 on its tiny shape REPEATS
#      times (a fresh seed each), eight processes at a time;
#   6. a summary (tests/verify/receipts-summary.py).
# Results go to OUTDIR (JSON lines). Exits non-zero when a step failed.
#   tests/verify/receipts-run.sh [OUTDIR]      (REPEATS=200 by default)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/verify/lib.sh"
cd "$top"
kv=${KB_VERIFY:-$top/build/kb-verify}
out=${1:-${OUT:-/tmp/kb-receipts-run}}
reps=${REPEATS:-200}
mkdir -p "$out"
export KB_VERIFY_CACHE=/tmp/kb-verify-cache
t_start=$(date +%s)
section() { echo "== $1 (at $(( $(date +%s) - t_start )) s)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv >"$out/nvidia-smi.txt" 2>&1
need_device "$kv" "$out/device.json"
cat "$out/device.json"; echo

section "1. adversarial set"
tests/verify/run-adversarial.sh "$out/adversarial.jsonl" || step_failed "adversarial set"

section "2. committed candidates, one process each"
for c in corpus/tasks/*/candidates/*.cu; do
    t=${c%/candidates/*}
    t0=$(date +%s%N)
    r=$(timeout 120 "$kv" --json "$t" "$c") || step_failed "candidate $c"
    t1=$(date +%s%N)
    printf '%s\n' "$r" | python3 -c "import json,sys; r=json.load(sys.stdin); r['file']='$c'; r['process_ms']=$(( (t1 - t0) / 1000000 )); print(json.dumps(r))" \
        >>"$out/candidates.jsonl" || step_failed "candidate $c: no result"
done

section "2b. every reference against the CPU float64, every shape the CPU can take"
ls -d corpus/tasks/*/ | xargs -P 8 -I{} sh -c 'timeout 300 "$0" --reference --json "$1"; echo' "$kv" {} \
    | grep . >"$out/references.jsonl"
python3 -c "
import json,sys
rs=[json.loads(l) for l in open('$out/references.jsonl')]
bad=[r for r in rs if r.get('verdict')!='correct']
print('references: %d/%d correct' % (len(rs)-len(bad), len(rs)))
[print('  NOT CORRECT', r.get('task'), r.get('reason','')[:150]) for r in bad]
sys.exit(1 if bad or len(rs) != $(ls -d corpus/tasks/*/ | wc -l) else 0)" || step_failed references

section "2c. a timeout after the timed shape has no speedup"
r=$(timeout 60 "$kv" --json --timeout-ms 1500 corpus/tasks/gelu tests/verify/hang_after_timed.cu)
printf '%s\n' "$r" >"$out/hang.json"
case $r in *'"verdict":"timeout"'*) to=1 ;; *) to=0 ;; esac
case $r in *'"timings":[{"shape":"target"'*) timed=1 ;; *) timed=0 ;; esac
case $r in *speedup_geomean*) sp=1 ;; *) sp=0 ;; esac
if [ $to$timed$sp = 110 ]; then echo "timeout after the timed shape: no speedup"
else step_failed "hang: timeout $to, timed $timed, speedup $sp: ${r:0:300}"; fi

section "3. the same candidates through one --serve process"
for c in corpus/tasks/*/candidates/*.cu; do
    printf '{"id":"%s","task":"%s","candidate":"%s"}\n' "$c" "${c%/candidates/*}" "$c"
done >"$out/serve-requests.jsonl"
timeout 300 "$kv" --serve <"$out/serve-requests.jsonl" >"$out/serve.jsonl" || step_failed serve

section "4. live skills, six processes each"
for d in corpus/skills/*/; do
    grep -Eq '^ *kb-status: (verified|approved)' "$d/SKILL.md" || continue
    task=$(sed -n 's/^ *kb-task: *//p' "$d/SKILL.md" | head -1)
    for p in 1 2 3 4 5 6; do
        extra=()
        [ "$p" -eq 1 ] && extra=(--spread 3)
        r=$(timeout 120 "$kv" --json "${extra[@]}" "corpus/tasks/$task" "$d/kernel.cu") ||
            step_failed "skill $d process $p"
        printf '%s\n' "$r" | python3 -c "import json,sys; r=json.load(sys.stdin); r['skill']='$(basename "$d")'; r['process']=$p; print(json.dumps(r))" \
            >>"$out/repro.jsonl" || step_failed "skill $d process $p: no result"
    done
done

section "5. repeats: $reps x each candidate on odd,tiny and each reference on tiny"
mkdir -p /tmp/kb-reps
for c in corpus/tasks/*/candidates/*.cu; do
    n=$(echo "$c" | tr '/' '_')
    for i in $(seq "$reps"); do
        printf '{"id":"%s","task":"%s","candidate":"%s","no_timing":true,"shapes":"odd,tiny"}\n' \
            "$c" "${c%/candidates/*}" "$c"
    done >"/tmp/kb-reps/$n.req"
done
ls /tmp/kb-reps/*.req | xargs -P 8 -I{} sh -c 'timeout 400 "$0" --serve <"$1" >"$1.out"' "$kv" {} ||
    step_failed "repeats: a --serve process failed"
cat /tmp/kb-reps/*.req.out >"$out/repeats-candidates.jsonl"
ls -d corpus/tasks/*/ | xargs -P 8 -I{} sh -c \
    'timeout 300 "$0" --reference --json --shapes tiny --repeat "$1" "$2" >"/tmp/kb-reps/ref-$(basename "$2").out"' \
    "$kv" "$reps" {} || step_failed "repeats: a reference was not correct, or its process failed"
cat /tmp/kb-reps/ref-*.out >"$out/repeats-references.jsonl"

section "6. summary"
REPEATS=$reps python3 tests/verify/receipts-summary.py "$out" || step_failed summary
echo "total $(( $(date +%s) - t_start )) s"
finish receipts-run
