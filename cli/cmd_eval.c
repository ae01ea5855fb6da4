/* cmd_eval.c - kb eval: runs a qrels file's queries through kb_query_run in
 * each retrieval mode and reports nDCG, Recall, Success and MRR at k
 * (index/index.h has the match rule and the metrics). */
#include "cli/cli.h"
#include "index/index.h"
#include "query/query_int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOP_SHOWN 3   /* results per query that --verbose shows */

typedef struct {
    char *source, *heading, *path;
    int relevant;
} shown_result;

/* One query's outcome in one mode. */
typedef struct {
    kb_eval_scores s;
    double took_ms;
    char *error;                 /* a per-query failure, else NULL */
    shown_result top[TOP_SHOWN];
    size_t ntop;
    cJSON *expansion;            /* --expand --verbose: what was searched */
    kb_rerank_info rerank;       /* what the reranking stage did */
} query_run;

typedef struct {
    const char *name;
    kb_mode mode;
    kb_rerank_kind rerank;       /* the stage its queries run */
    int wanted;
    int available;               /* ran; 0 with err set when it could not */
    kb_err err;
    query_run *runs;             /* one per query */
    size_t nerrors;
    double took_ms_mean;         /* over the queries that ran */
    kb_eval_summary sum;
    /* --expand: queries expanded, from the cache, searched alone; the
     * LLM's requests and their time */
    size_t expanded, cached, unexpanded, llm_calls;
    double llm_ms_sum;
    /* the llm reranking stage: requests, orders from the cache, queries
     * left in kb's own order, the requests' time */
    size_t rr_requests, rr_cached, rr_fallbacks;
    double rr_ms_sum;
} mode_run;

typedef struct {
    const char *qrels_path;
    int k, json, verbose, expand;
    kb_rerank_kind rerank;       /* --rerank, DEFAULT when not given */
    const char *features_path;   /* --features: the reranker's pool, dumped */
} eval_opts;

/* --features: each hybrid query's reranked pool, one JSON line per query
 * ({"id","set","judgments","pool":[{"doc","id":chunk,"match":[judgment
 * indices],"f":[features]}]}), what scripts/fit-rerank.py fits weights on. */
typedef struct {
    FILE *out;
    kb_store *store;
    const kb_eval_query *q;
    cJSON *pool;
    kb_rc rc;
} feature_dump;

static void dump_candidate(void *ctx, int64_t chunk_id, const double *f,
                           size_t n)
{
    feature_dump *d = ctx;
    if (d->rc != KB_OK)
        return;
    kb_result r;
    int64_t doc_id;
    kb_err e;
    kb_err_clear(&e);
    kb_rc rc = kb_get_chunk_doc(d->store, chunk_id, &r, &doc_id, &e);
    if (rc != KB_OK) {
        kb_result_release(&r);
        d->rc = rc;
        return;
    }
    cJSON *c = cJSON_CreateObject();
    cJSON *m = c ? cJSON_AddArrayToObject(c, "match") : NULL;
    cJSON *fa = m ? cJSON_AddArrayToObject(c, "f") : NULL;
    if (!fa || !cJSON_AddItemToArray(d->pool, c) ||
        !cJSON_AddNumberToObject(c, "doc", (double)doc_id) ||
        !cJSON_AddNumberToObject(c, "id", (double)chunk_id))
        d->rc = KB_ERR_NOMEM;
    for (size_t j = 0; d->rc == KB_OK && j < d->q->nrel; j++)
        if (kb_eval_judgment_matches(&d->q->rel[j], &r) &&
            !cJSON_AddItemToArray(m, cJSON_CreateNumber((double)j)))
            d->rc = KB_ERR_NOMEM;
    for (size_t i = 0; d->rc == KB_OK && i < n; i++)
        if (!cJSON_AddItemToArray(fa, cJSON_CreateNumber(round(f[i] * 1e6) / 1e6)))
            d->rc = KB_ERR_NOMEM;
    kb_result_release(&r);
}

static void query_run_release(query_run *r)
{
    free(r->error);
    cJSON_Delete(r->expansion);
    for (size_t i = 0; i < r->ntop; i++) {
        free(r->top[i].source);
        free(r->top[i].heading);
        free(r->top[i].path);
    }
}

