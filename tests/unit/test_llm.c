/* test_llm.c - kb_llm_complete against the scripted LLM server
 * (tests/llm/scripted_llm.py) on 127.0.0.1, for both APIs, streaming and
 * not: the text, usage and finish reason; a 429 that waits its
 * Retry-After, 529 and 503 retried and counted; a server that answers
 * plain JSON to a stream request or refuses to stream; a cut stream, an
 * error event and an unfinished stream kept as far as they came;
 * malformed JSON; a 401 not retried; a timeout; the key never in a body,
 * the log, request_json, raw or a message; many threads at once; and
 * kb_llm_opts_from_config's choices. Nothing leaves the machine. */
#include "kb/kb_int.h"

#include "tests/unit/test_util.h"
#include "tests/unit/test_scripted_llm.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEY "sk-test-5f9a1c2e7b-very-secret"

/* ------------------------------------------------------------------ server */

/* One scripted_llm.py for the whole test (test_scripted_llm.h); a case
 * that starts "its" server loads its script into that one, which also
 * empties the request log. */
typedef tu_llm_server server;

static server srv;

static int server_up(void **state)
{
    (void)state;
    tu_llm_server_up(&srv, "llm");
    return 0;
}

static int server_down(void **state)
{
    (void)state;
    tu_llm_server_down(&srv);
    return 0;
}

/* Loads script (a path) with key (NULL: none asked for) into the server;
 * *s is then the server. */
static void server_start_path(server *s, const char *script, const char *key)
{
    tu_llm_server_load(&srv, script, key);
    *s = srv;
}

/* ... tests/fixtures/llm/NAME.json */
static void server_start(server *s, const char *name, const char *key)
{
    char *script = tu_fixture("llm/%s.json", name);
    server_start_path(s, script, key);
    free(script);
}

/* ... a script written here from text */
static void server_start_text(server *s, const char *text, const char *key)
{
    tu_llm_server_load_text(&srv, text, key);
    *s = srv;
}

/* The end of a case: the server stays up for the next. */
static void server_stop(server *s)
{
    (void)s;
}

/* ------------------------------------------------------------------ calls */

static kb_llm_opts opts_for(const server *s, kb_llm_api api, const char *url_tail)
{
    static __thread char url[128];
    snprintf(url, sizeof url, "%s%s", s->base,
             url_tail ? url_tail : api == KB_LLM_ANTHROPIC ? "/v1/messages"
                                                           : "/v1/chat/completions");
    kb_llm_opts o = {
        .api = api, .url = url, .model = "test-model", .api_key = KEY,
        .stream = 1, .max_tokens = 512, .temperature = 0.2,
        .timeout_ms = 20000, .max_retries = 3,
    };
    return o;
}

static const kb_llm_request REQ = {
    .system = "You write CUDA kernels.",
    .user = "Write the gelu kernel.",
};

static kb_rc complete(const kb_llm_opts *o, kb_llm_reply *r, kb_err *err)
{
    kb_llm_reply_init(r);
    kb_err_clear(err);
    return kb_llm_complete(o, &REQ, r, err);
}

/* Nothing the client wrote or kept holds the key. */
static void assert_no_key(const server *s, const kb_llm_reply *r, const kb_err *err)
{
    assert_null(strstr(r->request_json, KEY));
    assert_null(strstr(r->raw, KEY));
    assert_null(strstr(r->text, KEY));
    assert_null(strstr(err->msg, KEY));
    char *log = tu_llm_server_log(s);
    assert_null(strstr(log, KEY));     /* the log blanks only the key headers */
    free(log);
}

/* ------------------------------------------------------------------ tests */

/* The good kernel in prose, streamed and not, for both APIs; what the
 * server saw is each API's request. */
