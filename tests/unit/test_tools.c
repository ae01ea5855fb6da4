/* test_tools.c - the tool table (api/tools.c): its names and schemas,
 * each tool's result checked against its own output schema on a small
 * real KB (fixture files, lexical only), and bad arguments refused with
 * messages that say what to do. */
#include "kb/kb.h"
#include "api/api.h"
#include "kb/kb_int.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

/* ------------------------------------------------------------ fixtures */

static char kb_dir[64];
static kb_store *store;
static kb_config config;   /* the environment's: the model's vocabulary sizes chunks */

static int setup(void **state)
{
    (void)state;
    snprintf(kb_dir, sizeof kb_dir, "/tmp/kb-test-tools.XXXXXX");
    if (!mkdtemp(kb_dir))
        return -1;
    kb_err err;
    kb_err_clear(&err);
    if (kb_store_open(kb_dir, KB_STORE_CREATE, &store, &err) != KB_OK)
        return -1;
    const char *top = getenv("KB_TOP");
    char md[4096], cu[4096];
    snprintf(md, sizeof md, "%s/tests/fixtures/md", top ? top : ".");
    snprintf(cu, sizeof cu, "%s/tests/fixtures/cuda/kernels.cu", top ? top : ".");
    char *targets[] = { md, cu };
    if (kb_config_load(&config, &err) != KB_OK)
        return -1;
    kb_ingest_opts opts = { .config = &config };   /* embed off: a lexical KB */
    kb_ingest_stats stats;
    kb_log_set_level(KB_LOG_QUIET);
    if (kb_ingest_run(store, &opts, targets, 2, &stats, &err) != KB_OK) {
        fprintf(stderr, "ingest: %s\n", err.msg);
        return -1;
    }
    return stats.chunks_written > 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    kb_store_close(store);
    kb_config_release(&config);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", kb_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ a checker */

/* The subset of JSON Schema the table uses, checked independently of the
 * library's own checker: fail_msg names the path and the rule broken. */
static const char *const keywords[] = {
    "type", "properties", "required", "additionalProperties", "items", "enum",
    "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems",
    "description", "default", "title",
    "oneOf", "contentEncoding",   /* output schemas only (skill_file's) */
    NULL
};

static int type_is(const cJSON *v, const char *t)
{
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer"))
        return cJSON_IsNumber(v) && floor(v->valuedouble) == v->valuedouble;
    fail_msg("unknown type '%s' in a schema", t);
    return 0;
}

static double num(const cJSON *schema, const char *kw, double dflt)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(schema, kw);
    return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}

/* Walks schema alone: every keyword known, every sub-schema too. */
static void lint_schema(const cJSON *schema, const char *path)
{
    if (!cJSON_IsObject(schema))
        fail_msg("%s: the schema is not an object", path);
    const cJSON *kw;
    cJSON_ArrayForEach(kw, schema) {
        size_t i = 0;
        while (keywords[i] && strcmp(keywords[i], kw->string))
            i++;
        if (!keywords[i])
            fail_msg("%s: unknown keyword '%s'", path, kw->string);
    }
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(schema, "properties"))
        lint_schema(p, p->string);
    const cJSON *req;
    cJSON_ArrayForEach(req, cJSON_GetObjectItemCaseSensitive(schema, "required"))
        if (!cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(schema, "properties"), req->valuestring))
            fail_msg("%s: required '%s' is not a property", path, req->valuestring);
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
    if (items)
        lint_schema(items, path);
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");
    if (cJSON_IsObject(extra))
        lint_schema(extra, path);
}

static void validate(const cJSON *schema, const cJSON *v, const char *path)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    if (cJSON_IsString(type) && !type_is(v, type->valuestring))
        fail_msg("%s: not of type %s", path, type->valuestring);
    if (cJSON_IsArray(type)) {
        int any = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, type)
            any |= type_is(v, t->valuestring);
        if (!any)
            fail_msg("%s: none of its types", path);
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum");
    if (en) {
        int found = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, en)
            found |= cJSON_Compare(e, v, 1);
        if (!found)
            fail_msg("%s: not in its enum", path);
    }
    if (cJSON_IsNumber(v) && (v->valuedouble < num(schema, "minimum", -INFINITY) ||
                              v->valuedouble > num(schema, "maximum", INFINITY)))
        fail_msg("%s: %g out of range", path, v->valuedouble);
    if (cJSON_IsString(v) && ((double)strlen(v->valuestring) < num(schema, "minLength", 0)))
        fail_msg("%s: too short", path);
    if (cJSON_IsArray(v)) {
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
        int i = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, v) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s[%d]", path, i++);
            if (items)
                validate(items, x, sub);
        }
    }
    if (cJSON_IsObject(v)) {
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
        const cJSON *extra = cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");
        const cJSON *req;
        cJSON_ArrayForEach(req, cJSON_GetObjectItemCaseSensitive(schema, "required"))
            if (!cJSON_GetObjectItemCaseSensitive(v, req->valuestring))
                fail_msg("%s: lacks required '%s'", path, req->valuestring);
        const cJSON *m;
        cJSON_ArrayForEach(m, v) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s.%s", path, m->string);
            const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, m->string);
            if (ps)
                validate(ps, m, sub);
            else if (cJSON_IsFalse(extra))
                fail_msg("%s: not allowed", sub);
            else if (cJSON_IsObject(extra))
                validate(extra, m, sub);
        }
    }
}

