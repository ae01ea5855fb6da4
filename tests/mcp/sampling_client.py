"""`kb mcp` lending its llm relevance stage the client's model through MCP
sampling, driven by the official MCP Python SDK (PyPI mcp) over stdio in
its legacy mode (the 2025-11-25 handshake), with a sampling callback that
answers from a script. kb has no LLM endpoint (KB_LLM_URL unset).

  - a search with rerank "llm" sends one sampling/createMessage (the
    stage's system prompt, its listwise user message, temperature 0), and
    the results take the order the scripted answer gives: the named
    sections first, the rest in kb's own order; rerank says via
    "sampling" and the model the answer named;
  - the same search again asks nothing (the caches);
  - an answer of words, and a refusal (a JSON-RPC error), leave kb's own
    order with rerank.fallback saying why, and a warning on stderr;
  - an answer slower than KB_RERANK_TIMEOUT_MS: kb's order, the request
    cancelled (notifications/cancelled), and the session goes on;
  - a client without the sampling capability: the llm stage is a tool
    error naming KB_LLM_URL, as without sampling.
Every message kb wrote is checked against the 2025-11-25 schema, its
sampling requests included (mcpcheck).

  python3 sampling_client.py KB_BIN KB_DIR WORK_DIR
"""
import asyncio
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcpcheck  # noqa: E402

import mcp.types as types  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

Q = "shared memory bank conflicts"
Q_WORDS = "coalesced access to global memory"
Q_REFUSED = "occupancy calculator registers per thread"
Q_SLOW = "pinned memory zero copy"


def check(cond, what):
    if not cond:
        raise AssertionError(what)


class Judge:
    """The scripted model: answers[query] is the reply text, an ErrorData,
    or ("slow", text); every request it got is kept."""

    def __init__(self, answers):
        self.answers = answers
        self.asked = []

    async def __call__(self, context, params):
        user = params.messages[0].content.text
        query = re.match(r"Question: (.*)\n", user).group(1)
        self.asked.append({"query": query, "params": params, "user": user})
        a = self.answers[query]
        if isinstance(a, types.ErrorData):
            return a
        if isinstance(a, tuple):
            await asyncio.sleep(a[0])
            a = a[1]
        return types.CreateMessageResult(role="assistant", model="scripted-judge",
                                         content=types.TextContent(type="text", text=a),
                                         stop_reason="endTurn")


def server(kb_bin, kb_dir, work, name):
    sent, wrote, err = (os.path.join(work, f"{name}.{x}") for x in ("sent", "wrote", "err"))
    for p in (sent, wrote, err):
        open(p, "w").close()
    env = {k: v for k, v in os.environ.items()
           if k.startswith("KB_") and k not in ("KB_LLM_URL", "KB_RERANK")}
    env |= {"HOME": os.environ.get("HOME", "/"), "WROTE": wrote, "ERR": err,
            "KB_RERANK_TIMEOUT_MS": "800"}
    return StdioServerParameters(
        command="/bin/sh",
        args=["-c", 'tee -a "$0" | "$@" 2>>"$ERR" | tee -a "$WROTE"', sent, kb_bin,
              "--kb", kb_dir, "mcp", "--no-skills"],
        env=env), (sent, wrote, err)


async def search(c, query, rerank):
    r = await c.call_tool("search", {"query": query, "mode": "lexical", "k": 10,
                                     "rerank": rerank})
    check(not r.is_error, f"search {query!r} {rerank}: {r.content}")
    return r.structured_content


def ids(sc):
    return [x["chunk_id"] for x in sc["results"]]


