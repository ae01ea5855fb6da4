/* test_http.c - kb_http against real HTTP servers on 127.0.0.1 in this
 * process: libmicrohttpd for the scripted routes (retries, Retry-After in
 * both forms, caps, redirects, authentication, an SSE stream sent in small
 * pieces), and a raw socket server for what an HTTP library will not
 * produce: streams cut in the middle of an event. Nothing leaves the
 * machine. */
#include "kb/kb_int.h"

#include "tests/unit/test_util.h"
#include "tests/unit/test_http_server.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KEY "sekrit-123-key"

/* ------------------------------------------------------------------ server */

static struct MHD_Daemon *daemon_;
static unsigned port_;
static atomic_int stopping;

enum { R_FLAKY, R_RA_SECS, R_RA_DATE, R_RA_LONG, R_ALWAYS429, R_MISSING,
       R_BIG, R_LOOP, R_HOP, R_AUTH, R_DENIED, R_ECHO, R_SSE, R_NROUTES };
static const char *route_names[R_NROUTES] = {
    "/flaky", "/ra-secs", "/ra-date", "/ra-long", "/always429", "/missing",
    "/big", "/loop", "/hop", "/auth", "/denied", "/echo", "/sse",
};
static atomic_int hits[R_NROUTES];

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static char seen_auth[256], seen_xkey[256], seen_ctype[256], seen_extra[256];
static char seen_method[16];

/* The SSE route's stream: a comment, an event with a name, multi-line
 * data, CRLF line ends and an id, a data line with no space, a retry
 * field, then OpenAI's terminator. Sent 7 bytes at a time. */
static const char SSE_HEAD[] =
    ": a comment the reader ignores\n"
    "event: message_start\n"
    "data: {\"type\":\"message_start\"}\n"
    "\n";
static const char SSE_REST[] =
    "data: line one\n"
    "data: line two\n"
    ": comment inside an event\n"
    "data:\n"
    "data: line four\n"
    "\n"
    "id: 7\r\n"
    "data: crlf\r\n"
    "\r\n"
    "retry: 1000\n"
    "data:nospace\n"
    "\n"
    "event: ping\n"
    "\n"
    "data: [DONE]\n"
    "\n";
static atomic_int sse_first_seen;   /* the client has the first event */
static atomic_int sse_streamed;     /* ... before the rest was sent */

static void copy_header(struct MHD_Connection *c, const char *name, char *dst,
                        size_t n)
{
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
    snprintf(dst, n, "%s", v ? v : "");
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
                             const char *body, size_t len,
                             const char *h1, const char *v1)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (h1)
        MHD_add_response_header(r, h1, v1);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    size_t nhead = sizeof SSE_HEAD - 1, nrest = sizeof SSE_REST - 1;
    if (pos == nhead) {
        /* the rest only once the client has handed over the first event
         * (or after 3 s, and the test notices) */
        for (int i = 0; i < 300 && !atomic_load(&sse_first_seen) &&
                        !atomic_load(&stopping); i++)
            usleep(10 * 1000);
        if (atomic_load(&sse_first_seen))
            atomic_store(&sse_streamed, 1);
    }
    if (pos >= nhead + nrest)
        return MHD_CONTENT_READER_END_OF_STREAM;
    const char *src = pos < nhead ? SSE_HEAD + pos : SSE_REST + (pos - nhead);
    size_t left = pos < nhead ? nhead - pos : nhead + nrest - pos;
    size_t n = left < 7 ? left : 7;
    if (n > max)
        n = max;
    memcpy(buf, src, n);
    usleep(1000);
    return (ssize_t)n;
}

