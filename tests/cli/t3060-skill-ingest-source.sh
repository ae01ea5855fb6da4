#!/usr/bin/env bash
# tier: ci
# The skill library is a source of the manifest ("local": read from beside
# corpus/sources.json, with or without a mirror), so a plain 'kb ingest'
# brings it in as kind skill under source 'skills', keyed and reported as
# corpus/skills/... from any working directory; 'kb ingest skills' names the
# source, not kb's own skills/ folder. Near-duplicate skills (the same
# kernel.cu for the same task and bottleneck, or description and "When to
# apply" embedded at cosine >= 0.98) are flagged at ingest: a warning on
# stderr and the pairs in --json's near_duplicates; distinct skills are not.
. "$(dirname "$0")/lib.sh"
cd "$KB_TOP"
n=$(ls -d corpus/skills/*/ | wc -l)

# the library alone, by its id, from kb's own tree (which has a skills/ folder)
expect_json 0 kb ingest --no-embed --json skills
[ "$(json_get "$out" "j['sources'], j['near_duplicates']")" = "1 []" ] || fail "ingest skills: $out"
[ "$(sql "SELECT count(*) FROM documents WHERE source_id = 'skills' AND path LIKE 'corpus/skills/%/SKILL.md'")" -eq "$n" ] ||
    fail "not every SKILL.md is a document of source skills"
[ "$(sql "SELECT count(*) FROM documents WHERE path LIKE 'skills/%.c'")" -eq 0 ] || fail "kb's skills/ sources were ingested"
[ "$(sql "SELECT DISTINCT c.kind FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path LIKE '%/SKILL.md'")" = skill ] ||
    fail "SKILL.md chunks are not of kind skill"
[ "$(sql "SELECT url FROM documents WHERE path = 'corpus/skills/online-softmax/SKILL.md'")" = \
  "file://$KB_TOP/corpus/skills/online-softmax/SKILL.md" ] || fail "local url"
# the same keys through the manifest's absolute path from elsewhere: unchanged
(cd "$KB_TMP" && expect_json 0 kb ingest --no-embed --json --manifest "$MANIFEST" skills
 [ "$(json_get "$out" "j['documents_changed'], j['documents_unchanged']")" = "0 $(sql "SELECT count(*) FROM documents WHERE source_id = 'skills'")" ] ||
     fail "re-ingest from another directory: $out") || exit 1
# kb's skills/ folder is still reachable as a path
expect_json 0 kb ingest --no-embed --json ./skills/skill.h
[ "$(sql "SELECT count(*) FROM documents WHERE source_id = 'local' AND path = '$(realpath ./skills/skill.h)'")" -eq 1 ] || fail "./skills/skill.h"
expect_rc 0 kb sources --json
[ "$(json_get "$out" "[(s['state'], s['local']) for s in j['sources'] if s['id'] == 'skills']")" = "[('ingested', ['skills/'])]" ] ||
    fail "kb sources: $out"

# a plain 'kb ingest' (the whole manifest, with the mirror) includes it
if [ -n "${KB_MIRROR:-}" ] && [ -f "$KB_MIRROR/MANIFEST.json" ]; then
    expect_json 0 kb --kb "$KB_TMP/all" ingest --no-embed --json
    [ "$(json_get "$out" "j['sources'], j['sources_failed']")" = \
      "$(python3 -c "import json; print(len(json.load(open('$MANIFEST'))['sources']))") 0" ] || fail "kb ingest: $out"
    [ "$(sqlite3 -readonly "$KB_TMP/all/kb.sqlite" "SELECT count(*) FROM documents WHERE source_id = 'skills' AND path LIKE '%/SKILL.md'")" -eq "$n" ] ||
        fail "plain kb ingest: the skills are missing"
fi

# a library with near-duplicates, in a manifest of its own
lib="$KB_TMP/m/skills"
mkdir -p "$lib"
printf '{"sources":[{"id":"skills","title":"t","local":["skills/"],"format":"skill"}]}' >"$KB_TMP/m/sources.json"
for s in online-softmax smem-tiled-transpose fused-gemm-epilogue; do cp -rL "corpus/skills/$s" "$lib/"; done
# a copy under another name: the same kernel, task and bottleneck
cp -r "$lib/smem-tiled-transpose" "$lib/transpose-copy"
sed -i 's/^name: smem-tiled-transpose/name: transpose-copy/; s/^# smem-tiled-transpose/# transpose-copy/' "$lib/transpose-copy/SKILL.md"
# the same text as online-softmax with another kernel: only the embedding says so
cp -r "$lib/online-softmax" "$lib/softmax-reworded"
sed -i 's/^name: online-softmax/name: softmax-reworded/; s/^# online-softmax/# softmax-reworded/' "$lib/softmax-reworded/SKILL.md"
echo '// another kernel' >>"$lib/softmax-reworded/kernel.cu"
KB_DIR="$KB_TMP/dups" expect_json 0 kb ingest --json --manifest "$KB_TMP/m/sources.json"
dups=$(json_get "$out" "sorted((tuple(d['skills']), d['reason']) for d in j['near_duplicates'])")
[ "$dups" = "[(('online-softmax', 'softmax-reworded'), 'embedding'), (('smem-tiled-transpose', 'transpose-copy'), 'kernel')]" ] ||
    fail "near-duplicates: $out"
[ "$(json_get "$out" "[d['cosine'] >= 0.98 for d in j['near_duplicates'] if d['reason'] == 'embedding']")" = "[True]" ] ||
    fail "cosine: $out"
[ "$(json_get "$out" "[d['paths'] for d in j['near_duplicates'] if d['reason'] == 'kernel']")" = \
  "[['m/skills/smem-tiled-transpose/SKILL.md', 'm/skills/transpose-copy/SKILL.md']]" ] || fail "paths: $out"
err=$(cat "$KB_TMP/.stderr")
contains "$err" "skills 'smem-tiled-transpose' and 'transpose-copy' look like one: the same kernel.cu for task 'transpose'"
contains "$err" "skills 'online-softmax' and 'softmax-reworded' look like one: their description and 'When to apply' embed at cosine"
# unchanged on a second pass and still flagged (the warning is of the
# library, not of the write); without embedding, by the kernel rule only
KB_DIR="$KB_TMP/dups" expect_json 0 kb ingest --json --no-embed --manifest "$KB_TMP/m/sources.json"
[ "$(json_get "$out" "j['documents_changed'], [(d['reason'], d['cosine']) for d in j['near_duplicates']]")" = "0 [('kernel', None)]" ] ||
    fail "second pass: $out"
# the plain output says it too
KB_DIR="$KB_TMP/dups" expect_rc 0 kb ingest --no-embed --manifest "$KB_TMP/m/sources.json"
contains "$out" "look like one"
# distinct skills, embedded and compared: none flagged
rm -rf "$lib/transpose-copy" "$lib/softmax-reworded"
KB_DIR="$KB_TMP/dups" expect_json 0 kb ingest --json --manifest "$KB_TMP/m/sources.json"
[ "$(json_get "$out" "j['near_duplicates'], j['documents_removed']")" = "[] 4" ] || fail "distinct: $out"
# a local path that is not there fails that source alone, clearly
printf '{"sources":[{"id":"gone","local":["nope/"]}]}' >"$KB_TMP/m/gone.json"
KB_DIR="$KB_TMP/dups" expect_rc 1 kb ingest --no-embed --manifest "$KB_TMP/m/gone.json"
contains "$out" "cannot find 'nope/' beside the manifest '$KB_TMP/m/gone.json'"
# bad local sources
printf '{"sources":[{"id":"x","local":["../up/"]}]}' >"$KB_TMP/m/bad.json"
expect_rc 1 kb ingest --no-embed --manifest "$KB_TMP/m/bad.json"
contains "$out" "source 'x' has a bad local path"
printf '{"sources":[{"id":"x","local":["s/"],"mirror":["s/"]}]}' >"$KB_TMP/m/bad.json"
expect_rc 1 kb ingest --no-embed --manifest "$KB_TMP/m/bad.json"
contains "$out" "has \"local\" and also \"mirror\""
echo "ok"
