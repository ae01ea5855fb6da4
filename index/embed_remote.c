/*
 * embed_remote.c - an OpenAI-compatible /v1/embeddings client (Ollama,
 * vLLM, llama.cpp server, TEI, OpenAI) through kb_http:
 *   POST {"model": M, "input": [texts]}  ->  {"data": [{"index", "embedding"}]}
 * Batches, a strictly validated response, L2-normalised rows; kb_http does
 * the timeouts and the retries on 429/5xx/transient network errors
 * honouring Retry-After. The API key goes only into the Authorization
 * header; it is never logged nor put into an error message.
 */
#include "index/index.h"
#include "kb/kb_int.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BODY (256u << 20)

struct kb_remote {
    char *url;
    char *shown_url;       /* url without its query string, for messages */
    char *subject;         /* "embedding request to 'SHOWN_URL' failed" */
    char *model;
    char *api_key;         /* NULL: none */
    kb_remote_opts o;
    int dim;
};

void kb_remote_opts_default(kb_remote_opts *o)
{
    o->timeout_ms = 60000;
    o->connect_timeout_ms = 10000;
    o->max_retries = 4;
    o->retry_base_ms = 500;
    o->retry_max_ms = 30000;
    o->batch = 64;
}

kb_rc kb_remote_open(const char *url, const char *model, const char *api_key,
                     const kb_remote_opts *opts, kb_remote **out, kb_err *err)
{
    *out = NULL;
    if (!url || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)))
        return kb_err_set(err, KB_ERR_USAGE,
                          "embedding endpoint '%s' is not an http(s) URL",
                          url ? url : "");
    if (!model || !*model)
        return kb_err_set(err, KB_ERR_USAGE,
                          "no embedding model given for '%s'; set KB_EMBED_MODEL", url);
    kb_remote *r = calloc(1, sizeof *r);
    if (!r)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (opts)
        r->o = *opts;
    else
        kb_remote_opts_default(&r->o);
    if (!r->o.batch)
        r->o.batch = 64;
    r->url = kb_strdup(url);
    r->shown_url = kb_strndup(url, strcspn(url, "?#"));
    r->model = kb_strdup(model);
    if (api_key && *api_key)
        r->api_key = kb_strdup(api_key);
    kb_buf subject;
    kb_buf_init(&subject, 0);
    if (r->shown_url &&
        kb_buf_printf(&subject, "embedding request to '%s' failed", r->shown_url) == KB_OK)
        r->subject = kb_buf_detach(&subject);
    kb_buf_release(&subject);
    if (!r->url || !r->shown_url || !r->subject || !r->model ||
        (api_key && *api_key && !r->api_key)) {
        kb_remote_free(r);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    *out = r;
    return KB_OK;
}

void kb_remote_free(kb_remote *r)
{
    if (!r)
        return;
    free(r->url);
    free(r->shown_url);
    free(r->subject);
    free(r->model);
    if (r->api_key) {
        memset(r->api_key, 0, strlen(r->api_key));
        free(r->api_key);
    }
    free(r);
}

int kb_remote_dim(const kb_remote *r)
{
    return r->dim;
}

const char *kb_remote_model(const kb_remote *r)
{
    return r->model;
}

/* ------------------------------------------------------------ HTTP */

/* POSTs body to r->url through kb_http (retries, Retry-After, the key in
 * its header only); on success res holds a 2xx reply. */
static kb_rc post(kb_remote *r, const char *body, kb_http_response *res,
                  kb_err *err)
{
    static const char *const headers[] = { "Accept: application/json", NULL };
    kb_http_opts o;
    kb_http_opts_default(&o);
    o.connect_timeout_ms = r->o.connect_timeout_ms;
    o.timeout_ms = r->o.timeout_ms;
    o.low_speed_time_s = 0;         /* a server may think long: the timeout rules */
    o.max_bytes = MAX_BODY;
    o.max_retries = r->o.max_retries;
    o.retry_base_ms = r->o.retry_base_ms;
    o.retry_max_ms = r->o.retry_max_ms;
    o.error_excerpt = 159;          /* the server's reason, on one line */
    kb_http_request req = {
        .method = KB_HTTP_POST, .url = r->url, .headers = headers,
        .body = body, .body_len = strlen(body),
        .auth_key = r->api_key, .subject = r->subject,
    };
    return kb_http_perform(&req, &o, res, err);
}

/* ------------------------------------------------------------ protocol */

