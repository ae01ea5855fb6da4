/* query.c - query execution: candidate lists (lexical now, vector and
 * their fusion with the embedder), section de-duplication, results. */
#include "query/query_int.h"
#include "kb/kb_int.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* At most this many results from one document in a result list, unless
 * too few results are left otherwise: one long document (an instruction
 * family, a whole guide) should not crowd out every other source. */
#define PER_DOCUMENT_CAP 5
/* For any k up to this the lists are searched POOL_RESULTS * 4 + 40 deep,
 * never deeper: the fused list, taken in order, is the same for every k, so
 * the top 10 of -k 10 and -k 50 agree (issue 22: 38 of 60 differed). */
#define POOL_RESULTS 50
/* At most TOP_UNIT_CAP of the first TOP_PLACES results from one document,
 * or from one chapter of a source that is one document (the literature
 * list, a whole guide): the demo question "why is my transpose slow" got
 * five hits from one CUDA sample (issue 22). */
#define TOP_PLACES 5
#define TOP_UNIT_CAP 3   /* 2: lexical dev2 0.654 -> 0.651 */

/* Sections a remote reranker (KB_RERANK_URL) judges: the local stage's
 * best; 90 % of the judged sections of unseen questions are within both
 * lists' top 50 sections, most of them far higher. */
#define RERANK_REMOTE_TOP 30
/* Two results are near-identical, and shown as one, when this share of
 * their word pairs is common to both (Jaccard): the variants of one
 * libcu++ PTX wrapper are 0.8 to 1, a file copied into several skills 1;
 * sections of different content in sibling pages (two compute
 * capabilities' "Shared Memory") 0.7 or less. */
#define NEAR_IDENTICAL 0.8
/* At most this many listed with one result. */
#define SIMILAR_MAX 16

static const char *const mode_names[] = { "hybrid", "lexical", "vector" };

const char *kb_mode_name(kb_mode mode)
{
    return (size_t)mode < 3 ? mode_names[mode] : "hybrid";
}

int kb_mode_parse(const char *name, kb_mode *out)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, mode_names[i]) == 0) {
            *out = (kb_mode)i;
            return 0;
        }
    return -1;
}

static const char *const rerank_names[] = { "default", "local", "llm", "none" };

const char *kb_rerank_kind_name(kb_rerank_kind kind)
{
    return (size_t)kind < 4 ? rerank_names[kind] : "default";
}

int kb_rerank_kind_parse(const char *name, kb_rerank_kind *out)
{
    for (int i = 1; name && i < 4; i++)
        if (strcmp(name, rerank_names[i]) == 0) {
            *out = (kb_rerank_kind)i;
            return 0;
        }
    return -1;
}

kb_rc kb_query_rerank_resolve(const kb_config *config, kb_rerank_kind kind,
                              const kb_llm_lent *lent, kb_rerank_kind *out,
                              kb_err *err)
{
    const char *env = config ? config->rerank : NULL;
    if (kind == KB_RERANK_DEFAULT && env && *env && kb_rerank_kind_parse(env, &kind) != 0)
        return kb_err_set(err, KB_ERR_USAGE, "bad KB_RERANK '%s': expected local, "
                          "llm or none", env);
    *out = kind == KB_RERANK_DEFAULT ? KB_RERANK_LOCAL : kind;
    if (*out != KB_RERANK_LLM)
        return KB_OK;
    if (lent && !(config && config->llm_url && *config->llm_url))
        return KB_OK;   /* no endpoint: the lent model (MCP sampling) */
    return kb_llm_require(config, "the llm reranking stage", err);
}

static const char *const search_type_names[] = { "lex", "vec", "hyde" };

const char *kb_search_type_name(kb_search_type type)
{
    return (size_t)type < 3 ? search_type_names[type] : "lex";
}

int kb_search_type_parse(const char *name, kb_search_type *out)
{
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, search_type_names[i]) == 0) {
            *out = (kb_search_type)i;
            return 0;
        }
    return -1;
}

/* A window of text around the first query word found in it. */
static char *make_snippet(const char *text, const char *query, size_t width)
{
    size_t len = strlen(text);
    if (len <= width)
        return kb_strdup(text);
    size_t best = len;
    const char *q = query;
    while (*q) {
        while (*q && !isalnum((unsigned char)*q))
            q++;
        const char *w = q;
        while (*q && (isalnum((unsigned char)*q) || *q == '_'))
            q++;
        size_t wl = (size_t)(q - w);
        if (wl < 3)
            continue;
        for (size_t i = 0; i + wl <= len && i < best; i++)
            if (strncasecmp(text + i, w, wl) == 0) {
                best = i;
                break;
            }
    }
    size_t start = best == len || best < width / 4 ? 0 : best - width / 4;
    while (start > 0 && ((unsigned char)text[start] & 0xC0) == 0x80)
        start--;
    size_t end = start + width < len ? start + width : len;
    while (end < len && ((unsigned char)text[end] & 0xC0) == 0x80)
        end++;
    kb_buf s;
    kb_buf_init(&s, 0);
    kb_rc rc = start > 0 ? kb_buf_puts(&s, "…") : KB_OK;
    if (rc == KB_OK)
        rc = kb_buf_append(&s, text + start, end - start);
    if (rc == KB_OK && end < len)
        rc = kb_buf_puts(&s, "…");
    return kb_buf_finish(&s, rc);   /* NULL: out of memory */
}

