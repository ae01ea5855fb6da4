#!/usr/bin/env bash
# tier: ci
# Writers at once (issue 15 item 10): an embedding ingest failed with
# "database is locked" when any other process wrote during it (its count
# of pending chunks kept a read snapshot open). Two ingests at once both
# finish, one after the other, the second saying it waits; a write from
# another program during the embedding pass does not stop it.
. "$(dirname "$0")/lib.sh"
[ "${KB_MODEL_DIR-unset}" = "" ] && { echo "skipped: KB_MODEL_DIR is empty"; exit 0; }
mkdir -p "$KB_TMP/a" "$KB_TMP/b"
words="shared memory bank conflicts warp shuffle reduction occupancy register spill tensor core latency bandwidth coalesced access"
for i in $(seq 1 12); do
    { printf '# Document %s\n\n' "$i"
      for p in 1 2 3 4 5 6; do
          for w in $(seq 1 110); do set -- $words; shift $(( (i * 7 + p * 3 + w) % 16 )); printf '%s ' "$1"; done
          printf '\n\n'
      done; } > "$KB_TMP/a/d$i.md"
done
printf '# Lonely\n\nA single file about cooperative groups.\n' > "$KB_TMP/b/one.md"
pending() { sql "SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.chunk_id = c.id)"; }
# wait_embedding: until the running ingest has committed a batch of vectors
wait_embedding() {
    for _ in $(seq 600); do
        [ -f "$KB_DIR/kb.sqlite" ] && [ "$(sql "SELECT count(*) FROM embeddings" 2>/dev/null)" -gt 0 ] 2>/dev/null && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

# another program writes while the embedding pass runs
"$KB_BIN" ingest "$KB_TMP/a" > "$KB_TMP/a.out" 2>&1 & pid=$!
wait_embedding $pid || fail "the first ingest never embedded: $(cat "$KB_TMP/a.out")"
[ "$(pending)" -gt 0 ] || fail "the embedding pass ended before the write: nothing was tested"
sqlite3 "$KB_DIR/kb.sqlite" "PRAGMA busy_timeout = 10000; INSERT OR REPLACE INTO meta VALUES('t1060', 'written')" >/dev/null ||
    fail "the other program could not write"
wait $pid; rc=$?
[ "$rc" -eq 0 ] || fail "the embedding ingest failed after another write (exit $rc): $(cat "$KB_TMP/a.out")"
[ "$(pending)" = 0 ] || fail "chunks were left without vectors"

# two ingests at once: the second waits for the first, then both are done
sqlite3 "$KB_DIR/kb.sqlite" "DELETE FROM embeddings"
"$KB_BIN" ingest "$KB_TMP/a" > "$KB_TMP/a.out" 2>&1 & pid=$!
wait_embedding $pid || fail "the first ingest never embedded: $(cat "$KB_TMP/a.out")"
out=$("$KB_BIN" ingest "$KB_TMP/b/one.md" 2>&1); rc=$?
wait $pid; arc=$?
[ "$arc" -eq 0 ] || fail "the first ingest failed (exit $arc): $(cat "$KB_TMP/a.out")"
[ "$rc" -eq 0 ] || fail "the second ingest failed (exit $rc): $out"
contains "$out" "waiting for another ingest into '$KB_DIR' (pid $pid) to finish"
[ "$(sql "SELECT count(*) FROM documents")" = 13 ] || fail "documents: $(sql "SELECT count(*) FROM documents")"
[ "$(pending)" = 0 ] || fail "chunks were left without vectors"
expect_json 0 kb query --json -k 3 "cooperative groups"
[ "$(json_get "$out" "j['results'][0]['path']")" = "$KB_TMP/b/one.md" ] || fail "the second ingest's document: $out"
echo ok
