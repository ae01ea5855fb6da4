#!/usr/bin/env bash
# tier: ci
# kb serve refuses malformed requests with 400 (issue 26 item 9, RFC 9112):
# a NUL escaped into the path or a parameter (libmicrohttpd cut the string
# there, so /v1/chunks/1%00x served chunk 1), Content-Length headers that
# disagree, HTTP/1.1 without Host. Raw bytes over a socket: curl would
# tidy them.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve-lib.sh"
mkdir -p "$KB_TMP/docs"
printf '# Transpose\n\nCoalesced access makes a transpose fast.\n' >"$KB_TMP/docs/t.md"
expect_rc 0 kb -q ingest --no-embed "$KB_TMP/docs"
start_server
port=${URL##*:}; port=${port%%/*}

# raw REQUEST-BYTES: sends them, prints the reply's status code
raw() {
    python3 - "$port" "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
reply = b""
while b"\r\n" not in reply:
    part = s.recv(4096)
    if not part:
        break
    reply += part
print(reply.split(b" ")[1].decode() if reply else "none")
PY
}
H='Host: 127.0.0.1\r\n'
# the well-formed request answers, so the refusals below are the checks'
[ "$(raw "GET /v1/chunks/1 HTTP/1.1\r\n${H}Connection: close\r\n\r\n")" = 200 ] || fail "chunk 1 not served"
[ "$(raw "GET /v1/chunks/1%00x HTTP/1.1\r\n${H}Connection: close\r\n\r\n")" = 400 ] ||
    fail "a NUL in the path was not refused"
[ "$(raw "GET /v1/papers?section=a%00b HTTP/1.1\r\n${H}Connection: close\r\n\r\n")" = 400 ] ||
    fail "a NUL in a parameter was not refused"
[ "$(raw "GET /v1/papers?section=a%2500b HTTP/1.1\r\n${H}Connection: close\r\n\r\n")" = 200 ] ||
    fail "an escaped percent sign (%2500) was refused"
body='{"query":"transpose","mode":"lexical"}'
[ "$(raw "POST /v1/search HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: ${#body}\r\nContent-Length: 5\r\nConnection: close\r\n\r\n$body")" = 400 ] ||
    fail "disagreeing Content-Length headers were not refused"
[ "$(raw "GET /v1/chunks/1 HTTP/1.1\r\nConnection: close\r\n\r\n")" = 400 ] ||
    fail "HTTP/1.1 without Host was not refused"
[ "$(raw "GET /v1/chunks/1 HTTP/1.0\r\n\r\n")" = 200 ] || fail "HTTP/1.0 without Host was refused"
expect_status 200 GET /healthz
stop_server
echo ok