static void test_good_reply(void **state)
{
    for (int api = 0; api < 2; api++) {
        for (int stream = 1; stream >= 0; stream--) {
            server s;
            server_start(&s, "good", KEY);
            kb_llm_opts o = opts_for(&s, (kb_llm_api)api, NULL);
            o.stream = stream;
            kb_llm_reply r;
            kb_err err;
            assert_int_equal(complete(&o, &r, &err), KB_OK);
            assert_non_null(strstr(r.text, "The task is memory bound"));
            assert_non_null(strstr(r.text, "```cuda\n// GELU, two float4 per thread"));
            assert_non_null(strstr(r.text, "extern \"C\" __global__ void gelu_vec4("));
            assert_non_null(strstr(r.text, "// kb-launch: kernel=gelu_vec4"));
            assert_non_null(strstr(r.text, "copy bandwidth"));
            assert_string_equal(r.finish_reason, api ? "end_turn" : "stop");
            assert_int_equal(r.prompt_tokens, 1200);
            assert_int_equal(r.completion_tokens, 310);
            assert_int_equal(r.attempts, 1);
            assert_int_equal(r.streamed, stream);
            assert_true(r.ms > 0);
            if (stream) {
                /* raw: the events' data, one line each */
                assert_non_null(strstr(r.raw, api ? "{\"type\": \"message_stop\"}\n"
                                                  : "[DONE]\n"));
                assert_null(strstr(r.raw, "\n\n"));
            } else {
                assert_int_equal(r.raw[0], '{');
                assert_null(strstr(r.raw, "[DONE]"));
            }
            assert_no_key(&s, &r, &err);

            int n;
            cJSON *log = tu_llm_server_requests(&s, &n);
            assert_int_equal(n, 1);
            cJSON *q = cJSON_GetArrayItem(log, 0);
            assert_true(cJSON_IsTrue(cJSON_GetObjectItem(q, "key_ok")));
            assert_string_equal(cJSON_GetObjectItem(q, "path")->valuestring,
                                api ? "/v1/messages" : "/v1/chat/completions");
            const cJSON *h = cJSON_GetObjectItem(q, "headers");
            const cJSON *b = cJSON_GetObjectItem(q, "body");
            assert_string_equal(cJSON_GetObjectItem(b, "model")->valuestring, "test-model");
            assert_int_equal(cJSON_GetObjectItem(b, "max_tokens")->valueint, 512);
            assert_true(cJSON_GetObjectItem(b, "temperature")->valuedouble == 0.2);
            assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(b, "stream")), stream);
            const cJSON *msgs = cJSON_GetObjectItem(b, "messages");
            if (api == KB_LLM_ANTHROPIC) {
                assert_string_equal(cJSON_GetObjectItem(h, "anthropic-version")->valuestring,
                                    "2023-06-01");
                assert_string_equal(cJSON_GetObjectItem(h, "x-api-key")->valuestring,
                                    "[redacted]");
                assert_null(cJSON_GetObjectItem(h, "Authorization"));
                assert_string_equal(cJSON_GetObjectItem(b, "system")->valuestring,
                                    "You write CUDA kernels.");
                assert_int_equal(cJSON_GetArraySize(msgs), 1);
                assert_null(cJSON_GetObjectItem(b, "stream_options"));
            } else {
                assert_string_equal(cJSON_GetObjectItem(h, "Authorization")->valuestring,
                                    "[redacted]");
                assert_null(cJSON_GetObjectItem(h, "anthropic-version"));
                assert_null(cJSON_GetObjectItem(b, "system"));
                assert_int_equal(cJSON_GetArraySize(msgs), 2);
                const cJSON *m0 = cJSON_GetArrayItem(msgs, 0);
                assert_string_equal(cJSON_GetObjectItem(m0, "role")->valuestring, "system");
                assert_string_equal(cJSON_GetObjectItem(m0, "content")->valuestring,
                                    "You write CUDA kernels.");
                const cJSON *so = cJSON_GetObjectItem(b, "stream_options");
                assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(so, "include_usage")), stream);
            }
            const cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
            assert_string_equal(cJSON_GetObjectItem(last, "role")->valuestring, "user");
            assert_string_equal(cJSON_GetObjectItem(last, "content")->valuestring,
                                "Write the gelu kernel.");
            /* request_json is the body that went */
            cJSON *sent = cJSON_Parse(r.request_json);
            assert_true(cJSON_Compare(sent, b, 1));
            cJSON_Delete(sent);
            cJSON_Delete(log);
            kb_llm_reply_release(&r);
            server_stop(&s);
        }
    }
}