static void mode_run_release(mode_run *m, size_t nq)
{
    if (m->runs)
        for (size_t i = 0; i < nq; i++)
            query_run_release(&m->runs[i]);
    free(m->runs);
    m->runs = NULL;
    kb_eval_summary_release(&m->sum);
}

/* An error kb_query_run gives for this query alone (its text), after which
 * the mode's other queries still run; any other error means the KB cannot
 * serve the mode at all. */
static int per_query_error(kb_rc rc)
{
    return rc == KB_ERR_USAGE || rc == KB_ERR_PARSE;
}

static kb_rc keep_top(const kb_eval_query *q, const kb_results *res,
                      query_run *run)
{
    for (size_t i = 0; i < res->n && i < TOP_SHOWN; i++) {
        const kb_result *r = &res->items[i];
        shown_result *t = &run->top[run->ntop++];
        const char *h = r->depth && r->heading_path && r->heading_path[r->depth - 1]
            ? r->heading_path[r->depth - 1] : "";
        t->source = kb_strdup(r->source ? r->source : "");
        t->heading = kb_strdup(h);
        t->path = kb_strdup(r->path ? r->path : "");
        t->relevant = kb_eval_result_relevant(q, r);
        if (!t->source || !t->heading || !t->path)
            return KB_ERR_NOMEM;
    }
    return KB_OK;
}

/* --expand: expands q's text through the LLM (or the KB's cache) into x,
 * points qo at the searches it makes, and counts it in m. */