/* ------------------------------------------------------------ helpers */

/* Calls tool with args (JSON text, NULL: none); returns the result, which
 * must be valid under the tool's output schema. */
static cJSON *call_ok(const char *tool, const char *args_json)
{
    kb_tool_ctx ctx = { .store = store, .emb = NULL, .config = &config };
    cJSON *args = args_json ? cJSON_Parse(args_json) : NULL;
    if (args_json)
        assert_non_null(args);
    cJSON *out = NULL;
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_tool_call(&ctx, tool, args, &out, &err);
    if (rc != KB_OK)
        fail_msg("%s %s: %s", tool, args_json ? args_json : "", err.msg);
    assert_non_null(out);
    cJSON *schema = cJSON_Parse(kb_tool_find(tool)->output_schema);
    assert_non_null(schema);
    validate(schema, out, tool);
    cJSON_Delete(schema);
    cJSON_Delete(args);
    return out;
}

/* Calls tool and expects it to fail with rc and a message holding want. */
static void call_fails(const char *tool, const char *args_json, kb_rc want_rc,
                       const char *want)
{
    kb_tool_ctx ctx = { .store = store, .emb = NULL, .config = &config };
    cJSON *args = args_json ? cJSON_Parse(args_json) : NULL;
    if (args_json)
        assert_non_null(args);
    cJSON *out = (cJSON *)&ctx;   /* must come back NULL */
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_tool_call(&ctx, tool, args, &out, &err);
    if (rc != want_rc || !strstr(err.msg, want))
        fail_msg("%s %s: got %s '%s', wanted %s '%s'", tool,
                 args_json ? args_json : "", kb_rc_name(rc), err.msg,
                 kb_rc_name(want_rc), want);
    assert_null(out);
    cJSON_Delete(args);
}

static const cJSON *get(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_non_null(v);
    return v;
}

/* The result's JSON as the text block of an MCP reply carries it. */
static size_t printed_bytes(const cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    assert_non_null(s);
    size_t n = strlen(s);
    free(s);
    return n;
}

/* ------------------------------------------------------------ the table */

static void test_table(void **state)
{
    (void)state;
    size_t n;
    const kb_tool *t = kb_api_tools(&n);
    /* every tool of api/ once, in the order servers list them */
    const char *const wanted[] = { "search", "get", "papers", "status", "skill_search",
                                   "skill_get", "skill_list", "skill_file", "task",
                                   "prompt", "verify" };
    assert_int_equal(n, sizeof wanted / sizeof wanted[0]);
    for (size_t w = 0; w < n; w++) {
        assert_string_equal(t[w].name, wanted[w]);
        assert_ptr_equal(kb_tool_find(wanted[w]), &t[w]);
    }
    assert_null(kb_tool_find("nope"));
    assert_null(kb_tool_find(NULL));
    for (size_t i = 0; i < n; i++) {
        assert_true(strlen(t[i].name) > 0);
        assert_int_equal(strspn(t[i].name, "abcdefghijklmnopqrstuvwxyz0123456789_"),
                         strlen(t[i].name));
        for (size_t j = i + 1; j < n; j++)
            assert_string_not_equal(t[i].name, t[j].name);
        assert_ptr_equal(kb_tool_lookup(t, n, t[i].name), &t[i]);
        assert_true(strlen(t[i].description) > 80);
        assert_null(strchr(t[i].description, '\n'));
        /* read-only but the opt-in one, which runs kernels */
        assert_int_equal(t[i].read_only, !(t[i].flags & KB_TOOL_OPT_IN));
        assert_true(t[i].flags & (KB_TOOL_MCP | KB_TOOL_REST));
        assert_non_null(t[i].fn);

        cJSON *in = cJSON_Parse(t[i].input_schema);
        if (!in)
            fail_msg("%s: the input schema is not JSON", t[i].name);
        lint_schema(in, t[i].name);
        assert_string_equal(get(in, "type")->valuestring, "object");
        assert_true(cJSON_IsFalse(get(in, "additionalProperties")));
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(in, "required");
        assert_true(!req || cJSON_IsArray(req));
        assert_true(cJSON_IsObject(get(in, "properties")));
        cJSON_Delete(in);

        cJSON *out = cJSON_Parse(t[i].output_schema);
        if (!out)
            fail_msg("%s: the output schema is not JSON", t[i].name);
        lint_schema(out, t[i].name);
        assert_string_equal(get(out, "type")->valuestring, "object");
        assert_true(cJSON_IsArray(get(out, "required")));
        cJSON_Delete(out);
    }
}

