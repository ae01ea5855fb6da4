#!/usr/bin/env bash
# tier: ci
# kb serve's /mcp (MCP Streamable HTTP) against a real server on loopback:
# the official Python SDK as the client in its legacy and auto modes (every
# tool, the skill resources with their digests, bad arguments, an unknown
# tool and resource; every reply checked against the schema), then the
# transport's header rules by hand with curl: sessions (issued on
# initialize, required after, 404 unknown, DELETE), protocol versions,
# Mcp-Method and Mcp-Name against the body (-32020), Origin (403), GET
# (405), notifications (202), Accept (406) and Content-Type (415).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve-lib.sh"
need_mirror
[ -x "${KB_VENV:-}/bin/python3" ] || fail "no test virtualenv (KB_VENV): run through make test"
use_kb small-skills   # ingest_small, then the skill library
skill=smem-padding-bank-conflicts

expect_rc 2 kb serve --skills "$KB_TOP/corpus/skills" --no-skills
contains "$out" "pick one"
expect_rc 1 kb serve --listen 127.0.0.1:0 --skills "$KB_TMP/no-such-library"
contains "$out" "no-such-library"

start_server --threads 2 --skills "$KB_TOP/corpus/skills"
contains "$(cat "$KB_TMP/serve.err")" "MCP at $URL/mcp"
nskills=$(ls -d "$KB_TOP"/corpus/skills/*/ | wc -l)
contains "$(cat "$KB_TMP/serve.err")" "$nskills skills as resources"

# the SDK, both modes
mkdir -p "$KB_TMP/work"
for mode in legacy auto; do
    expect_rc 0 "$KB_VENV/bin/python3" "$KB_TOP/tests/mcp/http_client.py" "$mode" "$URL/mcp" "$KB_TMP/work"
    case "$out" in skipped:*) skip_rest "the SDK: ${out#skipped: }" ;; esac
    contains "$out" "ok http $mode"
done

# by hand
A=(-H 'Accept: application/json, text/event-stream')
J=(-H 'Content-Type: application/json')
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
rpc() { printf '{"jsonrpc":"2.0","id":%s,"method":"%s","params":%s}' "$1" "$2" "${3:-{\}}"; }
code_of() { json_get "$body" "j['error']['code']"; }

# initialize issues a session id: 32 hex digits, visible ASCII
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" -d "$init"
contains "$headers" "Content-Type: application/json"
sid=$(printf '%s\n' "$headers" | sed -n 's/^Mcp-Session-Id: //ip')
[[ "$sid" =~ ^[0-9a-f]{32}$ ]] || fail "session id '$sid'"
[ "$(json_get "$body" "j['result']['protocolVersion']")" = 2025-11-25 ] || fail "initialize: $body"
S=(-H "Mcp-Session-Id: $sid")
# a second initialize gets another session
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" -d "$init"
sid2=$(printf '%s\n' "$headers" | sed -n 's/^Mcp-Session-Id: //ip')
[ -n "$sid2" ] && [ "$sid2" != "$sid" ] || fail "the second session id '$sid2'"

# a notification and a client's response: 202, no body
expect_status 202 POST /mcp "${A[@]}" "${J[@]}" "${S[@]}" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
[ -z "$body" ] || fail "202 with a body: $body"
expect_status 202 POST /mcp "${A[@]}" "${J[@]}" "${S[@]}" -d '{"jsonrpc":"2.0","id":"s1","result":{}}'
# requests on the session: tools and resources
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" "${S[@]}" -H 'MCP-Protocol-Version: 2025-11-25' -d "$(rpc 2 tools/list)"
[ "$(json_get "$body" "[t['name'] for t in j['result']['tools']]")" = "['search', 'get', 'papers', 'status', 'skill_search', 'skill_get', 'task', 'prompt']" ] ||
    fail "tools over HTTP: $body"
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" "${S[@]}" -d "$(rpc 3 resources/read "{\"uri\":\"skill://$skill/kernel.cu\"}")"
want=sha256:$(sha256sum "$KB_TOP/corpus/skills/$skill/kernel.cu" | cut -c1-64)
[ "$(json_get "$body" "j['result']['contents'][0]['_meta']['io.modelcontextprotocol.skills/digest']")" = "$want" ] ||
    fail "the kernel's digest over HTTP: $body"
# the session's version, and no other, in MCP-Protocol-Version
expect_status 400 POST /mcp "${A[@]}" "${J[@]}" "${S[@]}" -H 'MCP-Protocol-Version: 2025-06-18' -d "$(rpc 4 tools/list)"
[ "$(code_of)" = -32600 ] || fail "another version's header: $body"
contains "$body" "is not this session's '2025-11-25'"
# no session id after initialize: 400; an unknown one: 404
expect_status 400 POST /mcp "${A[@]}" "${J[@]}" -d "$(rpc 5 tools/list)"
contains "$body" "not initialized"
expect_status 404 POST /mcp "${A[@]}" "${J[@]}" -H 'Mcp-Session-Id: 0123456789abcdef0123456789abcdef' -d "$(rpc 6 tools/list)"
[ "$(code_of)" = -32600 ] && [ "$(json_get "$body" "'id' in j")" = False ] || fail "unknown session: $body"
# GET: no stream, 405 with Allow
expect_status 405 GET /mcp "${S[@]}" -H 'Accept: text/event-stream'
contains "$headers" "Allow: POST, DELETE"
# DELETE ends the session; then it is unknown
expect_status 400 DELETE /mcp
expect_status 204 DELETE /mcp "${S[@]}"
expect_status 404 POST /mcp "${A[@]}" "${J[@]}" "${S[@]}" -d "$(rpc 7 tools/list)"
expect_status 404 DELETE /mcp "${S[@]}"
# the other session lives on
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" -H "Mcp-Session-Id: $sid2" -d "$(rpc 8 ping)"
[ "$body" = '{"jsonrpc":"2.0","id":8,"result":{}}' ] || fail "ping on the second session: $body"

# 2026-07-28: no session, the headers must match the body
meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
M=(-H 'MCP-Protocol-Version: 2026-07-28')
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" "${M[@]}" -H 'Mcp-Method: server/discover' -d "$(rpc 1 server/discover "{$meta}")"
lacks "$headers" "Mcp-Session-Id"
[ "$(json_get "$body" "j['result']['capabilities']['extensions']")" = "{'io.modelcontextprotocol/skills': {}}" ] ||
    fail "discover: the Skills extension: $body"
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" "${M[@]}" -H 'Mcp-Method: tools/call' -H 'Mcp-Name: status' \
    -d "$(rpc 2 tools/call "{\"name\":\"status\",$meta}")"
[ "$(json_get "$body" "j['result']['resultType']")" = complete ] || fail "2026-07-28 call: $body"
# the base64 form of Mcp-Name
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" "${M[@]}" -H 'Mcp-Method: tools/call' \
    -H "Mcp-Name: =?base64?$(printf status | base64)?=" -d "$(rpc 3 tools/call "{\"name\":\"status\",$meta}")"
for bad in "Mcp-Method: tools/list|Mcp-Name: status" "Mcp-Method: tools/call|Mcp-Name: search" "Mcp-Method: tools/call|X-None: 1"; do
    expect_status 400 POST /mcp "${A[@]}" "${J[@]}" "${M[@]}" -H "${bad%%|*}" -H "${bad##*|}" \
        -d "$(rpc 4 tools/call "{\"name\":\"status\",$meta}")"
    [ "$(code_of)" = -32020 ] || fail "headers '$bad' against the body: $body"
done
# Mcp-Name against a resources/read's uri
expect_status 400 POST /mcp "${A[@]}" "${J[@]}" "${M[@]}" -H 'Mcp-Method: resources/read' -H "Mcp-Name: skill://$skill/SKILL.md" \
    -d "$(rpc 5 resources/read "{\"uri\":\"skill://$skill/kernel.cu\",$meta}")"
[ "$(code_of)" = -32020 ] || fail "Mcp-Name against the uri: $body"
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" "${M[@]}" -H 'Mcp-Method: resources/read' -H "Mcp-Name: skill://$skill/kernel.cu" \
    -d "$(rpc 6 resources/read "{\"uri\":\"skill://$skill/kernel.cu\",$meta}")"
# the body's version against the header's
expect_status 400 POST /mcp "${A[@]}" "${J[@]}" "${M[@]}" -H 'Mcp-Method: tools/list' \
    -d "$(rpc 7 tools/list '{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}')"
[ "$(code_of)" = -32020 ] || fail "body version against the header: $body"
# an envelope without the header is a mismatch too; an unknown version -32022
expect_status 400 POST /mcp "${A[@]}" "${J[@]}" -H 'Mcp-Method: tools/list' -d "$(rpc 8 tools/list "{$meta}")"
[ "$(code_of)" = -32020 ] || fail "an envelope without MCP-Protocol-Version: $body"
expect_status 400 POST /mcp "${A[@]}" "${J[@]}" -H 'MCP-Protocol-Version: 2031-01-01' -H 'Mcp-Method: tools/list' \
    -d "$(rpc 9 tools/list '{"_meta":{"io.modelcontextprotocol/protocolVersion":"2031-01-01","io.modelcontextprotocol/clientCapabilities":{}}}')"
[ "$(code_of)" = -32022 ] && [ "$(json_get "$body" "j['error']['data']['supported']")" = "['2026-07-28']" ] ||
    fail "an unknown version: $body"
# an unknown method: 404 in 2026-07-28
expect_status 404 POST /mcp "${A[@]}" "${J[@]}" "${M[@]}" -H 'Mcp-Method: nope/nope' -d "$(rpc 10 nope/nope "{$meta}")"
[ "$(code_of)" = -32601 ] || fail "an unknown method: $body"
# POST only: GET and DELETE are 405
expect_status 405 GET /mcp "${M[@]}"
contains "$headers" "Allow: POST"
expect_status 405 DELETE /mcp "${M[@]}" -H "Mcp-Session-Id: $sid2"
# a notification: 202
expect_status 202 POST /mcp "${A[@]}" "${J[@]}" "${M[@]}" -d '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}'

# the transport's own refusals
expect_status 406 POST /mcp -H 'Accept: application/json' "${J[@]}" -d "$init"
contains "$body" "text/event-stream"
expect_status 406 POST /mcp -H 'Accept: text/html' "${J[@]}" -d "$init"
expect_status 415 POST /mcp "${A[@]}" -H 'Content-Type: text/plain' -d "$init"
expect_status 400 POST /mcp "${A[@]}" "${J[@]}" -d '{"jsonrpc":"2.0",'
[ "$(code_of)" = -32700 ] || fail "not JSON: $body"
expect_status 400 POST /mcp "${A[@]}" "${J[@]}" -d "[$init]"
[ "$(code_of)" = -32600 ] || fail "a batch: $body"
# an Origin that is not loopback: 403; a loopback one passes
expect_error 403 forbidden_origin POST /mcp "${A[@]}" "${J[@]}" -H 'Origin: https://evil.example' -d "$init"
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" -H "Origin: http://localhost:${URL##*:}" -d "$init"
# one access-log line per request, no session id in it
grep -q 'POST /mcp 200' "$KB_TMP/serve.err" || fail "no access log line for /mcp"
grep -q "$sid2" "$KB_TMP/serve.err" && fail "a session id in the log"
stop_server
[ "$stop_rc" = 0 ] || fail "kb serve exited $stop_rc"

# a token guards /mcp like every other route
printf 'sekrit-token\n' >"$KB_TMP/token"
chmod 600 "$KB_TMP/token"
start_server --token-file "$KB_TMP/token" --no-skills
expect_status 401 POST /mcp "${A[@]}" "${J[@]}" -d "$init"
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" -H 'Authorization: Bearer sekrit-token' -d "$init"
[ "$(json_get "$body" "'resources' in j['result']['capabilities']")" = False ] || fail "--no-skills: $body"
stop_server
echo ok
