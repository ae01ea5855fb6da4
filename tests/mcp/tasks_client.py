"""The MCP Tasks extension (io.modelcontextprotocol/tasks, 2026-07-28)
for verify, driven by hand over stdio (`kb mcp --allow-verify`) or
Streamable HTTP (`kb serve --allow-verify`'s /mcp), against a real
verification queue (KB_QUEUE, in the server's environment) and real
`kb verify worker`s with compile-only jobs. Every message kb wrote is
checked against the 2026-07-28 schema (mcpcheck): the envelope, the
synchronous answers as CallToolResult responses, a completed task's result
as a CallToolResult, -32021 and -32602 as their error definitions. The
Task objects are checked field by field against the extension's Task (its
schema is not among shared/mcp's).

  python3 tasks_client.py stdio KB_BIN KB_DIR QUEUE TASKS_DIR
  python3 tasks_client.py http URL KB_BIN QUEUE
"""
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
import urllib.error

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcpcheck  # noqa: E402

V = "2026-07-28"
EXT = "io.modelcontextprotocol/tasks"
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def meta(tasks=True):
    caps = {"extensions": {EXT: {}}} if tasks else {}
    return {"io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "tasks_client", "version": "1"}}


def source(n):
    with open(os.path.join(os.environ["KB_TOP"], "corpus/tasks/gelu/reference.cu")) as f:
        return f"// tasks_client candidate {n}\n" + f.read()


class Stdio:
    def __init__(self, kb_bin, kb_dir, tasks_dir):
        self.p = subprocess.Popen([kb_bin, "--kb", kb_dir, "mcp", "--no-skills",
                                   "--allow-verify", "--tasks", tasks_dir],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.n = 0

    def ask(self, method, params, headers=None):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        check(line, f"{method}: kb mcp wrote nothing (it ended?)")
        return method, json.loads(line), None

    def close(self):
        self.p.stdin.close()
        check(self.p.wait(30) == 0, "kb mcp did not end well")


class Http:
    def __init__(self, url):
        self.url, self.n = url.rstrip("/") + "/mcp", 0

    def ask(self, method, params, headers=None):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "MCP-Protocol-Version": V, "Mcp-Method": method}
        name = params.get("name") or params.get("taskId")
        if name:
            h["Mcp-Name"] = name
        h.update(headers or {})
        req = urllib.request.Request(self.url, json.dumps(msg).encode(), h, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, body = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read()
        return method, json.loads(body), status

    def close(self):
        pass


def checked(reply):
    """The reply checked against the schema: a CreateTaskResult (which the
    core schema does not know) as a JSON-RPC result response carrying a
    Result, anything else as mcpcheck checks kb's messages."""
    method, msg, status = reply
    if msg.get("result", {}).get("resultType") == "task":
        mcpcheck.validate(V, "JSONRPCResultResponse", msg)
        mcpcheck.validate(V, "Result", msg["result"])
    else:
        mcpcheck.check_message(V, msg, {json.dumps(msg.get("id")): method})
    return msg, status


def task_of(result, status, tid=None):
    """Checks a Task object: its fields, types and status."""
    check(result.get("status") == status, f"wanted a {status} task: {result}")
    check(re.fullmatch(r"[0-9a-f]{64}", result.get("taskId", "")), f"taskId: {result}")
    if tid:
        check(result["taskId"] == tid, f"another task: {result}")
    for k in ("createdAt", "lastUpdatedAt"):
        check(ISO.match(result.get(k, "")), f"{k} not ISO 8601: {result}")
    check(result["lastUpdatedAt"] >= result["createdAt"], f"updated before created: {result}")
    check("ttlMs" in result and result["ttlMs"] is None, f"ttlMs: {result}")
    check(isinstance(result.get("pollIntervalMs"), int) and result["pollIntervalMs"] > 0,
          f"pollIntervalMs: {result}")
    return result["taskId"]


def drain(kb_bin, queue):
    subprocess.run([kb_bin, "verify", "worker", "-q", "--queue", queue, "--compile-threads", "1",
                    "--drain"], check=True, timeout=120)


def flow(c, kb_bin, queue, tag, full):
    """The exchanges of the transports; c.ask sends one request. full: the
    synchronous answers too (stdio; they take the same path over HTTP)."""
    args = {"task": "gelu", "source": source(f"{tag}-1"), "compile_only": True}
    d, _ = checked(c.ask("server/discover", {"_meta": meta()}))
    check(EXT in d["result"]["capabilities"].get("extensions", {}), f"not announced: {d}")
    # a client that declares the extension: a task at once (no worker runs yet)
    r, _ = checked(c.ask("tools/call", {"name": "verify", "arguments": args, "_meta": meta()}))
    res = r["result"]
    check(res.get("resultType") == "task" and "content" not in res, f"not a task: {res}")
    tid = task_of(res, "working")
    g, _ = checked(c.ask("tasks/get", {"taskId": tid, "_meta": meta()}))
    check(g["result"]["resultType"] == "complete", f"tasks/get: {g}")
    task_of(g["result"], "working", tid)
    check("result" not in g["result"], f"a working task with a result: {g}")
    u, _ = checked(c.ask("tasks/update", {"taskId": tid, "inputResponses": {}, "_meta": meta()}))
    check(u["result"] == {"resultType": "complete", "_meta": u["result"]["_meta"]}, f"update: {u}")
    # errors: an unknown task; a client that did not declare the extension
    e, st = checked(c.ask("tasks/get", {"taskId": "0" * 64, "_meta": meta()}))
    check(e["error"]["code"] == -32602 and "not found" in e["error"]["message"], f"unknown: {e}")
    check(st in (None, 400), f"HTTP status {st} for -32602")
    e, st = checked(c.ask("tasks/get", {"taskId": tid, "_meta": meta(False)}))
    check(e["error"]["code"] == -32021 and EXT in e["error"]["data"]["requiredCapabilities"]["extensions"],
          f"undeclared: {e}")
    check(st in (None, 400), f"HTTP status {st} for -32021")
    # a worker verifies it; the task is completed with verify's answer
    drain(kb_bin, queue)
    g, _ = checked(c.ask("tasks/get", {"taskId": tid, "_meta": meta()}))
    task_of(g["result"], "completed", tid)
    inner = g["result"]["result"]
    mcpcheck.validate(V, "CallToolResult", inner)
    check(inner["isError"] is False and inner["structuredContent"]["verdict"] == "compiled" and
          inner["structuredContent"]["candidate"] == "source" and
          inner["structuredContent"]["queue"]["job"] == tid, f"completed: {inner}")
    check(g["result"].get("statusMessage") == "verdict: compiled", f"statusMessage: {g}")
    x, _ = checked(c.ask("tasks/cancel", {"taskId": tid, "_meta": meta()}))
    check(x["result"]["resultType"] == "complete", f"cancel: {x}")
    if not full:
        return c, tid
    # arguments the tool refuses: its error, at once, not a task
    r, _ = checked(c.ask("tools/call", {"name": "verify", "arguments": {"task": "gelu"},
                                        "_meta": meta()}))
    check(r["result"]["isError"] is True and "source" in r["result"]["content"][0]["text"],
          f"bad arguments: {r}")
    # the same candidate again: verified already, so answered at once
    r, _ = checked(c.ask("tools/call", {"name": "verify", "arguments": args, "_meta": meta()}))
    check(r["result"]["resultType"] == "complete" and
          r["result"]["structuredContent"]["verdict"] == "compiled", f"a done job again: {r}")
    # a client that does not declare the extension: the call waits for its result
    w = subprocess.Popen([kb_bin, "verify", "worker", "-q", "--queue", queue, "--compile-threads", "1"])
    try:
        args2 = dict(args, source=source(f"{tag}-2"))
        r, _ = checked(c.ask("tools/call", {"name": "verify", "arguments": args2, "_meta": meta(False)}))
    finally:
        w.send_signal(signal.SIGTERM)
        w.wait(60)
    check(r["result"]["resultType"] == "complete" and r["result"]["isError"] is False and
          r["result"]["structuredContent"]["verdict"] == "compiled", f"synchronous: {r}")
    return c, tid


def main():
    mcpcheck.skip_without_schemas()
    mode = sys.argv[1]
    if mode == "stdio":
        kb_bin, kb_dir, queue, tasks_dir = sys.argv[2:6]
        c = Stdio(kb_bin, kb_dir, tasks_dir)
        flow(c, kb_bin, queue, "stdio", True)
        c.close()
    else:
        url, kb_bin, queue = sys.argv[2:5]
        c = Http(url)
        c, tid = flow(c, kb_bin, queue, "http", False)
        # the routing header names the task (the extension's rule)
        e, st = checked(c.ask("tasks/get", {"taskId": tid, "_meta": meta()}, {"Mcp-Name": "other"}))
        check(e["error"]["code"] == -32020 and st == 400, f"Mcp-Name: {st} {e}")
    print(f"{mode}: ok")


if __name__ == "__main__":
    main()
