/* rerank_llm.c - the LLM relevance stage (kb query --rerank llm): one
 * listwise request per query to KB_LLM_URL's model through kb/llm.c (or,
 * with no endpoint, to a model the caller lends: kb mcp's client through
 * MCP sampling), the
 * best sections of the fused list each given as a short id, its source,
 * heading path and the start of its best chunk; the reply, passage ids
 * only, puts those sections in its order. A reply that cannot be read, a
 * failed or slow request: kb's own order, with a warning. Orders are
 * cached with the store, per query, pool and model. */
#include "query/query_int.h"
#include "kb/kb_int.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The prompt's version, part of the cache's key. */
#define PROMPT_VERSION 1
/* The start of each section's best chunk that the model reads: enough to
 * judge it (a capable model given ~700 characters of kb's top 30 lifted
 * nDCG@10 from 0.68 to 0.85 on unseen questions; issue 22). */
#define SNIPPET_BYTES 600
/* The question as far as the prompt quotes it (a pasted kernel is 64 KiB) */
#define QUESTION_BYTES 2000
/* The passages' budget: about 8,000 tokens at 4 bytes a token; sections
 * past it are not sent and keep their places behind the ordered ones. */
#define PROMPT_BUDGET_BYTES 32000
/* The reply: 30 ids in a JSON array are about 90 tokens. */
#define REPLY_MAX_TOKENS 400
/* The orders kept with a store: a few hundred bytes each. */
#define CACHE_BYTES (1u << 20)
#define CACHE_SLOT "query/rerank-llm"

static const char system_prompt[] =
    "You judge search results for engineers who write GPU kernels. The "
    "passages come from the CUDA C++ Programming Guide, the PTX ISA, the CUDA "
    "Best Practices Guide, the architecture tuning guides, Nsight Compute, "
    "CUTLASS and CuTe, sample kernels, a literature list and a library of "
    "verified techniques. Given a question and numbered passages, you order "
    "the passages by how well each answers the question. You reply with "
    "passage numbers only.";

static const char instructions[] =
    "Order the passages by how useful each is to answer the question, the "
    "most useful first. Reply with one JSON array of passage numbers and "
    "nothing else, for example [3, 1, 2]. You may leave out passages that do "
    "not help.";

/* ------------------------------------------------------------ the reply */

int kb_rerank_llm_parse(const char *reply, size_t npool, size_t *order, size_t *n)
{
    *n = 0;
    const char *s = reply, *e = reply + strlen(reply);
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if (e - s >= 6 && strncmp(s, "```", 3) == 0 && strncmp(e - 3, "```", 3) == 0) {
        s += 3;   /* one fenced block: "```json\n[...]\n```" */
        while (s < e - 3 && isalpha((unsigned char)*s))
            s++;
        e -= 3;
    }
    char *seen = calloc(npool + 1, 1);
    if (!seen)
        return -2;
    int numbers = 0;
    for (const char *p = s; p < e;) {
        if (isdigit((unsigned char)*p)) {
            unsigned long v = 0;
            while (p < e && isdigit((unsigned char)*p)) {
                if (v < 1000000)
                    v = v * 10 + (unsigned long)(*p - '0');
                p++;
            }
            numbers++;
            /* unknown or repeated ids are passed over */
            if (v >= 1 && v <= npool && !seen[v]) {
                seen[v] = 1;
                order[(*n)++] = v - 1;
            }
        } else if (isspace((unsigned char)*p) || strchr("[],;>", *p)) {
            p++;
        } else {
            free(seen);
            return -1;   /* words, or anything but ids */
        }
    }
    free(seen);
    return numbers ? 0 : -1;
}

/* ------------------------------------------------------------ the prompt */

/* Appends passage number i (1-based): its source, document title and
 * heading path, and the start of its best chunk's text on one line. */
