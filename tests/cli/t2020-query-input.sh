#!/usr/bin/env bash
# tier: ci
# What a query is and what it says (issue 14): blank and punctuation-only
# queries, unknown sources and comma lists, -q and the footer, a missing
# model, a partly embedded KB, valid UTF-8 JSON from bytes that are not.
. "$(dirname "$0")/lib.sh"
docs="$KB_TMP/docs"
mkdir -p "$docs"
printf '# Warp shuffles\n\nUse __shfl_down_sync to reduce within a warp.\n' >"$docs/warp.md"
printf '# Shared memory\n\nBank conflicts slow shared memory; pad the tile.\n' >"$docs/smem.md"
printf '# Async copies\n\nTMA moves tiles between global and shared memory.\n' >"$docs/tma.md"
expect_rc 0 kb -q ingest "$docs"
expect_rc 0 kb -q ingest --source other "$docs/tma.md"

# blanks are no query, as "" is not; punctuation alone has no words
expect_rc 2 kb query ""
contains "$out" "empty query"
expect_rc 2 kb query "   "
contains "$out" "empty query"
expect_rc 2 kb query $'\t\n'
expect_rc 2 kb query "?? !! ..."
contains "$out" "has no words to search for"
expect_json 2 kb query --json "   "

# an unknown source is a usage error naming the KB's; a comma list works
expect_rc 2 kb query --source nosuch warp
contains "$out" "unknown source 'nosuch' (the KB has: local, other)"
# (tma.md is in both: its second copy is listed with the first as near-identical)
expect_json 0 kb query --mode lexical --json --source local,other "tiles shared memory"
[ "$(json_get "$out" "sorted({x['source'] for r in j['results'] for x in [r] + r.get('similar', [])})")" = "['local', 'other']" ] ||
    fail "--source a,b: $out"
expect_json 0 kb query --mode lexical --json --source other "tiles shared memory"
[ "$(json_get "$out" "{r['source'] for r in j['results']}")" = "{'other'}" ] || fail "--source other: $out"

# -q: the results alone, no footer; one result is "1 result"
expect_rc 0 kb query --mode lexical -k 1 warp
contains "$out" "1 result in"
lacks "$out" "1 results"
expect_rc 0 kb -q query --mode lexical warp
contains "$out" "__shfl_down_sync"
lacks "$out" "result in"
lacks "$out" "results in"

# the query from standard input or a file: a pasted kernel, an error log
printf 'error: identifier "__shfl_down_sync" is undefined in my warp reduction\n' >"$KB_TMP/log.txt"
out=$(kb query --mode lexical --json - <"$KB_TMP/log.txt") || fail "kb query - failed"
contains "$(json_get "$out" "j['results'][0]['path']")" "warp.md"
contains "$(json_get "$out" "j['query']")" "is undefined in my warp reduction"
out=$(kb query --mode lexical --json --file "$KB_TMP/log.txt") || fail "kb query --file failed"
contains "$(json_get "$out" "j['results'][0]['path']")" "warp.md"
out=$(printf 'bank conflicts' | kb query --mode lexical --file - --json) || fail "--file - failed"
contains "$(json_get "$out" "j['results'][0]['path']")" "smem.md"
expect_rc 2 kb query --file "$KB_TMP/log.txt" warp
contains "$out" "not both"
head -c 70000 /dev/zero | tr '\0' 'a' >"$KB_TMP/big.txt"
expect_rc 2 kb query --file "$KB_TMP/big.txt"
contains "$out" "longer than 65536 bytes"
expect_rc 2 kb query - </dev/null
contains "$out" "empty query"
expect_rc 1 kb query --file "$KB_TMP/nowhere.txt"
contains "$out" "nowhere.txt"

