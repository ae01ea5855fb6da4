/*
 * query_int.h - what the files of query/ share (one section per file).
 */
#ifndef KB_QUERY_INT_H
#define KB_QUERY_INT_H

#include "index/index.h"

/* ------------------------------------------------------------ similar.c */

/* A text's neighbouring word pairs (lower case; letters, digits, '_' and
 * UTF-8 make words), hashed, sorted, each once. */
typedef struct {
    uint64_t *h;
    size_t n;
} kb_shingles;

/* KB_ERR_NOMEM when out of memory. */
kb_rc kb_shingles_make(const char *text, kb_shingles *out);
/* |a and b| / |a or b|: 1 for the same words in the same order; 0 when
 * either is empty. */
double kb_shingles_jaccard(const kb_shingles *a, const kb_shingles *b);
void kb_shingles_release(kb_shingles *s);

/* ------------------------------------------------------------ query.c */

/* The columns kb_result_from_row reads, in its order, from
 * KB_RESULT_TABLES. */
#define KB_RESULT_COLUMNS \
    "c.id, d.source_id, d.title, c.heading_path, d.url, c.anchor, d.path," \
    " c.kind, c.text, s.version"
#define KB_RESULT_NCOLUMNS 10
#define KB_RESULT_TABLES \
    "chunks c JOIN documents d ON d.id = c.document_id" \
    " LEFT JOIN sources s ON s.id = d.source_id"
/* A result (rank and scores unset) from a row that starts with
 * KB_RESULT_COLUMNS; KB_ERR_NOMEM when out of memory. */
kb_rc kb_result_from_row(sqlite3_stmt *st, kb_result *r);

/* ------------------------------------------------------------ browse.c */

/* Chunk chunk_id as a result (rank and scores unset) into *r, and its
 * document's id into *doc_id (kb eval --features). *r is the caller's to
 * release with kb_result_release, also on failure. KB_ERR_NOTFOUND when
 * the KB has no such chunk. */
kb_rc kb_get_chunk_doc(kb_store *store, int64_t chunk_id, kb_result *r,
                       int64_t *doc_id, kb_err *err);

/* ------------------------------------------------------------ fuse.c */

/* Reciprocal rank fusion: score = sum over lists of w / (KB_RRF_K + rank),
 * w = 1 for the lexical list. The vector list weighs less: on the dev set
 * all-MiniLM-L6-v2 alone reaches nDCG@10 0.57 against lexical's 0.79, and
 * every step of its weight from 1 down to 0.2 raised hybrid's nDCG (0.72
 * .. 0.78); at 0.3 vector hits still lift sections lexical ranks low
 * (BENCHMARKS.md, "Fusion"). */
#define KB_RRF_K 60.0
#define KB_RRF_VECTOR_WEIGHT 0.3

/* One candidate list of a query: the query's own lexical or vector list,
 * or one of the caller's sub-queries (kb_query_opts.searches). */
typedef struct {
    int vector;            /* 1: FAISS over the text's embedding; 0: FTS5 */
    const char *text;
    size_t row;            /* a vector list's row in the embedding batch */
    kb_hits hits;
    int search;            /* searched in the next pass */
} kb_query_list;

/* the query's own lexical and vector lists, then its sub-queries */
#define KB_QUERY_MAX_LISTS (2 + KB_QUERY_MAX_SEARCHES)

/* Reciprocal rank fusion of the lists at the level of sections: each list
 * ranks sections by their best chunk, a section scores the sum over the
 * lists of w / (KB_RRF_K + rank) (w = 1 for a lexical list,
 * KB_RRF_VECTOR_WEIGHT for a vector one), and stands for its best chunk
 * in the first list that has it. One list alone is ranked by section
 * too, a lexical one by its evidence, and scores it. The sections' hits
 * are appended to out, best first. */
kb_rc kb_fuse_rrf(kb_store *store, const kb_query_list *lists, size_t nlists,
                  kb_hits *out, kb_err *err);

/* ------------------------------------------------------------ skills.c */

/* A skill's status, in the order the skills block shows them. */
enum { KB_SKILLS_FIRST, KB_SKILLS_DRAFT, KB_SKILLS_RETIRED };

typedef struct {
    char *folder;          /* its SKILL.md's folder, with the slash */
    char *title;           /* "NAME (STATUS, SPEEDUPx)"; NULL if unknown */
    int status;            /* verified or approved, draft (or other), retired */
} kb_skill_info;

/* The chunks of the KB's skills (a SKILL.md and the files beside it). */
typedef struct {
    int64_t *ids;          /* ascending */
    size_t *of;            /* each id's skill, in skills */
    size_t n;
    kb_skill_info *skills;
    size_t nskills;
    /* the KB they were read from: SQLite's data_version (others' commits)
     * and this connection's own changes */
    long long data_version, changes;
} kb_skill_chunks;

/* The KB's skill chunks, read again only when the KB has changed since
 * (a query pays 2 ms for them otherwise); owned by the store. */
kb_rc kb_skill_chunks_get(kb_store *store, const kb_skill_chunks **out, kb_err *err);
/* The skill of chunk id, or NULL when it is no skill's. */
const kb_skill_info *kb_skill_of(const kb_skill_chunks *sc, int64_t id);

/* ------------------------------------------------------------ arch.c */

/* The sm_ numbers a question names, by architecture (Hopper: 90), chip
 * (H100: 90; B200: 100) or target (sm_90a: 90); n 0 when it names none. */