static kb_rc put_passage(sqlite3_stmt *st, int64_t id, size_t i, kb_buf *b)
{
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) != SQLITE_ROW)
        return KB_ERR_NOTFOUND;
    const char *source = (const char *)sqlite3_column_text(st, 0);
    const char *title = (const char *)sqlite3_column_text(st, 1);
    const char *hp = (const char *)sqlite3_column_text(st, 2);
    const char *text = (const char *)sqlite3_column_text(st, 3);
    kb_rc rc = kb_buf_printf(b, "[%zu] source: %s\nsection: %s", i, source ? source : "",
                             title ? title : "");
    cJSON *arr = cJSON_Parse(hp ? hp : "[]");
    const cJSON *h;
    cJSON_ArrayForEach(h, arr)
        if (rc == KB_OK && cJSON_IsString(h) && (!title || strcmp(title, h->valuestring)))
            rc = kb_buf_printf(b, " > %s", h->valuestring);
    cJSON_Delete(arr);
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "\ntext: ");
    /* the text's start, its blanks and line ends each one space */
    const char *t = text ? text : "";
    size_t used = 0;
    int space = 0;
    for (; rc == KB_OK && *t && used < SNIPPET_BYTES; t++) {
        if (isspace((unsigned char)*t)) {
            space = used > 0;
            continue;
        }
        if (space && (rc = kb_buf_putc(b, ' ')) == KB_OK)
            used++;
        space = 0;
        size_t n = 1;   /* a whole UTF-8 character */
        while (((unsigned char)t[n] & 0xC0) == 0x80)
            n++;
        if (rc == KB_OK)
            rc = kb_buf_append(b, t, n);
        used += n;
        t += n - 1;
    }
    if (rc == KB_OK && *t)
        rc = kb_buf_puts(b, "\xe2\x80\xa6");   /* … */
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "\n\n");
    return rc;
}

/* The user message for the first *n sections of fused; *n is cut to the
 * ones the budget holds. KB_ERR_NOMEM, or a database error in err. */
static kb_rc make_prompt(kb_store *store, const char *query, const kb_hits *fused,
                         size_t *n, kb_buf *b, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "SELECT d.source_id, d.title, c.heading_path,"
                                " c.text FROM chunks c JOIN documents d"
                                " ON d.id = c.document_id WHERE c.id = ?", &st, err);
    int qn = kb_utf8_cut(query, QUESTION_BYTES);
    if (rc == KB_OK && kb_buf_printf(b, "Question: %.*s%s\n\nPassages:\n\n", qn, query,
                                     query[qn] ? "\xe2\x80\xa6" : "") != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    size_t i = 0;
    for (; rc == KB_OK && i < *n; i++) {
        size_t before = b->len;
        rc = put_passage(st, fused->items[i].id, i + 1, b);
        if (rc == KB_ERR_NOTFOUND)
            rc = kb_err_set(err, rc, "chunk %lld was found but is not in the KB",
                            (long long)fused->items[i].id);
        else if (rc != KB_OK)
            rc = kb_err_set(err, rc, "out of memory");
        if (rc == KB_OK && i > 0 && b->len > PROMPT_BUDGET_BYTES) {
            b->len = before;   /* past the budget: this one and the rest stay */
            b->data[b->len] = '\0';
            break;
        }
    }
    *n = i;
    if (rc == KB_OK && kb_buf_puts(b, instructions) != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    sqlite3_finalize(st);
    return rc;
}

/* ------------------------------------------------------------ the cache */

static void cache_free(void *p)
{
    kb_lru_free(p);
}

/* The key of an order: the prompt's version, the model and endpoint (or
 * the lent model's name), the query and the pool's chunk ids. NULL when
 * out of memory. */
static char *cache_key(const kb_llm_opts *o, const kb_llm_lent *lent, const char *query,
                       const kb_hits *fused, size_t n, size_t *len)
{
    kb_buf k;
    kb_buf_init(&k, 0);
    kb_rc rc = lent ? kb_buf_printf(&k, "%d\nlent\n%s\n%s", PROMPT_VERSION, lent->name, query)
                    : kb_buf_printf(&k, "%d\n%s\n%s\n%s", PROMPT_VERSION,
                                    o->model ? o->model : "", o->url, query);
    if (rc == KB_OK)
        rc = kb_buf_putc(&k, '\0');   /* the query ends here, whatever it holds */
    for (size_t i = 0; rc == KB_OK && i < n; i++)
        rc = kb_buf_printf(&k, "%lld,", (long long)fused->items[i].id);
    *len = k.len;
    return kb_buf_finish(&k, rc);
}

/* The store's cache of orders, made on first use; NULL when out of memory. */
static kb_lru *cache_of(kb_store *store)
{
    kb_lru *c = kb_store_slot_get(store, CACHE_SLOT);
    if (c)
        return c;
    kb_err err;
    kb_err_clear(&err);
    if (!(c = kb_lru_new(CACHE_BYTES)) ||
        kb_store_slot_set(store, CACHE_SLOT, c, cache_free, &err) != KB_OK)
        return NULL;   /* a failed slot_set has freed it */
    return c;
}

/* ------------------------------------------------------------ the stage */

/* Puts the first npool sections of fused in order[0..n) (indices into
 * them), then the rest of them as they were; the sections past the pool
 * stay where they are. */
static kb_rc apply_order(kb_hits *fused, size_t npool, const size_t *order, size_t n)
{
    kb_hit *was = malloc(npool * sizeof *was);
    char *used = calloc(npool, 1);
    if (!was || !used) {
        free(was);
        free(used);
        return KB_ERR_NOMEM;
    }
    memcpy(was, fused->items, npool * sizeof *was);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (order[i] >= npool || used[order[i]])
            continue;
        fused->items[at++] = was[order[i]];
        used[order[i]] = 1;
    }
    for (size_t i = 0; i < npool; i++)
        if (!used[i])
            fused->items[at++] = was[i];
    free(was);
    free(used);
    return KB_OK;
}

