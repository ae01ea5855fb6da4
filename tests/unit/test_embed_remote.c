/* test_embed_remote.c - the OpenAI-compatible remote embedder against a
 * libmicrohttpd server on 127.0.0.1: a good server (batching, index order,
 * the API key), malformed JSON, wrong dimensions, a 429 then success, 5xx
 * until the retries run out, a 401, and a server that hangs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kb/kb.h"
#include "index/index.h"
#include "kb/kb_int.h"
#include "tests/unit/test_http_server.h"

enum { GOOD, MALFORMED, SHORT, WRONGDIM, DIMCHANGE, R429, E503, E401, HANG };

static atomic_int mode;
static atomic_int requests;
static atomic_int max_inputs;
static atomic_int saw_auth;     /* 1: right key, -1: wrong key, 0: none */
static atomic_int stopping;
static struct MHD_Daemon *daemon_;
static char url[128];

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
                             const char *body, const char *retry_after)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (retry_after)
        MHD_add_response_header(r, "Retry-After", retry_after);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* {"data": [...]} for the request's inputs, in reverse order with their
 * index: input i gets [strlen(text), 1, 0, ...] of dimension dim (the
 * second item dim2 when dim2 > 0). */
static char *embeddings_for(const char *req, int dim, int dim2)
{
    cJSON *in = cJSON_Parse(req);
    cJSON *input = cJSON_GetObjectItem(in, "input");
    cJSON *model = cJSON_GetObjectItem(in, "model");
    if (!cJSON_IsArray(input) || !cJSON_IsString(model) ||
        strcmp(model->valuestring, "test-model")) {
        cJSON_Delete(in);
        return NULL;
    }
    int n = cJSON_GetArraySize(input);
    if (n > max_inputs)
        max_inputs = n;
    cJSON *out = cJSON_CreateObject();
    cJSON *data = cJSON_AddArrayToObject(out, "data");
    for (int i = n - 1; i >= 0; i--) {
        const char *t = cJSON_GetArrayItem(input, i)->valuestring;
        int d = (i == 1 && dim2) ? dim2 : dim;
        float v[16] = { 0 };
        v[0] = (float)strlen(t);
        v[1] = 1;
        cJSON *item = cJSON_CreateObject();
        cJSON_AddStringToObject(item, "object", "embedding");
        cJSON_AddNumberToObject(item, "index", i);
        cJSON_AddItemToObject(item, "embedding", cJSON_CreateFloatArray(v, d));
        cJSON_AddItemToArray(data, item);
    }
    cJSON_AddStringToObject(out, "model", "test-model");
    char *s = cJSON_PrintUnformatted(out);
    cJSON_Delete(out);
    cJSON_Delete(in);
    return s;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c,
                               const char *u, const char *method,
                               const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    kb_buf *body = *con_cls;
    if (!body) {
        body = calloc(1, sizeof *body);
        kb_buf_init(body, 1 << 22);
        *con_cls = body;
        return MHD_YES;
    }
    if (*upload_size) {
        /* over the 4 MiB cap or out of memory: the connection is dropped
         * (no assert in the server's thread), and the client's call fails */
        if (kb_buf_append(body, upload, *upload_size) != KB_OK)
            return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    int nreq = ++requests;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    saw_auth = !auth ? 0 : !strcmp(auth, "Bearer sekrit") ? 1 : -1;
    if (strcmp(method, "POST") || strcmp(u, "/v1/embeddings"))
        return reply(c, 404, "{\"error\":\"not found\"}", NULL);
    char *out = NULL;
    switch ((int)mode) {
    case MALFORMED:
        return reply(c, 200, "{\"data\": [{\"embedding\": [0.1, 0.2,", NULL);
    case SHORT:
        return reply(c, 200, "{\"data\": []}", NULL);
    case WRONGDIM:
        out = embeddings_for(body->data, 4, 5);
        break;
    case DIMCHANGE:
        out = embeddings_for(body->data, nreq == 1 ? 4 : 8, 0);
        break;
    case R429:
        if (nreq == 1)
            return reply(c, 429, "{\"error\":\"slow down\"}", "1");
        out = embeddings_for(body->data, 4, 0);
        break;
    case E503:
        return reply(c, 503, "{\"error\":\"overloaded\"}", NULL);
    case E401:
        return reply(c, 401, "{\"error\":\"bad key\"}", NULL);
    case HANG:
        for (int i = 0; i < 500 && !stopping; i++)
            usleep(10000);
        return reply(c, 200, "{}", NULL);
    default:
        out = embeddings_for(body->data, 4, 0);
    }
    if (!out)
        return reply(c, 400, "{\"error\":\"bad request\"}", NULL);
    enum MHD_Result r = reply(c, 200, out, NULL);
    free(out);
    return r;
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

static int setup(void **state)
{
    unsigned port = 0;
    daemon_ = tu_http_server(handler, completed, &port);
    if (!daemon_)
        return -1;
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/embeddings", port);
    return 0;
}

static int teardown(void **state)
{
    stopping = 1;
    MHD_stop_daemon(daemon_);
    return 0;
}

static void fast_opts(kb_remote_opts *o)
{
    kb_remote_opts_default(o);
    o->timeout_ms = 2000;
    o->connect_timeout_ms = 1000;
    o->max_retries = 2;
    o->retry_base_ms = 10;
}

static kb_rc open_with(int m, kb_embedder **e, kb_err *err)
{
    mode = m;
    requests = 0;
    kb_remote_opts o;
    fast_opts(&o);
    kb_err_clear(err);
    return kb_embedder_open_remote_opts(url, "test-model", "sekrit", &o, e, err);
}

static void test_good(void **state)
{
    kb_embedder *e = NULL;
    kb_err err;
    assert_int_equal(open_with(GOOD, &e, &err), KB_OK);
    assert_int_equal(kb_embedder_dim(e), 4);
    assert_string_equal(kb_embedder_name(e), "remote:test-model");
    assert_string_equal(kb_embedder_weights_hash(e), "");
    assert_null(kb_embedder_tokenizer(e));
    assert_int_equal(saw_auth, 1);
    /* 150 texts: batches of at most 64, rows in input order, normalised */
    enum { N = 150 };
    char *texts[N];
    for (int i = 0; i < N; i++) {
        texts[i] = malloc((size_t)i + 2);
        memset(texts[i], 'a' + i % 26, (size_t)i + 1);
        texts[i][i + 1] = '\0';
    }
    float *out = calloc(N * 4, sizeof *out);
    requests = 0;
    max_inputs = 0;
    assert_int_equal(kb_embedder_embed(e, (const char *const *)texts, N, out, &err), KB_OK);
    assert_int_equal(requests, 3);
    assert_int_equal(max_inputs, 64);
    for (int i = 0; i < N; i++) {
        float *v = out + i * 4;
        assert_true(fabsf(v[0] / v[1] - (float)(i + 1)) < 1e-3f * (float)(i + 1));
        assert_true(fabsf(v[0] * v[0] + v[1] * v[1] - 1) < 1e-5f);
        free(texts[i]);
    }
    free(out);
    kb_embedder_free(e);
}

static void test_no_key(void **state)
{
    kb_embedder *e = NULL;
    kb_err err;
    kb_err_clear(&err);
    mode = GOOD;
    saw_auth = 9;
    kb_remote_opts o;
    fast_opts(&o);
    assert_int_equal(kb_embedder_open_remote_opts(url, "test-model", NULL, &o, &e, &err), KB_OK);
    assert_int_equal(saw_auth, 0);
    kb_embedder_free(e);
    /* from the environment */
    setenv("KB_EMBED_URL", url, 1);
    setenv("KB_EMBED_MODEL", "test-model", 1);
    setenv("KB_EMBED_API_KEY", "sekrit", 1);
    kb_config cfg;
    assert_int_equal(kb_config_load(&cfg, &err), KB_OK);
    assert_int_equal(kb_embedder_open_config(&cfg, &e, &err), KB_OK);
    kb_config_release(&cfg);
    assert_int_equal(saw_auth, 1);
    assert_string_equal(kb_embedder_name(e), "remote:test-model");
    kb_embedder_free(e);
    unsetenv("KB_EMBED_URL");
    unsetenv("KB_EMBED_MODEL");
    unsetenv("KB_EMBED_API_KEY");
    /* no model */
    assert_int_equal(kb_embedder_open_remote_opts(url, NULL, NULL, &o, &e, &err), KB_ERR_USAGE);
    fprintf(stderr, "no model: %s\n", err.msg);
    assert_null(e);
    assert_non_null(strstr(err.msg, "no embedding model given for '"));
    assert_non_null(strstr(err.msg, url));
    assert_non_null(strstr(err.msg, "set KB_EMBED_MODEL"));
    kb_err_clear(&err);
    assert_int_equal(kb_embedder_open_remote_opts("ftp://x/y", "m", NULL, &o, &e, &err), KB_ERR_USAGE);
    assert_null(e);
    assert_string_equal(err.msg, "embedding endpoint 'ftp://x/y' is not an http(s) URL");
}

static void expect_fail(int m, kb_rc want, const char *needle)
{
    kb_embedder *e = NULL;
    kb_err err;
    kb_rc rc = open_with(m, &e, &err);
    if (rc == KB_OK) {
        /* the probe passed: the failure shows on a real batch */
        const char *t[3] = { "one", "two", "three" };
        float out[3 * 16];
        rc = kb_embedder_embed(e, t, 3, out, &err);
        kb_embedder_free(e);
    } else {
        assert_null(e);
    }
    fprintf(stderr, "mode %d: %s\n", m, err.msg);
    assert_int_equal(rc, want);
    assert_non_null(strstr(err.msg, needle));
    assert_null(strstr(err.msg, "sekrit"));
}

static void test_malformed(void **state)
{
    expect_fail(MALFORMED, KB_ERR_PARSE, "malformed response");
    expect_fail(SHORT, KB_ERR_PARSE, "0 embeddings for 1 inputs");
}

static void test_wrong_dims(void **state)
{
    expect_fail(WRONGDIM, KB_ERR_MISMATCH, "dimension 5, expected 4");
    expect_fail(DIMCHANGE, KB_ERR_MISMATCH, "dimension 8, expected 4");
}

static void test_429_then_ok(void **state)
{
    kb_embedder *e = NULL;
    kb_err err;
    double t0 = kb_now_ms();
    assert_int_equal(open_with(R429, &e, &err), KB_OK);
    double ms = kb_now_ms() - t0;
    fprintf(stderr, "429 then ok after %.0f ms\n", ms);
    assert_int_equal(requests, 2);
    assert_true(ms >= 900);   /* Retry-After: 1 honoured, not the 10 ms backoff */
    kb_embedder_free(e);
}

static void test_errors(void **state)
{
    expect_fail(E503, KB_ERR_NET, "HTTP 503");
    assert_int_equal(requests, 3);   /* 1 + 2 retries */
    expect_fail(E401, KB_ERR_NET, "HTTP 401");
    assert_int_equal(requests, 1);   /* no retry on 4xx */
}

static void test_hang(void **state)
{
    kb_embedder *e = NULL;
    kb_err err;
    kb_err_clear(&err);
    mode = HANG;
    kb_remote_opts o;
    fast_opts(&o);
    o.timeout_ms = 300;
    o.max_retries = 0;
    double t0 = kb_now_ms();
    assert_int_equal(kb_embedder_open_remote_opts(url, "test-model", "sekrit", &o, &e, &err),
                     KB_ERR_NET);
    double ms = kb_now_ms() - t0;
    fprintf(stderr, "hang: %s after %.0f ms\n", err.msg, ms);
    assert_true(ms < 2000);
    /* curl's own words, as kb_http gives them: "Operation timed out after
     * 300 milliseconds with 0 bytes received" */
    assert_non_null(strstr(err.msg, "timed out"));
    /* a closed port */
    kb_err_clear(&err);
    assert_int_equal(kb_embedder_open_remote_opts("http://127.0.0.1:1/v1/embeddings",
                                                  "test-model", NULL, &o, &e, &err),
                     KB_ERR_NET);
    fprintf(stderr, "closed port: %s\n", err.msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_no_key),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_wrong_dims),
        cmocka_unit_test(test_429_then_ok),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_hang),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
