/* llm.c - the LLM clients (kb/kb_int.h, "llm.c") on kb/http.c:
 *   OpenAI-compatible  POST .../v1/chat/completions  (vLLM, SGLang,
 *                      llama.cpp's server, Ollama, OpenAI)
 *   Anthropic          POST .../v1/messages
 * streaming (Server-Sent Events: OpenAI's data chunks to [DONE] with the
 * usage chunk, Anthropic's named events) with a plain-JSON fallback for a
 * server that answers plain JSON or refuses to stream. kb_http does the
 * timeouts and the retries (429, 408, 5xx and so 529, Retry-After). The
 * key goes into one header; it is never in request_json, and is blanked
 * wherever a server echoes it (text, raw, messages). */
#include "kb/kb_int.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LLM_MAX_TOKENS 4096
#define LLM_TIMEOUT_MS 300000L
#define LLM_MAX_BODY ((size_t)32 << 20)
#define ANTHROPIC_VERSION "2023-06-01"

/* ------------------------------------------------------------ options */

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && !strncmp(s + n - k, suffix, k);
}

/* The length of url's path part: up to its query or fragment, less
 * trailing slashes. */
static size_t path_len(const char *url)
{
    size_t n = strcspn(url, "?#");
    while (n && url[n - 1] == '/')
        n--;
    return n;
}

kb_rc kb_llm_opts_from_config(const kb_config *config, kb_llm_opts *o,
                              kb_err *err)
{
    memset(o, 0, sizeof *o);
    o->api = KB_LLM_OPENAI;
    o->stream = 1;
    o->max_tokens = LLM_MAX_TOKENS;
    o->temperature = -1;
    o->timeout_ms = config && config->llm_timeout_ms > 0 ? config->llm_timeout_ms
                                                         : LLM_TIMEOUT_MS;
    o->max_retries = 3;
    if (!config || !config->llm_url || !*config->llm_url)
        return kb_err_set(err, KB_ERR_USAGE,
                          "no LLM endpoint: set KB_LLM_URL to an OpenAI-compatible "
                          "/v1/chat/completions or an Anthropic /v1/messages URL");
    o->url = config->llm_url;
    o->model = config->llm_model;
    o->api_key = config->llm_api_key;
    const char *api = config->llm_api;
    if (api && *api) {
        if (!strcasecmp(api, "openai"))
            o->api = KB_LLM_OPENAI;
        else if (!strcasecmp(api, "anthropic"))
            o->api = KB_LLM_ANTHROPIC;
        else
            return kb_err_set(err, KB_ERR_USAGE,
                              "bad KB_LLM_API '%s': expected openai or anthropic", api);
    } else if (ends_with(o->url, path_len(o->url), "/messages")) {
        o->api = KB_LLM_ANTHROPIC;
    }
    return KB_OK;
}

kb_rc kb_llm_require(const kb_config *config, const char *what, kb_err *err)
{
    if (!config || !config->llm_url || !*config->llm_url)
        return kb_err_set(err, KB_ERR_USAGE, "%s needs an LLM: set KB_LLM_URL (and "
                          "KB_LLM_MODEL, KB_LLM_API_KEY as the server wants) to an "
                          "OpenAI-compatible or Anthropic endpoint", what);
    kb_llm_opts o;
    kb_rc rc = kb_llm_opts_from_config(config, &o, err);
    if (rc == KB_OK && o.api == KB_LLM_ANTHROPIC && (!o.model || !*o.model))
        return kb_err_set(err, KB_ERR_USAGE, "%s with the Anthropic API needs a model: "
                          "set KB_LLM_MODEL", what);
    return rc;
}

/* The URL to POST to (caller frees): o->url as it is when it names the
 * API's path, else with "/v1/chat/completions" or "/v1/messages" (or
 * only the part after "/v1") put before its query. */
static char *endpoint(const kb_llm_opts *o)
{
    const char *url = o->url;
    size_t n = path_len(url);
    const char *tail = o->api == KB_LLM_ANTHROPIC ? "/messages" : "/chat/completions";
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_buf_append(&b, url, n);
    if (rc == KB_OK && !ends_with(url, n, "/chat/completions") &&
        !ends_with(url, n, "/messages")) {
        if (!ends_with(url, n, "/v1"))
            rc = kb_buf_puts(&b, "/v1");
        if (rc == KB_OK)
            rc = kb_buf_puts(&b, tail);
    }
    if (rc == KB_OK)
        rc = kb_buf_puts(&b, url + strcspn(url, "?#"));
    return kb_buf_finish(&b, rc);
}

