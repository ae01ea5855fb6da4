#!/usr/bin/env bash
# tier: quick
# kb papers, kb sources and kb status print text that comes from documents,
# the manifest and fetch errors (issue 15, after item 11): escape sequences
# there (retitle, clear, colour) were printed raw. Their human output
# shows them escaped as kb query's does (kb_cli_put_safe); the columns
# still line up; --json escapes them as JSON does.
. "$(dirname "$0")/lib.sh"
raw_controls() { LC_ALL=C grep -c $'[\x01-\x08\x0b-\x1f\x7f]' || true; }
no_raw() {  # what, output
    [ "$(printf '%s' "$2" | raw_controls)" = 0 ] ||
        fail "$1 printed raw control characters: $(printf '%s' "$2" | od -c | head -20)"
}

# a literature list whose section, title and link carry escapes
printf '# Reading List\n\n## Evil \033]0;pwned\007 section\n\n\\[03/2024] Alpha \033[2J title [\\[paper\\]](https://example.org/a) | [\\[code\\]](https://example.org/b\033c)\n\n\\[11/2023] Caf\303\251 plain [\\[paper\\]](https://example.org/beta)\n' > "$KB_TMP/list.md"
expect_rc 0 kb ingest --no-embed "$KB_TMP/list.md"
out=$("$KB_BIN" papers 2>&1) || fail "papers: $out"
no_raw "kb papers" "$out"
contains "$out" 'Reading List > Evil \x1b]0;pwned\x07 section'
contains "$out" '  [2024-03] Alpha \x1b[2J title'
contains "$out" 'https://example.org/b\x1bc'
contains "$out" '  [2023-11] Café plain'
contains "$out" '            paper: https://example.org/beta'
expect_json 0 kb papers --json
no_raw "kb papers --json" "$out"
[ "$(json_get "$out" "any('\x1b[2J' in p['title'] for p in j['papers'])")" = True ] ||
    fail "JSON lost the title: $out"

# a manifest whose url and version carry escapes, and a source that fails
# with an error that quotes an escape
mkdir -p "$KB_TMP/m"
printf '# Doc\n\nText about warps.\n' > "$KB_TMP/m/doc.md"
python3 - "$KB_TMP/man.json" <<'PY'
import json, sys
json.dump({"sources": [
    {"id": "evil-src", "title": "Evil \u001b]0;t\u0007", "url": "https://example.org/\u001b[2Jx",
     "mirror": ["doc.md"], "format": "markdown", "version": "v1\u001b[31m"},
    {"id": "gone", "title": "Gone", "url": "https://example.org/gone",
     "mirror": ["missing\u001b[2J.md"], "format": "markdown", "version": "1"}]},
    open(sys.argv[1], "w"))
PY
expect_rc 3 kb ingest --no-embed --manifest "$KB_TMP/man.json" --mirror "$KB_TMP/m"
out=$("$KB_BIN" sources --manifest "$KB_TMP/man.json" 2>&1) || fail "sources: $out"
no_raw "kb sources" "$out"
contains "$out" 'https://example.org/\x1b[2Jx'
# the columns after the id still start where the header's do
header=$(printf '%s\n' "$out" | sed -n 1p)
row=$(printf '%s\n' "$out" | grep '^evil-src')
[ "${header:33:5}" = "state" ] || fail "the header: '$header'"
[ "${row:33:8}" = "ingested" ] || fail "the state column moved: '$row'"
expect_json 0 kb sources --manifest "$KB_TMP/man.json" --json
no_raw "kb sources --json" "$out"

out=$("$KB_BIN" status 2>&1) || fail "status: $out"
no_raw "kb status" "$out"
contains "$out" 'v1\x1b[31m'
contains "$out" "cannot find 'missing\\x1b[2J.md' in the mirror"
row=$(printf '%s\n' "$out" | grep '^evil-src')
[ "${row:33:12}" = 'v1\x1b[31m  ' ] || fail "the version column: '$row'"
[ "${row:46:6}" = "     1" ] || fail "the docs column moved: '$row'"
expect_json 0 kb status --json
no_raw "kb status --json" "$out"
echo ok