/* A 429 with Retry-After: 1 is waited out (at least 1 s) and counted. */
static void test_rate_limited(void **state)
{
    for (int api = 0; api < 2; api++) {
        server s;
        server_start(&s, "rate-limited", KEY);
        kb_llm_opts o = opts_for(&s, (kb_llm_api)api, NULL);
        kb_llm_reply r;
        kb_err err;
        double t0 = kb_now_ms();
        assert_int_equal(complete(&o, &r, &err), KB_OK);
        double took = kb_now_ms() - t0;
        assert_true(took >= 1000);
        assert_true(r.ms >= 1000);
        assert_int_equal(r.attempts, 2);
        assert_non_null(strstr(r.text, "gelu_vec4"));
        int n;
        cJSON *log = tu_llm_server_requests(&s, &n);
        assert_int_equal(n, 2);
        assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(log, 0), "status")->valueint, 429);
        cJSON_Delete(log);
        kb_llm_reply_release(&r);

        /* with no retries left, the 429 is the error, the server's words in it */
        server_stop(&s);
        server_start(&s, "rate-limited", KEY);
        o = opts_for(&s, (kb_llm_api)api, NULL);
        o.max_retries = 0;
        assert_int_equal(complete(&o, &r, &err), KB_ERR_NET);
        assert_non_null(strstr(err.msg, "HTTP 429"));
        assert_non_null(strstr(err.msg, "rate limit reached"));
        assert_int_equal(r.attempts, 1);
        assert_non_null(strstr(r.raw, "rate limit reached"));
        kb_llm_reply_release(&r);
        server_stop(&s);
    }
}

/* 529 (Anthropic's overloaded) and 503 are retried: three attempts. */
static void test_overloaded(void **state)
{
    for (int api = 0; api < 2; api++) {
        server s;
        server_start(&s, "overloaded", KEY);
        kb_llm_opts o = opts_for(&s, (kb_llm_api)api, NULL);
        kb_llm_reply r;
        kb_err err;
        assert_int_equal(complete(&o, &r, &err), KB_OK);
        assert_int_equal(r.attempts, 3);
        assert_non_null(strstr(r.text, "gelu_vec4"));
        kb_llm_reply_release(&r);
        server_stop(&s);
    }
}

/* A stream dropped after six events: an error that says so, with the
 * text and the events that arrived kept; not asked again. */
static void test_cut_stream(void **state)
{
    for (int api = 0; api < 2; api++) {
        server s;
        server_start(&s, "cut", KEY);
        kb_llm_opts o = opts_for(&s, (kb_llm_api)api, NULL);
        kb_llm_reply r;
        kb_err err;
        assert_int_equal(complete(&o, &r, &err), KB_ERR_NET);
        assert_non_null(strstr(err.msg, "LLM request to '"));
        assert_non_null(strstr(err.msg, "stream cut after"));
        assert_int_equal(r.attempts, 1);
        assert_int_equal(r.streamed, 1);
        /* OpenAI: a keep-alive comment, the role chunk, 4 deltas of 16
         * characters; Anthropic: start, block start, ping, 3 deltas */
        assert_string_equal(r.text, api ? "The task is memory bound (8 bytes per element ag"
                                        : "The task is memory bound (8 bytes per element against 20 flops),");
        assert_true(strlen(r.raw) > 100);
        assert_no_key(&s, &r, &err);
        kb_llm_reply_release(&r);
        server_stop(&s);

        /* cut inside an event, the connection closing cleanly */
        server_start(&s, "cut-mid", KEY);
        o = opts_for(&s, (kb_llm_api)api, NULL);
        assert_int_equal(complete(&o, &r, &err), KB_ERR_NET);
        assert_non_null(strstr(err.msg, "stream cut in the middle of an event"));
        assert_true(strlen(r.text) > 0);
        kb_llm_reply_release(&r);
        server_stop(&s);

        /* a stream that ends at an event's end but before its last event */
        server_start(&s, "no-end", KEY);
        o = opts_for(&s, (kb_llm_api)api, NULL);
        assert_int_equal(complete(&o, &r, &err), KB_ERR_NET);
        assert_non_null(strstr(err.msg, api ? "no message_stop" : "no [DONE]"));
        assert_string_equal(r.text, "half a reply");
        kb_llm_reply_release(&r);
        server_stop(&s);
    }
}