static void http_date(time_t t, char out[64])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 64, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c,
                               const char *url, const char *method,
                               const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    kb_buf *body = *con_cls;
    if (!body) {
        body = calloc(1, sizeof *body);
        kb_buf_init(body, 1 << 20);
        *con_cls = body;
        return MHD_YES;
    }
    if (*upload_size) {
        if (kb_buf_append(body, upload, *upload_size) != KB_OK)
            return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    int route = -1;
    for (int i = 0; i < R_NROUTES; i++)
        if (strcmp(url, route_names[i]) == 0)
            route = i;
    if (route < 0)
        return reply(c, 404, "no route\n", 9, NULL, NULL);
    int n = atomic_fetch_add(&hits[route], 1) + 1;
    pthread_mutex_lock(&seen_lock);
    copy_header(c, "Authorization", seen_auth, sizeof seen_auth);
    copy_header(c, "x-api-key", seen_xkey, sizeof seen_xkey);
    copy_header(c, "Content-Type", seen_ctype, sizeof seen_ctype);
    copy_header(c, "X-Extra", seen_extra, sizeof seen_extra);
    snprintf(seen_method, sizeof seen_method, "%s", method);
    pthread_mutex_unlock(&seen_lock);
    static char big[2000];
    memset(big, 'x', sizeof big);
    char date[64];

    switch (route) {
    case R_FLAKY:
        if (n <= 2)
            return reply(c, 503, "busy\n", 5, NULL, NULL);
        return reply(c, 200, "recovered\n", 10, "ETag", "\"f1\"");
    case R_RA_SECS:
        if (n == 1)
            return reply(c, 429, "slow down\n", 10, "Retry-After", "1");
        return reply(c, 200, "allowed\n", 8, NULL, NULL);
    case R_RA_DATE:
        if (n == 1) {
            http_date(time(NULL) + 2, date);
            return reply(c, 503, "later\n", 6, "Retry-After", date);
        }
        return reply(c, 200, "dated\n", 6, NULL, NULL);
    case R_RA_LONG:
        if (n == 1)
            return reply(c, 503, "much later\n", 11, "Retry-After", "3600");
        return reply(c, 200, "capped\n", 7, NULL, NULL);
    case R_ALWAYS429:
        return reply(c, 429, "{\"error\":\"rate limited\"}", 24, "Retry-After", "0");
    case R_MISSING:
        return reply(c, 404, "not here\n", 9, NULL, NULL);
    case R_BIG:
        return reply(c, 200, big, sizeof big, NULL, NULL);
    case R_LOOP:
        return reply(c, 302, "", 0, "Location", "/loop");
    case R_HOP:
        return reply(c, 302, "", 0, "Location", "/auth");
    case R_AUTH:
        return reply(c, 200, "{\"ok\":true}", 11, "Content-Type", "application/json");
    case R_DENIED:
        /* a server that echoes the key it was given back in its error */
        return reply(c, 401, "{\"error\":\"invalid key " KEY "\nsee docs\"}",
                     sizeof "{\"error\":\"invalid key " KEY "\nsee docs\"}" - 1,
                     NULL, NULL);
    case R_ECHO:
        return reply(c, 200, body->data ? body->data : "", body->len,
                     "Content-Type", "text/plain");
    case R_SSE: {
        struct MHD_Response *r = MHD_create_response_from_callback(
            MHD_SIZE_UNKNOWN, 64, sse_reader, NULL, NULL);
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    }
    return MHD_NO;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    kb_buf *body = *con_cls;
    if (body) {
        kb_buf_release(body);
        free(body);
        *con_cls = NULL;
    }
}

/* The raw server: /cut answers a close-delimited event stream that stops
 * inside its second event; /cut-chunked a chunked one whose connection
 * closes after the first event without the last chunk. */
static int raw_fd = -1;
static unsigned raw_port_;
static pthread_t raw_thread;

static void *raw_serve(void *arg)
{
    static const char cut[] =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        "Connection: close\r\n\r\n"
        "data: whole\n\n"
        "event: delta\ndata: {\"text\":\"par";
    static const char cut_chunked[] =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
        "d\r\ndata: whole\n\n\r\n"
        "9\r\ndata: par\r\n";
    while (!atomic_load(&stopping)) {
        struct pollfd p = { raw_fd, POLLIN, 0 };
        if (poll(&p, 1, 20) <= 0)
            continue;
        int c = accept(raw_fd, NULL, NULL);
        if (c < 0)
            continue;
        char req[4096];
        ssize_t got = read(c, req, sizeof req - 1);
        req[got > 0 ? got : 0] = '\0';
        const char *resp = strstr(req, "GET /cut-chunked ") ? cut_chunked : cut;
        size_t len = resp == cut ? sizeof cut - 1 : sizeof cut_chunked - 1;
        ssize_t w = write(c, resp, len);
        (void)w;
        usleep(50 * 1000);
        close(c);
    }
    return NULL;
}

static int server_up(void **state)
{
    daemon_ = tu_http_server(handler, completed, &port_);
    if (!daemon_)
        return -1;
    raw_fd = tu_bind_local(1, &raw_port_);
    if (raw_fd < 0 || pthread_create(&raw_thread, NULL, raw_serve, NULL) != 0)
        return -1;
    return 0;
}

static int server_down(void **state)
{
    atomic_store(&stopping, 1);
    pthread_join(raw_thread, NULL);
    close(raw_fd);
    MHD_stop_daemon(daemon_);
    return 0;
}

static int each_up(void **state)
{
    for (int i = 0; i < R_NROUTES; i++)
        atomic_store(&hits[i], 0);
    seen_auth[0] = seen_xkey[0] = seen_ctype[0] = seen_extra[0] = '\0';
    return 0;
}

/* ------------------------------------------------------------------ helpers */

static char *url_of(const char *path)
{
    static char buf[4][128];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "http://127.0.0.1:%u%s", port_, path);
    return b;
}

