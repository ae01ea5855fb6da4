/* http.c - the one HTTP client (see http.h): requests, retries with
 * backoff and Retry-After, caps, authentication, and the SSE reader. */
#include "kb/kb_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HTTP_USER_AGENT "kb/0.1"
#define HTTP_DEFAULT_MAX ((size_t)64 << 20)

void kb_http_opts_default(kb_http_opts *o)
{
    o->connect_timeout_ms = 10000;
    o->timeout_ms = 60000;
    o->low_speed_time_s = 30;
    o->max_bytes = HTTP_DEFAULT_MAX;
    o->max_redirects = 5;
    o->max_retries = 3;
    o->retry_base_ms = 500;
    o->retry_max_ms = 30000;
    o->error_excerpt = 0;
}

void kb_http_response_init(kb_http_response *r)
{
    memset(r, 0, sizeof *r);
    kb_buf_init(&r->body, 0);
}

static void response_headers_release(kb_http_response *r)
{
    free(r->etag);
    free(r->last_modified);
    free(r->content_type);
    free(r->retry_after);
    free(r->effective_url);
    r->etag = r->last_modified = r->content_type = r->retry_after = NULL;
    r->effective_url = NULL;
}

void kb_http_response_release(kb_http_response *r)
{
    response_headers_release(r);
    kb_buf_release(&r->body);
    kb_http_response_init(r);
}

/* ------------------------------------------------------------ global */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ------------------------------------------------------------ Retry-After */

long kb_http_retry_after_ms(const char *value, time_t now)
{
    if (!value)
        return -1;
    while (*value == ' ' || *value == '\t')
        value++;
    size_t n = strlen(value);
    while (n && (value[n - 1] == ' ' || value[n - 1] == '\t' ||
                 value[n - 1] == '\r' || value[n - 1] == '\n'))
        n--;
    if (!n || n > 64)
        return -1;
    char v[65];
    memcpy(v, value, n);
    v[n] = '\0';
    long secs;
    if (v[0] >= '0' && v[0] <= '9') {
        if (kb_parse_long(v, 0, 1000000000L, &secs) != KB_OK)
            return -1;
        return secs * 1000;
    }
    time_t when = curl_getdate(v, NULL);
    if (when < 0)
        return -1;
    double d = difftime(when, now);
    if (d <= 0)
        return 0;
    return d > 1e9 ? 1000000000L * 1000 : (long)(d * 1000);
}

/* ------------------------------------------------------------ SSE reader */

void kb_http_sse_init(kb_http_sse *s, size_t max, kb_http_sse_fn fn, void *ctx)
{
    memset(s, 0, sizeof *s);
    if (!max)
        max = HTTP_DEFAULT_MAX;
    kb_buf_init(&s->line, max);
    kb_buf_init(&s->data, max);
    kb_buf_init(&s->event, max);
    kb_buf_init(&s->id, max);
    s->fn = fn;
    s->ctx = ctx;
}

void kb_http_sse_release(kb_http_sse *s)
{
    kb_buf_release(&s->line);
    kb_buf_release(&s->data);
    kb_buf_release(&s->event);
    kb_buf_release(&s->id);
}

static kb_rc sse_too_long(kb_http_sse *s, kb_err *err)
{
    return kb_err_set(err, KB_ERR_PARSE,
                      "server-sent event longer than %zu bytes", s->line.max);
}

static kb_rc sse_dispatch(kb_http_sse *s, kb_err *err)
{
    kb_rc rc = KB_OK;
    if (s->have_data) {
        /* the data lines were each followed by '\n': drop the last */
        s->data.data[--s->data.len] = '\0';
        kb_http_sse_event ev = {
            s->event.data ? s->event.data : "",
            s->data.data ? s->data.data : "",
            s->data.len,
            s->id.data ? s->id.data : "",
        };
        s->events++;
        if (s->fn)
            rc = s->fn(&ev, s->ctx, err);
    }
    kb_buf_reset(&s->data);
    kb_buf_reset(&s->event);
    s->have_data = s->pending = 0;
    return rc;
}

