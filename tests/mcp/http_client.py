"""`kb serve`'s /mcp driven by the official MCP Python SDK (PyPI mcp) over
Streamable HTTP, in one of its connect modes: 'legacy' (the initialize
handshake, a session) or 'auto' (server/discover: 2026-07-28, no session).
It lists the tools, calls each, lists and reads the skill resources
(checking their digests), passes bad arguments, an unknown tool and an
unknown resource. Every HTTP exchange goes through a recording transport:
each reply body kb sent is checked against the negotiated version's schema
(mcpcheck), and the headers each era wants are checked too.

  python3 http_client.py MODE URL WORK_DIR
"""
import asyncio
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcpcheck  # noqa: E402

import httpx2  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

TOOLS = ["search", "get", "papers", "status", "skill_search", "skill_get", "task", "prompt"]
SKILL = "smem-padding-bank-conflicts"


def check(cond, what):
    if not cond:
        raise AssertionError(what)


class Recorder(httpx2.AsyncBaseTransport):
    """Passes each request to a real transport and keeps the exchange:
    (method, request headers, request body, status, reply headers, reply
    body), the reply read whole."""

    def __init__(self):
        self.inner = httpx2.AsyncHTTPTransport()
        self.log = []

    async def handle_async_request(self, request):
        body = request.content if hasattr(request, "_content") else await request.aread()
        response = await self.inner.handle_async_request(request)
        data = await response.aread()
        await response.aclose()
        self.log.append((request.method, dict(request.headers), body, response.status_code,
                         dict(response.headers), data))
        return httpx2.Response(response.status_code, headers=response.headers, content=data,
                               request=request)

    async def aclose(self):
        await self.inner.aclose()


def structured(result, tool):
    check(not result.is_error, f"{tool} failed: {result.content}")
    sc = result.structured_content
    check(isinstance(sc, dict), f"{tool}: no structured content")
    check(json.loads(result.content[0].text) == sc, f"{tool}: the text block is not the structured content")
    return sc


async def session(mode, url, rec):
    http = httpx2.AsyncClient(transport=rec, trust_env=False, timeout=httpx2.Timeout(120.0))
    want_version = "2025-11-25" if mode == "legacy" else "2026-07-28"
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode,
                            read_timeout_seconds=120) as c:
        check(c.protocol_version == want_version, f"negotiated {c.protocol_version}")
        check(c.server_info.name == "kb", f"server info {c.server_info}")
        check(c.server_capabilities.tools is not None, "no tools capability")
        check(c.server_capabilities.resources is not None, "no resources capability")
        check(len(c.instructions.encode()) <= 2048 and "skill_search" in c.instructions,
              f"instructions: {c.instructions!r}")

        listed = await c.list_tools()
        names = [t.name for t in listed.tools]
        check(names == TOOLS, f"tools {names}")

        r = structured(await c.call_tool("search", {"query": "shared memory bank conflicts", "k": 3}), "search")
        check(1 <= len(r["results"]) <= 3, f"search: {len(r['results'])} results")
        first = r["results"][0]
        g = structured(await c.call_tool("get", {"chunk_id": first["chunk_id"]}), "get")
        check(g["chunks"][0]["chunk_id"] == first["chunk_id"], "get: the chunk")
        p = structured(await c.call_tool("papers", {"words": "triton"}), "papers")
        check(p["papers"], "papers by words")
        s = structured(await c.call_tool("status", {}), "status")
        check("skills" in {x["id"] for x in s["sources"]}, f"status sources {s['sources']}")

        hits = structured(await c.call_tool("skill_search", {"query": "bank conflicts in a shared-memory "
                                                             "transpose", "k": 3}), "skill_search")
        check(hits["results"] and hits["results"][0]["name"] == SKILL,
              f"skill_search: {[x['name'] for x in hits['results']]}")
        check(hits["results"][0]["uri"] == f"skill://{SKILL}/SKILL.md", "skill_search: the uri")
        check(hits["results"][0]["status"] in ("verified", "approved"), "skill_search: the status")
        sk = structured(await c.call_tool("skill_get", {"name": SKILL, "kernel": True}), "skill_get")
        check(sk["frontmatter"]["name"] == SKILL and "## When to apply" in sk["skill_md"], "skill_get: SKILL.md")
        check(sk["evidence"] and "__shared__" in sk["kernel"], "skill_get: evidence and kernel")

        # the skill's files as resources, each with its digest
        res = await c.list_resources()
        by_uri = {x.uri: x for x in res.resources}
        for f in ("SKILL.md", "kernel.cu", "evidence.json"):
            check(f"skill://{SKILL}/{f}" in by_uri, f"resources/list lacks {f}")
        md = by_uri[f"skill://{SKILL}/SKILL.md"]
        check(md.name == SKILL and md.mime_type == "text/markdown", f"SKILL.md entry {md}")
        for f in ("SKILL.md", "kernel.cu"):
            entry = by_uri[f"skill://{SKILL}/{f}"]
            got = await c.read_resource(entry.uri)
            text = got.contents[0].text
            digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
            check(entry.meta["io.modelcontextprotocol.skills/digest"] == digest, f"{f}: the listed digest")
            check(got.contents[0].meta["io.modelcontextprotocol.skills/digest"] == digest, f"{f}: the read digest")
            check(entry.size == len(text.encode()), f"{f}: the size")
            want = {x["uri"]: x["digest"] for x in sk["files"]}
            check(want[entry.uri] == digest, f"{f}: skill_get's digest")

        # failures: the tool's own (a result), the protocol's (an error)
        r = await c.call_tool("search", {"query": "x", "k": 0})
        check(r.is_error and "'k' must be an integer from 1 to 50, not 0" in r.content[0].text, f"bad k: {r.content}")
        r = await c.call_tool("skill_get", {"name": "no-such-skill"})
        check(r.is_error and "no skill 'no-such-skill'" in r.content[0].text, f"unknown skill: {r.content}")
        try:
            await c.call_tool("nope", {})
            check(False, "an unknown tool was called")
        except MCPError as e:
            check(e.error.code == -32602 and "unknown tool 'nope'" in e.error.message, f"unknown tool: {e.error}")
        try:
            await c.read_resource("skill://nope/SKILL.md")
            check(False, "an unknown resource was read")
        except MCPError as e:
            want = -32602 if mode == "auto" else -32002
            check(e.error.code == want, f"unknown resource: {e.error}")
    return want_version


