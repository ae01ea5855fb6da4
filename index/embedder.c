/*
 * embedder.c - kb_embedder: the local all-MiniLM-L6-v2 (tokenizer.c +
 * bert.c over safetensors.c; or a copy kb tune fine-tuned, whose
 * tuned.json pins its weights) or a remote OpenAI-compatible endpoint
 * (embed_remote.c), chosen by kb_embedder_open_config from kb's
 * configuration.
 */
#include "index/index.h"
#include "kb/kb_int.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* DIR/TUNED_MANIFEST, written by scripts/tune-embedder.py beside weights it
 * fine-tuned from the pinned ones: their own SHA-256, pinned in its place */
#define TUNED_MANIFEST "tuned.json"
#define MODEL_SHA256 KB_MODEL_WEIGHTS_SHA256
/* the verdict on the weights' hash: a key line, then the SHA-256 of each
 * STAMP_BLOCK of the file, one a line */
#define STAMP ".kb-verified2"   /* ".kb-verified" was version 1 */
#define STAMP_VERSION "kb-verified 2"
#define STAMP_BLOCK (1u << 20)
/* blocks hashed again on each open from the stamp, besides the first */
#define STAMP_SAMPLES 2
/* texts per forward pass, and tokens (32 x 256 activations at most) */
#define BATCH_TEXTS 32
#define BATCH_TOKENS (32 * KB_TOK_MAX_LEN)
/* on a GPU: texts handed over at once by what stores vectors, and the
 * fewest pending texts that are worth starting one for in auto mode (its
 * start, NVRTC's compile included, costs about a second) */
#define GPU_BATCH_TEXTS 2048
#define GPU_MIN_TEXTS 256

enum { DEV_AUTO, DEV_CPU, DEV_GPU };

struct kb_embedder {
    int remote;
    int dim;
    char name[160];
    char hash[65];
    /* local */
    kb_safetensors st;
    kb_tokenizer *tok;
    kb_bert *bert;
    int weights_checked;     /* the whole file hashed by this process */
    char *stamp;             /* DIR/.kb-verified2 */
    int32_t *ids;            /* [BATCH_TOKENS] */
    int device;              /* DEV_*: where bulk embedding runs */
    int gpu_tried;           /* kb_embedder_bulk looked for a GPU */
    kb_bert_gpu *gpu;        /* found: bulk batches run there */
    int32_t *gids;           /* [GPU_BATCH_TEXTS * KB_TOK_MAX_LEN] */
    size_t *glens;           /* [GPU_BATCH_TEXTS] */
    /* remote */
    kb_remote *rem;
};

/* The stamp's first line for the weights file as it is now (size, mtime,
 * ctime, inode: a file replaced or touched since is hashed again), into
 * key. */
static int stamp_key(const char *path, const char *hash, char *key, size_t n)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return -1;
    snprintf(key, n, STAMP_VERSION " %lld %lld.%09ld %lld.%09ld %llu %s\n",
             (long long)sb.st_size, (long long)sb.st_mtim.tv_sec,
             (long)sb.st_mtim.tv_nsec, (long long)sb.st_ctim.tv_sec,
             (long)sb.st_ctim.tv_nsec, (unsigned long long)sb.st_ino, hash);
    return 0;
}

/* Hashes the whole weights file: it must have the pinned SHA-256. Then
 * writes the stamp with every block's hash, when write_stamp is set and
 * the directory lets us (a directory we cannot write to just hashes every
 * time). */
static kb_rc check_all(kb_embedder *e, const char *key, int write_stamp,
                       kb_err *err)
{
    const kb_safetensors *st = &e->st;
    double t0 = kb_now_ms();
    char hash[65];
    kb_sha256_hex(st->map, st->size, hash);
    kb_log_debug("embedder: SHA-256 of '%s' in %.0f ms", st->path, kb_now_ms() - t0);
    if (strcmp(hash, e->hash) != 0) {
        unlink(e->stamp);   /* the next open hashes the whole file too */
        return kb_model_corrupt(err, st->path);
    }
    e->weights_checked = 1;
    if (!write_stamp)
        return KB_OK;
    size_t nblocks = (st->size + STAMP_BLOCK - 1) / STAMP_BLOCK;
    unsigned char (*md)[32] = malloc((nblocks ? nblocks : 1) * sizeof *md);
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = md ? kb_buf_puts(&b, key) : KB_ERR_NOMEM;
    if (md)
        kb_sha256_blocks(st->map, st->size, STAMP_BLOCK, md);
    for (size_t i = 0; i < nblocks && rc == KB_OK; i++) {
        char hex[65];
        kb_hex_encode(md[i], sizeof md[i], hex);
        rc = kb_buf_printf(&b, "%s\n", hex);
    }
    if (rc == KB_OK)
        kb_write_file_atomic(e->stamp, b.data, b.len, NULL);
    kb_buf_release(&b);
    free(md);
    return KB_OK;
}