/* ------------------------------------------------------------ replies */

void kb_llm_reply_init(kb_llm_reply *r)
{
    memset(r, 0, sizeof *r);
}

void kb_llm_reply_release(kb_llm_reply *r)
{
    free(r->text);
    free(r->finish_reason);
    free(r->request_json);
    free(r->raw);
    kb_llm_reply_init(r);
}

/* Stars over every copy of key in s (a server may echo it back). A
 * "key" shorter than 8 bytes is a placeholder (Ollama's "ollama", a local
 * server's "x"), not a secret: starring it would break the kernel's text. */
static void blank_key(char *s, const char *key)
{
    size_t k = key ? strlen(key) : 0;
    if (!s || k < 8)
        return;
    for (char *q = s; (q = strstr(q, key)); q += k)
        memset(q, '*', k);
}

/* ------------------------------------------------------------ requests */

/* The request body for o and req, streaming or not (caller frees). */
static char *request_body(const kb_llm_opts *o, const kb_llm_request *req,
                          int stream)
{
    long max_tokens = req->max_tokens > 0 ? req->max_tokens
                    : o->max_tokens > 0 ? o->max_tokens : LLM_MAX_TOKENS;
    int has_system = req->system && *req->system;
    cJSON *root = cJSON_CreateObject();
    cJSON *msgs = NULL, *m;
    int ok = root != NULL;
    if (ok && o->model && *o->model)
        ok = cJSON_AddStringToObject(root, "model", o->model) != NULL;
    if (ok && o->api == KB_LLM_ANTHROPIC && has_system)
        ok = cJSON_AddStringToObject(root, "system", req->system) != NULL;
    ok = ok && (msgs = cJSON_AddArrayToObject(root, "messages"));
    if (ok && o->api == KB_LLM_OPENAI && has_system) {
        ok = (m = cJSON_CreateObject()) && cJSON_AddItemToArray(msgs, m) &&
             cJSON_AddStringToObject(m, "role", "system") &&
             cJSON_AddStringToObject(m, "content", req->system);
    }
    if (ok)
        ok = (m = cJSON_CreateObject()) && cJSON_AddItemToArray(msgs, m) &&
             cJSON_AddStringToObject(m, "role", "user") &&
             cJSON_AddStringToObject(m, "content", req->user ? req->user : "");
    if (ok)
        ok = cJSON_AddNumberToObject(root, "max_tokens", (double)max_tokens) != NULL;
    if (ok && o->temperature >= 0)
        ok = cJSON_AddNumberToObject(root, "temperature", o->temperature) != NULL;
    if (ok)
        ok = cJSON_AddBoolToObject(root, "stream", stream) != NULL;
    if (ok && stream && o->api == KB_LLM_OPENAI) {
        cJSON *so = cJSON_AddObjectToObject(root, "stream_options");
        ok = so && cJSON_AddTrueToObject(so, "include_usage");
    }
    char *out = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return out;
}

/* ------------------------------------------------------------ parsing */

/* What a reply carries, as it arrives. */
typedef struct {
    kb_llm_api api;
    const char *subject;      /* "LLM request to 'URL' failed" */
    kb_buf text;
    kb_buf raw;               /* a stream's events, one line each */
    char *finish;
    long prompt_tokens, completion_tokens;
    int done;                 /* [DONE] or message_stop seen */
    size_t events;
} reply_state;

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int num_of(const cJSON *o, const char *key, long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e15)
        return 0;
    *out = (long)v->valuedouble;
    return 1;
}

static kb_rc set_finish(reply_state *s, const char *reason)
{
    if (!reason)
        return KB_OK;
    char *f = kb_strdup(reason);
    if (!f)
        return KB_ERR_NOMEM;
    free(s->finish);
    s->finish = f;
    return KB_OK;
}

/* An error object's words: "TYPE: MESSAGE", either part alone, or the
 * object printed. Caller frees. */
