#!/usr/bin/env bash
# tier: ci
# kb query --rerank llm, KB_RERANK and kb eval --rerank llm against the
# scripted LLM server on loopback, on the real Best Practices Guide with
# vectors: usage errors without an LLM or with a bad KB_RERANK; a reply
# that reorders (the named sections first, the rest in kb's order) in both
# APIs; --json's and --explain's account of the stage; --rerank none and
# --no-rerank with --json; kb's own order and a warning after a reply with
# words, a slow reply past KB_RERANK_TIMEOUT_MS and a 500; eval's llm mode
# beside hybrid, its one request for a repeated query (the cache); the
# record mode (each prompt kept, kb's order echoed) and the replay of
# answers by the prompt's key (scripts/bench-rerank-llm.sh's procedure).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gen-lib.sh"
need_mirror
use_kb cbp   # kb ingest -q --manifest "$MANIFEST" cuda-best-practices
Q="shared memory bank conflicts"
headings() { json_get "$1" "'|'.join(r['heading_path'][-1] for r in j['results'])"; }
script() { printf '%s\n' "$1" >"$KB_TMP/script-$2.json"; echo "$KB_TMP/script-$2.json"; }

# no LLM, or a bad KB_RERANK: usage errors before anything runs
( unset KB_LLM_URL; expect_rc 2 kb query --rerank llm "$Q"; contains "$out" "KB_LLM_URL" ) || exit 1
( unset KB_LLM_URL; export KB_RERANK=llm; expect_rc 2 kb query "$Q"; contains "$out" "KB_LLM_URL" ) || exit 1
( unset KB_LLM_URL; expect_rc 2 kb eval --rerank llm "$KB_TMP/none.json"; contains "$out" "KB_LLM_URL" ) || exit 1
( export KB_RERANK=sometimes; expect_rc 2 kb query "$Q"; contains "$out" "bad KB_RERANK 'sometimes'" ) || exit 1
expect_rc 2 kb query --rerank maybe "$Q"
contains "$out" "unknown reranking stage 'maybe'"

# kb's own order, k 5
expect_json 0 kb query --json -k 5 "$Q"
plain=$(headings "$out")
json_get "$out" "'rerank' in j" | grep -qx False || fail "a rerank field without --explain or llm"
IFS='|' read -r h1 h2 h3 h4 h5 <<<"$plain"
[ -n "$h5" ] || fail "five results: $plain"

# a reply that names the 3rd and 5th sections: they go first, then the rest
start_llm "$(script '{"replies": [{"text": "[3, 5]"}, {"text": "[2]"}]}' good)"
expect_json 0 kb query --rerank llm --json -k 5 "$Q"
# the stage numbers the fused pool's sections, which kb's own list may show
# in another order (at most three of one chapter in the top 5): the names
# of passages 1-5 are read from the request itself
pool=$(python3 - "$LLM_LOG" <<'PY'
import json, re, sys
user = json.loads(open(sys.argv[1]).readline())["body"]["messages"][-1]["content"]
secs = re.findall(r"^\[(\d+)\] source: .*\nsection: (.*)$", user, re.M)
print("|".join(s.split(" > ")[-1] for n, s in secs[:5]))
PY
)
IFS='|' read -r p1 p2 p3 p4 p5 <<<"$pool"
[ -n "$p5" ] || fail "five passages in the request: $pool"
[ "$(headings "$out")" = "$p3|$p5|$p1|$p2|$p4" ] || fail "not reordered: $(headings "$out") (the pool: $pool)"
[ "$(requests)" = 1 ] || fail "one request, not $(requests)"
python3 - "$out" "$LLM_LOG" "$Q" <<'PY' || fail "the rerank field or the request: $out"
import json, sys
x = json.loads(sys.argv[1])["rerank"]
assert x["stage"] == "llm" and x["model"] == "scripted" and x["cached"] is False, x
assert x["fallback"] is None and x["ordered"] == 2 and 5 <= x["pool"] <= 30, x
b = json.loads(open(sys.argv[2]).readline())["body"]
assert b["temperature"] == 0 and b["stream"] is False and b["max_tokens"] == 400, b
user = b["messages"][-1]["content"]
assert user.startswith("Question: " + sys.argv[3] + "\n\nPassages:\n\n[1] source: cuda-best-practices\n"), user[:200]
assert ("[%d] source:" % x["pool"]) in user and ("[%d] source:" % (x["pool"] + 1)) not in user, x
assert len(user) < 40000, len(user)
PY
# --explain says it too; KB_RERANK=llm is --rerank llm
( export KB_RERANK=llm
  expect_rc 0 kb query --explain -k 5 "$Q"
  contains "$out" "reranked: llm 'scripted' over the best"
  contains "$out" "1 ordered" ) || exit 1
