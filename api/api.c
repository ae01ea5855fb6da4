/* api.c - the one tool table (api.h): every tool of api/ once, with what
 * a transport needs to offer it (kb.h, "tools": the flags), assembled
 * here and nowhere else; kb mcp, kb serve's REST and /mcp, and the CLI's
 * --json all take their tools from it. Also the one way a tool is run
 * (kb_tool_run), with the servers' cache of answers. */
#include "api/api.h"
#include "kb/kb_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the table */

#define API_TOOLS_MAX 32

static kb_tool all[API_TOOLS_MAX];
static size_t nall;
static pthread_once_t all_once = PTHREAD_ONCE_INIT;

/* The rooms' parts, in the order a server lists them: query's (search,
 * get, papers, status), the skills' (skill_search, skill_get, then
 * REST's skill_list, skill_file), the generator's (task, prompt), verify. */
static const kb_tool *(*const parts[])(size_t *n) = {
    kb_api_query_tools, kb_api_skill_tools, kb_api_prompt_tools, kb_api_verify_tools,
};

static void assemble(void)
{
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
        size_t n = 0;
        const kb_tool *t = parts[p](&n);
        for (size_t i = 0; i < n && nall < API_TOOLS_MAX; i++)
            all[nall++] = t[i];
    }
}

const kb_tool *kb_api_tools(size_t *n)
{
    pthread_once(&all_once, assemble);
    *n = nall;
    return all;
}

int kb_api_offered(const kb_tool *tool, unsigned transport, int opt_in)
{
    return (tool->flags & transport) && (opt_in || !(tool->flags & KB_TOOL_OPT_IN));
}

kb_rc kb_api_attach(kb_store *store, const kb_tool *tool, const kb_api_env *env,
                    kb_err *err)
{
    kb_rc rc = KB_OK;
    if (tool->flags & KB_TOOL_NEEDS_SKILLS)
        rc = kb_api_skills_attach(store, env->skills, err);
    if (rc == KB_OK && (tool->flags & KB_TOOL_NEEDS_VERIFY))
        rc = kb_api_verify_attach(store, env->tasks_dir, env->verify_timeout_s, err);
    return rc;
}