/* An error event in the middle of a stream fails the call with its words. */
static void test_stream_error(void **state)
{
    for (int api = 0; api < 2; api++) {
        server s;
        server_start(&s, "stream-error", KEY);
        kb_llm_opts o = opts_for(&s, (kb_llm_api)api, NULL);
        kb_llm_reply r;
        kb_err err;
        assert_int_equal(complete(&o, &r, &err), KB_ERR_NET);
        assert_non_null(strstr(err.msg, "error"));
        assert_non_null(strstr(err.msg, "overloaded_error: Overloaded"));
        assert_int_equal(r.attempts, 1);
        assert_non_null(strstr(r.raw, "overloaded_error"));
        assert_true(strlen(r.text) > 0);      /* the deltas before it */
        kb_llm_reply_release(&r);
        server_stop(&s);
    }
}

/* A 200 whose JSON is cut: KB_ERR_PARSE, the body kept in raw. */
static void test_malformed(void **state)
{
    for (int api = 0; api < 2; api++) {
        for (int stream = 0; stream < 2; stream++) {
            server s;
            server_start(&s, "malformed", KEY);
            kb_llm_opts o = opts_for(&s, (kb_llm_api)api, NULL);
            o.stream = stream;
            kb_llm_reply r;
            kb_err err;
            assert_int_equal(complete(&o, &r, &err), KB_ERR_PARSE);
            assert_non_null(strstr(err.msg, "the reply is not JSON"));
            assert_string_equal(r.raw, "{\"choices\": [{\"message\": {\"content\": \"trunc");
            assert_string_equal(r.text, "");
            assert_int_equal(r.attempts, 1);
            kb_llm_reply_release(&r);
            server_stop(&s);
        }
    }
    /* JSON, but not the API's: a chat completion reply to Anthropic's client */
    server s;
    server_start_text(&s, "[{\"body\": \"{\\\"choices\\\": []}\"}, "
                          "{\"body\": \"{\\\"id\\\": 1}\"}]", NULL);
    kb_llm_opts o = opts_for(&s, KB_LLM_ANTHROPIC, NULL);
    kb_llm_reply r;
    kb_err err;
    assert_int_equal(complete(&o, &r, &err), KB_ERR_PARSE);
    assert_non_null(strstr(err.msg, "not a message (no content)"));
    kb_llm_reply_release(&r);
    o = opts_for(&s, KB_LLM_OPENAI, NULL);
    assert_int_equal(complete(&o, &r, &err), KB_ERR_PARSE);
    assert_non_null(strstr(err.msg, "not a chat completion (no choices)"));
    kb_llm_reply_release(&r);
    server_stop(&s);
    /* a stream event that is not JSON */
    server_start_text(&s, "[{\"body\": \"data: {oops\\n\\ndata: [DONE]\\n\\n\", "
                          "\"content_type\": \"text/event-stream\"}]", NULL);
    o = opts_for(&s, KB_LLM_OPENAI, NULL);
    assert_int_equal(complete(&o, &r, &err), KB_ERR_PARSE);
    assert_non_null(strstr(err.msg, "stream event 1 is not JSON"));
    kb_llm_reply_release(&r);
    server_stop(&s);
}

/* A 401 is not retried, and nothing says the key: not the message, even
 * when the server quotes it back, nor raw. */
static void test_unauthorized(void **state)
{
    for (int api = 0; api < 2; api++) {
        server s;
        server_start(&s, "unauthorized", KEY);
        kb_llm_opts o = opts_for(&s, (kb_llm_api)api, NULL);
        kb_llm_reply r;
        kb_err err;
        assert_int_equal(complete(&o, &r, &err), KB_ERR_NET);
        assert_non_null(strstr(err.msg, "HTTP 401"));
        assert_non_null(strstr(err.msg, "invalid api key"));
        assert_int_equal(r.attempts, 1);
        assert_no_key(&s, &r, &err);
        kb_llm_reply_release(&r);
        server_stop(&s);

        /* the wrong key: the server's own 401 */
        server_start(&s, "good", "another-key");
        o = opts_for(&s, (kb_llm_api)api, NULL);
        assert_int_equal(complete(&o, &r, &err), KB_ERR_NET);
        assert_non_null(strstr(err.msg, "HTTP 401"));
        assert_int_equal(r.attempts, 1);
        int n;
        cJSON *log = tu_llm_server_requests(&s, &n);
        assert_int_equal(n, 1);
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetArrayItem(log, 0), "key_ok")));
        cJSON_Delete(log);
        kb_llm_reply_release(&r);
        server_stop(&s);

        /* a server that quotes the key back, in an error and in a reply */
        server_start_text(&s, "[{\"status\": 401, \"error\": \"bad key " KEY "\"},"
                              " {\"text\": \"your key is " KEY "\"}]", NULL);
        o = opts_for(&s, (kb_llm_api)api, NULL);
        assert_int_equal(complete(&o, &r, &err), KB_ERR_NET);
        assert_non_null(strstr(err.msg, "bad key ****"));
        assert_no_key(&s, &r, &err);
        kb_llm_reply_release(&r);
        assert_int_equal(complete(&o, &r, &err), KB_OK);
        assert_non_null(strstr(r.text, "your key is ****"));
        assert_null(strstr(r.text, KEY));
        assert_null(strstr(r.raw, KEY));
        kb_llm_reply_release(&r);
        server_stop(&s);

        /* a placeholder key (under 8 characters) is not starred in text */
        server_start_text(&s, "[{\"text\": \"ollama serves y = x * x\"}]", NULL);
        o = opts_for(&s, (kb_llm_api)api, NULL);
        o.api_key = "x";
        assert_int_equal(complete(&o, &r, &err), KB_OK);
        assert_string_equal(r.text, "ollama serves y = x * x");
        kb_llm_reply_release(&r);
        server_stop(&s);
    }
}