/* ------------------------------------------------------------ the tools */

static void test_search(void **state)
{
    (void)state;
    cJSON *r = call_ok("search", "{\"query\":\"shared memory bank conflicts\","
                                 "\"k\":3,\"mode\":\"lexical\"}");
    assert_string_equal(get(r, "query")->valuestring, "shared memory bank conflicts");
    assert_string_equal(get(r, "mode")->valuestring, "lexical");
    const cJSON *res = get(r, "results");
    int n = cJSON_GetArraySize(res);
    assert_true(n >= 1 && n <= 3);
    for (int i = 0; i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(res, i);
        assert_int_equal(get(x, "rank")->valueint, i + 1);
        assert_string_equal(get(x, "source")->valuestring, "local");
        assert_true(cJSON_IsNumber(get(x, "lexical_rank")));
        assert_true(cJSON_IsNull(get(x, "vector_rank")));
    }
    cJSON_Delete(r);

    /* the default mode on a KB without vectors answers lexical */
    r = call_ok("search", "{\"query\":\"transpose\"}");
    assert_string_equal(get(r, "mode")->valuestring, "lexical");
    assert_true(cJSON_GetArraySize(get(r, "results")) <= 10);
    cJSON_Delete(r);

    /* an optional argument given as "" is absent (strict function calling
     * fills every field): the default mode, not an enum error; a required
     * one stays refused (test_bad_args) */
    r = call_ok("search", "{\"query\":\"transpose\",\"mode\":\"\",\"rerank\":\"\"}");
    assert_string_equal(get(r, "mode")->valuestring, "lexical");
    assert_true(cJSON_GetArraySize(get(r, "results")) >= 1);
    cJSON_Delete(r);
    /* an argument the tool does not take is refused, "" or not */
    call_fails("search", "{\"query\":\"transpose\",\"moed\":\"\"}", KB_ERR_USAGE,
               "search: unknown argument 'moed' (arguments: ");

    /* filters: kinds, sources */
    r = call_ok("search", "{\"query\":\"transpose tile\",\"kinds\":[\"code\"]}");
    const cJSON *x;
    assert_true(cJSON_GetArraySize(get(r, "results")) >= 1);
    cJSON_ArrayForEach(x, get(r, "results"))
        assert_string_equal(get(x, "kind")->valuestring, "code");
    cJSON_Delete(r);
    /* a source the KB does not hold is a mistake to say, not an empty list */
    call_fails("search", "{\"query\":\"transpose\",\"sources\":[\"elsewhere\"]}",
               KB_ERR_USAGE, "unknown source 'elsewhere' (the KB has: ");

    /* explain: the scores of each list and where the time went, in the
     * output schema */
    r = call_ok("search", "{\"query\":\"conflicts\",\"mode\":\"lexical\",\"explain\":true}");
    assert_non_null(get(get(r, "timings"), "lexical_ms"));
    cJSON_ArrayForEach(x, get(r, "results")) {
        assert_true(cJSON_IsNumber(get(x, "lexical_score")));
        assert_true(cJSON_IsNull(get(x, "vector_score")));
    }
    /* lexical has no reranking stage */
    assert_string_equal(get(get(r, "rerank"), "stage")->valuestring, "none");
    assert_true(cJSON_IsNull(get(get(r, "rerank"), "fallback")));
    cJSON_Delete(r);
    r = call_ok("search", "{\"query\":\"conflicts\",\"mode\":\"lexical\"}");
    assert_null(cJSON_GetObjectItemCaseSensitive(r, "timings"));
    assert_null(cJSON_GetObjectItemCaseSensitive(r, "rerank"));
    cJSON_Delete(r);
    r = call_ok("search", "{\"query\":\"conflicts\",\"rerank\":\"none\",\"explain\":true}");
    assert_string_equal(get(get(r, "rerank"), "stage")->valuestring, "none");
    assert_true(cJSON_IsNull(get(get(r, "rerank"), "model")));
    cJSON_Delete(r);

    /* snippet: a window, not the whole chunk */
    r = call_ok("search", "{\"query\":\"conflicts\",\"k\":50,\"snippet\":true}");
    cJSON_ArrayForEach(x, get(r, "results"))
        assert_true(strlen(get(x, "text")->valuestring) <= 320 + 8);
    cJSON_Delete(r);
}

