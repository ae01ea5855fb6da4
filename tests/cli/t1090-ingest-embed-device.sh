#!/usr/bin/env bash
# tier: ci
# KB_EMBED_DEVICE (issue 27): cpu, gpu or auto, nothing else. Told gpu,
# ingest embeds on the GPU where one works, else says why and embeds on
# the CPU; either way the vectors are the CPU's (cosine >= 0.9999). auto
# leaves a few chunks to the CPU without a word.
. "$(dirname "$0")/lib.sh"
cd "$KB_TMP"
mkdir -p notes
for i in 1 2 3 4 5 6; do
    printf '# Note %s\n\nShared memory bank conflicts serialise accesses %s.\n\n## Warps\n\nA warp shuffle moves registers between lanes %s.\n' \
        "$i" "$i" "$i" >"notes/n$i.md"
done

KB_EMBED_DEVICE=tpu expect_rc 2 kb ingest notes
contains "$out" "bad KB_EMBED_DEVICE 'tpu': expected cpu, gpu or auto"

KB_DIR="$KB_TMP/cpu" KB_EMBED_DEVICE=cpu expect_rc 0 kb ingest notes
lacks "$out" "GPU"
KB_DIR="$KB_TMP/auto" KB_EMBED_DEVICE=auto expect_rc 0 kb ingest notes
lacks "$out" "GPU"
KB_DIR="$KB_TMP/gpu" KB_EMBED_DEVICE=gpu expect_rc 0 kb ingest notes
case $out in
*"embedding on the GPU ("*) echo "embedded on the GPU" ;;
*) contains "$out" "warning: KB_EMBED_DEVICE is gpu, but "
   contains "$out" ": embedding on the CPU" ;;
esac
python3 - "$KB_TMP" <<'PY' || fail "the vectors differ between devices"
import math, sqlite3, struct, sys
def vecs(name):
    db = sqlite3.connect(f"{sys.argv[1]}/{name}/kb.sqlite")
    return {r[0]: struct.unpack("384f", r[1]) for r in
            db.execute("SELECT c.text, e.vec FROM chunks c JOIN embeddings e ON e.chunk_id = c.id")}
cpu = vecs("cpu")
assert len(cpu) >= 6, len(cpu)
for other in ("auto", "gpu"):
    o = vecs(other)
    assert o.keys() == cpu.keys(), other
    for t, v in cpu.items():
        w = o[t]
        c = sum(a * b for a, b in zip(v, w)) / math.sqrt(sum(a * a for a in v) * sum(b * b for b in w))
        assert c >= 0.9999, (other, t, c)
PY
echo ok