/* Small, fast options: the failure paths must not make the suite slow. */
static kb_http_opts fast_opts(void)
{
    kb_http_opts o;
    kb_http_opts_default(&o);
    o.connect_timeout_ms = 2000;
    o.timeout_ms = 5000;
    o.low_speed_time_s = 2;
    o.retry_base_ms = 20;
    o.max_bytes = 1000;
    return o;
}

static kb_http_request get(const char *path)
{
    kb_http_request r = { .method = KB_HTTP_GET, .url = url_of(path) };
    return r;
}

/* The events a stream delivered, one "event|data|id" line each. */
typedef struct {
    kb_buf log;
    int fail_at;      /* > 0: the callback fails on this event */
} events;

static kb_rc on_event(const kb_http_sse_event *ev, void *ctx, kb_err *err)
{
    events *e = ctx;
    atomic_store(&sse_first_seen, 1);
    assert_int_equal(ev->data_len, strlen(ev->data));
    kb_rc rc = kb_buf_printf(&e->log, "%s|%s|%s\n", ev->event, ev->data, ev->id);
    if (rc != KB_OK)
        return kb_err_set(err, rc, "out of memory");
    if (e->fail_at && --e->fail_at == 0)
        return kb_err_set(err, KB_ERR_PARSE, "the callback gave up");
    return KB_OK;
}

static const char SSE_EXPECT[] =
    "message_start|{\"type\":\"message_start\"}|\n"
    "|line one\nline two\n\nline four|\n"
    "|crlf|7\n"
    "|nospace|7\n"
    "|[DONE]|7\n";

/* ------------------------------------------------------------------ tests */

static void test_retry_503_then_200(void **state)
{
    kb_http_opts o = fast_opts();
    kb_http_request q = get("/flaky");
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    double t0 = kb_now_ms();
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_OK);
    double took = kb_now_ms() - t0;
    assert_int_equal(r.status, 200);
    assert_int_equal(r.attempts, 3);
    assert_string_equal(r.body.data, "recovered\n");
    assert_string_equal(r.etag, "\"f1\"");
    assert_string_equal(r.effective_url, q.url);
    assert_int_equal(atomic_load(&hits[R_FLAKY]), 3);
    assert_true(took >= 55.0 && took < 1000.0);   /* 20 then 40 ms */
    kb_http_response_release(&r);
}

