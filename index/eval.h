/*
 * eval.h - retrieval evaluation (index/eval.c), internal to kb: used by
 * cli/cmd_eval.c and tests/unit/test_eval.c.
 *
 * A qrels file (shared/eval/README.md) holds queries with relevance
 * judgments. A judgment is {source, heading} or {source, path}; a result
 * matches it when its source equals the judgment's and
 *   - heading: some entry of its heading_path, normalised, contains the
 *     normalised heading. Normalising lower-cases (Unicode case folding),
 *     collapses runs of white space to one space, trims, and drops a leading
 *     section number ("9.7.9.25.", "18.2.3", "4."); a number glued to text
 *     ("2D Textures", "64-bit types", "8.x") is text and stays. The judgment's
 *     heading is normalised the same way, so both sides ignore numbering.
 *   - path: its path contains the judgment's path (byte-wise).
 *
 * Metrics at k, each in [0, 1]:
 *   nDCG@k   binary gain. Walking the top k, a result earns gain 1 when it
 *            matches at least one judgment no earlier result matched, and
 *            marks every judgment it matches; so each judgment is counted
 *            once, a judgment matched again earns nothing, and a result
 *            matching two new judgments earns 1 (not 2). DCG = sum of
 *            gain_i / log2(i + 1); the ideal DCG places min(#judgments, k)
 *            gains at ranks 1, 2, ...
 *   Recall@k  judgments matched by the top k / #judgments
 *   Success@k 1 if any of the top k matches a judgment
 *   MRR@k     1 / rank of the first matching result in the top k, else 0
 */
#ifndef KB_INDEX_EVAL_H
#define KB_INDEX_EVAL_H

#include "kb/kb.h"

/* ---------------------------------------------------------------- qrels */

typedef struct {
    char *source;
    char *heading;    /* as written; NULL for a path judgment */
    char *path;       /* NULL for a heading judgment */
    char *norm;       /* the normalised heading; NULL for a path judgment */
} kb_eval_judgment;

typedef struct {
    char *id;         /* "id", else "#N" (1-based position) */
    char *text;       /* "query" */
    char *kind;       /* "kind", else "none" */
    kb_eval_judgment *rel;
    size_t nrel;      /* >= 1 */
} kb_eval_query;

typedef struct {
    kb_eval_query *queries;
    size_t n;
} kb_eval_qrels;

/* Parses a qrels document (JSON text of len bytes; name is used in error
 * messages). Fails with KB_ERR_PARSE, naming the query and the field, on
 * bad JSON, no "queries" array, a query without "query" or "relevant" (or
 * with no judgments), or a judgment without "source" or without "heading"
 * / "path". On success out holds the queries (release with
 * kb_eval_qrels_release); on failure out is empty. */
kb_rc kb_eval_qrels_parse(const char *json, size_t len, const char *name,
                          kb_eval_qrels *out, kb_err *err);
/* Reads and parses the file at path (KB_ERR_IO if it cannot be read). */
kb_rc kb_eval_qrels_load(const char *path, kb_eval_qrels *out, kb_err *err);
void kb_eval_qrels_release(kb_eval_qrels *q);

/* ---------------------------------------------------------------- match */

/* The normalised form of a heading (see above). Caller frees; NULL only on
 * no memory. */
char *kb_eval_normalize_heading(const char *heading);
/* 1 if result r matches judgment j. */
int kb_eval_judgment_matches(const kb_eval_judgment *j, const kb_result *r);
/* 1 if result r matches any judgment of q. */
int kb_eval_result_relevant(const kb_eval_query *q, const kb_result *r);

/* ---------------------------------------------------------------- metrics */

typedef struct {
    double ndcg, recall, success, mrr;
    int first_rank;    /* rank (1-based) of the first relevant result in the
                          top k; 0 if none */
    size_t matched;    /* judgments matched in the top k */
} kb_eval_scores;

/* Scores results[0..n) (in rank order) against q's judgments at cut-off
 * k >= 1; results past k are ignored. KB_ERR_NOMEM is the only failure. */
kb_rc kb_eval_score(const kb_eval_query *q, const kb_result *results,
                    size_t n, int k, kb_eval_scores *out);

/* Means of the four metrics over n queries. */
typedef struct {
    char *kind;        /* NULL for the overall mean */
    size_t n;
    double ndcg, recall, success, mrr;
} kb_eval_mean;

typedef struct {
    kb_eval_mean overall;
    kb_eval_mean *by_kind;   /* in order of first appearance in the qrels */
    size_t nkinds;
} kb_eval_summary;

/* Averages scores[i] (the scores of qrels->queries[i]) overall and per
 * kind. Release out with kb_eval_summary_release. */
kb_rc kb_eval_summarize(const kb_eval_qrels *qrels,
                        const kb_eval_scores *scores,
                        kb_eval_summary *out, kb_err *err);
void kb_eval_summary_release(kb_eval_summary *s);

#endif
