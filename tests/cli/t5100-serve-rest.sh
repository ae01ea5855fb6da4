#!/usr/bin/env bash
# tier: ci
# kb serve's REST endpoints against a real server on loopback: each answer
# is the tool's (the object `kb query --json` prints), every error status
# with its JSON error, the token, Origin and Host, the body cap, the
# access log; the command line's own errors.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve-lib.sh"
need_mirror
[ -x "${KB_VENV:-}/bin/python3" ] || fail "no test virtualenv (KB_VENV): run through make test"
use_kb small   # serve-lib.sh's ingest_small, built once

# the command line
expect_rc 0 kb serve --help
contains "$out" "--listen ADDR:PORT"
contains "$out" "--token-file FILE"
expect_rc 2 kb serve --listen nowhere
contains "$out" "--listen wants ADDRESS:PORT"
expect_rc 2 kb serve --listen 127.0.0.1:70000
expect_rc 2 kb serve --threads 0
contains "$out" "--threads wants a whole number from 1 to 64"
expect_rc 2 kb serve extra
contains "$out" "unexpected argument 'extra'"
expect_rc 2 kb serve --listen host.example:80
contains "$out" "not a numeric IPv4 or IPv6 address"
expect_rc 1 kb --kb "$KB_TMP/none" serve --listen 127.0.0.1:0
contains "$out" "$KB_TMP/none"
printf '\n' >"$KB_TMP/empty-token"
expect_rc 2 kb serve --listen 127.0.0.1:0 --token-file "$KB_TMP/empty-token"
contains "$out" "is empty"
expect_rc 1 kb serve --listen 127.0.0.1:0 --token-file "$KB_TMP/no-such-file"
contains "$out" "no-such-file"

