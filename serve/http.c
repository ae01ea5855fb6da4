/* http.c - the HTTP server on libmicrohttpd (serve/serve.h): the listening
 * socket, the thread pool and its workers, the checks every request
 * passes (Host and Origin, the token, the route, the method, the body
 * cap), the replies, the access log and the drain. */
#include "serve/serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

#define DEFAULT_MAX_BODY (1u << 20)
#define DEFAULT_TIMEOUT_S 30u
#define DEFAULT_HEADER_TIMEOUT_S 10u
#define DEFAULT_MAX_CONNECTIONS 4096u
#define MAX_WORKERS 64
#define MAX_REPLY_HEADERS 16
/* a chunked body past its cap is read and dropped (so that the 413
 * reaches the client) up to this many times the cap, then the connection
 * is closed */
#define DISCARD_FACTOR 16

/* ------------------------------------------------------------ types */

/* One pool thread's state: its own store handle, whose named slots keep
 * its own FAISS index and embedder. */
typedef struct {
    kb_store *store;
    kb_tool_ctx ctx;
} worker;

struct kb_server {
    struct MHD_Daemon *daemon;
    int listen_fd;                 /* ours until MHD takes it; -1 after */
    worker *workers;
    size_t nworkers;
    atomic_size_t next_worker;     /* the next worker a new thread takes */
    atomic_long inflight;          /* requests begun and not completed */
    atomic_int draining;
    char token_hex[65];            /* SHA-256 of the token; "" for none */
    int loopback;                  /* bound to a loopback address */
    size_t max_body;
    int access_log;
    kb_serve_guard *guard;         /* the deadlines of reading requests */
    double header_ms, idle_ms;     /* the deadline, the idle timeout */
    kb_serve_table tables[KB_SERVE_MAX_TABLES];   /* what it serves */
    size_t ntables;
    int port;
    char url[96];
};

struct kb_serve_reply {
    int status;                    /* 0: not set */
    char *content_type;
    char *data;                    /* malloc'd, len bytes */
    size_t len;
    char *hname[MAX_REPLY_HEADERS], *hvalue[MAX_REPLY_HEADERS];
    size_t nheaders;
};

struct kb_serve_req {
    kb_server *srv;
    struct MHD_Connection *conn;
    worker *w;
    char *method;
    char *path;
    unsigned method_bit;
    const kb_serve_route *route;
    kb_buf body;
    int too_big;                   /* the body passed the cap */
    size_t dropped;                /* bytes read past the cap */
    int answered;                  /* a reply is queued */
    int gone;                      /* the client hung up before it */
    double t0;
    int status;                    /* for the log */
    size_t bytes;
    int http11;                    /* HTTP/1.1 (Host is required) */
    kb_serve_guard_conn *guarded;  /* its connection's deadline */
    char peer[INET6_ADDRSTRLEN];
};

/* Which worker this pool thread uses: taken on its first request. */
static _Thread_local struct {
    const kb_server *srv;
    worker *w;
} tls;

/* ------------------------------------------------------------ replies */

static void reply_release(kb_serve_reply *r)
{
    free(r->content_type);
    free(r->data);
    for (size_t i = 0; i < r->nheaders; i++) {
        free(r->hname[i]);
        free(r->hvalue[i]);
    }
    memset(r, 0, sizeof *r);
}

/* Sets status, type and body (data taken: malloc'd or NULL), replacing
 * what was set; a failed copy of the type is a bare 500. */
static void reply_set(kb_serve_reply *r, int status, const char *type,
                      char *data, size_t len)
{
    free(r->content_type);
    free(r->data);
    r->content_type = kb_strdup(type);
    r->data = data;
    r->len = len;
    r->status = status;
    if (!r->content_type) {
        free(r->data);
        r->data = NULL;
        r->len = 0;
        r->status = 500;
    }
}

void kb_serve_reply_json(kb_serve_reply *reply, int status, cJSON *body)
{
    char *s = body ? cJSON_PrintUnformatted(body) : NULL;
    cJSON_Delete(body);
    size_t n = s ? strlen(s) : 0;
    char *line = s ? realloc(s, n + 2) : NULL;
    if (!line) {
        free(s);
        reply_set(reply, 500, "text/plain", NULL, 0);
        return;
    }
    line[n] = '\n';   /* a line, for a terminal's sake */
    line[n + 1] = '\0';
    reply_set(reply, status, "application/json", line, n + 1);
}

