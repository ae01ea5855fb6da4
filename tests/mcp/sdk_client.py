"""`kb mcp` driven by the official MCP Python SDK (PyPI mcp) over stdio, in
one of its connect modes: 'legacy' (the initialize handshake) or 'auto'
(server/discover first: 2026-07-28 when the server speaks it). It lists
the tools, calls each one (the skill tools too), lists and reads the skill
library's resources (their digests checked), passes bad arguments, an
unknown tool and an unknown resource; the
lines each side wrote are kept (tee) and every message kb wrote is checked
against the negotiated version's schema (mcpcheck).

  python3 sdk_client.py MODE KB_BIN KB_DIR WORK_DIR [--allow-verify TASKS_DIR]
"""
import asyncio
import hashlib
import json
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcpcheck  # noqa: E402

from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

TOOLS = ["search", "get", "papers", "status", "skill_search", "skill_get", "task", "prompt"]
SKILL = "smem-padding-bank-conflicts"


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def structured(result, tool):
    """The call's structured content, which its text block repeats."""
    check(not result.is_error, f"{tool} failed: {result.content}")
    sc = result.structured_content
    check(isinstance(sc, dict), f"{tool}: no structured content")
    check(len(result.content) == 1 and result.content[0].type == "text", f"{tool}: one text block")
    check(json.loads(result.content[0].text) == sc, f"{tool}: the text block is not the structured content")
    return sc


