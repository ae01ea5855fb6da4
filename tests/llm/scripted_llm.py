#!/usr/bin/env python3
"""scripted_llm.py - a scripted LLM server on loopback for kb's tests.

OpenAI-compatible (POST .../chat/completions) and Anthropic-compatible
(POST .../messages), streaming (Server-Sent Events) and not. It replays
the replies of a script file in the order requests arrive, logs every
request it got (method, path, headers with the keys' values blanked, body)
as JSON lines, and prints its port on stdout once it listens. Python's
standard library only; tests/llm/README.md says how to write a script.

  scripted_llm.py --script FILE [--log FILE] [--port 0] [--key KEY]
  scripted_llm.py --record DIR | --answers DIR [--log FILE] [--port 0]

--record keeps each request's prompt as DIR/KEY.json and answers with
the passage ids of the prompt in their order (kb's own order for a
reranking request); --answers replays DIR/KEY.txt as the reply to the
request whose prompt has that KEY (scripts/bench-rerank-llm.sh).

It exits when its parent process does (a test that dies leaves nothing
running), or on SIGTERM/SIGINT.
"""
import argparse
import hashlib
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET_HEADERS = ("authorization", "x-api-key", "api-key")

# OpenAI's finish reasons and Anthropic's stop reasons for one another
TO_ANTHROPIC = {"stop": "end_turn", "length": "max_tokens"}


class Script:
    """The replies, handed out in order under a lock; "repeat" serves one
    several times, "then" answers once the list is spent."""

    def __init__(self, path):
        self.dir = os.path.dirname(os.path.abspath(path))
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if isinstance(doc, list):
            doc = {"replies": doc}
        self.queue = []
        for i, r in enumerate(doc.get("replies", [])):
            self.queue.extend([(i, r)] * int(r.get("repeat", 1)))
        self.then = doc.get("then")
        self.lock = threading.Lock()
        self.served = 0

    def next(self):
        with self.lock:
            self.served += 1
            if self.queue:
                return self.queue.pop(0)
            return ("then", self.then) if self.then is not None else (None, None)

    def text(self, reply):
        """The reply's assistant text: "text", or "parts" joined, where a
        part is a string or {"file": PATH} (relative to the script)."""
        if "parts" not in reply:
            return reply.get("text", "")
        out = []
        for p in reply["parts"]:
            if isinstance(p, dict):
                with open(os.path.join(self.dir, p["file"]), encoding="utf-8") as f:
                    out.append(f.read())
            else:
                out.append(p)
        return "".join(out)


def words(s):
    return max(1, len(s.split()))


def content_text(c):
    """A message's content: a string, or the text of its blocks."""
    if isinstance(c, list):
        return "".join(b.get("text", "") for b in c if isinstance(b, dict))
    return c if isinstance(c, str) else ""


