#!/usr/bin/env bash
# tests/run.sh - runs the tests of one tier at once, jobs at a time, and
# ends with one line: "N passed, N failed, N skipped".
#
#   tests/run.sh BUILD [quick|ci|full] [unit|cli] [NAME...]
#
# The tests: the unit tests and fuzz replays (BUILD/tests/test_*, tier
# quick) and the CLI tests (tests/cli/t*.sh). Each CLI test names its tier
# in a line near its top:
#     # tier: quick   fast (seconds, no embedding): make test-quick and up
#     # tier: ci      what CI runs (make test), and make test-full
#     # tier: full    slow and covered in substance by a ci test: make test-full
# A test without such a line fails. The tiers nest: quick < ci < full; the
# default is ci. NAMEs (e.g. t2000 or test_http) pick tests by prefix.
#
# Outcome of a test:
#   passed   exit 0. A test that skipped a part says so in a line
#            "skip: PART (REASON)" and still passed; the part is named.
#   skipped  exit 0 and a line "skipped: REASON": the whole test did not
#            run - printed before any check, and the test's only outcome.
#   failed   any other exit status (a test that takes longer than
#            KB_TEST_TIMEOUT, 600 s, is stopped and fails).
#
# Jobs: KB_TEST_JOBS (default: nproc), the longest tests first (their
# times from the last run, BUILD/test-logs/times, else tests/times.txt).
# Each test's log is kept in BUILD/test-logs/NAME.log. The KBs that several
# tests only read (tests/cli/kbs-lib.sh, `use_kb NAME` in a test) are built
# first, once, into BUILD/test-kbs/NAME, and kept while their inputs are
# unchanged; tests that use one wait for it, and get their own copy.
# Tests run at once must not collide: scratch space from mktemp (lib.sh's
# $KB_TMP), port 0 for servers, nothing shared that a test writes.
set -u
build=${1:-build}
[ $# -gt 0 ] && shift
tier=ci which=all picks=()
for a in "$@"; do
    case $a in
    quick | ci | full) tier=$a ;;
    unit | cli) which=$a ;;
    *) picks+=("$a") ;;
    esac
done
top=$(cd "$(dirname "$0")/.." && pwd)
case $build in /*) ;; *) build="$top/$build" ;; esac
venv="$build/venv"; [ -d "$venv" ] || venv="$top/build/venv"
export KB_BIN="$build/kb" KB_BUILD="$build" KB_TOP="$top" KB_VENV="${KB_VENV:-$venv}"
export KB_MIRROR=${KB_MIRROR:-$(cd "$top/.." && pwd)/shared/corpus}
jobs=${KB_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
limit=${KB_TEST_TIMEOUT:-600}
logs="$build/test-logs"
mkdir -p "$logs" && rm -f "$logs"/*.log "$logs"/*.rc
rank() { case $1 in quick) echo 1 ;; ci) echo 2 ;; full) echo 3 ;; *) echo 9 ;; esac; }

# the tests of this tier: "NAME KIND PATH"
picked() {
    [ ${#picks[@]} -eq 0 ] && return 0
    local p
    for p in "${picks[@]}"; do case $1 in "$p"*) return 0 ;; esac; done
    return 1
}
items=() needs=()
if [ "$which" != cli ]; then
    for t in "$build"/tests/test_*; do
        [ -x "$t" ] && picked "$(basename "$t")" && items+=("unit/$(basename "$t") unit $t")
    done
fi
if [ "$which" != unit ]; then
    for t in "$top"/tests/cli/t[0-9]*.sh; do
        n=$(basename "$t" .sh)
        picked "$n" || continue
        tt=$(sed -n '1,20s/^# tier: *\([a-z]*\).*/\1/p' "$t" | head -n1)
        if [ "$(rank "${tt:-none}")" = 9 ] || [ "$(rank "$tt")" -le "$(rank "$tier")" ] || [ ${#picks[@]} -gt 0 ]; then
            items+=("cli/$n cli $t")
        fi
    done
fi

# longest first: last run's times, else the committed ones, else 5 s
est() {
    cat "$logs/times" "$top/tests/times.txt" 2>/dev/null |
        awk -v n="$1" '$1 == n { print $2; f = 1; exit } END { if (!f) print 5 }'
}
order=()
while read -r _ line; do order+=("$line"); done < <(
    for i in "${items[@]}"; do set -- $i; printf '%s %s\n' "$(est "$1")" "$i"; done | sort -k1,1gr -s)
# the shared KBs the chosen tests use: built first
kbs=$(for i in "${order[@]}"; do set -- $i; [ "$2" = cli ] && sed -n 's/.*\buse_kb \([a-z0-9-]*\).*/\1/p' "$3"; done | sort -u)
queue=()
for k in $kbs; do queue+=("kbs/$k kbs $k"); done
queue+=("${order[@]}")

passed=0 failed=0 skipped=0 failures=() kbs_done=" "
declare -A running=()
sum=0

# run_item NAME KIND ARG: in the background; leaves NAME.log and NAME.rc
run_item() {
    local name=$1 kind=$2 arg=$3 f=${1//\//_} rc t0=$EPOCHREALTIME
    case $kind in
    unit) (cd "$top" && timeout -k 10 "$limit" "$arg") >"$logs/$f.log" 2>&1 ;;
    cli)
        if ! sed -n '1,20p' "$arg" | grep -qE '^# tier: *(quick|ci|full)\b'; then
            echo "no '# tier: quick|ci|full' line in its first 20 lines" >"$logs/$f.log"; false
        else
            (cd "$top" && timeout -k 10 "$limit" bash "$arg") >"$logs/$f.log" 2>&1 </dev/null
        fi ;;
    kbs) (cd "$top" && . tests/cli/kbs-lib.sh && kbs_ensure "$arg") >"$logs/$f.log" 2>&1 </dev/null ;;
    esac
    rc=$?
    printf '%s %s\n' "$rc" "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')" >"$logs/$f.rc"
}

