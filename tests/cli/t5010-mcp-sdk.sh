#!/usr/bin/env bash
# tier: ci
# kb mcp with a real client: the official MCP Python SDK (tests/requirements.txt)
# over stdio, in its legacy mode (the 2025-11-25 handshake) and its auto mode
# (server/discover, then 2026-07-28), on a KB with vectors: every tool
# called, sub-queries of each type, budgets, bad arguments, an unknown tool,
# the skill tools and the skill library as resources (digests checked),
# and (auto, --allow-verify) verify; every message kb wrote checked against
# the negotiated version's schema (tests/mcp/sdk_client.py).
. "$(dirname "$0")/lib.sh"
need_mirror
[ -x "${KB_VENV:-}/bin/python" ] || { echo "skipped: no test virtualenv (make test makes build/venv)"; exit 0; }
use_kb cbp-survey-skills   # these two, then the skill library
export KB_MANIFEST="$MANIFEST"   # the task and prompt tools find corpus/tasks beside it
mkdir -p "$KB_TMP/work"
client() { expect_rc 0 "$KB_VENV/bin/python" "$KB_TOP/tests/mcp/sdk_client.py" "$@"; }

client legacy "$KB_BIN" "$KB_DIR" "$KB_TMP/work"
case "$out" in skipped:*) echo "$out"; exit 0 ;; esac
contains "$out" "ok legacy"
client auto "$KB_BIN" "$KB_DIR" "$KB_TMP/work" --allow-verify "$KB_TOP/corpus/tasks"
contains "$out" "ok auto"
contains "$out" "verify gelu vec4:"
# the discover probe went first, at 2026-07-28
head -n 1 "$KB_TMP/work/auto.sent" | grep -q '"method":"server/discover"' || fail "auto did not discover"
grep -q '"method":"initialize"' "$KB_TMP/work/auto.sent" && fail "auto fell back to initialize"
grep -q '"resultType":"complete"' "$KB_TMP/work/auto.wrote" || fail "no resultType in 2026-07-28"
grep -q '"resultType"' "$KB_TMP/work/legacy.wrote" && fail "resultType in the handshake era"
echo ok