/* A server that answers plain JSON to a stream request, and one that
 * refuses to stream (400): both end in the reply, not streamed. */
static void test_no_streaming(void **state)
{
    for (int api = 0; api < 2; api++) {
        server s;
        server_start(&s, "plain-json", KEY);
        kb_llm_opts o = opts_for(&s, (kb_llm_api)api, NULL);
        kb_llm_reply r;
        kb_err err;
        assert_int_equal(complete(&o, &r, &err), KB_OK);
        assert_int_equal(r.streamed, 0);
        assert_int_equal(r.attempts, 1);
        assert_string_equal(r.finish_reason, api ? "max_tokens" : "length");
        assert_non_null(strstr(r.text, "gelu_vec4"));
        assert_non_null(strstr(r.request_json, "\"stream\":true"));
        kb_llm_reply_release(&r);
        server_stop(&s);

        server_start(&s, "refuse-stream", KEY);
        o = opts_for(&s, (kb_llm_api)api, NULL);
        assert_int_equal(complete(&o, &r, &err), KB_OK);
        assert_int_equal(r.streamed, 0);
        assert_int_equal(r.attempts, 2);
        assert_non_null(strstr(r.text, "gelu_vec4"));
        assert_non_null(strstr(r.request_json, "\"stream\":false"));
        int n;
        cJSON *log = tu_llm_server_requests(&s, &n);
        assert_int_equal(n, 2);
        const cJSON *b0 = cJSON_GetObjectItem(cJSON_GetArrayItem(log, 0), "body");
        const cJSON *b1 = cJSON_GetObjectItem(cJSON_GetArrayItem(log, 1), "body");
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(b0, "stream")));
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(b1, "stream")));
        assert_null(cJSON_GetObjectItem(b1, "stream_options"));
        cJSON_Delete(log);
        kb_llm_reply_release(&r);
        server_stop(&s);
    }
}

/* A slow reply: within the time limit it arrives (and took its time);
 * past it, the call times out. */
static void test_slow_and_timeout(void **state)
{
    for (int api = 0; api < 2; api++) {
        server s;
        server_start(&s, "slow", KEY);
        kb_llm_opts o = opts_for(&s, (kb_llm_api)api, NULL);
        kb_llm_reply r;
        kb_err err;
        assert_int_equal(complete(&o, &r, &err), KB_OK);
        assert_true(r.ms >= 300);
        assert_non_null(strstr(r.text, "gelu_vec4"));
        kb_llm_reply_release(&r);
        server_stop(&s);

        server_start(&s, "slow", KEY);
        o = opts_for(&s, (kb_llm_api)api, NULL);
        o.timeout_ms = 150;
        o.max_retries = 0;
        assert_int_equal(complete(&o, &r, &err), KB_ERR_NET);
        assert_non_null(strstr(err.msg, "timed out"));
        assert_true(r.ms < 3000);
        kb_llm_reply_release(&r);
        server_stop(&s);
    }
}