static void test_get(void **state)
{
    (void)state;
    cJSON *r = call_ok("search", "{\"query\":\"padding one column\",\"k\":1}");
    const cJSON *first = cJSON_GetArrayItem(get(r, "results"), 0);
    assert_non_null(first);
    double id = get(first, "chunk_id")->valuedouble;
    char args[128];
    snprintf(args, sizeof args, "{\"chunk_id\":%.0f}", id);
    cJSON *g = call_ok("get", args);
    /* its own shape: the chunk, its section and its document, once each */
    assert_true(get(g, "chunk_id")->valuedouble == id);
    assert_int_equal(cJSON_GetArraySize(get(g, "chunks")), 1);
    const cJSON *one = cJSON_GetArrayItem(get(g, "chunks"), 0);
    assert_true(get(one, "chunk_id")->valuedouble == id);
    assert_string_equal(get(one, "text")->valuestring, get(first, "text")->valuestring);
    const cJSON *doc = get(g, "document");
    assert_string_equal(get(doc, "source")->valuestring, get(first, "source")->valuestring);
    assert_string_equal(get(doc, "title")->valuestring, get(first, "title")->valuestring);
    assert_null(strchr(get(doc, "url")->valuestring, '#'));
    assert_string_equal(get(get(g, "section"), "url")->valuestring,
                        get(first, "url")->valuestring);
    assert_null(cJSON_GetObjectItemCaseSensitive(g, "results"));
    cJSON_Delete(g);
    snprintf(args, sizeof args, "{\"chunk_id\":%.0f,\"section\":true}", id);
    g = call_ok("get", args);
    assert_true(cJSON_GetArraySize(get(g, "chunks")) >= 1);
    cJSON_Delete(g);
    cJSON_Delete(r);

    call_fails("get", "{\"chunk_id\":999999}", KB_ERR_NOTFOUND, "no chunk 999999");
}

static void test_papers(void **state)
{
    (void)state;
    cJSON *all = call_ok("papers", NULL);
    int n = cJSON_GetArraySize(get(all, "papers"));
    assert_true(n >= 5);
    cJSON *some = call_ok("papers", "{\"section\":\"COMPILERS\"}");
    int m = cJSON_GetArraySize(get(some, "papers"));
    assert_true(m >= 1 && m < n);
    const cJSON *p = cJSON_GetArrayItem(get(some, "papers"), 0);
    assert_string_equal(get(p, "title")->valuestring, "Alpha: A Tile Compiler for Everyone");
    assert_string_equal(get(get(p, "links"), "paper")->valuestring,
                        "https://example.org/alpha");
    cJSON_Delete(some);

    /* words: each in the title or the section, any case */
    some = call_ok("papers", "{\"words\":\"tile ALPHA\"}");
    assert_int_equal(cJSON_GetArraySize(get(some, "papers")), 1);
    assert_string_equal(get(cJSON_GetArrayItem(get(some, "papers"), 0), "title")->valuestring,
                        "Alpha: A Tile Compiler for Everyone");
    cJSON_Delete(some);
    some = call_ok("papers", "{\"words\":\"alpha zzqx\"}");
    assert_int_equal(cJSON_GetArraySize(get(some, "papers")), 0);
    cJSON_Delete(some);
    some = call_ok("papers", "{\"words\":\"compilers\",\"section\":\"compilers\"}");
    assert_int_equal(cJSON_GetArraySize(get(some, "papers")), m);
    cJSON_Delete(some);

    /* a budget keeps the first records, whole */
    assert_true(cJSON_IsFalse(get(all, "truncated")));
    if (printed_bytes(all) > 3000) {
        some = call_ok("papers", "{\"budget_tokens\":1000}");
        assert_true(cJSON_IsTrue(get(some, "truncated")));
        assert_int_equal(cJSON_GetArraySize(get(some, "papers")) + get(some, "omitted")->valueint, n);
        assert_true(printed_bytes(some) <= 3000);
        cJSON_Delete(some);
    }
    cJSON_Delete(all);
}

