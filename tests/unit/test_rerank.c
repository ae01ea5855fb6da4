/* test_rerank.c - the remote reranking stage against a libmicrohttpd
 * server on 127.0.0.1 that scores each text by how often it says the
 * query's word: the Cohere/Jina/vLLM/llama.cpp reply and TEI's, the
 * request's fields and key, replies that leave a text out or score one
 * twice, malformed JSON, a 401; and a fused list reordered through a
 * real store. The local stage's boilerplate rule on a store of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb/kb.h"
#include "kb/kb_int.h"
#include "query/query_int.h"
#include "test_util.h"
#include "test_http_server.h"

enum { COHERE, TEI, MISSING, TWICE, MALFORMED, E401 };

static atomic_int mode;
static atomic_int requests;
static atomic_int saw_auth;     /* 1: right key, -1: wrong key, 0: none */
static atomic_int saw_fields;   /* 1: query, documents, texts, model */
static struct MHD_Daemon *daemon_;
static char url[128];

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
                             const char *body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* How often text says word. */
static int count_word(const char *text, const char *word)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, word)) != NULL; p += strlen(word))
        n++;
    return n;
}

/* The reply for the request: each text scored by how often it says the
 * query, listed best first (as servers do), in the mode's shape. */
static char *scores_for(const char *req)
{
    cJSON *in = cJSON_Parse(req);
    const cJSON *q = cJSON_GetObjectItem(in, "query");
    const cJSON *docs = cJSON_GetObjectItem(in, "documents");
    const cJSON *texts = cJSON_GetObjectItem(in, "texts");
    const cJSON *model = cJSON_GetObjectItem(in, "model");
    saw_fields = cJSON_IsString(q) && cJSON_IsArray(docs) && cJSON_IsArray(texts) &&
                 cJSON_GetArraySize(docs) == cJSON_GetArraySize(texts) &&
                 cJSON_IsString(model) && strcmp(model->valuestring, "bge-test") == 0;
    if (!cJSON_IsString(q) || !cJSON_IsArray(docs)) {
        cJSON_Delete(in);
        return NULL;
    }
    int n = cJSON_GetArraySize(docs);
    cJSON *list = cJSON_CreateArray();
    for (int best = 100; best >= 0; best--)
        for (int i = 0; i < n; i++) {
            int s = count_word(cJSON_GetArrayItem(docs, i)->valuestring, q->valuestring);
            if (s != best || (mode == MISSING && i == 0))
                continue;
            cJSON *r = cJSON_CreateObject();
            cJSON_AddNumberToObject(r, "index", mode == TWICE ? 0 : i);
            cJSON_AddNumberToObject(r, mode == TEI ? "score" : "relevance_score",
                                    s / 10.0);
            cJSON_AddItemToArray(list, r);
        }
    cJSON *out = list;
    if (mode != TEI) {
        out = cJSON_CreateObject();
        cJSON_AddStringToObject(out, "model", "bge-test");
        cJSON_AddItemToObject(out, "results", list);
    }
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
    (void)cls;
    (void)version;
    kb_buf *body = *con_cls;
    if (!body) {
        body = calloc(1, sizeof *body);
        kb_buf_init(body, 1 << 22);
        *con_cls = body;
        return MHD_YES;
    }
    if (*upload_size) {
        if (kb_buf_append(body, upload, *upload_size) != KB_OK)
            return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    requests++;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    saw_auth = !auth ? 0 : !strcmp(auth, "Bearer sekrit") ? 1 : -1;
    if (strcmp(method, "POST") || strcmp(u, "/v1/rerank"))
        return reply(c, 404, "{\"error\":\"not found\"}");
    if (mode == MALFORMED)
        return reply(c, 200, "{\"results\": [{\"index\": 0, \"relevance");
    if (mode == E401)
        return reply(c, 401, "{\"error\":\"bad key\"}");
    char *out = scores_for(body->data ? body->data : "");
    if (!out)
        return reply(c, 400, "{\"error\":\"bad request\"}");
    enum MHD_Result r = reply(c, 200, out);
    free(out);
    return r;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    kb_buf *body = *con_cls;
    if (body) {
        kb_buf_release(body);
        free(body);
        *con_cls = NULL;
    }
}

static int setup(void **state)
{
    (void)state;
    unsigned port = 0;
    daemon_ = tu_http_server(handler, completed, &port);
    if (!daemon_)
        return -1;
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/rerank", port);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    MHD_stop_daemon(daemon_);
    return 0;
}

static const char *const texts[] = {
    "no such word here",
    "bank conflicts: one bank, then another bank",
    "a bank",
};

static kb_rc score_with(int m, double *scores, kb_err *err)
{
    mode = m;
    requests = 0;
    kb_err_clear(err);
    return kb_rerank_remote_scores(url, "bge-test", "sekrit", "bank", texts, 3,
                                   scores, err);
}

static void test_both_reply_shapes(void **state)
{
    (void)state;
    kb_err err;
    double s[3] = { -1, -1, -1 };
    /* results come back best first; the scores land at their indices */
    assert_int_equal(score_with(COHERE, s, &err), KB_OK);
    assert_true(s[0] == 0.0 && s[1] == 0.3 && s[2] == 0.1);
    assert_int_equal(saw_fields, 1);
    assert_int_equal(saw_auth, 1);
    assert_int_equal(requests, 1);
    double t[3] = { -1, -1, -1 };
    assert_int_equal(score_with(TEI, t, &err), KB_OK);
    assert_true(t[0] == 0.0 && t[1] == 0.3 && t[2] == 0.1);
    /* no key, no Authorization header */
    mode = COHERE;
    assert_int_equal(kb_rerank_remote_scores(url, NULL, NULL, "bank", texts, 3, s,
                                             &err), KB_OK);
    assert_int_equal(saw_auth, 0);
    assert_int_equal(saw_fields, 0);   /* no model was named */
}

static void test_bad_replies(void **state)
{
    (void)state;
    kb_err err;
    double s[3];
    assert_int_equal(score_with(MISSING, s, &err), KB_ERR_PARSE);
    assert_non_null(strstr(err.msg, "scored 2 of 3 texts"));
    assert_int_equal(score_with(TWICE, s, &err), KB_ERR_PARSE);
    assert_non_null(strstr(err.msg, "new index in range"));
    assert_int_equal(score_with(MALFORMED, s, &err), KB_ERR_PARSE);
    assert_non_null(strstr(err.msg, "no results list"));
    assert_int_equal(score_with(E401, s, &err), KB_ERR_NET);
    assert_non_null(strstr(err.msg, "reranker"));
    assert_non_null(strstr(err.msg, "401"));
    assert_null(strstr(err.msg, "sekrit"));
    assert_int_equal(requests, 1);   /* a 401 is not retried */
}

/* A fused list of three chunks, reordered by the reranker through what a
 * real store holds for them; the hit behind the judged top stays last. */
static void test_reorders_fused_list(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("rerank");
    kb_store *s = tu_open_kb(dir);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_store_exec(s,
        "INSERT INTO sources(id) VALUES('s');"
        "INSERT INTO documents(id, source_id, key, title, content_hash)"
        " VALUES(1, 's', 'k', 'Guide', 'h');"
        "INSERT INTO chunks(id, document_id, ord, kind, heading_path, text, tokens) VALUES"
        " (1, 1, 0, 'text', '[\"Intro\"]', 'nothing to see', 3),"
        " (2, 1, 1, 'text', '[\"Banks\"]', 'bank conflicts serialize a bank', 5),"
        " (3, 1, 2, 'text', '[\"More\"]', 'one bank', 2),"
        " (4, 1, 3, 'text', '[\"Last\"]', 'bank bank bank bank', 4);", &err), KB_OK);
    kb_hits fused = { 0 };
    for (int64_t id = 1; id <= 4; id++)
        assert_int_equal(kb_hits_push(&fused, id, 10.0 - (double)id), KB_OK);
    kb_config cfg;
    kb_config_init(&cfg);
    cfg.rerank_url = url;
    cfg.rerank_model = "bge-test";
    mode = COHERE;
    assert_int_equal(kb_rerank_remote(s, &cfg, "bank", &fused, 3, &err), KB_OK);
    assert_int_equal(fused.n, 4);
    assert_int_equal(fused.items[0].id, 2);   /* two "bank"s */
    assert_int_equal(fused.items[1].id, 3);
    assert_int_equal(fused.items[2].id, 1);
    assert_int_equal(fused.items[3].id, 4);   /* beyond the top 3: as it was */
    /* a failing reranker fails the query, clearly */
    mode = E401;
    assert_int_equal(kb_rerank_remote(s, &cfg, "bank", &fused, 3, &err), KB_ERR_NET);
    kb_hits_release(&fused);
    kb_store_close(s);
    tu_rmtree(dir);
    free(dir);
}

