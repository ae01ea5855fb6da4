/* tools.c - the tool table (kb.h, "tools"): search, get, papers and status
 * with their schemas and handlers, the arguments' checker, and the result
 * objects made with cJSON. */
#include "api/api.h"
#include "kb/kb.h"
#include "kb/kb_int.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STR_(x) #x
#define STR(x) STR_(x)

#define SEARCH_K_MAX 50
#define QUERY_MAX_CHARS 65536
#define BUDGET_MIN 1000
#define BUDGET_MAX 200000
/* A token of a result is taken as 3 bytes of its JSON: fewer than the 4
 * of English prose, since code, identifiers and JSON's escapes cut into
 * more tokens - a budget should not be overrun by the estimate. */
#define BYTES_PER_TOKEN 3
#define JSON_INT_MAX 9007199254740991.0   /* 2^53 - 1: exact in a double */

/* ---------------------------------------------------------------- schemas */

#define KINDS_ENUM "[\"text\",\"code\",\"table\",\"paper\",\"skill\"]"
#define MODES_ENUM "[\"hybrid\",\"lexical\",\"vector\"]"
#define SEARCH_TYPES_ENUM "[\"lex\",\"vec\",\"hyde\"]"

/* One result of search and get: DESIGN.md's `kb query --json` fields. */
#define RESULT_SCHEMA \
    "{\"type\":\"object\",\"properties\":{" \
    "\"rank\":{\"type\":\"integer\",\"minimum\":1}," \
    "\"score\":{\"type\":\"number\",\"description\":\"higher is better; " \
        "comparable within one result list only\"}," \
    "\"chunk_id\":{\"type\":\"integer\",\"minimum\":1,\"description\":" \
        "\"the chunk's id, for get\"}," \
    "\"source\":{\"type\":\"string\",\"description\":\"the source's id " \
        "(the status tool lists them)\"}," \
    "\"title\":{\"type\":\"string\",\"description\":\"the document's title\"}," \
    "\"heading_path\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}," \
        "\"description\":\"section titles from the document's top down to " \
        "the chunk; for a paper the list's sections, then its title\"}," \
    "\"url\":{\"type\":\"string\",\"description\":\"a deep link to the " \
        "section (with #anchor); cite it\"}," \
    "\"path\":{\"type\":\"string\",\"description\":\"the file relative to " \
        "the mirror root, a local file's path, or empty\"}," \
    "\"kind\":{\"type\":\"string\",\"enum\":" KINDS_ENUM "}," \
    "\"text\":{\"type\":\"string\",\"description\":\"the chunk's text, or " \
        "a snippet of it\"}," \
    "\"version\":{\"type\":\"string\",\"description\":\"the version of " \
        "the source's documents (e.g. 13.x, 9.1); empty when unknown\"}," \
    "\"lexical_rank\":{\"type\":[\"integer\",\"null\"],\"description\":" \
        "\"place in the keyword (BM25) list; null when not in it\"}," \
    "\"vector_rank\":{\"type\":[\"integer\",\"null\"],\"description\":" \
        "\"place in the embedding list; null when not in it\"}," \
    "\"lexical_score\":{\"type\":[\"number\",\"null\"],\"description\":" \
        "\"with explain: its BM25 score; null when not in that list\"}," \
    "\"vector_score\":{\"type\":[\"number\",\"null\"],\"description\":" \
        "\"with explain: its cosine similarity; null when not in that list\"}," \
    "\"similar\":{\"type\":\"array\",\"description\":\"results whose text " \
        "is near-identical to this one's (variants of one generated page, a " \
        "file copied into several places), shown as this one; get fetches " \
        "them by chunk_id\",\"items\":{\"type\":\"object\",\"properties\":{" \
        "\"chunk_id\":{\"type\":\"integer\",\"minimum\":1}," \
        "\"source\":{\"type\":\"string\"},\"title\":{\"type\":\"string\"}," \
        "\"heading_path\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}," \
        "\"url\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"}}," \
        "\"required\":[\"chunk_id\",\"source\",\"title\",\"heading_path\"," \
        "\"url\",\"path\"],\"additionalProperties\":false}}}," \
    "\"required\":[\"rank\",\"score\",\"chunk_id\",\"source\",\"title\"," \
        "\"heading_path\",\"url\",\"path\",\"kind\",\"text\",\"version\"," \
        "\"lexical_rank\",\"vector_rank\"]," \
    "\"additionalProperties\":false}"

#define RESULTS_SCHEMA \
    "{\"type\":\"object\",\"properties\":{" \
    "\"query\":{\"type\":\"string\"}," \
    "\"mode\":{\"type\":\"string\",\"enum\":" MODES_ENUM "}," \
    "\"took_ms\":{\"type\":\"number\"}," \
    "\"truncated\":{\"type\":\"boolean\",\"description\":\"true when " \
        "results were left out to keep within the token budget\"}," \
    "\"omitted\":{\"type\":\"integer\",\"minimum\":0,\"description\":" \
        "\"how many results were left out (raise budget_tokens, lower k, " \
        "or pass snippet for them)\"}," \
    "\"timings\":{\"type\":\"object\",\"description\":\"with explain: " \
        "where the time went, in ms\",\"properties\":{" \
        "\"lexical_ms\":{\"type\":\"number\"},\"embed_ms\":{\"type\":\"number\"}," \
        "\"vector_ms\":{\"type\":\"number\"},\"results_ms\":{\"type\":\"number\"}}," \
        "\"required\":[\"lexical_ms\",\"embed_ms\",\"vector_ms\",\"results_ms\"]," \
        "\"additionalProperties\":false}," \
    "\"results\":{\"type\":\"array\",\"items\":" RESULT_SCHEMA "}," \
    "\"expansion\":{\"type\":\"object\",\"description\":\"kb query --expand " \
        "only: the LLM's rewrites of the query that were searched beside it\"," \
        "\"properties\":{\"model\":{\"type\":\"string\"}," \
        "\"cached\":{\"type\":\"boolean\",\"description\":\"true: from the " \
            "KB's cache, no LLM call\"}," \
        "\"llm_ms\":{\"type\":\"number\"}," \
        "\"searches\":{\"type\":\"array\",\"items\":{\"type\":\"object\"," \
            "\"properties\":{\"type\":{\"type\":\"string\",\"enum\":" \
            SEARCH_TYPES_ENUM "},\"query\":{\"type\":\"string\"}}," \
            "\"required\":[\"type\",\"query\"],\"additionalProperties\":false}}," \
        "\"error\":{\"type\":[\"string\",\"null\"],\"description\":\"why " \
            "the query was searched alone; null when expanded\"}}," \
        "\"required\":[\"model\",\"cached\",\"llm_ms\",\"searches\",\"error\"]," \
        "\"additionalProperties\":false}," \
    "\"skills\":{\"type\":\"array\",\"maxItems\":3,\"description\":\"with " \
        "no sources or kinds filter: the skill library's best matches (verified " \
        "techniques with kernels and evidence), one a skill, its best chunk as a " \
        "snippet, apart from results; absent when none matches. skill_get, or get " \
        "by chunk_id, has the whole\",\"items\":" RESULT_SCHEMA "}}," \
    "\"required\":[\"query\",\"mode\",\"took_ms\",\"truncated\",\"omitted\"," \
        "\"results\"]," \
    "\"additionalProperties\":false}"