static char *error_words(const cJSON *e)
{
    if (cJSON_IsString(e))
        return kb_strdup(e->valuestring);
    const char *type = str_of(e, "type"), *msg = str_of(e, "message");
    kb_buf b;
    kb_buf_init(&b, 4096);
    kb_rc rc;
    if (type && msg)
        rc = kb_buf_printf(&b, "%s: %s", type, msg);
    else if (type || msg)
        rc = kb_buf_puts(&b, type ? type : msg);
    else {
        char *p = cJSON_PrintUnformatted(e);
        rc = p ? kb_buf_puts(&b, p) : KB_ERR_NOMEM;
        free(p);
    }
    return kb_buf_finish(&b, rc);
}

static kb_rc error_reply(reply_state *s, const cJSON *e, const char *where,
                         kb_err *err)
{
    char *w = error_words(e);
    for (char *q = w; q && *q; q++)
        if ((unsigned char)*q < 0x20)
            *q = ' ';
    kb_rc rc = kb_err_set(err, KB_ERR_NET, "%s: %s: %.400s", s->subject, where,
                          w ? w : "(unreadable)");
    free(w);
    return rc;
}

/* One OpenAI object: a stream's chunk or a whole completion. */
static kb_rc openai_object(reply_state *s, const cJSON *j, int chunk, kb_err *err)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    if (e && !cJSON_IsNull(e))
        return error_reply(s, e, chunk ? "error in the stream" : "the server answered an error",
                           err);
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(j, "usage");
    if (cJSON_IsObject(usage)) {
        num_of(usage, "prompt_tokens", &s->prompt_tokens);
        num_of(usage, "completion_tokens", &s->completion_tokens);
    }
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(j, "choices");
    if (!cJSON_IsArray(choices))
        return chunk && cJSON_IsObject(usage) ? KB_OK
             : kb_err_set(err, KB_ERR_PARSE, "%s: the reply is not a chat completion "
                          "(no choices)", s->subject);
    const cJSON *c0 = cJSON_GetArrayItem(choices, 0);
    if (!c0)
        return chunk ? KB_OK : kb_err_set(err, KB_ERR_PARSE,
                                          "%s: the reply has no choices", s->subject);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(c0, chunk ? "delta" : "message");
    const char *content = str_of(m, "content");
    if (content && kb_buf_puts(&s->text, content) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "%s: reply too long", s->subject);
    if (set_finish(s, str_of(c0, "finish_reason")) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return KB_OK;
}

/* Anthropic's whole message (not streaming). */
static kb_rc anthropic_message(reply_state *s, const cJSON *j, kb_err *err)
{
    const char *type = str_of(j, "type");
    if (type && !strcmp(type, "error"))
        return error_reply(s, cJSON_GetObjectItemCaseSensitive(j, "error"),
                           "the server answered an error", err);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(j, "content");
    if (!cJSON_IsArray(content))
        return kb_err_set(err, KB_ERR_PARSE, "%s: the reply is not a message "
                          "(no content)", s->subject);
    const cJSON *block;
    cJSON_ArrayForEach(block, content) {
        const char *bt = str_of(block, "type"), *text = str_of(block, "text");
        if (bt && !strcmp(bt, "text") && text && kb_buf_puts(&s->text, text) != KB_OK)
            return kb_err_set(err, KB_ERR_NOMEM, "%s: reply too long", s->subject);
    }
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(j, "usage");
    num_of(usage, "input_tokens", &s->prompt_tokens);
    num_of(usage, "output_tokens", &s->completion_tokens);
    if (set_finish(s, str_of(j, "stop_reason")) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return KB_OK;
}

/* One of Anthropic's stream events, named by its data's "type" (the
 * "event:" field says the same). */
static kb_rc anthropic_event(reply_state *s, const char *name, const cJSON *j,
                             kb_err *err)
{
    const char *type = str_of(j, "type");
    if (!type)
        type = name;
    if (!strcmp(type, "error"))
        return error_reply(s, cJSON_GetObjectItemCaseSensitive(j, "error"),
                           "error event in the stream", err);
    if (!strcmp(type, "message_start")) {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(j, "message"), "usage");
        num_of(u, "input_tokens", &s->prompt_tokens);
        num_of(u, "output_tokens", &s->completion_tokens);
    } else if (!strcmp(type, "content_block_delta")) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "delta");
        const char *dt = str_of(d, "type"), *text = str_of(d, "text");
        if (dt && !strcmp(dt, "text_delta") && text &&
            kb_buf_puts(&s->text, text) != KB_OK)
            return kb_err_set(err, KB_ERR_NOMEM, "%s: reply too long", s->subject);
    } else if (!strcmp(type, "message_delta")) {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
        num_of(u, "input_tokens", &s->prompt_tokens);
        num_of(u, "output_tokens", &s->completion_tokens);
        if (set_finish(s, str_of(cJSON_GetObjectItemCaseSensitive(j, "delta"),
                                 "stop_reason")) != KB_OK)
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    } else if (!strcmp(type, "message_stop")) {
        s->done = 1;
    }                   /* ping, content_block_start/stop, others: nothing */
    return KB_OK;
}

