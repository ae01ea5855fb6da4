/* tools.c - query/'s part of the tool table (api.h): search, get, papers
 * and status with their schemas and handlers, and their result objects
 * made with cJSON. */
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

#define SEARCH_K_MAX KB_TOOL_SEARCH_K_MAX
#define QUERY_MAX_CHARS 65536
#define BUDGET_MIN KB_TOOL_BUDGET_MIN
#define BUDGET_MAX KB_TOOL_BUDGET_MAX
/* A token of a result is taken as 3 bytes of its JSON: fewer than the 4
 * of English prose, since code, identifiers and JSON's escapes cut into
 * more tokens - a budget should not be overrun by the estimate. */
#define BYTES_PER_TOKEN 3
#define JSON_INT_MAX 9007199254740991.0   /* 2^53 - 1: exact in a double */

/* ---------------------------------------------------------------- schemas */

#define KINDS_ENUM "[\"text\",\"code\",\"table\",\"paper\",\"skill\"]"
#define MODES_ENUM "[\"hybrid\",\"lexical\",\"vector\"]"
#define SEARCH_TYPES_ENUM "[\"lex\",\"vec\",\"hyde\"]"
#define RERANK_ENUM "[\"local\",\"llm\",\"none\"]"

/* One result of search and get: docs/design.md's `kb query --json` fields. */
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
    "\"rerank\":{\"type\":\"object\",\"description\":\"with explain, or " \
        "whenever the llm stage ran: what reordered the results\"," \
        "\"properties\":{\"stage\":{\"type\":\"string\",\"enum\":[\"local\"," \
            "\"remote\",\"llm\",\"none\"],\"description\":\"local: the " \
            "feature-weighted stage; remote: it, then KB_RERANK_URL's " \
            "cross-encoder; llm: the LLM's order of the best sections; none: " \
            "fusion's order\"}," \
        "\"model\":{\"type\":[\"string\",\"null\"],\"description\":" \
            "\"llm: the model asked (through sampling: the one your reply " \
            "named)\"}," \
        "\"via\":{\"type\":[\"string\",\"null\"],\"enum\":[\"endpoint\"," \
            "\"sampling\",null],\"description\":\"llm: endpoint, the " \
            "server's KB_LLM_URL; sampling, your own model through MCP " \
            "sampling (kb mcp, when the server has no endpoint)\"}," \
        "\"cached\":{\"type\":\"boolean\",\"description\":\"llm: the order " \
            "came from the cache, no request\"}," \
        "\"pool\":{\"type\":\"integer\",\"minimum\":0,\"description\":" \
            "\"llm: the sections it was asked to order\"}," \
        "\"ordered\":{\"type\":\"integer\",\"minimum\":0,\"description\":" \
            "\"llm: the sections its reply named, put first\"}," \
        "\"llm_ms\":{\"type\":\"number\"}," \
        "\"fallback\":{\"type\":[\"string\",\"null\"],\"description\":" \
            "\"llm: why kb's own order was kept (a failed or slow request, a " \
            "reply that is not ids); null when the LLM's order was used\"}}," \
        "\"required\":[\"stage\",\"model\",\"cached\",\"pool\",\"ordered\"," \
            "\"llm_ms\",\"fallback\"],\"additionalProperties\":false}," \
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
    "\"rerank\":{\"type\":\"string\",\"enum\":" RERANK_ENUM ",\"description\":"
        "\"what reorders the fused results: local, a feature-weighted stage "
        "(and the server's cross-encoder where it has one); llm, the server's "
        "LLM reads the best 30 sections and orders them (one request, cached; "
        "kb's own order if it fails, said in rerank.fallback; kb mcp without "
        "an LLM of its own asks yours through MCP sampling when you offer "
        "it); none, fusion's order. Default: the server's KB_RERANK, else "
        "local\"},"
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

/* A string of a result: "" where it has none (the schemas' strings are
 * never null). */
static const char *or_empty(const char *s)
{
    return s ? s : "";
}

