/*
 * mcp.h - the MCP server's core: one JSON-RPC message in, the reply out,
 * whatever carried it. `kb mcp` (cli/cmd_mcp.c) feeds it the lines of
 * its stdin; the Streamable HTTP transport at /mcp feeds it POST bodies
 * and passes the request's MCP headers through a kb_mcp_transport.
 *
 * Both eras of the protocol, in one server:
 *   - the handshake era, 2025-11-25 and 2025-06-18: `initialize` (the
 *     version echoed when it is one of those, else the latest, 2025-11-25),
 *     `notifications/initialized`, `ping`; nothing but `ping` before
 *     `initialize` (-32600); the negotiated state lives in the session;
 *   - 2026-07-28, stateless: no handshake; every request carries
 *     `params._meta` with `io.modelcontextprotocol/protocolVersion` and
 *     `io.modelcontextprotocol/clientCapabilities` (-32602 when one is
 *     missing, -32022 with the supported versions for another version);
 *     `server/discover`; every result has `resultType` and the server's
 *     `_meta` stamp, list results `ttlMs` and `cacheScope`.
 * A session takes the era of its first request (the Python SDK's rule):
 * `initialize` makes it a handshake one, an enveloped request a 2026-07-28
 * one; the other era's requests are refused on it afterwards (-32600 for
 * an envelope on a handshake session, -32022 for `initialize` on a
 * 2026-07-28 one).
 *
 * JSON-RPC errors: -32700 (not JSON, not UTF-8), -32600 (not a request, a
 * batch array, a message over KB_MCP_MESSAGE_MAX), -32601 (unknown method),
 * -32602 (bad params, an unknown tool; in 2026-07-28 an unknown resource),
 * -32002 (an unknown resource, handshake era), -32603 (out of memory),
 * -32020 (HTTP headers that disagree with the body), -32022. An error
 * whose request id cannot be
 * read carries no id (the schemas of 2025-11-25 and 2026-07-28 allow that,
 * not a null one). A tool's own failure - an argument the tool's schema
 * refuses, no such chunk, no model - is a result with isError true and
 * the message that says what to do.
 *
 * Tools come from the one tool table (api/api.h, kb_api_tools): those
 * offered over MCP, in its order (search, get, papers, status,
 * skill_search, skill_get, task, prompt), and verify, which runs kernels,
 * only when kb_mcp_opts.allow_verify is set. What a tool needs attached
 * (the library, verify's settings) is attached to the calling thread's
 * store before it runs (kb_api_attach).
 *
 * Skills (kb_mcp_opts.skills_dir): every file of every skill folder is a
 * resource, skill://<name>/<file> (SKILL.md, kernel.cu, evidence.json,
 * baseline.cu ...), listed by resources/list with its size and its
 * "sha256:<hex>" digest in _meta (io.modelcontextprotocol.skills/digest)
 * and read by resources/read; the Skills extension's skills/list and
 * skills/get give each skill's front matter and manifest of files with
 * digests. The server then announces the resources capability (and, in
 * 2026-07-28, the extension io.modelcontextprotocol/skills). The library
 * is read once, at kb_mcp_open: a server serves the bytes it digested.
 *
 * Threads: a kb_mcp is read-only once open and serves any number of
 * threads; a session may be shared by threads (it locks itself); a
 * kb_tool_ctx is one thread's (one store and one embedder per worker).
 */
#ifndef KB_MCP_H
#define KB_MCP_H

#include "kb/kb.h"

/* The largest message read: larger ones are refused (-32600) unread. */
#define KB_MCP_MESSAGE_MAX (4u << 20)

/* The versions served, newest first. */
#define KB_MCP_VERSION_MODERN "2026-07-28"
#define KB_MCP_VERSION_LATEST_HANDSHAKE "2025-11-25"

typedef struct kb_mcp kb_mcp;

typedef struct {
    int allow_verify;          /* serve the verify tool: it runs candidate
                                  kernels on the GPU */
    const char *tasks_dir;     /* where verify's tasks are (NULL: where
                                  kb verify looks, kb_task_find); copied */
    double verify_timeout_s;   /* per candidate (<= 0: 120) */
    const char *skills_dir;    /* the skill library served as resources and
                                  to skill_get (NULL: none; skill_search
                                  still searches the KB's skills) */
} kb_mcp_opts;