static kb_rc expand_query(kb_store *store, const kb_cli *cli,
                          const eval_opts *o, const char *text, mode_run *m,
                          query_run *run, kb_expansion *x, kb_search *searches,
                          kb_query_opts *qo, kb_err *err)
{
    kb_rc rc = kb_query_expand(store, cli->config, text, x, err);
    if (rc != KB_OK)
        return rc;
    qo->searches = searches;
    kb_expansion_apply(x, searches, &qo->nsearches);
    m->expanded += x->n > 0;
    m->cached += x->cached;
    m->unexpanded += x->n == 0;
    m->llm_calls += !x->cached;
    m->llm_ms_sum += x->llm_ms;
    if (o->verbose && !(run->expansion = kb_expansion_json(x)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return rc;
}

/* --features: writes q's line (its reranked pool, gathered by
 * dump_candidate) and empties the pool. */
static kb_rc dump_pool(feature_dump *dump, const eval_opts *o,
                       const kb_eval_query *q, kb_err *err)
{
    cJSON *line = cJSON_CreateObject();
    char *text = NULL;
    int ok = line && cJSON_AddStringToObject(line, "id", q->id) &&
             cJSON_AddStringToObject(line, "set", o->qrels_path) &&
             cJSON_AddNumberToObject(line, "judgments", (double)q->nrel);
    /* the pool belongs to line once added, else it is freed here */
    if (ok && dump->pool && cJSON_AddItemToObject(line, "pool", dump->pool))
        dump->pool = NULL;
    else
        ok = 0;
    cJSON_Delete(dump->pool);
    if (!ok || !(text = cJSON_PrintUnformatted(line)))
        dump->rc = dump->rc != KB_OK ? dump->rc : KB_ERR_NOMEM;
    if (text)
        fprintf(dump->out, "%s\n", text);
    free(text);
    cJSON_Delete(line);
    dump->pool = NULL;
    if (dump->rc != KB_OK)
        return kb_err_set(err, dump->rc, "cannot dump the features of "
                          "query '%s'", q->id);
    return KB_OK;
}

/* The options of q's search in m's mode; with dump, hybrid's reranked
 * pool goes to it. */
static void query_opts(kb_query_opts *qo, const kb_eval_query *q,
                       const mode_run *m, const eval_opts *o,
                       const kb_cli *cli, feature_dump *dump)
{
    kb_query_opts_init(qo);
    qo->text = q->text;
    qo->mode = m->mode;
    qo->rerank = m->rerank;
    qo->k = o->k;
    qo->snippet = 1;
    qo->config = cli->config;   /* a configured reranker takes part */
    if (dump && m->mode == KB_MODE_HYBRID && m->rerank != KB_RERANK_LLM) {
        dump->q = q;
        dump->pool = cJSON_CreateArray();
        qo->trace = dump_candidate;
        qo->trace_ctx = dump;
    }
}

/* The queries of m that failed alone, on stderr (unless --quiet). */
static void report_errors(const kb_eval_qrels *qrels, const mode_run *m,
                          const kb_cli *cli)
{
    for (size_t i = 0; i < qrels->n && !cli->quiet; i++)
        if (m->runs[i].error)
            fprintf(stderr, "kb eval: %s: query '%s': %s\n", m->name,
                    qrels->queries[i].id, m->runs[i].error);
}

/* Keeps what the reranking stage did for a query, and counts the llm
 * stage's requests in m. */
static void count_rerank(mode_run *m, query_run *run, const kb_rerank_info *x)
{
    run->rerank = *x;
    if (x->stage != KB_RERANK_LLM)
        return;
    m->rr_requests += !x->cached && x->pool > 1;
    m->rr_cached += x->cached;
    m->rr_fallbacks += x->fallback[0] != 0;
    m->rr_ms_sum += x->llm_ms;
}

/* Runs every query of qrels in m's mode. Fails only on no memory; a mode
 * the KB cannot serve comes back with m->available 0 and m->err set. */
static kb_rc run_mode(kb_store *store, kb_embedder *emb,
                      const kb_eval_qrels *qrels, const eval_opts *o,
                      const kb_cli *cli, mode_run *m, feature_dump *dump,
                      kb_err *err)
{
    kb_rc rc = KB_OK;
    kb_eval_scores *scores = NULL;
    m->runs = calloc(qrels->n, sizeof *m->runs);
    scores = calloc(qrels->n, sizeof *scores);
    if (!m->runs || !scores) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    double took_sum = 0;
    size_t ran = 0;
    kb_rc first_rc = KB_OK;
    for (size_t i = 0; i < qrels->n; i++) {
        const kb_eval_query *q = &qrels->queries[i];
        query_run *run = &m->runs[i];
        if (cli->progress)
            fprintf(stderr, "\r%s: query %zu/%zu", m->name, i + 1, qrels->n);
        kb_query_opts qo;
        query_opts(&qo, q, m, o, cli, dump);
        kb_results res;
        memset(&res, 0, sizeof res);
        kb_err qerr;
        kb_err_clear(&qerr);
        kb_search searches[KB_QUERY_MAX_SEARCHES];
        kb_expansion x;
        kb_expansion_init(&x);
        if (o->expand)   /* the LLM's time is counted apart from the search's */
            rc = expand_query(store, cli, o, q->text, m, run, &x, searches, &qo,
                              err);
        if (rc != KB_OK) {
            kb_expansion_release(&x);
            goto out;
        }
        double t0 = kb_now_ms();
        kb_rc qrc = kb_query_run(store, emb, &qo, &res, &qerr);
        double took = kb_now_ms() - t0;
        kb_expansion_release(&x);
        if (qo.trace && (rc = dump_pool(dump, o, q, err)) != KB_OK) {
            kb_results_release(&res);
            goto out;
        }
        if (qrc != KB_OK) {
            kb_results_release(&res);
            if (!per_query_error(qrc)) {
                kb_err_set(&m->err, qrc, "%s", qerr.msg[0] ? qerr.msg
                                                          : kb_rc_name(qrc));
                goto out;   /* the mode is unavailable */
            }
            run->error = kb_strdup(qerr.msg[0] ? qerr.msg : kb_rc_name(qrc));
            if (!run->error) {
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                goto out;
            }
            if (!m->nerrors++)
                first_rc = qrc;
            continue;   /* scores stay 0 */
        }
        if (res.mode != m->mode) {
            /* e.g. hybrid on a KB without vectors is lexical: its numbers
             * would be lexical's under another name */
            kb_err_set(&m->err, KB_ERR_NOTFOUND, "the KB answered in %s mode "
                       "instead (no vectors?)", kb_mode_name(res.mode));
            kb_results_release(&res);
            goto out;
        }
        count_rerank(m, run, &res.rerank);
        rc = kb_eval_score(q, res.items, res.n, o->k, &run->s);
        if (rc == KB_OK && o->verbose)
            rc = keep_top(q, &res, run);
        kb_results_release(&res);
        if (rc != KB_OK) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            goto out;
        }
        scores[i] = run->s;
        run->took_ms = took;
        took_sum += took;
        ran++;
    }
    if (ran == 0) {
        /* every query failed: the mode is what failed (a query engine may
         * well say so with a usage error) */
        kb_err_set(&m->err, first_rc, "%s", m->runs[0].error);
        goto out;
    }
    if (cli->progress)
        fprintf(stderr, "\r\033[K");
    report_errors(qrels, m, cli);
    m->took_ms_mean = took_sum / (double)ran;
    rc = kb_eval_summarize(qrels, scores, &m->sum, err);
    if (rc == KB_OK)
        m->available = 1;
out:
    if (cli->progress)
        fprintf(stderr, "\r\033[K");
    free(scores);
    return rc;
}

/* ---------------------------------------------------------------- output */

static void print_row(const char *mode, const char *kind,
                      const kb_eval_mean *mn, double took_ms)
{
    printf("%-8s %-12s %7zu %9.3f %11.3f %12.3f %9.3f", mode, kind, mn->n,
           mn->ndcg, mn->recall, mn->success, mn->mrr);
    if (took_ms >= 0)
        printf(" %10.1f", took_ms);
    printf("\n");
}

static void print_verbose(const kb_eval_qrels *qrels, const mode_run *m)
{
    printf("%s:\n", m->name);
    for (size_t i = 0; i < qrels->n; i++) {
        const kb_eval_query *q = &qrels->queries[i];
        const query_run *r = &m->runs[i];
        if (r->error) {
            printf("  %-6s %-10s error: %s\n", q->id, q->kind, r->error);
            continue;
        }
        char first[16];
        if (r->s.first_rank)
            snprintf(first, sizeof first, "%d", r->s.first_rank);
        else
            snprintf(first, sizeof first, "-");
        printf("  %-6s %-10s nDCG %.3f  recall %.2f  success %d  RR %.3f  "
               "first %s  %.1f ms\n", q->id, q->kind, r->s.ndcg, r->s.recall,
               (int)r->s.success, r->s.mrr, first, r->took_ms);
        if (q->text) {   /* the question, not only its id */
            fputs("         \"", stdout);
            kb_cli_put_safe(stdout, q->text, strlen(q->text));
            fputs("\"\n", stdout);
        }
        for (size_t t = 0; t < r->ntop; t++) {
            const shown_result *s = &r->top[t];
            printf("         %zu %s %s: %s", t + 1, s->relevant ? "*" : " ",
                   s->source, s->heading);
            /* the file matters where the query is judged by paths */
            for (size_t j = 0; j < q->nrel; j++)
                if (q->rel[j].path && *s->path &&
                    strcmp(q->rel[j].source, s->source) == 0) {
                    printf("  [%s]", s->path);
                    break;
                }
            printf("\n");
        }
    }
    printf("\n");
}

static void print_human(const kb_eval_qrels *qrels, const mode_run *modes,
                        size_t nmodes, const eval_opts *o)
{
    if (o->verbose)
        for (size_t i = 0; i < nmodes; i++)
            if (modes[i].wanted && modes[i].available)
                print_verbose(qrels, &modes[i]);
    printf("%zu queries from '%s', k = %d\n\n", qrels->n, o->qrels_path, o->k);
    char h1[16], h2[16], h3[16], h4[16];
    snprintf(h1, sizeof h1, "nDCG@%d", o->k);
    snprintf(h2, sizeof h2, "Recall@%d", o->k);
    snprintf(h3, sizeof h3, "Success@%d", o->k);
    snprintf(h4, sizeof h4, "MRR@%d", o->k);
    printf("%-8s %-12s %7s %9s %11s %12s %9s %10s\n", "mode", "kind", "queries",
           h1, h2, h3, h4, "ms/query");
    for (size_t i = 0; i < nmodes; i++) {
        const mode_run *m = &modes[i];
        if (!m->wanted)
            continue;
        if (!m->available) {
            printf("%-8s unavailable: %s\n", m->name, m->err.msg);
            continue;
        }
        print_row(m->name, "all", &m->sum.overall, m->took_ms_mean);
        for (size_t j = 0; j < m->sum.nkinds; j++)
            print_row("", m->sum.by_kind[j].kind, &m->sum.by_kind[j], -1);
        if (m->nerrors)
            printf("%-8s %zu of %zu queries failed (scored 0)\n", "",
                   m->nerrors, qrels->n);
        if (o->expand)
            printf("%-8s expanded %zu of %zu queries (%zu from the cache), %zu "
                   "searched alone; LLM %.0f ms/request over %zu requests\n", "",
                   m->expanded, qrels->n, m->cached, m->unexpanded,
                   m->llm_calls ? m->llm_ms_sum / (double)m->llm_calls : 0.0,
                   m->llm_calls);
        if (m->rerank == KB_RERANK_LLM)
            printf("%-8s hybrid reordered by the LLM: %zu request%s, %zu from the "
                   "cache, %zu in kb's own order (fallback); LLM %.0f ms/request\n",
                   "", m->rr_requests, m->rr_requests == 1 ? "" : "s", m->rr_cached,
                   m->rr_fallbacks,
                   m->rr_requests ? m->rr_ms_sum / (double)m->rr_requests : 0.0);
    }
}

/* Rounded so the JSON reads well: 6 decimals is far below any difference
 * that matters across 30-query sets. */
static double r6(double x)
{
    return round(x * 1e6) / 1e6;
}

static int add_metrics(cJSON *obj, const kb_eval_mean *mn)
{
    return cJSON_AddNumberToObject(obj, "queries", (double)mn->n) &&
           cJSON_AddNumberToObject(obj, "ndcg", r6(mn->ndcg)) &&
           cJSON_AddNumberToObject(obj, "recall", r6(mn->recall)) &&
           cJSON_AddNumberToObject(obj, "success", r6(mn->success)) &&
           cJSON_AddNumberToObject(obj, "mrr", r6(mn->mrr));
}

/* A query's llm stage: {"cached", "ordered", "fallback"}. */
static int add_rerank_query(cJSON *o, const kb_rerank_info *x)
{
    cJSON *r = cJSON_AddObjectToObject(o, "rerank");
    return r && cJSON_AddBoolToObject(r, "cached", x->cached) &&
           cJSON_AddNumberToObject(r, "ordered", (double)x->ordered) &&
           (x->fallback[0] ? cJSON_AddStringToObject(r, "fallback", x->fallback)
                           : cJSON_AddNullToObject(r, "fallback"));
}

static int add_per_query(cJSON *mo, const kb_eval_qrels *qrels,
                         const mode_run *m)
{
    cJSON *arr = cJSON_AddArrayToObject(mo, "per_query");
    if (!arr)
        return 0;
    for (size_t i = 0; i < qrels->n; i++) {
        const kb_eval_query *q = &qrels->queries[i];
        const query_run *r = &m->runs[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o))
            return 0;
        if (!cJSON_AddStringToObject(o, "id", q->id) ||
            !cJSON_AddStringToObject(o, "kind", q->kind) ||
            !cJSON_AddNumberToObject(o, "ndcg", r6(r->s.ndcg)) ||
            !cJSON_AddNumberToObject(o, "recall", r6(r->s.recall)) ||
            !cJSON_AddNumberToObject(o, "success", r->s.success) ||
            !cJSON_AddNumberToObject(o, "mrr", r6(r->s.mrr)) ||
            !cJSON_AddNumberToObject(o, "first_relevant_rank", r->s.first_rank) ||
            !cJSON_AddNumberToObject(o, "matched", (double)r->s.matched) ||
            !cJSON_AddNumberToObject(o, "judgments", (double)q->nrel) ||
            !cJSON_AddNumberToObject(o, "took_ms", r6(r->took_ms)))
            return 0;
        if (r->error && !cJSON_AddStringToObject(o, "error", r->error))
            return 0;
        if (r->expansion &&
            !cJSON_AddItemReferenceToObject(o, "expansion", r->expansion))
            return 0;
        if (m->rerank == KB_RERANK_LLM && !add_rerank_query(o, &r->rerank))
            return 0;
        cJSON *top = cJSON_AddArrayToObject(o, "top");
        if (!top)
            return 0;
        for (size_t t = 0; t < r->ntop; t++) {
            cJSON *x = cJSON_CreateObject();
            if (!x || !cJSON_AddItemToArray(top, x) ||
                !cJSON_AddNumberToObject(x, "rank", (double)t + 1) ||
                !cJSON_AddStringToObject(x, "source", r->top[t].source) ||
                !cJSON_AddStringToObject(x, "heading", r->top[t].heading) ||
                !cJSON_AddStringToObject(x, "path", r->top[t].path) ||
                !cJSON_AddBoolToObject(x, "relevant", r->top[t].relevant))
                return 0;
        }
    }
    return 1;
}