static void test_status(void **state)
{
    (void)state;
    cJSON *s = call_ok("status", "{}");
    assert_string_equal(get(s, "kb")->valuestring, kb_dir);
    assert_true(get(s, "documents")->valuedouble >= 2);
    assert_int_equal((int)get(s, "embeddings")->valuedouble, 0);
    assert_string_equal(get(s, "embedder")->valuestring, "");
    const cJSON *src = cJSON_GetArrayItem(get(s, "sources"), 0);
    assert_string_equal(get(src, "id")->valuestring, "local");
    assert_true(cJSON_IsNull(get(src, "last_error")));
    assert_string_equal(get(src, "version")->valuestring, "");   /* ad-hoc files */
    /* the ingest date, in UTC: 2026-12-01T12:06:31Z */
    const char *when = get(src, "ingested")->valuestring;
    assert_non_null(when);
    assert_int_equal(strlen(when), 20);
    assert_true(when[4] == '-' && when[10] == 'T' && when[19] == 'Z');
    cJSON_Delete(s);
}

/* ------------------------------------------------------------ bad calls */

static void test_bad_args(void **state)
{
    (void)state;
    call_fails("search", "{\"query\":\"x\",\"foo\":1}", KB_ERR_USAGE,
               "search: unknown argument 'foo' (arguments: query, k, mode, "
               "sources, kinds, explain, snippet, rerank, budget_tokens, searches)");
    call_fails("search", "{\"query\":\"x\",\"rerank\":\"fuzzy\"}", KB_ERR_USAGE,
               "'rerank' must be one of local, llm, none, not 'fuzzy'");
    /* the llm stage without an LLM: say what to set */
    char *llm_url = config.llm_url;
    config.llm_url = NULL;
    call_fails("search", "{\"query\":\"x\",\"rerank\":\"llm\"}", KB_ERR_USAGE,
               "the llm reranking stage needs an LLM: set KB_LLM_URL");
    config.llm_url = llm_url;
    call_fails("search", "{\"query\":\"x\",\"k\":0}", KB_ERR_USAGE,
               "search: 'k' must be an integer from 1 to 50, not 0");
    call_fails("search", "{\"query\":\"x\",\"k\":51}", KB_ERR_USAGE,
               "'k' must be an integer from 1 to 50, not 51");
    call_fails("search", "{\"query\":\"x\",\"k\":2.5}", KB_ERR_USAGE,
               "'k' must be an integer from 1 to 50, not 2.5");
    call_fails("search", "{\"query\":\"x\",\"k\":\"5\"}", KB_ERR_USAGE,
               "'k' must be an integer from 1 to 50, not a string");
    call_fails("search", "{\"query\":7}", KB_ERR_USAGE,
               "'query' must be a non-empty string");
    call_fails("search", "{\"query\":\"\"}", KB_ERR_USAGE,
               "'query' must be a non-empty string of at most 65536 characters, "
               "not an empty string");
    call_fails("search", "{\"k\":3}", KB_ERR_USAGE, "search: missing argument 'query'");
    call_fails("search", NULL, KB_ERR_USAGE, "search: missing argument 'query'");
    call_fails("search", "{\"query\":\"x\",\"mode\":\"fuzzy\"}", KB_ERR_USAGE,
               "'mode' must be one of hybrid, lexical, vector, not 'fuzzy'");
    call_fails("search", "{\"query\":\"x\",\"kinds\":[\"code\",\"poem\"]}",
               KB_ERR_USAGE, "'kinds[1]' must be one of text, code, table, "
               "paper, skill, not 'poem'");
    call_fails("search", "{\"query\":\"x\",\"sources\":\"ptx-isa\"}", KB_ERR_USAGE,
               "'sources' must be an array of at most 32 items, not a string");
    call_fails("search", "{\"query\":\"x\",\"snippet\":1}", KB_ERR_USAGE,
               "'snippet' must be true or false, not 1");
    call_fails("search", "{\"query\":\"x\",\"budget_tokens\":999}", KB_ERR_USAGE,
               "'budget_tokens' must be an integer from 1000 to 200000, not 999");
    call_fails("search", "{\"query\":\"x\",\"searches\":[{\"type\":\"regex\","
               "\"query\":\"a\"}]}", KB_ERR_USAGE,
               "'searches[0].type' must be one of lex, vec, hyde, not 'regex'");
    call_fails("search", "{\"query\":\"x\",\"searches\":[{\"type\":\"lex\"}]}",
               KB_ERR_USAGE, "search: 'searches[0]' lacks its key 'query'");
    call_fails("search", "{\"query\":\"x\",\"searches\":[{\"type\":\"lex\","
               "\"query\":\"a\",\"weight\":2}]}", KB_ERR_USAGE,
               "search: unknown key 'weight' in 'searches[0]' (keys: type, query)");
    call_fails("search", "{\"query\":\"x\",\"searches\":[{\"type\":\"lex\","
               "\"query\":\"\"}]}", KB_ERR_USAGE,
               "'searches[0].query' must be a non-empty string");
    call_fails("get", "{\"chunk_id\":1,\"budget_tokens\":200001}", KB_ERR_USAGE,
               "get: 'budget_tokens' must be an integer from 1000 to 200000");
    call_fails("search", "[\"x\"]", KB_ERR_USAGE,
               "search: the arguments must be an object, not an array");
    call_fails("get", "{\"chunk_id\":\"12\"}", KB_ERR_USAGE,
               "get: 'chunk_id' must be an integer from 1 to");
    call_fails("get", "{}", KB_ERR_USAGE, "get: missing argument 'chunk_id'");
    call_fails("papers", "{\"section\":[]}", KB_ERR_USAGE,
               "papers: 'section' must be a string, not an array");
    call_fails("status", "{\"verbose\":true}", KB_ERR_USAGE,
               "status: unknown argument 'verbose' (it takes none)");
    call_fails("nope", "{}", KB_ERR_USAGE,
               "unknown tool 'nope' (tools: search, get, papers, status, skill_search, skill_get, "
               "skill_list, skill_file, task, prompt, verify)");

    /* 33 sources: more than a filter holds */
    kb_buf many;
    kb_buf_init(&many, 0);
    kb_rc rc = kb_buf_puts(&many, "{\"query\":\"x\",\"sources\":[");
    for (int i = 0; rc == KB_OK && i < 33; i++)
        rc = kb_buf_puts(&many, i ? ",\"s\"" : "\"s\"");
    if (rc == KB_OK)
        rc = kb_buf_puts(&many, "]}");
    assert_int_equal(rc, KB_OK);
    call_fails("search", many.data, KB_ERR_USAGE, "not an array of 33 items");
    kb_buf_reset(&many);

    /* 11 sub-queries: more than a search fuses */
    rc = kb_buf_puts(&many, "{\"query\":\"x\",\"searches\":[");
    for (int i = 0; rc == KB_OK && i < 11; i++)
        rc = kb_buf_printf(&many, "%s{\"type\":\"lex\",\"query\":\"q%d\"}",
                           i ? "," : "", i);
    if (rc == KB_OK)
        rc = kb_buf_puts(&many, "]}");
    assert_int_equal(rc, KB_OK);
    call_fails("search", many.data, KB_ERR_USAGE,
               "'searches' must be an array of at most 10 items, not an array of 11 items");
    kb_buf_release(&many);
}

