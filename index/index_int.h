/*
 * index_int.h - internals shared by the files of index/ (one section per
 * file). Not part of the public API: kb/kb.h is.
 */
#ifndef KB_INDEX_INT_H
#define KB_INDEX_INT_H

#include "index/index.h"

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

/* Opens a remote embedder with explicit options (tests use short timeouts). */
kb_rc kb_embedder_open_remote_opts(const char *url, const char *model,
                                   const char *api_key,
                                   const kb_remote_opts *opts,
                                   kb_embedder **out, kb_err *err);

#endif