[ "$(requests)" = 2 ] || fail "KB_RERANK=llm did not ask"

# none, and --no-rerank with --json (it was ignored there): fusion's order
expect_json 0 kb query --rerank none --explain --json -k 5 "$Q"
[ "$(json_get "$out" "j['rerank']['stage']")" = none ] || fail "--rerank none: $out"
fusion=$(headings "$out")
expect_json 0 kb query --no-rerank --explain --json -k 5 "$Q"
[ "$(json_get "$out" "j['rerank']['stage']")" = none ] || fail "--no-rerank --json: $out"
[ "$(headings "$out")" = "$fusion" ] || fail "--no-rerank is not --rerank none"
expect_json 0 kb query --explain --json -k 5 "$Q"
[ "$(json_get "$out" "j['rerank']['stage']")" = local ] || fail "the default stage: $out"
[ "$(requests)" = 2 ] || fail "no llm stage asked the LLM"

# each failure: kb's own order, a warning, the reason in --json
fallback() {   # SCRIPT WHAT [ENV=VALUE...]
    start_llm "$1"
    expect_json 0 env "${@:3}" "$KB_BIN" query --rerank llm --json -k 5 "$Q"
    [ "$(headings "$out")" = "$plain" ] || fail "$2: not kb's order: $(headings "$out")"
    contains "$(cat "$KB_TMP/.stderr")" "warning: the llm reranking stage failed, keeping kb's own order"
    contains "$(json_get "$out" "j['rerank']['fallback']")" "$2"
}
fallback "$(script '{"then": {"text": "The third passage, clearly."}}' junk)" "not a list of passage ids"
fallback "$(script '{"then": {"text": "[3]", "delay_ms": 3000}}' slow)" "timed out" KB_RERANK_TIMEOUT_MS=300
fallback "$(script '{"then": {"status": 500, "error": "boom"}}' e500)" "HTTP 500"
[ "$(requests)" = 1 ] || fail "a 500 is not retried: $(requests) requests"

# the Anthropic API
start_llm "$(script '{"then": {"text": "[2, 1]"}}' anthropic)"
( export KB_LLM_URL="http://127.0.0.1:$LLM_PORT/v1/messages" KB_LLM_API=anthropic
  expect_json 0 kb query --rerank llm --json -k 5 "$Q"
  [ "$(headings "$out")" = "$p2|$p1|$p3|$p4|$p5" ] || fail "anthropic: $(headings "$out")"
  python3 - "$LLM_LOG" <<'PY' || fail "the Anthropic request"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["api"] == "anthropic" and "passage numbers only" in r["body"]["system"], r
PY
) || exit 1