/* get's object: the chunk (or its section's chunks), its section and its
 * document, said once each */
#define GET_SCHEMA \
    "{\"type\":\"object\",\"properties\":{" \
    "\"chunk_id\":{\"type\":\"integer\",\"minimum\":1,\"description\":" \
        "\"the chunk asked for\"}," \
    "\"document\":{\"type\":\"object\",\"properties\":{" \
        "\"source\":{\"type\":\"string\"},\"title\":{\"type\":\"string\"}," \
        "\"url\":{\"type\":\"string\",\"description\":\"the document, " \
            "without an anchor\"}," \
        "\"path\":{\"type\":\"string\"},\"version\":{\"type\":\"string\"}}," \
        "\"required\":[\"source\",\"title\",\"url\",\"path\",\"version\"]," \
        "\"additionalProperties\":false}," \
    "\"section\":{\"type\":\"object\",\"properties\":{" \
        "\"heading_path\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}," \
        "\"url\":{\"type\":\"string\",\"description\":\"a deep link to the " \
            "section; cite it\"}}," \
        "\"required\":[\"heading_path\",\"url\"],\"additionalProperties\":false}," \
    "\"truncated\":{\"type\":\"boolean\"}," \
    "\"omitted\":{\"type\":\"integer\",\"minimum\":0}," \
    "\"chunks\":{\"type\":\"array\",\"description\":\"the chunk, or with " \
        "section every chunk of its section in document order\",\"items\":{" \
        "\"type\":\"object\",\"properties\":{" \
        "\"chunk_id\":{\"type\":\"integer\",\"minimum\":1}," \
        "\"kind\":{\"type\":\"string\",\"enum\":" KINDS_ENUM "}," \
        "\"heading_path\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}," \
        "\"text\":{\"type\":\"string\"}}," \
        "\"required\":[\"chunk_id\",\"kind\",\"heading_path\",\"text\"]," \
        "\"additionalProperties\":false}}}," \
    "\"required\":[\"chunk_id\",\"document\",\"section\",\"truncated\"," \
        "\"omitted\",\"chunks\"]," \
    "\"additionalProperties\":false}"

/* budget_tokens, as search and get take it */
#define BUDGET_PROPERTY \
    "\"budget_tokens\":{\"type\":\"integer\",\"minimum\":" STR(BUDGET_MIN) \
        ",\"maximum\":" STR(BUDGET_MAX) ",\"description\":\"the most tokens " \
        "the result may take (about 3 bytes of its JSON each): whole entries " \
        "are kept in order, best first, and the rest left out, counted in " \
        "omitted. Over MCP the default is " STR(KB_TOOL_BUDGET_DEFAULT) "\"}"

