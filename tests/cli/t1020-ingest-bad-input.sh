#!/usr/bin/env bash
# tier: ci
# Bad input gets a clear error and loses nothing.
. "$(dirname "$0")/lib.sh"
need_mirror
# a good document first, so there is something to lose
printf '# Keep\n\nThis text about occupancy must survive every failure below.\n' > "$KB_TMP/keep.md"
expect_rc 0 kb ingest --no-embed "$KB_TMP/keep.md"
before=$(sql "SELECT count(*) FROM chunks")
survives() {
    expect_json 0 kb query --mode lexical --json "occupancy survive"
    [ "$(json_get "$out" "len(j['results'])")" -ge 1 ] || fail "the good document was lost after: $1"
}

# missing manifest
expect_rc 1 kb ingest --no-embed --manifest "$KB_TMP/nope.json"
contains "$out" "cannot open '$KB_TMP/nope.json'"
# malformed manifest
printf '{"sources": [ {"id": "x", ' > "$KB_TMP/bad.json"
expect_rc 1 kb ingest --no-embed --manifest "$KB_TMP/bad.json"
contains "$out" "is not valid JSON"
printf '{"sources": [{"id": "has space", "url": "https://x"}]}' > "$KB_TMP/badid.json"
expect_rc 1 kb ingest --no-embed --manifest "$KB_TMP/badid.json"
contains "$out" "invalid \"id\""
# an unknown source id
expect_rc 1 kb ingest --no-embed --manifest "$MANIFEST" no-such-source
contains "$out" "'no-such-source' is neither a source"
# a valid id before an unknown one: nothing is written for either
expect_rc 1 kb --kb "$KB_TMP/fresh" ingest --no-embed --manifest "$MANIFEST" ptx-isa no-such-source
contains "$out" "'no-such-source' is neither a source"
if [ -f "$KB_TMP/fresh/kb.sqlite" ]; then
    [ "$(sqlite3 -readonly "$KB_TMP/fresh/kb.sqlite" "SELECT count(*) FROM sources WHERE id = 'ptx-isa'")" = 0 ] ||
        fail "ptx-isa was recorded though a later target was unknown"
fi
survives "bad manifests"

# an unreachable URL: a clear error; nothing was ingested, so exit status 1
expect_rc 1 kb ingest --no-embed http://127.0.0.1:9/missing.html
contains "$out" "nothing could be ingested"
contains "$out" "cannot fetch 'http://127.0.0.1:9/missing.html'"
survives "unreachable URL"

# a source whose mirror file is missing fails alone; the others proceed
cat > "$KB_TMP/two.json" <<JSON
{"sources":[{"id":"gone","title":"Gone","url":"https://example.org/gone","mirror":["nowhere/x.md"],"format":"markdown"},
            {"id":"here","title":"Here","url":"https://example.org/here","mirror":["here.md"],"format":"markdown"}]}
JSON
mkdir -p "$KB_TMP/m"; printf '# Here\n\nWarp specialization producer consumer.\n' > "$KB_TMP/m/here.md"
expect_rc 3 kb ingest --no-embed --manifest "$KB_TMP/two.json" --mirror "$KB_TMP/m"
contains "$out" "gone"
contains "$out" "nowhere/x.md"
expect_json 0 kb query --mode lexical --json "warp specialization producer"
[ "$(json_get "$out" "j['results'][0]['source']")" = here ] || fail "the good source was not ingested"
# failing sources each record their own error, not the first one's: a
# missing mirror file, and two documents that do not parse
printf 'bin\0one' > "$KB_TMP/m/bin1.md"; printf 'bin\0two' > "$KB_TMP/m/bin2.md"
cat > "$KB_TMP/threebad.json" <<JSON
{"sources":[{"id":"lost","title":"Lost","url":"https://example.org/l","mirror":["nowhere/lost.md"],"format":"markdown"},
            {"id":"bin1","title":"Bin 1","url":"https://example.org/b1","mirror":["bin1.md"],"format":"markdown"},
            {"id":"bin2","title":"Bin 2","url":"https://example.org/b2","mirror":["bin2.md"],"format":"markdown"}]}
JSON
expect_rc 1 kb ingest --no-embed --manifest "$KB_TMP/threebad.json" --mirror "$KB_TMP/m"
contains "$out" "first failure: cannot find 'nowhere/lost.md'"
e=$(sql "SELECT last_error FROM sources WHERE id = 'lost'"); contains "$e" "cannot find 'nowhere/lost.md'"
e=$(sql "SELECT last_error FROM sources WHERE id = 'bin1'"); contains "$e" "bin1.md"; lacks "$e" "lost.md"
e=$(sql "SELECT last_error FROM sources WHERE id = 'bin2'"); contains "$e" "bin2.md"; lacks "$e" "bin1.md"