/* Length of the valid UTF-8 sequence at s (of n bytes left), 0 if none. */
static size_t utf8_step(const char *s, size_t n)
{
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s,
                                          (utf8proc_ssize_t)n, &c);
    return k > 0 ? (size_t)k : 0;
}

int kb_serve_utf8_valid(const char *s, size_t len)
{
    for (size_t k; len; s += k, len -= k)
        if (!(k = utf8_step(s, len)))
            return 0;
    return 1;
}

/* s with each byte that is not valid UTF-8 as U+FFFD: a message may quote
 * a path's raw bytes or be cut inside a character (%.64s). */
static kb_rc utf8_clean(const char *s, kb_buf *out)
{
    kb_rc rc = KB_OK;
    for (size_t n = strlen(s), k; n && rc == KB_OK; s += k, n -= k) {
        k = utf8_step(s, n);
        rc = k ? kb_buf_append(out, s, k) : kb_buf_puts(out, "\xef\xbf\xbd");
        k += !k;
    }
    return rc;
}

static void reply_verror(kb_serve_reply *reply, int status, const char *code,
                         const char *fmt, va_list ap)
{
    char msg[1200];
    vsnprintf(msg, sizeof msg, fmt, ap);
    kb_buf clean;
    kb_buf_init(&clean, 4 * sizeof msg);
    cJSON *root = NULL;
    if (utf8_clean(msg, &clean) == KB_OK)
        root = cJSON_CreateObject();
    cJSON *e = root ? cJSON_AddObjectToObject(root, "error") : NULL;
    int ok = e && cJSON_AddStringToObject(e, "code", code) &&
             cJSON_AddStringToObject(e, "message", clean.data ? clean.data : "");
    kb_buf_release(&clean);
    if (!ok) {
        cJSON_Delete(root);
        root = NULL;
    }
    kb_serve_reply_json(reply, status, root);
}

void kb_serve_reply_error(kb_serve_reply *reply, int status, const char *code,
                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_verror(reply, status, code, fmt, ap);
    va_end(ap);
}

void kb_serve_reply_kb_error(kb_serve_reply *reply, const kb_err *err)
{
    int status = 500;
    const char *code = "internal";
    switch (err->rc) {
    case KB_ERR_USAGE:
        status = 400, code = "bad_arguments";
        break;
    case KB_ERR_PARSE:
        status = 400, code = "bad_request";
        break;
    case KB_ERR_NOTFOUND:
        status = 404, code = "not_found";
        break;
    case KB_ERR_NOMEM:
        code = "out_of_memory";
        break;
    default:
        code = kb_rc_name(err->rc);
        break;
    }
    kb_serve_reply_error(reply, status, code, "%s",
                         err->msg[0] ? err->msg : kb_rc_name(err->rc));
}

void kb_serve_reply_bytes(kb_serve_reply *reply, int status,
                          const char *content_type, const void *data,
                          size_t len)
{
    char *copy = malloc(len ? len : 1);
    if (!copy) {
        reply_set(reply, 500, "text/plain", NULL, 0);
        return;
    }
    if (len)
        memcpy(copy, data, len);
    reply_set(reply, status, content_type, copy, len);
}

static int header_safe(const char *s)
{
    return s && !strpbrk(s, "\r\n");
}

kb_rc kb_serve_reply_header(kb_serve_reply *reply, const char *name,
                            const char *value)
{
    if (!header_safe(name) || !*name || strchr(name, ':') || !header_safe(value) ||
        reply->nheaders == MAX_REPLY_HEADERS)
        return KB_ERR_USAGE;
    char *n = kb_strdup(name), *v = kb_strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        return KB_ERR_NOMEM;
    }
    reply->hname[reply->nheaders] = n;
    reply->hvalue[reply->nheaders++] = v;
    return KB_OK;
}

/* ------------------------------------------------------------ requests */

