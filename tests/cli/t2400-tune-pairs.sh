#!/usr/bin/env bash
# tier: ci
# kb tune's pairs and its errors, on the real Best Practices Guide and CUDA
# samples (no torch needed; t2410 trains): every pair is a chunk of the KB
# with its text, under a question made of its headings without their
# numbers; at most two a section; no heading that recurs in three
# documents ("Build and Run"); a section's pair for a paper is its title.
# Then what fails, and that a failed trainer leaves no model.
. "$(dirname "$0")/lib.sh"
need_mirror
expect_rc 0 kb ingest -q --no-embed --manifest "$MANIFEST" cuda-best-practices cuda-samples

expect_rc 0 kb tune --pairs-only --out "$KB_TMP/t"
pairs="$KB_TMP/t/pairs.jsonl"
contains "$out" "$pairs"
[ -f "$pairs" ] || fail "no $pairs"
[ ! -e "$KB_TMP/t/tuned.json" ] || fail "--pairs-only wrote a model"
# its hint names a trainer that is there, from any working directory
script=$(printf '%s\n' "$out" | sed -n 's/^  python3 \([^ ]*\) --base .*/\1/p')
[ -f "$script" ] && case $script in /*) ;; *) false ;; esac ||
    fail "--pairs-only's hint names no trainer that is there: '$script' in $out"
python3 - "$pairs" "$KB_DIR/kb.sqlite" <<'PY' || fail "the pairs"
import collections, json, re, sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[2]}?mode=ro", uri=True)
rows = {i: (d, h, k, t) for i, d, h, k, t in
        db.execute("SELECT id, document_id, heading_path, kind, text FROM chunks")}
pairs = [json.loads(l) for l in open(sys.argv[1])]
assert len(pairs) > 200, len(pairs)
per_section = collections.Counter()
docs_of = collections.defaultdict(set)
for p in pairs:
    assert set(p) == {"q", "p", "kind", "chunk"}, p
    d, h, k, t = rows[p["chunk"]]
    assert p["p"] == t and p["kind"] == k, p
    assert len(t.strip()) >= 40, p
    assert not re.match(r"\s*\d+(\.\d+)*\.?\s", p["q"]), p["q"]
    heads = [re.sub(r"^\s*(\d+(\.\d+)*\.?|[A-Z]\.(\d+\.)*)\s+", "", x) for x in json.loads(h)]
    assert p["q"] == " ".join(heads[-2:]), (p["q"], heads)
    per_section[(d, h)] += 1
# every heading the KB's documents share with two others is left out
for i, (d, h, k, t) in rows.items():
    heads = [re.sub(r"^\s*(\d+(\.\d+)*\.?|[A-Z]\.(\d+\.)*)\s+", "", x) for x in json.loads(h)]
    docs_of[" ".join(heads[-2:])].add(d)
recurring = {q for q, ds in docs_of.items() if len(ds) >= 3}
assert "Build and Run Linux" in recurring, sorted(recurring)[:20]
assert not [p for p in pairs if p["q"] in recurring], "a recurring heading"
assert max(per_section.values()) == 2, per_section.most_common(1)
# the Best Practices Guide's sections are there, under their own words
assert any(p["q"] == "Coalesced Access to Global Memory A Simple Access Pattern" for p in pairs), \
       "no coalescing section"
PY

# --json; the default directory is the base model's with -tuned
expect_json 0 kb tune --pairs-only --json --out "$KB_TMP/t2"
[ "$(json_get "$out" "j['pairs']")" = "$(wc -l < "$pairs")" ] || fail "--json's count: $out"
[ "$(json_get "$out" "j['pairs_file']")" = "$KB_TMP/t2/pairs.jsonl" ] || fail "--json's file: $out"
cmp -s "$pairs" "$KB_TMP/t2/pairs.jsonl" || fail "two runs mined different pairs"
( export KB_MODEL_DIR="$KB_TMP/base/"; mkdir -p "$KB_MODEL_DIR"
  expect_rc 0 kb tune --pairs-only; [ -f "$KB_TMP/base-tuned/pairs.jsonl" ] || fail "not in \$KB_MODEL_DIR-tuned: $out"
  contains "$out" "--pairs $KB_TMP/base-tuned/pairs.jsonl" ) || exit 1

# errors: each says what to do, and nothing is trained
expect_rc 2 kb tune --device gpu;            contains "$out" "auto, cpu or cuda"
expect_rc 2 kb tune --batch 1;               contains "$out" "--batch"
expect_rc 2 kb tune --epochs x;              contains "$out" "--epochs"
expect_rc 2 kb tune --trainer "$KB_TMP/none.py" --out "$KB_TMP/t3"; contains "$out" "none.py"
( export KB_MODEL_DIR=; expect_rc 2 kb tune --out "$KB_TMP/t3"; contains "$out" "KB_MODEL_DIR" ) || exit 1
( export KB_MODEL_DIR="$KB_TMP/base"; expect_rc 2 kb tune --out "$KB_TMP/base"; contains "$out" "its own" ) || exit 1
expect_rc 2 kb tune stray;                   contains "$out" "stray"
# a trainer that fails: kb says so, and no model is left to be used
expect_rc 1 kb tune --python false --out "$KB_TMP/t4"
contains "$out" "failed (exit 1)"
[ -f "$KB_TMP/t4/pairs.jsonl" ] && [ ! -e "$KB_TMP/t4/tuned.json" ] || fail "after a failed trainer: $(ls "$KB_TMP/t4")"
expect_rc 1 kb tune --python "$KB_TMP/no-such-python" --out "$KB_TMP/t4"
contains "$out" "--python"
# a trainer that exits 0 but writes nothing is caught by the check
expect_rc 1 kb tune --python true --out "$KB_TMP/t5"
contains "$out" "wrote no model"
# the base must be the base: not a missing model, not a tuned one
( export KB_MODEL_DIR="$KB_TMP/no-model"; expect_rc 1 kb tune --out "$KB_TMP/t7"
  contains "$out" "kb model fetch"; [ ! -e "$KB_TMP/t7" ] || fail "wrote into t7 without a base" ) || exit 1
real=$(kb config 2>/dev/null | awk '$1 == "KB_MODEL_DIR" {print $2}')
mkdir -p "$KB_TMP/fake-tuned"
ln -s "$real/model.safetensors" "$KB_TMP/fake-tuned/model.safetensors"
cp "$real/vocab.txt" "$KB_TMP/fake-tuned/"
printf '{"base_sha256": "%s", "sha256": "%s"}\n' "$(sha256sum < "$real/model.safetensors" | cut -d' ' -f1)" \
    "$(sha256sum < "$real/model.safetensors" | cut -d' ' -f1)" > "$KB_TMP/fake-tuned/tuned.json"
( export KB_MODEL_DIR="$KB_TMP/fake-tuned"; expect_rc 1 kb tune --out "$KB_TMP/t8"
  contains "$out" "holds a tuned model" ) || exit 1
# an empty KB has nothing to learn from
( export KB_DIR="$KB_TMP/empty"; expect_rc 1 kb tune --pairs-only --out "$KB_TMP/t6"
  contains "$out" "kb ingest"; [ ! -e "$KB_TMP/t6" ] || fail "a directory for nothing" ) || exit 1
echo ok
