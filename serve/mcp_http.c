/* mcp_http.c - MCP's Streamable HTTP transport at /mcp (serve.h, "MCP"):
 * each POST body one message for serve/mcp.c's core, the sessions of the
 * handshake era by Mcp-Session-Id, none in 2026-07-28. Replies are JSON
 * (application/json): kb sends no requests of its own and no progress,
 * so it never needs a stream. */
#include "serve/serve.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#define SESSIONS_MAX 4096
#define SESSIONS_PER_PEER 1024   /* one address's share of the table */
#define SESSION_ID_BYTES 16      /* 128 random bits, as 32 hex digits */
#define PEER_MAX 46              /* INET6_ADDRSTRLEN */

#define INVALID_REQUEST (-32600)

typedef struct {
    char id[2 * SESSION_ID_BYTES + 1];
    kb_mcp_session *s;
    int refs;                /* requests using it now */
    int ended;               /* DELETEd or evicted: freed at its last release */
    double last_ms;          /* when last used: the least recent goes first */
    char peer[PEER_MAX];     /* the address that initialized it */
} session_slot;

struct kb_mcp_http {
    kb_mcp *server;
    pthread_mutex_t lock;
    session_slot *slots[SESSIONS_MAX];
    size_t n;
    kb_serve_route route;
};

/* ------------------------------------------------------------ sessions */

static void slot_free(session_slot *x)
{
    kb_mcp_session_free(x->s);
    free(x);
}

/* Removes slot i from the table (under the lock); freed now or by its
 * last user. */
static void slot_drop(kb_mcp_http *t, size_t i)
{
    session_slot *x = t->slots[i];
    t->slots[i] = t->slots[--t->n];
    x->ended = 1;
    if (x->refs == 0)
        slot_free(x);
}

/* The session with that id, taken (release with session_release), or
 * NULL. */
static session_slot *session_take(kb_mcp_http *t, const char *id)
{
    session_slot *found = NULL;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->slots[i]->id, id) == 0) {
            found = t->slots[i];
            found->refs++;
            found->last_ms = kb_now_ms();
            break;
        }
    pthread_mutex_unlock(&t->lock);
    return found;
}

static void session_release(kb_mcp_http *t, session_slot *x)
{
    pthread_mutex_lock(&t->lock);
    int gone = --x->refs == 0 && x->ended;
    pthread_mutex_unlock(&t->lock);
    if (gone)
        slot_free(x);
}

/* n random bytes from the kernel (getrandom: no library state, nothing
 * kept per thread). 0 on success. */
static int random_bytes(unsigned char *p, size_t n)
{
    while (n) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

/* The least recently used session that no request is using now, among
 * those of peer (NULL: among all); -1 if none. Under the lock. */
static long lru_idle(const kb_mcp_http *t, const char *peer)
{
    long best = -1;
    for (size_t i = 0; i < t->n; i++) {
        const session_slot *x = t->slots[i];
        if (x->refs || (peer && strcmp(x->peer, peer) != 0))
            continue;
        if (best < 0 || x->last_ms < t->slots[best]->last_ms)
            best = (long)i;
    }
    return best;
}

/* Makes room for one more session of peer (under the lock): a peer at its
 * share gives up its own least recently used idle session, so that one
 * address cannot push out everyone else's; a full table gives up the
 * least recently used idle one of all. A client that never ends its
 * sessions (no DELETE) thus costs its own oldest, and a new handshake is
 * never refused while some session is idle. Returns 0 when every session
 * that would have to go is in use. */
static int make_room(kb_mcp_http *t, const char *peer)
{
    size_t mine = 0;
    for (size_t i = 0; i < t->n; i++)
        mine += strcmp(t->slots[i]->peer, peer) == 0;
    if (mine >= SESSIONS_PER_PEER) {
        long i = lru_idle(t, peer);
        if (i < 0)
            return 0;
        slot_drop(t, (size_t)i);
    }
    if (t->n == SESSIONS_MAX) {
        long i = lru_idle(t, NULL);
        if (i < 0)
            return 0;
        slot_drop(t, (size_t)i);
    }
    return 1;
}

/* Keeps s (taken) under a new random id, written to id, for peer (its
 * address, "" unknown). KB_ERR_NOMEM, or KB_ERR_IO when no room can be
 * made (every session that would go is in use; s then freed). */
static kb_rc session_add(kb_mcp_http *t, kb_mcp_session *s, const char *peer,
                         char id[2 * SESSION_ID_BYTES + 1])
{
    unsigned char raw[SESSION_ID_BYTES];
    session_slot *x = calloc(1, sizeof *x);
    if (!x || random_bytes(raw, sizeof raw) != 0) {
        free(x);
        kb_mcp_session_free(s);
        return KB_ERR_NOMEM;
    }
    kb_hex_encode(raw, sizeof raw, x->id);
    x->s = s;
    x->last_ms = kb_now_ms();
    snprintf(x->peer, sizeof x->peer, "%s", peer);
    pthread_mutex_lock(&t->lock);
    int full = !make_room(t, x->peer);
    if (!full)
        t->slots[t->n++] = x;
    pthread_mutex_unlock(&t->lock);
    if (full) {
        slot_free(x);
        return KB_ERR_IO;
    }
    memcpy(id, x->id, sizeof x->id);
    return KB_OK;
}

/* Ends the session with that id: 1 if there was one. */
static int session_end(kb_mcp_http *t, const char *id)
{
    int found = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->n && !found; i++)
        if (strcmp(t->slots[i]->id, id) == 0) {
            slot_drop(t, i);
            found = 1;
        }
    pthread_mutex_unlock(&t->lock);
    return found;
}