const char *kb_serve_req_method(const kb_serve_req *req) { return req->method; }
const char *kb_serve_req_path(const kb_serve_req *req) { return req->path; }
kb_tool_ctx *kb_serve_req_tools(const kb_serve_req *req) { return &req->w->ctx; }
const char *kb_serve_req_peer(const kb_serve_req *req) { return req->peer; }

int kb_serve_req_token_required(const kb_serve_req *req)
{
    return req->srv->token_hex[0] != '\0';
}

const char *kb_serve_req_header(const kb_serve_req *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *kb_serve_req_body(const kb_serve_req *req, size_t *len)
{
    *len = req->body.len;
    return req->body.data ? req->body.data : "";
}

typedef struct {
    kb_serve_arg_fn fn;
    void *ctx;
    kb_rc rc;
} arg_walk;

static enum MHD_Result arg_step(void *cls, enum MHD_ValueKind kind,
                                const char *key, const char *value)
{
    arg_walk *a = cls;
    a->rc = a->fn(key, value, a->ctx);
    return a->rc == KB_OK ? MHD_YES : MHD_NO;
}

kb_rc kb_serve_req_args(const kb_serve_req *req, kb_serve_arg_fn fn, void *ctx)
{
    arg_walk a = { fn, ctx, KB_OK };
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, arg_step, &a);
    return a.rc;
}

/* ------------------------------------------------------------ checks */

static unsigned method_bit(const char *m)
{
    static const char *const names[] = { "GET", "HEAD", "POST", "PUT",
                                         "DELETE", "PATCH", "OPTIONS" };
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(m, names[i]) == 0)
            return 1u << i;
    return 0;
}

/* "GET, HEAD, POST" for a set of methods. */
static void allow_list(unsigned methods, char *out, size_t size)
{
    static const char *const names[] = { "GET", "HEAD", "POST", "PUT",
                                         "DELETE", "PATCH", "OPTIONS" };
    if (methods & KB_HTTP_M_GET)
        methods |= KB_HTTP_M_HEAD;
    size_t n = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (methods & (1u << i) && n < size)
            n += (size_t)snprintf(out + n, size - n, "%s%s", n ? ", " : "", names[i]);
}

/* The token check: "Authorization: Bearer TOKEN", the digests compared in
 * constant time (the token's length is not given away either). 1 if it
 * passes. */
static int token_ok(const kb_server *srv, const char *auth)
{
    if (!srv->token_hex[0])
        return 1;
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return 0;
    const char *t = auth + 7;
    while (*t == ' ')
        t++;
    char hex[65];
    kb_sha256_hex(t, strlen(t), hex);
    return CRYPTO_memcmp(hex, srv->token_hex, 64) == 0;
}

/* ------------------------------------------------------------ the log */

/* Appends s to b with control bytes and non-ASCII as \xNN (a path in the
 * log can neither forge a line nor break a terminal), cut at max. */
static kb_rc put_escaped(kb_buf *b, const char *s, size_t max)
{
    kb_rc rc = KB_OK;
    size_t i = 0;
    for (; s[i] && i < max && rc == KB_OK; i++) {
        unsigned char c = (unsigned char)s[i];
        rc = c < 0x21 || c >= 0x7f || c == '\\' ? kb_buf_printf(b, "\\x%02x", c)
                                                 : kb_buf_putc(b, (char)c);
    }
    if (rc == KB_OK && s[i])
        rc = kb_buf_puts(b, "...");
    return rc;
}

static const char *ended_why(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK: return NULL;
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: return "timed out";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: return "server shut down";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
    case MHD_REQUEST_TERMINATED_READ_ERROR: return "client went away";
    default: return "connection error";
    }
}

/* One line per request on stderr: time, peer, method, path, status,
 * bytes, milliseconds (and why, when it did not complete). Never a header:
 * the token stays out. */
