#!/usr/bin/env bash
# tier: ci
# The MCP Tasks extension (io.modelcontextprotocol/tasks, 2026-07-28) for
# verify, over stdio (kb mcp --allow-verify) and Streamable HTTP (kb serve
# --allow-verify), on a real SQLite queue drained by real kb verify workers
# with compile-only jobs (tests/mcp/tasks_client.py): announced in
# server/discover; a declaring client's verify answered at once with a
# task whose id is its job's; tasks/get working, then completed with the
# CallToolResult a synchronous call gives (checked against the schema);
# tasks/update and tasks/cancel acknowledged; -32602 for an unknown task,
# -32021 (with the capability) for a client that did not declare the
# extension, -32020 for an Mcp-Name that is not the task; a candidate
# verified already, and a client that does not declare it, answered
# synchronously (on stdio). And the command line: --tasks needs
# --allow-verify.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve-lib.sh"
[ -x "$KB_BUILD/kb-verify" ] || { echo "skipped: no kb-verify (no CUDA toolkit)"; exit 0; }
[ -x "${KB_VENV:-}/bin/python" ] || { echo "skipped: no test virtualenv (make test makes build/venv)"; exit 0; }
py="$KB_VENV/bin/python"
export KB_VERIFY_CACHE="$KB_TMP/cache" KB_TOP
printf '# Notes\n\nA KB of one note: the servers need one.\n' >"$KB_TMP/note.md"
expect_rc 0 kb ingest -q --no-embed "$KB_TMP/note.md"
export KB_QUEUE="sqlite:$KB_TMP/q.sqlite"
expect_rc 0 "$py" "$KB_TOP/tests/mcp/tasks_client.py" stdio "$KB_BIN" "$KB_DIR" "$KB_QUEUE" "$KB_TOP/corpus/tasks"
case "$out" in skipped:*) echo "$out"; exit 0 ;; esac
contains "$out" "stdio: ok"
start_server --no-skills --allow-verify --tasks "$KB_TOP/corpus/tasks" --threads 2
expect_rc 0 "$py" "$KB_TOP/tests/mcp/tasks_client.py" http "$URL" "$KB_BIN" "$KB_QUEUE"
contains "$out" "http: ok"
stop_server
[ "$stop_rc" -eq 0 ] || fail "kb serve on SIGTERM: exit $stop_rc"
# both clients' jobs, once each: 3 candidates (2 on stdio), 3 results
j=$("$KB_BIN" verify queue --queue "$KB_QUEUE" --json)
[ "$(json_get "$j" "(j['pending'], j['leased'], j['done'], j['dead'])")" = "(0, 0, 3, 0)" ] ||
    fail "the queue after both transports: $j"
expect_rc 2 kb serve --tasks corpus/tasks
contains "$out" "--tasks is verify's: it needs --allow-verify"
echo ok
