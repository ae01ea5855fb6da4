#!/usr/bin/env bash
# tier: ci
# kill -9 in the middle of an ingest leaves a consistent KB, and readers
# keep working while an ingest runs.
. "$(dirname "$0")/lib.sh"
need_mirror
expect_rc 0 kb ingest --no-embed -q --manifest "$MANIFEST" libcudacxx-ptx cutlass-docs
docs=$(sql "SELECT count(*) FROM documents")
chunks=$(sql "SELECT count(*) FROM chunks")
# documents with no chunks at all (toctree-only rst files have none)
no_chunks="SELECT count(*) FROM documents d WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.document_id=d.id)"
empty=$(sql "$no_chunks")

# readers during a forced re-ingest
"$KB_BIN" ingest --no-embed -q --force --manifest "$MANIFEST" libcudacxx-ptx cutlass-docs &
pid=$!
reads=0
while kill -0 "$pid" 2>/dev/null && [ $reads -lt 200 ]; do
    expect_json 0 kb status --json
    expect_json 0 kb query --mode lexical --json "mbarrier arrive"
    reads=$((reads + 1))
done
wait "$pid" || fail "the ingest failed"
[ "$reads" -ge 1 ] || fail "no reads happened during the ingest"

# kill -9 half way through
maxid=$(sql "SELECT max(id) FROM documents")
"$KB_BIN" ingest --no-embed -q --force --manifest "$MANIFEST" libcudacxx-ptx cutlass-docs &
pid=$!
# kill it once it has replaced some documents, before it is done
for _ in $(seq 500); do
    [ "$(sql "SELECT count(*) FROM documents WHERE id > $maxid")" -ge 20 ] && break
    sleep 0.01
done
kill -9 "$pid" 2>/dev/null || fail "the ingest finished before it could be killed"
wait "$pid" 2>/dev/null
[ "$(sql "PRAGMA integrity_check")" = ok ] || fail "integrity check"
[ "$(sql "SELECT count(*) FROM documents")" -eq "$docs" ] || fail "documents lost by the kill"
[ "$(sql "$no_chunks")" -eq "$empty" ] ||
    fail "documents without chunks after the kill"
[ "$(sql "SELECT count(*) FROM chunks")" -eq "$(sql "SELECT count(*) FROM chunks_fts")" ] || fail "fts out of step after the kill"
[ "$(sql "SELECT count(*) FROM chunks")" -eq "$chunks" ] || fail "chunk count changed: $chunks -> $(sql "SELECT count(*) FROM chunks")"
expect_rc 0 kb status
expect_rc 0 kb ingest --no-embed -q --manifest "$MANIFEST" libcudacxx-ptx cutlass-docs
[ "$(sql "SELECT count(*) FROM chunks")" -eq "$chunks" ] || fail "chunks after recovery"
echo "ok: $reads reads during an ingest"