static void test_retry_after_seconds(void **state)
{
    kb_http_opts o = fast_opts();
    kb_http_request q = get("/ra-secs");
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    double t0 = kb_now_ms();
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_OK);
    double took = kb_now_ms() - t0;
    assert_int_equal(r.attempts, 2);
    assert_null(r.retry_after);               /* the final reply has none */
    assert_true(took >= 950.0 && took < 3000.0);  /* 1 s, not 20 ms */
    kb_http_response_release(&r);
}

static void test_retry_after_date(void **state)
{
    kb_http_opts o = fast_opts();
    kb_http_request q = get("/ra-date");
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    double t0 = kb_now_ms();
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_OK);
    double took = kb_now_ms() - t0;
    assert_int_equal(r.attempts, 2);
    assert_string_equal(r.body.data, "dated\n");
    /* "now + 2 s" at one-second resolution: between 1 and 2 s */
    assert_true(took >= 900.0 && took < 3000.0);
    kb_http_response_release(&r);

    /* a wait the server asks for is capped */
    o.retry_max_ms = 200;
    q = get("/ra-long");
    kb_http_response_init(&r);
    t0 = kb_now_ms();
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_OK);
    took = kb_now_ms() - t0;
    assert_string_equal(r.body.data, "capped\n");
    assert_true(took >= 190.0 && took < 1500.0);
    kb_http_response_release(&r);
}

static void test_retry_after_parse(void **state)
{
    time_t now = 1700000000;
    char date[64];
    assert_int_equal(kb_http_retry_after_ms("120", now), 120000);
    assert_int_equal(kb_http_retry_after_ms("  0 \r\n", now), 0);
    http_date(now + 10, date);
    assert_int_equal(kb_http_retry_after_ms(date, now), 10000);
    http_date(now - 10, date);
    assert_int_equal(kb_http_retry_after_ms(date, now), 0);
    assert_int_equal(kb_http_retry_after_ms("Sunday, 06-Nov-94 08:49:37 GMT", now), 0);
    assert_int_equal(kb_http_retry_after_ms("soon", now), -1);
    assert_int_equal(kb_http_retry_after_ms("-5", now), -1);
    assert_int_equal(kb_http_retry_after_ms("12abc", now), -1);
    assert_int_equal(kb_http_retry_after_ms("", now), -1);
    assert_int_equal(kb_http_retry_after_ms(NULL, now), -1);
}

static void test_429_exhausts_retries(void **state)
{
    kb_http_opts o = fast_opts();
    o.max_retries = 2;
    o.error_excerpt = 100;
    kb_http_request q = get("/always429");
    q.subject = "cannot ask 'the limiter'";
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_ERR_NET);
    assert_string_equal(err.msg, "cannot ask 'the limiter': HTTP 429: "
                                 "{\"error\":\"rate limited\"} (after 3 attempts)");
    assert_int_equal(r.status, 429);
    assert_int_equal(r.attempts, 3);
    assert_string_equal(r.retry_after, "0");
    assert_string_equal(r.body.data, "{\"error\":\"rate limited\"}");
    assert_int_equal(atomic_load(&hits[R_ALWAYS429]), 3);
    kb_http_response_release(&r);
}

static void test_404_not_retried(void **state)
{
    kb_http_opts o = fast_opts();
    kb_http_request q = get("/missing?token=abc");
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_ERR_NET);
    char want[256];
    /* the default subject leaves the query string out */
    snprintf(want, sizeof want, "request to '%s' failed: HTTP 404", url_of("/missing"));
    assert_string_equal(err.msg, want);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body.data, "not here\n");
    assert_int_equal(atomic_load(&hits[R_MISSING]), 1);
    kb_http_response_release(&r);
}

static void test_size_cap(void **state)
{
    kb_http_opts o = fast_opts();
    kb_http_request q = get("/big");
    q.subject = "cannot fetch 'big'";
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_ERR_NET);
    assert_string_equal(err.msg, "cannot fetch 'big': body exceeds 1000 bytes");
    assert_int_equal(r.attempts, 1);
    kb_http_response_release(&r);

    o.max_bytes = 2000;           /* exactly the body: fine */
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_OK);
    assert_int_equal(r.body.len, 2000);
    kb_http_response_release(&r);
}