def prompt_of(api, req):
    """The request's system prompt and last user message, and its key: the
    first 16 hex digits of their SHA-256, the same for either API."""
    msgs = req.get("messages", [])
    if api == "anthropic":
        system = content_text(req.get("system", ""))
    else:
        system = "\n".join(content_text(m.get("content")) for m in msgs
                           if m.get("role") == "system")
    users = [content_text(m.get("content")) for m in msgs if m.get("role") == "user"]
    user = users[-1] if users else ""
    key = hashlib.sha256((system + "\n\0\n" + user).encode("utf-8")).hexdigest()[:16]
    return system, user, key


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "scripted_llm/1"

    def log_message(self, fmt, *args):   # quiet: the request log says it all
        pass

    # ---------------------------------------------------------- plumbing

    def send(self, status, body, ctype="application/json", headers=None):
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True

    def log_request_seen(self, body, status, reply_index, api, key_ok):
        headers = {}
        for k, v in self.headers.items():
            headers[k] = "[redacted]" if k.lower() in SECRET_HEADERS else v
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = body
        entry = {"n": self.req_n, "method": self.command, "path": self.path,
                 "api": api, "headers": headers, "key_ok": key_ok, "body": parsed,
                 "reply": reply_index, "status": status}
        if self.server.log:
            with self.server.log_lock, open(self.server.log, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")

    def error_body(self, api, status, message, etype=None):
        if api == "anthropic":
            etype = etype or {400: "invalid_request_error", 401: "authentication_error",
                              404: "not_found_error", 429: "rate_limit_error",
                              529: "overloaded_error"}.get(status, "api_error")
            return json.dumps({"type": "error", "error": {"type": etype, "message": message}})
        return json.dumps({"error": {"message": message, "type": etype or "error",
                                     "code": status}})

    # ---------------------------------------------------------- requests

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            self.send(200, json.dumps({"object": "list", "data": [
                {"id": "scripted", "object": "model"}]}))
        else:
            self.send(404, json.dumps({"error": {"message": "no such path"}}))

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n).decode("utf-8", "replace") if n else ""
        if self.path == "/_scripted/load":
            return self.load(raw)
        with self.server.log_lock:
            self.server.nreq += 1
            self.req_n = self.server.nreq
        path = self.path.split("?", 1)[0].rstrip("/")
        api = ("openai" if path.endswith("/chat/completions") else
               "anthropic" if path.endswith("/messages") else None)
        key_ok = None
        if self.server.key is not None:
            got = (self.headers.get("x-api-key") if api == "anthropic" else
                   (self.headers.get("Authorization") or "").removeprefix("Bearer "))
            key_ok = got == self.server.key
        status, idx, send = self.answer(api, raw, key_ok)
        # logged before the reply goes: a client that has its reply finds
        # its request in the log
        self.log_request_seen(raw, status, idx, api, key_ok)
        send()

    def load(self, raw):
        """POST /_scripted/load {"script": PATH, "key": KEY or null}: a
        new script and key, the request log emptied (one server for many
        cases of a test). Not logged."""
        try:
            req = json.loads(raw)
            script = Script(req["script"])
        except (ValueError, KeyError, OSError) as e:
            return self.send(400, json.dumps({"error": {"message": str(e)}}))
        with self.server.log_lock:
            self.server.script = script
            self.server.key = req.get("key")
            self.server.nreq = 0
            if self.server.log:
                open(self.server.log, "w").close()
        self.send(200, json.dumps({"loaded": req["script"]}))

    def answer(self, api, raw, key_ok):
        """Checks the request as the real APIs do (no reply is spent on a
        bad one), then serves the script's next reply. Returns the status
        sent, the reply's index in the script, and the function that
        sends it."""
        if api is None:
            return 404, None, lambda: self.send(404, json.dumps({"error": {"message": "no such path"}}))
        if key_ok is False:
            return 401, None, lambda: self.send(401, self.error_body(
                api, 401, "invalid x-api-key" if api == "anthropic" else "invalid api key"))
        try:
            req = json.loads(raw)
        except ValueError:
            return 400, None, lambda: self.send(400, self.error_body(api, 400, "request body is not JSON"))
        problem = None
        if not isinstance(req, dict) or not isinstance(req.get("messages"), list):
            problem = "messages: field required"
        elif api == "anthropic" and not self.headers.get("anthropic-version"):
            problem = "anthropic-version: header is required"
        elif api == "anthropic" and not isinstance(req.get("max_tokens"), int):
            problem = "max_tokens: field required"
        elif api == "anthropic" and any(m.get("role") == "system" for m in req["messages"]):
            problem = "messages: the system prompt goes in the top-level system field"
        if problem:
            return 400, None, lambda: self.send(400, self.error_body(api, 400, problem))
        if self.server.record or self.server.answers:
            return self.recorded(api, req)
        idx, reply = self.server.script.next()
        if reply is None:
            return 400, None, lambda: self.send(400, self.error_body(
                api, 400, "scripted_llm: no reply left in the script"))
        return int(reply.get("status", 200)), idx, lambda: self.reply(api, req, reply)

    def recorded(self, api, req):
        """--record: keeps the prompt as DIR/KEY.json and answers with its
        passage ids ("[1] ...", "[2] ..." at line starts) in their order.
        --answers: answers with DIR/KEY.txt, or a 500 when there is none."""
        system, user, key = prompt_of(api, req)
        if self.server.record:
            path = os.path.join(self.server.record, key + ".json")
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                json.dump({"key": key, "api": api, "model": req.get("model"),
                           "system": system, "user": user}, f, indent=1)
                f.write("\n")
            os.replace(path + ".tmp", path)
            ids = re.findall(r"^\[(\d+)\] ", user, re.M)
            reply = {"text": "[" + ", ".join(ids) + "]"}
            return 200, "record:" + key, lambda: self.reply(api, req, reply)
        path = os.path.join(self.server.answers, key + ".txt")
        try:
            with open(path, encoding="utf-8") as f:
                reply = {"text": f.read()}
        except OSError:
            reply = {"status": 500, "error": "scripted_llm: no answer for request " + key}
        return int(reply.get("status", 200)), "answer:" + key, lambda: self.reply(api, req, reply)

    def reply(self, api, req, reply):
        """Sends one of the script's replies."""
        time.sleep(reply.get("delay_ms", 0) / 1000.0)
        status = int(reply.get("status", 200))
        headers = reply.get("headers", {})
        if "body" in reply:
            self.send(status, reply["body"], reply.get("content_type", "application/json"), headers)
            return
        if status != 200:
            self.send(status, self.error_body(api, status, reply.get("error", "scripted error"),
                                              reply.get("error_type")), headers=headers)
            return
        stream = reply.get("stream", bool(req.get("stream")))
        text = self.server.script.text(reply) if self.server.script else reply.get("text", "")
        model = req.get("model", "scripted")
        if api == "openai":
            include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
            events = openai_events(reply, text, model, stream, include_usage)
        else:
            events = anthropic_events(reply, text, model, stream)
        if not stream:
            self.send(200, events, headers=headers)
        else:
            self.stream(reply, events, headers)

    def stream(self, reply, events, headers):
        """Sends events as an event stream: chunked (each event one chunk)
        or, with "framing": "close", delimited by the connection's end.
        "cut_after": N sends N events, then (with "cut_mid") half of the
        next, and drops the connection."""
        chunked = reply.get("framing", "chunked") == "chunked"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        for k, v in headers.items():
            self.send_header(k, str(v))
        self.end_headers()
        self.close_connection = True
        cut = reply.get("cut_after")
        delay = reply.get("chunk_delay_ms", 0) / 1000.0

        def put(data):
            data = data.encode("utf-8")
            if chunked:
                data = b"%x\r\n%s\r\n" % (len(data), data)
            self.wfile.write(data)
            self.wfile.flush()

        try:
            for i, ev in enumerate(events):
                if cut is not None and i >= cut:
                    if reply.get("cut_mid"):
                        put(ev[: max(1, len(ev) // 2)])
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                put(ev)
                if delay:
                    time.sleep(delay)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


def pieces(text, n):
    return [text[i:i + n] for i in range(0, len(text), n)] or [""]


def usage_of(reply, text, req_words=12):
    u = reply.get("usage", {})
    return u.get("prompt_tokens", req_words), u.get("completion_tokens", words(text))


def openai_events(reply, text, model, stream, include_usage):
    """The body (not streaming) or the list of SSE events (streaming)."""
    finish = reply.get("finish_reason", "stop")
    pt, ct = usage_of(reply, text)
    usage = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
    base = {"id": "chatcmpl-scripted", "created": int(time.time()), "model": model}
    if not stream:
        return json.dumps(dict(base, object="chat.completion", choices=[{
            "index": 0, "message": {"role": "assistant", "content": text},
            "finish_reason": finish}], usage=usage))

    def chunk(delta, fin=None, **extra):
        return "data: " + json.dumps(dict(base, object="chat.completion.chunk", choices=[
            {"index": 0, "delta": delta, "finish_reason": fin}], **extra)) + "\n\n"

    events = [": scripted_llm keep-alive\n\n", chunk({"role": "assistant", "content": ""})]
    for p in pieces(text, int(reply.get("chunk_chars", 16))):
        events.append(chunk({"content": p}))
    if "error_event" in reply:
        at = min(int(reply.get("error_after", 2)), len(events))
        events = events[:at] + ["data: " + json.dumps({"error": reply["error_event"]}) + "\n\n"]
        return events
    events.append(chunk({}, finish))
    if include_usage:
        events.append("data: " + json.dumps(dict(base, object="chat.completion.chunk",
                                                 choices=[], usage=usage)) + "\n\n")
    if not reply.get("no_done"):
        events.append("data: [DONE]\n\n")
    return events


def anthropic_events(reply, text, model, stream):
    finish = reply.get("stop_reason") or TO_ANTHROPIC.get(
        reply.get("finish_reason", "stop"), reply.get("finish_reason"))
    pt, ct = usage_of(reply, text)
    if not stream:
        return json.dumps({"id": "msg_scripted", "type": "message", "role": "assistant",
                           "model": model, "content": [{"type": "text", "text": text}],
                           "stop_reason": finish, "stop_sequence": None,
                           "usage": {"input_tokens": pt, "output_tokens": ct}})

    def ev(name, data):
        return "event: %s\ndata: %s\n\n" % (name, json.dumps(data))

    events = [ev("message_start", {"type": "message_start", "message": {
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": pt, "output_tokens": 1}}}),
        ev("content_block_start", {"type": "content_block_start", "index": 0,
                                   "content_block": {"type": "text", "text": ""}}),
        ev("ping", {"type": "ping"})]
    for p in pieces(text, int(reply.get("chunk_chars", 16))):
        events.append(ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                 "delta": {"type": "text_delta", "text": p}}))
    if "error_event" in reply:
        at = min(int(reply.get("error_after", 2)), len(events))
        return events[:at] + [ev("error", {"type": "error", "error": reply["error_event"]})]
    events += [ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ev("message_delta", {"type": "message_delta",
                                    "delta": {"stop_reason": finish, "stop_sequence": None},
                                    "usage": {"output_tokens": ct}})]
    if not reply.get("no_done"):
        events.append(ev("message_stop", {"type": "message_stop"}))
    return events


def die_with_parent():
    """Asks Linux for a SIGTERM when the parent process goes
    (PR_SET_PDEATHSIG), so a test that dies leaves no server behind, and
    returns the parent's pid for the poll that backs it up."""
    ppid = os.getppid()
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != ppid:      # gone between the two calls
        os._exit(0)
    return ppid


def watch_parent(ppid):
    while True:
        time.sleep(0.5)
        if os.getppid() != ppid:
            os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--script", help="the replies, a JSON file")
    ap.add_argument("--record", help="keep each request's prompt in this folder, "
                    "answer with its passage ids in order")
    ap.add_argument("--answers", help="answer each request with FOLDER/KEY.txt")
    ap.add_argument("--log", help="append each request as a JSON line here")
    ap.add_argument("--port", type=int, default=0, help="0: a free port")
    ap.add_argument("--key", help="the API key requests must carry (401 otherwise)")
    a = ap.parse_args()
    if sum(x is not None for x in (a.script, a.record, a.answers)) != 1:
        ap.error("one of --script, --record, --answers")
    if a.record:
        os.makedirs(a.record, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    ppid = die_with_parent()
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    server.daemon_threads = True
    server.script = Script(a.script) if a.script else None
    server.record = a.record
    server.answers = a.answers
    server.log = a.log
    server.log_lock = threading.Lock()
    server.key = a.key
    server.nreq = 0
    threading.Thread(target=watch_parent, args=(ppid,), daemon=True).start()
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