static kb_rc print_json(const kb_eval_qrels *qrels, const mode_run *modes,
                        size_t nmodes, const eval_opts *o, kb_err *err)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *jm = NULL;
    if (!root || !cJSON_AddStringToObject(root, "qrels", o->qrels_path) ||
        !cJSON_AddNumberToObject(root, "k", o->k) ||
        !cJSON_AddNumberToObject(root, "queries", (double)qrels->n) ||
        !(jm = cJSON_AddObjectToObject(root, "modes")))
        goto nomem;
    for (size_t i = 0; i < nmodes; i++) {
        const mode_run *m = &modes[i];
        if (!m->wanted)
            continue;
        cJSON *mo = cJSON_AddObjectToObject(jm, m->name);
        if (!mo || !cJSON_AddBoolToObject(mo, "available", m->available))
            goto nomem;
        if (!m->available) {
            if (!cJSON_AddStringToObject(mo, "error", m->err.msg))
                goto nomem;
            continue;
        }
        cJSON *ov = cJSON_AddObjectToObject(mo, "overall");
        cJSON *bk = ov ? cJSON_AddObjectToObject(mo, "by_kind") : NULL;
        if (!bk || !add_metrics(ov, &m->sum.overall))
            goto nomem;
        for (size_t j = 0; j < m->sum.nkinds; j++) {
            cJSON *ko = cJSON_AddObjectToObject(bk, m->sum.by_kind[j].kind);
            if (!ko || !add_metrics(ko, &m->sum.by_kind[j]))
                goto nomem;
        }
        if (!cJSON_AddNumberToObject(mo, "took_ms_mean", r6(m->took_ms_mean)) ||
            !cJSON_AddNumberToObject(mo, "errors", (double)m->nerrors))
            goto nomem;
        cJSON *xo = o->expand ? cJSON_AddObjectToObject(mo, "expansion") : NULL;
        if (o->expand &&
            (!xo || !cJSON_AddNumberToObject(xo, "expanded", (double)m->expanded) ||
             !cJSON_AddNumberToObject(xo, "cached", (double)m->cached) ||
             !cJSON_AddNumberToObject(xo, "searched_alone", (double)m->unexpanded) ||
             !cJSON_AddNumberToObject(xo, "llm_requests", (double)m->llm_calls) ||
             !cJSON_AddNumberToObject(xo, "llm_ms_mean", r6(m->llm_calls ? m->llm_ms_sum /
                                                           (double)m->llm_calls : 0))))
            goto nomem;
        cJSON *ro = m->rerank == KB_RERANK_LLM ? cJSON_AddObjectToObject(mo, "rerank") : NULL;
        if (m->rerank == KB_RERANK_LLM &&
            (!ro || !cJSON_AddStringToObject(ro, "stage", "llm") ||
             !cJSON_AddNumberToObject(ro, "llm_requests", (double)m->rr_requests) ||
             !cJSON_AddNumberToObject(ro, "cached", (double)m->rr_cached) ||
             !cJSON_AddNumberToObject(ro, "fallbacks", (double)m->rr_fallbacks) ||
             !cJSON_AddNumberToObject(ro, "llm_ms_mean", r6(m->rr_requests ? m->rr_ms_sum /
                                                           (double)m->rr_requests : 0))))
            goto nomem;
        if (o->verbose && !add_per_query(mo, qrels, m))
            goto nomem;
    }
    return kb_cli_print_json(root, err);