# chunk ids in the human output; kb get @N: the last query's Nth result
export XDG_STATE_HOME="$KB_TMP/fresh-state"
expect_rc 2 kb get @1
contains "$out" "no last query"
expect_rc 0 kb query --mode lexical bank conflicts pad tile
id=$(printf '%s\n' "$out" | sed -n 's/^1\. .*chunk \([0-9]*\)).*/\1/p')
[ -n "$id" ] || fail "no chunk id in: $out"
expect_rc 0 kb get @1
contains "$out" "Bank conflicts slow shared memory"
expect_json 0 kb get --json @1
[ "$(json_get "$out" "j['chunk_id']")" = "$id" ] || fail "@1 is not chunk $id: $out"
expect_rc 2 kb get @9
contains "$out" "no @9"
expect_rc 0 env KB_DIR="$KB_TMP/other" "$KB_BIN" -q ingest --no-embed "$docs/warp.md"
expect_rc 2 env KB_DIR="$KB_TMP/other" "$KB_BIN" get @1
contains "$out" "another KB"

# --json --explain keeps the explain data
expect_json 0 kb query --json --explain warp shuffle
[ "$(json_get "$out" "sorted(j['timings'])")" = "['embed_ms', 'lexical_ms', 'results_ms', 'vector_ms']" ] ||
    fail "--json --explain timings: $out"
[ "$(json_get "$out" "all('lexical_score' in r and 'vector_score' in r for r in j['results'])")" = True ] ||
    fail "--json --explain scores: $out"
[ "$(json_get "$out" "j['results'][0]['vector_score'] is not None")" = True ] || fail "no vector score: $out"
expect_json 0 kb query --json warp shuffle
lacks "$out" "timings"

# no model: the default query answers lexically, and says how to fix it
expect_rc 0 env KB_MODEL_DIR="$KB_TMP/no-model" "$KB_BIN" query warp shuffle
contains "$out" "warning: answering lexically"
contains "$out" "kb model fetch"
contains "$out" "__shfl_down_sync"
expect_json 0 env KB_MODEL_DIR="$KB_TMP/no-model" "$KB_BIN" query --json warp shuffle
[ "$(json_get "$out" "j['mode']")" = lexical ] || fail "mode without a model: $out"
expect_rc 1 env KB_MODEL_DIR="$KB_TMP/no-model" "$KB_BIN" query --mode vector warp

# a partly embedded KB says so and how to finish
expect_rc 0 kb status
contains "$out" "index Flat"
lacks "$out" "partly"
sqlite3 "$KB_DIR/kb.sqlite" "DELETE FROM embeddings WHERE chunk_id = (SELECT max(chunk_id) FROM embeddings)"
expect_rc 0 kb status
contains "$out" "partly embedded"
contains "$out" "run 'kb ingest' to embed the other"
expect_json 0 kb status --json
[ "$(json_get "$out" "j['index']")" = Flat ] || fail "status --json index: $out"

# bytes that are not UTF-8, in a file or in the query: repaired on ingest
# (said once), and --json is always valid UTF-8
printf '# Bad \xff\xfe title\n\nLatin-1 caf\xe9 and a cut \xe2\x82 sequence about warps.\n' >"$docs/latin1.md"
expect_rc 0 kb ingest --no-embed "$docs/latin1.md"
contains "$out" "5 bytes that are not UTF-8 stored as U+FFFD"
valid_json() { python3 -c 'import json, sys; json.loads(sys.stdin.buffer.read().decode("utf-8"))'; }
kb query --mode lexical --json "caf warps" | valid_json || fail "--json of a repaired document is not UTF-8 JSON"
kb query --mode lexical --json $'caf\xe9 warps' | valid_json || fail "--json of a query with bad bytes is not UTF-8 JSON"
kb query --mode lexical --json $'caf\xe9 warps' --explain | valid_json || fail "--json --explain"
id=$(kb query --mode lexical --json "caf warps" | python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["chunk_id"])')
kb get --json "$id" | valid_json || fail "kb get --json is not UTF-8 JSON"
echo ok