static const char search_input[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"query\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":"
        STR(QUERY_MAX_CHARS) ",\"description\":\"what to look for: a "
        "question, words, or an identifier such as cp.async.bulk.tensor or "
        "__shfl_down_sync\"},"
    "\"k\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":" STR(SEARCH_K_MAX)
        ",\"default\":10,\"description\":\"how many results\"},"
    "\"mode\":{\"type\":\"string\",\"enum\":" MODES_ENUM ",\"default\":"
        "\"hybrid\",\"description\":\"hybrid fuses keyword and embedding "
        "ranks (a KB without vectors answers lexical); lexical: keywords "
        "(BM25) only; vector: embeddings only\"},"
    "\"sources\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
        "\"minLength\":1},\"maxItems\":" STR(KB_FILTER_MAX_SOURCES) ","
        "\"description\":\"only results from these source ids\"},"
    "\"kinds\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":"
        KINDS_ENUM "},\"description\":\"only results of these kinds\"},"
    "\"explain\":{\"type\":\"boolean\",\"default\":false,\"description\":"
        "\"true: each result's score in each list, and the time of each step\"},"
    "\"snippet\":{\"type\":\"boolean\",\"default\":false,\"description\":"
        "\"true: each text is a window of about 320 bytes around the first "
        "query word; false: the whole chunk\"},"
    BUDGET_PROPERTY ","
    "\"searches\":{\"type\":\"array\",\"maxItems\":" STR(KB_QUERY_MAX_SEARCHES)
        ",\"description\":\"your own rewrites of the question, each searched "
        "as a list of its own and fused with query's lists by reciprocal rank "
        "(as hybrid fuses keywords and embeddings)\",\"items\":{\"type\":"
        "\"object\",\"properties\":{"
        "\"type\":{\"type\":\"string\",\"enum\":" SEARCH_TYPES_ENUM ","
            "\"description\":\"lex: keywords and identifiers (BM25); vec: a "
            "question or phrase, matched by meaning; hyde: a short hypothetical "
            "passage written as the documents would put the answer, matched by "
            "meaning\"},"
        "\"query\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":"
            STR(QUERY_MAX_CHARS) "}},"
        "\"required\":[\"type\",\"query\"],\"additionalProperties\":false}}},"
    "\"required\":[\"query\"],\"additionalProperties\":false}";

static const char get_input[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"chunk_id\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":"
        "9007199254740991,\"description\":\"a search result's chunk_id\"},"
    "\"section\":{\"type\":\"boolean\",\"default\":false,\"description\":"
        "\"true: every chunk of the chunk's section, in document order\"},"
    BUDGET_PROPERTY "},"
    "\"required\":[\"chunk_id\"],\"additionalProperties\":false}";

static const char papers_input[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"section\":{\"type\":\"string\",\"description\":\"only papers whose "
        "section path contains this text (case-insensitive)\"},"
    "\"words\":{\"type\":\"string\",\"maxLength\":1024,\"description\":"
        "\"only papers whose title or section holds every one of these words "
        "(case-insensitive), e.g. 'triton reinforcement'\"},"
    BUDGET_PROPERTY "},"
    "\"required\":[],\"additionalProperties\":false}";

static const char papers_output[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"truncated\":{\"type\":\"boolean\",\"description\":\"true when "
        "records were left out to keep within the token budget\"},"
    "\"omitted\":{\"type\":\"integer\",\"minimum\":0,\"description\":"
        "\"how many records were left out (narrow with section or words, or "
        "raise budget_tokens)\"},"
    "\"papers\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"properties\":{"
        "\"chunk_id\":{\"type\":\"integer\",\"minimum\":1},"
        "\"date\":{\"type\":\"string\",\"description\":\"as the list gives "
            "it, e.g. 2024-03\"},"
        "\"title\":{\"type\":\"string\"},"
        "\"section\":{\"type\":\"string\",\"description\":\"the list's "
            "section path, joined by ' > '\"},"
        "\"links\":{\"type\":\"object\",\"additionalProperties\":{\"type\":"
            "\"string\"},\"description\":\"URLs by label: paper, code, "
            "blog, ...\"}},"
    "\"required\":[\"chunk_id\",\"date\",\"title\",\"section\",\"links\"],"
    "\"additionalProperties\":false}}},"
    "\"required\":[\"truncated\",\"omitted\",\"papers\"],"
    "\"additionalProperties\":false}";

static const char status_input[] =
    "{\"type\":\"object\",\"properties\":{},\"required\":[],"
    "\"additionalProperties\":false}";

static const char status_output[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"kb\":{\"type\":\"string\",\"description\":\"the KB's directory\"},"
    "\"schema_version\":{\"type\":\"integer\"},"
    "\"documents\":{\"type\":\"integer\",\"minimum\":0},"
    "\"chunks\":{\"type\":\"integer\",\"minimum\":0},"
    "\"papers\":{\"type\":\"integer\",\"minimum\":0},"
    "\"embeddings\":{\"type\":\"integer\",\"minimum\":0},"
    "\"embedder\":{\"type\":\"string\",\"description\":\"what made the "
        "vectors; empty when the KB has none (search answers lexical)\"},"
    "\"index\":{\"type\":\"string\",\"description\":\"the FAISS index "
        "the vectors are searched with (Flat: exact; HNSW32, ...)\"},"
    "\"disk_bytes\":{\"type\":\"integer\",\"minimum\":0},"
    "\"sources\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"properties\":{"
        "\"id\":{\"type\":\"string\",\"description\":\"what search's "
            "sources filter takes\"},"
        "\"title\":{\"type\":\"string\"},"
        "\"url\":{\"type\":\"string\"},"
        "\"version\":{\"type\":\"string\",\"description\":\"the version of "
            "its documents the manifest names; empty when it names none\"},"
        "\"documents\":{\"type\":\"integer\",\"minimum\":0},"
        "\"chunks\":{\"type\":\"integer\",\"minimum\":0},"
        "\"papers\":{\"type\":\"integer\",\"minimum\":0},"
        "\"last_ingest\":{\"type\":\"integer\",\"description\":\"unix time; "
            "0: never\"},"
        "\"ingested\":{\"type\":[\"string\",\"null\"],\"description\":"
            "\"when it was last ingested, ISO 8601 in UTC; null: never\"},"
        "\"last_error\":{\"type\":[\"string\",\"null\"],\"description\":"
            "\"why the last ingest failed; null if it did not\"}},"
    "\"required\":[\"id\",\"title\",\"url\",\"version\",\"documents\","
        "\"chunks\",\"papers\",\"last_ingest\",\"ingested\",\"last_error\"],"
    "\"additionalProperties\":false}}},"
    "\"required\":[\"kb\",\"schema_version\",\"documents\",\"chunks\","
        "\"papers\",\"embeddings\",\"embedder\",\"disk_bytes\",\"sources\"],"
    "\"additionalProperties\":false}";

/* ---------------------------------------------------------------- results */

/* Result objects are built through these: a call that cannot allocate
 * clears *ok, and the calls after it do nothing (sticky, like a kb_rc
 * chain); finish() checks once at the end. */
static void put_string(cJSON *o, const char *key, const char *s, int *ok)
{
    if (*ok && !cJSON_AddStringToObject(o, key, s ? s : ""))
        *ok = 0;
}

static void put_number(cJSON *o, const char *key, double x, int *ok)
{
    if (*ok && !cJSON_AddNumberToObject(o, key, x))
        *ok = 0;
}

/* A rank, or null for 0 (not in that list). */
static void put_rank(cJSON *o, const char *key, int rank, int *ok)
{
    if (*ok && !(rank ? cJSON_AddNumberToObject(o, key, rank)
                      : cJSON_AddNullToObject(o, key)))
        *ok = 0;
}

static void put_string_or_null(cJSON *o, const char *key, const char *s, int *ok)
{
    if (*ok && !(s ? cJSON_AddStringToObject(o, key, s) : cJSON_AddNullToObject(o, key)))
        *ok = 0;
}

/* Unix time t as ISO 8601 in UTC ("2026-12-01T12:06:31Z") in buf, or NULL
 * for 0 (never). */
static const char *iso_time(long long t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (t <= 0 || !gmtime_r(&tt, &tm) || !strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
        return NULL;
    return buf;
}

static void put_item(cJSON *o, const char *key, cJSON *item, int *ok)
{
    if (!*ok || !cJSON_AddItemToObject(o, key, item)) {
        cJSON_Delete(item);
        *ok = 0;
    }
}

static cJSON *put_array(cJSON *o, const char *key, int *ok)
{
    cJSON *a = *ok ? cJSON_AddArrayToObject(o, key) : NULL;
    if (!a)
        *ok = 0;
    return a;
}

/* A new object appended to array a. */
static cJSON *push_object(cJSON *a, int *ok)
{
    cJSON *x = *ok ? cJSON_CreateObject() : NULL;
    if (!*ok || !cJSON_AddItemToArray(a, x)) {
        cJSON_Delete(x);
        *ok = 0;
        return NULL;
    }
    return x;
}

static void push_string(cJSON *a, const char *s, int *ok)
{
    cJSON *x = *ok ? cJSON_CreateString(s ? s : "") : NULL;
    if (!*ok || !cJSON_AddItemToArray(a, x)) {
        cJSON_Delete(x);
        *ok = 0;
    }
}

static kb_rc finish(cJSON *root, int ok, cJSON **out, kb_err *err)
{
    if (ok && root) {
        *out = root;
        return KB_OK;
    }
    cJSON_Delete(root);
    return kb_err_set(err, KB_ERR_NOMEM, "out of memory making JSON");
}

/* The bytes o takes in the result's JSON, unformatted; 0 out of memory. */
static size_t json_bytes(const cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    size_t n = s ? strlen(s) : 0;
    free(s);
    return n;
}

/* Moves the items of arr into the root's array key, in order, while the
 * whole stays within budget tokens (0: no limit); those that do not fit
 * are left out, whole, and "truncated" and "omitted" say so. */
static void pack_items(cJSON *root, const char *key, cJSON *arr, int budget, int *ok)
{
    cJSON *kept = *ok ? cJSON_CreateArray() : NULL;
    /* what the root takes besides its items: the fields so far, these
     * two and an empty array */
    size_t used = *ok ? json_bytes(root) : 0;
    if (!kept || !used)
        *ok = 0;
    used += sizeof ",\"truncated\":false,\"omitted\":100,\"\":[]" + strlen(key);
    size_t limit = budget > 0 ? (size_t)budget * BYTES_PER_TOKEN : (size_t)-1;
    size_t omitted = 0;
    cJSON *x;
    while (*ok && (x = cJSON_DetachItemFromArray(arr, 0)) != NULL) {
        if (!omitted) {
            size_t n = json_bytes(x) + 1;   /* and a comma */
            if (n == 1) {
                *ok = 0;
            } else if (used + n <= limit) {
                used += n;
                cJSON_AddItemToArray(kept, x);
                continue;
            }
        }
        omitted++;   /* it and every result after it stay out */
        cJSON_Delete(x);
    }
    if (*ok && !cJSON_AddBoolToObject(root, "truncated", omitted > 0))
        *ok = 0;
    put_number(root, "omitted", (double)omitted, ok);
    put_item(root, key, kept, ok);
}

/* What names and cites a result: its chunk id, source, title, heading
 * path, url and path (a near-identical result listed with another has
 * these alone). */
static void put_citation(cJSON *o, const kb_result *x, int *ok)
{
    put_number(o, "chunk_id", (double)x->chunk_id, ok);
    put_string(o, "source", x->source, ok);
    put_string(o, "title", x->title, ok);
    cJSON *hp = put_array(o, "heading_path", ok);
    for (size_t d = 0; d < x->depth; d++)
        push_string(hp, x->heading_path[d], ok);
    put_string(o, "url", x->url, ok);
    put_string(o, "path", x->path, ok);
}

/* One result's object, in the shape of `kb query --json`. */
static void put_result(cJSON *o, const kb_result *x, int explain, int *okp)
{
    int ok = *okp && o;
    put_number(o, "rank", x->rank, &ok);
    put_number(o, "score", x->score, &ok);
    put_citation(o, x, &ok);
    put_string(o, "kind", kb_kind_name(x->kind), &ok);
    put_string(o, "text", x->text, &ok);
    put_string(o, "version", x->version, &ok);
    put_rank(o, "lexical_rank", x->lexical_rank, &ok);
    put_rank(o, "vector_rank", x->vector_rank, &ok);
    if (explain && x->lexical_rank)
        put_number(o, "lexical_score", x->lexical_score, &ok);
    else if (explain)
        put_rank(o, "lexical_score", 0, &ok);
    if (explain && x->vector_rank)
        put_number(o, "vector_score", x->vector_score, &ok);
    else if (explain)
        put_rank(o, "vector_score", 0, &ok);
    cJSON *sim = x->nsimilar ? put_array(o, "similar", &ok) : NULL;
    for (size_t j = 0; sim && j < x->nsimilar; j++)
        put_citation(push_object(sim, &ok), &x->similar[j], &ok);
    *okp = ok;
}

/* DESIGN.md's `kb query --json` object for r, within budget tokens (0: no
 * limit). */
static kb_rc results_json(const char *query, const kb_results *r, int budget,
                          int explain, cJSON **out, kb_err *err)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_CreateArray();
    int ok = root && arr;
    put_string(root, "query", query, &ok);
    put_string(root, "mode", kb_mode_name(r->mode), &ok);
    put_number(root, "took_ms", (double)(int)(r->took_ms * 1000) / 1000.0, &ok);
    for (size_t i = 0; ok && i < r->n; i++)
        put_result(push_object(arr, &ok), &r->items[i], explain, &ok);
    if (r->nskills) {   /* before the results are packed: their budget is what is left */
        cJSON *sk = put_array(root, "skills", &ok);
        for (size_t i = 0; ok && i < r->nskills; i++)
            put_result(push_object(sk, &ok), &r->skills[i], explain, &ok);
    }
    if (explain) {
        cJSON *t = cJSON_CreateObject();
        put_item(root, "timings", t, &ok);
        put_number(t, "lexical_ms", r->lexical_ms, &ok);
        put_number(t, "embed_ms", r->embed_ms, &ok);
        put_number(t, "vector_ms", r->vector_ms, &ok);
        put_number(t, "results_ms", r->results_ms, &ok);
    }
    pack_items(root, "results", arr, budget, &ok);
    cJSON_Delete(arr);
    return finish(root, ok, out, err);
}

/* ---------------------------------------------------------------- handlers */

/* Handlers read arguments kb_tool_run has checked against their schema:
 * absent ones take the schema's default. */
static const char *arg_string(const cJSON *args, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double arg_number(const cJSON *args, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static int arg_bool(const cJSON *args, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

/* budget_tokens, else the caller's default. */
static int arg_budget(const kb_tool_ctx *ctx, const cJSON *args)
{
    return (int)arg_number(args, "budget_tokens", ctx->budget_tokens);
}

static kb_rc tool_search(kb_tool_ctx *ctx, const cJSON *args, cJSON **out,
                         kb_err *err)
{
    kb_search searches[KB_QUERY_MAX_SEARCHES];
    kb_query_opts opts;
    kb_query_opts_init(&opts);
    opts.text = arg_string(args, "query");
    opts.k = (int)arg_number(args, "k", 10);
    opts.snippet = arg_bool(args, "snippet", 0);
    opts.config = ctx->config;
    const char *mode = arg_string(args, "mode");
    if (mode && kb_mode_parse(mode, &opts.mode) != 0)
        return kb_err_set(err, KB_ERR_INTERNAL, "search: mode '%s' passed the "
                          "schema but is no mode", mode);
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(args, "sources"))
        if (opts.filter.nsources < KB_FILTER_MAX_SOURCES)   /* maxItems */
            opts.filter.sources[opts.filter.nsources++] = v->valuestring;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(args, "kinds")) {
        kb_kind kind;
        if (kb_kind_parse(v->valuestring, &kind) != 0)
            return kb_err_set(err, KB_ERR_INTERNAL, "search: kind '%s' passed "
                              "the schema but is no kind", v->valuestring);
        opts.filter.kinds |= 1u << kind;
    }
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(args, "searches")) {
        kb_search *s = &searches[opts.nsearches];
        if (opts.nsearches == KB_QUERY_MAX_SEARCHES ||   /* maxItems */
            kb_search_type_parse(arg_string(v, "type"), &s->type) != 0)
            return kb_err_set(err, KB_ERR_INTERNAL, "search: searches passed "
                              "the schema but are not sub-queries");
        s->text = arg_string(v, "query");
        opts.nsearches++;
    }
    opts.searches = searches;
    kb_results res;
    kb_rc rc = kb_query_run(ctx->store, ctx->emb, &opts, &res, err);
    if (rc == KB_OK)
        rc = results_json(opts.text, &res, arg_budget(ctx, args),
                          arg_bool(args, "explain", 0), out, err);
    kb_results_release(&res);
    return rc;
}

/* get's object for chunk id and its chunks r (GET_SCHEMA), within budget
 * tokens (0: no limit). */
static kb_rc get_json(int64_t id, const kb_results *r, int budget, cJSON **out,
                      kb_err *err)
{
    const kb_result *x = &r->items[0];
    for (size_t i = 0; i < r->n; i++)   /* the section as the chunk asked for has it */
        if (r->items[i].chunk_id == id)
            x = &r->items[i];
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_CreateArray();
    int ok = root && arr;
    put_number(root, "chunk_id", (double)id, &ok);
    cJSON *doc = cJSON_CreateObject();
    put_item(root, "document", doc, &ok);
    put_string(doc, "source", x->source, &ok);
    put_string(doc, "title", x->title, &ok);
    size_t ulen = strcspn(x->url, "#");
    char *url = kb_strndup(x->url, ulen);
    if (!url)
        ok = 0;
    put_string(doc, "url", url ? url : "", &ok);
    free(url);
    put_string(doc, "path", x->path, &ok);
    put_string(doc, "version", x->version, &ok);
    cJSON *sec = cJSON_CreateObject();
    put_item(root, "section", sec, &ok);
    cJSON *hp = put_array(sec, "heading_path", &ok);
    for (size_t d = 0; d < x->depth; d++)
        push_string(hp, x->heading_path[d], &ok);
    put_string(sec, "url", x->url, &ok);
    for (size_t i = 0; ok && i < r->n; i++) {
        const kb_result *c = &r->items[i];
        cJSON *o = push_object(arr, &ok);
        put_number(o, "chunk_id", (double)c->chunk_id, &ok);
        put_string(o, "kind", kb_kind_name(c->kind), &ok);
        cJSON *h = put_array(o, "heading_path", &ok);
        for (size_t d = 0; d < c->depth; d++)
            push_string(h, c->heading_path[d], &ok);
        put_string(o, "text", c->text, &ok);
    }
    pack_items(root, "chunks", arr, budget, &ok);
    cJSON_Delete(arr);
    return finish(root, ok, out, err);
}

/* The chunk, its section and its document (`kb get --json`). */
static kb_rc tool_get(kb_tool_ctx *ctx, const cJSON *args, cJSON **out,
                      kb_err *err)
{
    int64_t id = (int64_t)arg_number(args, "chunk_id", 0);
    kb_results res;
    kb_rc rc = kb_get_chunk(ctx->store, id, arg_bool(args, "section", 0), &res,
                            err);
    if (rc == KB_OK)
        rc = get_json(id, &res, arg_budget(ctx, args), out, err);
    kb_results_release(&res);
    return rc;
}

static kb_rc tool_papers(kb_tool_ctx *ctx, const cJSON *args, cJSON **out,
                         kb_err *err)
{
    kb_paper_list list;
    kb_rc rc = kb_papers_list(ctx->store, arg_string(args, "section"),
                              arg_string(args, "words"), &list, err);
    if (rc != KB_OK)
        return rc;
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_CreateArray();
    int ok = root && arr;
    for (size_t i = 0; ok && i < list.n; i++) {
        const kb_paper_row *p = &list.items[i];
        cJSON *o = push_object(arr, &ok);
        put_number(o, "chunk_id", (double)p->chunk_id, &ok);
        put_string(o, "date", p->date, &ok);
        put_string(o, "title", p->title, &ok);
        put_string(o, "section", p->section, &ok);
        cJSON *links = cJSON_Parse(p->links_json);
        if (!cJSON_IsObject(links)) {   /* written by ingest: never, but safe */
            cJSON_Delete(links);
            links = cJSON_CreateObject();
        }
        put_item(o, "links", links, &ok);
    }
    kb_paper_list_release(&list);
    pack_items(root, "papers", arr, arg_budget(ctx, args), &ok);
    cJSON_Delete(arr);
    return finish(root, ok, out, err);
}

static kb_rc tool_status(kb_tool_ctx *ctx, const cJSON *args, cJSON **out,
                         kb_err *err)
{
    kb_status st;
    kb_rc rc = kb_store_status(ctx->store, &st, err);
    if (rc != KB_OK)
        return rc;
    cJSON *root = cJSON_CreateObject();
    int ok = root != NULL;
    put_string(root, "kb", kb_store_dir(ctx->store), &ok);
    put_number(root, "schema_version", st.schema_version, &ok);
    put_number(root, "documents", (double)st.documents, &ok);
    put_number(root, "chunks", (double)st.chunks, &ok);
    put_number(root, "papers", (double)st.papers, &ok);
    put_number(root, "embeddings", (double)st.embeddings, &ok);
    put_string(root, "embedder", st.embedder, &ok);
    put_string(root, "index", st.vec_index, &ok);
    put_number(root, "disk_bytes", (double)st.disk_bytes, &ok);
    cJSON *arr = put_array(root, "sources", &ok);
    for (size_t i = 0; ok && i < st.n; i++) {
        const kb_source_status *s = &st.sources[i];
        cJSON *x = push_object(arr, &ok);
        put_string(x, "id", s->id, &ok);
        put_string(x, "title", s->title, &ok);
        put_string(x, "url", s->url, &ok);
        put_string(x, "version", s->version, &ok);
        put_number(x, "documents", (double)s->documents, &ok);
        put_number(x, "chunks", (double)s->chunks, &ok);
        put_number(x, "papers", (double)s->papers, &ok);
        put_number(x, "last_ingest", (double)s->last_ingest, &ok);
        char when[32];
        put_string_or_null(x, "ingested", iso_time(s->last_ingest, when, sizeof when),
                           &ok);
        put_string_or_null(x, "last_error", s->last_error, &ok);
    }
    kb_status_release(&st);
    return finish(root, ok, out, err);
}

/* ---------------------------------------------------------------- table */

static const kb_tool tools[] = {
    { "search",
      "Search the knowledge base of GPU kernel engineering documents (CUDA "
      "Programming Guide, PTX ISA, Best Practices and architecture tuning "
      "guides, Nsight Compute, CUTLASS/CuTe docs, exemplar kernels, the "
      "kernel-generation literature list, the team's skills) for the "
      "passages that answer a question or define an identifier such as "
      "cp.async.bulk.tensor or cudaFuncSetAttribute. Use it first when you "
      "need facts, API or instruction semantics, or optimisation "
      "techniques, and cite the url of each result you use. Returns up to k "
      "ranked results, each with its source id, document title, heading "
      "path, a deep-link url, its kind (text, code, table, paper, skill) "
      "and its text (the whole chunk, or with snippet a short window); "
      "filter by sources and kinds, and call get with a result's chunk_id "
      "and section for the whole section around it. Add searches - up to "
      "10 rewrites of your own (keywords, a rephrased question, a "
      "hypothetical passage) - when the question's own words may miss: "
      "each is searched and fused with the query. Results are packed best "
      "first within budget_tokens (whole ones; truncated and omitted say "
      "what was left out), and each carries the source's version.",
      search_input, RESULTS_SCHEMA, 1, tool_search, 1 },
    { "get",
      "Fetch one chunk of the knowledge base by the chunk_id that a search "
      "result gave, or with section every chunk of that chunk's section in "
      "document order. Use it when a result's text is cut short or the "
      "passages around it matter. Returns the chunk's document (source, "
      "title, url, path, version) and section (heading_path and its deep "
      "link) once, and chunks: the chunk, or the section's chunks in "
      "document order; a section longer than budget_tokens keeps its first "
      "chunks (truncated, omitted). An unknown chunk_id is an error.",
      get_input, GET_SCHEMA, 1, tool_get, 0 },
    { "papers",
      "List the paper records of the kernel-generation literature list "
      "(date, title, section path and links by label such as paper, code, "
      "blog), in list order, optionally only those whose section path "
      "contains section, or whose title or section holds every one of "
      "words. Use it to survey the work on a topic the list has a section "
      "for; to find papers about a question, use search with kinds "
      "[\"paper\"] instead. "
      "Without a filter it returns every record, hundreds of them, cut to "
      "budget_tokens (truncated, omitted).",
      papers_input, papers_output, 1, tool_papers, 0 },
    { "status",
      "Describe the knowledge base: each source (id, title, url, the "
      "version of its documents, how many documents, chunks and papers, "
      "when it was last ingested and the last error), the totals, the "
      "embedder its vectors were made with (empty: none, so search "
      "answers lexical) and its size on disk. Use "
      "it to learn the source ids that search's sources filter takes, or "
      "whether the KB is empty or stale. Takes no arguments.",
      status_input, status_output, 1, tool_status, 0 },
};

const kb_tool *kb_tools(size_t *n)
{
    *n = sizeof tools / sizeof tools[0];
    return tools;
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
    const kb_tool *t = kb_tools(&n);
    return kb_tool_lookup(t, n, name);
}

/* ---------------------------------------------------------------- checker */

/* The subset of JSON Schema the checker knows; a schema with any other
 * keyword is refused, so a table never relies on a check that is not
 * made. */
static const char *const known_keywords[] = {
    "type", "properties", "required", "additionalProperties", "items", "enum",
    "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems",
    "description", "default", "title", NULL
};

typedef struct {
    const char *tool;
    kb_err *err;
} checker;

static int is_integer(const cJSON *v)
{
    double d = v->valuedouble;
    return cJSON_IsNumber(v) && isfinite(d) && floor(d) == d &&
           fabs(d) <= JSON_INT_MAX;
}

static int has_type(const cJSON *v, const char *type)
{
    if (strcmp(type, "string") == 0) return cJSON_IsString(v);
    if (strcmp(type, "integer") == 0) return is_integer(v);
    if (strcmp(type, "number") == 0) return cJSON_IsNumber(v) && isfinite(v->valuedouble);
    if (strcmp(type, "boolean") == 0) return cJSON_IsBool(v);
    if (strcmp(type, "array") == 0) return cJSON_IsArray(v);
    if (strcmp(type, "object") == 0) return cJSON_IsObject(v);
    if (strcmp(type, "null") == 0) return cJSON_IsNull(v);
    return 0;
}

/* A type's name in a message: "an integer". */
static const char *type_phrase(const char *type)
{
    if (strcmp(type, "integer") == 0) return "an integer";
    if (strcmp(type, "array") == 0) return "an array";
    if (strcmp(type, "object") == 0) return "an object";
    if (strcmp(type, "boolean") == 0) return "true or false";
    if (strcmp(type, "null") == 0) return "null";
    if (strcmp(type, "number") == 0) return "a number";
    return "a string";
}

/* What v is, for "..., not X". */
static const char *kind_of(const cJSON *v)
{
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsNull(v)) return "null";
    return "invalid JSON";
}

/* Characters (code points) of a UTF-8 string, as JSON Schema counts. */
static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int num_kw(const cJSON *schema, const char *kw, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(schema, kw);
    if (!cJSON_IsNumber(v))
        return 0;
    *out = v->valuedouble;
    return 1;
}

/* Appends the names in array a (strings), joined by ", ". */
static kb_rc join_names(kb_buf *b, const cJSON *a)
{
    kb_rc rc = KB_OK;
    int first = 1;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        const char *name = cJSON_IsString(x) ? x->valuestring : x->string;
        if (rc == KB_OK && !first)
            rc = kb_buf_puts(b, ", ");
        if (rc == KB_OK && name)
            rc = kb_buf_puts(b, name);
        first = 0;
    }
    return rc;
}

/* What a value of schema must be: "an integer from 1 to 50", "one of
 * hybrid, lexical, vector", "a non-empty string of at most 65536
 * characters". */
static kb_rc describe(const cJSON *schema, kb_buf *b)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum");
    if (cJSON_IsArray(en)) {
        kb_rc rc = kb_buf_puts(b, "one of ");
        if (rc == KB_OK)
            rc = join_names(b, en);
        return rc;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
    double lo = 0, hi = 0, min_len = 0, max_len = 0;
    int has_lo = num_kw(schema, "minimum", &lo), has_hi = num_kw(schema, "maximum", &hi);
    kb_rc rc = KB_OK;
    if (cJSON_IsArray(type)) {   /* ["integer", "null"] */
        const cJSON *x;
        cJSON_ArrayForEach(x, type)
            if (rc == KB_OK && cJSON_IsString(x))
                rc = kb_buf_printf(b, "%s%s", x == type->child ? "" : " or ",
                                   type_phrase(x->valuestring));
        return rc;
    }
    if (!t)
        return kb_buf_puts(b, "a value");
    num_kw(schema, "minLength", &min_len);
    if (strcmp(t, "string") == 0 && min_len >= 1)
        rc = kb_buf_puts(b, min_len == 1 ? "a non-empty string"
                                         : "a string");
    else
        rc = kb_buf_puts(b, type_phrase(t));
    if (rc == KB_OK && has_lo && has_hi)
        rc = kb_buf_printf(b, " from %.17g to %.17g", lo, hi);
    else if (rc == KB_OK && has_lo)
        rc = kb_buf_printf(b, " of at least %.17g", lo);
    else if (rc == KB_OK && has_hi)
        rc = kb_buf_printf(b, " of at most %.17g", hi);
    if (rc == KB_OK && min_len > 1)
        rc = kb_buf_printf(b, " of at least %.17g characters", min_len);
    if (rc == KB_OK && num_kw(schema, "maxLength", &max_len))
        rc = kb_buf_printf(b, " of at most %.17g characters", max_len);
    if (rc == KB_OK && num_kw(schema, "minItems", &lo))
        rc = kb_buf_printf(b, " of at least %.17g items", lo);
    if (rc == KB_OK && num_kw(schema, "maxItems", &hi))
        rc = kb_buf_printf(b, " of at most %.17g items", hi);
    return rc;
}

/* Fails with "TOOL: LABEL must be <describe(schema)>, not ACTUAL". */
static kb_rc must_be(const checker *c, const cJSON *schema, const char *label,
                     const char *actual)
{
    kb_buf want;
    kb_buf_init(&want, 512);
    kb_rc rc = describe(schema, &want);
    if (rc == KB_OK)
        rc = kb_err_set(c->err, KB_ERR_USAGE, "%s: %s must be %s, not %s", c->tool,
                        label, want.data, actual);
    else
        rc = kb_err_set(c->err, KB_ERR_NOMEM, "out of memory");
    kb_buf_release(&want);
    return rc;
}

static kb_rc schema_error(const checker *c, const char *what)
{
    return kb_err_set(c->err, KB_ERR_INTERNAL, "tool '%s': its input schema %s",
                      c->tool, what);
}

static kb_rc check_value(const checker *c, const cJSON *schema, const cJSON *v,
                         const char *path);

/* The members of object v against schema's properties, required and
 * additionalProperties (false only). */
static kb_rc check_members(const checker *c, const cJSON *schema, const cJSON *v,
                           const char *path)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");
    if (extra && !cJSON_IsFalse(extra))
        return schema_error(c, "has an additionalProperties other than false");
    const cJSON *m;
    cJSON_ArrayForEach(m, v) {
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, m->string);
        char sub[256];
        snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", m->string);
        if (ps) {
            kb_rc rc = check_value(c, ps, m, sub);
            if (rc != KB_OK)
                return rc;
            continue;
        }
        if (!extra)
            continue;
        kb_buf names;
        kb_buf_init(&names, 4096);
        kb_rc rc = join_names(&names, props);
        if (rc != KB_OK)
            rc = kb_err_set(c->err, KB_ERR_NOMEM, "out of memory");
        else if (*path)
            rc = kb_err_set(c->err, KB_ERR_USAGE, "%s: unknown key '%.*s' in "
                            "'%s' (keys: %s)", c->tool, kb_utf8_cut(m->string, 64),
                            m->string, path,
                            names.len ? names.data : "none");
        else if (names.len)
            rc = kb_err_set(c->err, KB_ERR_USAGE, "%s: unknown argument '%.*s' "
                            "(arguments: %s)", c->tool, kb_utf8_cut(m->string, 64),
                            m->string, names.data);
        else
            rc = kb_err_set(c->err, KB_ERR_USAGE, "%s: unknown argument '%.*s' "
                            "(it takes none)", c->tool, kb_utf8_cut(m->string, 64),
                            m->string);
        kb_buf_release(&names);
        return rc;
    }
    const cJSON *req;
    cJSON_ArrayForEach(req, cJSON_GetObjectItemCaseSensitive(schema, "required")) {
        if (!cJSON_IsString(req))
            return schema_error(c, "has a required entry that is not a name");
        if (!cJSON_GetObjectItemCaseSensitive(v, req->valuestring))
            return *path
                ? kb_err_set(c->err, KB_ERR_USAGE, "%s: '%s' lacks its key '%s'",
                             c->tool, path, req->valuestring)
                : kb_err_set(c->err, KB_ERR_USAGE, "%s: missing argument '%s'",
                             c->tool, req->valuestring);
    }
    return KB_OK;
}

/* Checks v against schema; path names v in messages ("" for the
 * arguments themselves, "k", "sources[2]"). */
static kb_rc check_value(const checker *c, const cJSON *schema, const cJSON *v,
                         const char *path)
{
    if (!cJSON_IsObject(schema))
        return schema_error(c, "is not a JSON object");
    const cJSON *kw;
    cJSON_ArrayForEach(kw, schema) {
        size_t i = 0;
        while (known_keywords[i] && strcmp(known_keywords[i], kw->string) != 0)
            i++;
        if (!known_keywords[i]) {
            char what[128];
            snprintf(what, sizeof what, "uses '%.*s', which the checker "
                     "does not know", kb_utf8_cut(kw->string, 40), kw->string);
            return schema_error(c, what);
        }
    }
    char label[288], actual[160];
    if (*path)
        snprintf(label, sizeof label, "'%s'", path);
    else
        snprintf(label, sizeof label, "the arguments");

    /* type */
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    int typed = !type;
    if (cJSON_IsString(type)) {
        typed = has_type(v, type->valuestring);
    } else if (cJSON_IsArray(type)) {
        const cJSON *t;
        cJSON_ArrayForEach(t, type)
            typed |= cJSON_IsString(t) && has_type(v, t->valuestring);
    }
    if (!typed) {
        if (cJSON_IsNumber(v))
            snprintf(actual, sizeof actual, "%.17g", v->valuedouble);
        else
            snprintf(actual, sizeof actual, "%s", kind_of(v));
        return must_be(c, schema, label, actual);
    }

    /* enum (of strings) */
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum");
    if (en) {
        int found = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, en)
            found |= cJSON_IsString(e) && cJSON_IsString(v) &&
                     strcmp(e->valuestring, v->valuestring) == 0;
        if (!found) {
            if (cJSON_IsString(v))
                snprintf(actual, sizeof actual, "'%.*s'", kb_utf8_cut(v->valuestring, 64),
                         v->valuestring);
            else
                snprintf(actual, sizeof actual, "%s", kind_of(v));
            return must_be(c, schema, label, actual);
        }
    }

    double lo = 0, hi = 0;
    if (cJSON_IsNumber(v) &&
        ((num_kw(schema, "minimum", &lo) && v->valuedouble < lo) ||
         (num_kw(schema, "maximum", &hi) && v->valuedouble > hi))) {
        snprintf(actual, sizeof actual, "%.17g", v->valuedouble);
        return must_be(c, schema, label, actual);
    }
    if (cJSON_IsString(v)) {
        double len = (double)utf8_chars(v->valuestring);
        if ((num_kw(schema, "minLength", &lo) && len < lo) ||
            (num_kw(schema, "maxLength", &hi) && len > hi)) {
            if (len == 0)
                snprintf(actual, sizeof actual, "an empty string");
            else
                snprintf(actual, sizeof actual, "one of %.17g characters", len);
            return must_be(c, schema, label, actual);
        }
    }
    if (cJSON_IsArray(v)) {
        double n = (double)cJSON_GetArraySize(v);
        if ((num_kw(schema, "minItems", &lo) && n < lo) ||
            (num_kw(schema, "maxItems", &hi) && n > hi)) {
            snprintf(actual, sizeof actual, "an array of %.17g items", n);
            return must_be(c, schema, label, actual);
        }
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
        size_t i = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, v) {
            char sub[288];
            snprintf(sub, sizeof sub, "%s[%zu]", path, i++);
            kb_rc rc = items ? check_value(c, items, x, sub) : KB_OK;
            if (rc != KB_OK)
                return rc;
        }
    }
    if (cJSON_IsObject(v))
        return check_members(c, schema, v, path);
    return KB_OK;
}