nomem:
    cJSON_Delete(root);
    return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
}

/* ---------------------------------------------------------------- command */

/* Parses the command line into o and the modes wanted (*all, else only).
 * Returns -1 to go on, or the exit status to stop with: a usage error it
 * has reported (2), --help or --version printed (0). */
static int parse_options(int argc, char **argv, const kb_command *self,
                         eval_opts *o, int *all, kb_mode *only)
{
    int c;
    long k;
    *all = 1;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        switch (c) {
        case KB_OPT_LONG('m'):
            *all = strcmp(g.arg, "all") == 0;   /* the one name not a kb_mode */
            if (!*all && kb_mode_parse(g.arg, only) != 0)
                return kb_cli_usage_error(self, "'%s' is no mode (lexical, "
                                          "vector, hybrid or all)", g.arg);
            break;
        case 'k':
            if (kb_parse_long(g.arg, 1, 1000, &k) != KB_OK)
                return kb_cli_usage_error(self, "'%s' is not a cut-off "
                                          "(a number from 1 to 1000)", g.arg);
            o->k = (int)k;
            break;
        case KB_OPT_LONG('j'): o->json = 1; break;
        case 'v': o->verbose = 1; break;
        case KB_OPT_LONG('f'): o->features_path = g.arg; break;
        case KB_OPT_LONG('X'): o->expand = 1; break;
        case KB_OPT_LONG('r'):
            if (kb_rerank_kind_parse(g.arg, &o->rerank) != 0)
                return kb_cli_usage_error(self, "unknown reranking stage '%s' "
                                          "(local, llm, none)", g.arg);
            break;
        }
    }
    if (c < 0)
        return g.status;
    if (g.ind >= argc)
        return kb_cli_usage_error(self, "no qrels file given");

    if (g.ind + 1 < argc)
        return kb_cli_usage_error(self, "one qrels file only ('%s' is extra)",
                                  argv[g.ind + 1]);
    o->qrels_path = argv[g.ind];
    return -1;
}

