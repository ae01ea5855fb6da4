#!/usr/bin/env bash
# tier: ci
# kb serve for an agent's first session (issue 26 items 8 and 10): an
# unknown source id is a 400 like other argument errors (not a 404, read
# as no such endpoint); a browser-based MCP client of a loopback origin
# gets its CORS preflight answered (without the token, which a preflight
# never carries) and may read the replies (Mcp-Session-Id exposed), while
# other origins stay refused; the prompt tool's schema says its budget's
# floor depends on the task; and MCP sessions never run out: thousands of
# initialize requests without DELETE evict the least recently used idle
# session rather than lock new clients out with 503, and one address
# cannot push out another's sessions (1024 each).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve-lib.sh"
mkdir -p "$KB_TMP/docs"
printf '# Transpose\n\nCoalesced access makes a transpose fast.\n' >"$KB_TMP/docs/t.md"
expect_rc 0 kb -q ingest --no-embed "$KB_TMP/docs"
src=$(sql "SELECT id FROM sources LIMIT 1")
start_server --no-skills
port=${URL##*:}

# an unknown source: 400 bad_arguments naming the KB's sources
expect_error 400 bad_arguments POST /v1/search -d '{"query": "transpose", "sources": ["nosuch"]}'
contains "$body" "unknown source 'nosuch' (the KB has: $src)"
expect_status 200 POST /v1/search -d "{\"query\": \"transpose\", \"sources\": [\"$src\"]}"
# and kb query still calls it a usage error (exit 2)
expect_rc 2 kb query --source nosuch transpose
contains "$out" "unknown source 'nosuch'"

# CORS: the preflight of a loopback page, for /mcp and a REST path
A=(-H 'Accept: application/json, text/event-stream')
J=(-H 'Content-Type: application/json')
O=(-H "Origin: http://localhost:5173")
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"browser","version":"1"}}}'
expect_status 204 OPTIONS /mcp "${O[@]}" -H 'Access-Control-Request-Method: POST' \
    -H 'Access-Control-Request-Headers: content-type, mcp-session-id, mcp-protocol-version, authorization'
contains "$headers" "Access-Control-Allow-Origin: http://localhost:5173"
contains "$headers" "Access-Control-Allow-Methods: GET, HEAD, POST, DELETE, OPTIONS"
for h in Content-Type Mcp-Session-Id MCP-Protocol-Version Authorization Mcp-Method Mcp-Name; do
    printf '%s\n' "$headers" | grep -i '^Access-Control-Allow-Headers:' | grep -qi "$h" ||
        fail "the preflight does not allow $h: $headers"
done
contains "$headers" "Access-Control-Max-Age: "
contains "$headers" "Vary: Origin"
expect_status 204 OPTIONS /v1/search -H "Origin: http://[::1]:8080" -H 'Access-Control-Request-Method: POST'
contains "$headers" "Access-Control-Allow-Origin: http://[::1]:8080"
# another origin: refused, and told nothing that would let its page read it
expect_error 403 forbidden_origin OPTIONS /mcp -H 'Origin: https://evil.example' -H 'Access-Control-Request-Method: POST'
lacks "$headers" "Access-Control-Allow"
# an unknown path: 404, as for every method
expect_status 404 OPTIONS /nowhere "${O[@]}" -H 'Access-Control-Request-Method: GET'
# a plain OPTIONS: the methods, no CORS
expect_status 204 OPTIONS /v1/status
contains "$headers" "Allow: GET, HEAD, OPTIONS"
lacks "$headers" "Access-Control-Allow-Origin"
# the page then reads the replies, the session id included
expect_status 200 POST /mcp "${O[@]}" "${A[@]}" "${J[@]}" -d "$init"
contains "$headers" "Access-Control-Allow-Origin: http://localhost:5173"
printf '%s\n' "$headers" | grep -i '^Access-Control-Expose-Headers:' | grep -qi 'Mcp-Session-Id' ||
    fail "Mcp-Session-Id is not exposed: $headers"
expect_status 200 GET /v1/status "${O[@]}"
contains "$headers" "Access-Control-Allow-Origin: http://localhost:5173"
# no Origin (a native client): no CORS headers
expect_status 200 GET /v1/status
lacks "$headers" "Access-Control"

# the prompt tool's budget: its floor depends on the task, and says so
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" -d "$init"
sid=$(printf '%s\n' "$headers" | sed -n 's/^Mcp-Session-Id: //ip')
expect_status 200 POST /mcp "${A[@]}" "${J[@]}" -H "Mcp-Session-Id: $sid" \
    -d '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
d=$(json_get "$body" "[t for t in j['result']['tools'] if t['name'] == 'prompt'][0]['inputSchema']['properties']['budget_tokens']['description']")
contains "$d" "depends on the task"
contains "$d" "an error that names the task's size"
stop_server

# a token: the preflight passes without it, the request does not (and
# its 401 is readable by the page)
printf 'sekrit\n' >"$KB_TMP/token"
chmod 600 "$KB_TMP/token"
start_server --no-skills --token-file "$KB_TMP/token"
expect_status 204 OPTIONS /mcp "${O[@]}" -H 'Access-Control-Request-Method: POST'
contains "$headers" "Access-Control-Allow-Origin: http://localhost:5173"
expect_status 401 POST /mcp "${O[@]}" "${A[@]}" "${J[@]}" -d "$init"
contains "$headers" "Access-Control-Allow-Origin: http://localhost:5173"
expect_status 200 POST /mcp "${O[@]}" "${A[@]}" "${J[@]}" -H 'Authorization: Bearer sekrit' -d "$init"
stop_server

# sessions: a client that never ends its sessions costs its own oldest,
# never a new client's handshake; one address cannot evict another's
start_server --no-skills -q
python3 - "${URL##*:}" <<'PY' || fail "MCP sessions under a flood of initialize"
import http.client, json, sys
port = int(sys.argv[1])
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}})
H = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

class Client:
    def __init__(self, source):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    def post(self, body, sid=None):
        h = dict(H)
        if sid:
            h["Mcp-Session-Id"] = sid
        self.c.request("POST", "/mcp", body=body, headers=h)
        r = self.c.getresponse()
        r.read()
        return r.status, r.getheader("Mcp-Session-Id")
    def init(self):
        st, sid = self.post(INIT)
        assert st == 200 and sid, "initialize: %d" % st
        return sid
    def ping(self, sid):
        return self.post(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}), sid)[0]

mine, other = Client("127.0.0.1"), Client("127.0.0.2")
keep = mine.init()
assert mine.ping(keep) == 200
# another address opens 1100 sessions and never ends one: it gives up its
# own oldest past 1024, and mine lives on
flood = [other.init() for _ in range(1100)]
assert mine.ping(keep) == 200, "a session of another address was evicted"
assert other.ping(flood[0]) == 404, "the flooding address kept more than its share"
assert other.ping(flood[-1]) == 200
# a flood from every address at once fills the table (4096) and beyond:
# new handshakes still succeed, the least recently used idle sessions go
third = Client("127.0.0.3")
fourth = Client("127.0.0.4")
for c in (mine, third, fourth):
    for _ in range(1100):
        c.init()
fifth = Client("127.0.0.5")
fresh = fifth.init()
assert fifth.ping(fresh) == 200
# the one that went: the least recently used of all, the other address's
# oldest left (1100 - 1024 of its own went before)
assert other.ping(flood[76]) == 404, "the least recently used session of a full table stayed"
assert other.ping(flood[77]) == 200
print("ok sessions")
PY
stop_server
echo ok
