#!/usr/bin/env bash
# tier: quick
# What stands where kb expects its own files (issue 28 items 8 and 10): a
# FIFO named as a document, as kb.sqlite or as the vector index never
# blocks kb; a kb.sqlite link (dangling or not) is refused, never followed
# out of the KB; temp files are hidden, name their writer, and are swept
# once the writer is gone, never while it runs; a later generation's index
# file is not removed by an earlier writer. Messages outside a tree with a
# manifest: a missing file is said to be missing, a path is one escaped
# line, kb sources lists ad-hoc sources, "1 byte that is".
. "$(dirname "$0")/lib.sh"
cd "$KB_TMP"
mkdir -p docs
printf '# Banks\n\nShared memory bank conflicts serialise accesses.\n' >docs/banks.md
printf '# Shuffles\n\nA tree of shuffles sums a value across the warp.\n' >docs/shfl.md

# a FIFO given to ingest, or met in a folder: refused at once, not waited on
mkfifo pipe.md
expect_rc 1 timeout 20 "$KB_BIN" ingest --no-embed pipe.md
contains "$out" "not a regular file"
mkfifo docs/pipe.md
expect_rc 0 timeout 20 "$KB_BIN" ingest --no-embed docs   # passed over
contains "$out" "2 documents"
rm docs/pipe.md
expect_rc 0 kb sources
contains "$out" "local"
rm -rf "$KB_DIR"

# kb.sqlite: a FIFO, a dangling link, a link to a database elsewhere
mkdir -p "$KB_DIR" && chmod 700 "$KB_DIR"
mkfifo "$KB_DIR/kb.sqlite"
expect_rc 1 timeout 20 "$KB_BIN" ingest --no-embed docs
contains "$out" "kb.sqlite' is not a regular file"
expect_rc 1 timeout 20 "$KB_BIN" status
rm "$KB_DIR/kb.sqlite"
ln -s "$KB_TMP/elsewhere.sqlite" "$KB_DIR/kb.sqlite"
expect_rc 1 kb ingest --no-embed docs
contains "$out" "kb.sqlite' is a symbolic link"
[ ! -e "$KB_TMP/elsewhere.sqlite" ] || fail "the database was created through a dangling link"
rm -rf "$KB_DIR"

# the vector index a FIFO: rebuilt, the query answered
if [ "${KB_MODEL_DIR-unset}" != "" ]; then
    expect_rc 0 kb ingest -q docs
    f=$(ls "$KB_DIR"/vectors.*.faiss) || fail "no FAISS file"
    gen=${f##*/vectors.}; gen=${gen%.faiss}
    rm "$f" && mkfifo "$f"
    expect_json 0 timeout 30 "$KB_BIN" query --mode vector --json -k 2 "bank conflicts"
    [ "$(json_get "$out" "len(j['results'])")" = 2 ] || fail "no results past a FIFO index: $out"
    [ -f "$f" ] && [ ! -p "$f" ] || fail "the FIFO was not replaced by the index"

    # temp files: a dead writer's swept at open, a live writer's kept; a
    # later generation's index left to its writer
    dead=$(sh -c 'echo $$')
    sleep 60 & live=$!
    printf 'x%.0s' $(seq 1000) >"$KB_DIR/.vectors.$gen.faiss.tmp.$dead.AbC123"
    printf 'y' >"$KB_DIR/.vectors.$gen.faiss.tmp.$live.dEf456"
    printf 'z' >"$KB_DIR/vectors.$((gen + 50)).faiss"
    printf '# Pinned\n\nPage-locked host buffers copy asynchronously.\n' >docs/pinned.md
    expect_rc 0 kb ingest -q docs
    [ ! -e "$KB_DIR/.vectors.$gen.faiss.tmp.$dead.AbC123" ] || fail "a killed writer's temp file was not swept"
    [ -e "$KB_DIR/.vectors.$gen.faiss.tmp.$live.dEf456" ] || fail "a running writer's temp file was removed"
    [ -e "$KB_DIR/vectors.$((gen + 50)).faiss" ] || fail "a later generation's index was removed"
    kill "$live"; wait "$live" 2>/dev/null
    # the index kb writes leaves no temp file and none that is not hidden
    ls -A "$KB_DIR" | grep -v '^\.vectors' | grep -q 'tmp' && fail "a visible temp file: $(ls -A "$KB_DIR")"
    rm -rf "$KB_DIR"
fi

# messages outside a tree with a manifest (the working folder has none;
# a copy of kb with no corpus/ beside it: build/kb finds the checkout's)
mkdir -p lone && cp "$KB_BIN" lone/kb
expect_rc 1 lone/kb ingest --no-embed /missing.md
contains "$out" "cannot find '/missing.md': No such file or directory"
lacks "$out" "cannot open 'corpus/sources.json'"
nl="$(printf 'two\nlines.md')"
expect_rc 1 lone/kb ingest --no-embed "$nl"
contains "$out" "two\\nlines.md"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "the path's line feed printed raw: $out"
printf '# Odd\n\nA byte \377 that is not UTF-8.\n' >odd.md
expect_rc 0 kb ingest --no-embed odd.md
contains "$out" "1 byte that is not UTF-8"
expect_rc 0 lone/kb sources
contains "$out" "kb sources: no manifest"
contains "$out" "local"
contains "$out" "ad-hoc"
echo ok
