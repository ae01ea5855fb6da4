/* expand.c - query expansion (kb.h, "expand"): an LLM's hypothetical
 * passage and keyword rewrites of a query, cached in the KB by query,
 * model and prompt version. The LLM client is kb/llm.c's, the generator's
 * too; the rewrites are searched as kb_query_opts.searches. */
#include "query/query_int.h"
#include "kb/kb_int.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* The prompt's version, part of the cache's key: change it with the
 * prompt or the reading of replies, and old entries are not used. */
#define PROMPT_VERSION 1
/* A short passage and three rewrites fit; more costs a CPU model seconds
 * (SmolLM2-135M on two cores: about 25 ms a token). */
#define EXPAND_MAX_TOKENS 120
/* A query waits at most this long for its expansion (KB_LLM_TIMEOUT_MS
 * when lower), then answers without it. */
#define EXPAND_TIMEOUT_MS 60000L
#define PASSAGE_MAX 1500
#define KEYWORDS_MAX 3
#define KEYWORD_MAX_BYTES 120
#define WRITER_SLOT "query/expand-writer"

static const char system_prompt[] =
    "You help search the documentation of GPU programming: the CUDA C++ "
    "Programming Guide, the PTX ISA, the CUDA Best Practices Guide, the "
    "architecture tuning guides, Nsight Compute, CUTLASS and CuTe. You write "
    "the way that documentation is written, with its technical terms.";

static const char user_prompt[] =
    "Question: %s\n\n"
    "Write two lines.\n"
    "KEYWORDS: up to three short keyword searches for the documentation, "
    "with the exact terms, API functions or PTX instructions it would use, "
    "separated by semicolons.\n"
    "PASSAGE: a short passage (at most 80 words) that answers the question "
    "as the documentation would state it.\n\n"
    "Reply in exactly this form:\nKEYWORDS: ...\nPASSAGE: ...";

void kb_expansion_init(kb_expansion *x)
{
    memset(x, 0, sizeof *x);
}

void kb_expansion_release(kb_expansion *x)
{
    for (size_t i = 0; i < x->n; i++)
        free((char *)x->searches[i].text);
    free(x->model);
    free(x->error);
    kb_expansion_init(x);
}

kb_rc kb_query_expand_check(const kb_config *config, kb_err *err)
{
    return kb_llm_require(config, "--expand", err);
}

/* ------------------------------------------------------------ the reply */

/* Adds a copy of text[0..n) as a sub-query of type t. */
static kb_rc add_search(kb_expansion *x, kb_search_type t, const char *text, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        return KB_ERR_NOMEM;
    memcpy(s, text, n);
    s[n] = '\0';
    x->searches[x->n].type = t;
    x->searches[x->n++].text = s;
    return KB_OK;
}

/* The label (KEYWORDS, PASSAGE) in text, case-insensitive, and where its
 * value starts (past "**", ":" and blanks, as small models dress it);
 * NULL when absent. */
static const char *find_label(const char *text, const char *label, const char **value)
{
    const char *p = strcasestr(text, label);
    if (!p)
        return NULL;
    const char *v = p + strlen(label);
    while (*v && strchr("*: \t", *v))
        v++;
    *value = v;
    return p;
}

/* [s, e) less blanks, bullets and quotes around it. */
static void trim(const char **s, const char **e)
{
    while (*s < *e && (isspace((unsigned char)**s) || strchr("-*\"'`", **s)))
        (*s)++;
    while (*e > *s && (isspace((unsigned char)(*e)[-1]) || strchr("*\"'`.", (*e)[-1])))
        (*e)--;
}

static int has_words_n(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (isalnum((unsigned char)s[i]) || (unsigned char)s[i] >= 0x80)
            return 1;
    return 0;
}

/* The keyword rewrites in [s, e): pieces split at ';' and line ends (at
 * ',' when that leaves one piece), trimmed, each new and not the query. */
static kb_rc read_keywords(kb_expansion *x, const char *query, const char *s,
                           const char *e)
{
    const char *blank = strstr(s, "\n\n");   /* the value ends at a blank line */
    if (blank && blank < e)
        e = blank;
    const char *seps = memchr(s, ';', (size_t)(e - s)) || memchr(s, '\n', (size_t)(e - s))
                           ? ";\n" : ",";
    size_t first = x->n;
    for (const char *p = s; p < e && x->n - first < KEYWORDS_MAX;) {
        const char *q = p;
        while (q < e && !strchr(seps, *q))
            q++;
        const char *a = p, *b = q;
        p = q + 1;
        trim(&a, &b);
        while (a < b && (isdigit((unsigned char)*a) || *a == '.' || *a == ')'))
            a++;                               /* "1. ", "2) " */
        trim(&a, &b);
        size_t n = (size_t)(b - a);
        if (!n || n > KEYWORD_MAX_BYTES || !has_words_n(a, n) ||
            (strlen(query) == n && strncasecmp(query, a, n) == 0))
            continue;
        int dup = 0;
        for (size_t i = first; i < x->n && !dup; i++)
            dup = strlen(x->searches[i].text) == n &&
                  strncasecmp(x->searches[i].text, a, n) == 0;
        if (!dup && add_search(x, KB_SEARCH_LEX, a, n) != KB_OK)
            return KB_ERR_NOMEM;
    }
    return KB_OK;
}

