/* test_mcp.c - the MCP core (serve/serve.h) as a transport calls it: what
 * the stdio tests cannot reach - the HTTP headers a Streamable HTTP
 * transport passes (MCP-Protocol-Version, Mcp-Method, Mcp-Name in its
 * base64 form), the HTTP status each reply wants, the session's era and
 * version, one session shared by threads - on a real (empty) KB. */
#include "serve/serve.h"
#include "test_util.h"

#include <pthread.h>

#define META "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"," \
             "\"io.modelcontextprotocol/clientCapabilities\":{}}"
#define INIT "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":" \
             "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":" \
             "{\"name\":\"t\",\"version\":\"1\"}}}"

static char *dir;
static kb_store *store;
static kb_mcp *server;
static kb_config config;

static int setup(void **state)
{
    (void)state;
    dir = tu_tmpdir("mcp");
    kb_err err;
    kb_err_clear(&err);
    kb_store *s = NULL;
    kb_mcp_opts opts;
    kb_mcp_opts_init(&opts);
    kb_config_init(&config);
    if (kb_store_open(dir, KB_STORE_CREATE, &s, &err) != KB_OK)
        return -1;
    kb_store_close(s);   /* the server's is read-only, as kb mcp's */
    if (kb_store_open(dir, KB_STORE_READONLY, &store, &err) != KB_OK ||
        kb_mcp_open(&opts, &server, &err) != KB_OK)
        return -1;
    kb_log_set_level(KB_LOG_QUIET);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kb_mcp_free(server);
    kb_store_close(store);
    tu_rmtree(dir);
    free(dir);
    return 0;
}

/* Handles msg on s with the headers t; returns the reply parsed (NULL for
 * none) and its status in *status. */
static cJSON *handle(kb_mcp_session *s, const char *msg, const kb_mcp_transport *t,
                     int *status, int *initialized)
{
    kb_tool_ctx ctx = { .store = store, .config = &config };
    kb_mcp_reply reply;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_mcp_handle(server, s, &ctx, msg, strlen(msg), t, &reply, &err), KB_OK);
    *status = reply.http_status;
    if (initialized)
        *initialized = reply.initialized;
    if (!reply.text)
        return NULL;
    assert_null(strchr(reply.text, '\n'));   /* one line */
    cJSON *r = cJSON_Parse(reply.text);
    assert_non_null(r);
    free(reply.text);
    return r;
}

/* The reply's error code, or 0 for a result. */
static int code_of(const cJSON *r)
{
    const cJSON *e = cJSON_GetObjectItem(r, "error");
    return e ? cJSON_GetObjectItem(e, "code")->valueint : 0;
}

static kb_mcp_session *new_session(void)
{
    kb_mcp_session *s = NULL;
    kb_err err;
    assert_int_equal(kb_mcp_session_open(&s, &err), KB_OK);
    return s;
}

/* 2026-07-28 over HTTP: each request a fresh session, its headers matched
 * against the body. */
static void test_modern_headers(void **state)
{
    (void)state;
    const char *list = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META "}}";
    const char *call = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"status\"," META "}}";
    struct { kb_mcp_transport t; const char *msg; int code, status; } cases[] = {
        { { "2026-07-28", "tools/list", NULL, NULL }, list, 0, 200 },
        { { "2025-11-25", "tools/list", NULL, NULL }, list, -32020, 400 },
        { { NULL, "tools/list", NULL, NULL }, list, -32020, 400 },
        { { "2026-07-28", "tools/call", NULL, NULL }, list, -32020, 400 },
        { { "2026-07-28", NULL, NULL, NULL }, list, -32020, 400 },
        { { "2026-07-28", "tools/call", "status", NULL }, call, 0, 200 },
        { { "2026-07-28", "tools/call", "=?base64?c3RhdHVz?=", NULL }, call, 0, 200 },
        { { "2026-07-28", "tools/call", "=?base64?c2VhcmNo?=", NULL }, call, -32020, 400 },
        { { "2026-07-28", "tools/call", "search", NULL }, call, -32020, 400 },
        { { "2026-07-28", "tools/call", "=?base64?!!!!?=", NULL }, call, -32020, 400 },
        { { "2026-07-28", "tools/call", NULL, NULL }, call, -32020, 400 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kb_mcp_session *s = new_session();
        int status;
        cJSON *r = handle(s, cases[i].msg, &cases[i].t, &status, NULL);
        if (code_of(r) != cases[i].code || status != cases[i].status)
            fail_msg("case %zu: code %d status %d, wanted %d %d: %s", i, code_of(r),
                     status, cases[i].code, cases[i].status, cJSON_PrintUnformatted(r));
        cJSON_Delete(r);
        assert_null(kb_mcp_session_version(s));
        kb_mcp_session_free(s);
    }
}

/* The HTTP status of each kind of reply. */
static void test_status(void **state)
{
    (void)state;
    kb_mcp_transport h = { "2026-07-28", "no/such", NULL, NULL };
    struct { const char *msg; const kb_mcp_transport *t; int code, status; } cases[] = {
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"no/such\",\"params\":{" META "}}", &h, -32601, 404 },
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"no/such\",\"params\":{\"_meta\":{"
          "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}", &h, -32602, 400 },
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"no/such\"}", NULL, -32601, 200 },
        { "nope", NULL, -32700, 400 },
        { "[]", NULL, -32600, 400 },
        { "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", NULL, 0, 202 },
        { "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}", NULL, 0, 202 },
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL, 0, 200 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kb_mcp_session *s = new_session();
        int status;
        cJSON *r = handle(s, cases[i].msg, cases[i].t, &status, NULL);
        if (code_of(r) != cases[i].code || status != cases[i].status)
            fail_msg("case %zu: code %d status %d, wanted %d %d", i, code_of(r), status,
                     cases[i].code, cases[i].status);
        if (cases[i].status == 202)
            assert_null(r);
        cJSON_Delete(r);
        kb_mcp_session_free(s);
    }
    char *big = kb_mcp_oversized_reply(KB_MCP_MESSAGE_MAX + 1);
    assert_non_null(strstr(big, "-32600"));
    free(big);
}

