#!/usr/bin/env bash
# tier: ci
# kb mcp lends search's llm relevance stage the client's own model through
# MCP sampling when kb has no LLM endpoint: the official MCP Python SDK as
# the client over stdio, its sampling callback answering from a script
# (tests/mcp/sampling_client.py): the order the answer gives, the caches,
# kb's own order with the reason after an answer of words, a refusal and
# a slow answer (cancelled), and a client without sampling; every message
# kb wrote, its sampling requests too, checked against the schema.
. "$(dirname "$0")/lib.sh"
need_mirror
[ -x "${KB_VENV:-}/bin/python" ] || { echo "skipped: no test virtualenv (make test makes build/venv)"; exit 0; }
use_kb cbp   # kb ingest -q --manifest "$MANIFEST" cuda-best-practices
mkdir -p "$KB_TMP/work"
expect_rc 0 "$KB_VENV/bin/python" "$KB_TOP/tests/mcp/sampling_client.py" "$KB_BIN" "$KB_DIR" "$KB_TMP/work"
case "$out" in skipped:*) echo "$out"; exit 0 ;; esac
contains "$out" "ok sampling"
echo ok
