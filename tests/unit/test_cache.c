/* test_cache.c - the caches of the serving path: kb_lru (eviction in use
 * order, the memory cap, many threads at once), the result cache of the
 * tools (a hit is the miss's JSON byte for byte, arguments in any order
 * are one key, an ingest by another connection moves the generation) and
 * the process's cache of query embeddings (the embedder's vectors bit for
 * bit; a prompt's three retrievals embed its query once). On a small real
 * KB of fixture files and the real model. */
#include "kb/kb.h"
#include "kb/kb_int.h"
#include "generator/gen.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* ------------------------------------------------------------ kb_lru */

static void put_str(kb_lru *c, const char *k, const char *v)
{
    assert_int_equal(kb_lru_put(c, k, strlen(k), v, strlen(v)), KB_OK);
}

/* 1 if k is kept, with value v when v is not NULL. */
static int has(kb_lru *c, const char *k, const char *v)
{
    void *got = NULL;
    size_t len = 0;
    kb_rc rc = kb_lru_get(c, k, strlen(k), &got, &len);
    int ok = rc == KB_OK && (!v || (len == strlen(v) && memcmp(got, v, len) == 0));
    if (rc == KB_OK)
        assert_int_equal(((char *)got)[len], '\0');
    free(got);
    return ok;
}

static void test_lru_eviction(void **state)
{
    (void)state;
    /* the cost of one entry of this size, from a cache of its own */
    kb_lru *probe = kb_lru_new(1 << 20);
    assert_non_null(probe);
    put_str(probe, "k0", "v0");
    kb_lru_stats st;
    kb_lru_stats_get(probe, &st);
    size_t cost = st.bytes;
    assert_true(cost > 4);
    kb_lru_free(probe);

    kb_lru *c = kb_lru_new(3 * cost);   /* room for three */
    put_str(c, "k1", "v1");
    put_str(c, "k2", "v2");
    put_str(c, "k3", "v3");
    assert_true(has(c, "k1", "v1"));   /* k1 used: k2 is now the oldest */
    put_str(c, "k4", "v4");
    assert_false(has(c, "k2", NULL));
    assert_true(has(c, "k1", "v1") && has(c, "k3", "v3") && has(c, "k4", "v4"));
    put_str(c, "k5", "v5");            /* k1 the least recently used now */
    assert_false(has(c, "k1", NULL));
    assert_true(has(c, "k3", "v3") && has(c, "k5", "v5"));
    kb_lru_stats_get(c, &st);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.evictions, 2);
    assert_int_equal(st.bytes, 3 * cost);
    /* a new value for a key replaces the old, in place of another entry */
    put_str(c, "k4", "w4");
    assert_true(has(c, "k4", "w4"));
    kb_lru_stats_get(c, &st);
    assert_int_equal(st.entries, 3);
    kb_lru_clear(c);
    kb_lru_stats_get(c, &st);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);
    assert_false(has(c, "k1", NULL));
    kb_lru_free(c);
}

static void test_lru_cap(void **state)
{
    (void)state;
    size_t cap = 64 << 10;
    kb_lru *c = kb_lru_new(cap);
    assert_non_null(c);
    char key[32], *val = malloc(4096);
    assert_non_null(val);
    memset(val, 'x', 4096);
    kb_lru_stats st;
    srand(11);
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        size_t len = (size_t)(rand() % 4096);
        assert_int_equal(kb_lru_put(c, key, strlen(key), val, len), KB_OK);
        kb_lru_stats_get(c, &st);
        assert_true(st.bytes <= cap);
        assert_true(has(c, key, NULL));   /* the newest is always kept */
    }
    assert_true(st.evictions > 4000);
    /* an entry over the cap alone is not kept, and evicts nothing */
    size_t before = st.entries;
    char *big = calloc(1, cap + 1);
    assert_non_null(big);
    assert_int_equal(kb_lru_put(c, "big", 3, big, cap + 1), KB_OK);
    assert_false(has(c, "big", NULL));
    kb_lru_stats_get(c, &st);
    assert_int_equal(st.entries, before);
    free(big);
    free(val);
    kb_lru_free(c);
}