size_t kb_mcp_http_sessions(kb_mcp_http *t)
{
    pthread_mutex_lock(&t->lock);
    size_t n = t->n;
    pthread_mutex_unlock(&t->lock);
    return n;
}

/* ------------------------------------------------------------ replies */

/* A JSON-RPC error without an id (the request's could not be used) as the
 * body of an HTTP error, with extra header name: value when name is not
 * NULL. */
static void rpc_error(kb_serve_reply *reply, int status, const char *hname,
                      const char *hvalue, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void rpc_error(kb_serve_reply *reply, int status, const char *hname,
                      const char *hvalue, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *root = cJSON_CreateObject(), *e = NULL;
    int ok = root && cJSON_AddStringToObject(root, "jsonrpc", "2.0") &&
             (e = cJSON_AddObjectToObject(root, "error")) &&
             cJSON_AddNumberToObject(e, "code", INVALID_REQUEST) &&
             cJSON_AddStringToObject(e, "message", msg);
    if (!ok) {
        cJSON_Delete(root);
        root = NULL;
    }
    kb_serve_reply_json(reply, status, root);
    if (hname && kb_serve_reply_header(reply, hname, hvalue) != KB_OK)
        kb_serve_reply_error(reply, 500, "out_of_memory", "out of memory");
}

/* 1 if the header lists the media type (or a wildcard that covers it). */
static int accepts(const char *accept, const char *type)
{
    if (!accept)
        return 0;
    size_t tn = strlen(type);
    const char *slash = strchr(type, '/');
    size_t major = slash ? (size_t)(slash - type) : tn;
    for (const char *p = accept; *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, ",;");
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if ((n == tn && strncasecmp(p, type, tn) == 0) || (n == 3 && strncmp(p, "*/*", 3) == 0) ||
            (n == major + 2 && strncasecmp(p, type, major) == 0 && strncmp(p + major, "/*", 2) == 0))
            return 1;
        p += strcspn(p, ",");
    }
    return 0;
}

