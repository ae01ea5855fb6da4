#!/usr/bin/env bash
# tier: ci
# kb tune end to end with the real trainer (scripts/tune-embedder.py, real
# PyTorch), on the skill library kb ships: 64 pairs, 4-5 steps; the model it
# writes is pinned by its manifest and opened by kb as
# all-MiniLM-L6-v2+tuned; a re-embed records it in the KB; the base model
# is then refused for that KB's vectors, the tuned one answers. Needs a
# Python with torch, transformers and safetensors (KB_TUNE_PYTHON, else
# python3): "skipped: no torch" elsewhere (the device machine has them).
. "$(dirname "$0")/lib.sh"
py=${KB_TUNE_PYTHON:-python3}
"$py" -c 'import torch, transformers, safetensors' 2>/dev/null ||
    { echo "skipped: no torch ($py lacks torch, transformers or safetensors)"; exit 0; }
q() { "$py" - "$KB_DIR/kb.sqlite" "$1" <<'PY'
import sqlite3, sys
for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]): print("|".join(map(str, r)))
PY
}
expect_rc 0 kb ingest -q --manifest "$MANIFEST" skills
[ "$(q "SELECT value FROM meta WHERE key = 'embedder'")" = all-MiniLM-L6-v2 ] || fail "base embedder"
before=$(q "SELECT hex(vec) FROM embeddings ORDER BY chunk_id LIMIT 1")

tuned="$KB_TMP/tuned"
expect_json 0 kb tune --python "$py" --max-pairs 64 --batch 16 --json --out "$tuned"
[ "$(json_get "$out" "j['model']")" = all-MiniLM-L6-v2+tuned ] || fail "model: $out"
sha=$(sha256sum "$tuned/model.safetensors" | cut -d' ' -f1)
[ "$(json_get "$out" "j['sha256']")" = "$sha" ] || fail "the reported hash is not the file's"
"$py" - "$tuned/tuned.json" "$sha" <<'PY' || fail "tuned.json: $(cat "$tuned/tuned.json")"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["sha256"] == sys.argv[2], m
assert m["base_sha256"] == "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", m
# 64 pairs in batches of 16 that never hold a heading twice: 4 or more
assert m["pairs"] == 64 and 4 <= m["steps"] <= 8 and m["batch"] == 16, m
assert m["final_loss"] == m["final_loss"] and m["final_loss"] >= 0, m
PY
cmp -s "$tuned/vocab.txt" "${KB_MODEL_DIR:-$HOME/.cache/kb/models/all-MiniLM-L6-v2}/vocab.txt" || fail "vocab.txt"
ls -a "$tuned" | grep -q '\.tmp\.' && fail "temporary files left: $(ls -a "$tuned")"

# the KB's vectors by the tuned model, recorded as such
expect_rc 0 env KB_MODEL_DIR="$tuned" "$KB_BIN" ingest -q --reembed --manifest "$MANIFEST" skills
[ "$(q "SELECT value FROM meta WHERE key = 'embedder'")" = all-MiniLM-L6-v2+tuned ] || fail "not recorded"
[ "$(q "SELECT value FROM meta WHERE key = 'embedder_hash'")" = "$sha" ] || fail "hash not recorded"
after=$(q "SELECT hex(vec) FROM embeddings ORDER BY chunk_id LIMIT 1")
[ "$before" != "$after" ] || fail "the same vectors after tuning"
expect_json 0 env KB_MODEL_DIR="$tuned" "$KB_BIN" query --mode vector --json -k 3 "bank conflicts in a shared memory transpose"
[ "$(json_get "$out" "len(j['results']) + len(j.get('skills', []))")" -ge 1 ] || fail "no results: $out"
# the base model cannot search vectors it did not make
expect_rc 1 kb query --mode vector "bank conflicts"
contains "$out" "all-MiniLM-L6-v2+tuned"
contains "$out" "--reembed"
echo ok
