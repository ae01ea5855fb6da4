#!/usr/bin/env bash
# tier: quick
# Ad-hoc files and folders (issue 14): one document per file however it is
# spelt, a folder read again drops its deleted files, an unreadable
# subfolder fails alone, kb rm, --source that is the manifest's, ad-hoc
# sources in kb sources, a bad --index refused before anything is stored,
# a failed first ingest leaves no KB, "did you mean" for a source.
. "$(dirname "$0")/lib.sh"
cd "$KB_TMP"
mkdir -p notes/sub notes/locked
printf '# Notes\n\nWarp shuffles reduce within a warp.\n' >notes/notes.md
printf '# Banks\n\nShared memory bank conflicts serialise accesses.\n' >notes/sub/banks.md
printf '# Locked\n\nTensor memory accelerator copies tiles.\n' >notes/locked/tma.md

# a first ingest that fails leaves no KB behind
expect_rc 1 kb ingest --no-embed nowhere.md
[ ! -e "$KB_DIR" ] || fail "a failed first ingest left '$KB_DIR': $(ls -A "$KB_DIR")"
expect_rc 1 kb ingest --no-embed --manifest "$MANIFEST" ptx_isa
contains "$out" "did you mean 'ptx-isa'?"
lacks "$out" "ingested 0 sources"

# one file, three spellings, one document; keys and paths are real paths
expect_rc 0 kb -q ingest --no-embed notes/notes.md
expect_rc 0 kb -q ingest --no-embed ./notes/notes.md "$KB_TMP/notes/notes.md"
ln -s notes/notes.md link.md
expect_rc 0 kb -q ingest --no-embed link.md
[ "$(sql "SELECT count(*) FROM documents")" = 1 ] || fail "one file became: $(sql "SELECT key FROM documents")"
real=$(realpath notes/notes.md)
[ "$(sql "SELECT key || '|' || path FROM documents")" = "$real|$real" ] || fail "key and path: $(sql "SELECT key, path FROM documents")"

# a folder read again: deleted files go, vectors and all
expect_rc 0 kb -q ingest --no-embed notes
[ "$(sql "SELECT count(*) FROM documents")" = 3 ] || fail "the folder: $(sql "SELECT key FROM documents")"
rm notes/sub/banks.md
expect_json 0 kb ingest --no-embed --json notes
[ "$(json_get "$out" "j['documents_removed']")" = 1 ] || fail "deleted file not removed: $out"
expect_json 0 kb query --mode lexical --json "bank conflicts serialise"
[ "$(json_get "$out" "len(j['results'])")" = 0 ] || fail "a deleted file is still found: $out"
[ "$(sql "SELECT count(*) FROM chunks")" = "$(sql "SELECT count(*) FROM chunks_fts")" ] || fail "fts out of step"

# an unreadable subfolder fails alone (exit 3), the rest is read, and what
# lies under it is kept, not pruned as gone
if [ "$(id -u)" = 0 ]; then
    as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups env KB_DIR="$KB_DIR" "$@"; }
    chmod -R a+rwX "$KB_TMP"
    chmod a+x "$(dirname "$KB_TMP")" 2>/dev/null || true
else
    as_user() { "$@"; }
fi
printf '# More\n\nCooperative groups sync tiles.\n' >notes/more.md
chmod 000 notes/locked
expect_rc 3 as_user "$KB_BIN" ingest --no-embed notes
contains "$out" "cannot open folder '$(realpath notes)/locked'"
chmod 755 notes/locked
[ "$(sql "SELECT count(*) FROM documents WHERE key LIKE '%/locked/tma.md'")" = 1 ] ||
    fail "a file under the unreadable folder was removed"
[ "$(sql "SELECT count(*) FROM documents WHERE key LIKE '%/more.md'")" = 1 ] ||
    fail "the readable files were not ingested"

# --source: never a source of the manifest; ad-hoc sources are listed
expect_rc 2 kb ingest --no-embed --manifest "$MANIFEST" --source ptx-isa notes/more.md
contains "$out" "--source 'ptx-isa' is a source of the manifest"
expect_rc 0 kb -q ingest --no-embed --source my-notes notes/more.md
expect_json 0 kb sources --manifest "$MANIFEST" --json
[ "$(json_get "$out" "[s['state'] for s in j['sources'] if s['id'] == 'my-notes'][0]")" = ad-hoc ] ||
    fail "kb sources hides ad-hoc sources: $out"