start_server --threads 2
case $URL in http://127.0.0.1:[0-9]*) ;; *) fail "URL '$URL'" ;; esac
port=${URL##*:}
[ "$port" -gt 0 ] || fail "port 0 was not replaced by the one picked"
# a busy port is a clear error
expect_rc 1 kb serve --listen "127.0.0.1:$port"
contains "$out" "cannot listen on '127.0.0.1:$port'"
contains "$out" "in use"

# GET /healthz, GET /openapi.json
expect_status 200 GET /healthz
[ "$body" = '{"status":"ok"}' ] || fail "healthz: $body"
expect_status 200 GET /openapi.json
[ "$(json_get "$body" "j['openapi']")" = 3.1.0 ] || fail "openapi version"
[ "$(json_get "$body" "sorted(j['paths'])")" = "['/healthz', '/v1/chunks/{id}', '/v1/papers', '/v1/prompt', '/v1/search', '/v1/skills', '/v1/skills/{name}', '/v1/skills/{name}/files/{file}', '/v1/status', '/v1/task']" ] ||
    fail "openapi paths: $(json_get "$body" "sorted(j['paths'])")"
[ "$(json_get "$body" "'security' in j")" = False ] || fail "no token, yet the document asks for one"
openapi=$body

# POST /v1/search: exactly `kb query --json`'s object (took_ms aside), and
# it conforms to the search response schema of the OpenAPI document
q="why does register spilling slow a kernel"
for mode in hybrid lexical vector; do
    expect_status 200 POST /v1/search -H 'Content-Type: application/json' \
        -d "{\"query\": \"$q\", \"k\": 5, \"mode\": \"$mode\"}"
    contains "$headers" "Content-Type: application/json"
    expect_json 0 kb query --json --full -k 5 --mode "$mode" "$q"
    "$KB_VENV/bin/python3" - "$body" "$out" "$openapi" <<'PY' || fail "search ($mode) differs from kb query --json"
import json, sys
import jsonschema
served, cli, doc = (json.loads(a) for a in sys.argv[1:4])
schema = doc['paths']['/v1/search']['post']['responses']['200']['content']['application/json']['schema']
jsonschema.Draft202012Validator(schema).validate(served)
assert served['took_ms'] >= 0
served.pop('took_ms'); cli.pop('took_ms')
assert served == cli, (served, cli)
assert len(served['results']) == 5
PY
done
# filters and snippets are the tool's arguments
expect_status 200 POST /v1/search -d '{"query": "tensor memory accelerator", "sources": ["hopper-tuning-guide"], "kinds": ["text"], "snippet": true, "k": 3}'
[ "$(json_get "$body" "set(r['source'] for r in j['results'])")" = "{'hopper-tuning-guide'}" ] || fail "sources filter"
[ "$(json_get "$body" "all(len(r['text']) < 600 for r in j['results'])")" = True ] || fail "snippet"
chunk=$(json_get "$body" "j['results'][0]['chunk_id']")

# GET /v1/chunks/{id}[?section=1]: `kb get --json`
expect_status 200 GET "/v1/chunks/$chunk"
expect_json 0 kb get --json "$chunk"
[ "$body" = "$out" ] || fail "chunk: $body differs from kb get --json: $out"
for flag in 1 true; do
    expect_status 200 GET "/v1/chunks/$chunk?section=$flag"
    expect_json 0 kb get --json --section "$chunk"
    [ "$body" = "$out" ] || fail "section=$flag differs from kb get --json --section"
done
expect_status 200 GET "/v1/chunks/$chunk?section=false"
expect_json 0 kb get --json "$chunk"
[ "$body" = "$out" ] || fail "section=false"
expect_status 200 HEAD "/v1/chunks/$chunk"

# GET /v1/papers[?section=S], GET /v1/status
expect_status 200 GET /v1/papers
expect_json 0 kb papers --json
[ "$body" = "$out" ] || fail "papers differ from kb papers --json"
[ "$(json_get "$body" "len(j['papers'])")" -gt 50 ] || fail "too few papers"
expect_status 200 GET "/v1/papers?section=LLM4Kernel"
expect_json 0 kb papers --json --section LLM4Kernel
[ "$body" = "$out" ] || fail "papers?section differs from kb papers --section"
n_all=$(json_get "$(kb papers --json)" "len(j['papers'])")
[ "$(json_get "$body" "0 < len(j['papers']) < $n_all")" = True ] || fail "section filter"
expect_status 200 GET "/v1/papers?section=LLM%204"   # decoded, like any query string
expect_status 200 GET /v1/status
expect_json 0 kb status --json
[ "$body" = "$out" ] || fail "status differs from kb status --json"

# 400: bad JSON, a body that is no object, bad arguments (the tool's own
# message), invalid UTF-8, bad query parameters and ids
expect_error 400 bad_json POST /v1/search -d '{"query": '
contains "$body" "not JSON"
expect_error 400 bad_json POST /v1/search -d '["query"]'
expect_error 400 bad_json POST /v1/search -d '{"query": "a"} {"query": "b"}'
expect_error 400 bad_json POST /v1/search
contains "$body" "empty"
expect_error 400 bad_arguments POST /v1/search -d '{"query": "x", "k": 0}'
contains "$body" "search: 'k' must be an integer from 1 to 50, not 0"
expect_error 400 bad_arguments POST /v1/search -d '{"query": "x", "frob": 1}'
contains "$body" "unknown argument 'frob'"
expect_error 400 bad_arguments POST /v1/search -d '{"k": 3}'
contains "$body" "missing argument 'query'"
printf '{"query": "\xff\xfe"}' >"$KB_TMP/bad-utf8.json"
expect_error 400 bad_json POST /v1/search --data-binary @"$KB_TMP/bad-utf8.json"
contains "$body" "UTF-8"
expect_error 400 bad_json POST /v1/search -d '{"query": "a\u0000b"}'
contains "$body" "NUL character"
expect_status 200 POST /v1/search -d '{"query": "a\\u0000b", "k": 1}'   # a backslash, then text
expect_error 400 bad_arguments POST "/v1/search?k=3" -d '{"query": "x"}'
contains "$body" "JSON body"
expect_error 400 bad_arguments GET /v1/chunks/abc
expect_error 400 bad_arguments GET /v1/chunks/-4
expect_error 400 bad_arguments GET /v1/chunks/99999999999999999999
expect_error 400 bad_arguments GET "/v1/chunks/$chunk?section=maybe"
contains "$body" "'section' must be true or false"
expect_error 400 bad_arguments GET "/v1/chunks/$chunk?sectoin=1"
contains "$body" "unknown query parameter 'sectoin'"
expect_error 400 bad_arguments GET "/v1/chunks/$chunk?section=1&section=0"
contains "$body" "given twice"
expect_error 400 bad_arguments GET "/v1/status?verbose=1"
expect_error 400 bad_arguments GET "/v1/papers?section=%ff"
contains "$body" "UTF-8"

# an error message that quotes raw bytes, or cuts a quote inside a
# character, is still valid UTF-8
utf8_body() { python3 -c "import sys; open(sys.argv[1], 'rb').read().decode('utf-8')" "$KB_TMP/.body" ||
                  fail "not UTF-8: $body"; }
expect_error 404 not_found GET "/v1/%ff%fe"
utf8_body
long=$(python3 -c "print('€' * 100)")   # 3 bytes each: %.64s cuts one
expect_error 400 bad_arguments POST /v1/search -d "{\"query\": \"x\", \"kinds\": [\"$long\"]}"
utf8_body

# 404: no such chunk, no such endpoint; 405 with Allow
expect_error 404 not_found GET /v1/chunks/987654321
contains "$body" "no chunk 987654321"
expect_error 404 not_found GET /v1/nothing
expect_error 404 not_found GET /v1/chunks/
expect_error 404 not_found GET "/v1/chunks/$chunk/more"
expect_error 405 method_not_allowed GET /v1/search
contains "$headers" "Allow: POST"
expect_error 405 method_not_allowed DELETE /v1/status
contains "$headers" "Allow: GET, HEAD"
expect_error 405 method_not_allowed POST /healthz -d '{}'

# 403: an Origin that is not loopback (a web page's request), a Host that
# names no loopback server (DNS rebinding); loopback ones pass
expect_error 403 forbidden_origin GET /v1/status -H 'Origin: https://evil.example'
expect_error 403 forbidden_origin GET /v1/status -H 'Origin: null'
expect_error 403 forbidden_origin POST /v1/search -H 'Origin: http://127.0.0.1.evil.example' -d '{"query":"x"}'
expect_error 403 forbidden_host GET /v1/status -H 'Host: evil.example'
for o in http://localhost:3000 http://127.0.0.1 "http://[::1]:8080" https://localhost; do
    expect_status 200 GET /v1/status -H "Origin: $o"
done
expect_status 200 GET /v1/status -H "Host: localhost:$port"

# 413: over the cap, by its Content-Length (refused before it is read)
# and chunked (read, dropped, refused)
python3 -c "import json; print(json.dumps({'query': 'a' * 1100000}))" >"$KB_TMP/big.json"
expect_error 413 body_too_large POST /v1/search --data-binary @"$KB_TMP/big.json"
contains "$body" "cap of 1048576"
expect_error 413 body_too_large POST /v1/search -H 'Transfer-Encoding: chunked' --data-binary @"$KB_TMP/big.json"
expect_status 200 POST /v1/search -H 'Transfer-Encoding: chunked' -d '{"query": "warp shuffle", "k": 1}'

# the access log: one line per request (method, path, status, bytes, ms)
n_log=$(grep -c '[0-9]ms$' "$KB_TMP/serve.err")
[ "$n_log" -eq "$nreq" ] || fail "$n_log access-log lines for $nreq requests: $(head -5 "$KB_TMP/serve.err")"
grep -qE '^[0-9-]{10}T[0-9:.]{12}Z 127\.0\.0\.1 POST /v1/search 200 [0-9]+ [0-9.]+ms$' "$KB_TMP/serve.err" ||
    fail "no access-log line for a search: $(tail -3 "$KB_TMP/serve.err")"
grep -qE ' GET /v1/chunks/987654321 404 [0-9]+ ' "$KB_TMP/serve.err" || fail "no 404 logged"
grep -qE ' POST /v1/search 413 ' "$KB_TMP/serve.err" || fail "no 413 logged"
stop_server
[ "$stop_rc" -eq 0 ] || fail "SIGTERM: exit $stop_rc"

# with a token: 401 without it or with another, the bearer passes; the
# token is never logged; /healthz and /openapi.json stay open
printf 'tok-%s\n' "$RANDOM$RANDOM" >"$KB_TMP/token"
chmod 600 "$KB_TMP/token"
tok=$(head -n1 "$KB_TMP/token")
start_server --token-file "$KB_TMP/token"
expect_error 401 unauthorized GET /v1/status
contains "$headers" 'WWW-Authenticate: Bearer realm="kb"'
expect_error 401 unauthorized GET /v1/status -H "Authorization: Bearer ${tok}x"
contains "$headers" 'error="invalid_token"'
expect_error 401 unauthorized GET /v1/status -H "Authorization: Basic $tok"
expect_error 401 unauthorized POST /v1/search -d '{"query": "x"}'
expect_error 401 unauthorized GET /v1/nothing   # no map of the paths for strangers
expect_status 200 GET /v1/status -H "Authorization: Bearer $tok"
expect_status 200 GET /v1/status -H "authorization: bearer $tok"
expect_status 200 POST /v1/search -H "Authorization: Bearer $tok" -d '{"query": "tensor memory accelerator", "k": 2}'
expect_status 200 GET /healthz
expect_status 200 GET /openapi.json
[ "$(json_get "$body" "j['security'] == [{'bearer': []}] and j['components']['securitySchemes']['bearer']['scheme']")" = bearer ] ||
    fail "the document does not ask for the token"
stop_server
grep -q "$tok" "$KB_TMP/serve.err" "$KB_TMP/serve.out" && fail "the token was logged"
grep -q ' GET /v1/status 401 ' "$KB_TMP/serve.err" || fail "401 not logged"

# KB_SERVE_TOKEN does the same; --token-file wins over it
KB_SERVE_TOKEN=env-token start_server
expect_status 401 GET /v1/status
expect_status 200 GET /v1/status -H "Authorization: Bearer env-token"
stop_server
KB_SERVE_TOKEN=env-token start_server --token-file "$KB_TMP/token"
expect_status 401 GET /v1/status -H "Authorization: Bearer env-token"
expect_status 200 GET /v1/status -H "Authorization: Bearer $tok"
stop_server
KB_SERVE_TOKEN='two words' expect_rc 2 "$KB_BIN" serve --listen 127.0.0.1:0
contains "$out" "KB_SERVE_TOKEN"

# -q: no access log; another address only when given (IPv6 loopback)
start_server -q
expect_status 200 GET /healthz
stop_server
# (the warning of a shared host stays: t5180)
logged=$(grep -v 'without a token on a host with other users' "$KB_TMP/serve.err")
[ -z "$logged" ] || fail "-q still logged: $logged"
if python3 -c "import socket; s=socket.socket(socket.AF_INET6); s.bind(('::1', 0))" 2>/dev/null; then
    "$KB_BIN" serve --listen '[::1]:0' >"$KB_TMP/serve.out" 2>"$KB_TMP/serve.err" & SRV_PID=$!
    for _ in $(seq 100); do URL=$(sed -n 's/^listening on //p' "$KB_TMP/serve.out"); [ -n "$URL" ] && break; sleep 0.05; done
    case $URL in "http://[::1]:"[0-9]*) ;; *) fail "IPv6 URL '$URL'" ;; esac
    expect_status 200 GET /v1/status
    stop_server
fi
echo ok