async def session(mode, kb_bin, kb_dir, work, verify_tasks):
    sent, wrote = os.path.join(work, f"{mode}.sent"), os.path.join(work, f"{mode}.wrote")
    for p in (sent, wrote):
        open(p, "w").close()
    skills = os.path.join(os.environ["KB_TOP"], "corpus", "skills")
    args = ["--kb", kb_dir, "mcp", "--skills", skills]
    if verify_tasks:
        args += ["--allow-verify", "--tasks", verify_tasks]
    # the client's lines and kb's, each kept as it went by
    params = StdioServerParameters(
        command="/bin/sh",
        args=["-c", 'tee -a "$0" | "$@" | tee -a "$WROTE"', sent, kb_bin, *args],
        env={k: v for k, v in os.environ.items() if k.startswith("KB_") or k == "HOME"} | {"WROTE": wrote})
    want_version = "2025-11-25" if mode == "legacy" else "2026-07-28"
    async with Client(params, mode=mode, read_timeout_seconds=120) as c:
        check(c.protocol_version == want_version, f"negotiated {c.protocol_version}")
        check(c.server_info is not None and c.server_info.name == "kb", f"server info {c.server_info}")
        check(c.server_capabilities.tools is not None, "no tools capability")
        check(c.server_capabilities.resources is not None, "no resources capability, with a skill library")
        check("search" in (c.instructions or "") and len(c.instructions.encode()) <= 2048,
              f"instructions: {c.instructions!r}")
        if mode == "legacy":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await c.send_ping()

        listed = await c.list_tools()
        names = [t.name for t in listed.tools]
        check(names == TOOLS + (["verify"] if verify_tasks else []), f"tools {names}")
        for t in listed.tools:
            check(t.input_schema.get("type") == "object" and t.output_schema, f"{t.name}: schemas")
            check(t.annotations.read_only_hint is (t.name != "verify"), f"{t.name}: readOnlyHint")
            check(t.annotations.open_world_hint is False, f"{t.name}: openWorldHint")
            check(t.description and len(t.description) > 80, f"{t.name}: a description for agents")

        # the generator's prompt as an MCP prompt, a command for the user
        check(c.server_capabilities.prompts is not None, "no prompts capability")
        prompts = await c.list_prompts()
        check([p.name for p in prompts.prompts] == ["write-kernel"], f"prompts {prompts.prompts}")
        check([a.name for a in prompts.prompts[0].arguments] == ["task", "feedback", "parent", "budget_tokens"],
              f"prompt arguments {prompts.prompts[0].arguments}")
        got = await c.get_prompt("write-kernel", {"task": "gelu", "budget_tokens": "4000"})
        check(len(got.messages) == 1 and got.messages[0].role == "user" and
              "CUDA kernel engineer" in got.messages[0].content.text and
              "## Output" in got.messages[0].content.text, f"prompts/get: {got}")

        # search: ranked, cited, versioned; the SDK checks structuredContent
        # against the outputSchema itself
        r = structured(await c.call_tool("search", {"query": "coalesced access to global memory", "k": 5}),
                       "search")
        check(r["mode"] == "hybrid" and 1 <= len(r["results"]) <= 5, f"search: {r['mode']}, {len(r['results'])}")
        for x in r["results"]:
            check(x["source"] == "cuda-best-practices" and x["version"] == "13.2", f"provenance {x['source']}")
            check(x["url"].startswith("https://docs.nvidia.com/") and "#" in x["url"], f"deep link {x['url']}")
        check(any("coalesc" in (x["text"] + " ".join(x["heading_path"])).lower() for x in r["results"]),
              "search did not find coalescing")
        first = r["results"][0]

        # sub-queries the agent writes, of each type, fused
        r = structured(await c.call_tool("search", {
            "query": "why is my kernel slow when each thread reads a column",
            "k": 5,
            "searches": [
                {"type": "lex", "query": "strided access coalescing"},
                {"type": "vec", "query": "uncoalesced global memory reads"},
                {"type": "hyde", "query": "When threads of a warp access addresses far apart, each access "
                                          "becomes its own memory transaction and bandwidth drops."}]}),
            "search with searches")
        check(r["results"] and all(x["lexical_rank"] or x["vector_rank"] for x in r["results"]),
              "fused results name their lists")

        # the default budget: 50 whole chunks would not fit 8,000 tokens
        r = await c.call_tool("search", {"query": "shared memory", "k": 50})
        sc = structured(r, "search k=50")
        check(sc["truncated"] and sc["omitted"] > 0 and len(sc["results"]) + sc["omitted"] <= 50,
              f"default budget: truncated {sc['truncated']}, omitted {sc['omitted']}")
        check(len(r.content[0].text.encode()) <= 8000 * 3, "over the default budget")
        r = await c.call_tool("search", {"query": "shared memory", "k": 50, "budget_tokens": 1000})
        sc = structured(r, "search budget 1000")
        check(len(r.content[0].text.encode()) <= 3000 and sc["omitted"] > 0, "over a budget of 1000")

        g = structured(await c.call_tool("get", {"chunk_id": first["chunk_id"], "section": True}), "get")
        check(g["chunks"] and any(x["chunk_id"] == first["chunk_id"] for x in g["chunks"]), "get: the chunk")
        check(g["section"]["heading_path"] == first["heading_path"], "get: the chunk's section")
        check(g["document"]["source"] == first["source"], "get: the chunk's document")

        p = structured(await c.call_tool("papers", {"words": "triton"}), "papers")
        check(p["papers"] and all("triton" in (x["title"] + x["section"]).lower() for x in p["papers"]),
              "papers by words")

        s = structured(await c.call_tool("status", {}), "status")
        ids = {x["id"]: x for x in s["sources"]}
        check(set(ids) == {"cuda-best-practices", "survey-literature", "skills"}, f"status sources {set(ids)}")
        check(ids["cuda-best-practices"]["version"] == "13.2" and ids["cuda-best-practices"]["ingested"].endswith("Z"),
              "status: version and ingest date")
        check(s["embeddings"] == s["chunks"] and s["embedder"] == "all-MiniLM-L6-v2", "status: vectors")

        # the skill tools, on the KB's skills and the library
        h = structured(await c.call_tool("skill_search", {"query": "padding shared memory against bank conflicts in a transpose",
                                                          "k": 3, "arch": "sm_90"}), "skill_search")
        check(h["results"] and h["results"][0]["name"] == SKILL, f"skill_search: {[x['name'] for x in h['results']]}")
        check(all(x["status"] != "retired" for x in h["results"]), "skill_search: a retired skill")
        h = structured(await c.call_tool("skill_search", {"query": "reduction", "status": "draft"}), "skill_search draft")
        check(all(x["status"] == "draft" for x in h["results"]), "skill_search: the status filter")
        sk = structured(await c.call_tool("skill_get", {"name": SKILL}), "skill_get")
        check(sk["frontmatter"]["metadata"]["kb-task"] == sk["frontmatter"]["metadata"].get("kb-task") and
              sk["evidence"] and sk["skill_md"].startswith("---"), "skill_get: SKILL.md and its evidence")
        r = await c.call_tool("skill_get", {"name": "x" * 65})
        check(r.is_error and "'name' must be a non-empty string of at most 64 characters" in r.content[0].text,
              f"skill_get: a long name: {r.content}")

        # the library's files as resources: listed with digests, read back
        res = await c.list_resources()
        uris = [x.uri for x in res.resources]
        check(f"skill://{SKILL}/SKILL.md" in uris and f"skill://{SKILL}/kernel.cu" in uris, f"resources {uris[:6]}")
        for x in res.resources:
            if not x.uri.startswith(f"skill://{SKILL}/"):
                continue
            got = await c.read_resource(x.uri)
            body = got.contents[0].text.encode()
            check(x.meta["io.modelcontextprotocol.skills/digest"] == "sha256:" + hashlib.sha256(body).hexdigest()
                  and x.size == len(body), f"{x.uri}: digest or size")
        try:
            await c.read_resource("skill://no-such-skill/SKILL.md")
            check(False, "an unknown resource was read")
        except MCPError as e:
            check(e.error.code in (-32002, -32602) and "not found" in e.error.message, f"unknown resource: {e.error}")

        # bad arguments: the tool's own failure, for the agent to read
        r = await c.call_tool("search", {"query": "x", "k": 0})
        check(r.is_error and "'k' must be an integer from 1 to 50, not 0" in r.content[0].text,
              f"bad k: {r.content}")
        r = await c.call_tool("get", {"chunk_id": 987654321})
        check(r.is_error and "no chunk 987654321" in r.content[0].text, f"unknown chunk: {r.content}")
        # an unknown tool: a protocol error
        try:
            await c.call_tool("nope", {})
            check(False, "an unknown tool was called")
        except MCPError as e:
            check(e.error.code == -32602 and "unknown tool 'nope'" in e.error.message, f"unknown tool: {e.error}")

        await gen_calls(c)
        if verify_tasks:
            await verify_calls(c)

    with open(sent) as f:
        sent_lines = f.read().splitlines()
    with open(wrote) as f:
        wrote_lines = f.read().splitlines()
    msgs = mcpcheck.check_transcript(want_version, sent_lines, wrote_lines)
    check(len(msgs) >= 12, f"only {len(msgs)} messages from kb")
    return len(msgs)