kb_rc kb_rerank_llm_again(kb_hits *fused, const kb_hits *first)
{
    size_t *order = calloc(first->n + 1, sizeof *order);
    if (!order)
        return KB_ERR_NOMEM;
    size_t n = 0, last = 0;
    for (size_t i = 0; i < first->n; i++)
        for (size_t j = 0; j < fused->n; j++)
            if (fused->items[j].id == first->items[i].id) {
                order[n++] = j;
                last = j + 1 > last ? j + 1 : last;
                break;
            }
    kb_rc rc = apply_order(fused, last, order, n);
    free(order);
    return rc;
}

/* kb's own order stays: why, as a warning and in info. */
static void fall_back(kb_rerank_info *info, const char *why)
{
    kb_log_warn("the llm reranking stage failed, keeping kb's own order: %s", why);
    snprintf(info->fallback, sizeof info->fallback, "%.*s",
             kb_utf8_cut(why, sizeof info->fallback - 1), why);
}

/* The reply of the lent model (lent) or of the endpoint (o) to prompt, in
 * *text (caller frees); *ms its time. KB_ERR_NOMEM, or any other failure
 * with why in err. */
static kb_rc complete(const kb_llm_opts *o, const kb_llm_lent *lent, const char *prompt,
                      char **text, kb_rerank_info *info, kb_err *err)
{
    *text = NULL;
    double t0 = kb_now_ms();
    if (lent) {
        kb_rc rc = lent->complete(lent->ctx, system_prompt, prompt, REPLY_MAX_TOKENS,
                                  o->timeout_ms, text, info->lent_model,
                                  sizeof info->lent_model, err);
        info->llm_ms = kb_now_ms() - t0;
        if (rc == KB_OK && !info->lent_model[0])
            snprintf(info->lent_model, sizeof info->lent_model, "%s", lent->name);
        return rc;
    }
    kb_llm_request req = { .system = system_prompt, .user = prompt,
                           .max_tokens = REPLY_MAX_TOKENS };
    kb_llm_reply reply;
    kb_llm_reply_init(&reply);
    kb_rc rc = kb_llm_complete(o, &req, &reply, err);
    info->llm_ms = reply.ms;
    if (rc == KB_OK && !(*text = kb_strdup(reply.text)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_llm_reply_release(&reply);
    return rc;
}

/* Asks the model for the order of the n sections of prompt; on success
 * order[0..*got) is its reply's. Fails only when out of memory; every
 * other failure is info->fallback. */
static kb_rc ask(const kb_llm_opts *o, const kb_llm_lent *lent, const char *prompt,
                 size_t n, size_t *order, size_t *got, kb_rerank_info *info, kb_err *err)
{
    char *text = NULL;
    kb_err lerr;
    kb_err_clear(&lerr);
    kb_rc rc = complete(o, lent, prompt, &text, info, &lerr);
    if (rc == KB_ERR_NOMEM) {
        rc = kb_err_set(err, rc, "out of memory");
    } else if (rc != KB_OK) {
        fall_back(info, lerr.msg[0] ? lerr.msg : kb_rc_name(rc));
        rc = KB_OK;
    } else {
        int p = kb_rerank_llm_parse(text, n, order, got);
        if (p == -2) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        } else if (p < 0 || *got == 0) {
            char why[200];
            snprintf(why, sizeof why, "the reply is not a list of passage ids: '%.*s'",
                     kb_utf8_cut(text, 120), text);
            fall_back(info, why);
        }
    }
    free(text);
    return rc;
}

kb_rc kb_rerank_llm(kb_store *store, const kb_config *cfg, const kb_llm_lent *lent,
                    const char *query, kb_hits *fused, size_t top, kb_rerank_info *info,
                    kb_err *err)
{
    kb_llm_opts o;
    memset(info, 0, sizeof *info);
    info->stage = KB_RERANK_LLM;
    kb_rc rc = kb_llm_opts_from_config(cfg, &o, err);
    if (rc != KB_OK && lent && !(cfg && cfg->llm_url && *cfg->llm_url)) {
        kb_err_clear(err);   /* no endpoint: the lent model */
        memset(&o, 0, sizeof o);
        rc = KB_OK;
    } else {
        lent = NULL;   /* the configured endpoint comes first */
    }
    if (rc != KB_OK)
        return rc;
    info->via = lent ? lent->via : "endpoint";
    info->model = lent ? lent->name : o.model && *o.model ? o.model : o.url;
    size_t n = fused->n < top ? fused->n : top;
    if (n < 2)
        return KB_OK;   /* nothing to order */
    o.stream = 0;
    o.temperature = 0;
    o.max_tokens = REPLY_MAX_TOKENS;
    o.timeout_ms = cfg && cfg->rerank_timeout_ms > 0 ? cfg->rerank_timeout_ms : 30000;
    o.max_retries = 0;   /* a query waits one timeout at most */
    kb_buf prompt;
    kb_buf_init(&prompt, 0);
    size_t *order = calloc(n, sizeof *order);
    uint32_t *val = NULL;
    size_t got = 0, klen = 0, vlen = 0;
    char *key = NULL;
    if (!order) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = make_prompt(store, query, fused, &n, &prompt, err)) != KB_OK)
        goto out;
    info->pool = n;
    kb_lru *cache = cache_of(store);
    key = cache_key(&o, lent, query, fused, n, &klen);
    if (!cache || !key) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (kb_lru_get(cache, key, klen, (void **)&val, &vlen) == KB_OK) {
        got = vlen / sizeof *val;
        for (size_t i = 0; i < got && i < n; i++)
            order[i] = val[i] < n ? val[i] : 0;
        info->cached = 1;
    } else if ((rc = ask(&o, lent, prompt.data, n, order, &got, info, err)) != KB_OK ||
               info->fallback[0]) {
        goto out;
    } else {
        uint32_t *keep = malloc(got * sizeof *keep);
        for (size_t i = 0; keep && i < got; i++)
            keep[i] = (uint32_t)order[i];
        if (keep)   /* a cache that cannot keep it costs the next query a request */
            kb_lru_put(cache, key, klen, keep, got * sizeof *keep);
        free(keep);
    }
    info->ordered = got;
    if (apply_order(fused, n, order, got) != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
out:
    free(val);
    free(key);
    free(order);
    kb_buf_release(&prompt);
    return rc;
}

kb_rc kb_query_llm_order(kb_store *store, const kb_config *config, const kb_llm_lent *lent,
                         const char *question, const int64_t *ids, size_t n, size_t *order,
                         size_t *norder, kb_rerank_info *info, kb_err *err)
{
    *norder = 0;
    kb_hits pool = { 0 };
    kb_rc rc = KB_OK;
    for (size_t i = 0; rc == KB_OK && i < n; i++)
        if (kb_hits_push(&pool, ids[i], 1.0 / (double)(i + 1)) != KB_OK)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = kb_rerank_llm(store, config, lent, question, &pool, n, info, err);
    /* the first info->ordered of the pool are the named ones, in order */
    for (size_t i = 0; rc == KB_OK && !info->fallback[0] && i < info->ordered; i++)
        for (size_t j = 0; j < n; j++)
            if (ids[j] == pool.items[i].id) {
                order[(*norder)++] = j;
                break;
            }
    kb_hits_release(&pool);
    return rc;
}
