#!/usr/bin/env bash
# tier: quick
# kb mcp over stdio, by hand: the exchanges of tests/mcp/cases/ (both eras,
# every JSON-RPC error, invalid UTF-8, notifications, blank lines, a last
# line without its newline), each reply checked against the protocol's
# schema; oversized lines; stdout holding nothing but messages; the end of
# input; the command line.
. "$(dirname "$0")/lib.sh"
need_mirror
[ -x "${KB_VENV:-}/bin/python" ] || { echo "skipped: no test virtualenv (make test makes build/venv)"; exit 0; }
py="$KB_VENV/bin/python"
expect_rc 0 kb ingest -q --no-embed --manifest "$MANIFEST" cuda-best-practices survey-literature
export KB_MANIFEST="$MANIFEST"   # the task and prompt tools find corpus/tasks beside it

# the data-driven exchanges
expect_rc 0 "$py" "$KB_TOP/tests/mcp/cases.py" "$KB_BIN" "$KB_DIR" "$KB_TOP/tests/mcp/cases"
case "$out" in skipped:*) echo "$out"; exit 0 ;; esac
lacks "$out" FAIL

init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}'
ping() { printf '{"jsonrpc":"2.0","id":%s,"method":"ping"}\n' "$1"; }

# a line over the 4 MiB limit is refused unread, and the next one answered;
# one just under it is read
"$py" - "$KB_TMP/big.in" <<'PY'
import json, sys
limit = 4 << 20
def ping(i, n):   # a ping of exactly n bytes
    m = {"jsonrpc": "2.0", "id": i, "method": "ping", "params": {"pad": ""}}
    m["params"]["pad"] = "x" * (n - len(json.dumps(m, separators=(",", ":"))))
    return json.dumps(m, separators=(",", ":"))
with open(sys.argv[1], "w") as f:
    f.write(ping(1, limit + 1) + "\n" + ping(2, 10) + "\n" + ping(3, limit) + "\n")
    f.write(ping(4, 3 * limit))   # the last, without a newline
PY
kb mcp <"$KB_TMP/big.in" >"$KB_TMP/big.out" 2>"$KB_TMP/big.err" || fail "kb mcp on big lines exited $?"
[ "$(wc -l <"$KB_TMP/big.out")" -eq 4 ] || fail "four replies wanted: $(cut -c1-200 "$KB_TMP/big.out")"
"$py" - "$KB_TMP/big.out" <<'PY' || fail "oversized lines"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert r[0]["error"]["code"] == -32600 and "id" not in r[0], r[0]
assert "4194305 bytes" in r[0]["error"]["message"] and "4194304" in r[0]["error"]["message"], r[0]
assert r[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}, r[1]
assert r[2] == {"jsonrpc": "2.0", "id": 3, "result": {}}, r[2]
assert r[3]["error"]["code"] == -32600 and "12582912 bytes" in r[3]["error"]["message"], r[3]
PY
contains "$(cat "$KB_TMP/big.err")" "refused"

# stdout holds only protocol messages, one a line, whatever happens; logs
# go to stderr
{
    echo "$init"
    echo '{"jsonrpc":"2.0","method":"notifications/initialized"}'
    echo '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":{"query":"coalesced global memory access","k":3}}}'
    echo 'not json'
    echo '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"papers","arguments":{"words":"triton"}}}'
    echo '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get","arguments":{"chunk_id":123456789}}}'
    ping 5
} | kb mcp >"$KB_TMP/s.out" 2>"$KB_TMP/s.err" || fail "kb mcp exited $?"
"$py" - "$KB_TMP/s.out" <<'PY' || fail "stdout is not only messages: $(cut -c1-300 "$KB_TMP/s.out")"
import json, sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
assert lines[-1] == b"", "the last message ends with a newline"
msgs = [json.loads(l) for l in lines[:-1]]
assert [m.get("id") for m in msgs] == [1, 2, None, 3, 4, 5], [m.get("id") for m in msgs]
assert all(m["jsonrpc"] == "2.0" for m in msgs)
s = msgs[1]["result"]
assert s["structuredContent"]["results"] and json.loads(s["content"][0]["text"]) == s["structuredContent"]
assert all(r["source"] == "cuda-best-practices" and r["version"] == "13.2" and "#" in r["url"]
           for r in s["structuredContent"]["results"])
p = msgs[3]["result"]["structuredContent"]
assert p["papers"] and all("triton" in (x["title"] + x["section"]).lower() for x in p["papers"])
assert msgs[4]["result"]["isError"] and "no chunk 123456789" in msgs[4]["result"]["content"][0]["text"]
PY
contains "$(cat "$KB_TMP/s.err")" "kb mcp: serving"
contains "$(cat "$KB_TMP/s.err")" "kb mcp: search answered"

# papers over MCP keep within the default budget: all the records would
# not (8,000 tokens, about 24,000 bytes)
printf '%s\n%s\n' "$init" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"papers"}}' |
    kb mcp 2>/dev/null | tail -n 1 >"$KB_TMP/p.out"
"$py" - "$KB_TMP/p.out" <<'PY' || fail "papers over the default budget"
import json, sys
m = json.loads(open(sys.argv[1]).read())
text = m["result"]["content"][0]["text"]
p = json.loads(text)
assert p["truncated"] and p["omitted"] > 0 and p["papers"], p["omitted"]
assert len(text.encode()) <= 8000 * 3, len(text.encode())
PY

# the end of input: exit 0, nothing written
kb mcp </dev/null >"$KB_TMP/e.out" 2>/dev/null || fail "kb mcp at end of input exited $?"
[ ! -s "$KB_TMP/e.out" ] || fail "output without input: $(cat "$KB_TMP/e.out")"
# a reader that went away: an error, not a hang
ping 1 | kb mcp 1>&- 2>"$KB_TMP/c.err"; rc=$?
[ "$rc" -ne 0 ] || fail "writing to a closed stdout succeeded"
contains "$(cat "$KB_TMP/c.err")" "cannot write to stdout"

# the command line
expect_rc 0 kb mcp --help
contains "$out" "--allow-verify"
expect_rc 2 kb mcp --bogus
contains "$out" "unknown option '--bogus'"
expect_rc 2 kb mcp --tasks corpus/tasks
contains "$out" "need --allow-verify"
expect_rc 2 kb mcp extra
# no KB: a clear error, before any message, and nothing on stdout
out=$(ping 1 | KB_DIR="$KB_TMP/none" "$KB_BIN" mcp 2>"$KB_TMP/n.err"); rc=$?
[ "$rc" -eq 1 ] && [ -z "$out" ] || fail "kb mcp without a KB: exit $rc, stdout '$out'"
contains "$(cat "$KB_TMP/n.err")" "$KB_TMP/none"
echo ok