/* The local stage on a store of its own: nine sample READMEs open a chunk
 * with the same template line; a question that does not ask for it gets
 * the real section first, the template's section is shown by its own
 * other chunk, and a question that asks for the template keeps it. */
static void test_local_boilerplate(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("rerank-local");
    kb_store *s = tu_open_kb(dir);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_store_exec(s, "INSERT INTO sources(id) VALUES('s');", &err), KB_OK);
    kb_buf sql;
    kb_buf_init(&sql, 0);
    for (int d = 1; d <= 10; d++) {
        kb_buf_reset(&sql);
        assert_int_equal(kb_buf_printf(&sql,
            "INSERT INTO documents(id, source_id, key, title, content_hash)"
            " VALUES(%d, 's', 'k%d', 'sample %d', 'h');"
            "INSERT INTO chunks(id, document_id, ord, kind, heading_path, text, tokens)"
            " VALUES(%d, %d, 0, 'text', '[\"sample %d\"]',"
            " 'Supported OSes: Linux, Windows. Supported CPU Architecture: x86_64', 9);",
            d, d, d, d * 10, d, d), KB_OK);
        assert_int_equal(kb_store_exec(s, sql.data, &err), KB_OK);
    }
    /* sample 1's section also says what it does; document 11 is a guide */
    assert_int_equal(kb_store_exec(s,
        "INSERT INTO chunks(id, document_id, ord, kind, heading_path, text, tokens)"
        " VALUES(11, 1, 1, 'text', '[\"sample 1\"]', 'This sample runs a matrix"
        " transpose, naive and through shared memory.', 12);"
        "INSERT INTO documents(id, source_id, key, title, content_hash)"
        " VALUES(11, 's', 'guide', 'Guide', 'h');"
        "INSERT INTO chunks(id, document_id, ord, kind, heading_path, text, tokens)"
        " VALUES(200, 11, 0, 'text', '[\"Coalescing\"]', 'A slow transpose reads"
        " columns: stage the tile in shared memory.', 12);", &err), KB_OK);
    /* fusion put sample 2's template first, the guide second, sample 1's
     * section (by its template chunk) third */
    int64_t ids[] = { 20, 200, 10 };
    for (int pass = 0; pass < 2; pass++) {
        kb_hits lex = { 0 }, fused = { 0 };
        for (int i = 0; i < 3; i++) {
            assert_int_equal(kb_hits_push(&lex, ids[i], 10.0 - i), KB_OK);
            assert_int_equal(kb_hits_push(&fused, ids[i], 0.02 - 0.001 * i), KB_OK);
            fused.items[i].lex_rank = i + 1;
            fused.items[i].lex_score = 10.0 - i;
        }
        const char *q = pass == 0 ? "why is my transpose slow"
                                  : "supported OSes linux windows";
        assert_int_equal(kb_rerank_local(s, q, NULL, 0, &lex, NULL, &fused,
                                         61.0 / 1.3, NULL, NULL, &err), KB_OK);
        assert_int_equal(fused.n, 3);
        if (pass == 0) {
            assert_int_equal(fused.items[0].id, 200);   /* the real answer */
            assert_int_equal(fused.items[1].id, 11);    /* sample 1, by its own words */
            assert_int_equal(fused.items[2].id, 20);    /* the template, behind */
        } else {
            assert_int_equal(fused.items[0].id, 20);    /* asked for: kept first */
        }
        kb_hits_release(&lex);
        kb_hits_release(&fused);
    }
    kb_buf_release(&sql);
    kb_store_close(s);
    tu_rmtree(dir);
    free(dir);
}

