#!/usr/bin/env bash
# tier: quick
# The whole mirror through the manifest: what comes out, per source.
. "$(dirname "$0")/lib.sh"
need_mirror
expect_json 0 kb ingest --no-embed --manifest "$MANIFEST" --json
contains "$out" '"ok":true'

# every manifest source is there, each with documents and chunks
for id in $(python3 -c "import json; print(' '.join(s['id'] for s in json.load(open('$MANIFEST'))['sources']))"); do
    docs=$(sql "SELECT count(*) FROM documents WHERE source_id='$id'")
    chunks=$(sql "SELECT count(*) FROM chunks c JOIN documents d ON d.id=c.document_id WHERE d.source_id='$id'")
    [ "$docs" -ge 1 ] || fail "source $id has no documents"
    [ "$chunks" -ge 1 ] || fail "source $id has no chunks"
done
# folder sources: one document per supported file
[ "$(sql "SELECT count(*) FROM documents WHERE source_id='cuda-samples'")" -ge 35 ] || fail "cuda-samples documents"
[ "$(sql "SELECT count(*) FROM documents WHERE source_id='libcudacxx-ptx'")" -ge 100 ] || fail "libcudacxx-ptx documents"
[ "$(sql "SELECT count(*) FROM documents WHERE source_id='cutlass-docs'")" -ge 40 ] || fail "cutlass-docs documents"
# every chunk has a heading path; no chunk is empty
[ "$(sql "SELECT count(*) FROM chunks WHERE heading_path = '[]' OR text = ''")" -eq 0 ] || fail "chunks without heading path or text"
# the PTX ISA's section ids become anchors
anchors=$(sql "SELECT count(DISTINCT c.anchor) FROM chunks c JOIN documents d ON d.id=c.document_id WHERE d.source_id='ptx-isa' AND c.anchor <> ''")
[ "$anchors" -ge 600 ] || fail "ptx-isa has only $anchors distinct anchors"
# the literature list: one record per paper
papers=$(sql "SELECT count(*) FROM papers")
[ "$papers" -ge 130 ] || fail "only $papers paper records"
[ "$(sql "SELECT count(*) FROM papers WHERE date GLOB '[12][0-9][0-9][0-9]-[01][0-9]'")" -ge 125 ] || fail "paper dates"
[ "$(sql "SELECT count(*) FROM papers WHERE links LIKE '%\"paper\"%'")" -ge 75 ] || fail "paper links"
# chunks respect the size budget (word pieces, heading prefix included)
[ "$(sql "SELECT max(tokens) FROM chunks")" -le 254 ] || fail "a chunk does not fit the encoder's 256 pieces with [CLS] and [SEP]"
# code blocks are kept and marked
[ "$(sql "SELECT count(*) FROM chunks WHERE kind='code'")" -ge 300 ] || fail "too few code chunks"
[ "$(sql "SELECT count(*) FROM chunks WHERE kind='table'")" -ge 50 ] || fail "too few table chunks"
# FTS rows match chunks one to one
[ "$(sql "SELECT count(*) FROM chunks")" -eq "$(sql "SELECT count(*) FROM chunks_fts")" ] || fail "fts rows differ from chunks"
# mirror paths are reported relative to the mirror root
[ "$(sql "SELECT count(*) FROM documents WHERE path='cuda-samples/6_Performance/transpose/transpose.cu'")" -eq 1 ] || fail "mirror-relative path"
# ... and cited where the repository serves them (the manifest's files_url)
[ "$(sql "SELECT url FROM documents WHERE path='cuda-samples/6_Performance/transpose/transpose.cu'")" = \
  "https://github.com/NVIDIA/cuda-samples/blob/v11.8/Samples/6_Performance/transpose/transpose.cu" ] || fail "cuda-samples url"
# a function's chunks are anchored at its first line, as GitHub links lines
[ "$(sql "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE d.path = 'cuda-samples/6_Performance/transpose/transpose.cu'
           AND c.anchor GLOB 'L[0-9]*'")" -ge 8 ] || fail "cuda function anchors"

# status and sources describe it
expect_json 0 kb status --json
[ "$(json_get "$out" "j['papers']")" -ge 130 ] || fail "status papers"
[ "$(json_get "$out" "len(j['sources'])")" -eq "$(python3 -c "import json; print(len(json.load(open('$MANIFEST'))['sources']))")" ] ||
    fail "status sources"
expect_rc 0 kb sources --manifest "$MANIFEST"
contains "$out" "ptx-isa"
contains "$out" "ingested"
echo "ok: $(sql "SELECT count(*) FROM documents") documents, $(sql "SELECT count(*) FROM chunks") chunks, $papers papers, $anchors ptx anchors"
