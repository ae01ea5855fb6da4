#!/usr/bin/env bash
# tier: ci
# kb serve under a Slowloris client (issue 28 item 7): headers trickled a
# byte at a time (each byte resets libmicrohttpd's idle timer) are cut off
# at --header-timeout, and so is a body trickled after its headers; a kept-
# alive connection may idle up to --timeout before its next request; one
# address holds at most --max-connections-per-ip connections, so a client
# of another is served while it holds all of its own; a flood from the
# client's own address lets it in again once the deadline passes; and a
# thread busy in a handler does not count against the connections it
# leaves unread.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve-lib.sh"
mkdir -p "$KB_TMP/docs"
printf '# Transpose\n\nCoalesced access makes a transpose fast.\n\n# Tiles\n\nShared memory tiles.\n' >"$KB_TMP/docs/t.md"
expect_rc 0 kb -q ingest --no-embed "$KB_TMP/docs"

# slow PORT SCRIPT: a Python snippet with helpers: trickle(sock, data,
# every) sends data a byte at a time until the server closes (returns the
# seconds it took, None if it never closed within 12 s); get(source)
# one GET /healthz from that address (its status, 0 refused)
slow() {
    python3 - "$1" <<PY
import socket, sys, time
port = int(sys.argv[1])
def conn(source="127.0.0.1"):
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s
def closed(s, wait):
    s.settimeout(wait)
    try:
        return s.recv(4096) == b""
    except socket.timeout:
        return False
    except OSError:
        return True
def trickle(s, data, every):
    t0 = time.time()
    for i in range(len(data)):
        try:
            s.send(data[i:i + 1])
        except OSError:
            return time.time() - t0
        if closed(s, every):
            return time.time() - t0
        if time.time() - t0 > 12:
            return None
    return None
def get(source="127.0.0.1"):
    try:
        s = conn(source)
        s.settimeout(10)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        r = s.recv(4096)
        return int(r.split()[1]) if r else 0
    except OSError:
        return 0
HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 200 + b"\r\n\r\n"
$2
PY
}

# the deadline: headers trickled a byte every 0.4 s are cut at about 2 s,
# though the connection is never idle for --timeout's 30
start_server --header-timeout 2 --timeout 30
port=${URL##*:}
slow "$port" '
took = trickle(conn(), HEAD, 0.4)
assert took is not None, "a trickling client held its connection past 12 s"
assert 1.5 < took < 4, "cut off after %.1f s, not about 2 s" % took
' || fail "trickled headers"
# a body trickled after whole headers: cut off too
slow "$port" '
s = conn()
s.sendall(b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 400\r\n\r\n")
took = trickle(s, b"{\"query\": \"" + b"x" * 380, 0.4)
assert took is not None and took < 5, "a trickled body held its connection: %r" % took
' || fail "trickled body"
# a kept-alive connection idles longer than the deadline between requests
slow "$port" '
s = conn()
s.settimeout(10)
for i in range(2):
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    r = s.recv(4096)
    assert r.startswith(b"HTTP/1.1 200"), r
    time.sleep(3)
' || fail "keep-alive across the deadline"
expect_status 200 GET /healthz
stop_server

# one address at its limit: the next connection from it is refused, a
# client of another address is served meanwhile, the held ones trickling
start_server --header-timeout 20 --max-connections-per-ip 30 -q
port=${URL##*:}
slow "$port" '
held = [conn("127.0.0.2") for _ in range(30)]
for s in held:
    s.send(b"GET /h")
time.sleep(0.3)
assert not any(closed(s, 0.05) for s in held), "a connection within the limit was closed"
extra = conn("127.0.0.2")
assert closed(extra, 2), "a connection past the per-address limit was held"
assert get("127.0.0.1") == 200, "another address was not served"
assert get("127.0.0.3") == 200, "another address was not served"
for s in held:
    s.send(b"e")
assert get("127.0.0.1") == 200
' || fail "per-address limit"
stop_server

# a flood from the client's own address, holding every connection the
# server takes: once the deadline passes the client is served again
start_server --header-timeout 2 --threads 1 --max-connections 40 --max-connections-per-ip 40 -q
port=${URL##*:}
slow "$port" '
held = []
for _ in range(60):
    try:
        s = conn()
        s.send(b"GET /h")
        held.append(s)
    except OSError:
        break
time.sleep(0.3)
live = [s for s in held if not closed(s, 0.01)]
assert len(live) >= 30, "the flood holds %d connections" % len(live)
t0 = time.time()
while get() != 200:
    assert time.time() - t0 < 8, "the client was locked out past the deadline"
    time.sleep(0.2)
took = time.time() - t0
assert took < 5, took
' || fail "a flood from the same address"
stop_server

# a loaded server does not cut off a client for its own slowness: with one
# thread busy 3 s in a handler (a search whose LLM reranking stage waits on
# a slow endpoint), a connection opened before it, whose headers then sit
# unread past --header-timeout, is still served; only the thread's free
# time counts
cat >"$KB_TMP/slow_llm.py" <<'PY'
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(3)
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$KB_TMP/slow_llm.py" >"$KB_TMP/llm.port" &
LLM_PID=$!
for _ in $(seq 100); do [ -s "$KB_TMP/llm.port" ] && break; sleep 0.05; done
KB_LLM_URL="http://127.0.0.1:$(cat "$KB_TMP/llm.port")/v1" KB_RERANK_TIMEOUT_MS=8000 \
    start_server --header-timeout 2 --threads 1 -q
port=${URL##*:}
slow "$port" '
import json
b = conn()                  # accepted now: its deadline starts
time.sleep(0.3)
body = json.dumps({"query": "transpose tiles shared", "rerank": "llm", "mode": "lexical"}).encode()
a = conn()
a.sendall(b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
time.sleep(0.3)             # the thread is in the search now
t0 = time.time()
b.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
b.settimeout(15)
r = b.recv(4096)
assert r.startswith(b"HTTP/1.1 200"), "cut off while the server was busy: %r" % r
assert time.time() - t0 > 1.5, "the search did not hold the thread"
a.settimeout(15)
assert a.recv(4096).startswith(b"HTTP/1.1 200")
' || fail "a busy server cut off a waiting client"
stop_server
kill "$LLM_PID" 2>/dev/null
wait "$LLM_PID" 2>/dev/null
echo ok
