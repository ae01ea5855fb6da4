#!/usr/bin/env bash
# tier: ci
# kb serve's skill endpoints against a real server on loopback, over the
# committed skill library (corpus/skills): GET /v1/skills (the list,
# filtered; with ?query the skill_search tool), /v1/skills/{name}
# (skill_get) and /v1/skills/{name}/files/{file}; each answer the same
# JSON as /mcp's tool call or resource, conforming to the OpenAPI
# document's response schema; 404 and 400 as JSON errors; no library
# (--no-skills): 404.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve-lib.sh"
need_mirror
[ -x "${KB_VENV:-}/bin/python3" ] || fail "no test virtualenv (KB_VENV): run through make test"
PY="$KB_VENV/bin/python3"
LIB="$KB_TOP/corpus/skills"
use_kb small-skills   # ingest_small, then the skill library
skill=smem-padding-bank-conflicts

start_server --threads 2 --skills "$LIB"
expect_status 200 GET /openapi.json
openapi=$body
for p in /v1/skills /v1/skills/{name} /v1/skills/{name}/files/{file}; do
    [ "$(json_get "$openapi" "'get' in j['paths']['$p']")" = True ] || fail "openapi lacks GET $p"
done

# conforms OPERATION-PATH STATUS BODY: the body against the document's
# response schema for that status
conforms() {
    "$PY" - "$openapi" "$1" "$2" "$3" <<'PY' || fail "GET $1 ($2) does not conform to the OpenAPI document: $3"
import json, sys, jsonschema
doc, path, status, body = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
schema = doc["paths"][path]["get"]["responses"][status]["content"]["application/json"]["schema"]
schema = dict(schema, components=doc["components"])
jsonschema.validate(body, schema, cls=jsonschema.Draft202012Validator)
PY
}

# the list: every skill of the library but the retired ones, by name, its
# status its own; the retired ones when asked for
retired=$(cd "$LIB" && grep -l 'kb-status: *retired' */SKILL.md | cut -d/ -f1 | sort | tr '\n' ' ')
[ -n "$retired" ] || fail "the library has no retired skill to test with"
expect_status 200 GET "/v1/skills?status=retired"
[ "$(json_get "$body" "' '.join(s['name'] for s in j['skills']) + ' '")" = "$retired" ] ||
    fail "status=retired: $body"
expect_status 200 GET /v1/skills
contains "$headers" "Content-Type: application/json"
conforms /v1/skills 200 "$body"
want=$(cd "$LIB" && grep -L 'kb-status: *retired' */SKILL.md | cut -d/ -f1 | sort | tr '\n' ' ')
[ "$(json_get "$body" "' '.join(s['name'] for s in j['skills']) + ' '")" = "$want" ] ||
    fail "the list: $(json_get "$body" "[s['name'] for s in j['skills']]"), wanted $want"
st=$(sed -n 's/^ *kb-status: *//p' "$LIB/$skill/SKILL.md" | tr -d "\"'")
[ "$(json_get "$body" "[s['status'] for s in j['skills'] if s['name'] == '$skill'][0]")" = "$st" ] ||
    fail "$skill's status in the list is not its front matter's $st"
list=$body
# all=true: the retired ones too, as skill_search's all (schemathesis sent
# it: the OpenAPI document shares GET /v1/skills between the two tools)
expect_status 200 GET "/v1/skills?all=true"
every=$(cd "$LIB" && ls -d */ | tr -d / | sort | tr '\n' ' ')
[ "$(json_get "$body" "' '.join(s['name'] for s in j['skills']) + ' '")" = "$every" ] ||
    fail "all=true: $(json_get "$body" "[s['name'] for s in j['skills']]"), wanted $every"
# filters: the same as skill_search's (status, arch with sm_NN+, ops), and k
expect_status 200 GET "/v1/skills?status=verified"
[ "$(json_get "$body" "len(j['skills']) > 0 and all(s['status'] == 'verified' for s in j['skills'])")" = True ] ||
    fail "status=verified: $body"
