#!/usr/bin/env bash
# tier: quick
# kb query for people and scripts (issue 26 items 12, 13, 18): one -k range
# in text and --json with errors in the CLI's words and "kb COMMAND: "
# before every error and warning; kb get @N from the last query whether it
# printed text or --json, never an older one, its skills reachable too;
# --exit-code: grep's exit status.
. "$(dirname "$0")/lib.sh"
export XDG_STATE_HOME="$KB_TMP/state"
mkdir -p "$KB_TMP/docs" "$KB_TMP/lib/skills"
printf '# Transpose\n\nA tiled transpose through shared memory coalesces reads and writes.\n' \
    >"$KB_TMP/docs/transpose.md"
printf '# Warp shuffles\n\nReduce a warp with __shfl_down_sync.\n' >"$KB_TMP/docs/warp.md"
expect_rc 0 kb -q ingest --no-embed "$KB_TMP/docs"
# one skill of the library, ingested from a manifest that holds it
cp -RL "$KB_TOP/corpus/skills/smem-tiled-transpose" "$KB_TMP/lib/skills/"
echo '{"sources":[{"id":"skills","title":"skills","local":["skills/"],"format":"skill","version":"git"}]}' \
    >"$KB_TMP/lib/sources.json"
expect_rc 0 env KB_MANIFEST="$KB_TMP/lib/sources.json" "$KB_BIN" -q ingest --no-embed skills

# -k: one range, the CLI's words, in text and --json
for j in "" --json; do
    expect_rc 2 kb query $j -k 51 transpose
    contains "$out" "kb query: -k wants a number from 1 to 50, not '51'"
    lacks "$out" "search:"
    expect_rc 2 kb query $j -k 0 transpose
    contains "$out" "kb query: -k wants a number from 1 to 50, not '0'"
done
expect_rc 0 kb query -q -k 50 transpose
expect_json 0 kb query --json -k 50 transpose
expect_rc 2 kb get --json --budget 5 1
contains "$out" "kb get: --budget wants a number of tokens from 1000 to 200000, not '5'"
# "kb COMMAND: " before errors and warnings, not "kb: " or "warning: " alone
expect_rc 1 kb --kb "$KB_TMP/none" status
contains "$out" "kb status: no KB in"
expect_rc 1 kb skill show --dir "$KB_TMP/lib/skills" nope
contains "$out" "kb skill show: no skill 'nope'"
printf '# Bytes\n\nnot \377 UTF-8\n' >"$KB_TMP/bad.md"
expect_rc 0 kb --kb "$KB_TMP/kb2" ingest --no-embed "$KB_TMP/bad.md"
contains "$out" "kb ingest: warning: "
contains "$out" "not UTF-8"

# kb get @N: the text list's numbers, skills after the results
expect_rc 0 kb query --mode lexical transpose shared memory
contains "$out" "1. [local] Transpose"
contains "$out" "skill 2. [skills] smem-tiled-transpose"
expect_rc 0 kb get @2
contains "$out" "smem-tiled-transpose"
expect_rc 0 kb get @1
contains "$out" "A tiled transpose"
# a --json query is the last query too: @1 is its first result
expect_json 0 kb query --json --mode lexical warp shuffles
first=$(json_get "$out" "j['results'][0]['chunk_id']")
expect_json 0 kb get --json @1
[ "$(json_get "$out" "j['chunk_id']")" = "$first" ] || fail "@1 is not the --json query's first result: $out"
contains "$out" "__shfl_down_sync"
expect_rc 2 kb get @5
contains "$out" "the last query, 'warp shuffles', has 1 result: no @5"

# --exit-code: 0 found, 1 nothing found, 2 trouble (grep's); without it a
# query that finds nothing still exits 0
expect_rc 0 kb query zzqqxx
contains "$out" "no results for 'zzqqxx'"
expect_rc 1 kb query --exit-code zzqqxx
expect_json 1 kb query --json --exit-code zzqqxx
expect_rc 0 kb query -q --exit-code transpose
expect_json 0 kb query --json --exit-code transpose
expect_rc 2 kb --kb "$KB_TMP/none" query --exit-code transpose
expect_rc 2 kb query --exit-code -k 99 transpose
echo ok