/* The weights' SHA-256 must be the pinned one. Hashing 90 MB costs ~65 ms,
 * too much for every `kb query`, so the verdict is kept in the stamp
 * (DIR/.kb-verified2) with the hash of every 1 MiB block; an open from the
 * stamp hashes the first block and STAMP_SAMPLES others picked at random
 * again, and anything that does not match is hashed whole. What stores
 * vectors checks the whole file first (kb_embedder_check_weights), so bit
 * rot that keeps the file's times cannot reach the KB. */
static kb_rc verify_weights(kb_embedder *e, kb_err *err)
{
    const kb_safetensors *st = &e->st;
    char key[320];
    if (stamp_key(st->path, e->hash, key, sizeof key) != 0)
        return kb_model_corrupt(err, st->path);
    size_t nblocks = (st->size + STAMP_BLOCK - 1) / STAMP_BLOCK;
    kb_buf old;
    kb_buf_init(&old, 0);
    size_t klen = strlen(key);
    int ok = kb_read_file(e->stamp, klen + nblocks * 65 + 1, &old, NULL) == KB_OK &&
             old.len == klen + nblocks * 65 && memcmp(old.data, key, klen) == 0;
    unsigned seed = (unsigned)getpid() ^ (unsigned)kb_now_ms();
    for (size_t k = 0; ok && k <= STAMP_SAMPLES && nblocks; k++) {
        size_t i = k == 0 ? 0 : (size_t)rand_r(&seed) % nblocks;
        size_t off = i * STAMP_BLOCK;
        size_t n = st->size - off < STAMP_BLOCK ? st->size - off : STAMP_BLOCK;
        char hex[65];
        kb_sha256_hex((const char *)st->map + off, n, hex);
        ok = memcmp(old.data + klen + i * 65, hex, 64) == 0;
    }
    kb_buf_release(&old);
    return ok ? KB_OK : check_all(e, key, 1, err);
}

kb_rc kb_embedder_check_weights(kb_embedder *e, kb_err *err)
{
    if (e->remote || e->weights_checked)
        return KB_OK;
    char key[320];
    if (stamp_key(e->st.path, e->hash, key, sizeof key) != 0)
        return kb_model_corrupt(err, e->st.path);
    return check_all(e, key, 0, err);
}

/* The weights' pinned hash and the embedder's name: the base model's, or,
 * where DIR holds a tuned model's manifest, the hash it records for the
 * weights beside it (made from the base weights, so the tokenizer and the
 * architecture are the base's). */
static kb_rc read_pin(kb_embedder *e, const char *dir, kb_err *err)
{
    char *path = kb_path_join(dir, TUNED_MANIFEST);
    if (!path)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    memcpy(e->hash, MODEL_SHA256, sizeof e->hash);
    snprintf(e->name, sizeof e->name, "%s", KB_EMBEDDER_BASE);
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = KB_OK;
    if (access(path, F_OK) != 0)
        goto out;
    if ((rc = kb_read_file(path, 1 << 16, &b, err)) != KB_OK)
        goto out;
    cJSON *m = cJSON_ParseWithLength(b.data, b.len);
    const char *sha = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "sha256"));
    const char *base = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "base_sha256"));
    if (!sha || strlen(sha) != 64 || strspn(sha, "0123456789abcdef") != 64 ||
        !base || strcmp(base, MODEL_SHA256) != 0)
        rc = kb_err_set(err, KB_ERR_MODEL,
                        "'%s' is not a manifest of weights tuned from %s"
                        " (needs \"sha256\" and \"base_sha256\" %s); run 'kb tune'"
                        " again, or point KB_MODEL_DIR at the base model",
                        path, KB_EMBEDDER_BASE, MODEL_SHA256);
    else {
        memcpy(e->hash, sha, sizeof e->hash);
        snprintf(e->name, sizeof e->name, "%s", KB_EMBEDDER_TUNED);
    }
    cJSON_Delete(m);
out:
    kb_buf_release(&b);
    free(path);
    return rc;
}