/* Inserts document d of source src with one chunk (id d) under heading
 * path hp (JSON) with text. */
static void put_section(kb_store *s, int d, const char *src, const char *hp,
                        const char *text)
{
    kb_err err;
    kb_err_clear(&err);
    kb_buf sql;
    kb_buf_init(&sql, 0);
    assert_int_equal(kb_buf_printf(&sql,
        "INSERT OR IGNORE INTO sources(id) VALUES('%s');"
        "INSERT INTO documents(id, source_id, key, title, content_hash)"
        " VALUES(%d, '%s', 'k%d', 'document %d', 'h');"
        "INSERT INTO chunks(id, document_id, ord, kind, heading_path, text, tokens)"
        " VALUES(%d, %d, 0, 'text', '%s', '%s', 20);",
        src, d, src, d, d, d, d, hp, text), KB_OK);
    assert_int_equal(kb_store_exec(s, sql.data, &err), KB_OK);
    kb_buf_release(&sql);
}

/* The lexical list's first section (issue 22): the local stage keeps it
 * within the first three places unless more sections that the vector
 * list ranks above it pass it; then right after those. */
static void test_local_lexical_first(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("rerank-lexfirst");
    kb_store *s = tu_open_kb(dir);
    kb_err err;
    kb_err_clear(&err);
    for (int d = 1; d <= 6; d++) {
        char hp[32], text[32];
        snprintf(hp, sizeof hp, "[\"part %d\"]", d);
        snprintf(text, sizeof text, "Words of part %d alone.", d);
        put_section(s, d, "s", hp, text);
    }
    /* fusion put chunk 6, the lexical list's first, sixth */
    for (int pass = 0; pass < 2; pass++) {
        kb_hits lex = { 0 }, fused = { 0 };
        for (int i = 0; i < 6; i++) {
            int id = i + 1, lex_rank = id == 6 ? 1 : id + 1;
            assert_int_equal(kb_hits_push(&fused, id, 0.03 - 0.001 * i), KB_OK);
            fused.items[i].lex_rank = lex_rank;
            fused.items[i].lex_score = 10.0 - lex_rank;
            /* pass 0: the vector list ranks none of the five above it
             * above it; pass 1: four of them */
            fused.items[i].vec_rank = id == 6 ? 20 : pass == 0 ? 30 + id : id <= 4 ? id : 40;
        }
        for (int r = 1; r <= 6; r++)
            assert_int_equal(kb_hits_push(&lex, r == 1 ? 6 : r - 1, 10.0 - r), KB_OK);
        assert_int_equal(kb_rerank_local(s, "nothing shared", NULL, 0, &lex, NULL, &fused,
                                         61.0 / 1.3, NULL, NULL, &err), KB_OK);
        assert_int_equal(fused.n, 6);
        size_t at = 0;
        while (at < fused.n && fused.items[at].id != 6)
            at++;
        assert_int_equal(at, pass == 0 ? 2 : 4);
        /* the others keep their order */
        for (size_t i = 0, want = 1; i < fused.n; i++)
            if (fused.items[i].id != 6)
                assert_int_equal(fused.items[i].id, want++);
        kb_hits_release(&lex);
        kb_hits_release(&fused);
    }
    kb_store_close(s);
    tu_rmtree(dir);
    free(dir);
}

