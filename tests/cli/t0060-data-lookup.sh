#!/usr/bin/env bash
# tier: quick
# kb's own data (the manifest, the tasks, the skill library) wherever kb is
# run from (issue 26 items 2 and 3): a checkout's build/kb finds corpus/
# beside its folder, an installed PREFIX/bin/kb finds PREFIX/share/kb, and
# a KB remembers the manifest it was built from - for kb sources, kb skill
# list|show, kb prompt, kb doctor and kb mcp, run from a folder with no
# corpus/. kb mcp with no library anywhere lists no tool that needs one.
. "$(dirname "$0")/lib.sh"
cd "$KB_TMP"
unset KB_MANIFEST
skill=smem-tiled-transpose
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}'
tools='{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
# mcp_tools KB: the names kb mcp lists, and its log line
mcp_tools() {
    printf '%s\n%s\n' "$init" "$tools" | "$1" mcp 2>"$KB_TMP/mcp.err" |
        python3 -c 'import json,sys; r=[json.loads(l) for l in sys.stdin]; print(" ".join(t["name"] for t in r[1]["result"]["tools"]))'
}
# every command of the issue, from a folder with no corpus/, by binary $1
# whose data is in $2
check_all() {
    local bin=$1 data=$2
    expect_rc 0 "$bin" sources
    contains "$out" "ptx-isa"
    expect_rc 0 "$bin" skill list
    contains "$out" "$skill"
    expect_rc 0 "$bin" skill show "$skill"
    contains "$out" "## "          # SKILL.md's body, not an error
    expect_rc 0 "$bin" prompt gelu
    contains "$out" "gelu"
    expect_rc 1 "$bin" doctor      # no KB: a FAIL, but the data is found
    contains "$out" "ok    manifest $data/sources.json"
    contains "$out" "ok    tasks: $data/tasks"
    contains "$out" "ok    skills: $data/skills"
    lacks "$out" "cannot open"
    # kb mcp started in a user's project serves the library it finds
    expect_rc 0 "$bin" --kb "$KB_TMP/kbx" ingest -q --no-embed "$KB_TMP/notes"
    out=$(KB_DIR="$KB_TMP/kbx" mcp_tools "$bin")
    contains "$out" "skill_get"
    contains "$(cat "$KB_TMP/mcp.err")" "$(ls "$data/skills" | wc -l) skills as resources"
    rm -rf "$KB_TMP/kbx"
}
mkdir -p notes elsewhere
printf '# Notes\n\nCoalesced loads.\n' >notes/n.md

# a checkout: build/kb beside corpus/
mkdir -p co/build co/corpus
cp "$KB_BIN" co/build/kb
cp "$KB_TOP/corpus/sources.json" co/corpus/
cp -R "$KB_TOP/corpus/tasks" co/corpus/
cp -RL "$KB_TOP/corpus/skills" co/corpus/
co=$(cd co/corpus && pwd -P)
(cd elsewhere && check_all "$KB_TMP/co/build/kb" "$co") || exit 1

# an installation: PREFIX/bin/kb and PREFIX/share/kb (make install's layout)
mkdir -p inst/bin
mv co/build/kb inst/bin/kb
mv co/corpus inst/share-kb && mkdir -p inst/share && mv inst/share-kb inst/share/kb
inst=$(cd inst/share/kb && pwd -P)
(cd elsewhere && check_all "$KB_TMP/inst/bin/kb" "$inst") || exit 1

# a lone binary, no data beside it: the manifest a KB was built from
mkdir -p lone own/notes
mv inst/bin/kb lone/kb
cp notes/n.md own/notes/
cat >own/sources.json <<'EOF'
{"sources":[{"id":"own-notes","title":"own notes","local":["notes/"],"format":"markdown","version":"1"}]}
EOF
mv inst/share/kb/tasks own/tasks
mv inst/share/kb/skills own/skills
rm -rf inst
cd elsewhere
expect_rc 0 ../lone/kb sources
contains "$out" "kb sources: no manifest 'corpus/sources.json'"
# kb mcp with no library anywhere: no skill_get, skill_search still
expect_rc 0 ../lone/kb ingest -q --no-embed ../notes
out=$(mcp_tools ../lone/kb)
contains "$out" "search"
contains "$out" "skill_search"
lacks "$out" "skill_get"
contains "$(cat "$KB_TMP/mcp.err")" "0 skills as resources"
rm -rf "$KB_DIR"
# built from own/sources.json (KB_MANIFEST), then used without it
expect_rc 0 env KB_MANIFEST="$KB_TMP/own/sources.json" ../lone/kb ingest -q --no-embed
expect_rc 0 ../lone/kb sources
contains "$out" "own-notes"
expect_rc 0 ../lone/kb skill show "$skill"
expect_rc 0 ../lone/kb prompt gelu
out=$(mcp_tools ../lone/kb)
contains "$out" "skill_get"
# KB_MANIFEST still wins
expect_rc 1 env KB_MANIFEST="$KB_TMP/none.json" ../lone/kb sources
contains "$out" "cannot open '$KB_TMP/none.json'"
echo ok