/* One complete line (without its end). */
static kb_rc sse_line(kb_http_sse *s, const char *p, size_t n, kb_err *err)
{
    if (!s->started) {
        s->started = 1;
        if (n >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3)) {   /* a byte-order mark */
            p += 3;
            n -= 3;
        }
    }
    if (n == 0)
        return sse_dispatch(s, err);
    if (p[0] == ':')
        return KB_OK;                       /* a comment */
    const char *colon = memchr(p, ':', n);
    size_t flen = colon ? (size_t)(colon - p) : n;
    const char *val = colon ? colon + 1 : p + n;
    size_t vlen = (size_t)(p + n - val);
    if (vlen && *val == ' ') {
        val++;
        vlen--;
    }
    kb_rc rc = KB_OK;
    s->pending = 1;
    if (flen == 4 && !memcmp(p, "data", 4)) {
        rc = kb_buf_append(&s->data, val, vlen);
        if (rc == KB_OK)
            rc = kb_buf_putc(&s->data, '\n');
        s->have_data = 1;
    } else if (flen == 5 && !memcmp(p, "event", 5)) {
        kb_buf_reset(&s->event);
        rc = kb_buf_append(&s->event, val, vlen);
    } else if (flen == 2 && !memcmp(p, "id", 2)) {
        if (!memchr(val, '\0', vlen)) {
            kb_buf_reset(&s->id);
            rc = kb_buf_append(&s->id, val, vlen);
        }
    }                                       /* "retry" and others: ignored */
    return rc == KB_OK ? KB_OK : sse_too_long(s, err);
}

kb_rc kb_http_sse_feed(kb_http_sse *s, const char *data, size_t len,
                       kb_err *err)
{
    size_t i = 0;
    while (i < len) {
        char c = data[i];
        if (s->after_cr) {
            s->after_cr = 0;
            if (c == '\n') {
                i++;
                continue;
            }
        }
        /* the run up to the next line end goes in one piece */
        size_t j = i;
        while (j < len && data[j] != '\n' && data[j] != '\r')
            j++;
        if (j == len) {
            if (kb_buf_append(&s->line, data + i, j - i) != KB_OK)
                return sse_too_long(s, err);
            return KB_OK;
        }
        kb_rc rc;
        if (s->line.len) {
            if (kb_buf_append(&s->line, data + i, j - i) != KB_OK)
                return sse_too_long(s, err);
            rc = sse_line(s, s->line.data, s->line.len, err);
            kb_buf_reset(&s->line);
        } else {
            rc = sse_line(s, data + i, j - i, err);
        }
        if (rc != KB_OK)
            return rc;
        s->after_cr = data[j] == '\r';
        i = j + 1;
    }
    return KB_OK;
}

kb_rc kb_http_sse_finish(kb_http_sse *s, kb_err *err)
{
    /* an unfinished comment line loses nothing */
    int partial = s->line.len && s->line.data[0] != ':';
    if (partial || s->pending)
        return kb_err_set(err, KB_ERR_NET, "stream cut in the middle of an event");
    return KB_OK;
}

/* ------------------------------------------------------------ transfer */

typedef struct {
    CURL *h;
    const kb_http_request *req;
    kb_http_response *resp;
    size_t max_bytes;
    size_t received;      /* body bytes seen this attempt, kept or not */
    int too_big;
    int oom;
    int streaming;        /* -1: not known yet; 1: a 2xx read as SSE */
    kb_http_sse sse;
    kb_rc cb_rc;          /* the stream's failure (reader or callback) */
    kb_err cb_err;
} transfer;

/* Whether this attempt's reply is read as an event stream: a 2xx whose
 * Content-Type is text/event-stream or not given. */
static int reply_streams(transfer *t)
{
    if (t->streaming < 0) {
        long code = 0;
        char *ct = NULL;
        curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(t->h, CURLINFO_CONTENT_TYPE, &ct);
        t->streaming = t->req->on_event && code / 100 == 2 &&
                       (!ct || !*ct || !strncasecmp(ct, "text/event-stream", 17));
    }
    return t->streaming;
}

/* Keeps the body (or streams a 2xx); stops as soon as the cap is passed. */
static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    transfer *t = arg;
    size_t n = size * nmemb;
    if (n > t->max_bytes - t->received) {
        t->too_big = 1;
        return 0;
    }
    t->received += n;
    if (reply_streams(t)) {
        t->cb_rc = kb_http_sse_feed(&t->sse, data, n, &t->cb_err);
        return t->cb_rc == KB_OK ? n : 0;
    }
    if (kb_buf_append(&t->resp->body, data, n) != KB_OK) {
        t->oom = 1;           /* the cap was checked above */
        return 0;
    }
    return n;
}

static char *header_of(CURL *h, const char *name)
{
    struct curl_header *hdr = NULL;
    if (curl_easy_header(h, name, 0, CURLH_HEADER, -1, &hdr) != CURLHE_OK ||
        !hdr->value || !*hdr->value)
        return NULL;
    return kb_strdup(hdr->value);
}