void kb_mcp_opts_init(kb_mcp_opts *opts);
/* A server for opts: its tools' list made once, the instructions. *out is
 * freed with kb_mcp_free. */
kb_rc kb_mcp_open(const kb_mcp_opts *opts, kb_mcp **out, kb_err *err);
void kb_mcp_free(kb_mcp *server);
/* The tools served, as "search, get, papers, status", for a log line. */
const char *kb_mcp_tool_names(const kb_mcp *server);
/* How many skills are served as resources (0: none, no library). */
size_t kb_mcp_skill_count(const kb_mcp *server);
/* Readies a store for the server's tool calls: parks the server's skill
 * library with it (kb_api_skills_attach). Every store that answers tool
 * calls goes through here: kb_mcp_handle's, and each of kb serve's
 * workers' (REST's included, through kb_serve_opts.worker_init). */
kb_rc kb_mcp_attach(const kb_mcp *server, kb_store *store, kb_err *err);

/* What one connection has negotiated. stdio: one for the process.
 * Streamable HTTP: one per Mcp-Session-Id in the handshake era, made on
 * `initialize`; a fresh one per request for 2026-07-28, which keeps no
 * session. *out is freed with kb_mcp_session_free. */
typedef struct kb_mcp_session kb_mcp_session;

kb_rc kb_mcp_session_open(kb_mcp_session **out, kb_err *err);
void kb_mcp_session_free(kb_mcp_session *s);
/* The handshake version negotiated ("2025-11-25"), or NULL before
 * `initialize` and in a 2026-07-28 session. */
const char *kb_mcp_session_version(kb_mcp_session *s);

/* The request's MCP headers on Streamable HTTP, each NULL where absent;
 * stdio passes no transport (NULL) at all.
 *   2026-07-28: MCP-Protocol-Version must equal the body's _meta version
 *   and Mcp-Method its method (and Mcp-Name a tools/call's name, plain
 *   or in its =?base64?...?= form); otherwise -32020, HTTP 400.
 *   handshake era: an MCP-Protocol-Version given after `initialize` must
 *   be the session's version; otherwise -32600, HTTP 400. */
typedef struct {
    const char *protocol_version;   /* MCP-Protocol-Version */
    const char *method;             /* Mcp-Method */
    const char *name;               /* Mcp-Name */
    const char *session_id;         /* Mcp-Session-Id, for the log only */
} kb_mcp_transport;

/* What to send back. */
typedef struct {
    char *text;          /* the reply: one JSON object on one line, no
                            newline; NULL when none is due (a
                            notification, a client's response). The caller
                            frees it. */
    int http_status;     /* what Streamable HTTP answers with it: 200 with
                            a reply, 202 without one; 400 for a parse
                            error, an invalid request and, in 2026-07-28,
                            -32602, -32020 and -32022; 404 for -32601 in
                            2026-07-28 */
    int initialized;     /* this message was an `initialize` that
                            succeeded: a Streamable HTTP server issues its
                            Mcp-Session-Id with this reply */
} kb_mcp_reply;

/* Handles one message (msg, len bytes, no newline needed: a JSON-RPC
 * request or notification; a batch array is refused) on session s,
 * running tools with ctx (its store and embedder this thread's; a
 * budget_tokens of 0 is KB_TOOL_BUDGET_DEFAULT: an agent's context always
 * has one), and overwrites *reply. Returns KB_OK whenever it answered,
 * JSON-RPC errors and failed tool calls included; fails (KB_ERR_NOMEM,
 * err set) only when no reply could be made, reply->text then NULL. t:
 * the HTTP request's headers, NULL for stdio. A tool call runs on the
 * calling thread until it is done (verify: up to its timeout). */
kb_rc kb_mcp_handle(kb_mcp *server, kb_mcp_session *s, kb_tool_ctx *ctx,
                    const char *msg, size_t len, const kb_mcp_transport *t,
                    kb_mcp_reply *reply, kb_err *err);

/* The reply to a message too large to read (over KB_MCP_MESSAGE_MAX):
 * -32600 naming the limit, as kb_mcp_handle would answer it. Caller frees;
 * NULL out of memory. */
char *kb_mcp_oversized_reply(size_t len);

#endif /* KB_MCP_H */
