/*
 * serve.h - serve/'s one header: the transports. The MCP core (mcp.c),
 * transport-independent, first; then the HTTP server (http.c) with REST
 * (rest.c) and MCP's Streamable HTTP transport (mcp_http.c) on it.
 */
#ifndef KB_SERVE_H
#define KB_SERVE_H

#include "kb/kb.h"

#include <sys/types.h>

/* ------------------------------------------------------------------- mcp.c */
/* the MCP server's core: one JSON-RPC message in, the reply out,
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
 * -32020 (HTTP headers that disagree with the body), -32021 (a tasks/ method from
 * a client that did not declare the Tasks extension), -32022. An error
 * whose request id cannot be
 * read carries no id (the schemas of 2025-11-25 and 2026-07-28 allow that,
 * not a null one). A tool's own failure - an argument the tool's schema
 * refuses, no such chunk, no model - is a result with isError true and
 * the message that says what to do.
 *
 * Prompts (mcp_prompt.c): the generator's prompt for a task, write-kernel.
 *
 * Tasks (mcp_task.c): the Tasks extension, io.modelcontextprotocol/tasks,
 * in 2026-07-28, announced with verify: a verify call from a client that
 * declares the extension in its request's capabilities is queued (KB_QUEUE)
 * and answered at once with a task, polled with tasks/get.
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

/* A transport's way to ask the client something and wait for the answer
 * (kb mcp's stdio loop has one; Streamable HTTP none): writes request, a
 * JSON-RPC request whose id is the string id, to the client and waits at
 * most timeout_ms for the response with that id, *response (caller frees)
 * its whole text. What else the client sends meanwhile is the transport's
 * to serve afterwards. On a timeout it tells the client the request is
 * cancelled; a timeout, or a client gone, is KB_ERR_NET with why. */
typedef kb_rc (*kb_mcp_request_fn)(void *ctx, const char *id, const char *request,
                                   long timeout_ms, char **response, kb_err *err);
/* Lets s's tool calls ask its client (set before s serves anything): with
 * it, a handshake session whose client declared the sampling capability
 * lends search's llm stage the client's model (mcp_sampling.c). */
void kb_mcp_session_set_requester(kb_mcp_session *s, kb_mcp_request_fn fn, void *ctx);

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

/* ------------------------------------------------------------ mcp_check.c */

/* What cJSON lets through and JSON does not: bytes that are not UTF-8
 * (overlong forms, surrogates, code points past U+10FFFF) and raw control
 * characters, in a string or between tokens. NULL when s[0..n) is clean,
 * else what is wrong, *bad its offset. */
const char *kb_mcp_bad_text(const char *s, size_t n, size_t *bad);
/* 1 for a JSON-RPC id as MCP allows it: a string or an integer. */
int kb_mcp_valid_id(const cJSON *id);
/* An MCP header's value: its =?base64?...?= form decoded into buf (n
 * bytes; NULL when it does not fit or is not base64), else h itself. */
const char *kb_mcp_header_value(const char *h, char *buf, size_t n);

/* ---------------------------------------------------------- mcp_sampling.c */

/* MCP sampling as the llm stage's model: the stage's listwise request
 * (system prompt, user message, a reply cap) goes to the client as
 * sampling/createMessage (temperature 0, includeContext none, a
 * preference for intelligence), and the text of its reply comes back to
 * the stage's own strict parser. A JSON-RPC error (the user declined), a
 * reply without text, a timeout: an error the stage falls back on. */
/* What a session knows of its client for sampling. */
typedef struct {
    int sampling;               /* it declared the capability at initialize */
    char name[64];              /* its clientInfo.name */
    kb_mcp_request_fn request;  /* the transport's, to ask it; NULL: none */
    void *ctx;
} kb_mcp_client;

/* At initialize: what params (initialize's) say of the client, its name
 * and whether it declared sampling; logged with the version negotiated. */
void kb_mcp_client_hello(kb_mcp_client *c, const cJSON *params, const char *version);

/* One tool call's lent model. */
typedef struct {
    const kb_mcp_client *client;
    char name[96];   /* "sampling: CLIENT" */
    kb_llm_lent lent;
} kb_mcp_sampler;