static void take_headers(CURL *h, kb_http_response *r)
{
    response_headers_release(r);
    r->etag = header_of(h, "ETag");
    r->last_modified = header_of(h, "Last-Modified");
    r->content_type = header_of(h, "Content-Type");
    r->retry_after = header_of(h, "Retry-After");
    char *eff = NULL;
    curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &eff);
    r->effective_url = eff ? kb_strdup(eff) : NULL;
}

static int transient_curl_error(CURLcode c)
{
    switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return 1;
    default:
        return 0;   /* resolve failures, bad URLs, TLS trust, ...: permanent */
    }
}

static int transient_status(long status)
{
    return status == 408 || status == 429 || (status >= 500 && status <= 599);
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* curl's own words for an error: its error buffer when that says more
 * than the generic text (timeouts, truncation), else the generic text. */
static const char *curl_reason(CURLcode c, const char *errbuf)
{
    const char *generic = curl_easy_strerror(c);
    if (!errbuf[0] || strstr(errbuf, generic))
        return generic;
    return errbuf;
}

/* Appends "NAME: VALUE" to *list. */
static kb_rc add_header(struct curl_slist **list, const char *name,
                        const char *value)
{
    kb_buf line;
    kb_buf_init(&line, 0);
    kb_rc rc = kb_buf_printf(&line, "%s: %s", name, value);
    struct curl_slist *t = rc == KB_OK ? curl_slist_append(*list, line.data) : NULL;
    if (t)
        *list = t;
    else
        rc = KB_ERR_NOMEM;
    if (line.data)
        memset(line.data, 0, line.len);     /* it may hold a key */
    kb_buf_release(&line);
    return rc;
}

static kb_rc add_line(struct curl_slist **list, const char *line)
{
    struct curl_slist *t = curl_slist_append(*list, line);
    if (!t)
        return KB_ERR_NOMEM;
    *list = t;
    return KB_OK;
}

/* Frees the list, blanking every line first: one holds the key. */
static void free_headers(struct curl_slist *list)
{
    for (struct curl_slist *l = list; l; l = l->next)
        if (l->data)
            memset(l->data, 0, strlen(l->data));
    curl_slist_free_all(list);
}

static kb_rc build_headers(const kb_http_request *req, struct curl_slist **out)
{
    kb_rc rc = KB_OK;
    int has_key = req->auth_key && *req->auth_key;
    if (req->method == KB_HTTP_POST) {
        rc = add_header(out, "Content-Type",
                        req->content_type ? req->content_type : "application/json");
        if (rc == KB_OK)
            rc = add_line(out, "Expect:");   /* no 100-continue round trip */
    }
    for (const char *const *h = req->headers; rc == KB_OK && h && *h; h++)
        rc = add_line(out, *h);
    if (rc == KB_OK && has_key) {
        if (req->auth_header && *req->auth_header) {
            rc = add_header(out, req->auth_header, req->auth_key);
        } else {
            kb_buf v;
            kb_buf_init(&v, 0);
            rc = kb_buf_printf(&v, "Bearer %s", req->auth_key);
            if (rc == KB_OK)
                rc = add_header(out, "Authorization", v.data);
            if (v.data)
                memset(v.data, 0, v.len);
            kb_buf_release(&v);
        }
    }
    return rc;
}

static kb_rc setup_handle(CURL *h, const kb_http_request *req,
                          const kb_http_opts *o, transfer *t, char *errbuf,
                          struct curl_slist *hdrs)
{
    int has_key = req->auth_key && *req->auth_key;
    long redirects = o->max_redirects >= 0 ? o->max_redirects : 5L;
    CURLcode c = CURLE_OK;
#define SET(opt, val) if (c == CURLE_OK) c = curl_easy_setopt(h, opt, val)
    SET(CURLOPT_URL, req->url);
    SET(CURLOPT_USERAGENT, HTTP_USER_AGENT);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_ERRORBUFFER, errbuf);
    SET(CURLOPT_FOLLOWLOCATION, has_key ? 0L : 1L);
    SET(CURLOPT_MAXREDIRS, redirects);
#if LIBCURL_VERSION_NUM >= 0x075500
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    SET(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    SET(CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    SET(CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 10000L);
    SET(CURLOPT_TIMEOUT_MS, o->timeout_ms > 0 ? o->timeout_ms : 60000L);
    if (o->low_speed_time_s > 0) {
        SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
        SET(CURLOPT_LOW_SPEED_TIME, o->low_speed_time_s);
    }
    SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)t->max_bytes);
    SET(CURLOPT_ACCEPT_ENCODING, "");   /* the cap applies to decoded bytes */
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, t);
    SET(CURLOPT_HTTPHEADER, hdrs);
    if (req->method == KB_HTTP_POST) {
        SET(CURLOPT_POST, 1L);
        SET(CURLOPT_POSTFIELDS, req->body ? req->body : "");
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(req->body ? req->body_len : 0));
    }
