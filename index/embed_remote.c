/*
 * embed_remote.c - an OpenAI-compatible /v1/embeddings client (Ollama,
 * vLLM, llama.cpp server, TEI, OpenAI) through libcurl:
 *   POST {"model": M, "input": [texts]}  ->  {"data": [{"index", "embedding"}]}
 * Batches, timeouts, retries on 429/5xx/transient network errors honouring
 * Retry-After, a strictly validated response, L2-normalised rows. The API
 * key goes only into the Authorization header; it is never logged nor put
 * into an error message.
 */
#include "index/index_int.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_BODY (256u << 20)

struct kb_remote {
    char *url;
    char *shown_url;       /* url without its query string, for messages */
    char *model;
    char *auth;            /* "Authorization: Bearer KEY" or NULL */
    kb_remote_opts o;
    int dim;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static long env_long(const char *name, long dflt)
{
    long v;
    const char *s = getenv(name);
    if (s && kb_parse_long(s, 1, 86400000L, &v) == KB_OK)
        return v;
    return dflt;
}

void kb_remote_opts_default(kb_remote_opts *o)
{
    o->timeout_ms = env_long("KB_EMBED_TIMEOUT_MS", 60000);
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
    if (api_key && *api_key) {
        kb_buf b;
        kb_buf_init(&b, 0);
        kb_buf_printf(&b, "Authorization: Bearer %s", api_key);
        r->auth = kb_buf_detach(&b);
    }
    if (!r->url || !r->shown_url || !r->model || (api_key && *api_key && !r->auth)) {
        kb_remote_free(r);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    pthread_once(&curl_once, curl_init);
    *out = r;
    return KB_OK;
}

void kb_remote_free(kb_remote *r)
{
    if (!r)
        return;
    free(r->url);
    free(r->shown_url);
    free(r->model);
    if (r->auth) {
        memset(r->auth, 0, strlen(r->auth));
        free(r->auth);
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

typedef struct {
    kb_buf body;
    long retry_after_ms;   /* -1: none */
} response;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    response *res = ud;
    if (kb_buf_append(&res->body, p, size * n) != KB_OK)
        return 0;    /* over the cap: curl fails with CURLE_WRITE_ERROR */
    return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    response *res = ud;
    size_t len = size * n;
    static const char name[] = "retry-after:";
    if (len > sizeof name - 1 && !strncasecmp(p, name, sizeof name - 1)) {
        char v[128];
        size_t vl = len - (sizeof name - 1);
        if (vl >= sizeof v)
            vl = sizeof v - 1;
        memcpy(v, p + sizeof name - 1, vl);
        v[vl] = '\0';
        char *s = v + strspn(v, " \t");
        s[strcspn(s, "\r\n")] = '\0';
        long secs;
        if (kb_parse_long(s, 0, 86400, &secs) == KB_OK) {
            res->retry_after_ms = secs * 1000;
        } else {
            time_t when = curl_getdate(s, NULL);
            if (when > 0) {
                double d = difftime(when, time(NULL));
                res->retry_after_ms = d > 0 ? (long)(d * 1000) : 0;
            }
        }
    }
    return len;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int transient(CURLcode c)
{
    return c == CURLE_COULDNT_CONNECT || c == CURLE_OPERATION_TIMEDOUT ||
           c == CURLE_SEND_ERROR || c == CURLE_RECV_ERROR ||
           c == CURLE_GOT_NOTHING || c == CURLE_PARTIAL_FILE ||
           c == CURLE_COULDNT_RESOLVE_HOST;
}

/* POSTs body to r->url, retrying; on success res->body holds a 200's body. */
static kb_rc post(kb_remote *r, const char *body, response *res, kb_err *err)
{
    CURL *c = curl_easy_init();
    struct curl_slist *hdrs = NULL;
    kb_rc rc = KB_OK;
    if (!c) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "cannot start a curl handle");
        goto out;
    }
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:");
    if (r->auth)
        hdrs = curl_slist_append(hdrs, r->auth);
    if (!hdrs) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int attempt = 0;; attempt++) {
        kb_buf_reset(&res->body);
        res->retry_after_ms = -1;
        curl_easy_reset(c);
        curl_easy_setopt(c, CURLOPT_URL, r->url);
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, res);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, res);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, r->o.timeout_ms);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, r->o.connect_timeout_ms);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
        curl_easy_setopt(c, CURLOPT_USERAGENT, "kb");
        CURLcode cc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (cc == CURLE_OK && status == 200)
            goto out;
        int retry = cc != CURLE_OK ? transient(cc) : (status == 429 || status >= 500);
        if (!retry || attempt >= r->o.max_retries) {
            if (cc != CURLE_OK) {
                rc = kb_err_set(err, KB_ERR_NET, "embedding request to '%s' failed: %s%s",
                                r->shown_url, curl_easy_strerror(cc),
                                attempt ? " (after retries)" : "");
            } else {
                /* a short, single-line excerpt of the server's reason */
                char snip[160];
                size_t sl = res->body.len < sizeof snip - 1 ? res->body.len : sizeof snip - 1;
                memcpy(snip, res->body.data ? res->body.data : "", sl);
                snip[sl] = '\0';
                for (char *q = snip; *q; q++)
                    if (*q == '\n' || *q == '\r')
                        *q = ' ';
                rc = kb_err_set(err, KB_ERR_NET,
                                "embedding request to '%s' failed: HTTP %ld%s%s%s",
                                r->shown_url, status, sl ? ": " : "", snip,
                                attempt ? " (after retries)" : "");
            }
            goto out;
        }
        long wait = r->o.retry_base_ms << (attempt < 16 ? attempt : 16);
        if (res->retry_after_ms >= 0)
            wait = res->retry_after_ms;
        if (wait > r->o.retry_max_ms)
            wait = r->o.retry_max_ms;
        kb_log_debug("embedder: %s from '%s', retrying in %ld ms",
                     cc != CURLE_OK ? curl_easy_strerror(cc) : "HTTP error",
                     r->shown_url, wait);
        sleep_ms(wait);
    }
out:
    curl_slist_free_all(hdrs);
    if (c)
        curl_easy_cleanup(c);
    return rc;
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
    response res;
    kb_buf_init(&res.body, MAX_BODY);
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
    kb_buf_release(&res.body);
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