# report NAME KIND: the line of a finished item
report() {
    local name=$1 kind=$2 f=${1//\//_} rc secs log
    read -r rc secs <"$logs/$f.rc"
    log="$logs/$f.log"
    sum=$(awk -v a="$sum" -v b="$secs" 'BEGIN { print a + b }')
    [ "$kind" != kbs ] && printf '%s %s\n' "$name" "$secs" >>"$logs/times.new"
    if [ "$rc" -ne 0 ]; then
        failed=$((failed + 1)); failures+=("$name")
        printf 'FAIL  %-36s %6ss  (exit %s; log %s)\n' "$name" "$secs" "$rc" "${log#"$top"/}"
    elif [ "$kind" = kbs ]; then
        kbs_done+="${name#kbs/} "
        printf 'kbs   %-36s %6ss\n' "$name" "$secs"
    elif grep -q '^skipped:' "$log"; then
        skipped=$((skipped + 1))
        printf 'skip  %-36s %6ss  (%s)\n' "$name" "$secs" "$(grep -m1 '^skipped:' "$log" | cut -c10-)"
    else
        passed=$((passed + 1))
        local parts; parts=$(sed -n 's/^skip: *//p' "$log" | paste -sd '|' - | sed 's/|/; /g')
        printf 'ok    %-36s %6ss%s\n' "$name" "$secs" "${parts:+  (skip: $parts)}"
    fi
}

# reap: waits for one item to finish and reports it
reap() {
    local pid
    wait -n -p pid
    set -- ${running[$pid]}
    unset "running[$pid]"
    report "$1" "$2"
}

# ready ITEM: 0 when the shared KBs the item uses are built
ready() {
    set -- $1
    [ "$2" = cli ] || return 0
    local k
    for k in $(sed -n 's/.*\buse_kb \([a-z0-9-]*\).*/\1/p' "$3"); do
        case $kbs_done in *" $k "*) ;; *) return 1 ;; esac
    done
}

rm -f "$logs/times.new"
t_start=$EPOCHREALTIME
while [ ${#queue[@]} -gt 0 ]; do
    while [ ${#running[@]} -ge "$jobs" ]; do reap; done
    # the first item that need not wait for a KB, else the first one
    pick=0
    for i in "${!queue[@]}"; do
        if ready "${queue[$i]}"; then pick=$i; break; fi
    done
    item=${queue[$pick]}
    queue=("${queue[@]:0:$pick}" "${queue[@]:$((pick + 1))}")
    set -- $item
    run_item "$1" "$2" "$3" &
    running[$!]="$1 $2"
done
while [ ${#running[@]} -gt 0 ]; do reap; done
wall=$(awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
if [ -f "$logs/times.new" ]; then   # this run's times over the last run's
    touch "$logs/times"
    awk 'NR == FNR { t[$1] = $2; next } !($1 in t) { print } END { for (n in t) print n, t[n] }' \
        "$logs/times.new" "$logs/times" | sort -k2,2gr >"$logs/times.tmp" &&
        mv -f "$logs/times.tmp" "$logs/times" && rm -f "$logs/times.new"
fi

echo
for n in "${failures[@]}"; do
    printf -- '--- %s (%s)\n' "$n" "${logs#"$top"/}/${n//\//_}.log"
    tail -n 40 "$logs/${n//\//_}.log" | sed 's/^/      /'
done
[ ${#failures[@]} -eq 0 ] || printf 'failed: %s\n' "${failures[*]}"
printf 'tier %s, %s jobs: %ss wall, %ss summed over tests\n' "$tier" "$jobs" "$wall" "${sum%.*}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
