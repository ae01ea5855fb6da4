/* test_rerank_llm.c - the llm reranking stage (query/rerank_llm.c) against
 * the scripted LLM server (tests/llm/scripted_llm.py) on 127.0.0.1, over a
 * fused list of a real store: a reply that reorders (OpenAI and Anthropic),
 * the request it sends, the cache (a second identical call sends nothing;
 * another model or pool asks again; a failure is not kept), and every
 * failure leaving kb's own order with the reason: a reply with words, a
 * slow reply past KB_RERANK_TIMEOUT_MS, a 429 and a 500 (not retried).
 * A lent model (MCP sampling's place) when no endpoint is set. The reply
 * reader's cases on their own. */
#include "kb/kb_int.h"
#include "query/query_int.h"

#include "tests/unit/test_util.h"
#include "tests/unit/test_scripted_llm.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------ server */

static tu_llm_server srv;
static kb_store *store;

static int setup(void **state)
{
    (void)state;
    tu_llm_server_up(&srv, "rerank-llm");

    /* five sections of one guide; fusion's order is their ids' */
    char *kbdir = kb_path_join(srv.dir, "kb");
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_store_open(kbdir, KB_STORE_CREATE, &store, &err), KB_OK);
    assert_int_equal(kb_store_exec(store,
        "INSERT INTO sources(id) VALUES('guide');"
        "INSERT INTO documents(id, source_id, key, title, content_hash)"
        " VALUES(1, 'guide', 'k', 'Best Practices', 'h');"
        "INSERT INTO chunks(id, document_id, ord, kind, heading_path, text, tokens) VALUES"
        " (1, 1, 0, 'text', '[\"Intro\"]', 'What this guide is about.', 5),"
        " (2, 1, 1, 'text', '[\"Memory\", \"Registers\"]', 'Registers   are\n fast.', 3),"
        " (3, 1, 2, 'text', '[\"Memory\", \"Shared Memory Banks\"]',"
        "  'Shared memory is divided into banks; a bank conflict serializes.', 10),"
        " (4, 1, 3, 'text', '[\"Occupancy\"]', 'Occupancy is the ratio of warps.', 6),"
        " (5, 1, 4, 'text', '[\"Padding\"]', 'Pad the tile by one column.', 6);",
        &err), KB_OK);
    free(kbdir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kb_store_close(store);
    tu_llm_server_down(&srv);
    return 0;
}

/* Loads a script written from text (which also empties the request log). */
static void load_script(const char *text)
{
    tu_llm_server_load_text(&srv, text, NULL);
}

static int nrequests(void)
{
    int n;
    cJSON_Delete(tu_llm_server_requests(&srv, &n));
    return n;
}

/* ------------------------------------------------------------------ calls */

static char url_openai[128], url_anthropic[128];

static void config_for(kb_config *cfg, const char *url, const char *model, long timeout_ms)
{
    kb_config_init(cfg);
    snprintf(url_openai, sizeof url_openai, "%s/v1/chat/completions", srv.base);
    snprintf(url_anthropic, sizeof url_anthropic, "%s/v1/messages", srv.base);
    cfg->llm_url = (char *)(strcmp(url, "anthropic") == 0 ? url_anthropic : url_openai);
    cfg->llm_model = (char *)model;
    cfg->rerank_timeout_ms = timeout_ms;
}

/* Runs the stage over fusion's list 1..5 for query; the new order of the
 * ids into order. */
static void run_stage(const kb_config *cfg, const char *query, kb_rerank_info *info,
                      int64_t order[5])
{
    kb_hits fused = { 0 };
    for (int64_t id = 1; id <= 5; id++)
        assert_int_equal(kb_hits_push(&fused, id, 1.0 / (double)id), KB_OK);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_rerank_llm(store, cfg, NULL, query, &fused, KB_RERANK_LLM_TOP, info,
                                   &err), KB_OK);
    assert_int_equal(fused.n, 5);
    for (size_t i = 0; i < 5; i++)
        order[i] = fused.items[i].id;
    kb_hits_release(&fused);
}

static void assert_order(const int64_t got[5], int64_t a, int64_t b, int64_t c,
                         int64_t d, int64_t e)
{
    const int64_t want[5] = { a, b, c, d, e };
    for (int i = 0; i < 5; i++)
        if (got[i] != want[i])
            fail_msg("order %lld %lld %lld %lld %lld, wanted %lld %lld %lld %lld %lld",
                     (long long)got[0], (long long)got[1], (long long)got[2],
                     (long long)got[3], (long long)got[4], (long long)a, (long long)b,
                     (long long)c, (long long)d, (long long)e);
}

/* ------------------------------------------------------------------ tests */