/* A reply without text is an error, KB_ERR_PARSE. */
static void test_no_text(void **state)
{
    for (int api = 0; api < 2; api++) {
        server s;
        server_start_text(&s, "[{\"text\": \"\", \"finish_reason\": \"length\"}]", NULL);
        kb_llm_opts o = opts_for(&s, (kb_llm_api)api, NULL);
        kb_llm_reply r;
        kb_err err;
        assert_int_equal(complete(&o, &r, &err), KB_ERR_PARSE);
        assert_non_null(strstr(err.msg, "the reply has no text"));
        assert_string_equal(r.finish_reason, api ? "max_tokens" : "length");
        kb_llm_reply_release(&r);
        server_stop(&s);
    }
}

/* A base URL gets the API's path; a request's own max_tokens wins. */
static void test_urls(void **state)
{
    server s;
    server_start_text(&s, "{\"replies\": [], \"then\": {\"text\": \"ok\"}}", NULL);
    static const struct { kb_llm_api api; const char *tail, *path; } cases[] = {
        { KB_LLM_OPENAI, "", "/v1/chat/completions" },
        { KB_LLM_OPENAI, "/v1/", "/v1/chat/completions" },
        { KB_LLM_OPENAI, "/openai/v1?tenant=a", "/openai/v1/chat/completions?tenant=a" },
        { KB_LLM_ANTHROPIC, "/", "/v1/messages" },
        { KB_LLM_ANTHROPIC, "/v1", "/v1/messages" },
        { KB_LLM_ANTHROPIC, "/v1/messages", "/v1/messages" },
    };
    size_t nc = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < nc; i++) {
        kb_llm_opts o = opts_for(&s, cases[i].api, cases[i].tail);
        o.api_key = NULL;
        kb_llm_request q = REQ;
        q.max_tokens = 77;
        kb_llm_reply r;
        kb_llm_reply_init(&r);
        kb_err err;
        kb_err_clear(&err);
        assert_int_equal(kb_llm_complete(&o, &q, &r, &err), KB_OK);
        assert_string_equal(r.text, "ok");
        kb_llm_reply_release(&r);
    }
    int n;
    cJSON *log = tu_llm_server_requests(&s, &n);
    assert_int_equal(n, (int)nc);
    for (size_t i = 0; i < nc; i++) {
        const cJSON *q = cJSON_GetArrayItem(log, (int)i);
        assert_string_equal(cJSON_GetObjectItem(q, "path")->valuestring, cases[i].path);
        const cJSON *b = cJSON_GetObjectItem(q, "body");
        assert_int_equal(cJSON_GetObjectItem(b, "max_tokens")->valueint, 77);
        const cJSON *h = cJSON_GetObjectItem(q, "headers");
        assert_null(cJSON_GetObjectItem(h, "Authorization"));   /* no key, no header */
        assert_null(cJSON_GetObjectItem(h, "x-api-key"));
    }
    cJSON_Delete(log);
    server_stop(&s);
}

/* Eight threads at once with the same opts: eight replies. */
typedef struct {
    const kb_llm_opts *o;
    kb_rc rc;
    int good;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    kb_llm_reply r;
    kb_err err;
    w->rc = complete(w->o, &r, &err);
    w->good = strstr(r.text, "gelu_vec4") != NULL;
    kb_llm_reply_release(&r);
    return NULL;
}

static void test_threads(void **state)
{
    server s;
    char *rel = kb_path_join(tu_top(), "corpus/tasks/gelu/candidates/vec4.cu");
    char *cand = realpath(rel, NULL);
    assert_non_null(cand);
    free(rel);
    kb_buf script;
    kb_buf_init(&script, 0);
    tu_printf(&script, "{\"replies\": [], \"then\": {\"parts\": [{\"file\": \"%s\"}], "
                       "\"chunk_delay_ms\": 2}}", cand);
    server_start_text(&s, script.data, KEY);
    for (int api = 0; api < 2; api++) {
        kb_llm_opts o = opts_for(&s, (kb_llm_api)api, NULL);
        pthread_t t[8];
        worker w[8];
        for (int i = 0; i < 8; i++) {
            w[i] = (worker){ &o, KB_ERR_INTERNAL, 0 };
            assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
        }
        for (int i = 0; i < 8; i++) {
            pthread_join(t[i], NULL);
            assert_int_equal(w[i].rc, KB_OK);
            assert_true(w[i].good);
        }
    }
    int n;
    cJSON *log = tu_llm_server_requests(&s, &n);
    assert_int_equal(n, 16);
    cJSON_Delete(log);
    server_stop(&s);
    kb_buf_release(&script);
    free(cand);
}

