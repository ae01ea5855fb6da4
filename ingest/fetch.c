/* fetch.c - GETting documents over HTTP(S) through kb_http, with a cache.
 *
 * kb_http makes the request (retries, caps, redirects, the http(s)-only
 * rule); this file adds the conditional headers and the cache. The cache
 * entry of a URL is two files under cache_dir named by the SHA-256 of the
 * URL: the body, and a JSON sidecar with the URL, the validators, the
 * fetch time and the body's SHA-256. The body is written
 * before the sidecar, so a crash between the two leaves a sidecar whose
 * hash does not match: such an entry is ignored, never served. */
#include "ingest/ingest_int.h"
#include "kb/kb_int.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FETCH_MAX_WAIT_MS 30000L      /* cap of one backoff or Retry-After */
#define FETCH_SIDECAR_MAX (64 * 1024)

void kb_fetch_opts_default(kb_fetch_opts *opts)
{
    opts->connect_timeout_s = 10;
    opts->timeout_s = 60;
    opts->low_speed_time_s = 30;
    opts->max_retries = 3;
    opts->retry_base_ms = 500;
    opts->max_bytes = (size_t)64 << 20;
    opts->max_redirects = 5;
}

void kb_fetch_result_init(kb_fetch_result *r)
{
    memset(r, 0, sizeof *r);
    kb_buf_init(&r->body, 0);
}

void kb_fetch_result_release(kb_fetch_result *r)
{
    kb_buf_release(&r->body);
    free(r->etag);
    free(r->last_modified);
    free(r->effective_url);
    r->etag = r->last_modified = r->effective_url = NULL;
    r->status = 0;
    r->from_cache = 0;
    r->attempts = 0;
}

/* ------------------------------------------------------------------ cache */

typedef struct {
    int valid;            /* body present and matching the sidecar */
    char *body_path;
    char *meta_path;
    kb_buf body;
    char *etag;
    char *last_modified;
    char *fetched_at;
} cache_entry;

static void cache_release(cache_entry *c)
{
    free(c->body_path);
    free(c->meta_path);
    kb_buf_release(&c->body);
    free(c->etag);
    free(c->last_modified);
    free(c->fetched_at);
    memset(c, 0, sizeof *c);
}

static char *json_str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) && v->valuestring ? kb_strdup(v->valuestring)
                                               : NULL;
}

/* Sets the paths and loads the entry of url if there is a sound one. A
 * missing, unreadable or inconsistent entry just leaves valid = 0: the
 * cache is an optimisation, never a reason to fail. */
static kb_rc cache_load(const char *cache_dir, const char *url, size_t max_bytes,
                        cache_entry *c, kb_err *err)
{
    char key[65], hex[65];
    kb_sha256_hex(url, strlen(url), key);
    kb_buf name;
    kb_buf_init(&name, 0);
    kb_buf meta;
    kb_buf_init(&meta, 0);
    cJSON *root = NULL;
    kb_rc rc = KB_OK;

    kb_buf_init(&c->body, max_bytes);
    c->body_path = kb_path_join(cache_dir, key);
    if (kb_buf_printf(&name, "%s.json", key) == KB_OK)
        c->meta_path = kb_path_join(cache_dir, name.data);
    if (!c->body_path || !c->meta_path) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (kb_read_file(c->meta_path, FETCH_SIDECAR_MAX, &meta, NULL) != KB_OK)
        goto out;
    root = cJSON_ParseWithLength(meta.data, meta.len);
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(root, "url");
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(root, "sha256");
    if (!cJSON_IsString(u) || strcmp(u->valuestring, url) != 0 ||
        !cJSON_IsString(sha))
        goto out;
    if (kb_read_file(c->body_path, max_bytes, &c->body, NULL) != KB_OK)
        goto out;
    kb_sha256_hex(c->body.data ? c->body.data : "", c->body.len, hex);
    if (strcmp(hex, sha->valuestring) != 0) {
        kb_log_debug("cache entry of '%s' does not match its sidecar; ignored",
                     url);
        goto out;
    }
    c->etag = json_str(root, "etag");
    c->last_modified = json_str(root, "last_modified");
    c->fetched_at = json_str(root, "fetched_at");
    c->valid = 1;
out:
    if (!c->valid)
        kb_buf_reset(&c->body);
    cJSON_Delete(root);
    kb_buf_release(&meta);
    kb_buf_release(&name);
    return rc;
}