/* The client's model as a lent one, sm (the caller's, alive while the
 * tool runs) holding it; NULL when the client declared no sampling or the
 * transport cannot ask it. */
const kb_llm_lent *kb_mcp_sampling_lend(kb_mcp_sampler *sm, const kb_mcp_client *c);
/* The sampling/createMessage request (one line, no newline; caller frees;
 * NULL out of memory) and the text of its response: KB_OK with *text
 * (caller frees) and model[0..size), else why in err. For the tests. */
char *kb_mcp_sampling_request(const char *id, const char *system, const char *user,
                              long max_tokens);
kb_rc kb_mcp_sampling_reply(const char *response, char **text, char *model, size_t size,
                            kb_err *err);

/* ------------------------------------------------------------ mcp_prompt.c */

/* MCP's prompts: kb's generator prompt for a kernel task as one prompt,
 * write-kernel, its arguments task (required), feedback, parent and
 * budget_tokens (strings, as prompt arguments are; "" is absent), which
 * an agent offers its user as a command. The server announces the
 * prompts capability in both eras. */
/* prompts/list's array (caller's; NULL out of memory). */
cJSON *kb_mcp_prompts_json(void);
/* prompts/get for params ({"name", "arguments"}) with ctx (its store,
 * config and budget): *result (caller's) the GetPromptResult's
 * description and messages (one user message: the prompt tool's system
 * text, then its user text), without the era's fields. Returns 0, or the
 * JSON-RPC error code with msg: -32602 for an unknown prompt, a missing
 * or unknown argument, a task that is not there, a budget out of range
 * or too small for the task; -32603 otherwise. */
int kb_mcp_prompt_get(kb_tool_ctx *ctx, const cJSON *params, cJSON **result,
                      char *msg, size_t size);

/* ------------------------------------------------------------ mcp_task.c */
/* The Tasks extension (2026-07-28's io.modelcontextprotocol/tasks), for
 * verify: where the client declares the extension in the request's
 * _meta capabilities and the server has a queue (KB_QUEUE: SQLite or
 * Redis, with workers: docs/verify.md), tools/call verify submits the
 * candidate and answers at once with a CreateTaskResult (resultType
 * "task"; taskId the job's id, the candidate's hash; status working;
 * ttlMs null, pollIntervalMs). tasks/get answers the task: working while
 * the job is queued or running, then completed with the CallToolResult a
 * synchronous call would have given (isError true for a job in the dead
 * letter). tasks/update (kb's tasks ask for no input) and tasks/cancel
 * (the job runs on: others may wait on it) are acknowledged. Errors:
 * -32021 for a tasks/ method from a client that did not declare the extension,
 * -32602 for an unknown task. Without a queue, a job already done, or a
 * client that did not declare the extension, verify answers as always.
 * createdAt and lastUpdatedAt are when this server first saw the task and
 * its status (it remembers the last 512). */
#define KB_MCP_TASKS_EXTENSION "io.modelcontextprotocol/tasks"
typedef struct kb_mcp_tasks kb_mcp_tasks;
/* NULL out of memory; freed with kb_mcp_tasks_free. Thread-safe. */
kb_mcp_tasks *kb_mcp_tasks_new(void);
void kb_mcp_tasks_free(kb_mcp_tasks *t);
/* 1 when params._meta's client capabilities declare the extension. */
int kb_mcp_tasks_declared(const cJSON *params);
/* tools/call verify with args as a task: 1 and *result the
 * CreateTaskResult (resultType set; the era's _meta not), 0 when the call
 * is to be answered the usual way, -1 out of memory. */
int kb_mcp_task_call(kb_mcp_tasks *t, kb_tool_ctx *ctx, const cJSON *args,
                     cJSON **result);
/* tasks/get, tasks/update or tasks/cancel: 0 and *result, or the JSON-RPC
 * error code with msg and *data (the caller's; NULL when none). */
int kb_mcp_task_method(kb_mcp_tasks *t, kb_tool_ctx *ctx, const char *method,
                       const cJSON *params, cJSON **result, char *msg, size_t size,
                       cJSON **data);
/* A CallToolResult (content, structuredContent, isError) of a tool's
 * answer out (taken), or of its failure error_text when out is NULL;
 * without the era's fields. NULL out of memory. */