kb_rc kb_result_from_row(sqlite3_stmt *st, kb_result *r)
{
    const char *hp = (const char *)sqlite3_column_text(st, 3);
    const char *url = (const char *)sqlite3_column_text(st, 4);
    const char *anchor = (const char *)sqlite3_column_text(st, 5);
    const char *text = (const char *)sqlite3_column_text(st, 8);
    memset(r, 0, sizeof *r);
    r->chunk_id = sqlite3_column_int64(st, 0);
    r->source = kb_strdup((const char *)sqlite3_column_text(st, 1));
    r->title = kb_strdup((const char *)sqlite3_column_text(st, 2));
    r->path = kb_strdup((const char *)sqlite3_column_text(st, 6));
    kb_kind_parse((const char *)sqlite3_column_text(st, 7), &r->kind);
    r->text = kb_strdup(text ? text : "");
    const char *version = (const char *)sqlite3_column_text(st, 9);
    r->version = kb_strdup(version ? version : "");
    kb_buf u;
    kb_buf_init(&u, 0);
    kb_rc rc = kb_buf_puts(&u, url ? url : "");
    if (rc == KB_OK && anchor && *anchor && url && *url)
        rc = kb_buf_printf(&u, "#%s", anchor);
    r->url = kb_buf_finish(&u, rc);
    cJSON *arr = cJSON_Parse(hp ? hp : "[]");
    size_t n = cJSON_IsArray(arr) ? (size_t)cJSON_GetArraySize(arr) : 0;
    r->heading_path = calloc(n ? n : 1, sizeof *r->heading_path);
    const cJSON *h;
    cJSON_ArrayForEach(h, arr)
        if (cJSON_IsString(h) && r->heading_path)
            r->heading_path[r->depth++] = kb_strdup(h->valuestring);
    cJSON_Delete(arr);
    if (!r->source || !r->title || !r->path || !r->url || !r->text ||
        !r->version || !r->heading_path)
        return KB_ERR_NOMEM;
    return KB_OK;
}

/* Fills r from the chunk's row; the section key is its heading path, sh
 * the word pairs of its whole text. */
