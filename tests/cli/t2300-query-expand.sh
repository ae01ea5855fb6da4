#!/usr/bin/env bash
# tier: ci
# kb query --expand and kb eval --expand against the scripted LLM server
# on loopback, on the real Best Practices Guide with vectors: a usage error
# without an LLM; the request's content (system prompt, the question,
# both parts asked for, 120 tokens, temperature 0); the keyword rewrite and
# the hypothetical passage searched and fused, bringing the section the
# question's own words miss; --json's expansion field; the cache (a second
# run sends nothing, another model asks again); a reply without labels;
# a 500 and an unreachable server falling back to the query alone with a
# warning; eval's expansion counts. Then SmolLM2 through llama.cpp's
# server, when the test virtualenv has it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gen-lib.sh"
need_mirror
use_kb cbp   # kb ingest -q --manifest "$MANIFEST" cuda-best-practices
Q="column reads are slow with a 32 by 33 array"
headings() { json_get "$1" "'|'.join(r['heading_path'][-1] for r in j['results'])"; }

# no LLM: a usage error that names the variable, before anything runs
( unset KB_LLM_URL; expect_rc 2 kb query --expand "$Q"; contains "$out" "KB_LLM_URL" ) || exit 1
( unset KB_LLM_URL; expect_rc 2 kb eval --expand "$KB_TMP/none.json"; contains "$out" "KB_LLM_URL" ) || exit 1
( export KB_LLM_URL=http://127.0.0.1:1/v1 KB_LLM_API=nonsense
  expect_rc 2 kb query --expand "$Q"; contains "$out" "KB_LLM_API" ) || exit 1
( export KB_LLM_URL=http://127.0.0.1:1/v1/messages; unset KB_LLM_MODEL KB_LLM_API
  expect_rc 2 kb query --expand "$Q"; contains "$out" "KB_LLM_MODEL" ) || exit 1

# the question's own words miss the section on banks
expect_json 0 kb query --json -k 5 "$Q"
plain=$out
lacks "$(headings "$plain")" "Shared Memory and Memory Banks"
json_get "$plain" "'expansion' in j" | grep -qx False || fail "an expansion without --expand"

start_llm "$LLMFIX/expand.json"
expect_json 0 kb query --expand --json -k 5 "$Q"
first=$out
[ "$(requests)" = 1 ] || fail "one request, not $(requests)"
python3 - "$LLM_LOG" "$Q" <<'PY' || fail "the expansion request"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
b = r["body"]
assert r["path"] == "/v1/chat/completions", r["path"]
assert b["model"] == "scripted" and b["max_tokens"] == 120 and b["temperature"] == 0, b
assert b["stream"] is False, b
sysm, user = b["messages"]
assert sysm["role"] == "system" and "documentation" in sysm["content"], sysm
assert user["role"] == "user" and user["content"].startswith("Question: " + sys.argv[2] + "\n"), user
assert "KEYWORDS:" in user["content"] and "PASSAGE:" in user["content"], user
PY
python3 - "$first" <<'PY' || fail "the expansion field: $first"
import json, sys
j = json.loads(sys.argv[1])
x = j["expansion"]
assert x["model"] == "scripted" and x["cached"] is False and x["error"] is None, x
assert x["llm_ms"] > 0, x
types = [s["type"] for s in x["searches"]]
assert types == ["hyde", "lex", "lex"], types
assert x["searches"][0]["query"].startswith("Shared memory is divided into equally sized"), x
assert x["searches"][0]["query"].endswith("Padding the array by one column avoids it"), x
assert [s["query"] for s in x["searches"][1:]] == ["shared memory banks", "bank conflicts"], x
# fused: the section the question missed, first in a keyword list
hit = [r for r in j["results"] if r["heading_path"][-1].endswith("Shared Memory and Memory Banks")]
assert hit and hit[0]["lexical_rank"] == 1 and hit[0]["vector_rank"], j["results"]
PY
# the search tool's outputSchema (from kb mcp's tools/list) allows the field
if [ -x "${KB_VENV:-}/bin/python" ]; then
    printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t2300","version":"1"}}}' \
        '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
        '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' | kb mcp >"$KB_TMP/tools.jsonl" 2>/dev/null
    "$KB_VENV/bin/python" - "$first" "$KB_TMP/tools.jsonl" <<'PY' || fail "kb query --json --expand does not match the search tool's outputSchema"
import json, sys
import jsonschema
out = json.loads(sys.argv[1])
replies = [json.loads(l) for l in open(sys.argv[2])]
tools = [r for r in replies if r.get("id") == 2][0]["result"]["tools"]
schema = [t for t in tools if t["name"] == "search"][0]["outputSchema"]
jsonschema.Draft202012Validator(schema).validate(out)
PY
fi

# cached: the same answer and no request
expect_json 0 kb query --expand --json -k 5 "$Q"
[ "$(requests)" = 1 ] || fail "the second run asked the LLM again"
[ "$(json_get "$out" "j['expansion']['cached'], j['expansion']['llm_ms']")" = "True 0" ] || fail "not cached: $out"
[ "$(headings "$out")" = "$(headings "$first")" ] || fail "cached results differ"
[ "$(sql "SELECT model, prompt, json_array_length(searches) FROM query_expansions")" = "scripted|1|3" ] ||
    fail "the cache row: $(sql "SELECT * FROM query_expansions")"
