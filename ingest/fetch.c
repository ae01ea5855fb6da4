/* fetch.c - GETting documents over HTTP(S) with libcurl, with a cache.
 *
 * One easy handle per kb_fetch_url call; attempts reuse it (and its
 * connection). The cache entry of a URL is two files under cache_dir named
 * by the SHA-256 of the URL: the body, and a JSON sidecar with the URL, the
 * validators, the fetch time and the body's SHA-256. The body is written
 * before the sidecar, so a crash between the two leaves a sidecar whose
 * hash does not match: such an entry is ignored, never served. */
#include "kb/kb.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define FETCH_USER_AGENT "kb/0.1"
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

/* ------------------------------------------------------------------ global */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
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

/* ------------------------------------------------------------------ transfer */

typedef struct {
    CURL *h;
    kb_buf *body;
    size_t max_bytes;
    size_t received;      /* every body byte seen this attempt, kept or not */
    int too_big;
    int oom;
} sink;

/* Keeps the body of a 2xx, counts (and drops) any other; stops the
 * transfer as soon as the cap is passed. */
static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    sink *s = arg;
    size_t n = size * nmemb;
    if (n > s->max_bytes - s->received) {
        s->too_big = 1;
        return 0;
    }
    s->received += n;
    long code = 0;
    curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &code);
    if (code / 100 != 2)
        return n;
    if (kb_buf_append(s->body, data, n) != KB_OK) {
        s->oom = 1;       /* the cap was checked above */
        return 0;
    }
    return n;
}

static char *last_header(CURL *h, const char *name)
{
    struct curl_header *hdr = NULL;
    if (curl_easy_header(h, name, 0, CURLH_HEADER, -1, &hdr) != CURLHE_OK ||
        !hdr->value || !*hdr->value)
        return NULL;
    return kb_strdup(hdr->value);
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

static kb_rc setup_handle(CURL *h, const char *url, const kb_fetch_opts *o,
                          sink *s, char *errbuf, struct curl_slist *hdrs)
{
    long low_speed = o->low_speed_time_s > 0 ? o->low_speed_time_s : 30;
    CURLcode c = CURLE_OK;
#define SET(opt, val) if (c == CURLE_OK) c = curl_easy_setopt(h, opt, val)
    SET(CURLOPT_URL, url);
    SET(CURLOPT_USERAGENT, FETCH_USER_AGENT);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_ERRORBUFFER, errbuf);
    SET(CURLOPT_FOLLOWLOCATION, 1L);
    SET(CURLOPT_MAXREDIRS, o->max_redirects >= 0 ? o->max_redirects : 5L);
#if LIBCURL_VERSION_NUM >= 0x075500
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    SET(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    SET(CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    SET(CURLOPT_CONNECTTIMEOUT, o->connect_timeout_s > 0 ? o->connect_timeout_s : 10L);
    SET(CURLOPT_TIMEOUT, o->timeout_s > 0 ? o->timeout_s : 60L);
    SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
    SET(CURLOPT_LOW_SPEED_TIME, low_speed);
    SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)s->max_bytes);
    SET(CURLOPT_ACCEPT_ENCODING, "");   /* the cap applies to decoded bytes */
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, s);
    SET(CURLOPT_HTTPHEADER, hdrs);
#undef SET
    return c == CURLE_OK ? KB_OK : KB_ERR_INTERNAL;
}

/* Appends "Name: value" to *list; a NULL value adds nothing. */
static kb_rc add_header(struct curl_slist **list, const char *name,
                        const char *value)
{
    if (!value)
        return KB_OK;
    kb_buf line;
    kb_buf_init(&line, 0);
    kb_rc rc = kb_buf_printf(&line, "%s: %s", name, value);
    struct curl_slist *t = rc == KB_OK ? curl_slist_append(*list, line.data) : NULL;
    if (t)
        *list = t;
    else
        rc = KB_ERR_NOMEM;
    kb_buf_release(&line);
    return rc;
}