static kb_rc hydrate(kb_store *store, sqlite3_stmt *st, int64_t id,
                     const kb_query_opts *opts, kb_result *r, int64_t *doc_id,
                     char **heading_key, kb_shingles *sh, kb_err *err)
{
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, id);
    int step = sqlite3_step(st);
    if (step == SQLITE_DONE)   /* found by an index the KB no longer matches */
        return kb_err_set(err, KB_ERR_NOTFOUND, "chunk %lld was found but is not "
                          "in the KB; run 'kb ingest'", (long long)id);
    if (step != SQLITE_ROW)
        return kb_store_db_error(store, err, "read a chunk");
    if (kb_result_from_row(st, r) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    *doc_id = sqlite3_column_int64(st, KB_RESULT_NCOLUMNS);
    *heading_key = kb_strdup((const char *)sqlite3_column_text(st, 3));
    if (kb_shingles_make(r->text, sh) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (opts->snippet) {
        char *snip = make_snippet(r->text, opts->text, 320);
        free(r->text);
        r->text = snip;
    }
    if (!r->text || !*heading_key)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return KB_OK;
}

/* Lists r under shown, near-identical to it (r is emptied): what names
 * and cites it, not its text. */
static kb_rc add_similar(kb_result *shown, kb_result *r)
{
    if (shown->nsimilar == SIMILAR_MAX)
        return KB_OK;   /* the caller frees r */
    if (!shown->similar &&
        !(shown->similar = calloc(SIMILAR_MAX, sizeof *shown->similar)))
        return KB_ERR_NOMEM;
    free(r->text);
    r->text = kb_strdup("");
    shown->similar[shown->nsimilar++] = *r;
    memset(r, 0, sizeof *r);
    return shown->similar[shown->nsimilar - 1].text ? KB_OK : KB_ERR_NOMEM;
}

/* Gives result r its rank and hit h's scores and places in the lists. */
static void place(kb_result *r, const kb_hit *h, int rank)
{
    r->rank = rank;
    r->score = h->score;
    r->lexical_rank = h->lex_rank;
    r->lexical_score = h->lex_score;
    r->vector_rank = h->vec_rank;
    r->vector_score = h->vec_score;
}

/* r's heading path under its skill's title: "NAME (STATUS, SPEEDUPx)",
 * then the chunk's own place ("kernel.cu > tma_load"; a SKILL.md's
 * section). */
static kb_rc retitle(kb_result *r, const kb_skill_info *s)
{
    if (!s->title)
        return KB_OK;
    size_t skip = r->depth && strcmp(r->heading_path[0], s->title) == 0;
    char **hp = calloc(r->depth - skip + 1, sizeof *hp);
    if (!hp || !(hp[0] = kb_strdup(s->title))) {
        free(hp);
        return KB_ERR_NOMEM;
    }
    for (size_t i = skip; i < r->depth; i++)
        hp[i - skip + 1] = r->heading_path[i];
    if (skip)
        free(r->heading_path[0]);
    free(r->heading_path);
    r->heading_path = hp;
    r->depth = r->depth - skip + 1;
    return KB_OK;
}

/* The skills apart (kb_results.skills): the skills' fused hits, one a
 * skill, verified and approved ones first, then drafts, each group best
 * first; retired skills are left out (a --kind skill or --source
 * filter ranks them with the rest). At most KB_QUERY_SKILLS and at most
 * k, each its best chunk as a snippet, titled by its skill. */
static kb_rc build_skills(kb_store *store, const kb_query_opts *opts, const kb_hits *fused,
                          const kb_skill_chunks *sc, kb_results *out, kb_err *err)
{
    if (!fused->n)
        return KB_OK;
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "SELECT " KB_RESULT_COLUMNS ", c.document_id"
                                " FROM " KB_RESULT_TABLES " WHERE c.id = ?", &st, err);
    const kb_skill_info *shown[KB_QUERY_SKILLS];
    if (rc == KB_OK && !(out->skills = calloc(KB_QUERY_SKILLS, sizeof *out->skills)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    size_t most = opts->k > 0 && opts->k < KB_QUERY_SKILLS ? (size_t)opts->k : KB_QUERY_SKILLS;
    for (int status = KB_SKILLS_FIRST; status < KB_SKILLS_RETIRED; status++)
        for (size_t i = 0; rc == KB_OK && i < fused->n && out->nskills < most; i++) {
            const kb_hit *h = &fused->items[i];
            const kb_skill_info *s = kb_skill_of(sc, h->id);
            int seen = !s || s->status != status;   /* or shown, by a better chunk */
            for (size_t j = 0; j < out->nskills && !seen; j++)
                seen = shown[j] == s;
            if (seen)
                continue;
            kb_result r = { 0 };
            int64_t doc_id = 0;
            char *key = NULL;
            kb_shingles sh = { 0 };
            kb_query_opts snip = *opts;
            snip.snippet = 1;   /* a pointer to the skill: skill_get has the whole */
            rc = hydrate(store, st, h->id, &snip, &r, &doc_id, &key, &sh, err);
            free(key);
            kb_shingles_release(&sh);
            if (rc == KB_OK && retitle(&r, s) != KB_OK)
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            if (rc != KB_OK) {
                kb_result_release(&r);
                break;
            }
            place(&r, h, (int)out->nskills + 1);
            shown[out->nskills] = s;
            out->skills[out->nskills++] = r;
        }
    sqlite3_finalize(st);
    return rc;
}

/* The results shown so far, by build_results: each one's document, its
 * unit (unit_key), section key and word pairs. */
typedef struct {
    int64_t *docs;
    char **units;
    char **keys;
    kb_shingles *shown;
} shown_set;

/* The unit of result r that the top places take few of: its chapter for
 * a source of one document (the literature list, a guide), else its
 * document, from the row of st (column KB_RESULT_NCOLUMNS + 1: one
 * document; + 2: its path). Its folder instead (a CUDA sample's README
 * and sources as one) gave hybrid nDCG@10 0.787 / 0.713 on dev / dev2
 * against 0.784 / 0.715, lexical 0.813 / 0.654 against 0.805 / 0.654:
 * dev2 lost. NULL when out of memory. */
static char *unit_key(sqlite3_stmt *st, const kb_result *r)
{
    kb_buf u;
    kb_buf_init(&u, 0);
    kb_rc rc = sqlite3_column_int(st, KB_RESULT_NCOLUMNS + 1)
        ? kb_buf_printf(&u, "%s\n#%s", r->source, r->depth ? r->heading_path[0] : "")
        : kb_buf_printf(&u, "%s\n/%s", r->source,
                        (const char *)sqlite3_column_text(st, KB_RESULT_NCOLUMNS + 2));
    return kb_buf_finish(&u, rc);
}

/* The query names a document or chapter titled title: it holds the title
 * (less a leading "NVIDIA ", "CUDA C++ " or section number), any case
 * ("Hopper Tuning Guide", "transpose.cu", "Memory Optimizations"). */
static int names_document(const char *query, const char *title)
{
    title += strspn(title, "0123456789. ");
    static const char *const prefixes[] = { "NVIDIA ", "CUDA C++ " };
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (strncmp(title, prefixes[i], strlen(prefixes[i])) == 0)
            title += strlen(prefixes[i]);
    return *title && strcasestr(query, title) != NULL;
}

/* What build_results does with a hydrated candidate. */
enum { TAKE, DROP, DEFER };

/* Whether candidate r (document doc_id, section key, word pairs sh) is
 * shown: DROP when its section is shown already, or its text is
 * near-identical to a shown one's (then listed with it, unless
 * backfilling), or its document has PER_DOCUMENT_CAP results (unless
 * backfilling); DEFER when its unit has TOP_UNIT_CAP of the first
 * TOP_PLACES (deferrable: not backfilling nor deferred already) and
 * the query names neither its document nor its chapter. */
static int admit(kb_results *out, const shown_set *s, kb_result *r, int64_t doc_id,
                 const char *key, const char *unit_of, const kb_shingles *sh,
                 int backfill, int deferrable, const char *query, kb_rc *rc)
{
    size_t same_doc = 0, unit = 0, like = out->n;
    for (size_t j = 0; j < out->n; j++) {
        if (s->docs[j] == doc_id && strcmp(s->keys[j], key) == 0)
            return DROP;
        same_doc += s->docs[j] == doc_id;
        unit += j < TOP_PLACES && strcmp(s->units[j], unit_of) == 0;
        if (like == out->n && kb_shingles_jaccard(sh, &s->shown[j]) >= NEAR_IDENTICAL)
            like = j;
    }
    if (like < out->n) {   /* listed with the first pass's result */
        if (!backfill && add_similar(&out->items[like], r) != KB_OK)
            *rc = KB_ERR_NOMEM;
        return DROP;
    }
    if (same_doc >= PER_DOCUMENT_CAP && !backfill)
        return DROP;
    if (deferrable && out->n < TOP_PLACES && unit >= TOP_UNIT_CAP &&
        !names_document(query, r->title) &&
        !names_document(query, r->depth ? r->heading_path[0] : ""))
        return DEFER;
    return TAKE;
}

/* Turns a fused, ordered candidate list into results: hydrated, with
 * chunks of a section already shown merged into the first, chunks whose
 * text is near-identical to a shown one's listed with it, no unit more
 * than TOP_UNIT_CAP times in the first TOP_PLACES when top_cap (the candidates
 * deferred go first after them), cut at k. *backfilled says whether the
 * per-document cap left the list short. */
static kb_rc build_results(kb_store *store, const kb_query_opts *opts,
                           const kb_hits *fused, size_t k, int top_cap,
                           kb_results *out, int *backfilled, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "SELECT " KB_RESULT_COLUMNS ", c.document_id,"
        " (SELECT count(*) = 1 FROM documents o WHERE o.source_id = d.source_id),"
        " d.path"
        " FROM " KB_RESULT_TABLES " WHERE c.id = ?",
        &st, err);
    if (rc != KB_OK)
        return rc;
    out->items = calloc(k, sizeof *out->items);
    shown_set s = { calloc(k, sizeof *s.docs), calloc(k, sizeof *s.units),
                    calloc(k, sizeof *s.keys), calloc(k, sizeof *s.shown) };
    size_t *deferred = calloc(fused->n + 1, sizeof *deferred), nd = 0, dpos = 0;
    if (!out->items || !s.docs || !s.units || !s.keys || !s.shown || !deferred) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* two passes over the list: the first keeps the per-document cap, the
     * second (rarely reached) fills up what the cap left short */
    for (size_t step = 0; out->n < k;) {
        int backfill = 0, from_deferred = dpos < nd &&
                       (out->n >= TOP_PLACES || step >= fused->n);
        size_t i;
        if (from_deferred)
            i = deferred[dpos++];
        else if (step < 2 * fused->n)
            backfill = step >= fused->n, i = step++ % fused->n;
        else
            break;
        kb_result r = { 0 };
        int64_t doc_id = 0;
        char *key = NULL;
        kb_shingles sh = { 0 };
        char *unit = NULL;
        rc = hydrate(store, st, fused->items[i].id, opts, &r, &doc_id, &key, &sh, err);
        if (rc == KB_OK && !(unit = unit_key(st, &r)))
            rc = KB_ERR_NOMEM;
        int verdict = rc != KB_OK ? DROP
                      : admit(out, &s, &r, doc_id, key, unit, &sh, backfill,
                              top_cap && !backfill && !from_deferred, opts->text, &rc);
        if (verdict == DEFER)
            deferred[nd++] = i;
        if (verdict != TAKE) {   /* the section is already shown, by a better chunk */
            kb_result_release(&r);
            free(key);
            free(unit);
            kb_shingles_release(&sh);
            if (rc != KB_OK)
                goto out;
            continue;
        }
        *backfilled |= backfill;
        place(&r, &fused->items[i], (int)out->n + 1);
        s.docs[out->n] = doc_id;
        s.units[out->n] = unit;
        s.keys[out->n] = key;
        s.shown[out->n] = sh;
        out->items[out->n++] = r;
    }
out:
    if (rc == KB_ERR_NOMEM && !err->msg[0])
        kb_err_set(err, rc, "out of memory");
    for (size_t j = 0; s.keys && j < out->n; j++) {
        free(s.keys[j]);
        free(s.units[j]);
        kb_shingles_release(&s.shown[j]);
    }
    free(s.keys);
    free(s.shown);
    free(s.docs);
    free(s.units);
    free(deferred);
    sqlite3_finalize(st);
    return rc;
}

/* The texts of the vector lists, embedded in one batch on a thread of its
 * own while the lexical search runs: on two cores hybrid costs the slower
 * of the two, not their sum. */
typedef struct {
    kb_embedder *emb;
    const char *texts[KB_QUERY_MAX_LISTS];
    size_t n;
    float *q;              /* n rows of the embedder's dimension */
    kb_rc rc;
    kb_err err;
    double ms;
} embed_job;

static void *embed_query(void *arg)
{
    embed_job *job = arg;
    double t0 = kb_now_ms();
    job->rc = kb_embedder_embed_queries(job->emb, job->texts, job->n, job->q, &job->err);
    job->ms = kb_now_ms() - t0;
    return NULL;
}

/* The store's slot for the default embedder, opened on the first query
 * that needs one and kept while the store is open. */
#define EMBEDDER_SLOT "query/embedder"

static void embedder_free(void *p)
{
    kb_embedder_free(p);
}

/* The embedder to use: the caller's, else the store's default one, opened
 * from the configuration on first use. */
static kb_rc query_embedder(kb_store *store, const kb_config *cfg,
                            kb_embedder **emb, kb_err *err)
{
    if (*emb)
        return KB_OK;
    kb_embedder *e = kb_store_slot_get(store, EMBEDDER_SLOT);
    if (!e) {
        if (!cfg)
            return kb_err_set(err, KB_ERR_INTERNAL, "a vector search needs an "
                              "embedder or a configuration to open one");
        kb_rc rc = kb_embedder_open_config(cfg, &e, err);
        if (rc == KB_OK)
            rc = kb_store_slot_set(store, EMBEDDER_SLOT, e, embedder_free, err);
        if (rc != KB_OK)
            return rc;
    }
    *emb = e;
    return KB_OK;
}

/* One query's working state, across its passes. */
typedef struct {
    kb_store *store;
    const kb_query_opts *opts;
    kb_embedder *emb;          /* NULL without a vector list */
    kb_query_list lists[KB_QUERY_MAX_LISTS];
    size_t nlists;
    kb_hits fused;
    embed_job job;             /* the vector lists' texts, on their own thread */
    pthread_t thread;
    int threaded;
    size_t depth;              /* of each candidate list */
    kb_rerank_kind rerank;     /* the stage, resolved */
    const char *question;      /* as asked: opts->text is what is searched */
    /* the llm stage's verdict on the first pass: what it did and the
     * sections it put first, in its order, for a second pass to reuse */
    int llm_done;
    kb_rerank_info llm;
    kb_hits llm_first;
    size_t pool;               /* results ranked before the cut at k */
} query_run;

static void add_list(query_run *q, int vector, const char *text)
{
    kb_query_list *l = &q->lists[q->nlists++];
    l->vector = vector;
    l->text = text;
    l->search = 1;
    if (vector) {
        l->row = q->job.n;
        q->job.texts[q->job.n++] = text;
    }
}

/* Decides the candidate lists - the query's own, by its mode, then its
 * sub-queries - and starts embedding the vector lists' texts beside the
 * lexical search. A KB without vectors answers lexically: its vector
 * lists are dropped (out->mode says lexical for hybrid), except in vector
 * mode, which is an error there. */
static kb_rc plan_lists(query_run *q, kb_results *out, kb_err *err)
{
    const kb_query_opts *opts = q->opts;
    int want_vec = opts->mode != KB_MODE_LEXICAL;
    for (size_t i = 0; i < opts->nsearches; i++)
        want_vec |= opts->searches[i].type != KB_SEARCH_LEX;
    if (want_vec && !kb_vec_any(q->store)) {
        if (opts->mode == KB_MODE_VECTOR)
            return kb_err_set(err, KB_ERR_NOTFOUND, "this KB has no vectors; run "
                              "'kb ingest' without --no-embed, or use --mode lexical");
        want_vec = 0;
        if (opts->mode == KB_MODE_HYBRID)
            out->mode = KB_MODE_LEXICAL;
    }
    if (want_vec) {
        /* no model installed: the default mode answers lexically and says
         * why; only an explicit vector search fails */
        kb_err merr;
        kb_err_clear(&merr);
        kb_rc rc = query_embedder(q->store, opts->config, &q->emb, &merr);
        if (rc == KB_ERR_MODEL && opts->mode != KB_MODE_VECTOR) {
            kb_log_warn("answering lexically: %s", merr.msg);
            want_vec = 0;
            q->emb = NULL;
            if (opts->mode == KB_MODE_HYBRID)
                out->mode = KB_MODE_LEXICAL;
        } else if (rc != KB_OK) {
            return kb_err_set(err, rc, "%s", merr.msg);
        }
    }
    if (opts->mode != KB_MODE_VECTOR)
        add_list(q, 0, opts->text);
    if (opts->mode != KB_MODE_LEXICAL && want_vec)
        add_list(q, 1, opts->text);
    for (size_t i = 0; i < opts->nsearches; i++) {
        int vector = opts->searches[i].type != KB_SEARCH_LEX;
        if (!vector || want_vec)
            add_list(q, vector, opts->searches[i].text);
    }
    if (!want_vec)
        return KB_OK;
    kb_rc rc = kb_vec_check_embedder(q->store, q->emb, 0, err);
    if (rc != KB_OK)
        return rc;
    q->job.emb = q->emb;
    q->job.q = malloc(q->job.n * (size_t)kb_embedder_dim(q->emb) * sizeof *q->job.q);
    if (!q->job.q)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_err_clear(&q->job.err);
    q->threaded = pthread_create(&q->thread, NULL, embed_query, &q->job) == 0;
    if (!q->threaded)
        embed_query(&q->job);
    return KB_OK;
}

/* Fills the candidate lists to be searched in this pass (the embeddings
 * joined on the first pass), each q->depth deep. */
static kb_rc search_lists(query_run *q, int pass, kb_results *out, kb_err *err)
{
    kb_rc rc = KB_OK;
    double t1 = kb_now_ms();
    int searched = 0;
    for (size_t l = 0; rc == KB_OK && l < q->nlists; l++) {
        kb_query_list *list = &q->lists[l];
        if (list->vector || !list->search)
            continue;
        rc = kb_fts_search(q->store, list->text, &q->opts->filter, q->depth,
                           &list->hits, err);
        searched = 1;
    }
    if (searched)
        out->lexical_ms += kb_now_ms() - t1;
    if (q->threaded) {
        pthread_join(q->thread, NULL);
        q->threaded = 0;
    }
    if (pass == 0) {   /* the embeddings, made beside the search */
        out->embed_ms = q->job.ms;
        if (rc == KB_OK && q->job.n && (rc = q->job.rc) != KB_OK)
            kb_err_set(err, rc, "%s", q->job.err.msg);
    }
    t1 = kb_now_ms();
    searched = 0;
    int dim = q->emb ? kb_embedder_dim(q->emb) : 0;
    for (size_t l = 0; rc == KB_OK && l < q->nlists; l++) {
        kb_query_list *list = &q->lists[l];
        if (!list->vector || !list->search)
            continue;
        rc = kb_vec_search(q->store, q->job.q + list->row * (size_t)dim, dim,
                           q->depth, &q->opts->filter, &list->hits, err);
        for (size_t i = 0; rc == KB_OK && i < list->hits.n; i++) {
            list->hits.items[i].vec_rank = (int)i + 1;
            list->hits.items[i].vec_score = list->hits.items[i].score;
        }
        searched = 1;
    }
    if (searched)
        out->vector_ms += kb_now_ms() - t1;
    return rc;
}

/* Splits lists into the skills' hits (skills) and the rest (docs), copies
 * in the same order, so that skills neither take the documentation's
 * places in fusion and reranking nor lose their own. */
static kb_rc split_skills(const kb_query_list *lists, size_t n, const kb_skill_chunks *sc,
                          kb_query_list *docs, kb_query_list *skills, kb_err *err)
{
    for (size_t l = 0; l < n; l++) {
        docs[l] = skills[l] = lists[l];
        memset(&docs[l].hits, 0, sizeof docs[l].hits);
        memset(&skills[l].hits, 0, sizeof skills[l].hits);
        for (size_t i = 0; i < lists[l].hits.n; i++) {
            const kb_hit *h = &lists[l].hits.items[i];
            kb_hits *to = kb_skill_of(sc, h->id) ? &skills[l].hits : &docs[l].hits;
            if (kb_hits_push(to, h->id, h->score) != KB_OK)
                return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            to->items[to->n - 1] = *h;
        }
    }
    return KB_OK;
}

/* The llm stage: one request a query. A second pass (deeper lists, a
 * pool that may differ past its top places) puts the sections the first
 * pass's reply named first again, in its order, without asking again. */
static kb_rc llm_stage(query_run *q, kb_results *out, kb_err *err)
{
    if (q->llm_done) {
        out->rerank = q->llm;
        if (kb_rerank_llm_again(&q->fused, &q->llm_first) != KB_OK)
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        return KB_OK;
    }
    kb_rc rc = kb_rerank_llm(q->store, q->opts->config, q->opts->llm, q->question,
                             &q->fused, KB_RERANK_LLM_TOP, &out->rerank, err);
    q->llm = out->rerank;
    q->llm_done = rc == KB_OK;
    for (size_t i = 0; rc == KB_OK && i < out->rerank.ordered; i++)
        if (kb_hits_push(&q->llm_first, q->fused.items[i].id, 0) != KB_OK)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return rc;
}

/* The results of the one list, or of all of them fused: the first
 * q->pool, by which the per-document cap decides *backfilled. */
static kb_rc rank_results(query_run *q, kb_results *out, int *backfilled,
                          kb_err *err)
{
    double t1 = kb_now_ms();
    kb_rc rc = KB_OK;
    /* with no filter, the skills' hits are ranked apart (kb_results.skills) */
    int apart = q->opts->filter.nsources == 0 && q->opts->filter.kinds == 0;
    kb_query_list docs[KB_QUERY_MAX_LISTS], skills[KB_QUERY_MAX_LISTS];
    const kb_skill_chunks *sc = NULL;
    kb_hits fused_skills = { 0 };
    const kb_query_list *lists = q->lists;
    if (apart) {
        memset(docs, 0, sizeof docs);
        memset(skills, 0, sizeof skills);
        rc = kb_skill_chunks_get(q->store, &sc, err);
        if (rc == KB_OK)
            rc = split_skills(q->lists, q->nlists, sc, docs, skills, err);
        lists = docs;
    }
    const kb_hits *list = &lists[0].hits;
    kb_hits_release(&q->fused);
    if (rc == KB_OK && q->nlists > 0) {   /* sections, one list or several fused */
        rc = kb_fuse_rrf(q->store, lists, q->nlists, &q->fused, err);
        list = &q->fused;
    }
    /* hybrid's own two lists, reranked */
    memset(&out->rerank, 0, sizeof out->rerank);
    out->rerank.stage = KB_RERANK_NONE;
    if (rc == KB_OK && q->nlists > 1 && q->rerank != KB_RERANK_NONE &&
        !lists[0].vector && lists[1].vector) {
        int dim = kb_embedder_dim(q->emb);
        rc = kb_rerank_local(q->store, q->opts->text,
                             q->job.q + lists[1].row * (size_t)dim, dim,
                             &lists[0].hits, &lists[1].hits, &q->fused,
                             (KB_RRF_K + 1) / (1 + KB_RRF_VECTOR_WEIGHT),
                             q->opts->trace, q->opts->trace_ctx, err);
        out->rerank.stage = KB_RERANK_LOCAL;
        if (rc == KB_OK && q->rerank == KB_RERANK_LOCAL && q->opts->config &&
            q->opts->config->rerank_url && *q->opts->config->rerank_url) {
            rc = kb_rerank_remote(q->store, q->opts->config, q->opts->text,
                                  &q->fused, RERANK_REMOTE_TOP, err);
            out->rerank.remote = 1;
        }
    }
    /* the LLM reads the best sections of whatever list there is */
    if (rc == KB_OK && q->nlists > 0 && q->rerank == KB_RERANK_LLM)
        rc = llm_stage(q, out, err);
    if (rc == KB_OK)
        rc = build_results(q->store, q->opts, list, q->pool,
                           /* an LLM that read the sections ordered them: its
                              order stands, no unit cap over the top 5 */
                           !(out->rerank.stage == KB_RERANK_LLM && out->rerank.ordered),
                           out, backfilled, err);
    if (rc == KB_OK && apart && q->nlists > 0)
        rc = kb_fuse_rrf(q->store, skills, q->nlists, &fused_skills, err);
    if (rc == KB_OK && apart)
        rc = build_skills(q->store, q->opts, &fused_skills, sc, out, err);
    for (size_t l = 0; apart && l < q->nlists; l++) {
        kb_hits_release(&docs[l].hits);
        kb_hits_release(&skills[l].hits);
    }
    kb_hits_release(&fused_skills);
    out->results_ms += kb_now_ms() - t1;
    return rc;
}

static kb_rc check_opts(const kb_query_opts *opts, kb_err *err)
{
    if (!opts->text || !*opts->text)
        return kb_err_set(err, KB_ERR_USAGE, "empty query");
    if (opts->nsearches > KB_QUERY_MAX_SEARCHES)
        return kb_err_set(err, KB_ERR_USAGE, "%zu sub-queries; at most %d",
                          opts->nsearches, KB_QUERY_MAX_SEARCHES);
    for (size_t i = 0; i < opts->nsearches; i++)
        if (!opts->searches[i].text || !*opts->searches[i].text)
            return kb_err_set(err, KB_ERR_USAGE, "sub-query %zu is empty", i + 1);
    return KB_OK;
}

kb_rc kb_query_check_sources(kb_store *store, const kb_filter *f, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < f->nsources && rc == KB_OK; i++) {
        if (!st && (rc = kb_store_prepare(store, "SELECT 1 FROM sources WHERE id = ?",
                                          &st, err)) != KB_OK)
            break;
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, f->sources[i], -1, SQLITE_STATIC);
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW)
            continue;
        if (step != SQLITE_DONE) {
            rc = kb_store_db_error(store, err, "look up a source");
            break;
        }
        sqlite3_stmt *all = NULL;
        kb_buf known;
        kb_buf_init(&known, 8192);
        rc = kb_store_prepare(store, "SELECT id FROM sources ORDER BY id", &all, err);
        size_t n = 0;
        while (rc == KB_OK && sqlite3_step(all) == SQLITE_ROW)
            if (kb_buf_printf(&known, "%s%s", n++ ? ", " : "",
                              (const char *)sqlite3_column_text(all, 0)) != KB_OK)
                break;
        sqlite3_finalize(all);
        if (rc == KB_OK)
            rc = kb_err_set(err, KB_ERR_USAGE, "unknown source '%s' (the KB has: %s)",
                            f->sources[i], n ? known.data : "none");
        kb_buf_release(&known);
    }
    sqlite3_finalize(st);
    return rc;
}

