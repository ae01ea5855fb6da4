/*
 * vec_stamp.c - the verdict on a vector index file, kept in the KB's meta
 * table ("vec_stamp"), so that a fresh `kb query` need not read and hash
 * the whole file (17 MB for the full corpus) nor count the stored vectors
 * before its first vector search.
 *
 * A stamp is written only for a file checked whole (its own digest) that
 * holds every stored vector of its generation: by the writer of the file,
 * or by the first reader that checked a file it found unstamped (a KB
 * copied elsewhere). It names the file's identity - generation, device,
 * inode, size, modification and change times - and the SHA-256 of each
 * 256 KiB block. A reader trusts a file whose identity is the stamp's, and
 * whose first block and one other picked at random still hash as
 * recorded; anything else is checked whole again, and a file that fails
 * that check is never used (the model's weights are kept the same way:
 * embedder.c).
 */
#include "index/index.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STAMP_KEY "vec_stamp"
#define STAMP_BLOCK (256u << 10)

/* The stamp's first line for a file of status st and generation gen. */
static void stamp_head(const struct stat *st, long long gen, char *head, size_t n)
{
    snprintf(head, n, "kb-vec-stamp 1 %lld %llu %llu %lld %lld.%09ld %lld.%09ld\n",
             gen, (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
             (long long)st->st_size, (long long)st->st_mtim.tv_sec,
             (long)st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec,
             (long)st->st_ctim.tv_nsec);
}

static size_t nblocks(size_t size)
{
    return (size + STAMP_BLOCK - 1) / STAMP_BLOCK;
}

char *kb_vec_stamp_make(const struct stat *st, long long gen, const void *data,
                        size_t size, size_t ntotal)
{
    size_t nb = nblocks(size);
    unsigned char (*md)[32] = malloc((nb ? nb : 1) * sizeof *md);
    char head[256];
    stamp_head(st, gen, head, sizeof head);
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = md ? kb_buf_printf(&b, "%s%zu\n", head, ntotal) : KB_ERR_NOMEM;
    if (md)
        kb_sha256_blocks(data, size, STAMP_BLOCK, md);
    for (size_t i = 0; i < nb && rc == KB_OK; i++) {
        char hex[65];
        kb_hex_encode(md[i], sizeof md[i], hex);
        rc = kb_buf_printf(&b, "%s\n", hex);
    }
    free(md);
    return kb_buf_finish(&b, rc);
}

int kb_vec_stamp_check(kb_store *store, const struct stat *st, long long gen,
                       const void *data, size_t *ntotal)
{
    char *stamp = kb_store_meta_get(store, STAMP_KEY);
    char head[256];
    stamp_head(st, gen, head, sizeof head);
    size_t hl = strlen(head), size = (size_t)st->st_size, nb = nblocks(size);
    int ok = stamp && strncmp(stamp, head, hl) == 0;
    char *end = NULL;
    unsigned long long n = ok ? strtoull(stamp + hl, &end, 10) : 0;
    ok = ok && end != stamp + hl && *end == '\n' && n > 0 &&
         strlen(end + 1) == nb * 65;
    const char *hashes = ok ? end + 1 : NULL;
    unsigned seed = (unsigned)getpid() ^ (unsigned)kb_now_ms();
    for (int k = 0; ok && k < 2 && nb; k++) {
        size_t i = k == 0 ? 0 : (size_t)rand_r(&seed) % nb;
        size_t off = i * STAMP_BLOCK;
        size_t len = size - off < STAMP_BLOCK ? size - off : STAMP_BLOCK;
        char hex[65];
        kb_sha256_hex((const char *)data + off, len, hex);
        ok = memcmp(hashes + i * 65, hex, 64) == 0;
    }
    free(stamp);
    if (ok)
        *ntotal = (size_t)n;
    return ok;
}

void kb_vec_stamp_save(kb_store *store, const char *stamp)
{
    kb_err err;
    kb_err_clear(&err);
    if (!store->readonly) {
        if (kb_store_meta_set(store, STAMP_KEY, stamp, &err) != KB_OK)
            kb_log_debug("vector index stamp not saved: %s", err.msg);
        return;
    }
    /* a reader saves it through a writer's handle that never waits: a KB
     * being written keeps the old stamp until the writer's own */
    kb_store *w = NULL;
    if (access(store->dir, W_OK) != 0 || kb_store_open(store->dir, 0, &w, &err) != KB_OK) {
        kb_log_debug("vector index stamp not saved: %s", err.msg);
        return;
    }
    sqlite3_busy_timeout(w->db, 0);
    if (kb_store_meta_set(w, STAMP_KEY, stamp, &err) != KB_OK)
        kb_log_debug("vector index stamp not saved: %s", err.msg);
    kb_store_close(w);
}
