/* rerank_remote.c - a remote cross-encoder through the /v1/rerank API
 * that TEI, llama.cpp's server, vLLM, Jina and Cohere serve: the query and
 * the best sections' texts go out, a relevance score per text comes back,
 * and those sections are put in that order. */
#include "query/query_int.h"
#include "kb/kb_int.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* One request: the list stays interactive even when the server is slow. */
#define RERANK_TIMEOUT_MS 20000

/* The request body: "documents" is what Cohere, Jina, vLLM and llama.cpp
 * read, "texts" what TEI reads; each ignores the other's. */
static char *request_body(const char *model, const char *query,
                          const char *const *docs, size_t n)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *d = root ? cJSON_AddArrayToObject(root, "documents") : NULL;
    cJSON *t = d ? cJSON_AddArrayToObject(root, "texts") : NULL;
    int ok = t && cJSON_AddStringToObject(root, "query", query) &&
             cJSON_AddNumberToObject(root, "top_n", (double)n) &&
             cJSON_AddFalseToObject(root, "return_documents") &&
             (!model || !*model || cJSON_AddStringToObject(root, "model", model));
    for (size_t i = 0; ok && i < n; i++)
        ok = cJSON_AddItemToArray(d, cJSON_CreateString(docs[i])) &&
             cJSON_AddItemToArray(t, cJSON_CreateString(docs[i]));
    char *body = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return body;
}

/* Reads {"results":[{"index","relevance_score"}]} (Cohere, Jina, vLLM,
 * llama.cpp) or [{"index","score"}] (TEI) into scores[n]. Every index
 * must be in range and each text scored once: a reply that leaves one
 * out, or scores one twice, is malformed. */
static kb_rc parse_reply(const char *body, size_t len, const char *url,
                         double *scores, size_t n, kb_err *err)
{
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *list = cJSON_IsArray(root) ? root
                                            : cJSON_GetObjectItemCaseSensitive(root, "results");
    char *seen = calloc(n + 1, 1);
    size_t got = 0;
    kb_rc rc = KB_OK;
    if (!seen) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (!cJSON_IsArray(list)) {
        rc = kb_err_set(err, KB_ERR_PARSE, "reranker '%s' answered no results "
                        "list", url);
        goto out;
    }
    const cJSON *r;
    cJSON_ArrayForEach(r, list) {
        const cJSON *idx = cJSON_GetObjectItemCaseSensitive(r, "index");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "relevance_score");
        if (!s)
            s = cJSON_GetObjectItemCaseSensitive(r, "score");
        if (!cJSON_IsNumber(idx) || !cJSON_IsNumber(s) || idx->valuedouble < 0 ||
            idx->valuedouble >= (double)n || seen[(size_t)idx->valuedouble]) {
            rc = kb_err_set(err, KB_ERR_PARSE, "reranker '%s' answered a result "
                            "without a new index in range and a score", url);
            goto out;
        }
        seen[(size_t)idx->valuedouble] = 1;
        scores[(size_t)idx->valuedouble] = s->valuedouble;
        got++;
    }
    if (got != n)
        rc = kb_err_set(err, KB_ERR_PARSE, "reranker '%s' scored %zu of %zu "
                        "texts", url, got, n);
out:
    free(seen);
    cJSON_Delete(root);
    return rc;
}

kb_rc kb_rerank_remote_scores(const char *url, const char *model,
                              const char *api_key, const char *query,
                              const char *const *docs, size_t n, double *scores,
                              kb_err *err)
{
    if (n == 0)
        return KB_OK;
    char *body = request_body(model, query, docs, n);
    if (!body)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_http_opts o;
    kb_http_opts_default(&o);
    o.timeout_ms = RERANK_TIMEOUT_MS;
    o.max_retries = 1;
    o.error_excerpt = 200;
    kb_http_request req = {
        .method = KB_HTTP_POST, .url = url, .body = body,
        .body_len = strlen(body), .auth_key = api_key,
        .subject = "reranker",
    };
    kb_http_response res;
    kb_http_response_init(&res);
    kb_rc rc = kb_http_perform(&req, &o, &res, err);
    if (rc == KB_OK)
        rc = parse_reply(res.body.data ? res.body.data : "", res.body.len, url,
                         scores, n, err);
    kb_http_response_release(&res);
    free(body);
    return rc;
}

/* The text a reranker judges for a section: its heading path and its
 * best chunk. */
static kb_rc section_text(sqlite3_stmt *st, int64_t id, char **out)
{
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, id);
    *out = NULL;
    if (sqlite3_step(st) != SQLITE_ROW)
        return KB_ERR_NOTFOUND;
    const char *title = (const char *)sqlite3_column_text(st, 0);
    const char *hp = (const char *)sqlite3_column_text(st, 1);
    const char *text = (const char *)sqlite3_column_text(st, 2);
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_buf_puts(&b, title ? title : "");
    cJSON *arr = cJSON_Parse(hp ? hp : "[]");
    const cJSON *h;
    cJSON_ArrayForEach(h, arr)
        if (rc == KB_OK && cJSON_IsString(h))
            rc = kb_buf_printf(&b, " > %s", h->valuestring);
    cJSON_Delete(arr);
    if (rc == KB_OK)
        rc = kb_buf_printf(&b, "\n%s", text ? text : "");
    *out = kb_buf_finish(&b, rc);
    return *out ? KB_OK : KB_ERR_NOMEM;
}

kb_rc kb_rerank_remote(kb_store *store, const kb_config *cfg, const char *query,
                       kb_hits *fused, size_t top, kb_err *err)
{
    size_t n = fused->n < top ? fused->n : top;
    if (n == 0)
        return KB_OK;
    sqlite3_stmt *st = NULL;
    char **docs = calloc(n, sizeof *docs);
    double *scores = calloc(n, sizeof *scores);
    kb_hit *order = calloc(n, sizeof *order);
    kb_rc rc = docs && scores && order ? KB_OK
                                       : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = kb_store_prepare(store, "SELECT d.title, c.heading_path, c.text FROM"
                              " chunks c JOIN documents d ON d.id = c.document_id"
                              " WHERE c.id = ?", &st, err);
    for (size_t i = 0; rc == KB_OK && i < n; i++)
        if ((rc = section_text(st, fused->items[i].id, &docs[i])) != KB_OK)
            rc = rc == KB_ERR_NOMEM ? kb_err_set(err, rc, "out of memory")
                                    : kb_store_db_error(store, err, "read a chunk");
    if (rc == KB_OK)
        rc = kb_rerank_remote_scores(cfg->rerank_url, cfg->rerank_model,
                                     cfg->rerank_api_key, query,
                                     (const char *const *)docs, n, scores, err);
    if (rc == KB_OK) {
        /* the top n by the reranker's score (stable for ties), then the
         * rest as they were */
        for (size_t i = 0; i < n; i++) {
            kb_hit h = fused->items[i];
            h.score = scores[i];
            size_t j = i;
            while (j > 0 && order[j - 1].score < h.score) {
                order[j] = order[j - 1];
                j--;
            }
            order[j] = h;
        }
        memcpy(fused->items, order, n * sizeof *order);
    }
    sqlite3_finalize(st);
    for (size_t i = 0; docs && i < n; i++)
        free(docs[i]);
    free(docs);
    free(scores);
    free(order);
    return rc;
}
