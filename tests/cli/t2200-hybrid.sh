#!/usr/bin/env bash
# tier: ci
# Semantic and hybrid retrieval with the real model: the FAISS index is
# rebuilt when missing, stale or corrupt; another embedder is refused; an
# interrupted embedding pass resumes.
. "$(dirname "$0")/lib.sh"
need_mirror
use_kb cbp   # kb ingest -q --manifest "$MANIFEST" cuda-best-practices
chunks=$(sql "SELECT count(*) FROM chunks")
[ "$(sql "SELECT count(*) FROM embeddings")" -eq "$chunks" ] || fail "not every chunk has a vector"
[ "$(sql "SELECT count(*) FROM embeddings WHERE length(vec) <> 384 * 4")" -eq 0 ] || fail "vector size"
[ "$(sql "SELECT value FROM meta WHERE key='embedder'")" = all-MiniLM-L6-v2 ] || fail "embedder not recorded"
ls "$KB_DIR"/vectors.*.faiss >/dev/null || fail "no FAISS file"

# meaning, not words: no query word names the section
semantic="why is my kernel slow when each thread reads a column"
expect_json 0 kb query --mode vector --json -k 5 "$semantic"
json_get "$out" "' '.join(' / '.join(r['heading_path']) + r['text'] for r in j['results'])" | grep -iE "coalesc|strided" >/dev/null ||
    fail "vector search missed coalescing: $out"
[ "$(json_get "$out" "j['results'][0]['vector_rank']")" = 1 ] || fail "vector_rank"
[ "$(json_get "$out" "j['results'][0]['lexical_rank']")" = None ] || fail "lexical_rank in vector mode"
expect_json 0 kb query --json -k 10 "$semantic"
[ "$(json_get "$out" "j['mode']")" = hybrid ] || fail "default mode is hybrid"
json_get "$out" "[r for r in j['results'] if r['lexical_rank'] and r['vector_rank']][0]" >/dev/null ||
    fail "no result from both lists"
# each list's rank is the place of the result's section in that list, as
# fusion counted it (the section may come first there through another chunk)
hybrid=$out
expect_json 0 kb query --mode vector --json -k 10 "$semantic"
python3 - "$hybrid" "$out" <<'PY' || fail "hybrid vector_rank is not the section's place in the vector list"
import json, sys
hyb, vec = (json.loads(a) for a in sys.argv[1:3])
key = lambda r: (r['path'], tuple(r['heading_path']))
place = {key(r): i + 1 for i, r in enumerate(vec['results'])}
checked = 0
for r in hyb['results']:
    if key(r) in place:
        assert r['vector_rank'] == place[key(r)], (r['chunk_id'], r['vector_rank'], place[key(r)])
        checked += 1
assert checked >= 3, checked
PY
expect_rc 0 kb query --explain -k 3 "$semantic"
contains "$out" "lexical #"
contains "$out" "vector #"
contains "$out" "query embedding"   # where the time went

# filters apply before top-k in vector mode too
expect_json 0 kb query --mode vector --json -k 5 --kind code "$semantic"
[ "$(json_get "$out" "set(r['kind'] for r in j['results'])")" = "{'code'}" ] || fail "vector --kind"

# a missing, a stale and a corrupt FAISS file are rebuilt from SQLite
expect_json 0 kb query --mode vector --json -k 5 "pinned host memory"
want=$(json_get "$out" "[r['chunk_id'] for r in j['results']]")
rm -f "$KB_DIR"/vectors.*.faiss
expect_json 0 kb query --mode vector --json -k 5 "pinned host memory"
[ "$(json_get "$out" "[r['chunk_id'] for r in j['results']]")" = "$want" ] || fail "after removing the index"
ls "$KB_DIR"/vectors.*.faiss >/dev/null || fail "index not rewritten"
f=$(ls "$KB_DIR"/vectors.*.faiss)
head -c 5000 /dev/urandom > "$f"
expect_json 0 kb query --mode vector --json -k 5 "pinned host memory"
[ "$(json_get "$out" "[r['chunk_id'] for r in j['results']]")" = "$want" ] || fail "after corrupting the index"
# stale: the file of an older generation is never used
gen=$(sql "SELECT value FROM meta WHERE key='vec_generation'")
cp "$(ls "$KB_DIR"/vectors.*.faiss)" "$KB_TMP/old.faiss"
printf '# Extra\n\nPage-locked host buffers speed up copies a lot.\n' > "$KB_TMP/extra.md"
expect_rc 0 kb ingest -q "$KB_TMP/extra.md"
[ "$(sql "SELECT value FROM meta WHERE key='vec_generation'")" -gt "$gen" ] || fail "generation did not move"
rm -f "$KB_DIR"/vectors.*.faiss
cp "$KB_TMP/old.faiss" "$KB_DIR/vectors.$gen.faiss"
expect_json 0 kb query --mode vector --json -k 20 "page-locked host buffers speed up copies"
[ "$(json_get "$out" "'local' in [r['source'] for r in j['results']]")" = True ] || fail "stale index used"