/* Runs every wanted mode. The embedder is opened only for modes that need
 * it; if it cannot be had, those modes are unavailable (their err says
 * why) and the others still run. *emb is the caller's to free. */
static kb_rc run_modes(kb_store *store, const kb_eval_qrels *qrels,
                       const eval_opts *o, const kb_cli *cli, mode_run *modes,
                       size_t nmodes, kb_embedder **emb, feature_dump *dump,
                       kb_err *err)
{
    int want_vectors = 0;
    for (size_t i = 0; i < nmodes; i++)
        want_vectors |= modes[i].wanted && modes[i].mode != KB_MODE_LEXICAL;
    kb_err emb_err;
    kb_err_clear(&emb_err);
    kb_rc emb_rc = KB_OK;
    if (want_vectors) {
        emb_rc = kb_embedder_open_config(cli->config, emb, &emb_err);
        if (emb_rc != KB_OK)
            *emb = NULL;
    }
    for (size_t i = 0; i < nmodes; i++) {
        mode_run *m = &modes[i];
        if (!m->wanted)
            continue;
        if (m->mode != KB_MODE_LEXICAL && !*emb) {
            kb_err_set(&m->err, emb_rc != KB_OK ? emb_rc : KB_ERR_MODEL, "%s",
                       emb_err.msg[0] ? emb_err.msg : "no embedder");
            continue;
        }
        kb_rc rc = run_mode(store, *emb, qrels, o, cli, m, dump, err);
        if (rc != KB_OK)
            return rc;
    }
    return KB_OK;
}