kb_rc kb_query_run(kb_store *store, kb_embedder *emb, const kb_query_opts *opts,
                   kb_results *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    out->mode = opts->mode;
    double t0 = kb_now_ms();
    size_t k = opts->k > 0 ? (size_t)opts->k : 10;
    size_t deep = k > POOL_RESULTS ? k : POOL_RESULTS;
    /* deep enough that section merging still leaves the pool's results */
    query_run q = { .store = store, .opts = opts, .emb = emb, .depth = deep * 4 + 40,
                    .pool = k, .question = opts->text };
    /* code is searched by its identifiers, never by its licence */
    kb_query_opts searched = *opts;
    kb_buf code;
    kb_buf_init(&code, 0);
    int rewritten = 0;
    kb_rc rc = check_opts(opts, err);
    if (rc == KB_OK && kb_query_code_text(opts->text, &code, &rewritten) != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rewritten) {
        searched.text = code.data;
        q.opts = opts = &searched;
    }
    if (rc == KB_OK)
        rc = kb_query_rerank_resolve(opts->config, opts->no_rerank ? KB_RERANK_NONE
                                                                   : opts->rerank,
                                     opts->llm, &q.rerank, err);
    if (rc == KB_OK)
        rc = kb_query_check_sources(store, &opts->filter, err);
    if (rc != KB_OK) {
        kb_buf_release(&code);
        return rc;
    }
    /* blanks, or punctuation alone, are nothing to search for: no results,
     * rather than whatever the vectors lie nearest to (the CLI refuses them) */
    if (!kb_query_has_words(opts->text)) {
        out->took_ms = kb_now_ms() - t0;
        kb_buf_release(&code);
        return KB_OK;
    }
    /* one read transaction: every statement below sees the same snapshot,
     * so an ingest committing meanwhile cannot remove a chunk between the
     * search and reading its row */
    if ((rc = kb_store_exec(store, "SAVEPOINT query", err)) != KB_OK)
        return rc;
    if ((rc = plan_lists(&q, out, err)) != KB_OK)
        goto out;
    /* Usually one pass. When the per-document cap leaves the results short
     * of a k over POOL_RESULTS (one long document fills the candidate
     * lists), a second pass searches the lists cut at their depth four
     * times deeper, so other documents' sections fill the freed places. */
    for (int pass = 0;; pass++) {
        int backfilled = 0, more = 0;
        rc = search_lists(&q, pass, out, err);
        if (rc == KB_OK)
            rc = rank_results(&q, out, &backfilled, err);
        for (size_t l = 0; l < q.nlists; l++) {   /* cut: there is more */
            q.lists[l].search = q.lists[l].search && q.lists[l].hits.n >= q.depth;
            more |= q.lists[l].search;
        }
        if (rc != KB_OK || !backfilled || pass == 1 || !more || k <= POOL_RESULTS)
            break;
        kb_results_clear(out);
        for (size_t l = 0; l < q.nlists; l++)
            if (q.lists[l].search)
                kb_hits_release(&q.lists[l].hits);
        q.depth *= 4;
    }
out:
    if (q.threaded)   /* an error before the first pass joined it */
        pthread_join(q.thread, NULL);
    sqlite3_exec(store->db, "RELEASE query", NULL, NULL, NULL);
    free(q.job.q);
    for (size_t l = 0; l < q.nlists; l++)
        kb_hits_release(&q.lists[l].hits);
    kb_hits_release(&q.fused);
    kb_hits_release(&q.llm_first);
    kb_buf_release(&code);
    out->took_ms = kb_now_ms() - t0;
    if (rc != KB_OK)
        kb_results_release(out);
    return rc;
}