kb_rc kb_tool_check_args(const kb_tool *tool, const cJSON *args, kb_err *err)
{
    checker c = { tool->name, err };
    /* parsed per call: a few microseconds, and nothing shared between
     * threads */
    cJSON *schema = cJSON_Parse(tool->input_schema);
    kb_rc rc;
    if (!schema)
        rc = schema_error(&c, "is not JSON");
    else if (!args)
        rc = check_members(&c, schema, NULL, "");
    else
        rc = check_value(&c, schema, args, "");
    cJSON_Delete(schema);
    return rc;
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

/* The cache's key of a call: generation, tool, budget, arguments. */
static kb_rc call_key(const kb_tool *tool, const kb_tool_ctx *ctx, const cJSON *args,
                      unsigned long long gen, kb_buf *key)
{
    cJSON *c = args ? canonical(args) : NULL;
    char *text = c ? cJSON_PrintUnformatted(c) : NULL;
    cJSON_Delete(c);
    kb_rc rc = args && !text ? KB_ERR_NOMEM
                             : kb_buf_printf(key, "%llu\n%s\n%d\n%s", gen, tool->name,
                                             ctx->budget_tokens, text ? text : "{}");
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

kb_rc kb_tool_run(const kb_tool *tool, kb_tool_ctx *ctx, const cJSON *args,
                  cJSON **out, kb_err *err)
{
    *out = NULL;
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
    if (rc == KB_OK && cache && cJSON_IsObject(*out)) {
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
    const kb_tool *t = kb_tools(&n);
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
