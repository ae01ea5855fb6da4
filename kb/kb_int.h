/*
 * kb_int.h - internals shared between kb's modules, one section per file
 * (SQLite's fts5Int.h). The CLI and the servers use kb.h only.
 */
#ifndef KB_INT_H
#define KB_INT_H

#include "kb/kb.h"

#include <sqlite3.h>

/* ------------------------------------------------------------ kb/store.c */

struct kb_store {
    char *dir;
    sqlite3 *db;
    int readonly;
    struct kb_vec *vec;      /* the loaded vector index, NULL until needed */
    kb_embedder *emb;        /* the default embedder, opened when needed */
};

/* Prepares sql on the store's connection; on failure sets err. */
kb_rc kb_store_prepare(kb_store *store, const char *sql, sqlite3_stmt **stmt,
                       kb_err *err);
/* Runs sql (no results, no parameters). */
kb_rc kb_store_exec(kb_store *store, const char *sql, kb_err *err);
/* BEGIN IMMEDIATE / COMMIT / ROLLBACK. */
kb_rc kb_store_begin(kb_store *store, kb_err *err);
kb_rc kb_store_commit(kb_store *store, kb_err *err);
void kb_store_rollback(kb_store *store);
/* Sets err from the connection's last error, with a prefix ("cannot X"). */
kb_rc kb_store_db_error(kb_store *store, kb_err *err, const char *what);
/* meta table: get (caller frees, NULL if unset) and set. */
char *kb_store_meta_get(kb_store *store, const char *key);
kb_rc kb_store_meta_set(kb_store *store, const char *key, const char *value,
                        kb_err *err);
/* Total size in bytes of the files in the KB directory. */
long long kb_store_disk_size(const kb_store *store);
/* The schema version, or -1 when the file is not a database; 0 when new. */
int kb_store_schema_version(kb_store *store);

/* ------------------------------------------------------------ ingest/chunk.c */

typedef struct {
    kb_kind kind;
    size_t depth;          /* of the heading path (the first block's, or one
                              less for tiny sibling sections merged) */
    char *heading_json;    /* JSON array of the heading path */
    char *heading_text;    /* "A > B > C", what the FTS heading column gets */
    char *anchor;
    char *text;
    int tokens;            /* word pieces, including the heading prefix */
    const kb_paper *paper; /* borrowed from the doc, KB_KIND_PAPER only */
    const kb_block *first; /* borrowed: the first block, for its heading */
} kb_chunk;

typedef struct {
    kb_chunk *items;
    size_t n, cap;
} kb_chunks;

/* The encoder's window (KB_TOK_MAX_LEN, 256 pieces) less the [CLS] and
 * [SEP] it adds: a chunk this long is embedded whole. */
#define KB_CHUNK_MAX_TOKENS 254

/* Counts word pieces: with tok, exactly; without, an estimate that follows
 * BERT's pre-tokenisation (words, punctuation, long words in pieces). */
size_t kb_chunk_count_tokens(const kb_tokenizer *tok, const char *text);
/* Splits doc into chunks of at most max_tokens word pieces each, including
 * the heading-path prefix the embedder sees. Borrowed pointers in the
 * chunks point into doc: release the chunks before the doc. */
kb_rc kb_chunk_doc(const kb_doc *doc, const kb_tokenizer *tok, int max_tokens,
                   kb_chunks *out, kb_err *err);
void kb_chunks_release(kb_chunks *c);

/* ------------------------------------------------------------ index/fts.c */

/* The identifier forms of text for the FTS "idents" column: each
 * identifier-like word (cp.async.bulk, __shfl_down_sync, cudaMemcpyAsync,
 * sm_90a) as its joined lower-case form and its split parts. */
kb_rc kb_fts_idents(const char *text, kb_buf *out);
/* Turns user text into a safe FTS5 MATCH expression: quoted terms OR-ed,
 * identifiers as phrases of their parts or their joined form. Never a
 * syntax error. Empty out means nothing searchable. */
kb_rc kb_fts_build_match(const char *text, kb_buf *out);
/* Indexes one chunk (rowid = chunk id): title is the chunk's own section
 * title, heading the whole heading path. */
kb_rc kb_fts_add(kb_store *store, int64_t chunk_id, const char *title,
                 const char *heading, const char *body, kb_err *err);

/* ------------------------------------------------------------ query/query.c */

/* Appends " AND d.source_id IN (?,..) AND c.kind IN (?,..)" for opts'
 * filters (chunks c, documents d); kb_query_bind_filters binds them from
 * parameter index i on and returns the next index. */
void kb_query_filter_sql(const kb_query_opts *opts, kb_buf *sql);
/* The columns kb_result_from_row reads, in its order (chunks c,
 * documents d). */
#define KB_RESULT_COLUMNS \
    "c.id, d.source_id, d.title, c.heading_path, d.url, c.anchor, d.path," \
    " c.kind, c.text"
/* A result (rank and scores unset) from a row that starts with
 * KB_RESULT_COLUMNS; KB_ERR_NOMEM when out of memory. */
kb_rc kb_result_from_row(sqlite3_stmt *st, kb_result *r);
int kb_query_bind_filters(sqlite3_stmt *st, const kb_query_opts *opts, int i);

/* ------------------------------------------------------------ index/vector.c */

/* A hit of one retriever: a chunk and its score (higher is better), and
 * its place in each candidate list with that list's score (0: not in the
 * list; for a fused hit, the place of its section, as fusion counted it). */
typedef struct {
    int64_t id;
    double score;
    int lex_rank, vec_rank;
    double lex_score, vec_score;
} kb_hit;

typedef struct {
    kb_hit *items;
    size_t n, cap;
} kb_hits;

kb_rc kb_hits_push(kb_hits *h, int64_t id, double score);
void kb_hits_release(kb_hits *h);

/* Checks that emb is the embedder the KB's vectors were made with (or
 * records it when the KB has none yet and record is set). */
kb_rc kb_vec_check_embedder(kb_store *store, const kb_embedder *emb,
                            int record, kb_err *err);
/* Embeds every chunk that has no vector yet, in batches, each batch in
 * its own transaction (an interrupted pass resumes where it stopped);
 * then writes the vector index file. */
kb_rc kb_vec_embed_pending(kb_store *store, kb_embedder *emb,
                           kb_ingest_progress_fn progress, void *ctx,
                           size_t *embedded, kb_err *err);
/* Drops every vector (for a re-embedding with another model). */
kb_rc kb_vec_clear(kb_store *store, kb_err *err);
/* Sets *count to the number of chunks that have a vector (a table scan);
 * fails on a database error. kb_vec_any says whether any has one (cheap). */
kb_rc kb_vec_count(kb_store *store, size_t *count, kb_err *err);
int kb_vec_any(kb_store *store);
/* The k nearest chunks to the L2-normalised q (inner product), restricted
 * to the chunks allowed by opts' filters. Loads (or rebuilds) the index on
 * first use and keeps it with the store. */
kb_rc kb_vec_search(kb_store *store, const float *q, int dim, size_t k,
                    const kb_query_opts *opts, kb_hits *out, kb_err *err);
/* Builds the FAISS index from SQLite and writes it (atomically). When only
 * the write fails, the built index stays loaded with the store and the
 * write's error is returned. */
kb_rc kb_vec_rebuild(kb_store *store, kb_err *err);
void kb_vec_release(kb_store *store);

#endif