kb_rc kb_embedder_open_local(const char *model_dir, int threads,
                             kb_embedder **out, kb_err *err)
{
    *out = NULL;
    char *dir = NULL, *model = NULL;
    kb_rc rc = KB_OK;
    kb_embedder *e = calloc(1, sizeof *e);
    if (!e)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    dir = kb_strdup(model_dir ? model_dir : "");
    if (!dir) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    struct stat sb;
    if (!*dir) {
        rc = kb_err_set(err, KB_ERR_MODEL,
                        "no model directory: KB_MODEL_DIR is empty; run 'kb model fetch' or set KB_MODEL_DIR");
        goto out;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        rc = kb_err_set(err, KB_ERR_MODEL,
                        "model directory '%s' not found; run 'kb model fetch' or set KB_MODEL_DIR",
                        dir);
        goto out;
    }
    model = kb_path_join(dir, "model.safetensors");
    e->stamp = kb_path_join(dir, STAMP);
    e->ids = malloc(BATCH_TOKENS * sizeof *e->ids);
    if (!model || !e->stamp || !e->ids) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = read_pin(e, dir, err)) != KB_OK ||
        (rc = kb_tokenizer_open_model(dir, &e->tok, err)) != KB_OK ||
        (rc = kb_st_open(model, &e->st, err)) != KB_OK ||
        (rc = verify_weights(e, err)) != KB_OK ||
        (rc = kb_bert_open(&e->st, threads, &e->bert, err)) != KB_OK)
        goto out;
    e->dim = KB_BERT_DIM;
    *out = e;
    e = NULL;
out:
    kb_embedder_free(e);
    free(dir);
    free(model);
    return rc;
}

kb_rc kb_embedder_open_remote_opts(const char *url, const char *model,
                                   const char *api_key,
                                   const kb_remote_opts *opts,
                                   kb_embedder **out, kb_err *err)
{
    *out = NULL;
    kb_embedder *e = calloc(1, sizeof *e);
    if (!e)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    e->remote = 1;
    kb_rc rc = kb_remote_open(url, model, api_key, opts, &e->rem, err);
    if (rc == KB_OK)
        rc = kb_remote_probe(e->rem, err);
    if (rc != KB_OK) {
        kb_embedder_free(e);
        return rc;
    }
    e->dim = kb_remote_dim(e->rem);
    snprintf(e->name, sizeof e->name, "remote:%s", kb_remote_model(e->rem));
    *out = e;
    return KB_OK;
}

kb_rc kb_embedder_open_remote(const char *url, const char *model,
                              const char *api_key, kb_embedder **out,
                              kb_err *err)
{
    return kb_embedder_open_remote_opts(url, model, api_key, NULL, out, err);
}

kb_rc kb_embedder_open_config(const kb_config *cfg, kb_embedder **out,
                              kb_err *err)
{
    if (cfg->embed_url && *cfg->embed_url) {
        kb_remote_opts o;
        kb_remote_opts_default(&o);
        o.timeout_ms = cfg->embed_timeout_ms;
        return kb_embedder_open_remote_opts(cfg->embed_url, cfg->embed_model,
                                            cfg->embed_api_key, &o, out, err);
    }
    kb_rc rc = kb_embedder_open_local(cfg->model_dir, cfg->threads, out, err);
    if (rc == KB_OK && (rc = kb_embedder_set_device(*out, cfg->embed_device, err)) != KB_OK) {
        kb_embedder_free(*out);
        *out = NULL;
    }
    return rc;
}

kb_rc kb_embedder_set_device(kb_embedder *e, const char *device, kb_err *err)
{
    if (!device || !*device || strcmp(device, "auto") == 0)
        e->device = DEV_AUTO;
    else if (strcmp(device, "cpu") == 0)
        e->device = DEV_CPU;
    else if (strcmp(device, "gpu") == 0)
        e->device = DEV_GPU;
    else
        return kb_err_set(err, KB_ERR_USAGE, "bad KB_EMBED_DEVICE '%s': expected cpu, "
                          "gpu or auto", device);
    return KB_OK;
}

/* The GPU encoder and its buffers; on failure, says why it is the CPU
 * (a warning when the GPU was asked for, a note in auto mode). */
static void start_gpu(kb_embedder *e)
{
    kb_err err;
    kb_err_clear(&err);
    double t0 = kb_now_ms();
    kb_rc rc = kb_bert_gpu_open(e->bert, 0, &e->gpu, &err);
    if (rc == KB_OK) {
        e->gids = malloc((size_t)GPU_BATCH_TEXTS * KB_TOK_MAX_LEN * sizeof *e->gids);
        e->glens = malloc(GPU_BATCH_TEXTS * sizeof *e->glens);
        if (!e->gids || !e->glens)
            rc = kb_err_set(&err, KB_ERR_NOMEM, "out of memory");
    }
    if (rc == KB_OK) {
        kb_log_info("embedding on the GPU (%s, ready in %.1f s)",
                    kb_bert_gpu_name(e->gpu), (kb_now_ms() - t0) / 1000);
        return;
    }
    kb_bert_gpu_free(e->gpu);
    e->gpu = NULL;
    if (e->device == DEV_GPU)
        kb_log_warn("KB_EMBED_DEVICE is gpu, but %s: embedding on the CPU", err.msg);
    else
        kb_log_info("embedding on the CPU: %s", err.msg);
}

