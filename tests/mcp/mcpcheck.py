"""What the MCP tests share: the protocol's JSON schemas (shared/mcp/
schema-<version>.json) and a check of every message kb wrote against them.

A transcript is the lines a client sent and the lines kb wrote. Each line
kb wrote must be one JSON-RPC message valid under the version's
JSONRPCMessage, and a response also under the definition for what it
answers: the result of the request with its id (InitializeResult,
ListToolsResult, ... in the handshake era; the *ResultResponse
definitions in 2026-07-28) or the error its code names.
"""
import json
import os
import sys

import jsonschema

HANDSHAKE = ("2025-06-18", "2025-11-25")
MODERN = ("2026-07-28",)

# the result a method's response carries, by era
HANDSHAKE_RESULTS = {
    "initialize": "InitializeResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "ping": "EmptyResult",
    "resources/list": "ListResourcesResult",
    "resources/read": "ReadResourceResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
}
# the requests kb sends a client, by method (handshake era)
HANDSHAKE_REQUESTS = {"sampling/createMessage": "CreateMessageRequest"}
MODERN_RESPONSES = {
    "server/discover": "DiscoverResultResponse",
    "tools/list": "ListToolsResultResponse",
    "tools/call": "CallToolResultResponse",
    "resources/list": "ListResourcesResultResponse",
    "resources/read": "ReadResourceResultResponse",
    "resources/templates/list": "ListResourceTemplatesResultResponse",
    "prompts/list": "ListPromptsResultResponse",
    "prompts/get": "GetPromptResultResponse",
}
# 2026-07-28's definitions of errors: of the whole response, or of its
# error object
MODERN_ERROR_RESPONSES = {-32022: "UnsupportedProtocolVersionError",
                          -32020: "HeaderMismatchError",
                          -32021: "MissingRequiredClientCapabilityError"}
MODERN_ERRORS = {-32700: "ParseError", -32600: "InvalidRequestError",
                 -32601: "MethodNotFoundError", -32602: "InvalidParamsError",
                 -32603: "InternalError"}


def schema_dir():
    """$KB_TOP/../shared/mcp, or None when it is absent."""
    top = os.environ.get("KB_TOP", ".")
    d = os.path.join(top, "..", "shared", "mcp")
    return d if os.path.isfile(os.path.join(d, "schema-2025-11-25.json")) else None


def skip_without_schemas():
    if schema_dir() is None:
        print("skipped: no MCP schemas (../shared/mcp/schema-<version>.json)")
        sys.exit(0)


_schemas = {}


def schema(version):
    if version not in _schemas:
        with open(os.path.join(schema_dir(), f"schema-{version}.json")) as f:
            _schemas[version] = json.load(f)
    return _schemas[version]


_validators = {}


def validate(version, definition, instance):
    """Raises jsonschema.ValidationError unless instance is a valid
    `definition` of the version's schema."""
    key = (version, definition)
    if key not in _validators:
        s = schema(version)
        defs = "$defs" if "$defs" in s else "definitions"
        root = dict(s)
        root["$ref"] = f"#/{defs}/{definition}"
        cls = jsonschema.validators.validator_for(s)
        _validators[key] = cls(root)
    _validators[key].validate(instance)


def methods_by_id(sent_lines):
    """The method of each request the client sent, by id."""
    out = {}
    for line in sent_lines:
        try:
            m = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(m, dict) and "id" in m and isinstance(m.get("method"), str):
            out[json.dumps(m["id"])] = m["method"]
    return out


def check_message(version, msg, methods):
    """Checks one message kb wrote; returns what it answers (a method, or
    None)."""
    validate(version, "JSONRPCMessage", msg)
    modern = version in MODERN
    if isinstance(msg.get("method"), str) and "id" in msg:   # kb asks the client
        if modern or msg["method"] not in HANDSHAKE_REQUESTS:
            raise jsonschema.ValidationError(f"kb sent a request {msg['method']!r} it has no "
                                             f"business sending in {version}")
        validate(version, HANDSHAKE_REQUESTS[msg["method"]], msg)
        return msg["method"]
    method = methods.get(json.dumps(msg.get("id"))) if "id" in msg else None
    if "result" in msg and method:
        if modern and method in MODERN_RESPONSES:
            validate(version, MODERN_RESPONSES[method], msg)
        elif not modern and method in HANDSHAKE_RESULTS:
            validate(version, HANDSHAKE_RESULTS[method], msg["result"])
    if "error" in msg and modern:
        code = msg["error"]["code"]
        if code in MODERN_ERROR_RESPONSES:
            validate(version, MODERN_ERROR_RESPONSES[code], msg)
        elif code in MODERN_ERRORS:
            validate(version, MODERN_ERRORS[code], msg["error"])
    return method


def check_transcript(version, sent_lines, wrote_lines):
    """Every line kb wrote, checked; returns the messages parsed. Raises
    AssertionError naming the line that is wrong."""
    methods = methods_by_id(sent_lines)
    msgs = []
    for i, line in enumerate(wrote_lines):
        try:
            msg = json.loads(line)
        except ValueError as e:
            raise AssertionError(f"line {i + 1} of kb's output is not JSON ({e}): {line[:200]!r}")
        try:
            check_message(version, msg, methods)
        except jsonschema.ValidationError as e:
            raise AssertionError(f"line {i + 1} of kb's output is not a valid {version} "
                                 f"message: {e.message} at {list(e.absolute_path)}: {line[:300]}")
        msgs.append(msg)
    return msgs