static void test_redirect_cap(void **state)
{
    kb_http_opts o = fast_opts();
    o.max_redirects = 3;
    kb_http_request q = get("/hop");
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_OK);
    assert_string_equal(r.effective_url, url_of("/auth"));
    assert_string_equal(r.content_type, "application/json");

    q = get("/loop");
    q.subject = "cannot fetch 'loop'";
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_ERR_NET);
    assert_string_equal(err.msg, "cannot fetch 'loop': too many redirects (more than 3)");
    assert_int_equal(atomic_load(&hits[R_LOOP]), 4);   /* 1 + 3 followed */
    assert_int_equal(r.attempts, 1);

    /* with a key, no redirect is followed: the key would go along */
    q = get("/hop");
    q.auth_key = KEY;
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_ERR_NET);
    assert_int_equal(r.status, 302);
    assert_int_equal(atomic_load(&hits[R_AUTH]), 1);   /* only the first hop */
    assert_null(strstr(err.msg, KEY));
    kb_http_response_release(&r);
}

static void test_auth_headers(void **state)
{
    kb_http_opts o = fast_opts();
    static const char *const extra[] = { "X-Extra: one", "anthropic-version: 2023-06-01", NULL };
    kb_http_request q = get("/auth");
    q.auth_key = KEY;
    q.headers = extra;
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_OK);
    assert_string_equal(seen_auth, "Bearer " KEY);
    assert_string_equal(seen_xkey, "");
    assert_string_equal(seen_extra, "one");

    q.auth_header = "x-api-key";
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_OK);
    assert_string_equal(seen_xkey, KEY);
    assert_string_equal(seen_auth, "");

    q.auth_key = "";            /* an empty key is no key */
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_OK);
    assert_string_equal(seen_xkey, "");
    assert_string_equal(seen_auth, "");
    kb_http_response_release(&r);
}

static void test_post_body(void **state)
{
    kb_http_opts o = fast_opts();
    static const char body[] = "{\"model\":\"m\",\"input\":[\"a\"]}";
    kb_http_request q = { .method = KB_HTTP_POST, .url = url_of("/echo"),
                          .body = body, .body_len = sizeof body - 1 };
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_OK);
    assert_string_equal(seen_method, "POST");
    assert_string_equal(seen_ctype, "application/json");
    assert_string_equal(r.body.data, body);
    assert_string_equal(r.content_type, "text/plain");
    kb_http_response_release(&r);
}

/* The key appears in no error message: not in a quoted error body that
 * echoes it, not in a network failure, not in the debug log of retries. */
static void test_key_not_in_messages(void **state)
{
    kb_http_opts o = fast_opts();
    o.error_excerpt = 200;
    kb_http_request q = get("/denied");
    q.auth_key = KEY;
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_ERR_NET);
    assert_non_null(strstr(err.msg, "HTTP 401: {\"error\":\"invalid key *"));
    assert_non_null(strstr(err.msg, " see docs"));    /* on one line */
    assert_null(strstr(err.msg, KEY));
    assert_null(strchr(err.msg, '\n'));
    assert_int_equal(r.attempts, 1);

    unsigned port = 0;
    int fd = tu_bind_local(0, &port);       /* bound, never listening */
    assert_true(fd >= 0);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/messages", port);
    q.url = url;
    q.auth_header = "x-api-key";
    o.max_retries = 1;
    kb_err_clear(&err);
    char logpath[] = "/tmp/kb-test-http-log-XXXXXX";
    int logfd = mkstemp(logpath);
    assert_true(logfd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(logfd, STDERR_FILENO);
    kb_log_level level = kb_log_get_level();
    kb_log_set_level(KB_LOG_DEBUG);
    kb_rc rc = kb_http_perform(&q, &o, &r, &err);
    kb_log_set_level(level);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    assert_int_equal(rc, KB_ERR_NET);
    assert_non_null(strstr(err.msg, "Couldn't connect to server (after 2 attempts)"));
    assert_null(strstr(err.msg, KEY));
    kb_buf log;
    kb_buf_init(&log, 0);
    assert_int_equal(kb_read_file(logpath, 0, &log, NULL), KB_OK);
    assert_non_null(strstr(log.data, "retry in"));
    assert_null(strstr(log.data, KEY));
    kb_buf_release(&log);
    close(logfd);
    unlink(logpath);
    close(fd);
    kb_http_response_release(&r);
}

