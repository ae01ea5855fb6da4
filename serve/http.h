/*
 * http.h - kb's HTTP server (libmicrohttpd) and its request router:
 * what `kb serve` (cli/cmd_serve.c) drives and what the handlers of
 * serve/ are written against.
 *
 * The server owns the transport: a thread pool, one worker (a read-only
 * store handle, hence one embedder in its slot: a kb_tool_ctx) per pool
 * thread, the bearer token (compared in constant time, never logged), the
 * Host and Origin checks (loopback only), the body cap (413), the idle
 * timeout for slow clients, the access log, the drain on shutdown.
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
#ifndef KB_SERVE_HTTP_H
#define KB_SERVE_HTTP_H

#include "kb/kb.h"

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
    unsigned max_connections;/* 0: 4096 */
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
 *   Sessions unused for an hour make room when the table (4096) is full.
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

#endif
