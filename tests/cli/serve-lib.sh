# Sourced by the kb serve tests (t51xx) after lib.sh: a real server on a
# free loopback port, and curl against it.
SRV_PID=
nreq=0   # requests made through http since the last start_server
trap '[ -n "$SRV_PID" ] && kill -9 "$SRV_PID" 2>/dev/null; rm -rf "$KB_TMP"' EXIT
CURL=(curl -s --noproxy '*' --max-time 30)

# start_server ARG...: kb serve --listen 127.0.0.1:0 ARG... in the
# background; sets SRV_PID and URL (from the line it prints on stdout);
# stderr (the access log) goes to $KB_TMP/serve.err
start_server() {
    : >"$KB_TMP/serve.out"
    "$KB_BIN" serve --listen 127.0.0.1:0 "$@" >"$KB_TMP/serve.out" 2>"$KB_TMP/serve.err" &
    SRV_PID=$!
    URL=
    nreq=0
    for _ in $(seq 200); do
        URL=$(sed -n 's/^listening on //p' "$KB_TMP/serve.out")
        [ -n "$URL" ] && return 0
        kill -0 "$SRV_PID" 2>/dev/null || fail "kb serve exited: $(cat "$KB_TMP/serve.err")"
        sleep 0.05
    done
    fail "kb serve did not start: $(cat "$KB_TMP/serve.err")"
}

# stop_server [SIGNAL]: signals the server (TERM) and waits; $stop_rc is
# its exit status
stop_server() {
    kill -"${1:-TERM}" "$SRV_PID"
    wait "$SRV_PID"; stop_rc=$?
    SRV_PID=
}

# http METHOD PATH [CURL-ARG...]: one request; sets $status, $body and
# $headers (the reply's header block)
http() {
    local m=$1 p=$2; shift 2
    local raw method=(-X "$m")
    [ "$m" = HEAD ] && method=(--head)
    raw=$("${CURL[@]}" "${method[@]}" -D "$KB_TMP/.headers" -o "$KB_TMP/.body" -w '%{http_code}' "$@" "$URL$p") ||
        fail "curl $m $p failed"
    status=$raw
    nreq=$((nreq + 1))
    body=$(cat "$KB_TMP/.body")
    headers=$(tr -d '\r' <"$KB_TMP/.headers")
}

# expect_status CODE METHOD PATH [CURL-ARG...]
expect_status() {
    local want=$1; shift
    http "$@"
    [ "$status" = "$want" ] || fail "$1 $2: status $status, wanted $want; body: $body"
}

# expect_error CODE ERROR-CODE METHOD PATH [CURL-ARG...]: an error reply
# {"error": {"code", "message"}} as JSON with that status and code
expect_error() {
    local want=$1 code=$2; shift 2
    expect_status "$want" "$@"
    contains "$headers" "Content-Type: application/json"
    [ "$(json_get "$body" "j['error']['code']")" = "$code" ] ||
        fail "$1 $2: error code $(json_get "$body" "j['error']['code']"), wanted $code"
    [ "$(json_get "$body" "sorted(j) == ['error'] and sorted(j['error']) == ['code', 'message'] and len(j['error']['message']) > 0")" = True ] ||
        fail "$1 $2: not an error object: $body"
}

# ingest_small: a small real KB with vectors (a tuning guide and the
# survey's literature list, some 175 chunks): a copy of the shared KB
# 'small' (kbs-lib.sh), what 'kb ingest -q --manifest "$MANIFEST"
# hopper-tuning-guide survey-literature' leaves
ingest_small() { use_kb small; }