# kb eval: the llm mode beside hybrid; a repeated query is asked once.
# The judged section is the pool's 4th, the one the reply names (hybrid
# shows it below its first place).
j4=$p4
cat >"$KB_TMP/qrels.json" <<EOF
{"queries": [
  {"id": "b1", "query": "$Q", "kind": "concept",
   "relevant": [{"source": "cuda-best-practices", "heading": "$j4"}]},
  {"id": "b2", "query": "$Q", "kind": "concept",
   "relevant": [{"source": "cuda-best-practices", "heading": "$j4"}]}
]}
EOF
start_llm "$(script '{"then": {"text": "[4]"}}' eval)"
expect_json 0 kb eval --mode hybrid --rerank llm --json -v "$KB_TMP/qrels.json"
[ "$(requests)" = 1 ] || fail "eval: $(requests) requests for one query asked twice"
python3 - "$out" <<'PY' || fail "eval's llm mode: $out"
import json, sys
m = json.loads(sys.argv[1])["modes"]
assert set(m) == {"hybrid", "llm"}, m.keys()
h, l = m["hybrid"], m["llm"]
assert l["rerank"]["llm_requests"] == 1 and l["rerank"]["cached"] == 1, l["rerank"]
assert l["rerank"]["fallbacks"] == 0, l["rerank"]
assert [q["first_relevant_rank"] for q in l["per_query"]] == [1, 1], l["per_query"]
assert h["per_query"][0]["first_relevant_rank"] > 1, h["per_query"]
assert l["overall"]["mrr"] == 1 and h["overall"]["mrr"] < 1, (l["overall"], h["overall"])
assert [q["rerank"]["cached"] for q in l["per_query"]] == [False, True], l["per_query"]
PY
expect_rc 0 kb eval --rerank llm "$KB_TMP/qrels.json"
contains "$out" "hybrid reordered by the LLM: 1 request, 1 from the cache, 0 in kb's own order"
for m in lexical vector hybrid llm; do grep -q "^$m " <<<"$out" || fail "no $m row: $out"; done
stop_llm

# record: each prompt kept by its key, the pool's order echoed (nothing
# moves; with an LLM's order the top-5 chapter cap stands aside)
REC="$KB_TMP/rec"
python3 "$KB_TOP/tests/llm/scripted_llm.py" --record "$REC" --log "$KB_TMP/rec.jsonl" >"$KB_TMP/rec.port" &
LLM_PID=$!
for _ in $(seq 200); do [ -s "$KB_TMP/rec.port" ] && break; sleep 0.05; done
export KB_LLM_URL="http://127.0.0.1:$(cat "$KB_TMP/rec.port")/v1/chat/completions" KB_LLM_MODEL=recorded
expect_json 0 kb query --rerank llm --json -k 5 "$Q"
[ "$(headings "$out")" = "$pool" ] || fail "record mode moved results: $(headings "$out") (the pool: $pool)"
expect_json 0 kb query --rerank llm --json -k 5 "pinned host memory"
stop_llm
[ "$(ls "$REC" | wc -l)" = 2 ] || fail "two prompts recorded: $(ls "$REC")"
python3 - "$REC" "$Q" <<'PY' || fail "the recorded prompts"
import json, os, sys
recs = [json.load(open(os.path.join(sys.argv[1], f))) for f in sorted(os.listdir(sys.argv[1]))]
qs = sorted(r["user"].split("\n", 1)[0] for r in recs)
assert qs == ["Question: pinned host memory", "Question: " + sys.argv[2]], qs
for r in recs:
    assert r["key"] and r["model"] == "recorded" and "passage numbers only" in r["system"], r
PY
# replay: an answer for the first query's prompt; the other has none (a 500)
ANS="$KB_TMP/answers"
mkdir -p "$ANS"
key=$(python3 -c "import json,os,sys; d=sys.argv[1]; print([json.load(open(os.path.join(d,f)))['key'] for f in os.listdir(d) if '$Q' in json.load(open(os.path.join(d,f)))['user']][0])" "$REC")
echo "[5, 4]" >"$ANS/$key.txt"
python3 "$KB_TOP/tests/llm/scripted_llm.py" --answers "$ANS" >"$KB_TMP/rep.port" &
LLM_PID=$!
for _ in $(seq 200); do [ -s "$KB_TMP/rep.port" ] && break; sleep 0.05; done
export KB_LLM_URL="http://127.0.0.1:$(cat "$KB_TMP/rep.port")/v1/chat/completions"
expect_json 0 kb query --rerank llm --json -k 5 "$Q"
[ "$(headings "$out")" = "$p5|$p4|$p1|$p2|$p3" ] || fail "replay: $(headings "$out")"
expect_json 0 kb query --rerank llm --json -k 5 "pinned host memory"
contains "$(json_get "$out" "j['rerank']['fallback']")" "no answer for request"
stop_llm
echo "ok"
