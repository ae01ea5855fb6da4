# Sourced by every CLI test: a scratch KB, assertions that say what failed.
set -u
: "${KB_BIN:?run through tests/run.sh}"
KB_TMP=$(mktemp -d)
trap 'rm -rf "$KB_TMP"' EXIT
export KB_DIR="$KB_TMP/kb" NO_COLOR=1
# no config file or state of the user running the tests
export XDG_CONFIG_HOME="$KB_TMP/config" XDG_STATE_HOME="$KB_TMP/state"
kb() { "$KB_BIN" "$@"; }
KB_CHECKS=0   # checks run so far (expect_rc, expect_json), for skip_rest
# skip_rest REASON: ends the test here, exit 0. After a check, the test
# passed and skipped the rest ("skip: the rest (REASON)"); before any, the
# whole test was skipped ("skipped: REASON") - tests/run.sh counts them so
skip_rest() {
    if [ "$KB_CHECKS" -gt 0 ]; then echo "skip: the rest ($1)"; else echo "skipped: $1"; fi
    exit 0
}
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_rc RC command... : runs command, output in $out, fails unless exit RC
expect_rc() {
    local want=$1; shift
    out=$("$@" 2>&1); local got=$?
    KB_CHECKS=$((KB_CHECKS + 1))
    [ "$got" -eq "$want" ] || fail "'$*' exited $got, wanted $want; output: $out"
}
# expect_json RC command... : like expect_rc, but $out is stdout alone
expect_json() {
    local want=$1; shift
    out=$("$@" 2>"$KB_TMP/.stderr"); local got=$?
    KB_CHECKS=$((KB_CHECKS + 1))
    [ "$got" -eq "$want" ] || fail "'$*' exited $got, wanted $want; output: $out $(cat "$KB_TMP/.stderr")"
}
contains() { case "$1" in *"$2"*) ;; *) fail "expected '$2' in: $1" ;; esac; }
lacks() { case "$1" in *"$2"*) fail "did not expect '$2' in: $1" ;; *) ;; esac; }
need_mirror() {
    [ -n "${KB_MIRROR:-}" ] && [ -f "$KB_MIRROR/MANIFEST.json" ] ||
        { echo "skipped: no document mirror (KB_MIRROR)"; exit 0; }
}
MANIFEST="$KB_TOP/corpus/sources.json"
# sql QUERY: runs a read-only query on the scratch KB
sql() { sqlite3 -readonly "$KB_DIR/kb.sqlite" "$1"; }
# json_get JSON EXPR: evaluates a Python expression on the parsed JSON 'j'
json_get() { python3 -c "import json,sys; j=json.loads(sys.argv[1]); print($2)" "$1"; }
# use_kb NAME: the scratch KB ($KB_DIR) a copy of the shared KB NAME
# (tests/cli/kbs-lib.sh: built once per run, from the mirror, with vectors);
# for a test that does not test ingest itself
use_kb() {
    need_mirror
    ( . "$KB_TOP/tests/cli/kbs-lib.sh" && kbs_ensure "$1" "$KB_DIR" ) >"$KB_TMP/.use_kb" 2>&1 ||
        fail "the shared KB $1: $(tail -n 5 "$KB_TMP/.use_kb")"
}
# serve_dir DIR: DIR's files over HTTP on a free loopback port (python3's
# http.server; its request log in $KB_TMP/server.log), stopped when the
# test ends; $base is its URL
serve_dir() {
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    python3 -m http.server "$port" --bind 127.0.0.1 --directory "$1" >"$KB_TMP/server.log" 2>&1 &
    KB_SERVE_DIR_PID=$!
    trap 'kill $KB_SERVE_DIR_PID 2>/dev/null; rm -rf "$KB_TMP"' EXIT
    base="http://127.0.0.1:$port"
    for _ in $(seq 50); do curl -s "$base/" >/dev/null && return 0; sleep 0.1; done
    fail "the test's HTTP server on port $port did not start: $(cat "$KB_TMP/server.log")"
}
