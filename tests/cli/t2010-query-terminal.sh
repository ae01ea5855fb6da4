#!/usr/bin/env bash
# tier: quick
# A document cannot drive the user's terminal (issue 15 item 11): escape
# sequences in a document (retitle, clear, a disguised link) were printed
# raw by kb query and kb get. Human output shows them escaped; --json
# escapes them as JSON does; ordinary text, UTF-8 included, is as it was.
. "$(dirname "$0")/lib.sh"
printf '# Evil \033]0;pwned\007title\n\nCaf\303\251 tiling guide \033[2J\033[H with a link \033]8;;https://evil.example\033\\\\click\033]8;;\033\\\\ here\r\nand a C1 csi \302\23331m, a raw \233 byte, a bidi \342\200\256override.\n' > "$KB_TMP/evil.md"
expect_rc 0 kb ingest --no-embed "$KB_TMP/evil.md"
raw_controls() { LC_ALL=C grep -c $'[\x01-\x08\x0b-\x1f\x7f]' || true; }
check_human() {  # what, output
    [ "$(printf '%s' "$2" | raw_controls)" = 0 ] || fail "$1 printed raw control characters: $(printf '%s' "$2" | od -c | head -20)"
    printf '%s' "$2" | LC_ALL=C grep -q $'\xc2\x9b\|\x9b\|\xe2\x80\xae' && fail "$1 printed a C1 control or a bidi override raw"
    contains "$2" 'Evil \x1b]0;pwned\x07title'
    contains "$2" 'Café'
    contains "$2" '\x1b[2J\x1b[H'
    contains "$2" '\x1b]8;;https://evil.example\x1b\'
    contains "$2" '\u009b31m'
    contains "$2" $'raw \xef\xbf\xbd byte'   # not UTF-8: U+FFFD since ingest (issue 14)
    contains "$2" 'bidi \u202eoverride'
}
out=$("$KB_BIN" query --mode lexical "tiling guide" 2>&1) || fail "query: $out"
check_human "kb query" "$out"
id=$(sql "SELECT id FROM chunks LIMIT 1")
out=$("$KB_BIN" get "$id" 2>&1) || fail "get: $out"
check_human "kb get" "$out"
# colour on a terminal is kb's own escapes, the document's still escaped
out=$(script -qec "NO_COLOR= KB_DIR='$KB_DIR' '$KB_BIN' query --mode lexical 'tiling guide'" /dev/null 2>&1) || true
contains "$out" $'\033[1m'
contains "$out" '\x1b]0;pwned'
lacks "$out" $'\033]0;'
# JSON escapes them its own way
expect_json 0 kb query --mode lexical --json "tiling guide"
[ "$(printf '%s' "$out" | raw_controls)" = 0 ] || fail "JSON printed raw control characters"
[ "$(json_get "$out" "'\x1b]0;pwned' in j['results'][0]['heading_path'][0]")" = True ] ||
    fail "JSON lost the text: $out"
echo ok