size_t kb_embedder_bulk(kb_embedder *e, size_t pending)
{
    if (e->remote || e->device == DEV_CPU)
        return BATCH_TEXTS;
    if (!e->gpu_tried && (e->device == DEV_GPU || pending >= GPU_MIN_TEXTS)) {
        e->gpu_tried = 1;
        start_gpu(e);
    }
    return e->gpu ? GPU_BATCH_TEXTS : BATCH_TEXTS;
}

const char *kb_embedder_device(const kb_embedder *e)
{
    return e->gpu ? kb_bert_gpu_name(e->gpu) : e->remote ? "remote" : "cpu";
}

void kb_embedder_free(kb_embedder *e)
{
    if (!e)
        return;
    kb_bert_gpu_free(e->gpu);
    free(e->gids);
    free(e->glens);
    kb_bert_free(e->bert);
    kb_tokenizer_free(e->tok);
    kb_st_close(&e->st);
    free(e->ids);
    free(e->stamp);
    kb_remote_free(e->rem);
    free(e);
}

int kb_embedder_dim(const kb_embedder *e)
{
    return e->dim;
}

const char *kb_embedder_name(const kb_embedder *e)
{
    return e->name;
}

const char *kb_embedder_weights_hash(const kb_embedder *e)
{
    return e->remote ? "" : e->hash;
}

const kb_tokenizer *kb_embedder_tokenizer(const kb_embedder *e)
{
    return e->remote ? NULL : e->tok;
}

/* Bulk batches on the GPU: GPU_BATCH_TEXTS texts tokenized at a time.
 * A GPU that fails mid-way is let go with a warning, and the CPU does the
 * rest. */
static kb_rc embed_gpu(kb_embedder *e, const char *const *texts, size_t n,
                       float *out, kb_err *err)
{
    for (size_t i = 0; i < n;) {
        size_t nb = 0, used = 0, first = i;
        double t0 = kb_now_ms();
        for (; i < n && nb < GPU_BATCH_TEXTS; i++) {
            size_t len = 0;
            kb_tokenizer_encode(e->tok, texts[i] ? texts[i] : "", e->gids + used,
                                KB_TOK_MAX_LEN, &len);
            e->glens[nb++] = len;
            used += len;
        }
        double t1 = kb_now_ms();
        kb_err gerr;
        kb_err_clear(&gerr);
        kb_rc rc = kb_bert_gpu_encode(e->gpu, e->gids, e->glens, nb,
                                      out + first * KB_BERT_DIM, &gerr);
        kb_log_debug("embedder: %zu texts, %zu tokens: tokenized in %.0f ms, encoded "
                     "on the GPU in %.0f ms", nb, used, t1 - t0, kb_now_ms() - t1);
        if (rc != KB_OK) {
            kb_log_warn("embedding on the GPU failed (%s): going on on the CPU", gerr.msg);
            kb_bert_gpu_free(e->gpu);
            e->gpu = NULL;
            return kb_embedder_embed(e, texts + first, n - first,
                                     out + first * KB_BERT_DIM, err);
        }
    }
    return KB_OK;
}

kb_rc kb_embedder_embed(kb_embedder *e, const char *const *texts, size_t n,
                        float *out, kb_err *err)
{
    if (e->remote)
        return kb_remote_embed(e->rem, texts, n, out, err);
    if (e->gpu && n > 1)
        return embed_gpu(e, texts, n, out, err);
    size_t lens[BATCH_TEXTS];
    size_t i = 0;
    while (i < n) {
        size_t nb = 0, used = 0, first = i;
        while (i < n && nb < BATCH_TEXTS && used + KB_TOK_MAX_LEN <= BATCH_TOKENS) {
            size_t len = 0;
            kb_tokenizer_encode(e->tok, texts[i] ? texts[i] : "", e->ids + used,
                                KB_TOK_MAX_LEN, &len);
            lens[nb++] = len;
            used += len;
            i++;
        }
        kb_rc rc = kb_bert_encode(e->bert, e->ids, lens, nb,
                                  out + first * KB_BERT_DIM, err);
        if (rc != KB_OK)
            return rc;
    }
    return KB_OK;
}