expect_status 200 GET "/v1/skills?ops=transpose&arch=sm_90"
[ "$(json_get "$body" "'$skill' in [s['name'] for s in j['skills']] and all('transpose' in s['ops'] for s in j['skills'])")" = True ] ||
    fail "ops=transpose&arch=sm_90 (an sm_70+ skill counts): $body"
expect_status 200 GET "/v1/skills?arch=sm_50"
[ "$(json_get "$body" "j['skills']")" = "[]" ] || fail "arch=sm_50 matched: $body"
expect_status 200 GET "/v1/skills?k=3&mode=lexical"
[ "$(json_get "$body" "[s['name'] for s in j['skills']] == [s['name'] for s in json.loads('''$list''')['skills'][:3]]")" = True ] ||
    fail "k=3: $body"

# with a query: the skill_search tool, the answer /mcp's tools/call gives
A=(-H 'Accept: application/json, text/event-stream' -H 'Content-Type: application/json'
   -H 'MCP-Protocol-Version: 2026-07-28')
meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
mcp_call() {   # NAME ARGS-JSON: sets $mcp to the structuredContent
    expect_status 200 POST /mcp "${A[@]}" -H 'Mcp-Method: tools/call' -H "Mcp-Name: $1" \
        -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$1\",\"arguments\":$2,$meta}}"
    mcp=$(json_get "$body" "json.dumps(j['result']['structuredContent'])")
}
same() {   # WHAT A B: equal JSON, took_ms aside
    "$PY" - "$2" "$3" <<'PY' || fail "$1: REST and /mcp differ: $2 // $3"
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
a.pop("took_ms", None); b.pop("took_ms", None)
sys.exit(a != b)
PY
}
expect_status 200 GET "/v1/skills?query=bank%20conflicts%20in%20a%20shared-memory%20transpose&k=3"
conforms /v1/skills 200 "$body"
[ "$(json_get "$body" "j['results'][0]['name']")" = "$skill" ] || fail "search: $body"
[ "$(json_get "$body" "j['results'][0]['uri']")" = "skill://$skill/SKILL.md" ] || fail "search's uri: $body"
rest=$body
mcp_call skill_search '{"query":"bank conflicts in a shared-memory transpose","k":3}'
same skill_search "$rest" "$mcp"
expect_status 200 GET "/v1/skills?query=gemm&status=approved&mode=lexical"
[ "$(json_get "$body" "all(r['status'] == 'approved' for r in j['results'])")" = True ] || fail "search status=approved: $body"

# one skill: skill_get's answer, its SKILL.md and the digests of its files
expect_status 200 GET "/v1/skills/$skill"
conforms "/v1/skills/{name}" 200 "$body"
rest=$body
"$PY" - "$body" "$LIB/$skill" <<'PY' || fail "GET /v1/skills/$skill is not the library's"
import hashlib, json, os, sys
j, d = json.loads(sys.argv[1]), sys.argv[2]
assert j["skill_md"] == open(os.path.join(d, "SKILL.md")).read()
files = sorted(f for f in os.listdir(d) if not f.startswith("."))
assert sorted(f["uri"].rsplit("/", 1)[1] for f in j["files"]) == files, j["files"]
for f in j["files"]:
    data = open(os.path.join(d, f["uri"].rsplit("/", 1)[1]), "rb").read()
    assert f["digest"] == "sha256:" + hashlib.sha256(data).hexdigest() and f["size"] == len(data), f
assert "kernel" not in j
PY
mcp_call skill_get "{\"name\":\"$skill\"}"
same skill_get "$rest" "$mcp"
expect_status 200 GET "/v1/skills/$skill?kernel=true"
[ "$(json_get "$body" "j['kernel'] == open('$LIB/$skill/kernel.cu').read()")" = True ] || fail "kernel=true"