cJSON *kb_mcp_call_result(cJSON *out, const char *error_text);

/* ------------------------------- http.c, origin.c, rest.c, mcp_http.c */
/* kb's HTTP server (libmicrohttpd) and its request router:
 * what `kb serve` (cli/cmd_serve.c) drives and what the handlers of
 * serve/ are written against.
 *
 * The server owns the transport: a thread pool, one worker (a read-only
 * store handle, hence one embedder in its slot: a kb_tool_ctx) per pool
 * thread, the bearer token (compared in constant time, never logged), the
 * Host and Origin checks (loopback only), the body cap (413), the idle
 * timeout and the deadline for a whole request (slow clients), the limits
 * on connections (in all and per address), the access log, the drain on
 * shutdown.
 * Handlers see a request whose body is complete and whose checks passed,
 * and fill a reply; they never touch libmicrohttpd.
 *
 * Routes: a handler is one row of a kb_serve_route table (path, methods,
 * flags, handler, arg). A server serves the tables it is given in order,
 * first match wins: REST's (serve/rest.c, kb_rest_routes) and, next, the
 * MCP Streamable HTTP transport's one row for "/mcp" (POST, GET, DELETE;
 * its session table as arg), written the same way and added to
 * kb_serve_opts.tables by cmd_serve.c. An unknown path is 404, a known
 * path with another method 405 with Allow.
 */


/* ------------------------------------------------------------ requests */

typedef struct kb_serve_req kb_serve_req;     /* one request, read-only */
typedef struct kb_serve_reply kb_serve_reply; /* what goes back */
typedef struct kb_serve_route kb_serve_route;

/* Methods, as a route's set. HEAD is served wherever GET is. */
enum {
    KB_HTTP_M_GET = 1u << 0,
    KB_HTTP_M_HEAD = 1u << 1,
    KB_HTTP_M_POST = 1u << 2,
    KB_HTTP_M_PUT = 1u << 3,
    KB_HTTP_M_DELETE = 1u << 4,
    KB_HTTP_M_PATCH = 1u << 5,
    KB_HTTP_M_OPTIONS = 1u << 6
};

/* Route flags. */
enum {
    KB_ROUTE_PREFIX = 1u << 0,   /* path matches every path under it:
                                    "/v1/chunks/" matches "/v1/chunks/12" */
    KB_ROUTE_OPEN = 1u << 1      /* served without the token (/healthz) */
};

/* A handler: reads req, fills reply (status, body, headers) and returns.
 * It runs on a pool thread; kb_serve_req_tools is that thread's own
 * context, so no locking is needed for the store or the embedder. A
 * handler that sets no reply answers 500. */
typedef void (*kb_serve_fn)(const kb_serve_req *req, kb_serve_reply *reply,
                            const kb_serve_route *route);

struct kb_serve_route {
    const char *path;        /* "/v1/search"; with KB_ROUTE_PREFIX a prefix */
    unsigned methods;        /* KB_HTTP_M_* */
    unsigned flags;          /* KB_ROUTE_* */
    kb_serve_fn fn;
    void *arg;               /* the handler's own data: REST's endpoint, the
                                MCP transport's session table */
};

/* The method ("GET"), the path without its query string, both as sent. */
const char *kb_serve_req_method(const kb_serve_req *req);
const char *kb_serve_req_path(const kb_serve_req *req);
/* A header's value (name case-insensitive), or NULL. */
const char *kb_serve_req_header(const kb_serve_req *req, const char *name);
/* The query string's arguments, decoded, in order: fn is called with
 * each name and value (value NULL for "?flag" without '='); a fn that
 * returns other than KB_OK stops the walk and that is the result. */
typedef kb_rc (*kb_serve_arg_fn)(const char *name, const char *value,
                                 void *ctx);
kb_rc kb_serve_req_args(const kb_serve_req *req, kb_serve_arg_fn fn, void *ctx);
/* The whole body (NUL-terminated; "" when there is none) and its length.
 * Never longer than the server's cap: a longer one was answered 413. */