static void test_parse(void **state)
{
    (void)state;
    size_t o[6], n;
    assert_int_equal(kb_rerank_llm_parse("[3, 1, 2]", 5, o, &n), 0);
    assert_int_equal(n, 3);
    assert_true(o[0] == 2 && o[1] == 0 && o[2] == 1);
    assert_int_equal(kb_rerank_llm_parse("```json\n[2,1]\n```\n", 5, o, &n), 0);
    assert_true(n == 2 && o[0] == 1 && o[1] == 0);
    assert_int_equal(kb_rerank_llm_parse(" [4] > [2] > [5]", 5, o, &n), 0);
    assert_true(n == 3 && o[0] == 3 && o[1] == 1 && o[2] == 4);
    /* unknown and repeated ids are passed over */
    assert_int_equal(kb_rerank_llm_parse("[9, 2, 0, 2, 99999999999, 1]", 5, o, &n), 0);
    assert_true(n == 2 && o[0] == 1 && o[1] == 0);
    /* anything but ids, or none at all */
    assert_int_equal(kb_rerank_llm_parse("The best passage is [3].", 5, o, &n), -1);
    assert_int_equal(kb_rerank_llm_parse("[\"3\", \"1\"]", 5, o, &n), -1);
    assert_int_equal(kb_rerank_llm_parse("[]", 5, o, &n), -1);
    assert_int_equal(kb_rerank_llm_parse("", 5, o, &n), -1);
}

/* A good reply reorders; the request says what the stage asks; the same
 * query and pool a second time costs no request; another model asks. */
static void test_reorders_and_caches(void **state)
{
    (void)state;
    load_script("{\"replies\": [{\"text\": \"[3, 5]\"}, {\"text\": \"```\\n[5]\\n```\"}]}");
    kb_config cfg;
    config_for(&cfg, "openai", "judge", 5000);
    kb_rerank_info info;
    int64_t order[5];
    run_stage(&cfg, "bank conflicts in shared memory", &info, order);
    assert_order(order, 3, 5, 1, 2, 4);   /* named first, the rest as they were */
    assert_int_equal(info.stage, KB_RERANK_LLM);
    assert_string_equal(info.model, "judge");
    assert_int_equal(info.pool, 5);
    assert_int_equal(info.ordered, 2);
    assert_int_equal(info.cached, 0);
    assert_string_equal(info.fallback, "");
    int n;
    cJSON *log = tu_llm_server_requests(&srv, &n);
    assert_int_equal(n, 1);
    const cJSON *body = cJSON_GetObjectItem(cJSON_GetArrayItem(log, 0), "body");
    assert_string_equal(cJSON_GetObjectItem(body, "model")->valuestring, "judge");
    assert_int_equal(cJSON_GetObjectItem(body, "temperature")->valuedouble, 0);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(body, "stream")));
    const cJSON *msgs = cJSON_GetObjectItem(body, "messages");
    assert_int_equal(cJSON_GetArraySize(msgs), 2);
    const char *sys = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 0), "content")->valuestring;
    const char *user = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 1), "content")->valuestring;
    assert_non_null(strstr(sys, "passage numbers only"));
    assert_true(strncmp(user, "Question: bank conflicts in shared memory\n", 42) == 0);
    assert_non_null(strstr(user, "[1] source: guide\nsection: Best Practices > Intro\n"
                                 "text: What this guide is about.\n"));
    /* the heading path in full, the text's blanks each one space */
    assert_non_null(strstr(user, "[2] source: guide\nsection: Best Practices > Memory > "
                                 "Registers\ntext: Registers are fast.\n"));
    assert_non_null(strstr(user, "[5] source: guide"));
    assert_null(strstr(user, "[6]"));
    assert_non_null(strstr(user, "JSON array of passage numbers"));
    cJSON_Delete(log);

    /* the same query and pool: the cache's order, no request */
    run_stage(&cfg, "bank conflicts in shared memory", &info, order);
    assert_order(order, 3, 5, 1, 2, 4);
    assert_int_equal(info.cached, 1);
    assert_int_equal(info.ordered, 2);
    assert_true(info.llm_ms == 0);
    assert_int_equal(nrequests(), 1);
    /* another model is another entry */
    cfg.llm_model = "judge-2";
    run_stage(&cfg, "bank conflicts in shared memory", &info, order);
    assert_order(order, 5, 1, 2, 3, 4);
    assert_int_equal(info.cached, 0);
    assert_int_equal(nrequests(), 2);
}