/* Result objects are built with kb/json.c's sticky adders: a call that
 * cannot allocate clears *ok, and the calls after it do nothing; finish()
 * checks once at the end. A rank, or null for 0 (not in that list): */
static void put_rank(cJSON *o, const char *key, int rank, int *ok)
{
    if (rank)
        kb_json_put_num(o, key, rank, ok);
    else
        kb_json_put_null(o, key, ok);
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
    kb_json_put_num(root, "omitted", (double)omitted, ok);
    *ok = *ok && kept;   /* NULL: out of memory */
    kb_json_put_item(root, key, kept, ok);
}

/* What names and cites a result: its chunk id, source, title, heading
 * path, url and path (a near-identical result listed with another has
 * these alone). */
static void put_citation(cJSON *o, const kb_result *x, int *ok)
{
    kb_json_put_num(o, "chunk_id", (double)x->chunk_id, ok);
    kb_json_put_str(o, "source", or_empty(x->source), ok);
    kb_json_put_str(o, "title", or_empty(x->title), ok);
    cJSON *hp = kb_json_put_arr(o, "heading_path", ok);
    for (size_t d = 0; d < x->depth; d++)
        kb_json_push_str(hp, or_empty(x->heading_path[d]), ok);
    kb_json_put_str(o, "url", or_empty(x->url), ok);
    kb_json_put_str(o, "path", or_empty(x->path), ok);
}

/* One result's object, in the shape of `kb query --json`. */
static void put_result(cJSON *o, const kb_result *x, int explain, int *okp)
{
    int ok = *okp && o;
    kb_json_put_num(o, "rank", x->rank, &ok);
    kb_json_put_num(o, "score", x->score, &ok);
    put_citation(o, x, &ok);
    kb_json_put_str(o, "kind", or_empty(kb_kind_name(x->kind)), &ok);
    kb_json_put_str(o, "text", or_empty(x->text), &ok);
    kb_json_put_str(o, "version", or_empty(x->version), &ok);
    put_rank(o, "lexical_rank", x->lexical_rank, &ok);
    put_rank(o, "vector_rank", x->vector_rank, &ok);
    if (explain && x->lexical_rank)
        kb_json_put_num(o, "lexical_score", x->lexical_score, &ok);
    else if (explain)
        put_rank(o, "lexical_score", 0, &ok);
    if (explain && x->vector_rank)
        kb_json_put_num(o, "vector_score", x->vector_score, &ok);
    else if (explain)
        put_rank(o, "vector_score", 0, &ok);
    cJSON *sim = x->nsimilar ? kb_json_put_arr(o, "similar", &ok) : NULL;
    for (size_t j = 0; sim && j < x->nsimilar; j++)
        put_citation(kb_json_push_obj(sim, &ok), &x->similar[j], &ok);
    *okp = ok;
}

/* What the reranking stage did: RESULTS_SCHEMA's rerank. */
static void put_rerank(cJSON *root, const kb_rerank_info *x, int *ok)
{
    int llm = x->stage == KB_RERANK_LLM;
    cJSON *o = kb_json_put_obj(root, "rerank", ok);
    kb_json_put_str(o, "stage", x->stage == KB_RERANK_LOCAL && x->remote ? "remote"
                                : kb_rerank_kind_name(x->stage), ok);
    kb_json_put_str(o, "model", !llm ? NULL : x->lent_model[0] ? x->lent_model
                                                                : or_empty(x->model), ok);
    kb_json_put_str(o, "via", llm && x->via ? x->via : NULL, ok);
    kb_json_put_bool(o, "cached", x->cached, ok);
    kb_json_put_num(o, "pool", (double)x->pool, ok);
    kb_json_put_num(o, "ordered", (double)x->ordered, ok);
    kb_json_put_num(o, "llm_ms", (double)(long)(x->llm_ms * 1000) / 1000.0, ok);
    kb_json_put_str(o, "fallback", x->fallback[0] ? x->fallback : NULL, ok);
}

