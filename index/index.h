/*
 * index.h - what index/ offers the modules above it (ingest/, query/): the
 * tokenizer, the lexical index, candidate lists and the vector index. One
 * section per file. index_int.h holds what only index/ uses.
 */
#ifndef KB_INDEX_H
#define KB_INDEX_H

#include "kb/kb_int.h"

/* ------------------------------------------------------------ tokenizer.c, embedder.c */

/* The WordPiece tokenizer of BERT-style models (all-MiniLM-L6-v2). */
typedef struct kb_tokenizer kb_tokenizer;

/* Loads a vocab.txt, whatever it holds (tests and tools). *out is freed
 * with kb_tokenizer_free. */
kb_rc kb_tokenizer_open(const char *vocab_path, kb_tokenizer **out,
                        kb_err *err);
/* Loads model_dir/vocab.txt, only if it is kb's model's own (its pinned
 * SHA-256): a damaged one is KB_ERR_MODEL "... is truncated or corrupt;
 * run 'make deps' ...". */
kb_rc kb_tokenizer_open_model(const char *model_dir, kb_tokenizer **out,
                              kb_err *err);
void kb_tokenizer_free(kb_tokenizer *tok);
/* Token ids of text as the model sees it: [CLS] pieces [SEP], at most max
 * ids (truncating the pieces, keeping [SEP]). Returns the count in *n. */
kb_rc kb_tokenizer_encode(const kb_tokenizer *tok, const char *text,
                          int32_t *ids, size_t max, size_t *n);
/* Number of word pieces of text without [CLS]/[SEP] and without truncation;
 * what the chunker sizes chunks by. */
size_t kb_tokenizer_count(const kb_tokenizer *tok, const char *text);

/* The local embedder's names (kb_embedder_name, recorded in the KB): the
 * pinned base model, and a copy kb tune fine-tuned from it, whose
 * tuned.json pins its weights. */
#define KB_EMBEDDER_BASE "all-MiniLM-L6-v2"
#define KB_EMBEDDER_TUNED KB_EMBEDDER_BASE "+tuned"

/* Hashes the local model's whole weights file (once per embedder): what
 * stores vectors calls this first, since opening checks only samples
 * against the stamp. KB_ERR_MODEL "... truncated or corrupt" if they are
 * not the pinned weights; KB_OK for a remote embedder. */
kb_rc kb_embedder_check_weights(kb_embedder *e, kb_err *err);

/* The pairs kb tune fine-tunes the local embedder on, appended to out as
 * JSON lines {"q", "p", "kind", "chunk"}: a chunk's text (p) and the
 * question it answers (q: its section's last two headings without their
 * numbers, a paper's title). At most 2 chunks a section; no chunk under
 * 40 bytes; no heading that recurs in 3 documents (boilerplate). */
kb_rc kb_tune_pairs(kb_store *store, kb_buf *out, size_t *npairs, kb_err *err);
/* The embedder's tokenizer, NULL for a remote one. */
const kb_tokenizer *kb_embedder_tokenizer(const kb_embedder *e);

/* ------------------------------------------------------------ vector.c: hits */

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

/* ------------------------------------------------------------ fts.c */

/* 1 if the lower-case word w is too common to help ranking (the question
 * words people type). */
int kb_fts_is_stopword(const char *w);
/* 1 if the word w (len bytes) is an identifier by its shape: inner '_',
 * '.', "::", a lower-to-upper case change, or letters and digits. */
int kb_fts_is_identifier(const char *w, size_t len);
/* The identifier forms of text for the FTS "idents" column: each
 * identifier-like word (cp.async.bulk, __shfl_down_sync, cudaMemcpyAsync,
 * sm_90a) as its joined lower-case form and its split parts, appended to
 * out. KB_ERR_NOMEM if out cannot grow. */
kb_rc kb_fts_idents(const char *text, kb_buf *out) KB_MUST_CHECK;
/* Turns user text into a safe FTS5 MATCH expression: quoted terms OR-ed,
 * identifiers as phrases of their parts or their joined form, appended to
 * out. Never a syntax error. Empty out means nothing searchable;
 * KB_ERR_NOMEM if out cannot grow. */
kb_rc kb_fts_build_match(const char *text, kb_buf *out) KB_MUST_CHECK;
/* The depth best chunks for text by BM25 (heading columns above the body),
 * restricted to what filter allows (NULL: all), appended to out with their
 * lexical rank and score. Text that holds nothing searchable finds none. */
kb_rc kb_fts_search(kb_store *store, const char *text, const kb_filter *filter,
                    size_t depth, kb_hits *out, kb_err *err);
/* Indexes one chunk (rowid = chunk id): title is the chunk's own section
 * title, heading the whole heading path. */
kb_rc kb_fts_add(kb_store *store, int64_t chunk_id, const char *title,
                 const char *heading, const char *body, kb_err *err);

/* ------------------------------------------------------------ vector.c */

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
/* Within a document's replacing transaction: kb_vec_keep_document sets
 * the vectors of the document (source, key) aside before it is deleted,
 * and kb_vec_restore_document gives each new chunk of doc_id whose
 * heading path and text are an old chunk's that chunk's vector (they are
 * the embedder's whole input), so a parser change re-embeds only the
 * chunks it changed. */
kb_rc kb_vec_keep_document(kb_store *store, const char *source, const char *key,
                           kb_err *err);
kb_rc kb_vec_restore_document(kb_store *store, int64_t doc_id, kb_err *err);
/* Drops every vector (for a re-embedding with another model). */
kb_rc kb_vec_clear(kb_store *store, kb_err *err);
/* Sets *count to the number of chunks that have a vector (a table scan);
 * fails on a database error. kb_vec_any says whether any has one (cheap). */
kb_rc kb_vec_count(kb_store *store, size_t *count, kb_err *err);
int kb_vec_any(kb_store *store);
/* The k nearest chunks to the L2-normalised q (inner product), restricted
 * to the chunks the filter allows (NULL: all). Loads (or rebuilds) the index on
 * first use and keeps it with the store. */
kb_rc kb_vec_search(kb_store *store, const float *q, int dim, size_t k,
                    const kb_filter *filter, kb_hits *out, kb_err *err);
/* KB_ERR_USAGE unless FAISS can make an index of the factory string kind
 * ("Flat", "HNSW32", "IVF256,Flat") for vectors of dim dimensions. */
kb_rc kb_vec_check_index_kind(const char *kind, int dim, kb_err *err);
/* Sets the FAISS factory string the index is built with; a change starts
 * a new index file. The new index is built first: when that fails (too
 * few vectors to train it) the KB keeps its index and setting, and err
 * says so. */
kb_rc kb_vec_set_index_kind(kb_store *store, const char *kind, kb_err *err);
/* Builds the FAISS index from SQLite and writes it (atomically). When only
 * the write fails, the built index stays loaded with the store and the
 * write's error is returned. */
kb_rc kb_vec_rebuild(kb_store *store, kb_err *err);
void kb_vec_release(kb_store *store);
/* KB_OK when the index file of the KB's current vectors is there, whole
 * and holds every one of them (or the KB has none); else KB_ERR_INDEX
 * saying what is wrong with it (a query would rebuild it). */
kb_rc kb_vec_check_file(kb_store *store, kb_err *err);

#endif