static void test_only_http(void **state)
{
    kb_http_request q = { .method = KB_HTTP_GET, .url = "file:///etc/passwd",
                          .subject = "cannot fetch 'file:///etc/passwd'" };
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, NULL, &r, &err), KB_ERR_USAGE);
    assert_string_equal(err.msg, "cannot fetch 'file:///etc/passwd': only http "
                                 "and https URLs are supported");
    assert_int_equal(r.attempts, 0);
    kb_http_response_release(&r);
}

static void test_sse_stream(void **state)
{
    kb_http_opts o = fast_opts();
    kb_http_request q = { .method = KB_HTTP_POST, .url = url_of("/sse"),
                          .body = "{\"stream\":true}", .body_len = 15,
                          .on_event = on_event };
    events e = { .fail_at = 0 };
    kb_buf_init(&e.log, 0);
    q.event_ctx = &e;
    atomic_store(&sse_first_seen, 0);
    atomic_store(&sse_streamed, 0);
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_OK);
    assert_string_equal(e.log.data, SSE_EXPECT);
    assert_int_equal(r.events, 5);
    assert_int_equal(r.body.len, 0);            /* events are not kept */
    assert_string_equal(r.content_type, "text/event-stream");
    /* the first event was in hand before the server sent the rest */
    assert_int_equal(atomic_load(&sse_streamed), 1);
    kb_http_response_release(&r);

    /* a callback that fails stops the stream with its own error */
    kb_buf_reset(&e.log);
    e.fail_at = 2;
    kb_err_clear(&err);
    atomic_store(&sse_first_seen, 1);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_ERR_PARSE);
    assert_string_equal(err.msg, "the callback gave up");
    assert_int_equal(r.events, 2);
    assert_int_equal(r.attempts, 1);
    kb_http_response_release(&r);
    kb_buf_release(&e.log);
}

/* A stream request answered with plain JSON (a server that does not
 * stream): the body is kept, no event is delivered, and it is no error. */
static void test_sse_plain_reply(void **state)
{
    kb_http_opts o = fast_opts();
    kb_http_request q = { .method = KB_HTTP_POST, .url = url_of("/auth"),
                          .body = "{\"stream\":true}", .body_len = 15,
                          .on_event = on_event };
    events e = { .fail_at = 0 };
    kb_buf_init(&e.log, 0);
    q.event_ctx = &e;
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_OK);
    assert_int_equal(r.events, 0);
    assert_null(e.log.data);
    assert_string_equal(r.body.data, "{\"ok\":true}");
    assert_string_equal(r.content_type, "application/json");
    kb_http_response_release(&r);
    kb_buf_release(&e.log);
}