# the terminal's output says what was searched
expect_rc 0 kb query --expand -k 5 "$Q"
contains "$out" "expanded by 'scripted' (cached): hyde \"Shared memory is divided"
contains "$out" "lex \"bank conflicts\""
contains "$out" "Shared Memory and Memory Banks"
[ "$(requests)" = 1 ] || fail "the terminal run asked the LLM again"
# another model is another entry: asked again (the script has no reply left)
( export KB_LLM_MODEL=other
  expect_json 0 kb query --expand --json -k 5 "$Q"
  [ "$(requests)" = 2 ] || fail "another model did not ask"
  contains "$(cat "$KB_TMP/.stderr")" "warning: query expansion failed, searching the query alone" ) || exit 1

# a reply without labels: a numbered keyword list and the passage after it
start_llm "$LLMFIX/expand-unlabelled.json"
expect_json 0 kb query --expand --json "how do I make host to device copies faster"
python3 - "$out" <<'PY' || fail "the unlabelled reply: $out"
import json, sys
x = json.loads(sys.argv[1])["expansion"]
assert [s["type"] for s in x["searches"]] == ["hyde", "lex", "lex", "lex"], x
assert x["searches"][0]["query"].startswith("Page-locked or pinned memory transfers"), x
assert [s["query"] for s in x["searches"][1:]] == ["pinned memory", "cudaHostAlloc",
                                                   "page-locked host memory"], x
PY
expect_json 0 kb query --expand --json "pinned host memory"
[ "$(json_get "$out" "[s['type'] for s in j['expansion']['searches']]")" = "['hyde']" ] ||
    fail "a bare reply is the passage: $out"

# a 500 (asked twice, kb_http's one retry): the query alone, a warning, no cache
start_llm "$LLMFIX/server-error.json"
expect_json 0 kb query --expand --json -k 5 "$Q, again"
err=$(cat "$KB_TMP/.stderr")
contains "$err" "warning: query expansion failed, searching the query alone"
contains "$err" "500"
[ "$(requests)" = 2 ] || fail "a 500 is retried once, then given up: $(requests) requests"
python3 - "$out" <<'PY' || fail "the fallback's expansion field: $out"
import json, sys
x = json.loads(sys.argv[1])["expansion"]
assert x["searches"] == [] and x["cached"] is False and "500" in x["error"], x
PY
expect_json 0 kb query --json -k 5 "$Q, again"
plain_again=$out
expect_json 0 kb query --expand --json -k 5 "$Q, again"
[ "$(headings "$out")" = "$(headings "$plain_again")" ] || fail "the fallback is not the plain query"
[ "$(requests)" = 4 ] || fail "a failure was cached"
[ "$(sql "SELECT count(*) FROM query_expansions WHERE query LIKE '%again'")" = 0 ] || fail "a failure was cached"
stop_llm

# an unreachable server: the same
( export KB_LLM_URL=http://127.0.0.1:1/v1
  expect_rc 0 kb query --expand -k 3 "pinned memory bandwidth"
  contains "$out" "warning: query expansion failed, searching the query alone"
  contains "$out" "Couldn't connect"
  contains "$out" "1. [cuda-best-practices]" ) || exit 1

# kb eval --expand: one cached query, one the server answers, counted
start_llm "$LLMFIX/expand.json"
cat >"$KB_TMP/qrels.json" <<EOF
{"queries": [
  {"id": "b1", "query": "$Q", "kind": "concept",
   "relevant": [{"source": "cuda-best-practices", "heading": "Shared Memory and Memory Banks"}]},
  {"id": "b2", "query": "what does a bank conflict cost", "kind": "concept",
   "relevant": [{"source": "cuda-best-practices", "heading": "Shared Memory and Memory Banks"}]}
]}
EOF
expect_json 0 kb eval --mode hybrid --expand --json -v "$KB_TMP/qrels.json"
[ "$(requests)" = 1 ] || fail "eval: $(requests) requests, wanted 1 (b1 is cached)"
python3 - "$out" <<'PY' || fail "eval's expansion counts: $out"
import json, sys
h = json.loads(sys.argv[1])["modes"]["hybrid"]
x = h["expansion"]
assert (x["expanded"], x["cached"], x["searched_alone"], x["llm_requests"]) == (2, 1, 0, 1), x
assert x["llm_ms_mean"] > 0, x
pq = {q["id"]: q for q in h["per_query"]}
assert pq["b1"]["expansion"]["cached"] is True and pq["b2"]["expansion"]["cached"] is False, pq
assert pq["b1"]["first_relevant_rank"] and pq["b1"]["first_relevant_rank"] <= 5, pq["b1"]
PY
expect_rc 0 kb eval --mode hybrid --expand "$KB_TMP/qrels.json"
contains "$out" "expanded 2 of 2 queries (2 from the cache), 0 searched alone"
stop_llm

# a real model: SmolLM2-135M through llama.cpp's server (weak, but real)
start_smollm2 --ctx 2048
export KB_LLM_URL="$SMOL_URL/v1" KB_LLM_MODEL=smollm2
unset KB_LLM_API
expect_json 0 kb query --expand --json -k 5 "why is my transpose slow"
python3 - "$out" <<'PY' || fail "SmolLM2's expansion: $out"
import json, sys
j = json.loads(sys.argv[1])
x = j["expansion"]
assert x["error"] is None and not x["cached"] and x["model"] == "smollm2", x
assert x["searches"] and x["searches"][0]["type"] == "hyde" and len(x["searches"][0]["query"]) > 20, x
assert len(j["results"]) == 5, j
PY
expect_json 0 kb query --expand --json -k 5 "why is my transpose slow"
[ "$(json_get "$out" "j['expansion']['cached']")" = True ] || fail "SmolLM2's expansion not cached"
echo "ok"