/* kb_llm_opts_from_config: the URL is required, KB_LLM_API is checked,
 * a .../messages URL is Anthropic's, the rest OpenAI's. */
static void test_opts_from_config(void **state)
{
    kb_config c;
    kb_config_init(&c);
    kb_llm_opts o;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_llm_opts_from_config(&c, &o, &err), KB_ERR_USAGE);
    assert_non_null(strstr(err.msg, "set KB_LLM_URL"));

    c.llm_url = "http://127.0.0.1:9/v1/chat/completions";
    c.llm_model = "m";
    c.llm_api_key = KEY;
    kb_err_clear(&err);
    assert_int_equal(kb_llm_opts_from_config(&c, &o, &err), KB_OK);
    assert_int_equal(o.api, KB_LLM_OPENAI);
    assert_string_equal(o.url, c.llm_url);
    assert_string_equal(o.model, "m");
    assert_string_equal(o.api_key, KEY);
    assert_int_equal(o.stream, 1);
    assert_int_equal(o.max_tokens, 4096);
    assert_true(o.temperature < 0);
    assert_int_equal(o.timeout_ms, 300000);
    assert_int_equal(o.max_retries, 3);

    c.llm_url = "https://api.example.invalid/v1/messages/";
    assert_int_equal(kb_llm_opts_from_config(&c, &o, &err), KB_OK);
    assert_int_equal(o.api, KB_LLM_ANTHROPIC);
    c.llm_api = "openai";         /* KB_LLM_API wins over the URL */
    assert_int_equal(kb_llm_opts_from_config(&c, &o, &err), KB_OK);
    assert_int_equal(o.api, KB_LLM_OPENAI);
    c.llm_url = "http://127.0.0.1:9";
    c.llm_api = "Anthropic";
    c.llm_timeout_ms = 1234;
    assert_int_equal(kb_llm_opts_from_config(&c, &o, &err), KB_OK);
    assert_int_equal(o.api, KB_LLM_ANTHROPIC);
    assert_int_equal(o.timeout_ms, 1234);
    c.llm_api = "gemini";
    assert_int_equal(kb_llm_opts_from_config(&c, &o, &err), KB_ERR_USAGE);
    assert_string_equal(err.msg, "bad KB_LLM_API 'gemini': expected openai or anthropic");

    /* Anthropic's API needs a model; a URL that is not http(s) is refused */
    c.llm_api = "anthropic";
    c.llm_model = NULL;
    assert_int_equal(kb_llm_opts_from_config(&c, &o, &err), KB_OK);
    kb_llm_reply r;
    kb_llm_reply_init(&r);
    kb_err_clear(&err);
    assert_int_equal(kb_llm_complete(&o, &REQ, &r, &err), KB_ERR_USAGE);
    assert_non_null(strstr(err.msg, "KB_LLM_MODEL"));
    kb_llm_reply_release(&r);
    o.api = KB_LLM_OPENAI;
    o.url = "ftp://127.0.0.1:9/v1";
    kb_err_clear(&err);
    assert_int_equal(kb_llm_complete(&o, &REQ, &r, &err), KB_ERR_USAGE);
    assert_non_null(strstr(err.msg, "only http and https"));
    assert_string_equal(r.text, "");
    assert_non_null(r.raw);
    kb_llm_reply_release(&r);
    /* nothing listens: a network error, after the retries */
    unsigned port = 0;
    int fd = tu_bind_local(0, &port);
    assert_true(fd >= 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1", port);
    o.url = url;
    o.max_retries = 1;
    kb_err_clear(&err);
    assert_int_equal(kb_llm_complete(&o, &REQ, &r, &err), KB_ERR_NET);
    assert_int_equal(r.attempts, 2);
    kb_llm_reply_release(&r);
    close(fd);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_reply),
        cmocka_unit_test(test_rate_limited),
        cmocka_unit_test(test_overloaded),
        cmocka_unit_test(test_cut_stream),
        cmocka_unit_test(test_stream_error),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_unauthorized),
        cmocka_unit_test(test_no_streaming),
        cmocka_unit_test(test_slow_and_timeout),
        cmocka_unit_test(test_no_text),
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_opts_from_config),
    };
    return cmocka_run_group_tests(tests, server_up, server_down);
}