/* Keeps the event's data as one line of raw, then reads it. */
static kb_rc on_event(const kb_http_sse_event *ev, void *ctx, kb_err *err)
{
    reply_state *s = ctx;
    size_t at = s->raw.len;
    s->events++;
    if (kb_buf_append(&s->raw, ev->data, ev->data_len) != KB_OK ||
        kb_buf_putc(&s->raw, '\n') != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "%s: reply too long", s->subject);
    for (size_t i = at; i + 1 < s->raw.len; i++)
        if (s->raw.data[i] == '\n')
            s->raw.data[i] = ' ';           /* multi-line data: still one line */
    if (s->api == KB_LLM_OPENAI && !strcmp(ev->data, "[DONE]")) {
        s->done = 1;
        return KB_OK;
    }
    cJSON *j = cJSON_ParseWithLength(ev->data, ev->data_len);
    kb_rc rc;
    if (!cJSON_IsObject(j))
        rc = kb_err_set(err, KB_ERR_PARSE, "%s: stream event %zu is not JSON",
                        s->subject, s->events);
    else if (s->api == KB_LLM_OPENAI)
        rc = openai_object(s, j, 1, err);
    else
        rc = anthropic_event(s, ev->event, j, err);
    cJSON_Delete(j);
    return rc;
}

static kb_rc parse_body(reply_state *s, const kb_buf *body, kb_err *err)
{
    cJSON *j = cJSON_ParseWithLength(body->data ? body->data : "", body->len);
    kb_rc rc;
    if (!cJSON_IsObject(j))
        rc = kb_err_set(err, KB_ERR_PARSE, "%s: the reply is not JSON", s->subject);
    else if (s->api == KB_LLM_OPENAI)
        rc = openai_object(s, j, 0, err);
    else
        rc = anthropic_message(s, j, err);
    cJSON_Delete(j);
    return rc;
}

/* ------------------------------------------------------------ the call */

/* One HTTP request (with kb_http's retries) and its reply read into s. */
static kb_rc post(const kb_llm_opts *o, const char *url, const char *body,
                  int stream, reply_state *s, kb_http_response *resp,
                  kb_err *err)
{
    const char *headers[3] = { stream ? "Accept: text/event-stream"
                                      : "Accept: application/json", NULL, NULL };
    if (o->api == KB_LLM_ANTHROPIC)
        headers[1] = "anthropic-version: " ANTHROPIC_VERSION;
    kb_http_opts ho;
    kb_http_opts_default(&ho);
    ho.timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : LLM_TIMEOUT_MS;
    ho.low_speed_time_s = 0;          /* a model may think long: the timeout rules */
    ho.max_bytes = LLM_MAX_BODY;
    ho.max_retries = o->max_retries > 0 ? o->max_retries : 0;
    ho.error_excerpt = 300;           /* the server's reason, on one line */
    kb_http_request req = {
        .method = KB_HTTP_POST, .url = url, .headers = headers,
        .body = body, .body_len = strlen(body),
        .auth_key = o->api_key,
        .auth_header = o->api == KB_LLM_ANTHROPIC ? "x-api-key" : NULL,
        .subject = s->subject,
        .on_event = stream ? on_event : NULL, .event_ctx = s,
    };
    kb_rc rc = kb_http_perform(&req, &ho, resp, err);
    if (rc == KB_OK && resp->events == 0)
        rc = parse_body(s, &resp->body, err);        /* plain JSON */
    else if (rc == KB_OK && !s->done && !s->finish)
        rc = kb_err_set(err, KB_ERR_NET, "%s: the stream ended before its last "
                        "event (%s, after %zu events)", s->subject,
                        o->api == KB_LLM_OPENAI ? "no [DONE]" : "no message_stop",
                        resp->events);
    return rc;
}