/* The reader alone, fed one byte at a time and all at once. */
static void test_sse_reader(void **state)
{
    kb_buf all;
    kb_buf_init(&all, 0);
    assert_int_equal(kb_buf_puts(&all, "\xEF\xBB\xBF"), KB_OK);
    assert_int_equal(kb_buf_puts(&all, SSE_HEAD), KB_OK);
    assert_int_equal(kb_buf_puts(&all, SSE_REST), KB_OK);
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        events e = { .fail_at = 0 };
        kb_buf_init(&e.log, 0);
        kb_http_sse s;
        kb_http_sse_init(&s, 0, on_event, &e);
        kb_err err;
        kb_err_clear(&err);
        if (bytewise)
            for (size_t i = 0; i < all.len; i++)
                assert_int_equal(kb_http_sse_feed(&s, all.data + i, 1, &err), KB_OK);
        else
            assert_int_equal(kb_http_sse_feed(&s, all.data, all.len, &err), KB_OK);
        assert_int_equal(kb_http_sse_finish(&s, &err), KB_OK);
        assert_string_equal(e.log.data, SSE_EXPECT);
        assert_int_equal(s.events, 5);
        kb_http_sse_release(&s);
        kb_buf_release(&e.log);
    }
    kb_buf_release(&all);

    /* CR alone ends lines too; a cut leaves an error; the cap holds */
    events e = { .fail_at = 0 };
    kb_buf_init(&e.log, 0);
    kb_http_sse s;
    kb_http_sse_init(&s, 16, on_event, &e);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_http_sse_feed(&s, "data: a\r\rdata: b", 16, &err), KB_OK);
    assert_string_equal(e.log.data, "|a|\n");
    assert_int_equal(kb_http_sse_finish(&s, &err), KB_ERR_NET);
    assert_string_equal(err.msg, "stream cut in the middle of an event");
    kb_err_clear(&err);
    assert_int_equal(kb_http_sse_feed(&s, "\n\ndata: 0123456789abcdef", 24, &err),
                     KB_ERR_PARSE);
    assert_string_equal(err.msg, "server-sent event longer than 16 bytes");
    kb_http_sse_release(&s);
    kb_buf_release(&e.log);
}

static void test_sse_cut(void **state)
{
    kb_http_opts o = fast_opts();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/cut", raw_port_);
    kb_http_request q = { .method = KB_HTTP_GET, .url = url, .subject = "cannot stream",
                          .on_event = on_event };
    events e = { .fail_at = 0 };
    kb_buf_init(&e.log, 0);
    q.event_ctx = &e;
    kb_http_response r;
    kb_http_response_init(&r);
    kb_err err;
    kb_err_clear(&err);
    /* close-delimited: the transfer ends "well" inside the second event */
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_ERR_NET);
    assert_string_equal(err.msg, "cannot stream: stream cut in the middle of an event");
    assert_string_equal(e.log.data, "|whole|\n");
    assert_int_equal(r.events, 1);
    assert_int_equal(r.attempts, 1);
    kb_http_response_release(&r);

    /* chunked: the connection drops; the event already handed over means
     * no second attempt */
    snprintf(url, sizeof url, "http://127.0.0.1:%u/cut-chunked", raw_port_);
    kb_buf_reset(&e.log);
    kb_err_clear(&err);
    assert_int_equal(kb_http_perform(&q, &o, &r, &err), KB_ERR_NET);
    fprintf(stderr, "cut chunked: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "cannot stream: "));
    assert_non_null(strstr(err.msg, "(stream cut after 1 events)"));
    assert_string_equal(e.log.data, "|whole|\n");
    assert_int_equal(r.attempts, 1);
    kb_http_response_release(&r);
    kb_buf_release(&e.log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_retry_503_then_200, each_up),
        cmocka_unit_test_setup(test_retry_after_seconds, each_up),
        cmocka_unit_test_setup(test_retry_after_date, each_up),
        cmocka_unit_test(test_retry_after_parse),
        cmocka_unit_test_setup(test_429_exhausts_retries, each_up),
        cmocka_unit_test_setup(test_404_not_retried, each_up),
        cmocka_unit_test_setup(test_size_cap, each_up),
        cmocka_unit_test_setup(test_redirect_cap, each_up),
        cmocka_unit_test_setup(test_auth_headers, each_up),
        cmocka_unit_test_setup(test_post_body, each_up),
        cmocka_unit_test_setup(test_key_not_in_messages, each_up),
        cmocka_unit_test(test_only_http),
        cmocka_unit_test_setup(test_sse_stream, each_up),
        cmocka_unit_test_setup(test_sse_plain_reply, each_up),
        cmocka_unit_test(test_sse_reader),
        cmocka_unit_test(test_sse_cut),
    };
    return cmocka_run_group_tests(tests, server_up, server_down);
}