static void take_validators(CURL *h, kb_fetch_result *out)
{
    free(out->etag);
    free(out->last_modified);
    free(out->effective_url);
    out->etag = last_header(h, "ETag");
    out->last_modified = last_header(h, "Last-Modified");
    char *eff = NULL;
    curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &eff);
    out->effective_url = kb_strdup(eff);
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
    int max_attempts = 1 + (opts->max_retries > 0 ? opts->max_retries : 0);
    long base_ms = opts->retry_base_ms > 0 ? opts->retry_base_ms : 0;
    cache_entry cache;
    memset(&cache, 0, sizeof cache);
    kb_buf body;
    kb_buf_init(&body, max_bytes);
    struct curl_slist *hdrs = NULL;
    CURL *h = NULL;
    char errbuf[CURL_ERROR_SIZE];
    kb_rc rc = KB_OK;

    kb_fetch_result_release(out);
    kb_fetch_result_init(out);
    if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
        return kb_err_set(err, KB_ERR_USAGE,
                          "cannot fetch '%s': only http and https URLs are supported",
                          url);
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_rc != CURLE_OK)
        return kb_err_set(err, KB_ERR_INTERNAL, "cannot fetch '%s': %s", url,
                          curl_easy_strerror(curl_init_rc));

    if (cache_dir && (rc = cache_load(cache_dir, url, max_bytes, &cache, err)) != KB_OK)
        goto out;
    if (cache.valid &&
        (add_header(&hdrs, "If-None-Match", cache.etag) != KB_OK ||
         add_header(&hdrs, "If-Modified-Since", cache.last_modified) != KB_OK)) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (!(h = curl_easy_init())) {
        rc = kb_err_set(err, KB_ERR_INTERNAL, "cannot fetch '%s': cannot start libcurl",
                        url);
        goto out;
    }
    sink s = { h, &body, max_bytes, 0, 0, 0 };
    if (setup_handle(h, url, opts, &s, errbuf, hdrs) != KB_OK) {
        rc = kb_err_set(err, KB_ERR_INTERNAL, "cannot fetch '%s': cannot set up libcurl",
                        url);
        goto out;
    }

    for (int attempt = 1; ; attempt++) {
        kb_buf_reset(&body);
        s.received = 0;
        s.too_big = s.oom = 0;
        errbuf[0] = '\0';
        out->attempts = attempt;
        CURLcode c = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        char after[48] = "";
        if (attempt > 1)
            snprintf(after, sizeof after, " (after %d attempts)", attempt);

        if (s.too_big || c == CURLE_FILESIZE_EXCEEDED) {
            rc = kb_err_set(err, KB_ERR_NET, "cannot fetch '%s': body exceeds %zu bytes",
                            url, max_bytes);
            goto out;
        }
        if (s.oom) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "cannot fetch '%s': out of memory", url);
            goto out;
        }
        if (c == CURLE_TOO_MANY_REDIRECTS) {
            rc = kb_err_set(err, KB_ERR_NET,
                            "cannot fetch '%s': too many redirects (more than %ld)",
                            url, opts->max_redirects >= 0 ? opts->max_redirects : 5L);
            goto out;
        }
        if (c != CURLE_OK) {
            if (!transient_curl_error(c) || attempt >= max_attempts) {
                rc = kb_err_set(err, KB_ERR_NET, "cannot fetch '%s': %s%s", url,
                                curl_reason(c, errbuf), after);
                goto out;
            }
        } else if (status / 100 == 2) {
            out->status = status;
            take_validators(h, out);
            kb_buf_release(&out->body);
            out->body = body;             /* moves the buffer */
            out->body.max = 0;
            kb_buf_init(&body, 0);
            if (cache_dir && status == 200) {
                kb_err cerr;
                kb_err_clear(&cerr);
                if (cache_store(cache_dir, &cache, url, out, &cerr) != KB_OK)
                    kb_log_warn("cannot cache '%s': %s", url, cerr.msg);
            }
            goto out;
        } else if (status == 304) {
            if (!cache.valid) {
                rc = kb_err_set(err, KB_ERR_NET,
                                "cannot fetch '%s': HTTP 304 without a cached copy", url);
                goto out;
            }
            out->status = 304;
            out->from_cache = 1;
            take_validators(h, out);
            /* a 304 may omit validators: keep those of the cached copy */
            if (!out->etag)
                out->etag = kb_strdup(cache.etag);
            if (!out->last_modified)
                out->last_modified = kb_strdup(cache.last_modified);
            kb_buf_release(&out->body);
            out->body = cache.body;
            out->body.max = 0;
            kb_buf_init(&cache.body, 0);
            kb_err cerr;
            kb_err_clear(&cerr);
            if (cache_write_meta(&cache, url, out, cache.fetched_at, &cerr) != KB_OK)
                kb_log_warn("cannot update the cache of '%s': %s", url, cerr.msg);
            goto out;
        } else if (!transient_status(status) || attempt >= max_attempts) {
            rc = kb_err_set(err, KB_ERR_NET, "cannot fetch '%s': HTTP %ld%s", url,
                            status, after);
            goto out;
        }

        /* backoff: base * 2^(attempt-1), or longer if Retry-After says so */
        long wait = base_ms;
        for (int i = 1; i < attempt && wait < FETCH_MAX_WAIT_MS; i++)
            wait *= 2;
        curl_off_t ra = 0;
        if (c == CURLE_OK &&
            curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0) {
            if (ra > FETCH_MAX_WAIT_MS / 1000)
                wait = FETCH_MAX_WAIT_MS;
            else if ((long)ra * 1000 > wait)
                wait = (long)ra * 1000;
        }
        if (wait > FETCH_MAX_WAIT_MS)
            wait = FETCH_MAX_WAIT_MS;
        if (c != CURLE_OK)
            kb_log_debug("fetch '%s': %s; retry in %ld ms", url,
                         curl_reason(c, errbuf), wait);
        else
            kb_log_debug("fetch '%s': HTTP %ld; retry in %ld ms", url, status, wait);
        sleep_ms(wait);
    }
out:
    if (rc != KB_OK) {
        kb_buf_release(&out->body);
        kb_buf_init(&out->body, 0);
    }
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    kb_buf_release(&body);
    cache_release(&cache);
    return rc;
}
