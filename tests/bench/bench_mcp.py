"""kb mcp over stdio, timed from the client's side (the standard library
only, so that the figures are kb's, not an SDK's):

  - start to first answer: from spawning `kb mcp` to the reply of its first
    request (initialize; a lexical search; a hybrid search, which opens the
    model and loads the vector index), fresh processes;
  - warm search: one process, the short shell queries searched in turn
    (tools/call search, k = 10, whole chunks, the default budget; then
    with three sub-queries each), each request timed from writing its line
    to reading its reply.

  python3 bench_mcp.py KB_BIN KB_DIR QUERIES.json [ROUNDS]
Prints Markdown table rows.
"""
import json
import subprocess
import sys
import time

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}


def line(msg):
    return (json.dumps(msg) + "\n").encode()


def search(i, query, mode, modern=False):
    params = {"name": "search", "arguments": {"query": query, "mode": mode}}
    if modern:
        params["_meta"] = META
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}


class Server:
    def __init__(self, kb, kb_dir):
        self.t0 = time.perf_counter()
        self.p = subprocess.Popen([kb, "--kb", kb_dir, "-q", "mcp"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)

    def ask(self, msg):
        self.p.stdin.write(line(msg))
        self.p.stdin.flush()
        reply = json.loads(self.p.stdout.readline())
        assert "result" in reply and not reply["result"].get("isError"), reply
        return reply

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def row(what, xs, note=""):
    print(f"| {what} | {pct(xs, 0.5):.1f} | {pct(xs, 0.99):.1f} | {note} |")


def main():
    kb, kb_dir, queries = sys.argv[1:4]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    with open(queries) as f:
        qs = [q["query"] for q in json.load(f)["queries"]]

    # start to first answer, fresh processes
    first = {"initialize": [], "lexical": [], "hybrid": []}
    for i in range(10):
        for what in first:
            s = Server(kb, kb_dir)
            if what == "initialize":
                s.ask(INIT)
            else:   # 2026-07-28: the search is the first request
                s.ask(search(1, qs[i % len(qs)], what, modern=True))
            first[what].append((time.perf_counter() - s.t0) * 1000)
            s.close()
    print("| start to first answer | p50 ms | p99 ms | |")
    print("|---|---|---|---|")
    row("initialize answered", first["initialize"], "10 fresh processes")
    row("first search answered, lexical", first["lexical"], "no model needed")
    row("first search answered, hybrid", first["hybrid"], "opens the model and the vector index")
    print()

    # warm: one process, every query, several rounds
    s = Server(kb, kb_dir)
    s.ask(INIT)
    for q in qs:   # a warm-up round
        s.ask(search(1, q, "hybrid"))
    print("| warm search over stdio | p50 ms | p99 ms | |")
    print("|---|---|---|---|")
    n = 0
    for mode in ("lexical", "hybrid"):
        t, inner = [], []
        for _ in range(rounds):
            for q in qs:
                n += 1
                a = time.perf_counter()
                r = s.ask(search(n, q, mode))
                t.append((time.perf_counter() - a) * 1000)
                inner.append(r["result"]["structuredContent"]["took_ms"])
        row(f"{mode}, handshake era", t, f"{len(t)} requests; the search itself p50 {pct(inner, 0.5):.1f} ms")
    t = []
    for _ in range(rounds):
        for q in qs:   # an agent's three rewrites, one of each type
            n += 1
            m = search(n, q, "hybrid")
            m["params"]["arguments"]["searches"] = [
                {"type": "lex", "query": q + " example"}, {"type": "vec", "query": "how to " + q},
                {"type": "hyde", "query": f"This section explains {q} and when it matters for performance."}]
            a = time.perf_counter()
            s.ask(m)
            t.append((time.perf_counter() - a) * 1000)
    row("hybrid with 3 searches (lex, vec, hyde)", t, f"{len(t)} requests: 3 lexical and 3 vector lists fused")
    s.close()
    s = Server(kb, kb_dir)
    for q in qs:
        s.ask(search(1, q, "hybrid", modern=True))
    t = []
    for _ in range(rounds):
        for q in qs:
            n += 1
            a = time.perf_counter()
            s.ask(search(n, q, "hybrid", modern=True))
            t.append((time.perf_counter() - a) * 1000)
    row("hybrid, 2026-07-28 (_meta on each request)", t, f"{len(t)} requests")
    s.close()


if __name__ == "__main__":
    main()
