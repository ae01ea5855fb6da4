#!/usr/bin/env bash
# tier: ci
# Incremental ingest: unchanged documents are skipped, changed ones replace
# their chunks, removed ones go.
. "$(dirname "$0")/lib.sh"
need_mirror
mirror="$KB_TMP/mirror"
mkdir -p "$mirror/docs"
cp "$KB_TOP/tests/fixtures/md/basic.md" "$mirror/docs/a.md" 2>/dev/null ||
    printf '# Alpha\n\nFirst text about warps.\n\n## Beta\n\nSecond text about banks.\n' > "$mirror/docs/a.md"
printf '# Gamma\n\nShared memory bank conflicts happen when threads hit one bank.\n' > "$mirror/docs/b.md"
cat > "$KB_TMP/m.json" <<JSON
{"sources":[{"id":"docs","title":"Docs","url":"https://example.org/docs","mirror":["docs/"],"format":"markdown","version":"1"}]}
JSON
expect_json 0 kb ingest --manifest "$KB_TMP/m.json" --mirror "$mirror" --no-embed --json
[ "$(json_get "$out" "j['documents_changed']")" -eq 2 ] || fail "first ingest: $out"

expect_json 0 kb ingest --manifest "$KB_TMP/m.json" --mirror "$mirror" --no-embed --json
[ "$(json_get "$out" "j['documents_unchanged']")" -eq 2 ] || fail "re-ingest should skip: $out"
[ "$(json_get "$out" "j['documents_changed']")" -eq 0 ] || fail "re-ingest changed: $out"

# documents stored by an older kb (whose hash did not cover the ingest
# version) are read again once, then skipped again
sqlite3 "$KB_DIR/kb.sqlite" "UPDATE documents SET content_hash = 'from-an-older-kb'"
expect_json 0 kb ingest --manifest "$KB_TMP/m.json" --mirror "$mirror" --no-embed --json
[ "$(json_get "$out" "j['documents_changed']")" -eq 2 ] || fail "old-version documents not re-read: $out"
expect_json 0 kb ingest --manifest "$KB_TMP/m.json" --mirror "$mirror" --no-embed --json
[ "$(json_get "$out" "j['documents_unchanged']")" -eq 2 ] || fail "second pass re-read: $out"

# a folder's files cited under files_url once the manifest gives one; the
# unchanged documents are re-pointed, not re-read
[ "$(sql "SELECT url FROM documents WHERE key LIKE '%b.md'")" = "https://example.org/docs/b.md" ] || fail "url before files_url"
cat > "$KB_TMP/m2.json" <<JSON
{"sources":[{"id":"docs","title":"Docs","url":"https://example.org/docs","files_url":"https://example.org/blob/v1/docs/","mirror":["docs/"],"format":"markdown","version":"1"}]}
JSON
expect_json 0 kb ingest --manifest "$KB_TMP/m2.json" --mirror "$mirror" --no-embed --json
[ "$(json_get "$out" "j['documents_unchanged']")" -eq 2 ] || fail "files_url re-read documents: $out"
[ "$(sql "SELECT url FROM documents WHERE key LIKE '%b.md'")" = "https://example.org/blob/v1/docs/b.md" ] || fail "url after files_url: $(sql "SELECT url FROM documents")"

# change one, remove the other
printf '# Gamma\n\nNow about tensor memory accelerators instead.\n' > "$mirror/docs/b.md"
rm "$mirror/docs/a.md"
expect_json 0 kb ingest --manifest "$KB_TMP/m.json" --mirror "$mirror" --no-embed --json
[ "$(json_get "$out" "j['documents_changed']")" -eq 1 ] || fail "changed: $out"
[ "$(json_get "$out" "j['documents_removed']")" -eq 1 ] || fail "removed: $out"
expect_json 0 kb query --mode lexical --json "tensor memory accelerators"
[ "$(json_get "$out" "len(j['results'])")" -ge 1 ] || fail "new text not found"
expect_json 0 kb query --mode lexical --json "bank conflicts"
[ "$(json_get "$out" "len(j['results'])")" -eq 0 ] || fail "old text still found: $out"
[ "$(sql "SELECT count(*) FROM chunks")" -eq "$(sql "SELECT count(*) FROM chunks_fts")" ] || fail "fts out of step"

# ad-hoc folders: documents under source 'local', cited by file:// URL and path
mkdir -p "$KB_TMP/notes/sub"
printf '# Notes\n\nWarp level primitives need a full mask.\n' > "$KB_TMP/notes/sub/n.md"
expect_rc 0 kb ingest -q --no-embed "$KB_TMP/notes"
expect_json 0 kb query --mode lexical --json "warp level primitives full mask"
[ "$(json_get "$out" "j['results'][0]['source']")" = local ] || fail "ad-hoc source: $out"
[ "$(json_get "$out" "j['results'][0]['url']")" = "file://$(realpath "$KB_TMP")/notes/sub/n.md#notes" ] || fail "ad-hoc url: $out"
[ "$(json_get "$out" "j['results'][0]['path']")" = "$KB_TMP/notes/sub/n.md" ] || fail "ad-hoc path: $out"

# the whole corpus: a re-ingest of unchanged documents takes at most 5 s
expect_rc 0 kb ingest --manifest "$MANIFEST" --no-embed -q
start=$(date +%s.%N)
expect_json 0 kb ingest --manifest "$MANIFEST" --no-embed --json
secs=$(python3 -c "print($(date +%s.%N) - $start)")
[ "$(json_get "$out" "j['documents_changed']")" -eq 0 ] || fail "corpus re-ingest changed documents: $out"
python3 -c "import sys; sys.exit(0 if $secs <= 5 else 1)" || fail "re-ingest took ${secs}s (budget 5 s)"
echo "ok: unchanged corpus re-ingest ${secs}s"