# the same source, read from its mirror, then from its URL that does not
# answer: the failed pass removes nothing
cat > "$KB_TMP/mirrored.json" <<JSON
{"sources":[{"id":"mirrored","title":"Mirrored","url":"http://127.0.0.1:9/here.md","mirror":["here.md"],"format":"markdown"}]}
JSON
expect_rc 0 kb ingest --no-embed --manifest "$KB_TMP/mirrored.json" --mirror "$KB_TMP/m"
[ "$(sql "SELECT count(*) FROM documents WHERE source_id = 'mirrored'")" = 1 ] || fail "mirrored source not ingested"
KB_MIRROR= expect_rc 1 kb ingest --no-embed --manifest "$KB_TMP/mirrored.json"
contains "$out" "cannot fetch 'http://127.0.0.1:9/here.md'"
[ "$(sql "SELECT count(*) FROM documents WHERE source_id = 'mirrored'")" = 1 ] || fail "a failed fetch removed the mirrored document"

# a folder source without a mirror is not fetched: its URL is a web page
cat > "$KB_TMP/folder.json" <<JSON
{"sources":[{"id":"tree","title":"Tree","url":"http://127.0.0.1:9/tree/docs","mirror":["docs/"],"format":"markdown"}]}
JSON
KB_MIRROR= expect_rc 1 kb ingest --no-embed --manifest "$KB_TMP/folder.json"
contains "$out" "source 'tree' is a folder ('docs/'): it is read from a mirror"

# binary data named .html
head -c 4096 /dev/urandom > "$KB_TMP/binary.html"
expect_rc 1 kb ingest --no-embed "$KB_TMP/binary.html"
contains "$out" "'$KB_TMP/binary.html' does not look like HTML (binary data)"
survives "binary HTML"
# truncated HTML: recovered, what is there is searchable
printf '<html><body><section id="s1"><h1>Truncated page</h1><p>Cooperative groups grid sync explained' > "$KB_TMP/trunc.html"
expect_rc 0 kb ingest --no-embed "$KB_TMP/trunc.html"
expect_json 0 kb query --mode lexical --json "cooperative groups grid sync"
[ "$(json_get "$out" "len(j['results'])")" -ge 1 ] || fail "truncated HTML lost its text"
# an empty Markdown file: no chunks, no error
: > "$KB_TMP/empty.md"
expect_rc 0 kb ingest --no-embed "$KB_TMP/empty.md"
[ "$(sql "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id
          WHERE d.key = '$KB_TMP/empty.md'")" = 0 ] || fail "the empty Markdown file stored chunks"
# a 50 MB file: refused clearly, nothing else touched
head -c 52428800 /dev/zero | tr '\0' 'a' > "$KB_TMP/huge.txt"
expect_rc 1 kb ingest --no-embed "$KB_TMP/huge.txt"
contains "$out" "too large"
survives "50 MB file"

# a KB directory that is not writable (skipped as root, who may write anyway)
if [ "$(id -u)" -ne 0 ]; then
    mkdir -p "$KB_TMP/ro"; chmod 555 "$KB_TMP/ro"
    expect_rc 1 kb --kb "$KB_TMP/ro/kb" ingest --no-embed "$KB_TMP/keep.md"
    contains "$out" "cannot create directory '$KB_TMP/ro/kb': Permission denied"
fi
# a place nobody may write, root included
expect_rc 1 kb --kb /proc/kb-test ingest --no-embed "$KB_TMP/keep.md"
contains "$out" "cannot create directory '/proc/kb-test'"
printf 'not a directory' > "$KB_TMP/afile"
expect_rc 1 kb --kb "$KB_TMP/afile/kb" ingest --no-embed "$KB_TMP/keep.md"
contains "$out" "cannot create directory '$KB_TMP/afile/kb'"

# a corrupted kb.sqlite: a clear error naming the file, for reads and writes
mkdir -p "$KB_TMP/bad"; head -c 8192 /dev/urandom > "$KB_TMP/bad/kb.sqlite"
expect_rc 1 kb --kb "$KB_TMP/bad" status
contains "$out" "kb.sqlite' is not a usable kb database"
expect_rc 1 kb --kb "$KB_TMP/bad" ingest --no-embed "$KB_TMP/keep.md"
contains "$out" "not a usable kb database"
# a KB that does not exist yet
expect_rc 1 kb --kb "$KB_TMP/none" query "x"
contains "$out" "run 'kb ingest' first"
[ "$(sql "SELECT count(*) FROM chunks")" -ge "$before" ] || fail "chunks were lost"
echo ok