#define KB_ARCH_MAX 12
typedef struct {
    int sm[KB_ARCH_MAX];
    size_t n;
} kb_arch_set;
void kb_arch_of_query(const char *query, kb_arch_set *out);

/* What text (len bytes, any case) says of want's architectures by its
 * targets (sm_90a, compute_90), or'ed into *state: it names one of them,
 * an older target whose instructions run there too, or a target that
 * does not run there (a newer one, another's 'a' features). */
#define KB_ARCH_SAME 1
#define KB_ARCH_RUNS 2
#define KB_ARCH_OTHER 4
void kb_arch_scan(const kb_arch_set *want, const char *text, size_t len, int *state);
/* The reranking feature of a section's *state: 1 when it names one of
 * the architectures, -1 when it names only targets that do not run
 * there, else 0. */
double kb_arch_feature(int state);

/* ------------------------------------------------------------ code_text.c */

/* The query to search for text that is source code (kb query --file
 * kernel.cu, pasted code; three lines or more that end in ';', '{' or '}'
 * or are preprocessor lines): its identifiers, CUDA names first
 * (__shfl_down_sync, cudaMemcpyAsync, cp.async.bulk in inline PTX), then
 * its other words, its licence and copyright comments left out; for other
 * text with such a comment, the text without it. *rewritten says whether
 * out is the query (else text is, as it is). KB_ERR_NOMEM. */
kb_rc kb_query_code_text(const char *text, kb_buf *out, int *rewritten);

/* ------------------------------------------------------------ rerank.c */

/* The local reranking stage (kb_query_opts.trace names its features). */
#define KB_RERANK_NFEAT 18

/* Feature i's name ("lex_norm", "sec_cos", ...); "" past the last. */
const char *kb_rerank_feature_name(size_t i);

/* Reorders the fused, section-level list: the sections within the top
 * places of the query's own lexical list lex or vector list vec (either
 * may be NULL) are scored by their features and go first, best first;
 * the rest follow in fusion's order. qvec is the query's embedding of
 * dim floats (NULL: no vector features); rrf_scale turns a fused score
 * into the "rrf" feature (1 for first in both lists). trace, when set, is called
 * with each pooled section's best chunk and features. */
kb_rc kb_rerank_local(kb_store *store, const char *query, const float *qvec,
                      int dim, const kb_hits *lex, const kb_hits *vec,
                      kb_hits *fused, double rrf_scale, kb_rerank_trace_fn trace,
                      void *trace_ctx, kb_err *err);

/* ------------------------------------------------------------ rerank_remote.c */

/* Scores n texts for query through a /v1/rerank endpoint (url; model and
 * api_key may be NULL): scores[i] is text i's relevance. Sends both
 * "documents" (Cohere, Jina, vLLM, llama.cpp) and "texts" (TEI); reads
 * {"results":[{"index","relevance_score"}]} or [{"index","score"}]. A
 * reply that does not score every text once is KB_ERR_PARSE; HTTP
 * failures are kb_http_perform's (one retry, 20 s a request). */
kb_rc kb_rerank_remote_scores(const char *url, const char *model,
                              const char *api_key, const char *query,
                              const char *const *docs, size_t n, double *scores,
                              kb_err *err);
/* Reorders the first top hits of the fused list by cfg's reranker
 * (cfg->rerank_url), each judged by its document title, heading path and
 * best chunk; the rest stay behind them as they were. */
kb_rc kb_rerank_remote(kb_store *store, const kb_config *cfg, const char *query,
                       kb_hits *fused, size_t top, kb_err *err);

/* ------------------------------------------------------------ rerank_llm.c */

/* Sections of the fused list the LLM stage orders: the local stage's
 * best, as far as the prompt's budget holds them. */
#define KB_RERANK_LLM_TOP 30

/* Reads a reply of passage ids (1..npool) into order[0..*n) as 0-based
 * indices, in the reply's order: a JSON array ("[3, 1, 2]"), a line of
 * ids ("3, 1, 2", "[3] > [1]"), optionally in one ``` fence. Unknown and
 * repeated ids are passed over. 0 when read; -1 when the reply holds
 * anything but ids, or none; -2 out of memory. order holds npool. */
int kb_rerank_llm_parse(const char *reply, size_t npool, size_t *order, size_t *n);

/* Reorders the first top sections of fused (as far as the prompt's budget
 * holds them) by one request to cfg's LLM (KB_LLM_URL, KB_LLM_MODEL,
 * KB_LLM_API_KEY, KB_LLM_API; within KB_RERANK_TIMEOUT_MS, not retried),
 * or by the order the store's cache keeps for the same query, pool and
 * model. The sections the reply names go first in its order, the pool's
 * others after them as they were, the rest stay. A failed or slow
 * request or a reply that is not ids leaves fused as it was: a warning
 * and info->fallback say why. info says what was done. Fails only when
 * cfg names no usable LLM (KB_ERR_USAGE), a chunk is gone, or on memory.
 * lent (NULL: none) is asked instead when cfg sets no KB_LLM_URL, with the
 * same prompt, parser, timeout and cache (keyed by its name). */
kb_rc kb_rerank_llm(kb_store *store, const kb_config *cfg, const kb_llm_lent *lent,
                    const char *query, kb_hits *fused, size_t top, kb_rerank_info *info,
                    kb_err *err);
/* Puts the sections of first (ids, in order) that fused holds at its
 * front in that order, the others after them as they were: a verdict of
 * kb_rerank_llm, reused without a request. KB_ERR_NOMEM. */
kb_rc kb_rerank_llm_again(kb_hits *fused, const kb_hits *first);

#endif