expect_rc 0 kb sources --manifest "$MANIFEST"
contains "$out" "local"
contains "$out" "ad-hoc"

# kb rm: a dry run removes nothing; a deleted file by its old path; a
# folder; a source; all in one transaction, or nothing
n=$(sql "SELECT count(*) FROM documents")
expect_rc 0 kb rm --dry-run notes
contains "$out" "would remove $(realpath notes)/notes.md"
[ "$(sql "SELECT count(*) FROM documents")" = "$n" ] || fail "--dry-run removed something"
rm notes/notes.md
expect_rc 1 kb rm notes/notes.md nosuch-source
contains "$out" "'nosuch-source' matches nothing in the KB"
[ "$(sql "SELECT count(*) FROM documents")" = "$n" ] || fail "a failed kb rm removed something"
expect_rc 0 kb rm notes/notes.md
contains "$out" "removed 1 document"
[ "$(sql "SELECT count(*) FROM documents WHERE key = '$real'")" = 0 ] || fail "the file is still there"
# a folder here of the source's name, holding nothing ingested: the source
mkdir -p my-notes
expect_json 0 kb rm --dry-run --json my-notes
[ "$(json_get "$out" "[t['what'] for t in j['removed']]")" = "['source']" ] || fail "a folder of a source's name: $out"
rmdir my-notes
expect_json 0 kb rm --json my-notes notes/locked
[ "$(json_get "$out" "[t['what'] for t in j['removed']]")" = "['source', 'folder']" ] || fail "rm targets: $out"
[ "$(sql "SELECT count(*) FROM sources WHERE id = 'my-notes'")" = 0 ] || fail "the source is still there"
[ "$(sql "SELECT count(*) FROM documents WHERE key LIKE '%/locked/%'")" = 0 ] || fail "the folder is still there"
[ "$(sql "SELECT count(*) FROM chunks")" = "$(sql "SELECT count(*) FROM chunks_fts")" ] || fail "fts out of step"

# vectors go with their documents, and the index follows
expect_rc 0 kb -q ingest notes
[ "$(sql "SELECT count(*) FROM embeddings")" = "$(sql "SELECT count(*) FROM chunks")" ] || fail "not embedded"
expect_rc 0 kb -q rm notes/more.md
[ "$(sql "SELECT count(*) FROM embeddings")" = "$(sql "SELECT count(*) FROM chunks")" ] || fail "vectors left behind"
expect_json 0 kb query --mode vector --json "cooperative groups sync tiles"
lacks "$out" "more.md"

# a bad --index is refused before anything is stored, once, plainly
gen=$(sql "SELECT value FROM meta WHERE key = 'vec_generation'")
printf '# New\n\nClusters of thread blocks.\n' >notes/new.md
expect_rc 2 kb ingest --index Bogus notes
contains "$out" "bad --index 'Bogus'"
[ "$(printf '%s\n' "$out" | grep -c "could not parse index string")" = 1 ] || fail "the error came more than once: $out"
lacks "$out" "index_factory.cpp"
[ "$(sql "SELECT count(*) FROM meta WHERE key = 'vec_index'")" = 0 ] || fail "vec_index was stored"
[ "$(sql "SELECT count(*) FROM documents WHERE key LIKE '%/new.md'")" = 0 ] || fail "documents were stored"
# one that cannot be built (IVF4096 over a handful) keeps the old index
expect_rc 1 kb ingest --index IVF4096,Flat notes
contains "$out" "the vector index stays 'Flat'"
[ "$(sql "SELECT count(*) FROM meta WHERE key = 'vec_index'")" = 0 ] || fail "vec_index was stored"
expect_json 0 kb query --json "thread block clusters"
[ "$(json_get "$out" "j['mode']")" = hybrid ] || fail "hybrid broke: $out"
expect_rc 0 kb -q ingest --index HNSW32 notes
[ "$(sql "SELECT value FROM meta WHERE key = 'vec_index'")" = HNSW32 ] || fail "HNSW32 not set"
expect_rc 0 kb status
contains "$out" "index HNSW32"
expect_json 0 kb query --mode vector --json "thread block clusters"
contains "$out" "new.md"
echo ok
