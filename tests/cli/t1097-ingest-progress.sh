#!/usr/bin/env bash
# tier: quick
# kb ingest's progress when stderr is no terminal (issue 26 item 4): a log
# of `make demo > log` was silent for minutes of work; now a plain line at
# once and then every 15 s (git's convention), none with --no-progress or
# -q, and --progress asks for it; "1 chunk", not "1 chunks".
. "$(dirname "$0")/lib.sh"
mkdir -p "$KB_TMP/docs"
for i in 1 2 3; do printf '# Doc %s\n\nWords %s.\n' "$i" "$i" >"$KB_TMP/docs/d$i.md"; done
# stderr to a file: not a terminal
kb ingest --no-embed "$KB_TMP/docs" 2>"$KB_TMP/err" || fail "kb ingest exited $?"
err=$(cat "$KB_TMP/err")
contains "$err" "[1/1] local: 1/3 documents, 1 chunk, "
lacks "$err" $'\r'
contains "$err" "local: 3 documents (3 changed"
kb ingest --force --no-progress --no-embed "$KB_TMP/docs" 2>"$KB_TMP/err" || fail "exited $?"
err=$(cat "$KB_TMP/err")
lacks "$err" "[1/1]"
contains "$err" "local: 3 documents ("
kb -q ingest --force --progress --no-embed "$KB_TMP/docs" 2>"$KB_TMP/err" || fail "exited $?"
[ ! -s "$KB_TMP/err" ] || fail "-q printed: $(cat "$KB_TMP/err")"
kb ingest --force --no-progress --progress --no-embed "$KB_TMP/docs" 2>"$KB_TMP/err" || fail "exited $?"
contains "$(cat "$KB_TMP/err")" "[1/1] local: "
echo ok