/* The handshake era over HTTP: initialize says a session begins; the
 * version is the session's; a later MCP-Protocol-Version must be it. */
static void test_handshake_session(void **state)
{
    (void)state;
    kb_mcp_session *s = new_session();
    int status, initialized;
    cJSON *r = handle(s, INIT, NULL, &status, &initialized);
    assert_int_equal(code_of(r), 0);
    assert_true(initialized);
    assert_string_equal(kb_mcp_session_version(s), "2025-06-18");
    cJSON_Delete(r);
    const char *list = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}";
    kb_mcp_transport same = { "2025-06-18", NULL, NULL, "abc" };
    kb_mcp_transport other = { "2025-11-25", NULL, NULL, "abc" };
    kb_mcp_transport none = { NULL, NULL, NULL, "abc" };
    r = handle(s, list, &same, &status, &initialized);
    assert_int_equal(code_of(r), 0);
    assert_false(initialized);
    assert_int_equal(status, 200);
    cJSON_Delete(r);
    r = handle(s, list, &none, &status, NULL);
    assert_int_equal(code_of(r), 0);
    cJSON_Delete(r);
    r = handle(s, list, &other, &status, NULL);
    assert_int_equal(code_of(r), -32600);
    assert_int_equal(status, 400);
    cJSON_Delete(r);
    /* a second initialize on the session is refused */
    r = handle(s, INIT, NULL, &status, &initialized);
    assert_int_equal(code_of(r), -32600);
    assert_false(initialized);
    cJSON_Delete(r);
    kb_mcp_session_free(s);
}

/* One session, four threads, each with its own store as a server's
 * workers hold them: every call answered, the session's version
 * unchanged. No cmocka assertion runs off the main thread. */
typedef struct {
    kb_mcp_session *s;
    kb_store *store;
    int answered;
} worker;

static void *calls(void *arg)
{
    worker *w = arg;
    kb_tool_ctx ctx = { .store = w->store, .config = &config };
    const char *msg = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                      "\"params\":{\"name\":\"search\",\"arguments\":{\"query\":"
                      "\"x\",\"mode\":\"lexical\"}}}";
    for (int i = 0; i < 50; i++) {
        kb_mcp_reply reply;
        kb_err err;
        kb_err_clear(&err);
        if (kb_mcp_handle(server, w->s, &ctx, msg, strlen(msg), NULL, &reply, &err) == KB_OK &&
            reply.text && strstr(reply.text, "\"isError\":false"))
            w->answered++;
        free(reply.text);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    kb_mcp_session *s = new_session();
    int status;
    cJSON_Delete(handle(s, INIT, NULL, &status, NULL));
    worker w[4];
    pthread_t t[4];
    kb_err err;
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){ .s = s };
        assert_int_equal(kb_store_open(dir, KB_STORE_READONLY, &w[i].store, &err), KB_OK);
        assert_int_equal(pthread_create(&t[i], NULL, calls, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        kb_store_close(w[i].store);
        assert_int_equal(w[i].answered, 50);
    }
    assert_string_equal(kb_mcp_session_version(s), "2025-06-18");
    kb_mcp_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modern_headers),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_handshake_session),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
