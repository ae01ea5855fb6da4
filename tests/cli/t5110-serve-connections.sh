#!/usr/bin/env bash
# tier: ci
# kb serve's connections, with raw sockets: a slow client is cut off, a
# client that hangs up mid-request costs nothing, SIGTERM and SIGINT drain
# the request in flight and exit 0 (a stuck one is cut off at the drain
# timeout), many connections are held at once, and searches on every
# worker at once answer alike.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve-lib.sh"
need_mirror
use_kb small   # serve-lib.sh's ingest_small, built once

# raw PORT SCRIPT: a Python snippet with a connected socket 's' and
# helpers: send(b), recv_all() (until the server closes), reply() (one
# whole HTTP reply: status, headers, body)
raw() {
    python3 - "$1" <<PY
import socket, sys, time
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port), timeout=20)
def send(b): s.sendall(b)
def recv_all():
    out = b""
    while True:
        c = s.recv(65536)
        if not c: return out
        out += c
def reply():
    buf = b""
    while b"\r\n\r\n" not in buf:
        c = s.recv(65536)
        assert c, "closed before a reply: %r" % buf
        buf += c
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    n = int(headers.get("content-length", 0))
    while len(rest) < n:
        c = s.recv(65536)
        assert c, "closed mid-body"
        rest += c
    return int(lines[0].split()[1]), headers, rest[:n]
$2
PY
}

# a slow client: headers never finished are cut off after --timeout
start_server --timeout 1
port=${URL##*:}
raw "$port" '
send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
t0 = time.time()
assert recv_all() == b"", "the server answered half a request"
took = time.time() - t0
assert 0.8 < took < 5, "cut off after %.1f s, not about 1 s" % took
' || fail "a slow client was not cut off"
# a slow body, too: the request is logged as timed out
raw "$port" '
send(b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 40\r\n\r\n{\"query\"")
assert recv_all() == b""
' || fail "a slow body was not cut off"
expect_status 200 GET /healthz
grep -q 'POST /v1/search - 0 [0-9.]*ms (timed out)' "$KB_TMP/serve.err" ||
    fail "the cut-off request is not logged: $(cat "$KB_TMP/serve.err")"

# a client that hangs up mid-request: logged, and nothing is held (the
# drain below does not wait for it)
raw "$port" '
send(b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"query\": \"wa")
time.sleep(0.2)
s.close()
' || fail "disconnecting client"
# and one that hangs up after asking, before the answer
raw "$port" '
send(b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 40\r\n\r\n" + b"{\"query\": \"warp shuffle reduction\"}    ")
s.close()
' || fail "client gone before the answer"
sleep 0.5
grep -q 'POST /v1/search - 0 [0-9.]*ms (client went away)' "$KB_TMP/serve.err" ||
    fail "the abandoned request is not logged: $(cat "$KB_TMP/serve.err")"
expect_status 200 POST /v1/search -d '{"query": "warp shuffle reduction", "k": 2}'
t0=$(date +%s%N)
stop_server
[ "$stop_rc" -eq 0 ] || fail "exit $stop_rc after SIGTERM"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -lt 3000 ] || fail "SIGTERM took $ms ms with nothing in flight"

# SIGTERM drains: the request in flight is answered in full (and its
# connection closed), new connections are refused, exit 0
for sig in TERM INT; do
    start_server --threads 2
    port=${URL##*:}
    python3 - "$port" "$SRV_PID" "$sig" <<'PY' || fail "drain on SIG$sig"
import json, os, signal, socket, sys, time
port, pid, sig = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
body = json.dumps({"query": "tensor memory accelerator", "k": 3}).encode()
s = socket.create_connection(("127.0.0.1", port), timeout=20)
s.sendall(b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:10])
time.sleep(0.3)                       # the server has the request's headers
os.kill(pid, getattr(signal, "SIG" + sig))
deadline = time.time() + 5
while True:                           # the listener goes at once
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        break
    assert time.time() < deadline, "still accepting connections while draining"
    time.sleep(0.05)
s.sendall(body[10:])
buf = b""
while True:
    c = s.recv(65536)
    if not c: break
    buf += c
head, _, rest = buf.partition(b"\r\n\r\n")
assert head.startswith(b"HTTP/1.1 200"), head
assert b"connection: close" in head.lower(), head
j = json.loads(rest)
assert len(j["results"]) == 3, j
PY
    wait "$SRV_PID"; rc=$?; SRV_PID=
    [ "$rc" -eq 0 ] || fail "exit $rc after SIG$sig"
    contains "$(cat "$KB_TMP/serve.err")" "draining"
done

# a request that never finishes is cut off at --drain-timeout; still exit 0
start_server --drain-timeout 1
port=${URL##*:}
python3 - "$port" "$SRV_PID" <<'PY' || fail "drain timeout"
import os, signal, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=20)
s.sendall(b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50\r\n\r\n{")
time.sleep(0.3)
t0 = time.time()
os.kill(pid, signal.SIGTERM)
def running():   # the server is our shell's child: gone means a zombie
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
while running():
    assert time.time() - t0 < 6, "the server did not give up on the stuck request"
    time.sleep(0.05)
took = time.time() - t0
assert 0.8 < took < 6, took
PY
wait "$SRV_PID"; rc=$?; SRV_PID=
[ "$rc" -eq 0 ] || fail "exit $rc after a drain timeout"
contains "$(cat "$KB_TMP/serve.err")" "1 request still running after 1s: cut off"

# many connections at once, all held open, every one answered; then
# searches on every worker at once agree with kb query --json
start_server --threads 4 -q
port=${URL##*:}
python3 - "$port" <<'PY' || fail "many connections"
import socket, sys
port = int(sys.argv[1])
n = 500
conns = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(n)]
for c in conns:
    c.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
ok = 0
for c in conns:
    buf = b""
    while not buf.endswith(b'{"status":"ok"}\n'):
        chunk = c.recv(4096)
        assert chunk, "a connection was closed: %r" % buf
        buf += chunk
    ok += buf.startswith(b"HTTP/1.1 200")
assert ok == n, "%d of %d answered" % (ok, n)
for c in conns:   # still open: keep-alive
    c.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert c.recv(4096).startswith(b"HTTP/1.1 200")
    c.close()
PY
qs=("shared memory bank conflicts" "tensor memory accelerator" "thread block clusters" "LLM kernel generation" "asynchronous copies")
for q in "${qs[@]}"; do
    expect_json 0 kb query --json --full -k 5 "$q"
    printf '%s\n' "$out" >>"$KB_TMP/want.jsonl"
done
python3 - "$URL" "$KB_TMP/want.jsonl" <<'PY' || fail "concurrent searches"
import json, sys, threading, urllib.request
url, wantf = sys.argv[1], sys.argv[2]
want = [json.loads(l) for l in open(wantf)]
for w in want: w.pop("took_ms")
errors = []
def client(i):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for r in range(6):
        w = want[(i + r) % len(want)]
        req = urllib.request.Request(url + "/v1/search", method="POST",
                                     data=json.dumps({"query": w["query"], "k": 5}).encode())
        try:
            got = json.loads(opener.open(req, timeout=60).read())
        except Exception as e:
            errors.append(repr(e)); continue
        got.pop("took_ms")
        if got != w: errors.append("differs for %r" % w["query"])
ts = [threading.Thread(target=client, args=(i,)) for i in range(12)]
for t in ts: t.start()
for t in ts: t.join()
assert not errors, errors[:3]
PY
stop_server
[ "$stop_rc" -eq 0 ] || fail "exit $stop_rc"
echo ok