static int is_json_type(const char *ct)
{
    if (!ct)
        return 0;
    size_t n = strcspn(ct, ";");
    while (n && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    return n == 16 && strncasecmp(ct, "application/json", 16) == 0;
}

/* ------------------------------------------------------------ the route */

/* The reply of kb_mcp_handle as HTTP: JSON, or 202 with nothing. */
static void send_mcp(kb_serve_reply *reply, kb_mcp_reply *r)
{
    if (!r->text) {
        kb_serve_reply_bytes(reply, r->http_status, "application/json", "", 0);
        return;
    }
    kb_serve_reply_bytes(reply, r->http_status, "application/json", r->text, strlen(r->text));
}

static void on_post(kb_mcp_http *t, const kb_serve_req *req, kb_serve_reply *reply,
                    const kb_mcp_transport *tr, int modern)
{
    if (!accepts(kb_serve_req_header(req, "Accept"), "application/json") ||
        !accepts(kb_serve_req_header(req, "Accept"), "text/event-stream"))
        return rpc_error(reply, 406, NULL, NULL, "the Accept header must list both "
                         "application/json and text/event-stream");
    if (!is_json_type(kb_serve_req_header(req, "Content-Type")))
        return rpc_error(reply, 415, NULL, NULL, "the body must be "
                         "'Content-Type: application/json': one JSON-RPC message");
    size_t len;
    const char *body = kb_serve_req_body(req, &len);
    session_slot *slot = NULL;
    kb_mcp_session *s = NULL;
    kb_err err;
    kb_err_clear(&err);
    /* 2026-07-28 keeps no session: a fresh one per request, whatever
     * Mcp-Session-Id says. The handshake era: the session named, or a
     * fresh one that is kept if the message was a successful initialize */
    if (!modern && tr->session_id) {
        if (!(slot = session_take(t, tr->session_id)))
            return rpc_error(reply, 404, NULL, NULL, "no session '%.*s' (it ended, "
                             "or the server restarted): initialize again",
                             kb_utf8_cut(tr->session_id, 64), tr->session_id);
        s = slot->s;
    } else if (kb_mcp_session_open(&s, &err) != KB_OK) {
        return kb_serve_reply_kb_error(reply, &err);
    }
    kb_mcp_reply r;
    kb_rc rc = kb_mcp_handle(t->server, s, kb_serve_req_tools(req), body, len, tr, &r, &err);
    if (slot) {
        session_release(t, slot);
        s = NULL;
    }
    if (rc != KB_OK) {
        kb_mcp_session_free(s);
        return kb_serve_reply_kb_error(reply, &err);
    }
    if (!slot && r.initialized && !modern) {
        char id[2 * SESSION_ID_BYTES + 1];
        rc = session_add(t, s, kb_serve_req_peer(req), id);   /* takes s */
        s = NULL;
        if (rc != KB_OK) {
            free(r.text);
            return rpc_error(reply, 503, NULL, NULL, "%s", rc == KB_ERR_IO
                             ? "too many sessions in use at once: retry when one is done"
                             : "out of memory");
        }
        send_mcp(reply, &r);
        if (kb_serve_reply_header(reply, "Mcp-Session-Id", id) != KB_OK) {
            session_end(t, id);
            kb_serve_reply_error(reply, 500, "out_of_memory", "out of memory");
        }
    } else {
        send_mcp(reply, &r);
    }
    kb_mcp_session_free(s);
    free(r.text);
}

static void mcp_route(const kb_serve_req *req, kb_serve_reply *reply,
                      const kb_serve_route *route)
{
    kb_mcp_http *t = route->arg;
    kb_mcp_transport tr = {
        .protocol_version = kb_serve_req_header(req, "MCP-Protocol-Version"),
        .method = kb_serve_req_header(req, "Mcp-Method"),
        .name = kb_serve_req_header(req, "Mcp-Name"),
        .session_id = kb_serve_req_header(req, "Mcp-Session-Id"),
    };
    int modern = tr.protocol_version && strcmp(tr.protocol_version, KB_MCP_VERSION_MODERN) == 0;
    const char *m = kb_serve_req_method(req);
    if (strcmp(m, "POST") == 0)
        return on_post(t, req, reply, &tr, modern);
    if (modern)   /* 2026-07-28: POST only */
        return rpc_error(reply, 405, "Allow", "POST", "protocol %s takes POST "
                         "only, not %s", KB_MCP_VERSION_MODERN, m);
    if (strcmp(m, "DELETE") == 0) {
        if (!tr.session_id)
            return rpc_error(reply, 400, NULL, NULL, "DELETE ends a session: "
                             "name it in Mcp-Session-Id");
        if (!session_end(t, tr.session_id))
            return rpc_error(reply, 404, NULL, NULL, "no session '%.*s'",
                             kb_utf8_cut(tr.session_id, 64), tr.session_id);
        kb_serve_reply_bytes(reply, 204, "application/json", "", 0);
        return;
    }
    /* GET (and HEAD): kb has nothing to send unasked, so no stream */
    rpc_error(reply, 405, "Allow", "POST, DELETE", "kb offers no server-sent "
              "event stream: POST each message to /mcp");
}

kb_rc kb_mcp_http_open(kb_mcp *server, kb_mcp_http **out, kb_err *err)
{
    *out = NULL;
    kb_mcp_http *t = calloc(1, sizeof *t);
    if (!t || pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    t->server = server;
    t->route = (kb_serve_route){ "/mcp", KB_HTTP_M_POST | KB_HTTP_M_GET | KB_HTTP_M_DELETE,
                                 0, mcp_route, t };
    *out = t;
    return KB_OK;
}

void kb_mcp_http_free(kb_mcp_http *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        slot_free(t->slots[i]);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

const kb_serve_route *kb_mcp_http_routes(kb_mcp_http *t, size_t *n)
{
    *n = 1;
    return &t->route;
}