static void access_log(const kb_serve_req *r, enum MHD_RequestTerminationCode toe)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    kb_buf line;
    kb_buf_init(&line, 2048);
    kb_rc rc = kb_buf_printf(&line, "%s.%03ldZ %s ", when, ts.tv_nsec / 1000000,
                             r->peer[0] ? r->peer : "-");
    if (rc == KB_OK)
        rc = put_escaped(&line, r->method, 16);
    if (rc == KB_OK)
        rc = kb_buf_putc(&line, ' ');
    if (rc == KB_OK)
        rc = put_escaped(&line, r->path, 256);
    const char *why = r->gone ? "client went away" : ended_why(toe);
    if (rc == KB_OK && r->status)
        rc = kb_buf_printf(&line, " %d", r->status);
    else if (rc == KB_OK)
        rc = kb_buf_puts(&line, " -");
    if (rc == KB_OK)
        rc = kb_buf_printf(&line, " %zu %.1fms%s%s%s\n", r->bytes,
                           kb_now_ms() - r->t0, why ? " (" : "", why ? why : "",
                           why ? ")" : "");
    if (rc == KB_OK) {
        flockfile(stderr);   /* one line, never interleaved */
        fputs(line.data, stderr);
        funlockfile(stderr);
    }
    kb_buf_release(&line);
}

/* ------------------------------------------------------------ dispatch */

static enum MHD_Result send_reply(kb_serve_req *r, kb_serve_reply *rep)
{
    if (!rep->status)
        reply_set(rep, 500, "text/plain", NULL, 0);
    if (rep->status == 500 && !rep->data)
        kb_serve_reply_error(rep, 500, "internal", "the server could not make "
                             "a reply (out of memory?)");
    /* a page of a loopback origin may read what it is answered (another
     * origin was refused, and is told nothing more) */
    const char *origin = kb_serve_req_header(r, "Origin");
    kb_serve_header cors[KB_SERVE_CORS_MAX];
    size_t ncors = origin && kb_serve_loopback_origin(origin) &&
                   r->method_bit != KB_HTTP_M_OPTIONS
                   ? kb_serve_cors_headers(origin, NULL, cors) : 0;
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        rep->len, rep->data, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        reply_release(rep);
        return MHD_NO;
    }
    rep->data = NULL;   /* MHD frees it now */
    int ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                     rep->content_type) == MHD_YES;
    for (size_t i = 0; ok && i < rep->nheaders; i++)
        ok = MHD_add_response_header(resp, rep->hname[i], rep->hvalue[i]) == MHD_YES;
    for (size_t i = 0; ok && i < ncors; i++)
        ok = MHD_add_response_header(resp, cors[i].name, cors[i].value) == MHD_YES;
    if (ok && atomic_load(&r->srv->draining))
        ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close") == MHD_YES;
    enum MHD_Result res = MHD_NO;
    if (ok)
        res = MHD_queue_response(r->conn, (unsigned)rep->status, resp);
    MHD_destroy_response(resp);
    if (res == MHD_YES) {
        r->status = rep->status;
        r->bytes = rep->len;
        r->answered = 1;
    }
    reply_release(rep);
    return res;
}

/* Queues an error reply, with one extra header when hname is not NULL. */
static enum MHD_Result send_error(kb_serve_req *r, int status, const char *code,
                                  const char *hname, const char *hvalue,
                                  const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static enum MHD_Result send_error(kb_serve_req *r, int status, const char *code,
                                  const char *hname, const char *hvalue,
                                  const char *fmt, ...)
{
    kb_serve_reply rep = { 0 };
    va_list ap;
    va_start(ap, fmt);
    reply_verror(&rep, status, code, fmt, ap);
    va_end(ap);
    if (hname && kb_serve_reply_header(&rep, hname, hvalue) != KB_OK)
        reply_set(&rep, 500, "text/plain", NULL, 0);
    return send_reply(r, &rep);
}

static int path_matches(const kb_serve_route *rt, const char *path)
{
    if (rt->flags & KB_ROUTE_PREFIX)
        return strncmp(path, rt->path, strlen(rt->path)) == 0;
    return strcmp(path, rt->path) == 0;
}

/* The route for the request, or NULL; *allowed gets the methods of the
 * routes whose path matched. */
static const kb_serve_route *find_route(const kb_server *srv, const char *path,
                                        unsigned method, unsigned *allowed)
{
    *allowed = 0;
    for (size_t t = 0; t < srv->ntables; t++) {
        const kb_serve_table *tab = &srv->tables[t];
        for (size_t i = 0; i < tab->n; i++) {
            const kb_serve_route *rt = &tab->routes[i];
            if (!path_matches(rt, path))
                continue;
            unsigned m = rt->methods | (rt->methods & KB_HTTP_M_GET ? KB_HTTP_M_HEAD : 0);
            *allowed |= m;
            if (m & method)
                return rt;
        }
    }
    return NULL;
}

/* Set by unescape() on a request whose path or a parameter held "%00":
 * libmicrohttpd would cut the string there ("/v1/chunks/815%00x" read as
 * "/v1/chunks/815"), so the request is refused instead. */
#define NUL_MARK "X-Kb-Escaped-Nul"

/* MHD_OPTION_UNESCAPE_CALLBACK: libmicrohttpd's own unescaping, with the
 * request marked when it decodes a NUL. Returns the new length. */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    size_t n = MHD_http_unescape(s);
    if (strlen(s) != n)
        MHD_set_connection_value(conn, MHD_HEADER_KIND, NUL_MARK, "1");
    return n;
}

