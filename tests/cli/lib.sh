# Sourced by every CLI test: a scratch KB, assertions that say what failed.
set -u
: "${KB_BIN:?run through tests/run.sh}"
KB_TMP=$(mktemp -d)
trap 'rm -rf "$KB_TMP"' EXIT
export KB_DIR="$KB_TMP/kb" NO_COLOR=1
kb() { "$KB_BIN" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_rc RC command... : runs command, output in $out, fails unless exit RC
expect_rc() {
    local want=$1; shift
    out=$("$@" 2>&1); local got=$?
    [ "$got" -eq "$want" ] || fail "'$*' exited $got, wanted $want; output: $out"
}
contains() { case "$1" in *"$2"*) ;; *) fail "expected '$2' in: $1" ;; esac; }
lacks() { case "$1" in *"$2"*) fail "did not expect '$2' in: $1" ;; *) ;; esac; }