def check_log(mode, version, log):
    """Every reply body checked against the schema; the session header
    issued in the handshake era and never in 2026-07-28."""
    methods = {}
    replies = 0
    sids = set()
    for method, req_h, body, status, rep_h, data in log:
        if method == "POST" and body:
            m = json.loads(body)
            if "id" in m and "method" in m:
                methods[json.dumps(m["id"])] = m["method"]
        if "mcp-session-id" in rep_h:
            sids.add(rep_h["mcp-session-id"])
        if method == "POST" and data:
            check(rep_h.get("content-type", "").startswith("application/json"), f"reply type {rep_h}")
            msg = json.loads(data)
            try:
                mcpcheck.check_message(version, msg, methods)
            except Exception as e:
                raise AssertionError(f"a reply is not a valid {version} message: {e}: {data[:300]!r}")
            replies += 1
        elif method == "POST":
            check(status == 202, f"an empty reply with status {status}")
        if mode == "auto":
            check(method == "POST", f"2026-07-28 sent {method}")
            check(req_h.get("mcp-protocol-version") == "2026-07-28" and "mcp-method" in req_h,
                  f"2026-07-28 request headers {req_h}")
        if mode == "legacy" and method == "GET":
            check(status == 405 and "allow" in rep_h, f"GET: {status} {rep_h}")
        if mode == "legacy" and method == "DELETE":
            check(status == 204, f"DELETE: {status}")
    if mode == "legacy":
        check(len(sids) == 1, f"session ids issued: {sids}")
        check(any(m == "DELETE" for m, *_ in log), "the session was not ended")
    else:
        check(not sids, f"a session in 2026-07-28: {sids}")
    check(replies >= 15, f"only {replies} replies")
    return replies


def main():
    mode, url, work = sys.argv[1:4]
    mcpcheck.skip_without_schemas()
    rec = Recorder()
    version = asyncio.run(session(mode, url, rec))
    with open(os.path.join(work, f"http-{mode}.log"), "w") as f:
        for method, req_h, body, status, rep_h, data in rec.log:
            f.write(json.dumps({"method": method, "sent": body.decode(errors="replace"), "status": status,
                                "headers": rep_h, "reply": data.decode(errors="replace")}) + "\n")
    n = check_log(mode, version, rec.log)
    print(f"ok http {mode}: {n} replies from kb, each valid")


if __name__ == "__main__":
    main()