typedef struct {
    const char *first;
    int conflict;
} length_walk;

static enum MHD_Result length_step(void *cls, enum MHD_ValueKind kind,
                                   const char *key, const char *value)
{
    length_walk *w = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0)
        return MHD_YES;
    if (!w->first)
        w->first = value ? value : "";
    else if (strcmp(w->first, value ? value : "") != 0)
        w->conflict = 1;
    return MHD_YES;
}

/* What makes r malformed (RFC 9112), or NULL: a NUL byte escaped into
 * its path or a parameter, Content-Length headers that disagree (which
 * one the body is read by is then a guess), HTTP/1.1 without Host. */
static const char *malformed(const kb_serve_req *r)
{
    if (kb_serve_req_header(r, NUL_MARK))
        return "a NUL byte (%00) in the path or a parameter";
    length_walk w = { NULL, 0 };
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, length_step, &w);
    if (w.conflict)
        return "Content-Length headers that disagree";
    if (r->http11 && !kb_serve_req_header(r, MHD_HTTP_HEADER_HOST))
        return "an HTTP/1.1 request without a Host header";
    return NULL;
}

/* The checks made on the headers alone, in this order: Host and Origin
 * (403), the token (401: every path but an open route's), the path (404),
 * the method (405), the declared length (413). Returns 1 when the request
 * may go on (its route set), else 0 with the error queued in *res. */
static int admit(kb_serve_req *r, enum MHD_Result *res)
{
    const kb_server *srv = r->srv;
    const char *bad = malformed(r);
    if (bad) {
        *res = send_error(r, 400, "bad_request", NULL, NULL, "%s", bad);
        return 0;
    }
    const char *host = kb_serve_req_header(r, MHD_HTTP_HEADER_HOST);
    const char *origin = kb_serve_req_header(r, "Origin");
    if (srv->loopback && host && !kb_serve_loopback_host(host, strlen(host))) {
        /* a name that resolves here through DNS rebinding */
        *res = send_error(r, 403, "forbidden_host", NULL, NULL, "host '%.200s' "
                          "is not this loopback server", host);
        return 0;
    }
    if (origin && !kb_serve_loopback_origin(origin)) {
        *res = send_error(r, 403, "forbidden_origin", NULL, NULL, "origin "
                          "'%.200s' is not loopback", origin);
        return 0;
    }
    unsigned allowed;
    r->route = find_route(srv, r->path, r->method_bit, &allowed);
    if (!r->route && allowed && r->method_bit == KB_HTTP_M_OPTIONS) {
        /* a browser's CORS preflight (no credentials) or a plain OPTIONS */
        char allow[96];
        allow_list(allowed | KB_HTTP_M_OPTIONS, allow, sizeof allow);
        kb_serve_reply rep = { 0 };
        kb_serve_reply_bytes(&rep, 204, "text/plain", "", 0);
        kb_serve_header h[KB_SERVE_CORS_MAX];
        size_t nh = origin && kb_serve_req_header(r, "Access-Control-Request-Method")
                    ? kb_serve_cors_headers(origin, allow, h) : 0;
        kb_rc hr = kb_serve_reply_header(&rep, "Allow", allow);
        for (size_t i = 0; hr == KB_OK && i < nh; i++)
            hr = kb_serve_reply_header(&rep, h[i].name, h[i].value);
        if (hr != KB_OK)
            reply_set(&rep, 500, "text/plain", NULL, 0);
        *res = send_reply(r, &rep);
        return 0;
    }
    int open = r->route && (r->route->flags & KB_ROUTE_OPEN);
    if (!open && !token_ok(srv, kb_serve_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION))) {
        int sent = kb_serve_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION) != NULL;
        *res = send_error(r, 401, "unauthorized", MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                          sent ? "Bearer realm=\"kb\", error=\"invalid_token\""
                               : "Bearer realm=\"kb\"",
                          "%s", sent ? "the bearer token is not this server's"
                                     : "this server wants 'Authorization: Bearer TOKEN'");
        return 0;
    }
    if (!r->route && !allowed) {
        *res = send_error(r, 404, "not_found", NULL, NULL, "no such endpoint "
                          "'%.200s' (GET /openapi.json lists them)", r->path);
        return 0;
    }
    if (!r->route) {
        char allow[96];
        allow_list(allowed, allow, sizeof allow);
        *res = send_error(r, 405, "method_not_allowed", MHD_HTTP_HEADER_ALLOW, allow,
                          "'%.200s' takes %s, not %.16s", r->path, allow, r->method);
        return 0;
    }
    const char *cl = kb_serve_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    char *end = NULL;
    unsigned long long declared = cl ? strtoull(cl, &end, 10) : 0;
    if (cl && end != cl && declared > srv->max_body) {
        *res = send_error(r, 413, "body_too_large", NULL, NULL, "the request "
                          "body of %llu bytes is over the server's cap of %zu",
                          declared, srv->max_body);
        return 0;
    }
    return 1;
}