/* ------------------------------------------------------------ UTF-8 */

/* 1 if s is valid UTF-8. */
static int utf8_ok(const char *s)
{
    for (size_t n = strlen(s), i = 0; i < n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i,
                                              (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0)
            return 0;
        i += (size_t)k;
    }
    return 1;
}

/* A name quoted in a message is cut at 64 bytes: never inside a character
 * (the fuzzer's find: a key of 63 ASCII bytes and an 'é' made kb mcp and
 * the CLI print half a character, invalid UTF-8 in a JSON reply). */
static void test_utf8_cut(void **state)
{
    (void)state;
    assert_int_equal(kb_utf8_cut("ab\xc3\xa9", 3), 2);   /* inside the é */
    assert_int_equal(kb_utf8_cut("ab\xc3\xa9", 4), 4);
    assert_int_equal(kb_utf8_cut("a\xe2\x82\xac", 2), 1);   /* inside the € */
    assert_int_equal(kb_utf8_cut("a\xe2\x82\xac", 3), 1);
    assert_int_equal(kb_utf8_cut("a\xe2\x82\xac", 4), 4);
    assert_int_equal(kb_utf8_cut("\xf0\x9f\x98\x80", 3), 0);   /* inside the emoji */
    assert_int_equal(kb_utf8_cut("abc", 64), 3);
    assert_int_equal(kb_utf8_cut("abc", 2), 2);

    char key[128], args[512], want[160];
    memset(key, 'a', 63);
    memcpy(key + 63, "\xc3\xa9z", 4);   /* 'é' across bytes 63 and 64 */
    snprintf(args, sizeof args, "{\"query\":\"x\",\"%s\":1}", key);
    snprintf(want, sizeof want, "search: unknown argument '%.63s' (arguments:", key);
    kb_tool_ctx ctx = { .store = store, .config = &config };
    cJSON *a = cJSON_Parse(args), *out = NULL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_tool_call(&ctx, "search", a, &out, &err), KB_ERR_USAGE);
    assert_true(utf8_ok(err.msg));
    assert_non_null(strstr(err.msg, want));
    cJSON_Delete(a);

    /* an enum's value, and an unknown tool's name */
    snprintf(args, sizeof args, "{\"query\":\"x\",\"mode\":\"%s\"}", key);
    a = cJSON_Parse(args);
    kb_err_clear(&err);
    assert_int_equal(kb_tool_call(&ctx, "search", a, &out, &err), KB_ERR_USAGE);
    assert_true(utf8_ok(err.msg));
    cJSON_Delete(a);
    kb_err_clear(&err);
    assert_int_equal(kb_tool_call(&ctx, key, NULL, &out, &err), KB_ERR_USAGE);
    assert_true(utf8_ok(err.msg));
    assert_non_null(strstr(err.msg, "unknown tool 'aaaa"));

    /* a message longer than kb_err holds is cut at a boundary too */
    char big[2048];
    for (size_t i = 0; i + 2 < sizeof big; i += 2)
        memcpy(big + i, "\xc3\xa9", 2);
    big[sizeof big - 1] = '\0';
    big[sizeof big - 2] = '\0';
    for (int shift = 0; shift < 3; shift++) {
        kb_err_clear(&err);
        kb_err_set(&err, KB_ERR_USAGE, "%.*s%s", shift, "xx", big);
        assert_true(utf8_ok(err.msg));
        assert_true(strlen(err.msg) >= sizeof err.msg - 4);
    }
}