# a file: the bytes of the resource /mcp serves, with its digest
expect_status 200 GET "/v1/skills/$skill/files/kernel.cu"
conforms "/v1/skills/{name}/files/{file}" 200 "$body"
want=sha256:$(sha256sum "$LIB/$skill/kernel.cu" | cut -c1-64)
[ "$(json_get "$body" "j['digest']")" = "$want" ] || fail "the kernel's digest: $body"
[ "$(json_get "$body" "j['text'] == open('$LIB/$skill/kernel.cu').read() and j['mimeType'] == 'text/x-cuda' and j['uri'] == 'skill://$skill/kernel.cu'")" = True ] ||
    fail "the kernel's file: $body"
rest=$body
expect_status 200 POST /mcp "${A[@]}" -H 'Mcp-Method: resources/read' -H "Mcp-Name: skill://$skill/kernel.cu" \
    -d "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/read\",\"params\":{\"uri\":\"skill://$skill/kernel.cu\",$meta}}"
"$PY" - "$rest" "$body" <<'PY' || fail "the file differs from the resource: $rest // $body"
import json, sys
f, r = json.loads(sys.argv[1]), json.loads(sys.argv[2])["result"]["contents"][0]
sys.exit(not (f["text"] == r["text"] and f["uri"] == r["uri"] and f["mimeType"] == r["mimeType"]
              and f["digest"] == r["_meta"]["io.modelcontextprotocol.skills/digest"]))
PY
expect_status 200 GET "/v1/skills/$skill/files/evidence.json"
[ "$(json_get "$body" "j['mimeType']")" = application/json ] || fail "evidence.json: $body"

# errors: 404 for what is not there, 400 for bad parameters, JSON either way
expect_error 404 not_found GET /v1/skills/no-such-skill
contains "$body" "no skill 'no-such-skill'"
contains "$body" "$skill"
conforms "/v1/skills/{name}" 404 "$body"
expect_error 404 not_found GET "/v1/skills/$skill/files/no-such-file"
contains "$body" "has no file 'no-such-file'"
expect_error 404 not_found GET "/v1/skills/no-such-skill/files/SKILL.md"
expect_error 404 not_found GET "/v1/skills/$skill/kernel.cu"
expect_error 404 not_found GET "/v1/skills/"
expect_error 400 bad_arguments GET "/v1/skills?k=0"
contains "$body" "'k' must be an integer from 1 to 50"
conforms /v1/skills 400 "$body"
expect_error 400 bad_arguments GET "/v1/skills?query=gemm&k=many"
expect_error 400 bad_arguments GET "/v1/skills?status=bogus"
expect_error 400 bad_arguments GET "/v1/skills?flavour=mild"
contains "$body" "unknown query parameter 'flavour'"
expect_error 400 bad_arguments GET "/v1/skills?query="
expect_error 400 bad_arguments GET "/v1/skills/$skill?kernel=maybe"
expect_error 405 method_not_allowed POST /v1/skills -d '{}'
contains "$headers" "Allow: GET, HEAD"
stop_server
[ "$stop_rc" -eq 0 ] || fail "exit $stop_rc"

# no library: the list and skill_get are 404 (skill_search still searches
# the KB's skills, its uri empty)
start_server --threads 1 --no-skills
expect_error 404 not_found GET /v1/skills
contains "$body" "serves no skill library"
expect_error 404 not_found GET "/v1/skills/$skill"
expect_error 404 not_found GET "/v1/skills/$skill/files/SKILL.md"
expect_status 200 GET "/v1/skills?query=bank%20conflicts&k=1"
[ "$(json_get "$body" "(j['results'][0]['name'], j['results'][0]['uri'])")" = "('$skill', '')" ] ||
    fail "search without a library: $body"
stop_server
[ "$stop_rc" -eq 0 ] || fail "exit $stop_rc"
echo ok