/* The first wanted mode when no wanted mode could run, else NULL. */
static const mode_run *none_ran(const mode_run *modes, size_t nmodes)
{
    const mode_run *failed = NULL;
    for (size_t i = nmodes; i-- > 0;)
        if (modes[i].wanted) {
            if (modes[i].available)
                return NULL;
            failed = &modes[i];
        }
    return failed;
}

static const kb_option eval_options[] = {
    { "mode", KB_OPT_LONG('m'), "MODE", "lexical, vector, hybrid or all (default all)" },
    { "k", 'k', "N", "cut-off (default 10)" },
    { "json", KB_OPT_LONG('j'), NULL, "print JSON" },
    { "verbose", 'v', NULL, "per-query results" },
    { "expand", KB_OPT_LONG('X'), NULL, "expand each query with the LLM of KB_LLM_URL, as\n"
      "kb query --expand does (cached in the KB)" },
    { "features", KB_OPT_LONG('f'), "FILE", "append each hybrid query's reranked pool and its\n"
      "features to FILE (JSON lines, for scripts/fit-rerank.py)" },
    { "rerank", KB_OPT_LONG('r'), "STAGE", "local (default; KB_RERANK) or none for every mode;\n"
      "llm adds a mode 'llm': hybrid, then KB_LLM_URL's model orders\n"
      "the best 30 sections (kb query --rerank llm)" },
    { NULL, 0, NULL, NULL },
};