async def gen_calls(c):
    """generator/'s task and prompt tools; the SDK checks each result
    against the tool's outputSchema."""
    t = structured(await c.call_tool("task", {"task": "softmax"}), "task")
    check(t["name"] == "softmax" and t["signature"].startswith('extern "C" __global__ void softmax('),
          f"task: {t['name']}, {t['signature']}")
    check(t["target_shape"]["name"] == "target" and set(t["target_shape"]["dims"]) == {"M", "N"},
          f"task: target {t['target_shape']}")
    check('"odd"' not in json.dumps(t) and '"tiny"' not in json.dumps(t), "task: a kept-back shape shows")
    check([p["role"] for p in t["params"]] == ["input", "output", "dimension", "dimension"],
          f"task: roles {[p['role'] for p in t['params']]}")
    r = await c.call_tool("prompt", {"task": "softmax"})
    p = structured(r, "prompt")
    # the default budget over MCP: the prompt within 8,000 tokens
    check(p["tokens"] <= 8000 and len(r.content[0].text.encode()) <= 8000 * 3 * 1.2,
          f"prompt: {p['tokens']} tokens")
    heads = ["## Hardware profile", "## Task", "## Reference kernel", "## Retrieved context",
             "## Output contract"]
    at = [p["user"].find(h + "\n") for h in heads]
    check(all(a >= 0 for a in at) and at == sorted(at), f"prompt: sections {at}")
    check(p["hash"] == hashlib.sha256(p["system"].encode() + b"\0" + p["user"].encode()).hexdigest(),
          "prompt: the hash")
    check(p["cites"] and all(x["url"] in p["user"] for x in p["cites"]), "prompt: citations")
    again = structured(await c.call_tool("prompt", {"task": "softmax"}), "prompt again")
    check(again["hash"] == p["hash"], "prompt: another call, another prompt")
    small = structured(await c.call_tool("prompt", {"task": "softmax", "budget_tokens": 2500}), "prompt 2500")
    check(small["tokens"] <= 2500 and len(small["cites"]) <= len(p["cites"]), f"prompt: {small['tokens']} tokens")
    r = await c.call_tool("task", {"task": "no_such_task"})
    check(r.is_error and "no task 'no_such_task'" in r.content[0].text, f"task unknown: {r.content}")


