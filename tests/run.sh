#!/usr/bin/env bash
# Runs the unit tests (build/tests/test_*) and the CLI tests (tests/cli/t*.sh)
# and ends with one line: "N passed, N failed, N skipped".
#   tests/run.sh BUILD [unit|cli]
set -u
build=${1:-build}
which=${2:-all}
top=$(cd "$(dirname "$0")/.." && pwd)
export KB_BIN="$top/$build/kb" KB_BUILD="$top/$build" KB_TOP="$top" KB_VENV="$top/$build/venv"
export KB_MIRROR=${KB_MIRROR:-$(cd "$top/.." && pwd)/shared/corpus}
passed=0 failed=0 skipped=0 failures=()

run_one() {  # name, command...
    local name=$1; shift
    local log; log=$(mktemp)
    if "$@" >"$log" 2>&1; then
        if grep -q '^skipped:' "$log"; then
            skipped=$((skipped + 1)); printf 'skip  %s (%s)\n' "$name" "$(grep -m1 '^skipped:' "$log")"
        else
            passed=$((passed + 1)); printf 'ok    %s\n' "$name"
        fi
    else
        failed=$((failed + 1)); failures+=("$name"); printf 'FAIL  %s\n' "$name"
        sed 's/^/      /' "$log" | tail -n 40
    fi
    rm -f "$log"
}

if [ "$which" != cli ]; then
    for t in "$top/$build"/tests/test_*; do
        [ -x "$t" ] || continue
        run_one "unit/$(basename "$t")" "$t"
    done
fi
if [ "$which" != unit ]; then
    for t in "$top"/tests/cli/t[0-9]*.sh; do
        [ -f "$t" ] || continue
        run_one "cli/$(basename "$t" .sh)" bash "$t"
    done
fi
echo
[ ${#failures[@]} -eq 0 ] || printf 'failed: %s\n' "${failures[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