const kb_tool *kb_tool_lookup(const kb_tool *table, size_t n, const char *name)
{
    for (size_t i = 0; name && i < n; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

const kb_tool *kb_tool_find(const char *name)
{
    size_t n;
    const kb_tool *t = kb_api_tools(&n);
    return kb_tool_lookup(t, n, name);
}

/* ---------------------------------------------------------------- results */

struct kb_result_cache {
    kb_lru *lru;
    atomic_ullong generation;   /* moves when a store sees a commit */
};

kb_rc kb_result_cache_new(size_t max_bytes, kb_result_cache **out, kb_err *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out || !((*out)->lru = kb_lru_new(max_bytes))) {
        free(*out);
        *out = NULL;
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    return KB_OK;
}

void kb_result_cache_free(kb_result_cache *c)
{
    if (!c)
        return;
    kb_lru_free(c->lru);
    free(c);
}

void kb_result_cache_stats(kb_result_cache *c, kb_lru_stats *out)
{
    kb_lru_stats_get(c->lru, out);
}

/* What a store last saw of the KB: SQLite's data_version, which moves
 * when another connection (an ingest) commits. */
#define SEEN_SLOT "query/data_version"

/* The cache's generation for a call on store: moved on when the store
 * sees a commit it had not seen, and on a store's first call (what it
 * sees then may be newer than what the cache's entries were made of). */
static kb_rc generation_of(kb_result_cache *c, kb_store *store,
                           unsigned long long *gen, kb_err *err)
{
    long long v = 0;
    kb_rc rc = kb_store_version(store, &v, NULL, err);
    if (rc != KB_OK)
        return rc;
    long long *seen = kb_store_slot_get(store, SEEN_SLOT);
    if (!seen) {
        if (!(seen = malloc(sizeof *seen)))
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        *seen = v;
        if ((rc = kb_store_slot_set(store, SEEN_SLOT, seen, free, err)) != KB_OK)
            return rc;
        atomic_fetch_add(&c->generation, 1);
    } else if (*seen != v) {
        *seen = v;
        atomic_fetch_add(&c->generation, 1);
    }
    *gen = atomic_load(&c->generation);
    return KB_OK;
}

/* A copy of x with every object's keys in order: the same arguments, the
 * same key, whatever order they came in. NULL out of memory. */
static cJSON *canonical(const cJSON *x)
{
    cJSON *c = cJSON_Duplicate(x, 1);
    if (!c)
        return NULL;
    cJSON *stack[64];
    size_t n = 0;
    stack[n++] = c;
    while (n) {
        cJSON *o = stack[--n];
        if (cJSON_IsObject(o)) {   /* insertion sort of the children */
            cJSON *sorted = NULL;
            for (cJSON *k = o->child, *next; k; k = next) {
                next = k->next;
                cJSON **at = &sorted;
                while (*at && strcmp((*at)->string, k->string) <= 0)
                    at = &(*at)->next;
                k->next = *at;
                *at = k;
            }
            o->child = sorted;   /* fix prev links: cJSON's child->prev is the last */
            cJSON *last = NULL;
            for (cJSON *k = sorted; k; k = k->next) {
                k->prev = last ? last : NULL;
                last = k;
            }
            if (sorted)
                sorted->prev = last;
        }
        for (cJSON *k = o->child; k && n < sizeof stack / sizeof stack[0]; k = k->next)
            if (cJSON_IsObject(k) || cJSON_IsArray(k))
                stack[n++] = k;
    }
    return c;
}

/* The cache's key of a call: generation, tool, budget, the lent model,
 * arguments. */
static kb_rc call_key(const kb_tool *tool, const kb_tool_ctx *ctx, const cJSON *args,
                      unsigned long long gen, kb_buf *key)
{
    cJSON *c = args ? canonical(args) : NULL;
    char *text = c ? cJSON_PrintUnformatted(c) : NULL;
    cJSON_Delete(c);
    kb_rc rc = args && !text ? KB_ERR_NOMEM
                             : kb_buf_printf(key, "%llu\n%s\n%d\n%s\n%s", gen, tool->name,
                                             ctx->budget_tokens,
                                             ctx->llm ? ctx->llm->name : "",
                                             text ? text : "{}");
    free(text);
    return rc;
}

/* The answer kept for key, took_ms made the hit's own; NULL if none. */
static cJSON *cached_answer(kb_result_cache *c, const kb_buf *key, double t0)
{
    void *v = NULL;
    size_t len = 0;
    if (kb_lru_get(c->lru, key->data, key->len, &v, &len) != KB_OK)
        return NULL;
    cJSON *out = cJSON_ParseWithLength(v, len);
    free(v);
    cJSON *took = cJSON_GetObjectItemCaseSensitive(out, "took_ms");
    if (cJSON_IsNumber(took))
        cJSON_SetNumberValue(took, kb_now_ms() - t0);
    return out;
}

static kb_rc run_checked(const kb_tool *tool, kb_tool_ctx *ctx, const cJSON *args,
                         cJSON **out, kb_err *err);

kb_rc kb_tool_run(const kb_tool *tool, kb_tool_ctx *ctx, const cJSON *args,
                  cJSON **out, kb_err *err)
{
    *out = NULL;
    cJSON *trimmed = NULL;
    if (kb_tool_drop_empty(tool, args, &trimmed) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = run_checked(tool, ctx, trimmed ? trimmed : args, out, err);
    cJSON_Delete(trimmed);
    return rc;
}

/* kb_tool_run once its empty arguments are gone. */
static kb_rc run_checked(const kb_tool *tool, kb_tool_ctx *ctx, const cJSON *args,
                         cJSON **out, kb_err *err)
{
    ctx->cache_hit = 0;
    kb_rc rc = kb_tool_check_args(tool, args, err);
    if (rc != KB_OK)
        return rc;
    kb_result_cache *cache = tool->cached ? ctx->results : NULL;
    double t0 = kb_now_ms();
    unsigned long long gen = 0;
    kb_buf key;
    kb_buf_init(&key, 0);
    if (cache && (rc = generation_of(cache, ctx->store, &gen, err)) != KB_OK)
        return rc;
    if (cache && call_key(tool, ctx, args, gen, &key) != KB_OK) {
        kb_buf_release(&key);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    if (cache && (*out = cached_answer(cache, &key, t0)) != NULL) {
        ctx->cache_hit = 1;
        kb_buf_release(&key);
        return KB_OK;
    }
    rc = tool->fn(ctx, args, out, err);
    /* an LLM stage that fell back (a slow or refused request) is asked
     * again next time, not answered from here */
    const cJSON *rerank = cJSON_GetObjectItemCaseSensitive(*out, "rerank");
    int fell_back = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(rerank, "fallback"));
    if (rc == KB_OK && cache && cJSON_IsObject(*out) && !fell_back) {
        char *text = cJSON_PrintUnformatted(*out);
        /* not kept for want of memory: only the caching is lost */
        if (text && kb_lru_put(cache->lru, key.data, key.len, text, strlen(text)) != KB_OK)
            kb_log_debug("result cache: out of memory");
        free(text);
    }
    kb_buf_release(&key);
    if (rc == KB_OK && !cJSON_IsObject(*out))
        rc = kb_err_set(err, KB_ERR_INTERNAL, "tool '%s' made no result object",
                        tool->name);
    if (rc != KB_OK) {
        cJSON_Delete(*out);
        *out = NULL;
    }
    return rc;
}

kb_rc kb_tool_call(kb_tool_ctx *ctx, const char *name, const cJSON *args,
                   cJSON **out, kb_err *err)
{
    *out = NULL;
    const kb_tool *tool = kb_tool_find(name);
    if (tool)
        return kb_tool_run(tool, ctx, args, out, err);
    size_t n;
    const kb_tool *t = kb_api_tools(&n);
    kb_buf names;
    kb_buf_init(&names, 4096);
    kb_rc rc = KB_OK;
    for (size_t i = 0; rc == KB_OK && i < n; i++)
        rc = kb_buf_printf(&names, "%s%s", i ? ", " : "", t[i].name);
    if (rc == KB_OK)
        rc = kb_err_set(err, KB_ERR_USAGE, "unknown tool '%.*s' (tools: %s)",
                        kb_utf8_cut(name ? name : "", 64), name ? name : "", names.data);
    else
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_buf_release(&names);
    return rc;
}