async def with_sampling(kb_bin, kb_dir, work):
    judge = Judge({Q: "[3, 1]", Q_WORDS: "Passage 2 is the best one here.",
                   Q_REFUSED: types.ErrorData(code=-1, message="User rejected sampling request"),
                   Q_SLOW: (1.5, "[2]")})
    params, (sent, wrote, err) = server(kb_bin, kb_dir, work, "sampling")
    async with Client(params, mode="legacy", sampling_callback=judge,
                      read_timeout_seconds=60) as c:
        check(c.protocol_version == "2025-11-25", f"negotiated {c.protocol_version}")
        # kb's own order, then the client's
        base = ids(await search(c, Q, "none"))
        check(len(base) >= 5 and not judge.asked, f"base {base}, asked {len(judge.asked)}")
        sc = await search(c, Q, "llm")
        check(len(judge.asked) == 1, f"{len(judge.asked)} sampling requests for one search")
        got = ids(sc)
        # the stage numbers the fused pool's sections, which kb's own list
        # may show in another order (at most three of one chapter in its
        # top 5): the passages are read from the request itself
        user = judge.asked[0]["user"]
        pool = [s.split(" > ")[-1] for s in
                re.findall(r"^\[\d+\] source: .*\nsection: (.*)$", user, re.M)]
        check(len(pool) >= 5, f"passages in the request: {pool}")
        want = [pool[2], pool[0], pool[1], pool[3], pool[4]]
        heads = [x["heading_path"][-1] for x in sc["results"]]
        check(heads[:5] == want, f"order {heads}, wanted {want} first (kb's {base})")
        rr = sc["rerank"]
        check(rr["stage"] == "llm" and rr["via"] == "sampling" and rr["model"] == "scripted-judge"
              and rr["fallback"] is None and rr["ordered"] == 2 and not rr["cached"]
              and rr["pool"] >= len(base), f"rerank {rr}")
        p = judge.asked[0]["params"]
        check("passage numbers only" in p.system_prompt and p.temperature == 0
              and p.max_tokens > 0 and p.include_context == "none", f"request params {p}")
        check(user.startswith(f"Question: {Q}\n") and "[3] source: " in user
              and "JSON array of passage numbers" in user, f"user message {user[:300]!r}")
        # asked again: no request
        again = await search(c, Q, "llm")
        check(ids(again) == got and len(judge.asked) == 1, "the same search asked again")

        # words, a refusal, a slow answer: kb's own order and why
        for q, why in ((Q_WORDS, "not a list of passage ids"),
                       (Q_REFUSED, "User rejected sampling request"),
                       (Q_SLOW, "no sampling response within 800 ms")):
            own = ids(await search(c, q, "none"))
            sc = await search(c, q, "llm")
            check(ids(sc) == own, f"{q}: {ids(sc)} is not kb's order {own}")
            fb = sc["rerank"]["fallback"]
            check(fb and why in fb and sc["rerank"]["ordered"] == 0, f"{q}: fallback {fb!r}")
        check(len(judge.asked) == 4, f"{len(judge.asked)} sampling requests in all")
        # after the late answer, the session goes on; a fallback is not
        # kept, so the refused query asks again
        judge.answers[Q_REFUSED] = "[1]"
        sc = await search(c, Q_REFUSED, "llm")
        check(sc["rerank"]["fallback"] is None and sc["rerank"]["ordered"] == 1
              and len(judge.asked) == 5, f"after the fallbacks: {sc['rerank']}")
    with open(sent) as f:
        sent_lines = f.read().splitlines()
    with open(wrote) as f:
        wrote_lines = f.read().splitlines()
    msgs = mcpcheck.check_transcript("2025-11-25", sent_lines, wrote_lines)
    asks = [m for m in msgs if m.get("method") == "sampling/createMessage"]
    check(len(asks) == 5, f"{len(asks)} sampling requests written")
    cancelled = [m for m in msgs if m.get("method") == "notifications/cancelled"]
    check(len(cancelled) == 1 and cancelled[0]["params"]["requestId"] == asks[3]["id"],
          f"cancellations {cancelled}")
    with open(err) as f:
        log = f.read()
    check(log.count("the llm reranking stage failed") == 3, f"warnings: {log[-800:]}")
    return len(msgs)


async def without_sampling(kb_bin, kb_dir, work):
    params, (sent, wrote, err) = server(kb_bin, kb_dir, work, "plain")
    async with Client(params, mode="legacy", read_timeout_seconds=60) as c:
        r = await c.call_tool("search", {"query": Q, "mode": "lexical", "rerank": "llm"})
        check(r.is_error and "KB_LLM_URL" in r.content[0].text, f"no sampling: {r.content}")
    with open(wrote) as f:
        check("sampling/createMessage" not in f.read(), "sampling asked of a client without it")


def main():
    kb_bin, kb_dir, work = sys.argv[1:4]
    mcpcheck.skip_without_schemas()
    n = asyncio.run(with_sampling(kb_bin, kb_dir, work))
    asyncio.run(without_sampling(kb_bin, kb_dir, work))
    print(f"ok sampling: {n} messages from kb, each valid")


if __name__ == "__main__":
    main()