#undef SET
    return c == CURLE_OK ? KB_OK : KB_ERR_INTERNAL;
}

/* "SUBJECT: HTTP 503[: excerpt][ (after N attempts)]": the excerpt on one
 * line, the key (if the server echoed it) blanked. */
static kb_rc status_error(const kb_http_request *req, const kb_http_opts *o,
                          const char *subject, const kb_http_response *r,
                          const char *after, kb_err *err)
{
    size_t n = r->body.len < o->error_excerpt ? r->body.len : o->error_excerpt;
    char *snip = kb_strndup(r->body.data ? r->body.data : "", n);
    if (!snip)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    size_t klen = req->auth_key ? strlen(req->auth_key) : 0;
    for (char *q = snip; klen && (q = strstr(q, req->auth_key)); q += klen)
        memset(q, '*', klen);
    for (char *q = snip; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f)
            *q = ' ';
    kb_rc rc = kb_err_set(err, KB_ERR_NET, "%s: HTTP %ld%s%s%s", subject,
                          r->status, *snip ? ": " : "", snip, after);
    free(snip);
    return rc;
}

static char *default_subject(const char *url)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    size_t n = url ? strcspn(url, "?#") : 0;
    kb_rc rc = kb_buf_puts(&b, "request to '");
    if (rc == KB_OK)
        rc = kb_buf_append(&b, url ? url : "", n);
    if (rc == KB_OK)
        rc = kb_buf_puts(&b, "' failed");
    if (rc != KB_OK) {
        kb_buf_release(&b);
        return NULL;
    }
    return kb_buf_detach(&b);
}

/* Back to the state before an attempt. */
static void attempt_reset(transfer *t, int attempt)
{
    kb_buf_reset(&t->resp->body);
    response_headers_release(t->resp);
    kb_http_sse_release(&t->sse);
    kb_http_sse_init(&t->sse, t->max_bytes, t->req->on_event, t->req->event_ctx);
    t->received = 0;
    t->too_big = t->oom = 0;
    t->streaming = -1;
    t->cb_rc = KB_OK;
    kb_err_clear(&t->cb_err);
    t->resp->attempts = attempt;
}

/* Judges one attempt's outcome: returns 1 when the request is over (*rc
 * says how: KB_OK for a 2xx or 304, else the error set in err), 0 when it
 * is worth another attempt. */
static int attempt_over(transfer *t, CURLcode c, int attempt, int max_attempts,
                        const kb_http_opts *opts, const char *subject,
                        const char *errbuf, kb_rc *rc, kb_err *err)
{
    const kb_http_request *req = t->req;
    kb_http_response *resp = t->resp;
    char after[48] = "";
    if (attempt > 1)
        snprintf(after, sizeof after, " (after %d attempts)", attempt);
    *rc = KB_OK;
    if (t->cb_rc != KB_OK) {
        *rc = kb_err_set(err, t->cb_rc, "%s", t->cb_err.msg);
    } else if (t->too_big || c == CURLE_FILESIZE_EXCEEDED) {
        *rc = kb_err_set(err, KB_ERR_NET, "%s: body exceeds %zu bytes",
                         subject, t->max_bytes);
    } else if (t->oom) {
        *rc = kb_err_set(err, KB_ERR_NOMEM, "%s: out of memory", subject);
    } else if (c == CURLE_TOO_MANY_REDIRECTS) {
        *rc = kb_err_set(err, KB_ERR_NET, "%s: too many redirects (more than %ld)",
                         subject, opts->max_redirects >= 0 ? opts->max_redirects : 5L);
    } else if (c != CURLE_OK && t->sse.events) {
        /* the caller has seen part of the reply: no second one */
        *rc = kb_err_set(err, KB_ERR_NET, "%s: %s (stream cut after %zu events)",
                         subject, curl_reason(c, errbuf), t->sse.events);
    } else if (c != CURLE_OK) {
        if (transient_curl_error(c) && attempt < max_attempts)
            return 0;
        *rc = kb_err_set(err, KB_ERR_NET, "%s: %s%s", subject,
                         curl_reason(c, errbuf), after);
    } else {
        take_headers(t->h, resp);
        if (resp->status / 100 == 2) {
            if (req->on_event && t->streaming != 0) {
                kb_err serr;
                kb_err_clear(&serr);
                if (kb_http_sse_finish(&t->sse, &serr) != KB_OK)
                    *rc = kb_err_set(err, serr.rc, "%s: %s", subject, serr.msg);
            }
        } else if (resp->status != 304) {
            if (transient_status(resp->status) && attempt < max_attempts)
                return 0;
            *rc = status_error(req, opts, subject, resp, after, err);
        }
    }
    return 1;
}