/* docs/design.md's `kb query --json` object for r, within budget tokens (0: no
 * limit). */
static kb_rc results_json(const char *query, const kb_results *r, int budget,
                          int explain, cJSON **out, kb_err *err)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_CreateArray();
    int ok = root && arr;
    kb_json_put_str(root, "query", or_empty(query), &ok);
    kb_json_put_str(root, "mode", or_empty(kb_mode_name(r->mode)), &ok);
    kb_json_put_num(root, "took_ms", (double)(int)(r->took_ms * 1000) / 1000.0, &ok);
    for (size_t i = 0; ok && i < r->n; i++)
        put_result(kb_json_push_obj(arr, &ok), &r->items[i], explain, &ok);
    if (r->nskills) {   /* before the results are packed: their budget is what is left */
        cJSON *sk = kb_json_put_arr(root, "skills", &ok);
        for (size_t i = 0; ok && i < r->nskills; i++)
            put_result(kb_json_push_obj(sk, &ok), &r->skills[i], explain, &ok);
    }
    if (explain || r->rerank.stage == KB_RERANK_LLM)
        put_rerank(root, &r->rerank, &ok);
    if (explain) {
        cJSON *t = kb_json_put_obj(root, "timings", &ok);
        kb_json_put_num(t, "lexical_ms", r->lexical_ms, &ok);
        kb_json_put_num(t, "embed_ms", r->embed_ms, &ok);
        kb_json_put_num(t, "vector_ms", r->vector_ms, &ok);
        kb_json_put_num(t, "results_ms", r->results_ms, &ok);
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
    opts.llm = ctx->llm;
    const char *mode = arg_string(args, "mode");
    if (mode && kb_mode_parse(mode, &opts.mode) != 0)
        return kb_err_set(err, KB_ERR_INTERNAL, "search: mode '%s' passed the "
                          "schema but is no mode", mode);
    const char *rerank = arg_string(args, "rerank");
    if (rerank && kb_rerank_kind_parse(rerank, &opts.rerank) != 0)
        return kb_err_set(err, KB_ERR_INTERNAL, "search: rerank '%s' passed the "
                          "schema but is no stage", rerank);
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
    kb_json_put_num(root, "chunk_id", (double)id, &ok);
    cJSON *doc = kb_json_put_obj(root, "document", &ok);
    kb_json_put_str(doc, "source", or_empty(x->source), &ok);
    kb_json_put_str(doc, "title", or_empty(x->title), &ok);
    size_t ulen = strcspn(x->url, "#");
    char *url = kb_strndup(x->url, ulen);
    if (!url)
        ok = 0;
    kb_json_put_str(doc, "url", url ? url : "", &ok);
    free(url);
    kb_json_put_str(doc, "path", or_empty(x->path), &ok);
    kb_json_put_str(doc, "version", or_empty(x->version), &ok);
    cJSON *sec = kb_json_put_obj(root, "section", &ok);
    cJSON *hp = kb_json_put_arr(sec, "heading_path", &ok);
    for (size_t d = 0; d < x->depth; d++)
        kb_json_push_str(hp, or_empty(x->heading_path[d]), &ok);
    kb_json_put_str(sec, "url", or_empty(x->url), &ok);
    for (size_t i = 0; ok && i < r->n; i++) {
        const kb_result *c = &r->items[i];
        cJSON *o = kb_json_push_obj(arr, &ok);
        kb_json_put_num(o, "chunk_id", (double)c->chunk_id, &ok);
        kb_json_put_str(o, "kind", or_empty(kb_kind_name(c->kind)), &ok);
        cJSON *h = kb_json_put_arr(o, "heading_path", &ok);
        for (size_t d = 0; d < c->depth; d++)
            kb_json_push_str(h, or_empty(c->heading_path[d]), &ok);
        kb_json_put_str(o, "text", or_empty(c->text), &ok);
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
        cJSON *o = kb_json_push_obj(arr, &ok);
        kb_json_put_num(o, "chunk_id", (double)p->chunk_id, &ok);
        kb_json_put_str(o, "date", or_empty(p->date), &ok);
        kb_json_put_str(o, "title", or_empty(p->title), &ok);
        kb_json_put_str(o, "section", or_empty(p->section), &ok);
        cJSON *links = cJSON_Parse(p->links_json);
        if (!cJSON_IsObject(links)) {   /* written by ingest: never, but safe */
            cJSON_Delete(links);
            links = cJSON_CreateObject();
        }
        ok = ok && links;   /* NULL: out of memory */
        kb_json_put_item(o, "links", links, &ok);
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
    kb_json_put_str(root, "kb", or_empty(kb_store_dir(ctx->store)), &ok);
    kb_json_put_num(root, "schema_version", st.schema_version, &ok);
    kb_json_put_num(root, "documents", (double)st.documents, &ok);
    kb_json_put_num(root, "chunks", (double)st.chunks, &ok);
    kb_json_put_num(root, "papers", (double)st.papers, &ok);
    kb_json_put_num(root, "embeddings", (double)st.embeddings, &ok);
    kb_json_put_str(root, "embedder", or_empty(st.embedder), &ok);
    kb_json_put_str(root, "index", or_empty(st.vec_index), &ok);
    kb_json_put_num(root, "disk_bytes", (double)st.disk_bytes, &ok);
    cJSON *arr = kb_json_put_arr(root, "sources", &ok);
    for (size_t i = 0; ok && i < st.n; i++) {
        const kb_source_status *s = &st.sources[i];
        cJSON *x = kb_json_push_obj(arr, &ok);
        kb_json_put_str(x, "id", or_empty(s->id), &ok);
        kb_json_put_str(x, "title", or_empty(s->title), &ok);
        kb_json_put_str(x, "url", or_empty(s->url), &ok);
        kb_json_put_str(x, "version", or_empty(s->version), &ok);
        kb_json_put_num(x, "documents", (double)s->documents, &ok);
        kb_json_put_num(x, "chunks", (double)s->chunks, &ok);
        kb_json_put_num(x, "papers", (double)s->papers, &ok);
        kb_json_put_num(x, "last_ingest", (double)s->last_ingest, &ok);
        char when[32];
        kb_json_put_str(x, "ingested", iso_time(s->last_ingest, when, sizeof when), &ok);
        kb_json_put_str(x, "last_error", s->last_error, &ok);
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
      search_input, RESULTS_SCHEMA, 1, tool_search, 1, KB_TOOL_MCP | KB_TOOL_REST },
    { "get",
      "Fetch one chunk of the knowledge base by the chunk_id that a search "
      "result gave, or with section every chunk of that chunk's section in "
      "document order. Use it when a result's text is cut short or the "
      "passages around it matter. Returns the chunk's document (source, "
      "title, url, path, version) and section (heading_path and its deep "
      "link) once, and chunks: the chunk, or the section's chunks in "
      "document order; a section longer than budget_tokens keeps its first "
      "chunks (truncated, omitted). An unknown chunk_id is an error.",
      get_input, GET_SCHEMA, 1, tool_get, 0, KB_TOOL_MCP | KB_TOOL_REST },
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
      papers_input, papers_output, 1, tool_papers, 0, KB_TOOL_MCP | KB_TOOL_REST },
    { "status",
      "Describe the knowledge base: each source (id, title, url, the "
      "version of its documents, how many documents, chunks and papers, "
      "when it was last ingested and the last error), the totals, the "
      "embedder its vectors were made with (empty: none, so search "
      "answers lexical) and its size on disk. Use "
      "it to learn the source ids that search's sources filter takes, or "
      "whether the KB is empty or stale. Takes no arguments.",
      status_input, status_output, 1, tool_status, 0, KB_TOOL_MCP | KB_TOOL_REST },
};

const kb_tool *kb_api_query_tools(size_t *n)
{
    *n = sizeof tools / sizeof tools[0];
    return tools;
}