/* The Anthropic API: the system prompt apart, the reply read alike. */
static void test_anthropic(void **state)
{
    (void)state;
    load_script("{\"replies\": [{\"text\": \"[4, 2, 1, 3, 5]\"}]}");
    kb_config cfg;
    config_for(&cfg, "anthropic", "claude-judge", 5000);
    kb_rerank_info info;
    int64_t order[5];
    run_stage(&cfg, "warps resident per SM", &info, order);
    assert_order(order, 4, 2, 1, 3, 5);
    assert_int_equal(info.ordered, 5);
    assert_string_equal(info.fallback, "");
    int n;
    cJSON *log = tu_llm_server_requests(&srv, &n);
    assert_int_equal(n, 1);
    const cJSON *r = cJSON_GetArrayItem(log, 0);
    assert_string_equal(cJSON_GetObjectItem(r, "api")->valuestring, "anthropic");
    const cJSON *body = cJSON_GetObjectItem(r, "body");
    assert_non_null(strstr(cJSON_GetObjectItem(body, "system")->valuestring,
                           "passage numbers only"));
    assert_int_equal(cJSON_GetObjectItem(body, "max_tokens")->valueint, 400);
    cJSON_Delete(log);
}

/* Each failure: fusion's order as it was, the reason, and nothing kept
 * in the cache (the next identical call asks again). */
static void expect_fallback(const char *script, long timeout_ms, const char *why,
                            int want_requests)
{
    load_script(script);
    kb_config cfg;
    config_for(&cfg, "openai", "judge", timeout_ms);
    kb_rerank_info info;
    int64_t order[5];
    double t0 = kb_now_ms();
    run_stage(&cfg, "a question that fails", &info, order);
    double took = kb_now_ms() - t0;
    assert_order(order, 1, 2, 3, 4, 5);
    assert_int_equal(info.stage, KB_RERANK_LLM);
    assert_int_equal(info.ordered, 0);
    if (!strstr(info.fallback, why))
        fail_msg("fallback '%s', wanted '%s' in it", info.fallback, why);
    assert_int_equal(nrequests(), want_requests);
    assert_true(took < 5000);
    run_stage(&cfg, "a question that fails", &info, order);
    assert_int_equal(info.cached, 0);
    assert_int_equal(nrequests(), 2 * want_requests);
}

static void test_fallbacks(void **state)
{
    (void)state;
    expect_fallback("{\"then\": {\"text\": \"Passage 3 answers it best, then 1.\"}}", 5000,
                    "the reply is not a list of passage ids: 'Passage 3 answers", 1);
    expect_fallback("{\"then\": {\"text\": \"[]\"}}", 5000, "not a list of passage ids", 1);
    /* slow: past KB_RERANK_TIMEOUT_MS, not waited for */
    expect_fallback("{\"then\": {\"text\": \"[2]\", \"delay_ms\": 3000}}", 300,
                    "timed out", 1);
    /* a 429 and a 500 are not retried: a query waits for one request */
    expect_fallback("{\"then\": {\"status\": 429, \"error\": \"slow down\", "
                    "\"headers\": {\"Retry-After\": \"1\"}}}", 5000, "HTTP 429", 1);
    expect_fallback("{\"then\": {\"status\": 500, \"error\": \"boom\"}}", 5000,
                    "HTTP 500", 1);
}

/* A second pass reuses the first's verdict: the sections it named first,
 * in its order, where the new list has them; no request. */
/* A lent model (kb mcp's client through sampling), scripted in C: its
 * replies in turn, and what it was asked. */
typedef struct {
    const char *replies[4];
    int asked;
    char user[4096];
    long timeout_ms;
} lender;

static kb_rc lent_complete(void *ctx, const char *system, const char *user, long max_tokens,
                           long timeout_ms, char **text, char *model, size_t size,
                           kb_err *err)
{
    lender *l = ctx;
    assert_non_null(strstr(system, "passage numbers only"));
    assert_true(max_tokens > 0);
    snprintf(l->user, sizeof l->user, "%s", user);
    l->timeout_ms = timeout_ms;
    const char *r = l->replies[l->asked++];
    if (!r)
        return kb_err_set(err, KB_ERR_NET, "the client refused: no sampling today");
    snprintf(model, size, "client-model");
    *text = kb_strdup(r);
    return KB_OK;
}

/* With no KB_LLM_URL the lent model orders the pool (same prompt, same
 * parser, cached by its name); a reply of words or a refusal keeps kb's
 * order with the reason; with KB_LLM_URL set the endpoint is asked and
 * the lent model is not. */