typedef struct {
    kb_lru *c;
    int seed;
    int bad;
    long gets;
} lru_worker;

/* Puts and gets of 500 keys whose value is the key twice: whatever a get
 * returns must be its key's. */
static void *lru_thread(void *p)
{
    lru_worker *w = p;
    unsigned s = (unsigned)w->seed;
    char key[32], val[64];
    for (int i = 0; i < 20000; i++) {
        int k = (int)(rand_r(&s) % 500);
        snprintf(key, sizeof key, "q%d", k);
        snprintf(val, sizeof val, "%s|%s", key, key);
        if (rand_r(&s) % 3 == 0) {
            if (kb_lru_put(w->c, key, strlen(key), val, strlen(val)) != KB_OK)
                w->bad++;
        } else {
            void *got = NULL;
            size_t len = 0;
            kb_rc rc = kb_lru_get(w->c, key, strlen(key), &got, &len);
            w->gets++;
            if (rc == KB_OK && (len != strlen(val) || memcmp(got, val, len) != 0))
                w->bad++;
            if (rc != KB_OK && rc != KB_ERR_NOTFOUND)
                w->bad++;
            free(got);
        }
    }
    return NULL;
}

static void test_lru_threads(void **state)
{
    (void)state;
    size_t cap = 16 << 10;   /* small: eviction under contention too */
    kb_lru *c = kb_lru_new(cap);
    assert_non_null(c);
    enum { N = 8 };
    pthread_t th[N];
    lru_worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (lru_worker){ c, i + 1, 0, 0 };
        assert_int_equal(pthread_create(&th[i], NULL, lru_thread, &w[i]), 0);
    }
    long gets = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].bad, 0);
        gets += w[i].gets;
    }
    kb_lru_stats st;
    kb_lru_stats_get(c, &st);
    assert_int_equal(st.hits + st.misses, (uint64_t)gets);
    assert_true(st.hits > 0 && st.evictions > 0);
    assert_true(st.bytes <= cap);
    kb_lru_free(c);
}

/* ------------------------------------------------------------ the KB */

static char *kb_dir;
static kb_store *store;
static kb_config config;
static int have_model;

static int setup(void **state)
{
    (void)state;
    kb_err err;
    kb_err_clear(&err);
    kb_log_set_level(KB_LOG_QUIET);
    kb_dir = tu_tmpdir("cache");
    store = tu_open_kb(kb_dir);
    if (kb_config_load(&config, &err) != KB_OK)
        return -1;
    kb_embedder *e = NULL;
    have_model = kb_embedder_open_config(&config, &e, &err) == KB_OK;
    kb_embedder_free(e);
    char *md = tu_fixture("md");
    char *targets[] = { md };
    kb_ingest_opts o = { .config = &config, .embed = have_model };
    kb_ingest_stats stats;
    kb_rc rc = kb_ingest_run(store, &o, targets, 1, &stats, &err);
    if (rc != KB_OK)
        fprintf(stderr, "ingest: %s\n", err.msg);
    free(md);
    return rc == KB_OK && stats.chunks_written > 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    kb_store_close(store);
    kb_config_release(&config);
    tu_rmtree(kb_dir);
    free(kb_dir);
    return 0;
}

/* The search tool's answer for args through ctx; took_ms removed and the
 * rest printed (caller frees). */