/* ------------------------------------------------------------ budgets */

/* Calls tool with args under a caller's default budget. */
static cJSON *call_budget(const char *tool, const char *args_json, int budget)
{
    kb_tool_ctx ctx = { .store = store, .config = &config, .budget_tokens = budget };
    cJSON *args = cJSON_Parse(args_json), *out = NULL;
    assert_non_null(args);
    kb_err err;
    kb_err_clear(&err);
    if (kb_tool_call(&ctx, tool, args, &out, &err) != KB_OK)
        fail_msg("%s %s: %s", tool, args_json, err.msg);
    cJSON_Delete(args);
    return out;
}

static void test_budget(void **state)
{
    (void)state;
    /* no budget: every result */
    cJSON *all = call_ok("search", "{\"query\":\"shared memory transpose tile "
                                   "kernel thread block\",\"k\":50}");
    int n = cJSON_GetArraySize(get(all, "results"));
    assert_true(cJSON_IsFalse(get(all, "truncated")));
    assert_int_equal(get(all, "omitted")->valueint, 0);
    assert_true(printed_bytes(all) > 3000);   /* more than 1000 tokens' worth */

    /* the smallest budget: whole results, best first, within 3 bytes a
     * token, the rest counted */
    cJSON *cut = call_ok("search", "{\"query\":\"shared memory transpose tile "
                                   "kernel thread block\",\"k\":50,"
                                   "\"budget_tokens\":1000}");
    int kept = cJSON_GetArraySize(get(cut, "results"));
    assert_true(kept >= 1 && kept < n);
    assert_true(cJSON_IsTrue(get(cut, "truncated")));
    assert_int_equal(get(cut, "omitted")->valueint, n - kept);
    assert_true(printed_bytes(cut) <= 3000);
    for (int i = 0; i < kept; i++) {   /* the best ones, whole */
        const cJSON *a = cJSON_GetArrayItem(get(all, "results"), i);
        const cJSON *b = cJSON_GetArrayItem(get(cut, "results"), i);
        assert_true(cJSON_Compare(a, b, 1));
    }
    cJSON_Delete(cut);

    /* the caller's default applies when the call names none; an argument
     * wins over it */
    cut = call_budget("search", "{\"query\":\"shared memory transpose tile "
                                "kernel thread block\",\"k\":50}", 1000);
    assert_int_equal(cJSON_GetArraySize(get(cut, "results")), kept);
    cJSON_Delete(cut);
    cut = call_budget("search", "{\"query\":\"shared memory transpose tile "
                                "kernel thread block\",\"k\":50,"
                                "\"budget_tokens\":200000}", 1000);
    assert_int_equal(cJSON_GetArraySize(get(cut, "results")), n);
    cJSON_Delete(cut);

    /* get: a section's chunks in order, as many as fit */
    const cJSON *first = cJSON_GetArrayItem(get(all, "results"), 0);
    char args[160];
    snprintf(args, sizeof args, "{\"chunk_id\":%.0f,\"section\":true,"
             "\"budget_tokens\":1000}", get(first, "chunk_id")->valuedouble);
    cJSON *g = call_ok("get", args);
    assert_true(cJSON_GetArraySize(get(g, "chunks")) >= 1);
    assert_true(printed_bytes(g) <= 3000);
    snprintf(args, sizeof args, "{\"chunk_id\":%.0f,\"section\":true}",
             get(first, "chunk_id")->valuedouble);
    cJSON *whole = call_ok("get", args);
    assert_int_equal(cJSON_GetArraySize(get(g, "chunks")) + get(g, "omitted")->valueint,
                     cJSON_GetArraySize(get(whole, "chunks")));
    cJSON_Delete(whole);
    cJSON_Delete(g);
    cJSON_Delete(all);
}