/* The worker of the calling pool thread: the next free one on its first
 * request. NULL if the threads outnumber the workers (never: one each). */
static worker *thread_worker(kb_server *srv)
{
    if (tls.srv != srv) {
        size_t i = atomic_fetch_add(&srv->next_worker, 1);
        tls.srv = srv;
        tls.w = i < srv->nworkers ? &srv->workers[i] : NULL;
    }
    return tls.w;
}

static kb_serve_req *req_new(kb_server *srv, struct MHD_Connection *conn,
                             const char *url, const char *method)
{
    kb_serve_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->srv = srv;
    r->conn = conn;
    r->t0 = kb_now_ms();
    r->method = kb_strdup(method);
    r->path = kb_strdup(url);
    kb_buf_init(&r->body, srv->max_body);
    if (!r->method || !r->path) {
        free(r->method);
        free(r->path);
        free(r);
        return NULL;
    }
    r->method_bit = method_bit(method);
    const union MHD_ConnectionInfo *sc =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    r->guarded = sc ? sc->socket_context : NULL;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
                  r->peer, sizeof r->peer);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                  r->peer, sizeof r->peer);
    return r;
}

/* 1 if the client has closed its side of the connection: the request
 * is abandoned (a load client stopping, an agent cancelled), so its work
 * is not done, as nginx treats a client's FIN before the reply. */