static char *search(kb_tool_ctx *ctx, const char *args)
{
    kb_err err;
    kb_err_clear(&err);
    cJSON *a = cJSON_Parse(args), *out = NULL;
    assert_non_null(a);
    kb_rc rc = kb_tool_call(ctx, "search", a, &out, &err);
    if (rc != KB_OK)
        fail_msg("search %s: %s", args, err.msg);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(out, "took_ms")));
    cJSON_DeleteItemFromObjectCaseSensitive(out, "took_ms");
    char *text = cJSON_PrintUnformatted(out);
    cJSON_Delete(out);
    cJSON_Delete(a);
    return text;
}

static void test_result_cache(void **state)
{
    (void)state;
    kb_err err;
    kb_err_clear(&err);
    kb_result_cache *rc = NULL;
    assert_int_equal(kb_result_cache_new(1 << 20, &rc, &err), KB_OK);
    kb_tool_ctx plain = { .store = store, .config = &config };
    kb_tool_ctx ctx = { .store = store, .config = &config, .results = rc };
    const char *q = "{\"query\":\"shared memory bank conflicts\",\"k\":3}";

    char *want = search(&plain, q);
    char *miss = search(&ctx, q);
    assert_int_equal(ctx.cache_hit, 0);
    char *hit = search(&ctx, q);
    assert_int_equal(ctx.cache_hit, 1);
    /* a hit is the miss byte for byte, and both what no cache gives */
    assert_string_equal(miss, want);
    assert_string_equal(hit, want);
    free(hit);
    /* the same arguments in another order: the same key */
    hit = search(&ctx, "{\"k\":3,\"query\":\"shared memory bank conflicts\"}");
    assert_int_equal(ctx.cache_hit, 1);
    assert_string_equal(hit, want);
    free(hit);
    /* what changes the answer changes the key: k, mode, the budget */
    free(search(&ctx, "{\"query\":\"shared memory bank conflicts\",\"k\":4}"));
    assert_int_equal(ctx.cache_hit, 0);
    free(search(&ctx, "{\"query\":\"shared memory bank conflicts\",\"k\":3,\"mode\":\"lexical\"}"));
    assert_int_equal(ctx.cache_hit, 0);
    ctx.budget_tokens = 1000;
    free(search(&ctx, q));
    assert_int_equal(ctx.cache_hit, 0);
    ctx.budget_tokens = 0;
    /* tools not marked cached always run */
    cJSON *out = NULL, *a = cJSON_Parse("{}");
    for (int i = 0; i < 2; i++) {
        assert_int_equal(kb_tool_call(&ctx, "status", a, &out, &err), KB_OK);
        assert_int_equal(ctx.cache_hit, 0);
        cJSON_Delete(out);
    }
    cJSON_Delete(a);
    kb_lru_stats st;
    kb_result_cache_stats(rc, &st);
    assert_int_equal(st.hits, 2);
    free(miss);
    free(want);

    /* an ingest through another connection moves the generation: the
     * cached answer (nothing found) is not served after it */
    const char *word = "{\"query\":\"quuxwarpfrobnicate\",\"mode\":\"lexical\"}";
    char *before = search(&ctx, word);
    assert_non_null(strstr(before, "\"results\":[]"));
    free(search(&ctx, word));
    assert_int_equal(ctx.cache_hit, 1);
    char *doc = kb_path_join(kb_dir, "new.md");
    const char text[] = "# Frobnication\n\nThe quuxwarpfrobnicate trick moves tiles.\n";
    tu_write_file(doc, text, sizeof text - 1);
    kb_store *writer = NULL;
    assert_int_equal(kb_store_open(kb_dir, 0, &writer, &err), KB_OK);
    char *targets[] = { doc };
    kb_ingest_opts o = { .config = &config };
    kb_ingest_stats is;
    assert_int_equal(kb_ingest_run(writer, &o, targets, 1, &is, &err), KB_OK);
    kb_store_close(writer);
    char *after = search(&ctx, word);
    assert_int_equal(ctx.cache_hit, 0);
    assert_non_null(strstr(after, "quuxwarpfrobnicate"));
    free(search(&ctx, word));   /* and kept again, for this generation */
    assert_int_equal(ctx.cache_hit, 1);
    free(before);
    free(after);
    free(doc);
    kb_result_cache_free(rc);
}