static void utc_now(char out[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static kb_rc cache_write_meta(const cache_entry *c, const char *url,
                              const kb_fetch_result *r, const char *fetched_at,
                              kb_err *err)
{
    char hex[65], now[32];
    kb_sha256_hex(r->body.data ? r->body.data : "", r->body.len, hex);
    utc_now(now);
    kb_rc rc = KB_OK;
    char *text = NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root ||
        !cJSON_AddStringToObject(root, "url", url) ||
        !cJSON_AddStringToObject(root, "effective_url",
                                 r->effective_url ? r->effective_url : url) ||
        !(r->etag ? cJSON_AddStringToObject(root, "etag", r->etag)
                  : cJSON_AddNullToObject(root, "etag")) ||
        !(r->last_modified
              ? cJSON_AddStringToObject(root, "last_modified", r->last_modified)
              : cJSON_AddNullToObject(root, "last_modified")) ||
        !cJSON_AddStringToObject(root, "fetched_at", fetched_at ? fetched_at : now) ||
        !cJSON_AddStringToObject(root, "checked_at", now) ||
        !cJSON_AddNumberToObject(root, "size", (double)r->body.len) ||
        !cJSON_AddStringToObject(root, "sha256", hex) ||
        !(text = cJSON_Print(root))) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    rc = kb_write_file_atomic(c->meta_path, text, strlen(text), err);
out:
    free(text);
    cJSON_Delete(root);
    return rc;
}

/* A 200: the body first, then the sidecar that vouches for it. */
static kb_rc cache_store(const char *cache_dir, const cache_entry *c,
                         const char *url, const kb_fetch_result *r, kb_err *err)
{
    kb_rc rc = kb_mkdirs(cache_dir, err);
    if (rc == KB_OK)
        rc = kb_write_file_atomic(c->body_path, r->body.data ? r->body.data : "",
                                  r->body.len, err);
    if (rc == KB_OK)
        rc = cache_write_meta(c, url, r, NULL, err);
    return rc;
}

/* ------------------------------------------------------------------ fetch */

/* Adds "NAME: VALUE" to the header list when value is set. */
static kb_rc add_header(kb_buf *lines, size_t *n, const char *name,
                        const char *value)
{
    if (!value)
        return KB_OK;
    kb_buf *b = &lines[(*n)++];
    return kb_buf_printf(b, "%s: %s", name, value);
}

static void take_validators(kb_http_response *resp, kb_fetch_result *out)
{
    free(out->etag);
    free(out->last_modified);
    free(out->effective_url);
    out->etag = resp->etag;
    out->last_modified = resp->last_modified;
    out->effective_url = resp->effective_url;
    resp->etag = resp->last_modified = resp->effective_url = NULL;
}

static void http_opts_of(const kb_fetch_opts *o, size_t max_bytes,
                         kb_http_opts *h)
{
    kb_http_opts_default(h);
    h->connect_timeout_ms = (o->connect_timeout_s > 0 ? o->connect_timeout_s : 10) * 1000;
    h->timeout_ms = (o->timeout_s > 0 ? o->timeout_s : 60) * 1000;
    h->low_speed_time_s = o->low_speed_time_s > 0 ? o->low_speed_time_s : 30;
    h->max_bytes = max_bytes;
    h->max_redirects = o->max_redirects >= 0 ? o->max_redirects : 5;
    h->max_retries = o->max_retries > 0 ? o->max_retries : 0;
    h->retry_base_ms = o->retry_base_ms > 0 ? o->retry_base_ms : 0;
    h->retry_max_ms = FETCH_MAX_WAIT_MS;
}

/* url as messages show it, which sources.last_error keeps: without a
 * user and password before the host, a query string or a fragment, where
 * tokens travel (caller frees; NULL out of memory). */
static char *shown_url(const char *url)
{
    const char *host = strstr(url, "://");
    host = host ? host + 3 : url;
    size_t hlen = strcspn(host, "/?#");
    const char *at = memchr(host, '@', hlen);
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_buf_append(&b, url, (size_t)(host - url));
    if (rc == KB_OK && at)
        rc = kb_buf_puts(&b, "...@");
    const char *rest = at ? at + 1 : host;
    if (rc == KB_OK)
        rc = kb_buf_append(&b, rest, strcspn(rest, "?#"));
    if (rc == KB_OK && rest[strcspn(rest, "?#")])
        rc = kb_buf_puts(&b, rest[strcspn(rest, "?#")] == '?' ? "?..." : "#...");
    return kb_buf_finish(&b, rc);
}

/* A 304: the cached copy is the body, its validators kept where the reply
 * omits them; the cache's record notes the check. */
static kb_rc take_cached(kb_http_response *resp, cache_entry *cache,
                         const char *url, const char *shown, kb_fetch_result *out,
                         kb_err *err)
{
    if (!cache->valid)
        return kb_err_set(err, KB_ERR_NET,
                          "cannot fetch '%s': HTTP 304 without a cached copy", shown);
    out->status = 304;
    out->from_cache = 1;
    take_validators(resp, out);
    if (!out->etag)
        out->etag = kb_strdup(cache->etag);
    if (!out->last_modified)
        out->last_modified = kb_strdup(cache->last_modified);
    kb_buf_release(&out->body);
    out->body = cache->body;              /* moves the buffer */
    out->body.max = 0;
    kb_buf_init(&cache->body, 0);
    kb_err cerr;
    kb_err_clear(&cerr);
    if (cache_write_meta(cache, url, out, cache->fetched_at, &cerr) != KB_OK)
        kb_log_warn("cannot update the cache of '%s': %s", shown, cerr.msg);
    return KB_OK;
}

/* A 2xx: the reply's body and validators, cached (a 200) where a cache is
 * kept; a cache that cannot be written costs only a warning. */
static void take_fresh(kb_http_response *resp, const char *cache_dir,
                       cache_entry *cache, const char *url, const char *shown,
                       kb_fetch_result *out)
{
    out->status = resp->status;
    take_validators(resp, out);
    kb_buf_release(&out->body);
    out->body = resp->body;               /* moves the buffer */
    out->body.max = 0;
    kb_buf_init(&resp->body, 0);
    if (cache_dir && resp->status == 200) {
        kb_err cerr;
        kb_err_clear(&cerr);
        if (cache_store(cache_dir, cache, url, out, &cerr) != KB_OK)
            kb_log_warn("cannot cache '%s': %s", shown, cerr.msg);
    }
}

kb_rc kb_fetch_url(const char *url, const char *cache_dir,
                   const kb_fetch_opts *opts, kb_fetch_result *out,
                   kb_err *err)
{
    kb_fetch_opts defaults;
    if (!opts) {
        kb_fetch_opts_default(&defaults);
        opts = &defaults;
    }
    size_t max_bytes = opts->max_bytes ? opts->max_bytes : ((size_t)64 << 20);
    cache_entry cache;
    memset(&cache, 0, sizeof cache);
    kb_http_opts ho;
    http_opts_of(opts, max_bytes, &ho);
    kb_http_response resp;
    kb_http_response_init(&resp);
    kb_buf subject;
    kb_buf_init(&subject, 0);
    kb_buf lines[2];
    kb_buf_init(&lines[0], 0);
    kb_buf_init(&lines[1], 0);
    size_t nlines = 0;
    const char *headers[3] = { NULL, NULL, NULL };
    kb_rc rc = KB_OK;

    kb_fetch_result_release(out);
    kb_fetch_result_init(out);
    char *shown = shown_url(url);
    if (!shown || kb_buf_printf(&subject, "cannot fetch '%s'", shown) != KB_OK) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (cache_dir && (rc = cache_load(cache_dir, url, max_bytes, &cache, err)) != KB_OK)
        goto out;
    if (cache.valid &&
        (add_header(lines, &nlines, "If-None-Match", cache.etag) != KB_OK ||
         add_header(lines, &nlines, "If-Modified-Since", cache.last_modified) != KB_OK)) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nlines; i++)
        headers[i] = lines[i].data;

    kb_http_request req = { .method = KB_HTTP_GET, .url = url, .headers = headers,
                            .subject = subject.data };
    rc = kb_http_perform(&req, &ho, &resp, err);
    out->attempts = resp.attempts;
    if (rc == KB_OK && resp.status == 304)
        rc = take_cached(&resp, &cache, url, shown, out, err);
    else if (rc == KB_OK)
        take_fresh(&resp, cache_dir, &cache, url, shown, out);
out:
    if (rc != KB_OK) {
        kb_buf_release(&out->body);
        kb_buf_init(&out->body, 0);
    }
    kb_http_response_release(&resp);
    kb_buf_release(&lines[0]);
    kb_buf_release(&lines[1]);
    kb_buf_release(&subject);
    free(shown);
    cache_release(&cache);
    return rc;
}