/* The wait before attempt + 1: base * 2^(attempt-1), or longer if
 * Retry-After (ra_ms, -1 if none) says so, capped at max_ms. */
static long backoff_ms(long base_ms, long max_ms, int attempt, long ra_ms)
{
    long wait = base_ms;
    for (int i = 1; i < attempt && wait < max_ms; i++)
        wait *= 2;
    if (ra_ms > wait)
        wait = ra_ms;
    return wait > max_ms ? max_ms : wait;
}

/* Checks the URL and makes the easy handle and its headers for req. */
static kb_rc transfer_start(transfer *t, const kb_http_request *req,
                            const kb_http_opts *opts, const char *subject,
                            char *errbuf, struct curl_slist **hdrs, kb_err *err)
{
    if (!req->url || (strncasecmp(req->url, "http://", 7) != 0 &&
                      strncasecmp(req->url, "https://", 8) != 0))
        return kb_err_set(err, KB_ERR_USAGE,
                          "%s: only http and https URLs are supported", subject);
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_rc != CURLE_OK)
        return kb_err_set(err, KB_ERR_INTERNAL, "%s: %s", subject,
                          curl_easy_strerror(curl_init_rc));
    if (build_headers(req, hdrs) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (!(t->h = curl_easy_init()))
        return kb_err_set(err, KB_ERR_INTERNAL, "%s: cannot start libcurl", subject);
    if (setup_handle(t->h, req, opts, t, errbuf, *hdrs) != KB_OK)
        return kb_err_set(err, KB_ERR_INTERNAL, "%s: cannot set up libcurl", subject);
    return KB_OK;
}

kb_rc kb_http_perform(const kb_http_request *req, const kb_http_opts *opts,
                      kb_http_response *resp, kb_err *err)
{
    kb_http_opts defaults;
    if (!opts) {
        kb_http_opts_default(&defaults);
        opts = &defaults;
    }
    size_t max_bytes = opts->max_bytes ? opts->max_bytes : HTTP_DEFAULT_MAX;
    int max_attempts = 1 + (opts->max_retries > 0 ? opts->max_retries : 0);
    long base_ms = opts->retry_base_ms > 0 ? opts->retry_base_ms : 0;
    long max_wait = opts->retry_max_ms > 0 ? opts->retry_max_ms : 30000L;
    char *own_subject = req->subject ? NULL : default_subject(req->url);
    const char *subject = req->subject ? req->subject : own_subject;
    struct curl_slist *hdrs = NULL;
    char errbuf[CURL_ERROR_SIZE];
    transfer t;
    memset(&t, 0, sizeof t);
    t.req = req;
    t.resp = resp;
    t.max_bytes = max_bytes;
    kb_http_sse_init(&t.sse, max_bytes, req->on_event, req->event_ctx);
    kb_rc rc = KB_OK;

    kb_http_response_release(resp);
    if (!subject)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    else
        rc = transfer_start(&t, req, opts, subject, errbuf, &hdrs, err);
    for (int attempt = 1; rc == KB_OK; attempt++) {
        attempt_reset(&t, attempt);
        errbuf[0] = '\0';
        CURLcode c = curl_easy_perform(t.h);
        long status = 0;
        curl_easy_getinfo(t.h, CURLINFO_RESPONSE_CODE, &status);
        resp->status = status;
        resp->events = t.sse.events;
        if (attempt_over(&t, c, attempt, max_attempts, opts, subject, errbuf,
                         &rc, err))
            break;
        long ra = c == CURLE_OK ? kb_http_retry_after_ms(resp->retry_after, time(NULL)) : -1;
        long wait = backoff_ms(base_ms, max_wait, attempt, ra);
        if (c != CURLE_OK)
            kb_log_debug("%s: %s; retry in %ld ms", subject, curl_reason(c, errbuf), wait);
        else
            kb_log_debug("%s: HTTP %ld; retry in %ld ms", subject, status, wait);
        sleep_ms(wait);
    }
    resp->events = t.sse.events;
    kb_http_sse_release(&t.sse);
    if (t.h)
        curl_easy_cleanup(t.h);
    free_headers(hdrs);
    free(own_subject);
    return rc;
}