/* A stream request refused as such (400 or 422 before any event): worth
 * one plain request. */
static int refused_stream(const kb_http_response *r)
{
    return r->events == 0 && (r->status == 400 || r->status == 422);
}

static void reply_state_reset(reply_state *s)
{
    kb_buf_reset(&s->text);
    kb_buf_reset(&s->raw);
    free(s->finish);
    s->finish = NULL;
    s->prompt_tokens = s->completion_tokens = 0;
    s->done = 0;
    s->events = 0;
}

static char *own(char *s)
{
    return s ? s : kb_strdup("");
}

kb_rc kb_llm_complete(const kb_llm_opts *o, const kb_llm_request *req,
                      kb_llm_reply *out, kb_err *err)
{
    double t0 = kb_now_ms();
    kb_llm_reply_release(out);
    reply_state s;
    memset(&s, 0, sizeof s);
    s.api = o->api;
    kb_buf_init(&s.text, LLM_MAX_BODY);
    kb_buf_init(&s.raw, LLM_MAX_BODY);
    kb_http_response resp;
    kb_http_response_init(&resp);
    kb_buf subject;
    kb_buf_init(&subject, 0);
    char *url = NULL;
    int stream = o->stream != 0;
    kb_rc rc = KB_OK;

    if (!o->url || !*o->url) {
        rc = kb_err_set(err, KB_ERR_USAGE, "no LLM endpoint: set KB_LLM_URL");
        goto out;
    }
    if (o->api == KB_LLM_ANTHROPIC && (!o->model || !*o->model)) {
        rc = kb_err_set(err, KB_ERR_USAGE,
                        "no model for the Anthropic API: set KB_LLM_MODEL");
        goto out;
    }
    if (!(url = endpoint(o)) ||
        kb_buf_printf(&subject, "LLM request to '%.*s' failed",
                      (int)strcspn(url, "?#"), url) != KB_OK) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    s.subject = subject.data;
    if (!(out->request_json = request_body(o, req, stream))) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    kb_err first;
    kb_err_clear(&first);
    rc = post(o, url, out->request_json, stream, &s, &resp, &first);
    out->attempts = resp.attempts;
    if (rc != KB_OK && stream && refused_stream(&resp)) {
        kb_log_debug("%s; asking again without streaming", first.msg);
        free(out->request_json);
        reply_state_reset(&s);
        stream = 0;
        kb_err_clear(&first);
        if (!(out->request_json = request_body(o, req, 0))) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            goto out;
        }
        rc = post(o, url, out->request_json, 0, &s, &resp, &first);
        out->attempts += resp.attempts;
    }
    if (rc != KB_OK) {
        blank_key(first.msg, o->api_key);
        kb_err_set(err, rc, "%s", first.msg);
    } else if (!s.text.len) {
        rc = kb_err_set(err, KB_ERR_PARSE, "%s: the reply has no text "
                        "(finish reason '%s')", s.subject, s.finish ? s.finish : "");
    }
    out->streamed = resp.events > 0;
    out->prompt_tokens = s.prompt_tokens;
    out->completion_tokens = s.completion_tokens;
    out->finish_reason = s.finish;
    s.finish = NULL;
    out->text = kb_buf_detach(&s.text);
    /* a stream's events as they came; otherwise the body */
    out->raw = out->streamed ? kb_buf_detach(&s.raw)
             : resp.body.data ? kb_buf_detach(&resp.body) : NULL;
out:
    out->text = own(out->text);
    out->finish_reason = own(out->finish_reason);
    out->request_json = own(out->request_json);
    out->raw = own(out->raw);
    blank_key(out->text, o->api_key);
    blank_key(out->raw, o->api_key);
    if (!out->text || !out->finish_reason || !out->request_json || !out->raw)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    out->ms = kb_now_ms() - t0;
    free(s.finish);
    kb_buf_release(&s.text);
    kb_buf_release(&s.raw);
    kb_buf_release(&subject);
    kb_http_response_release(&resp);
    free(url);
    return rc;
}