/* Reads the reply: "PASSAGE:" and "KEYWORDS:" in either order, each value
 * up to the other label; without labels the whole text is the passage. The
 * passage comes first in x, cut to PASSAGE_MAX bytes on a character
 * boundary. */
static kb_rc read_reply(kb_expansion *x, const char *query, const char *text)
{
    const char *kv = NULL, *pv = NULL;
    const char *k = find_label(text, "keywords", &kv);
    const char *p = find_label(text, "passage", &pv);
    const char *end = text + strlen(text);
    const char *ps, *pe;
    if (p) {
        ps = pv;
        pe = k && k > p ? k : end;
    } else if (k) {             /* the passage, unlabelled, after the keywords */
        ps = kv + strcspn(kv, "\n");
        pe = end;
    } else {
        ps = text;
        pe = end;
    }
    trim(&ps, &pe);
    if (pe - ps > PASSAGE_MAX) {
        pe = ps + PASSAGE_MAX;
        while (pe > ps && ((unsigned char)*pe & 0xC0) == 0x80)
            pe--;
    }
    if (pe > ps && has_words_n(ps, (size_t)(pe - ps)) &&
        add_search(x, KB_SEARCH_HYDE, ps, (size_t)(pe - ps)) != KB_OK)
        return KB_ERR_NOMEM;
    if (!k)
        return KB_OK;
    /* up to the passage's label when that follows; without one, the line */
    const char *ke = p && p > k ? p : p ? end : kv + strcspn(kv, "\n");
    return read_keywords(x, query, kv, ke);
}

/* ------------------------------------------------------------ the cache */

/* x's sub-queries: [{"type","query"}]; NULL when out of memory. */
static cJSON *searches_array(const kb_expansion *x)
{
    cJSON *a = cJSON_CreateArray();
    int ok = a != NULL;
    for (size_t i = 0; ok && i < x->n; i++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(a, o) &&
             cJSON_AddStringToObject(o, "type", kb_search_type_name(x->searches[i].type)) &&
             cJSON_AddStringToObject(o, "query", x->searches[i].text);
    }
    if (!ok) {
        cJSON_Delete(a);
        return NULL;
    }
    return a;
}

static char *searches_json(const kb_expansion *x)
{
    cJSON *a = searches_array(x);
    char *s = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    return s;
}

