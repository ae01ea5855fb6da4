#!/usr/bin/env bash
# tier: ci
# The vector index's stamp (issue 27 item 2): ingest records the file's
# identity (generation, device, inode, size, times) and its blocks'
# hashes in the KB, so a fresh query trusts the file without hashing it
# whole. A stamp that does not match the file (a KB copied elsewhere, a
# forged or stale stamp) is never trusted: the file is checked whole, and
# stamped again when it passes; a file that fails is rebuilt.
. "$(dirname "$0")/lib.sh"
[ "${KB_MODEL_DIR-unset}" = "" ] && { echo "skipped: KB_MODEL_DIR is empty"; exit 0; }
mkdir -p "$KB_TMP/docs"
for t in "Shared memory bank conflicts|Threads of a warp that address one bank serialize; padding a row by one word spreads the columns." \
         "Pinned host memory|Page-locked host buffers let copies run asynchronously and at full bus speed." \
         "Warp shuffle reduction|A tree of shuffles sums a value across the warp without shared memory."; do
    printf '# %s\n\n%s\n' "${t%%|*}" "${t#*|}" > "$KB_TMP/docs/$(echo "${t%%|*}" | tr ' ' '-').md"
done
expect_rc 0 kb ingest -q "$KB_TMP/docs"
f=$(ls "$KB_DIR"/vectors.*.faiss) || fail "no FAISS file"
stamp() { sql "SELECT value FROM meta WHERE key='vec_stamp'"; }
gen=$(sql "SELECT value FROM meta WHERE key='vec_generation'")
ino=$(stat -c %i "$f") size=$(stat -c %s "$f")
s=$(stamp)
head=$(echo "$s" | head -1)
contains "$head" "kb-vec-stamp 1 $gen "
contains "$head" " $ino $size "
[ "$(echo "$s" | sed -n 2p)" = "$(sql "SELECT count(*) FROM embeddings")" ] || fail "stamp's vector count: $s"
[ "$(echo "$s" | tail -n +3 | grep -c '^[0-9a-f]\{64\}$')" -eq $(( (size + 262143) / 262144 )) ] ||
    fail "one hash per 256 KiB block: $s"
q="why are copies from the host slow"
results() { json_get "$1" "[(r['chunk_id'], round(r['score'], 4)) for r in j['results']]"; }
expect_json 0 kb query --mode vector --json -k 3 "$q"
want=$(results "$out")
[ "$(stamp)" = "$s" ] || fail "a query changed a matching stamp"

# a forged block hash: not trusted, the file is checked whole and stamped
# again as it is; the same results, no warning (the file is whole)
sqlite3 "$KB_DIR/kb.sqlite" "UPDATE meta SET value = replace(value, substr(value, instr(value, char(10) || '$(echo "$s" | sed -n 3p)'), 65), char(10) || '$(printf '0%.0s' $(seq 64))') WHERE key = 'vec_stamp'"
[ "$(stamp)" != "$s" ] || fail "the stamp was not forged"
expect_rc 0 kb query --mode vector --json -k 3 "$q"
lacks "$out" "warning"
[ "$(results "$out")" = "$want" ] || fail "results after a forged stamp"
[ "$(stamp)" = "$s" ] || fail "the forged stamp was not replaced: $(stamp | head -3)"

# a KB copied elsewhere: another inode, checked whole once, stamped anew
cp -r "$KB_DIR" "$KB_TMP/copy"
KB_DIR="$KB_TMP/copy" expect_rc 0 kb query --mode vector --json -k 3 "$q"
[ "$(results "$out")" = "$want" ] || fail "results in the copy"
KB_DIR="$KB_TMP/copy" contains "$(sqlite3 "$KB_TMP/copy/kb.sqlite" "SELECT value FROM meta WHERE key='vec_stamp'" | head -1)" \
    " $(stat -c %i "$KB_TMP/copy/$(basename "$f")") $size "

# a stamp that claims another vector count is the stamp of no file: checked whole
sqlite3 "$KB_DIR/kb.sqlite" "UPDATE meta SET value = replace(value, char(10) || '3' || char(10), char(10) || '4' || char(10)) WHERE key = 'vec_stamp'"
expect_rc 0 kb query --mode vector --json -k 3 "$q"
[ "$(results "$out")" = "$want" ] || fail "results after a wrong count"
[ "$(stamp)" = "$s" ] || fail "the wrong count was not stamped again"

# a damaged file is never used, stamp or not: rewritten from kb.sqlite
python3 - "$f" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[100] ^= 0xff
open(p, 'r+b').write(b)
PY
expect_rc 0 kb query --mode vector --json -k 3 "$q"
contains "$out" "does not match its checksum"
[ "$(results "$(kb query --mode vector --json -k 3 "$q" 2>/dev/null)")" = "$want" ] || fail "results after damage"
echo ok