static int client_gone(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return 0;
    struct pollfd p = { .fd = ci->connect_fd, .events = POLLRDHUP };
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void req_free(kb_serve_req *r)
{
    kb_buf_release(&r->body);
    free(r->method);
    free(r->path);
    free(r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    kb_server *srv = cls;
    kb_serve_req *r = *con_cls;
    if (!r) {   /* the headers: admit or refuse before any body is read */
        if (!(r = req_new(srv, conn, url, method)))
            return MHD_NO;
        r->http11 = version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
        *con_cls = r;
        atomic_fetch_add(&srv->inflight, 1);
        kb_serve_guard_set(srv->guard, r->guarded, srv->header_ms);   /* the body's */
        enum MHD_Result res = MHD_YES;
        admit(r, &res);
        return res;
    }
    if (r->answered) {   /* refused: what follows is not read */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {   /* a piece of the body */
        if (!r->too_big && kb_buf_append(&r->body, upload, *upload_size) != KB_OK) {
            r->too_big = 1;
            kb_buf_release(&r->body);
        }
        if (r->too_big) {
            r->dropped += *upload_size;
            if (r->dropped > DISCARD_FACTOR * srv->max_body)
                return MHD_NO;   /* no end in sight: hang up */
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->too_big)   /* chunked: no length to refuse it by up front */
        return send_error(r, 413, "body_too_large", NULL, NULL, "the request "
                          "body is over the server's cap of %zu bytes", srv->max_body);
    if (client_gone(conn)) {
        r->gone = 1;
        return MHD_NO;
    }
    if (!(r->w = thread_worker(srv)))
        return send_error(r, 503, "no_worker", NULL, NULL, "%s",
                          "no worker for this thread");
    kb_serve_guard_set(srv->guard, r->guarded, 0);   /* the handler takes its time */
    size_t self = (size_t)(r->w - srv->workers);
    kb_serve_guard_busy(srv->guard, self, 1);   /* and its thread's other connections wait */
    kb_serve_reply rep = { 0 };
    r->route->fn(r, &rep, r->route);
    enum MHD_Result res = send_reply(r, &rep);
    kb_serve_guard_busy(srv->guard, self, 0);
    return res;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    kb_server *srv = cls;
    kb_serve_req *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    /* a kept-alive connection: the next request may idle first */
    kb_serve_guard_set(srv->guard, r->guarded, srv->idle_ms + srv->header_ms);
    if (srv->access_log)
        access_log(r, toe);
    req_free(r);
    atomic_fetch_sub(&srv->inflight, 1);
}

/* MHD_OPTION_NOTIFY_CONNECTION: a connection's deadline from its opening
 * to its closing (before libmicrohttpd closes its socket). */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    kb_server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        kb_serve_guard_remove(srv->guard, *socket_context);
        *socket_context = NULL;
        return;
    }
    /* called on the pool thread that accepted it, which reads it */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    worker *w = thread_worker(srv);
    size_t owner = w ? (size_t)(w - srv->workers) : srv->nworkers;
    if (ci)
        *socket_context = kb_serve_guard_add(srv->guard, ci->connect_fd, owner,
                                             srv->header_ms);
}

/* libmicrohttpd's own messages: debug output only. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    if (kb_log_get_level() < KB_LOG_DEBUG)
        return;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    kb_log_debug("libmicrohttpd: %s", msg);
}

/* ------------------------------------------------------------ server */

void kb_serve_opts_init(kb_serve_opts *o)
{
    memset(o, 0, sizeof *o);
    o->access_log = 1;
}

kb_rc kb_serve_opts_add(kb_serve_opts *o, const kb_serve_route *routes, size_t n)
{
    if (o->ntables == KB_SERVE_MAX_TABLES)
        return KB_ERR_USAGE;
    o->tables[o->ntables++] = (kb_serve_table){ routes, n };
    return KB_OK;
}

/* The listening socket for address:port (non-blocking, close-on-exec);
 * sets srv's port, url and loopback. */
static kb_rc listen_on(kb_server *srv, const char *address, int port,
                       unsigned backlog, kb_err *err)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    socklen_t len;
    int v6 = strchr(address, ':') != NULL;
    if (!v6 && inet_pton(AF_INET, address, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        len = sizeof *a4;
        srv->loopback = (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
    } else if (v6 && inet_pton(AF_INET6, address, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        len = sizeof *a6;
        srv->loopback = IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr);
    } else {
        return kb_err_set(err, KB_ERR_USAGE, "'%s' is not a numeric IPv4 or "
                          "IPv6 address", address);
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (v6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
        bind(fd, (struct sockaddr *)&ss, len) != 0 ||
        listen(fd, (int)backlog) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return kb_err_set(err, KB_ERR_IO, v6 ? "cannot listen on '[%s]:%d': %s"
                                             : "cannot listen on '%s:%d': %s",
                          address, port, strerror(e));
    }
    srv->listen_fd = fd;
    srv->port = ntohs(v6 ? a6->sin6_port : a4->sin_port);
    snprintf(srv->url, sizeof srv->url, v6 ? "http://[%s]:%d" : "http://%s:%d",
             address, srv->port);
    return KB_OK;
}

/* One read-only store per worker: each keeps its own SQLite connection,
 * FAISS index and embedder (the store's slots), so workers share nothing
 * mutable. */
static kb_rc open_workers(kb_server *srv, const kb_serve_opts *o, kb_err *err)
{
    size_t n = o->threads > 0 ? (size_t)o->threads : (size_t)kb_cpu_count();
    if (n > MAX_WORKERS)
        n = MAX_WORKERS;
    srv->workers = calloc(n, sizeof *srv->workers);
    if (!srv->workers)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    srv->nworkers = n;
    for (size_t i = 0; i < n; i++) {
        worker *w = &srv->workers[i];
        kb_rc rc = kb_store_open(o->kb_dir, KB_STORE_READONLY, &w->store, err);
        if (rc == KB_OK && o->worker_init)
            rc = o->worker_init(w->store, o->worker_arg, err);
        if (rc != KB_OK)
            return rc;
        w->ctx = (kb_tool_ctx){ .store = w->store, .emb = NULL, .config = o->config,
                                .results = o->results };
    }
    return KB_OK;
}

kb_rc kb_serve_start(const kb_serve_opts *o, kb_server **out, kb_err *err)
{
    *out = NULL;
    if (o->port < 0 || o->port > 65535)
        return kb_err_set(err, KB_ERR_USAGE, "port %d is not from 0 to 65535", o->port);
    if (!o->kb_dir || !o->ntables)
        return kb_err_set(err, KB_ERR_INTERNAL, "kb_serve_start: no KB or routes");
    kb_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    srv->listen_fd = -1;
    srv->max_body = o->max_body ? o->max_body : DEFAULT_MAX_BODY;
    srv->access_log = o->access_log;
    memcpy(srv->tables, o->tables, sizeof srv->tables);
    srv->ntables = o->ntables;
    if (o->token && *o->token)
        kb_sha256_hex(o->token, strlen(o->token), srv->token_hex);
    unsigned max_conn = o->max_connections ? o->max_connections : DEFAULT_MAX_CONNECTIONS;
    unsigned per_ip = o->max_per_ip ? o->max_per_ip : (max_conn / 4 ? max_conn / 4 : 1);
    unsigned idle_s = o->timeout_s ? o->timeout_s : DEFAULT_TIMEOUT_S;
    srv->idle_ms = 1000.0 * idle_s;
    srv->header_ms = 1000.0 * (o->header_timeout_s ? o->header_timeout_s
                                                   : DEFAULT_HEADER_TIMEOUT_S);
    kb_rc rc = open_workers(srv, o, err);
    if (rc == KB_OK)
        rc = kb_serve_guard_start(srv->nworkers, &srv->guard, err);
    if (rc == KB_OK)
        rc = listen_on(srv, o->address ? o->address : "127.0.0.1", o->port,
                       max_conn, err);
    if (rc != KB_OK) {
        kb_serve_stop(srv);
        return rc;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (strchr(srv->url + 7, '['))
        flags |= MHD_USE_IPv6;
    srv->daemon = MHD_start_daemon(
        flags, (uint16_t)srv->port, NULL, NULL, on_request, srv,
        MHD_OPTION_LISTEN_SOCKET, srv->listen_fd,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)srv->nworkers,
        MHD_OPTION_CONNECTION_LIMIT, max_conn,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
        MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
        MHD_OPTION_END);
    if (!srv->daemon) {
        rc = kb_err_set(err, KB_ERR_IO, "cannot start the HTTP server on '%s'",
                        srv->url);
        kb_serve_stop(srv);
        return rc;
    }
    srv->listen_fd = -1;   /* the daemon's now */
    *out = srv;
    return KB_OK;
}

int kb_serve_port(const kb_server *s) { return s->port; }
const char *kb_serve_url(const kb_server *s) { return s->url; }

size_t kb_serve_drain(kb_server *s, long timeout_ms)
{
    atomic_store(&s->draining, 1);
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
    double deadline = kb_now_ms() + (double)timeout_ms;
    while (atomic_load(&s->inflight) > 0 && kb_now_ms() < deadline) {
        struct timespec ts = { 0, 5 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    long left = atomic_load(&s->inflight);
    return left > 0 ? (size_t)left : 0;
}

void kb_serve_stop(kb_server *s)
{
    if (!s)
        return;
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    kb_serve_guard_stop(s->guard);   /* after the daemon: no connection left */
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    for (size_t i = 0; i < s->nworkers; i++)
        kb_store_close(s->workers[i].store);
    free(s->workers);
    free(s);
}