/* Parses a response for n inputs into out (NULL: only learn the dimension). */
static kb_rc parse_response(kb_remote *r, const kb_buf *body, size_t n,
                            float *out, kb_err *err)
{
    kb_rc rc = KB_OK;
    unsigned char *seen = calloc(n ? n : 1, 1);
    cJSON *root = cJSON_ParseWithLength(body->data ? body->data : "", body->len);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
    if (!seen) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (!cJSON_IsObject(root) || !cJSON_IsArray(data)) {
        rc = kb_err_set(err, KB_ERR_PARSE,
                        "malformed response from '%s': not a JSON object with a 'data' array",
                        r->shown_url);
        goto out;
    }
    if ((size_t)cJSON_GetArraySize(data) != n) {
        rc = kb_err_set(err, KB_ERR_PARSE,
                        "malformed response from '%s': %d embeddings for %zu inputs",
                        r->shown_url, cJSON_GetArraySize(data), n);
        goto out;
    }
    int dim = r->dim;
    size_t pos = 0;
    for (const cJSON *item = data->child; item; item = item->next, pos++) {
        const cJSON *emb = cJSON_GetObjectItemCaseSensitive(item, "embedding");
        const cJSON *idx = cJSON_GetObjectItemCaseSensitive(item, "index");
        size_t at = pos;
        if (idx) {
            if (!cJSON_IsNumber(idx) || idx->valuedouble < 0 ||
                idx->valuedouble >= (double)n || idx->valuedouble != (double)(size_t)idx->valuedouble) {
                rc = kb_err_set(err, KB_ERR_PARSE,
                                "malformed response from '%s': bad index in data[%zu]",
                                r->shown_url, pos);
                goto out;
            }
            at = (size_t)idx->valuedouble;
        }
        if (seen[at]) {
            rc = kb_err_set(err, KB_ERR_PARSE,
                            "malformed response from '%s': index %zu appears twice",
                            r->shown_url, at);
            goto out;
        }
        seen[at] = 1;
        if (!cJSON_IsArray(emb) || cJSON_GetArraySize(emb) < 1) {
            rc = kb_err_set(err, KB_ERR_PARSE,
                            "malformed response from '%s': data[%zu] has no 'embedding' array",
                            r->shown_url, pos);
            goto out;
        }
        int d = cJSON_GetArraySize(emb);
        if (!dim)
            dim = d;
        if (d != dim) {
            rc = kb_err_set(err, KB_ERR_MISMATCH,
                            "embedding from '%s' has dimension %d, expected %d",
                            r->shown_url, d, dim);
            goto out;
        }
        double norm = 0;
        int k = 0;
        for (const cJSON *v = emb->child; v; v = v->next, k++) {
            if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
                rc = kb_err_set(err, KB_ERR_PARSE,
                                "malformed response from '%s': data[%zu].embedding[%d] is not a finite number",
                                r->shown_url, pos, k);
                goto out;
            }
            norm += v->valuedouble * v->valuedouble;
        }
        if (norm <= 0) {
            rc = kb_err_set(err, KB_ERR_PARSE,
                            "malformed response from '%s': data[%zu] is a zero vector",
                            r->shown_url, pos);
            goto out;
        }
        if (out) {
            norm = sqrt(norm);
            float *o = out + at * (size_t)d;
            k = 0;
            for (const cJSON *v = emb->child; v; v = v->next, k++)
                o[k] = (float)(v->valuedouble / norm);
        }
    }
    r->dim = dim;
out:
    cJSON_Delete(root);
    free(seen);
    return rc;
}

static kb_rc request(kb_remote *r, const char *const *texts, size_t n,
                     float *out, kb_err *err)
{
    kb_rc rc = KB_OK;
    kb_http_response res;
    kb_http_response_init(&res);
    char *body = NULL;
    cJSON *req = cJSON_CreateObject();
    cJSON *input = cJSON_CreateArray();
    if (!req || !input || !cJSON_AddStringToObject(req, "model", r->model)) {
        cJSON_Delete(input);
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    cJSON_AddItemToObject(req, "input", input);
    for (size_t i = 0; i < n; i++) {
        /* an empty input is an error for several servers */
        const char *t = texts[i] && *texts[i] ? texts[i] : " ";
        cJSON *s = cJSON_CreateString(t);
        if (!s || !cJSON_AddItemToArray(input, s)) {
            cJSON_Delete(s);
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    body = cJSON_PrintUnformatted(req);
    if (!body) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    rc = post(r, body, &res, err);
    if (rc == KB_OK)
        rc = parse_response(r, &res.body, n, out, err);
out:
    cJSON_Delete(req);
    free(body);
    kb_http_response_release(&res);
    return rc;
}

kb_rc kb_remote_probe(kb_remote *r, kb_err *err)
{
    static const char *const probe[] = { "kb embedding dimension probe" };
    return request(r, probe, 1, NULL, err);
}

kb_rc kb_remote_embed(kb_remote *r, const char *const *texts, size_t n,
                      float *out, kb_err *err)
{
    if (!r->dim && n) {
        kb_rc rc = kb_remote_probe(r, err);
        if (rc != KB_OK)
            return rc;
    }
    for (size_t i = 0; i < n; i += r->o.batch) {
        size_t nb = n - i < r->o.batch ? n - i : r->o.batch;
        kb_rc rc = request(r, texts + i, nb, out + i * (size_t)r->dim, err);
        if (rc != KB_OK)
            return rc;
    }
    return KB_OK;
}