/* ------------------------------------------------------------ embeddings */

/* 1 (having said so) when the model is not installed. */
static int no_model(void)
{
    if (!have_model)
        printf("skip: an embedding case (no model: make model)\n");
    return !have_model;
}

static void test_embed_cache(void **state)
{
    (void)state;
    if (no_model())
        return;
    kb_err err;
    kb_err_clear(&err);
    kb_embedder *e = NULL;
    assert_int_equal(kb_embedder_open_config(&config, &e, &err), KB_OK);
    kb_lru *c = kb_embed_cache();
    assert_non_null(c);
    size_t dim = (size_t)kb_embedder_dim(e);
    const char *texts[] = { "why is my transpose slow", "tensor core gemm bf16",
                            "why is my transpose slow" };
    float *want = malloc(3 * dim * sizeof *want), *got = malloc(3 * dim * sizeof *got);
    assert_int_equal(kb_embedder_embed(e, texts, 3, want, &err), KB_OK);
    kb_lru_stats s0, s1, s2;
    kb_lru_stats_get(c, &s0);
    assert_int_equal(kb_embedder_embed_queries(e, texts, 3, got, &err), KB_OK);
    kb_lru_stats_get(c, &s1);
    assert_int_equal(s1.misses - s0.misses, 3);   /* the duplicate not yet kept */
    assert_memory_equal(got, want, 3 * dim * sizeof *got);
    memset(got, 0, 3 * dim * sizeof *got);
    assert_int_equal(kb_embedder_embed_queries(e, texts, 3, got, &err), KB_OK);
    kb_lru_stats_get(c, &s2);
    assert_int_equal(s2.hits - s1.hits, 3);
    assert_int_equal(s2.misses - s1.misses, 0);
    assert_memory_equal(got, want, 3 * dim * sizeof *got);   /* bit for bit */
    free(want);
    free(got);
    kb_embedder_free(e);
}

/* A prompt retrieves several times (skills, exemplars, a query per topic
 * of the task's classes): each query text is embedded once, and the same
 * prompt built again embeds nothing. */
static void test_prompt_embeds_once(void **state)
{
    (void)state;
    if (no_model())
        return;
    kb_err err;
    kb_err_clear(&err);
    kb_lru *c = kb_embed_cache();
    kb_lru_clear(c);   /* its query text may have been asked before */
    char *tasks = kb_path_join(tu_top(), "corpus/tasks");
    kb_gen_prompt_opts o = { .store = store, .config = &config, .tasks_dir = tasks,
                             .task = "transpose" };
    kb_gen_prompt p;
    kb_lru_stats s0, s1, s2;
    kb_lru_stats_get(c, &s0);
    if (kb_gen_prompt_build(&o, &p, &err) != KB_OK)
        fail_msg("prompt: %s", err.msg);
    kb_gen_prompt_release(&p);
    kb_lru_stats_get(c, &s1);
    size_t texts = s1.misses - s0.misses;
    assert_true(texts >= 1);
    assert_true(s1.hits - s0.hits >= 1);   /* skills and exemplars share one */
    if (kb_gen_prompt_build(&o, &p, &err) != KB_OK)
        fail_msg("prompt: %s", err.msg);
    kb_gen_prompt_release(&p);
    kb_lru_stats_get(c, &s2);
    assert_int_equal(s2.misses - s1.misses, 0);
    assert_int_equal(s2.hits - s1.hits, texts + (s1.hits - s0.hits));
    free(tasks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lru_eviction),
        cmocka_unit_test(test_lru_cap),
        cmocka_unit_test(test_lru_threads),
        cmocka_unit_test(test_result_cache),
        cmocka_unit_test(test_embed_cache),
        cmocka_unit_test(test_prompt_embeds_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