static int cmd_eval(int argc, char **argv, const kb_cli *cli, const kb_command *self);

const kb_command kb_cmd_eval = {
    .name = "eval",
    .fn = cmd_eval,
    .usage = "kb eval [options] QRELS.json",
    .summary = "measure retrieval against relevance judgments",
    .options = eval_options,
    .operands = "file",
};

static int cmd_eval(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    eval_opts o = { .qrels_path = NULL, .k = 10 };
    /* the order of the table and of the JSON object */
    mode_run modes[] = {
        { .mode = KB_MODE_LEXICAL },
        { .mode = KB_MODE_VECTOR },
        { .mode = KB_MODE_HYBRID },
        { .mode = KB_MODE_HYBRID, .rerank = KB_RERANK_LLM },
    };
    const size_t nmodes = sizeof modes / sizeof modes[0];
    int all;
    kb_mode only = KB_MODE_HYBRID;
    int stop = parse_options(argc, argv, self, &o, &all, &only);
    if (stop >= 0)
        return stop;
    kb_err err;
    kb_err_clear(&err);
    if (o.expand && kb_query_expand_check(cli->config, &err) != KB_OK)
        return kb_cli_usage_error(self, "%s", err.msg);
    kb_rerank_kind stage;   /* the modes' stage; llm is a mode of its own */
    if (kb_query_rerank_resolve(cli->config, o.rerank, NULL, &stage, &err) != KB_OK)
        return kb_cli_usage_error(self, "%s", err.msg);
    for (size_t i = 0; i < nmodes; i++) {
        int llm = modes[i].rerank == KB_RERANK_LLM;
        modes[i].name = llm ? "llm" : kb_mode_name(modes[i].mode);
        modes[i].wanted = (all || modes[i].mode == only) &&
                          (!llm || stage == KB_RERANK_LLM);
        if (!llm)
            modes[i].rerank = stage == KB_RERANK_LLM ? KB_RERANK_LOCAL : stage;
        kb_err_clear(&modes[i].err);
    }
    kb_eval_qrels qrels = { NULL, 0 };
    kb_store *store = NULL;
    kb_embedder *emb = NULL;
    int status = 0;
    kb_rc rc = kb_eval_qrels_load(o.qrels_path, &qrels, &err);
    if (rc == KB_OK)
        rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err);
    feature_dump dump = { 0 };
    if (rc == KB_OK && o.features_path) {
        dump.store = store;
        if (!(dump.out = fopen(o.features_path, "a")))
            rc = kb_err_set(&err, KB_ERR_IO, "cannot open '%s': %s",
                            o.features_path, strerror(errno));
    }
    if (rc == KB_OK)
        rc = run_modes(store, &qrels, &o, cli, modes, nmodes, &emb,
                       o.features_path ? &dump : NULL, &err);
    if (dump.out && fclose(dump.out) != 0 && rc == KB_OK)
        rc = kb_err_set(&err, KB_ERR_IO, "cannot write '%s': %s",
                        o.features_path, strerror(errno));
    if (rc != KB_OK)
        goto out;
    if (o.json)
        rc = print_json(&qrels, modes, nmodes, &o, &err);
    else
        print_human(&qrels, modes, nmodes, &o);
    const mode_run *failed = none_ran(modes, nmodes);
    if (rc == KB_OK && failed) {
        /* no mode could run: that is a failure of the command */
        kb_cli_errorf("%s", failed->err.msg);
        status = kb_rc_exit_status(failed->err.rc ? failed->err.rc
                                                  : KB_ERR_INTERNAL);
    }
out:
    if (rc != KB_OK)
        status = kb_cli_fail(&err);
    for (size_t i = 0; i < nmodes; i++)
        mode_run_release(&modes[i], qrels.n);
    kb_embedder_free(emb);
    kb_store_close(store);
    kb_eval_qrels_release(&qrels);
    return status;
}
