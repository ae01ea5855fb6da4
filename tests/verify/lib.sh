# lib.sh - what the GPU scripts of tests/verify share (sourced by
# device-run.sh, receipts-run.sh, skill-run.sh and run-adversarial.sh):
# each runs all its steps, names every one that failed, and exits non-zero
# when one did.

failed=""
# step_failed WHAT: WHAT failed (named on stderr); the script goes on.
step_failed() { failed="$failed $1"; echo "STEP FAILED: $1" >&2; }

# need_device KB_VERIFY [FILE]: kb-verify's device profile into FILE. Where
# there is no GPU (nvidia-smi lists none) prints "skipped: no GPU" and exits
# 0; a GPU that kb-verify cannot open (a shared library not carried, a
# driver it cannot use) is a failure: exits 1 with kb-verify's reason.
need_device() {
    local f=${2:-/dev/null}
    "$1" --device-info --json >"$f" 2>/dev/null && return 0
    if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        echo "STEP FAILED: kb-verify cannot open the GPU nvidia-smi lists:" \
             "$("$1" --device-info 2>&1 | tail -1)" >&2
        exit 1
    fi
    echo "skipped: no GPU"
    exit 0
}

# finish NAME: exits 1 naming the steps that failed, else says every step
# passed.
finish() {
    [ -z "$failed" ] || { echo "$1: failed:$failed" >&2; exit 1; }
    echo "$1: every step passed"
}