async def verify_calls(c):
    task_dir = os.path.join(os.environ["KB_TOP"], "corpus", "tasks", "gelu")
    with open(os.path.join(task_dir, "candidates", "vec4.cu")) as f:
        good = f.read()
    v = structured(await c.call_tool("verify", {"task": "gelu", "source": good, "compile_only": True}),
                   "verify compile_only")
    check(v["verdict"] == "compiled" and v["candidate"] == "source", f"verify: {v['verdict']}: {v['reason']}")
    check(v["compile"]["kernels"][0]["name"] == "gelu_vec4", "verify: the kernel's registers")
    v = structured(await c.call_tool("verify", {"task": "gelu", "source": "extern \"C\" __global__ void gelu("
                                                "const float *x, float *y, int n) { y[0] = x[0] }",
                                                "compile_only": True}), "verify compile error")
    check(v["verdict"] == "compile_error" and "error" in v["compile"]["log"], f"verify: {v['verdict']}")
    r = await c.call_tool("verify", {"task": "gelu", "source": good})
    if r.is_error:   # no verdict (no GPU here): an error result that says why
        check("could not judge the candidate" in r.content[0].text and "GPU" in r.content[0].text
              and r.structured_content is None, f"verify without a GPU: {r.content}")
        print(f"verify gelu vec4: error: {r.content[0].text}")
    else:
        v = structured(r, "verify")
        check(v["verdict"] in ("faster", "correct"), f"verify on this machine: {v['verdict']}: {v['reason']}")
        print(f"verify gelu vec4: {v['verdict']}: {v['reason']}")
    r = await c.call_tool("verify", {"task": "no_such_task", "source": good})
    check(r.is_error and "no task 'no_such_task'" in r.content[0].text and "gelu" in r.content[0].text,
          f"verify unknown task: {r.content}")
    r = await c.call_tool("verify", {"task": "../etc", "source": good})
    check(r.is_error and "must be a task's name" in r.content[0].text, f"verify ../etc: {r.content}")


def main():
    mode, kb_bin, kb_dir, work = sys.argv[1:5]
    verify_tasks = sys.argv[6] if len(sys.argv) > 6 and sys.argv[5] == "--allow-verify" else None
    mcpcheck.skip_without_schemas()
    n = asyncio.run(session(mode, kb_bin, kb_dir, work, verify_tasks))
    print(f"ok {mode}: {n} messages from kb, each valid")


if __name__ == "__main__":
    main()
