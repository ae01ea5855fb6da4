/*
 * http.h - kb's one HTTP client, on libcurl (kb-internal: ingest's fetch,
 * the remote embedder and the LLM clients (kb/llm.c) use it; the CLI and
 * the servers do not).
 *
 * One call is one request: kb_http_perform makes a fresh easy handle, so
 * any number of threads may call it at once. It retries 429, 408, 5xx and
 * transient network errors with a doubling backoff, waiting at least what
 * a Retry-After header asks (both of its forms), each wait capped; other
 * 4xx, an oversized body and too many redirects fail at once. A key given
 * for authentication goes into one header only: it is never logged and
 * never put into an error message (a quoted error body has it blanked).
 * Library code: nothing is printed, failures come back as kb_rc + kb_err.
 */
#ifndef KB_HTTP_H
#define KB_HTTP_H

#include "kb/kb.h"

#include <time.h>

/* ------------------------------------------------------------ options */

typedef struct {
    long connect_timeout_ms;  /* per attempt; default 10000 */
    long timeout_ms;          /* one whole attempt; default 60000 */
    long low_speed_time_s;    /* cut off after this long below 1 byte/s;
                                 default 30; 0: no such cut-off */
    size_t max_bytes;         /* cap on a body (or a stream); default 64 MiB */
    long max_redirects;       /* redirects followed, more is an error;
                                 default 5 */
    int max_retries;          /* retries after the first attempt; default 3 */
    long retry_base_ms;       /* first backoff, doubling; default 500 */
    long retry_max_ms;        /* cap on each wait, Retry-After included;
                                 default 30000 */
    size_t error_excerpt;     /* quote up to this many bytes of an error
                                 reply's body in the message; default 0 */
} kb_http_opts;

void kb_http_opts_default(kb_http_opts *o);

/* ------------------------------------------------------------ request */

typedef enum { KB_HTTP_GET = 0, KB_HTTP_POST } kb_http_method;

/* One event of a Server-Sent Events stream: the "event:" field ("" when
 * none was given), the "data:" lines joined with '\n', the last "id:".
 * The strings belong to the reader and last until the callback returns. */
typedef struct {
    const char *event;
    const char *data;
    size_t data_len;
    const char *id;
} kb_http_sse_event;

/* Called per event; KB_OK goes on, anything else stops the transfer and is
 * what kb_http_perform returns (the callback sets err). */
typedef kb_rc (*kb_http_sse_fn)(const kb_http_sse_event *ev, void *ctx,
                                kb_err *err);

typedef struct {
    kb_http_method method;
    const char *url;                /* http:// or https:// only */
    const char *const *headers;     /* extra "Name: value" lines, NULL-ended;
                                       may be NULL */
    const char *body;               /* POST only; may be NULL (empty) */
    size_t body_len;
    const char *content_type;       /* of body; NULL: application/json */
    /* authentication: "Authorization: Bearer KEY", or with auth_header
     * "NAME: KEY" (Anthropic's "x-api-key"). NULL or "" key: none. With a
     * key, redirects are not followed (the key would go with them). */
    const char *auth_key;
    const char *auth_header;
    /* messages read "SUBJECT: REASON"; NULL: "request to 'URL' failed",
     * the URL without its query string */
    const char *subject;
    /* streaming: a 2xx body is read as Server-Sent Events as it arrives and
     * handed to on_event (it is not kept in the response's body); a
     * stream cut before its last event ends is an error. A 2xx whose
     * Content-Type is given and is not text/event-stream (a server that
     * answers plain JSON to a stream request) is not streamed: its body is
     * kept in the response like any other, and no event is delivered */
    kb_http_sse_fn on_event;
    void *event_ctx;
} kb_http_request;

/* ------------------------------------------------------------ response */

typedef struct {
    long status;            /* the final HTTP status; 0: no response */
    kb_buf body;            /* the final reply's body (not a 2xx stream's) */
    char *etag;             /* these headers of the final reply, NULL when */
    char *last_modified;    /* absent */
    char *content_type;
    char *retry_after;
    char *effective_url;    /* after redirects */
    int attempts;           /* requests made: 1 + retries */
    size_t events;          /* SSE events handed to on_event */
} kb_http_response;

void kb_http_response_init(kb_http_response *r);
/* Frees what r holds and leaves it as after kb_http_response_init. */
void kb_http_response_release(kb_http_response *r);

/* Makes the request, retrying as the header comment says. KB_OK for a 2xx
 * or a 304 (a conditional GET's answer); any other final status is
 * KB_ERR_NET "SUBJECT: HTTP 404" (with "(after N attempts)" when it was
 * retried), and resp still holds that reply's status, headers and body.
 * Other errors: KB_ERR_NET for network failures, a body over max_bytes
 * ("body exceeds N bytes"), too many redirects, a cut stream;
 * KB_ERR_USAGE for a URL that is not http(s); KB_ERR_NOMEM. resp must have
 * been through kb_http_response_init; its old contents are released, and
 * the caller releases it (also on failure). */
kb_rc kb_http_perform(const kb_http_request *req, const kb_http_opts *opts,
                      kb_http_response *resp, kb_err *err);

/* The wait a Retry-After value asks for, in ms: delta-seconds ("120") or
 * an HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT", a past date is 0),
 * judged against now; -1 when value is neither. Not capped: the caller
 * caps it. */
long kb_http_retry_after_ms(const char *value, time_t now);

/* ------------------------------------------------------------ SSE reader */

/* The Server-Sent Events line reader that kb_http_perform streams through,
 * usable on its own (a recorded reply replayed offline). Lines end in LF,
 * CRLF or CR; "field: value" with one leading space dropped; "data" lines
 * joined with '\n'; a line starting with ':' is a comment; a blank line
 * ends an event (one without data is not delivered); unknown fields are
 * ignored. max caps the pending line and event (0: 64 MiB). */
typedef struct {
    kb_buf line;        /* the line being read */
    kb_buf data;        /* the event's data so far */
    kb_buf event;       /* its "event:" field */
    kb_buf id;          /* the last "id:" */
    int have_data;      /* a data line was seen since the last event */
    int pending;        /* a field was seen since the last event */
    int after_cr;       /* the last byte was a CR: skip one LF */
    int started;        /* past the optional byte-order mark */
    size_t events;      /* events delivered */
    kb_http_sse_fn fn;
    void *ctx;
} kb_http_sse;

void kb_http_sse_init(kb_http_sse *s, size_t max, kb_http_sse_fn fn,
                      void *ctx);
void kb_http_sse_release(kb_http_sse *s);
/* Feeds len bytes; calls fn for each event they complete. Fails with fn's
 * code, or KB_ERR_PARSE when a line or event passes the cap. */
kb_rc kb_http_sse_feed(kb_http_sse *s, const char *data, size_t len,
                       kb_err *err);
/* The end of the stream: KB_ERR_NET "stream cut in the middle of an
 * event" when a line or an event is unfinished, else KB_OK. */
kb_rc kb_http_sse_finish(kb_http_sse *s, kb_err *err);

#endif
