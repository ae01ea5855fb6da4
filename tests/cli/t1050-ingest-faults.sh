#!/usr/bin/env bash
# Inputs found by fault injection and fuzzing (issue 15): each ends in a
# clear result, never a crash or a hang, and loses nothing.
. "$(dirname "$0")/lib.sh"

# a Markdown line holding only a paper date crashed ingest (SIGSEGV), and
# every document after it was skipped
mkdir -p "$KB_TMP/dates"
printf -- '- [12/2023]\n' > "$KB_TMP/dates/a.md"
printf '[0026]\n' > "$KB_TMP/dates/b.md"
printf '# After\n\nThe document after the dates is ingested too.\n' > "$KB_TMP/dates/c.md"
expect_rc 0 kb ingest --no-embed "$KB_TMP/dates"
[ "$(sql "SELECT count(*) FROM documents WHERE key LIKE '$KB_TMP/dates/%'")" = 3 ] ||
    fail "not every document of the folder was stored: $out"
[ "$(sql "SELECT count(*) FROM papers")" = 0 ] || fail "a date alone became a paper"
expect_json 0 kb query --mode lexical --json "12/2023"
[ "$(json_get "$out" "j['results'][0]['path']")" = "$KB_TMP/dates/a.md" ] ||
    fail "the date-only line was not kept as text: $out"

echo ok