static void test_lent(void **state)
{
    (void)state;
    lender l = { .replies = { "[4, 2]", "I think 3 is best", NULL, NULL } };
    kb_llm_lent lent = { .complete = lent_complete, .ctx = &l, .name = "sampling: test",
                         .via = "sampling" };
    kb_config cfg;
    kb_config_init(&cfg);
    cfg.rerank_timeout_ms = 1234;
    kb_rerank_kind k;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_query_rerank_resolve(&cfg, KB_RERANK_LLM, NULL, &k, &err), KB_ERR_USAGE);
    assert_int_equal(kb_query_rerank_resolve(&cfg, KB_RERANK_LLM, &lent, &k, &err), KB_OK);
    assert_int_equal(k, KB_RERANK_LLM);

    kb_hits fused = { 0 };
    for (int64_t id = 1; id <= 5; id++)
        assert_int_equal(kb_hits_push(&fused, id, 1.0 / (double)id), KB_OK);
    kb_rerank_info info;
    assert_int_equal(kb_rerank_llm(store, &cfg, &lent, "lent: bank conflicts", &fused,
                                   KB_RERANK_LLM_TOP, &info, &err), KB_OK);
    int64_t got[5];
    for (size_t i = 0; i < 5; i++)
        got[i] = fused.items[i].id;
    assert_order(got, 4, 2, 1, 3, 5);
    assert_int_equal(l.asked, 1);
    assert_int_equal(l.timeout_ms, 1234);
    assert_non_null(strstr(l.user, "Question: lent: bank conflicts"));
    assert_non_null(strstr(l.user, "[3] source: guide"));
    assert_string_equal(info.via, "sampling");
    assert_string_equal(info.lent_model, "client-model");
    assert_string_equal(info.fallback, "");
    assert_int_equal(info.ordered, 2);
    kb_hits_release(&fused);

    /* the same query and pool: the cache, no request */
    for (int64_t id = 1; id <= 5; id++)
        assert_int_equal(kb_hits_push(&fused, id, 1.0 / (double)id), KB_OK);
    assert_int_equal(kb_rerank_llm(store, &cfg, &lent, "lent: bank conflicts", &fused,
                                   KB_RERANK_LLM_TOP, &info, &err), KB_OK);
    assert_int_equal(l.asked, 1);
    assert_true(info.cached);
    assert_int_equal(fused.items[0].id, 4);
    kb_hits_release(&fused);

    /* words, then a refusal: kb's own order, and why */
    const char *whys[] = { "not a list of passage ids", "no sampling today" };
    for (int t = 0; t < 2; t++) {
        for (int64_t id = 1; id <= 5; id++)
            assert_int_equal(kb_hits_push(&fused, id, 1.0 / (double)id), KB_OK);
        char q[32];
        snprintf(q, sizeof q, "lent: fallback %d", t);
        assert_int_equal(kb_rerank_llm(store, &cfg, &lent, q, &fused, KB_RERANK_LLM_TOP,
                                       &info, &err), KB_OK);
        for (size_t i = 0; i < 5; i++)
            got[i] = fused.items[i].id;
        assert_order(got, 1, 2, 3, 4, 5);
        assert_non_null(strstr(info.fallback, whys[t]));
        assert_int_equal(info.ordered, 0);
        kb_hits_release(&fused);
    }
    assert_int_equal(l.asked, 3);

    /* an endpoint configured comes first: the lent model is not asked */
    load_script("{\"replies\": [{\"text\": \"[5]\"}]}");
    config_for(&cfg, "openai", "judge", 5000);
    for (int64_t id = 1; id <= 5; id++)
        assert_int_equal(kb_hits_push(&fused, id, 1.0 / (double)id), KB_OK);
    assert_int_equal(kb_rerank_llm(store, &cfg, &lent, "lent: endpoint first", &fused,
                                   KB_RERANK_LLM_TOP, &info, &err), KB_OK);
    assert_int_equal(l.asked, 3);
    assert_int_equal(fused.items[0].id, 5);
    assert_string_equal(info.via, "endpoint");
    assert_string_equal(info.model, "judge");
    kb_hits_release(&fused);
}

static void test_again(void **state)
{
    (void)state;
    kb_hits fused = { 0 }, first = { 0 };
    for (int64_t id = 1; id <= 6; id++)
        assert_int_equal(kb_hits_push(&fused, id, 1.0), KB_OK);
    assert_int_equal(kb_hits_push(&first, 5, 0), KB_OK);
    assert_int_equal(kb_hits_push(&first, 9, 0), KB_OK);   /* not in the list */
    assert_int_equal(kb_hits_push(&first, 2, 0), KB_OK);
    int before = nrequests();
    assert_int_equal(kb_rerank_llm_again(&fused, &first), KB_OK);
    int64_t want[] = { 5, 2, 1, 3, 4, 6 };
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(fused.items[i].id, want[i]);
    assert_int_equal(nrequests(), before);
    kb_hits_release(&fused);
    kb_hits_release(&first);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_reorders_and_caches),
        cmocka_unit_test(test_anthropic),
        cmocka_unit_test(test_fallbacks),
        cmocka_unit_test(test_again),
        cmocka_unit_test(test_lent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