const char *kb_serve_req_body(const kb_serve_req *req, size_t *len);
/* The client's address ("127.0.0.1", "::1"; "" unknown). */
const char *kb_serve_req_peer(const kb_serve_req *req);
/* This worker's tool context: its store, its embedder, the config. */
kb_tool_ctx *kb_serve_req_tools(const kb_serve_req *req);
/* 1 when the server asks for a token (the OpenAPI document says so). */
int kb_serve_req_token_required(const kb_serve_req *req);

/* ------------------------------------------------------------ replies */

/* The reply's status and body: body becomes the reply's (taken and freed,
 * even on failure; NULL stands for out of memory, answered 500). */
void kb_serve_reply_json(kb_serve_reply *reply, int status, cJSON *body);
/* {"error": {"code": CODE, "message": MESSAGE}} with status; code is a
 * short snake_case word ("not_found"), the message git-style. */
void kb_serve_reply_error(kb_serve_reply *reply, int status, const char *code,
                          const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The error reply for a failed call (kb_err): its status from the code
 * (KB_ERR_USAGE and KB_ERR_PARSE 400, KB_ERR_NOTFOUND 404, the rest 500). */
void kb_serve_reply_kb_error(kb_serve_reply *reply, const kb_err *err);
/* Raw bytes with a content type (copied). */
void kb_serve_reply_bytes(kb_serve_reply *reply, int status,
                          const char *content_type, const void *data,
                          size_t len);
/* Adds a header to the reply ("Mcp-Session-Id", ...): name and value are
 * copied; at most 16 per reply. KB_ERR_NOMEM, or KB_ERR_USAGE for a name
 * or value holding CR, LF or NUL, or one too many. */
kb_rc kb_serve_reply_header(kb_serve_reply *reply, const char *name,
                            const char *value) KB_MUST_CHECK;

/* 1 if s[0..len) is valid UTF-8 (what JSON and headers must carry). */
int kb_serve_utf8_valid(const char *s, size_t len);

/* ------------------------------------------------------------ origin.c */
/* Where a request may come from: http.c's Host and Origin checks, and
 * CORS for the pages it admits. */

/* 1 for a loopback host, with or without its port: localhost (and names
 * under it), 127.0.0.0/8, ::1 in brackets. */
int kb_serve_loopback_host(const char *host, size_t len);
/* 1 for an Origin of a page served from this machine: http or https and
 * a loopback host ("null" and every other origin: 0). */
int kb_serve_loopback_origin(const char *origin);
/* One header of a reply. */
typedef struct {
    const char *name, *value;
} kb_serve_header;

#define KB_SERVE_CORS_MAX 6

/* The CORS headers for a page of origin (admitted: loopback), into out;
 * returns how many. allow NULL: those of an ordinary reply, which let the
 * page read it (Access-Control-Allow-Origin, that origin; Vary: Origin;
 * Access-Control-Expose-Headers: Mcp-Session-Id, WWW-Authenticate,
 * Allow). allow the path's methods ("GET, HEAD, POST"): those of a
 * preflight's answer: the methods, the MCP transport's headers and the
 * token's header allowed, cached 10 minutes. A browser sends no
 * credentials with a preflight, so http.c answers it (204) without the
 * token. The values are origin, allow or static. */
size_t kb_serve_cors_headers(const char *origin, const char *allow,
                            kb_serve_header out[KB_SERVE_CORS_MAX]);

/* ------------------------------------------------------------ guard.c */
/* Deadlines for reading a request, which libmicrohttpd lacks (its timeout
 * is an idle timer that every byte resets: a client trickling a header
 * byte every two seconds would hold its connection for ever). http.c
 * arms a connection's deadline when it opens (the headers), again when
 * the headers are in (the body), clears it while a handler runs and arms
 * it after each reply (the next request on a kept-alive connection); a
 * thread of the guard's shuts down the sockets past theirs, every 200 ms,
 * and libmicrohttpd closes them as connections the client ended. Only the
 * time the connection's pool thread was free to read it counts: while a
 * handler runs, that thread reads none of its other connections, and a
 * loaded server must not cut off clients for its own slowness. */
typedef struct kb_serve_guard kb_serve_guard;
typedef struct kb_serve_guard_conn kb_serve_guard_conn;

/* Starts the guard's thread. *out is stopped and freed by
 * kb_serve_guard_stop, after the HTTP daemon is (no connection left). */
/* For a pool of nthreads threads, numbered from 0. */
kb_rc kb_serve_guard_start(size_t nthreads, kb_serve_guard **out, kb_err *err);
void kb_serve_guard_stop(kb_serve_guard *g);
/* A new connection on socket fd, read by pool thread owner (one out of
 * range: its busy time is not known), due after in_ms of that thread's
 * free time (<= 0: no deadline); NULL out of memory (the connection then
 * goes unguarded). */
kb_serve_guard_conn *kb_serve_guard_add(kb_serve_guard *g, int fd, size_t owner,
                                        double in_ms);
/* Pool thread thread begins (busy 1) or ends (0) running a handler. */
void kb_serve_guard_busy(kb_serve_guard *g, size_t thread, int busy);
/* c's deadline, in_ms of its thread's free time from now (<= 0: none). c
 * NULL: nothing. */
void kb_serve_guard_set(kb_serve_guard *g, kb_serve_guard_conn *c, double in_ms);
/* c is closing: forgotten and freed, before its socket is closed. */
void kb_serve_guard_remove(kb_serve_guard *g, kb_serve_guard_conn *c);
/* How many connections the guard has cut off. */
size_t kb_serve_guard_cut(kb_serve_guard *g);

/* ------------------------------------------------------------ host.c */
/* Who else uses this machine: a server on a loopback address without a
 * token answers every local user, whatever the KB folder's mode says. */
typedef struct {
    size_t accounts;      /* other people's accounts that can log in */
    size_t running;       /* other people with processes running now */
    char example[33];     /* one of them, by name (or "uid N") */
} kb_serve_host_users;

/* Counts the other people of this host, beside self: the accounts of the
 * passwd database (passwd NULL: the system's, through NSS; else a file in
 * passwd(5) format) whose uid is at least UID_MIN of login_defs (NULL:
 * /etc/login.defs; 1000 without it), is not nobody's (65534) and whose
 * shell is no nologin or false - counted only where a login service runs
 * under proc (sshd, systemd-logind, a getty, a display manager) or proc
 * cannot tell (no process 1 in it), since a container's image accounts
 * are no one's; and the distinct such uids of the processes under proc
 * (NULL: /proc), which also finds users that the passwd database does not
 * list. Fails only when passwd cannot be read. */
kb_rc kb_serve_host_users_find(const char *passwd, const char *proc,
                               const char *login_defs, uid_t self,
                               kb_serve_host_users *out, kb_err *err);

/* ------------------------------------------------------------ server */

typedef struct kb_server kb_server;

#define KB_SERVE_MAX_TABLES 8

/* One route table: n rows. */
typedef struct {
    const kb_serve_route *routes;
    size_t n;
} kb_serve_table;

typedef struct {
    const char *address;     /* numeric IPv4 or IPv6; NULL: 127.0.0.1 */
    int port;                /* 0: the kernel picks (kb_serve_port) */
    int threads;             /* pool threads = workers; 0: online CPUs */
    size_t max_body;         /* request body cap in bytes; 0: 1 MiB */
    unsigned timeout_s;      /* idle connection timeout; 0: 30 s */
    unsigned header_timeout_s;  /* a request's headers must be in within
                                   this long of its connection opening (or
                                   of the last reply plus timeout_s), and
                                   its body within as long again; 0: 10 s */
    unsigned max_connections;/* 0: 4096 */
    unsigned max_per_ip;     /* connections from one address; 0: a quarter
                                of max_connections (at least 1) */
    const char *token;       /* bearer token; NULL or "": none (copied, the
                                server keeps only its digest) */
    int access_log;          /* 1: one line per request on stderr */
    const char *kb_dir;      /* the KB every worker opens read-only */
    const kb_config *config; /* the embedder the workers open */
    /* called with each worker's store once it is open, before any request
     * (NULL: none): what the handlers' tools need parked in its slots, the
     * skill library (cmd_serve.c: kb_mcp_attach) */
    kb_rc (*worker_init)(kb_store *store, void *arg, kb_err *err);
    void *worker_arg;
    kb_result_cache *results;   /* the workers' shared cache of answers
                                   (NULL: none); kept, not owned */
    /* the route tables served, searched in order (first match wins);
     * kept, not copied: REST's (kb_rest_routes), then the MCP
     * transport's */
    kb_serve_table tables[KB_SERVE_MAX_TABLES];
    size_t ntables;
} kb_serve_opts;

void kb_serve_opts_init(kb_serve_opts *o);

/* Adds a route table to o (KB_ERR_USAGE when o holds
 * KB_SERVE_MAX_TABLES already). */
kb_rc kb_serve_opts_add(kb_serve_opts *o, const kb_serve_route *routes,
                        size_t n) KB_MUST_CHECK;

/* Opens one store per worker (a KB that is not there fails here, with
 * kb_store_open's message), binds and starts serving. *out is freed by
 * kb_serve_stop. A busy port is KB_ERR_IO naming the address. */
kb_rc kb_serve_start(const kb_serve_opts *o, kb_server **out, kb_err *err);
/* The port bound (the kernel's pick for port 0). */
int kb_serve_port(const kb_server *s);
/* "http://127.0.0.1:8377" ("http://[::1]:8377"): the server's URL. */
const char *kb_serve_url(const kb_server *s);
/* Stops accepting connections and waits up to timeout_ms for the
 * requests in flight to finish (replies made meanwhile close their
 * connection). Returns how many were still in flight at the deadline. */
size_t kb_serve_drain(kb_server *s, long timeout_ms);
/* Stops the server (closing every connection), closes the workers'
 * stores and frees s. s may be NULL. */
void kb_serve_stop(kb_server *s);

/* ------------------------------------------------------------ REST */

/* serve/rest.c: the tool table over HTTP - POST /v1/search, GET
 * /v1/chunks/{id}, /v1/papers, /v1/status, GET /v1/task and POST /v1/prompt
 * (api/'s task and prompt tools) - and GET /healthz and GET
 * /openapi.json (OpenAPI 3.1, its schemas the tools' own). Static; *n
 * its length. */
const kb_serve_route *kb_rest_routes(size_t *n);

/* ------------------------------------------------------------ MCP */

/* serve/mcp_http.c: MCP's Streamable HTTP transport, one route, "/mcp",
 * over serve/mcp.c's core (kb_mcp_handle):
 *   POST: one JSON-RPC message (Content-Type application/json, 415
 *     otherwise; Accept listing application/json and text/event-stream,
 *     406 otherwise); the reply is JSON, 202 with no body for a
 *     notification or a client's response.
 *   the handshake era (2025-11-25, 2025-06-18): a successful initialize
 *     gets a new Mcp-Session-Id (128 random bits) with its reply; every
 *     later request names it (400 without one: not initialized, 404 for
 *     one that is unknown or ended); an MCP-Protocol-Version header must
 *     be the session's (400); DELETE with the header ends the session
 *     (204); GET is 405 (kb offers no server-sent stream).
 *   2026-07-28 (MCP-Protocol-Version: 2026-07-28): no sessions; POST only
 *     (405 for the rest); the headers must match the body (400, -32020).
 *   Sessions are never refused for room while one is idle (no request
 *   running on it): an address holding 1024 sessions gives up its least
 *   recently used one for a new one, and a full table (4096) its least
 *   recently used of all; a client sent 404 for an evicted session
 *   initializes again, as the protocol says.
 * Origin, Host and the token are http.c's checks, as for every route. */
typedef struct kb_mcp kb_mcp;
typedef struct kb_mcp_http kb_mcp_http;

/* The transport over server (kept, not owned). *out is freed with
 * kb_mcp_http_free, after the HTTP server is stopped. */
kb_rc kb_mcp_http_open(kb_mcp *server, kb_mcp_http **out, kb_err *err);
void kb_mcp_http_free(kb_mcp_http *t);
/* Its route table (one row: "/mcp"), for kb_serve_opts_add; valid while t
 * is. */
const kb_serve_route *kb_mcp_http_routes(kb_mcp_http *t, size_t *n);
/* How many sessions are open now. */
size_t kb_mcp_http_sessions(kb_mcp_http *t);

#endif /* KB_SERVE_H */
