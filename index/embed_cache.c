/* embed_cache.c - the process's cache of query embeddings (kb.h,
 * kb_embedder_embed_queries): every search in the process - each of a
 * server's workers, kb mcp, the generator's prompt - asks it first, so a
 * query text is embedded once, whoever asks again. */
#include "kb/kb.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static kb_lru *shared;
static pthread_once_t shared_once = PTHREAD_ONCE_INIT;

static void shared_open(void)
{
    shared = kb_lru_new(KB_EMBED_CACHE_BYTES);   /* NULL: no cache, no harm */
}

kb_lru *kb_embed_cache(void)
{
    pthread_once(&shared_once, shared_open);
    return shared;
}

/* The cache's key of text for e: the embedder's identity (name, weights,
 * dimension), then the text exactly as the embedder gets it. */
static kb_rc key_of(const kb_embedder *e, const char *text, kb_buf *key)
{
    kb_buf_reset(key);
    return kb_buf_printf(key, "%s\n%s\n%d\n%s", kb_embedder_name(e),
                         kb_embedder_weights_hash(e), kb_embedder_dim(e), text);
}

kb_rc kb_embedder_embed_queries(kb_embedder *e, const char *const *texts, size_t n,
                                float *out, kb_err *err)
{
    kb_lru *c = kb_embed_cache();
    if (!c)
        return kb_embedder_embed(e, texts, n, out, err);
    size_t dim = (size_t)kb_embedder_dim(e), nmiss = 0;
    const char **miss = malloc(n * sizeof *miss);
    size_t *row = malloc(n * sizeof *row);
    kb_buf key;
    kb_buf_init(&key, 0);
    kb_rc rc = miss && row ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; rc == KB_OK && i < n; i++) {
        void *v = NULL;
        size_t len = 0;
        if ((rc = key_of(e, texts[i], &key)) != KB_OK) {
            kb_err_set(err, rc, "out of memory");
            break;
        }
        if (kb_lru_get(c, key.data, key.len, &v, &len) == KB_OK && len == dim * sizeof *out) {
            memcpy(out + i * dim, v, len);
        } else {
            miss[nmiss] = texts[i];
            row[nmiss++] = i;
        }
        free(v);
    }
    float *fresh = rc == KB_OK && nmiss ? malloc(nmiss * dim * sizeof *fresh) : NULL;
    if (rc == KB_OK && nmiss && !fresh)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && nmiss)
        rc = kb_embedder_embed(e, miss, nmiss, fresh, err);
    for (size_t j = 0; rc == KB_OK && j < nmiss; j++) {
        memcpy(out + row[j] * dim, fresh + j * dim, dim * sizeof *out);
        /* a put that fails for want of memory only loses the caching */
        if (key_of(e, miss[j], &key) == KB_OK &&
            kb_lru_put(c, key.data, key.len, fresh + j * dim, dim * sizeof *out) != KB_OK)
            break;
    }
    kb_buf_release(&key);
    free(fresh);
    free(miss);
    free(row);
    return rc;
}
