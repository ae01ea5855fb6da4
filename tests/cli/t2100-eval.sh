#!/usr/bin/env bash
# tier: quick
# kb eval: retrieval metrics over a small KB (the Best Practices Guide from
# the mirror, lexical only) with a qrels file of our own.
. "$(dirname "$0")/lib.sh"

[ -d "$KB_MIRROR/best-practices" ] || { echo "skipped: no mirror at $KB_MIRROR"; exit 0; }
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 0; }
manifest="$KB_TOP/corpus/sources.json"

# usage errors come before any KB is needed
expect_rc 2 kb eval
contains "$out" "no qrels file given"
expect_rc 2 kb eval --mode nonsense x.json
contains "$out" "'nonsense' is no mode"
expect_rc 2 kb eval --k 0 x.json
contains "$out" "'0' is not a cut-off (a number from 1 to 1000)"
expect_rc 2 kb eval x.json --mode
contains "$out" "option '--mode' needs a value"
expect_rc 2 kb eval a.json b.json
contains "$out" "one qrels file only ('b.json' is extra)"
expect_rc 2 kb eval --bogus x.json
contains "$out" "unknown option '--bogus'"
expect_rc 0 kb eval --help
contains "$out" "--mode M"

q="$KB_TMP/qrels.json"
cat >"$q" <<'EOF'
{"about": "t2100: three answerable queries and one whose answer is not in the KB",
 "queries": [
  {"id": "t1", "kind": "concept",
   "query": "signed or unsigned loop counters: which lets the compiler optimize more",
   "relevant": [{"source": "cuda-best-practices", "heading": "Loop Counters Signed vs. Unsigned"}]},
  {"id": "t2", "kind": "concept",
   "query": "pinned host memory for faster transfers",
   "relevant": [{"source": "cuda-best-practices", "heading": "10.1.1 pinned   MEMORY"}]},
  {"id": "t3", "kind": "exemplar",
   "query": "shared memory bank conflicts",
   "relevant": [{"source": "cuda-best-practices", "path": "best-practices-guide_index"}]},
  {"id": "t4", "kind": "lookup",
   "query": "shared memory bank conflicts",
   "relevant": [{"source": "ptx-isa", "heading": "Shared Memory"}]}
 ]}
EOF

# no KB yet: a clear error, not a crash
expect_rc 1 kb eval --mode lexical "$q"
contains "$out" "no KB in '$KB_DIR'; run 'kb ingest' first"

expect_rc 0 kb -q ingest --no-embed --manifest "$manifest" cuda-best-practices

# a bad qrels file names itself and what is wrong
echo '{"queries": [{"id": "x", "query": "y"}]}' >"$KB_TMP/bad.json"
expect_rc 1 kb eval --mode lexical "$KB_TMP/bad.json"
contains "$out" "query 1 ('x') has no 'relevant' list"
expect_rc 1 kb eval --mode lexical "$KB_TMP/missing.json"
contains "$out" "cannot open '$KB_TMP/missing.json'"

# stdout alone is the JSON object
json=$(kb eval --mode lexical --json --verbose "$q" 2>"$KB_TMP/err") ||
    fail "kb eval --json exited $?: $(cat "$KB_TMP/err")"
python3 - "$json" <<'EOF' || fail "unexpected metrics: $json"
import json, sys
d = json.loads(sys.argv[1])
assert d["k"] == 10 and d["queries"] == 4, d
assert list(d["modes"]) == ["lexical"], d["modes"].keys()
lex = d["modes"]["lexical"]
assert lex["available"] is True and lex["errors"] == 0, lex
pq = {p["id"]: p for p in lex["per_query"]}
# the obvious ones are found at the top
assert pq["t1"]["success"] == 1 and pq["t1"]["first_relevant_rank"] <= 3, pq["t1"]
assert pq["t2"]["success"] == 1 and pq["t2"]["first_relevant_rank"] <= 3, pq["t2"]
# every result of this one-source KB matches the path judgment
assert pq["t3"]["mrr"] == 1 and pq["t3"]["ndcg"] == 1 and pq["t3"]["recall"] == 1, pq["t3"]
assert all(t["relevant"] for t in pq["t3"]["top"]), pq["t3"]
# the answer is in a source the KB lacks: nothing may count
assert pq["t4"]["success"] == 0 and pq["t4"]["ndcg"] == 0 and pq["t4"]["first_relevant_rank"] == 0, pq["t4"]
for p in pq.values():
    for m in ("ndcg", "recall", "success", "mrr"):
        assert 0 <= p[m] <= 1, p
    assert len(p["top"]) == 3 and all(t["source"] == "cuda-best-practices" for t in p["top"]), p
ov = lex["overall"]
assert ov["queries"] == 4 and 0.5 <= ov["success"] <= 0.75, ov
assert abs(ov["mrr"] - sum(p["mrr"] for p in pq.values()) / 4) < 1e-5, ov
bk = lex["by_kind"]
assert set(bk) == {"concept", "exemplar", "lookup"} and bk["concept"]["queries"] == 2, bk
assert bk["lookup"]["success"] == 0 and bk["exemplar"]["success"] == 1, bk
assert lex["took_ms_mean"] > 0, lex
EOF

# without --verbose no per-query list
expect_rc 0 kb eval --mode lexical --json "$q"
lacks "$out" "per_query"

# the table; vector and hybrid need embeddings this KB does not have: they
# are reported as unavailable while lexical still runs
expect_rc 0 kb eval --verbose "$q"
contains "$out" "nDCG@10"
contains "$out" "Success@10"
contains "$out" "lexical  all"
contains "$out" "vector   unavailable: "
# kb query falls back to lexical for hybrid without vectors; kb eval must
# not report lexical's numbers as hybrid's
contains "$out" "hybrid   unavailable: "
contains "$out" "t1 "
contains "$out" '         "shared memory bank conflicts"'   # the question, not its id alone
contains "$out" "* cuda-best-practices: "

expect_rc 0 kb eval --mode lexical --k 3 "$q"
contains "$out" "nDCG@3"
# the options' other spellings: --opt=value, -k, -v, a file after "--"
expect_rc 0 kb eval --mode=lexical -k 3 -v -- "$q"
contains "$out" "nDCG@3"
contains "$out" "t1 "
lacks "$out" "vector   unavailable"
exit 0