# another embedder: a clear error, not wrong results
sqlite3 "$KB_DIR/kb.sqlite" "UPDATE meta SET value='0000' WHERE key='embedder_hash'"
expect_rc 1 kb query --mode vector "pinned memory"
contains "$out" "--reembed"
expect_rc 0 kb ingest -q --reembed --manifest "$MANIFEST" cuda-best-practices
expect_rc 0 kb query --mode vector "pinned memory"

# a re-parsed document keeps the vectors of the chunks it did not change
before=$(sql "SELECT count(*) FROM embeddings")
expect_rc 0 kb ingest -q --force --no-embed --manifest "$MANIFEST" cuda-best-practices
missing=$(sql "SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.chunk_id=c.id)")
[ "$missing" -eq 0 ] || fail "forced re-ingest of unchanged chunks lost $missing vectors"
[ "$(sql "SELECT count(*) FROM embeddings")" -eq "$before" ] || fail "vectors after a forced re-ingest"
expect_json 0 kb query --mode vector --json -k 5 "pinned host memory"
[ "$(json_get "$out" "len(j['results'])")" -eq 5 ] || fail "vector search after the vectors were kept"

# an interrupted embedding pass resumes where it stopped
sqlite3 "$KB_DIR/kb.sqlite" "DELETE FROM embeddings WHERE chunk_id IN (SELECT c.id FROM
     chunks c JOIN documents d ON d.id = c.document_id WHERE d.source_id = 'cuda-best-practices')"
missing=$(sql "SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.chunk_id=c.id)")
[ "$missing" -gt 100 ] || fail "dropping the guide's vectors should leave chunks without them ($missing)"
"$KB_BIN" ingest -q --manifest "$MANIFEST" cuda-best-practices & pid=$!
# kill it once some batches are committed, well before the end
for _ in $(seq 600); do
    n=$(sql "SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.chunk_id=c.id)")
    [ "$n" -lt "$missing" ] && break
    sleep 0.1
done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
left=$(sql "SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.chunk_id=c.id)")
[ "$left" -lt "$missing" ] || fail "the killed pass embedded nothing ($left of $missing left)"
[ "$left" -gt 0 ] || fail "the pass ended before it was killed: the resume went untested"
expect_json 0 kb ingest --json --manifest "$MANIFEST" cuda-best-practices
[ "$(json_get "$out" "j['chunks_embedded']")" -eq "$left" ] || fail "resume embedded $(json_get "$out" "j['chunks_embedded']"), wanted $left"
[ "$(sql "SELECT count(*) FROM embeddings")" -eq "$(sql "SELECT count(*) FROM chunks")" ] || fail "vectors after resume"

# an ANN index by option
expect_rc 0 kb ingest -q --index HNSW32 --manifest "$MANIFEST" cuda-best-practices
[ "$(sql "SELECT value FROM meta WHERE key='vec_index'")" = HNSW32 ] || fail "index kind not recorded"
expect_json 0 kb query --mode vector --json -k 5 "$semantic"
[ "$(json_get "$out" "len(j['results'])")" -eq 5 ] || fail "HNSW search"
grep -qa IHNf "$KB_DIR"/vectors.*.faiss || fail "the index file holds no HNSW index"

# a lexical-only KB: vector mode is a clear error, hybrid answers lexically
export KB_DIR="$KB_TMP/lexonly"
expect_rc 0 kb ingest -q --no-embed --manifest "$MANIFEST" hopper-tuning-guide
expect_rc 1 kb query --mode vector "thread block clusters"
contains "$out" "no vectors"
expect_json 0 kb query --json "thread block clusters"
[ "$(json_get "$out" "j['mode']")" = lexical ] || fail "fallback mode"
# a missing model: one clear error naming the fix, before anything is
# written (the embedder is opened first; exit 3 is for an embedding that
# fails after the documents were stored: t1050)
before=$(sql "SELECT max(id) FROM chunks")
expect_rc 1 env KB_MODEL_DIR="$KB_TMP/nomodel" "$KB_BIN" ingest -q --manifest "$MANIFEST" hopper-tuning-guide --force
contains "$out" "kb model fetch"
lacks "$out" "stored but not embedded"
[ "$(sql "SELECT max(id) FROM chunks")" = "$before" ] ||
    fail "documents were written though the model was missing"
echo ok