/* ------------------------------------------------------------ sub-queries */

static void test_searches(void **state)
{
    (void)state;
    /* a query that finds nothing, with a sub-query that finds the padded
     * transpose: the sub-query's list is fused in */
    cJSON *none = call_ok("search", "{\"query\":\"zzqx\"}");
    assert_int_equal(cJSON_GetArraySize(get(none, "results")), 0);
    cJSON_Delete(none);
    cJSON *plain = call_ok("search", "{\"query\":\"padding one column\",\"k\":3}");
    cJSON *sub = call_ok("search", "{\"query\":\"zzqx\",\"k\":3,\"searches\":"
                                   "[{\"type\":\"lex\",\"query\":\"padding one column\"}]}");
    assert_true(cJSON_GetArraySize(get(sub, "results")) >= 1);
    assert_true(get(cJSON_GetArrayItem(get(sub, "results"), 0), "chunk_id")->valuedouble ==
                get(cJSON_GetArrayItem(get(plain, "results"), 0), "chunk_id")->valuedouble);
    assert_string_equal(get(sub, "query")->valuestring, "zzqx");
    cJSON_Delete(sub);

    /* two lists: a section both find ranks above one that one finds */
    sub = call_ok("search", "{\"query\":\"padding one column\",\"k\":5,"
                            "\"searches\":[{\"type\":\"lex\",\"query\":"
                            "\"bank conflicts shared memory\"}]}");
    const cJSON *top = cJSON_GetArrayItem(get(sub, "results"), 0);
    assert_true(get(top, "score")->valuedouble > 1.0 / 61);   /* in both lists */
    cJSON_Delete(sub);

    /* vec and hyde on a KB without vectors: dropped, answered lexically */
    sub = call_ok("search", "{\"query\":\"padding one column\",\"k\":3,"
                            "\"searches\":[{\"type\":\"hyde\",\"query\":"
                            "\"Pad the tile by one column.\"}]}");
    assert_string_equal(get(sub, "mode")->valuestring, "lexical");
    assert_true(cJSON_Compare(get(sub, "results"), get(plain, "results"), 1));
    cJSON_Delete(sub);
    cJSON_Delete(plain);
}

/* A table above query/ uses the same checker; a schema keyword it cannot
 * check is the table's mistake, not the caller's. */
static kb_rc echo_fn(kb_tool_ctx *ctx, const cJSON *args, cJSON **out, kb_err *err)
{
    (void)ctx;
    (void)err;
    *out = args ? cJSON_Duplicate(args, 1) : cJSON_CreateObject();
    return KB_OK;
}

static void test_other_table(void **state)
{
    (void)state;
    const kb_tool mine[] = {
        { "echo", "Echoes.", "{\"type\":\"object\",\"properties\":{\"n\":"
          "{\"type\":\"integer\",\"minimum\":0}},\"required\":[],"
          "\"additionalProperties\":false}", "{\"type\":\"object\"}", 1, echo_fn, 0, 0 },
        { "bad", "Bad.", "{\"type\":\"object\",\"properties\":{\"s\":"
          "{\"type\":\"string\",\"pattern\":\"^a\"}},\"additionalProperties\":false}",
          "{\"type\":\"object\"}", 1, echo_fn, 0, 0 },
    };
    kb_tool_ctx ctx = { .store = store, .emb = NULL, .config = &config };
    kb_err err;
    kb_err_clear(&err);
    cJSON *args = cJSON_Parse("{\"n\":3}"), *out = NULL;
    const kb_tool *echo = kb_tool_lookup(mine, 2, "echo");
    assert_non_null(echo);
    assert_int_equal(kb_tool_run(echo, &ctx, args, &out, &err), KB_OK);
    assert_true(cJSON_Compare(args, out, 1));
    cJSON_Delete(out);
    cJSON_Delete(args);

    args = cJSON_Parse("{\"n\":-1}");
    assert_int_equal(kb_tool_run(echo, &ctx, args, &out, &err), KB_ERR_USAGE);
    assert_string_equal(err.msg, "echo: 'n' must be an integer of at least 0, not -1");
    assert_null(out);
    cJSON_Delete(args);

    kb_err_clear(&err);
    args = cJSON_Parse("{\"s\":\"abc\"}");
    assert_int_equal(kb_tool_check_args(&mine[1], args, &err), KB_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "'pattern'"));
    cJSON_Delete(args);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_search),
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_papers),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_utf8_cut),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_searches),
        cmocka_unit_test(test_other_table),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