/* The local stage on fused order ids (best first, each first in the
 * lexical list where its place is); the new order into got. */
static void rerank_ids(kb_store *s, const char *q, const int *ids, size_t n, int *got)
{
    kb_hits lex = { 0 }, fused = { 0 };
    kb_err err;
    kb_err_clear(&err);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(kb_hits_push(&lex, ids[i], 10.0 - (double)i), KB_OK);
        assert_int_equal(kb_hits_push(&fused, ids[i], 0.02 - 0.001 * (double)i), KB_OK);
        fused.items[i].lex_rank = (int)i + 1;
        fused.items[i].lex_score = 10.0 - (double)i;
    }
    assert_int_equal(kb_rerank_local(s, q, NULL, 0, &lex, NULL, &fused, 61.0 / 1.3,
                                     NULL, NULL, &err), KB_OK);
    assert_int_equal(fused.n, n);
    for (size_t i = 0; i < n; i++)
        got[i] = (int)fused.items[i].id;
    kb_hits_release(&lex);
    kb_hits_release(&fused);
}

/* A canonical section before its generated variants, an architecture's
 * instructions before others' (issue 22): an instruction name that is a
 * section's title, or a whole word of it, and the targets a question's
 * architecture word stands for. */
static void test_local_canonical_and_arch(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("rerank-canon");
    kb_store *s = tu_open_kb(dir);
    const char *body = "Copies a tensor tile with cp.async.bulk.tensor between"
                       " global and shared memory.";
    put_section(s, 1, "wrappers", "[\"cp.async.bulk.tensor.1d.global.shared::cta.tile\"]", body);
    put_section(s, 2, "wrappers", "[\"cp.async.bulk.tensor.2d.shared::cluster.global\"]", body);
    put_section(s, 3, "isa", "[\"9. Instruction Set\",\"Data Movement and Conversion"
                " Instructions: cp.async.bulk.tensor\"]", body);
    int got[3];
    rerank_ids(s, "cp.async.bulk.tensor", (int[]){ 1, 2, 3 }, 3, got);
    assert_int_equal(got[0], 3);
    /* "Hopper" is sm_90: wgmma (sm_90a) before mma (sm_89, runs there too)
     * before tcgen05 (sm_100a, does not) */
    put_section(s, 4, "isa", "[\"tcgen05.mma\"]", "FP8 e4m3 matrix multiply."
                " Target ISA notes: requires sm_100a.");
    put_section(s, 5, "isa", "[\"mma\"]", "FP8 e4m3 matrix multiply."
                " Target ISA notes: .e4m3 requires sm_89 or higher.");
    put_section(s, 6, "isa", "[\"wgmma.mma_async\"]", "FP8 e4m3 matrix multiply."
                " Target ISA notes: requires sm_90a.");
    rerank_ids(s, "FP8 e4m3 matrix multiply on Hopper", (int[]){ 4, 5, 6 }, 3, got);
    assert_int_equal(got[0], 6);
    assert_int_equal(got[1], 5);
    assert_int_equal(got[2], 4);
    /* with no architecture named, fusion's order stands */
    rerank_ids(s, "FP8 e4m3 matrix multiply", (int[]){ 4, 5, 6 }, 3, got);
    assert_int_equal(got[0], 4);
    kb_arch_set a;
    kb_arch_of_query("B200 vs H100 and sm_120a", &a);
    assert_int_equal(a.n, 3);
    assert_int_equal(a.sm[0], 100);
    assert_int_equal(a.sm[1], 90);
    assert_int_equal(a.sm[2], 120);
    kb_arch_of_query("warp shuffle reduction", &a);
    assert_int_equal(a.n, 0);
    kb_store_close(s);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_both_reply_shapes),
        cmocka_unit_test(test_bad_replies),
        cmocka_unit_test(test_reorders_fused_list),
        cmocka_unit_test(test_local_boilerplate),
        cmocka_unit_test(test_local_lexical_first),
        cmocka_unit_test(test_local_canonical_and_arch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