cJSON *kb_expansion_json(const kb_expansion *x)
{
    cJSON *o = cJSON_CreateObject(), *a = searches_array(x);
    int ok = o && a && cJSON_AddStringToObject(o, "model", x->model ? x->model : "") &&
             cJSON_AddBoolToObject(o, "cached", x->cached) &&
             cJSON_AddNumberToObject(o, "llm_ms", (double)(long)(x->llm_ms * 1000) / 1000.0) &&
             cJSON_AddItemToObject(o, "searches", a);
    if (ok)
        a = NULL;
    ok = ok && (x->error ? cJSON_AddStringToObject(o, "error", x->error)
                         : cJSON_AddNullToObject(o, "error")) != NULL;
    cJSON_Delete(a);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

void kb_expansion_apply(kb_expansion *x, kb_search *searches, size_t *n)
{
    size_t i = 0;
    for (; i < x->n && *n < KB_QUERY_MAX_SEARCHES; i++)
        searches[(*n)++] = x->searches[i];
    for (size_t j = i; j < x->n; j++)
        free((char *)x->searches[j].text);
    x->n = i;
}

/* 1 and x filled when the cache holds the query, 0 when not (or when it
 * cannot be read: then it is asked for again), -1 when out of memory. */
static int cache_get(kb_store *store, const char *query, kb_expansion *x)
{
    sqlite3_stmt *st = NULL;
    kb_err err;
    kb_err_clear(&err);
    if (kb_store_prepare(store, "SELECT searches FROM query_expansions"
                         " WHERE query = ? AND model = ? AND prompt = ?", &st, &err) != KB_OK) {
        kb_log_debug("expansion cache: %s", err.msg);
        return 0;
    }
    sqlite3_bind_text(st, 1, query, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, x->model, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, PROMPT_VERSION);
    int found = 0;
    if (sqlite3_step(st) == SQLITE_ROW) {
        cJSON *a = cJSON_Parse((const char *)sqlite3_column_text(st, 0));
        const cJSON *o;
        found = cJSON_IsArray(a);
        cJSON_ArrayForEach(o, a) {
            kb_search_type t;
            const cJSON *q = cJSON_GetObjectItemCaseSensitive(o, "query");
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
            if (x->n == KB_EXPAND_MAX_SEARCHES || !cJSON_IsString(q) || !cJSON_IsString(ty) ||
                kb_search_type_parse(ty->valuestring, &t) != 0)
                continue;
            if (add_search(x, t, q->valuestring, strlen(q->valuestring)) != KB_OK) {
                found = -1;
                break;
            }
        }
        cJSON_Delete(a);
    }
    sqlite3_finalize(st);
    return found;
}

static void writer_free(void *p)
{
    kb_store_close(p);
}

/* Keeps x for query: through store when it may write, else through a
 * writable handle of the same KB, opened once and parked with store. A
 * failure is logged and forgotten: the next run asks the LLM again. */
static void cache_put(kb_store *store, const char *query, const kb_expansion *x,
                      const char *reply)
{
    kb_err err;
    kb_err_clear(&err);
    kb_store *w = store->readonly ? kb_store_slot_get(store, WRITER_SLOT) : store;
    kb_rc rc = KB_OK;
    if (!w) {
        rc = kb_store_open(kb_store_dir(store), 0, &w, &err);
        if (rc == KB_OK && (rc = kb_store_slot_set(store, WRITER_SLOT, w, writer_free,
                                                   &err)) != KB_OK)
            kb_store_close(w);
    }
    char *js = rc == KB_OK ? searches_json(x) : NULL;
    sqlite3_stmt *st = NULL;
    if (rc == KB_OK && !js)
        rc = kb_err_set(&err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = kb_store_prepare(w, "INSERT OR REPLACE INTO query_expansions(query, model,"
                              " prompt, searches, reply, llm_ms, created)"
                              " VALUES(?, ?, ?, ?, ?, ?, ?)", &st, &err);
    if (rc == KB_OK) {
        sqlite3_bind_text(st, 1, query, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, x->model, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, PROMPT_VERSION);
        sqlite3_bind_text(st, 4, js, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, reply, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 6, x->llm_ms);
        sqlite3_bind_int64(st, 7, (sqlite3_int64)time(NULL));
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = kb_store_db_error(w, &err, "keep a query's expansion");
    }
    if (rc != KB_OK)
        kb_log_warn("cannot keep the query's expansion in the KB: %s", err.msg);
    sqlite3_finalize(st);
    free(js);
}

/* ------------------------------------------------------------ expand */

/* Says why the query runs alone, as a warning and in x->error. */
static kb_rc give_up(kb_expansion *x, const char *why)
{
    kb_log_warn("query expansion failed, searching the query alone: %s", why);
    for (size_t i = 0; i < x->n; i++)
        free((char *)x->searches[i].text);
    x->n = 0;
    free(x->error);
    x->error = kb_strdup(why);
    return x->error ? KB_OK : KB_ERR_NOMEM;
}

kb_rc kb_query_expand(kb_store *store, const kb_config *config, const char *query,
                      kb_expansion *out, kb_err *err)
{
    kb_expansion_release(out);
    kb_llm_opts o;
    kb_rc rc = kb_query_expand_check(config, err);
    if (rc != KB_OK)
        return rc;
    kb_llm_opts_from_config(config, &o, err);
    /* the model names the cache's entries; a server that takes none, by
     * its URL (less any query string, where a key may be) */
    if (o.model && *o.model)
        out->model = kb_strdup(o.model);
    else
        out->model = kb_strndup(o.url, strcspn(o.url, "?#"));
    if (!out->model)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    int hit = cache_get(store, query, out);
    if (hit < 0)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (hit) {
        out->cached = 1;
        return KB_OK;
    }

    o.stream = 0;
    o.max_tokens = EXPAND_MAX_TOKENS;
    o.temperature = 0;
    if (o.timeout_ms > EXPAND_TIMEOUT_MS)
        o.timeout_ms = EXPAND_TIMEOUT_MS;
    o.max_retries = 1;
    kb_buf user;
    kb_buf_init(&user, 0);
    kb_llm_reply reply;
    kb_llm_reply_init(&reply);
    kb_err lerr;
    kb_err_clear(&lerr);
    if (kb_buf_printf(&user, user_prompt, query) != KB_OK) {
        kb_buf_release(&user);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    kb_llm_request req = { .system = system_prompt, .user = user.data,
                           .max_tokens = EXPAND_MAX_TOKENS };
    kb_rc lrc = kb_llm_complete(&o, &req, &reply, &lerr);
    out->llm_ms = reply.ms;
    if (lrc == KB_ERR_NOMEM)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    else if (lrc != KB_OK)
        rc = give_up(out, lerr.msg);
    else if (read_reply(out, query, reply.text) != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    else if (out->n == 0)
        rc = give_up(out, "the LLM's reply has no passage or keywords to search for");
    else
        cache_put(store, query, out, reply.text);
    if (rc == KB_ERR_NOMEM && !err->msg[0])
        kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_llm_reply_release(&reply);
    kb_buf_release(&user);
    return rc;
}
