/* vector.c - the vector index: embeddings stored in SQLite (the source of
 * truth) and a FAISS index built from them, stamped with the generation
 * SQLite holds so a stale or damaged file is rebuilt, never used. */
#include "index/index.h"

#include <cjson/cJSON.h>
#include <faiss/c_api/AutoTune_c.h>
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/error_c.h>
#include <faiss/c_api/index_factory_c.h>
#include <faiss/c_api/index_io_c.h>
#include <faiss/c_api/utils/distances_c.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define EMBED_BATCH 32
#define DEFAULT_INDEX "Flat"

/* The loaded index, parked with the store in its slot VEC_SLOT: FAISS's,
 * or a flat one searched where it lies in the file's mapping (vec_file.c). */
#define VEC_SLOT "index/vector"
struct kb_vec {
    FaissIndex *index;
    int dim;
    long long generation;
    void *map;           /* the file's mapping [map_len] when flat is used */
    size_t map_len;
    kb_vec_flat flat;
};

/* Lets go of what v holds (v itself stays). */
static void vec_drop(struct kb_vec *v)
{
    faiss_Index_free(v->index);
    v->index = NULL;
    if (v->map)
        munmap(v->map, v->map_len);
    v->map = NULL;
}

static void vec_free(void *p)
{
    vec_drop(p);
    free(p);
}

static size_t vec_ntotal(const struct kb_vec *v)
{
    return v->map ? v->flat.n : (size_t)faiss_Index_ntotal(v->index);
}

static int vec_d(const struct kb_vec *v)
{
    return v->map ? v->flat.dim : faiss_Index_d(v->index);
}

/* Parks what *loaded holds (owned from here on, also on failure) as the
 * store's loaded index. */
static kb_rc vec_park(kb_store *store, const struct kb_vec *loaded, kb_err *err)
{
    struct kb_vec *v = calloc(1, sizeof *v);
    if (!v) {
        struct kb_vec gone = *loaded;
        vec_drop(&gone);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    *v = *loaded;
    return kb_store_slot_set(store, VEC_SLOT, v, vec_free, err);
}

/* Parks index (owned from here on, also on failure) as the store's loaded
 * one. */
static kb_rc vec_install(kb_store *store, FaissIndex *index, int dim,
                         long long generation, kb_err *err)
{
    struct kb_vec v = { .index = index, .dim = dim, .generation = generation };
    return vec_park(store, &v, err);
}

kb_rc kb_hits_push(kb_hits *h, int64_t id, double score)
{
    if (KB_GROW(h->items, h->n + 1, h->cap) != KB_OK)
        return KB_ERR_NOMEM;
    h->items[h->n++] = (kb_hit){ .id = id, .score = score };
    return KB_OK;
}

void kb_hits_release(kb_hits *h)
{
    free(h->items);
    memset(h, 0, sizeof *h);
}

/* FAISS's last error without its "Error in SIGNATURE at FILE:LINE: "
 * prefix, which says nothing to a user. */
static const char *faiss_message(void)
{
    const char *msg = faiss_get_last_error();
    if (!msg)
        return "FAISS error";
    const char *at = strncmp(msg, "Error in ", 9) == 0 ? strstr(msg, " at ") : NULL;
    const char *colon = at ? strstr(at, ".cpp:") : NULL;
    if (colon) {
        colon += 5;
        while (*colon >= '0' && *colon <= '9')
            colon++;
        if (colon[0] == ':' && colon[1] == ' ')
            return colon + 2;
    }
    return msg;
}

static kb_rc faiss_error(kb_err *err, const char *what)
{
    return kb_err_set(err, KB_ERR_INDEX, "cannot %s: %s", what, faiss_message());
}

static long long meta_ll(kb_store *store, const char *key)
{
    char *v = kb_store_meta_get(store, key);
    long long n = v ? strtoll(v, NULL, 10) : 0;
    free(v);
    return n;
}

kb_rc kb_vec_count(kb_store *store, size_t *count, kb_err *err)
{
    return kb_store_count(store, "SELECT count(*) FROM embeddings",
                          "count the stored vectors", count, err);
}

int kb_vec_any(kb_store *store)
{
    sqlite3_stmt *st = NULL;
    int any = 0;
    if (sqlite3_prepare_v2(store->db, "SELECT 1 FROM embeddings LIMIT 1", -1, &st,
                           NULL) == SQLITE_OK)
        any = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return any;
}

kb_rc kb_vec_check_embedder(kb_store *store, const kb_embedder *emb,
                            int record, kb_err *err)
{
    char *name = kb_store_meta_get(store, "embedder");
    char *hash = kb_store_meta_get(store, "embedder_hash");
    long long dim = meta_ll(store, "embedder_dim");
    kb_rc rc = KB_OK;
    int have = name && *name && kb_vec_any(store);
    if (have) {
        if (strcmp(name, kb_embedder_name(emb)) != 0 ||
            dim != kb_embedder_dim(emb) ||
            strcmp(hash ? hash : "", kb_embedder_weights_hash(emb)) != 0)
            /* two tuned models share a name: their weights tell them apart */
            rc = kb_err_set(err, KB_ERR_MISMATCH,
                            "the KB's vectors were made by '%s' (%lld dimensions%s%.12s),"
                            " not by '%s' (%d%s%.12s); use that embedder%s, or re-embed"
                            " with 'kb ingest --reembed'", name, dim,
                            hash && *hash ? ", weights " : "", hash ? hash : "",
                            kb_embedder_name(emb), kb_embedder_dim(emb),
                            *kb_embedder_weights_hash(emb) ? ", weights " : "",
                            kb_embedder_weights_hash(emb),
                            strcmp(name, KB_EMBEDDER_TUNED) == 0 ? " (KB_MODEL_DIR: the directory"
                            " kb tune wrote)" : "");
    } else if (record) {
        char d[32];
        snprintf(d, sizeof d, "%d", kb_embedder_dim(emb));
        rc = kb_store_meta_set(store, "embedder", kb_embedder_name(emb), err);
        if (rc == KB_OK)
            rc = kb_store_meta_set(store, "embedder_dim", d, err);
        if (rc == KB_OK)
            rc = kb_store_meta_set(store, "embedder_hash",
                                   kb_embedder_weights_hash(emb), err);
    }
    free(name);
    free(hash);
    return rc;
}

kb_rc kb_vec_clear(kb_store *store, kb_err *err)
{
    kb_vec_release(store);
    kb_rc rc = kb_store_begin(store, err);
    if (rc == KB_OK)
        rc = kb_store_exec(store, "DELETE FROM embeddings;"
                           "DELETE FROM meta WHERE key IN ('embedder',"
                           " 'embedder_dim', 'embedder_hash')", err);
    if (rc == KB_OK)
        rc = kb_store_commit(store, err);
    if (rc != KB_OK)
        kb_store_rollback(store);
    return rc;
}

/* The text the embedder sees for a chunk: its heading path joined with
 * " > " (as the chunker counted it), then the text. Caller frees; NULL
 * when out of memory (never a cut text). */
static char *embed_text(const char *heading_json, const char *text)
{
    kb_buf t;
    kb_buf_init(&t, 0);
    kb_rc rc = KB_OK;
    cJSON *path = cJSON_Parse(heading_json ? heading_json : "[]");
    const cJSON *h;
    cJSON_ArrayForEach(h, path) {
        if (!cJSON_IsString(h))
            continue;
        if (t.len && rc == KB_OK)
            rc = kb_buf_puts(&t, " > ");
        if (rc == KB_OK)
            rc = kb_buf_puts(&t, h->valuestring);
    }
    cJSON_Delete(path);
    if (rc == KB_OK)
        rc = kb_buf_putc(&t, '\n');
    if (rc == KB_OK)
        rc = kb_buf_puts(&t, text ? text : "");
    if (rc != KB_OK) {
        kb_buf_release(&t);
        return NULL;
    }
    return kb_buf_detach(&t);
}

/* One batch's vectors, in one transaction. */
static kb_rc store_vectors(kb_store *store, sqlite3_stmt *ins, const int64_t *ids,
                           const float *vecs, size_t n, int dim, kb_err *err)
{
    kb_rc rc = kb_store_begin(store, err);
    if (rc != KB_OK)
        return rc;
    for (size_t i = 0; i < n && rc == KB_OK; i++) {
        sqlite3_reset(ins);
        sqlite3_bind_int64(ins, 1, ids[i]);
        sqlite3_bind_blob(ins, 2, vecs + i * (size_t)dim,
                          (int)((size_t)dim * sizeof *vecs), SQLITE_STATIC);
        if (sqlite3_step(ins) != SQLITE_DONE)
            rc = kb_store_db_error(store, err, "store an embedding");
    }
    if (rc == KB_OK)
        return kb_store_commit(store, err);
    kb_store_rollback(store);
    return rc;
}

kb_rc kb_vec_embed_pending(kb_store *store, kb_embedder *emb,
                           kb_ingest_progress_fn progress, void *ctx,
                           size_t *embedded, kb_err *err)
{
    *embedded = 0;
    kb_rc rc = kb_vec_check_embedder(store, emb, 1, err);
    if (rc != KB_OK)
        return rc;
    int dim = kb_embedder_dim(emb);
    sqlite3_stmt *sel = NULL, *ins = NULL, *cnt = NULL;
    float *vecs = NULL;
    char **texts = NULL;
    int64_t *ids = NULL;
    double t0 = kb_now_ms();
    size_t total = 0, batch = EMBED_BATCH;
    if ((rc = kb_store_prepare(store, "SELECT count(*) FROM chunks c WHERE NOT "
                               "EXISTS (SELECT 1 FROM embeddings e WHERE "
                               "e.chunk_id = c.id)", &cnt, err)) != KB_OK)
        goto out;
    if (sqlite3_step(cnt) != SQLITE_ROW) {
        rc = kb_store_db_error(store, err, "count the chunks to embed");
        goto out;
    }
    total = (size_t)sqlite3_column_int64(cnt, 0);
    /* a statement left stepped keeps its read snapshot: every later BEGIN
     * IMMEDIATE after another process wrote is SQLITE_BUSY_SNAPSHOT, at
     * once, "database is locked" */
    sqlite3_reset(cnt);
    /* no vector from weights that were only sampled */
    if (total && (rc = kb_embedder_check_weights(emb, err)) != KB_OK)
        goto out;
    /* a GPU takes larger batches */
    if (total)
        batch = kb_embedder_bulk(emb, total);
    vecs = malloc(batch * (size_t)dim * sizeof *vecs);
    texts = calloc(batch, sizeof *texts);
    ids = malloc(batch * sizeof *ids);
    if (!vecs || !texts || !ids) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = kb_store_prepare(store,
            "SELECT c.id, c.heading_path, c.text FROM chunks c WHERE NOT EXISTS"
            " (SELECT 1 FROM embeddings e WHERE e.chunk_id = c.id)"
            " ORDER BY c.id LIMIT ?", &sel, err)) != KB_OK ||
        (rc = kb_store_prepare(store, "INSERT OR REPLACE INTO embeddings(chunk_id,"
                               " vec) VALUES(?, ?)", &ins, err)) != KB_OK)
        goto out;
    kb_ingest_progress pr = { .source = "embeddings", .nsources = 1,
                              .docs_total = total };
    while (rc == KB_OK) {
        size_t n = 0;
        int step = SQLITE_ROW;
        sqlite3_reset(sel);
        sqlite3_bind_int(sel, 1, (int)batch);
        while (n < batch && (step = sqlite3_step(sel)) == SQLITE_ROW) {
            ids[n] = sqlite3_column_int64(sel, 0);
            texts[n] = embed_text((const char *)sqlite3_column_text(sel, 1),
                                  (const char *)sqlite3_column_text(sel, 2));
            if (!texts[n++]) {
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                break;
            }
        }
        if (rc == KB_OK && step != SQLITE_ROW && step != SQLITE_DONE)
            rc = kb_store_db_error(store, err, "read the chunks to embed");
        sqlite3_reset(sel);
        if (rc == KB_OK && n > 0)
            rc = kb_embedder_embed(emb, (const char *const *)texts, n, vecs, err);
        for (size_t i = 0; i < n; i++) {
            free(texts[i]);
            texts[i] = NULL;
        }
        if (rc != KB_OK || n == 0)
            break;
        if ((rc = store_vectors(store, ins, ids, vecs, n, dim, err)) == KB_OK) {
            *embedded += n;
            pr.docs_done = *embedded;
            pr.chunks = *embedded;
            pr.changed = *embedded;
            pr.elapsed_ms = kb_now_ms() - t0;
            if (progress)
                progress(&pr, ctx);
        }
    }
    if (rc == KB_OK && (*embedded > 0 || kb_vec_any(store)))
        rc = kb_vec_rebuild(store, err);
out:
    sqlite3_finalize(cnt);
    sqlite3_finalize(sel);
    sqlite3_finalize(ins);
    free(vecs);
    free(texts);
    free(ids);
    return rc;
}

/* The index file of a generation (caller frees; NULL out of memory). */
static char *index_path(kb_store *store, long long generation)
{
    kb_buf p;
    kb_buf_init(&p, 0);
    kb_rc rc = kb_buf_printf(&p, "%s/vectors.%lld.faiss", store->dir, generation);
    return kb_buf_finish(&p, rc);
}

/* The bytes of the index file for index, trailer included, into out. */
static kb_rc serialize_index(const FaissIndex *index, kb_buf *out, kb_err *err)
{
    char *data = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&data, &len);
    if (!f)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    int bad = faiss_write_index(index, f) != 0;
    if (fclose(f) != 0 && !bad) {
        free(data);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    kb_rc rc = KB_OK;
    if (bad)
        rc = faiss_error(err, "write the vector index");
    else if (kb_vec_file_wrap(data, len, out) != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    free(data);
    return rc;
}

/* How read_index_file may trust a file (NULL: check it whole, say why
 * not in the log). */
typedef struct {
    kb_store *store;
    long long gen;
    int stamped;    /* in: read the file only if its stamp (vec_stamp.c)
                       matches, silently NULL if not; else check it whole
                       and make its stamp */
    size_t count;   /* out (stamped): the vectors the stamp says it holds */
    char *stamp;    /* out (checked whole): its stamp, caller frees */
} vec_trust;

/* The index in the file at path into *v if the file is whole (1), else 0
 * (having said why in the log). The file is mapped, not copied, and
 * checked; a flat index is then searched in that mapping (v->map: with
 * t only, kb_vec_check_file has FAISS read every file), any other given
 * to FAISS from the same memory, so what was checked is what is used. A
 * file over max_bytes is not looked at. */
static int read_index_file(const char *path, size_t max_bytes, vec_trust *t,
                           struct kb_vec *v)
{
    /* O_NONBLOCK: a FIFO planted there must not block the open */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (t && t->stamped)
            return 0;
        if (errno == ENOENT)
            kb_log_debug("vector index '%s' is missing: rebuilding it", path);
        else
            kb_log_warn("cannot open '%s': %s: rebuilding the vector index from"
                        " kb.sqlite", path, strerror(errno));
        return 0;
    }
    FaissIndex *index = NULL;
    struct stat st;
    void *map = MAP_FAILED;
    size_t size = 0, off = 0, len = 0;
    const char *why = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        why = "is not a readable file";
    else if ((size = (size_t)st.st_size) > max_bytes)
        why = "is far larger than its vectors";
    else if (size == 0)
        why = "is empty";
    else if ((map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0)) == MAP_FAILED)
        why = "cannot be mapped";
    else if (t && t->stamped)
        why = kb_vec_stamp_check(t->store, &st, t->gen, map, &t->count)
                  ? kb_vec_file_read(map, size, 0, &off, &len) : "";
    else
        why = kb_vec_file_read(map, size, 1, &off, &len);
    close(fd);
    if (!why && t && kb_vec_flat_open((const char *)map + off, len, &v->flat)) {
        v->map = map;   /* kept: searched where it lies */
        v->map_len = size;
    } else if (!why) {
        FILE *f = fmemopen((char *)map + off, len, "rb");
        if (!f || faiss_read_index(f, 0, &index) != 0) {
            const char *msg = f ? faiss_get_last_error() : NULL;
            kb_log_warn("vector index '%s' cannot be read (%s): rebuilding it"
                        " from kb.sqlite", path, msg ? msg : "out of memory");
            index = NULL;
        }
        if (f)
            fclose(f);
        v->index = index;
    } else if (!t || !t->stamped) {
        kb_log_warn("vector index '%s' %s: rebuilding it from kb.sqlite", path, why);
    }
    int ok = v->index || v->map;
    if (ok && t && !t->stamped)
        t->stamp = kb_vec_stamp_make(&st, t->gen, map, size, vec_ntotal(v));
    if (map != MAP_FAILED && map != v->map)
        munmap(map, size);
    return ok;
}

/* Removes vector files of other generations (they can never be used).
 * The temp files of writers in flight are hidden names (".vectors.N.faiss
 * .tmp.PID.XXXXXX"), never matched here: a concurrent rebuild's file is
 * not pulled from under it; kb_sweep_temp removes those of killed ones. */
static void remove_stale_files(kb_store *store, long long keep)
{
    DIR *d = opendir(store->dir);
    if (!d)
        return;
    char want[64];
    snprintf(want, sizeof want, "vectors.%lld.faiss", keep);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "vectors.", 8) != 0 || strcmp(e->d_name, want) == 0)
            continue;
        /* a later generation's file is a concurrent writer's, still wanted */
        char *end = NULL;
        long long g = strtoll(e->d_name + 8, &end, 10);
        if (end != e->d_name + 8 && g > keep)
            continue;
        char *p = kb_path_join(store->dir, e->d_name);
        if (p)
            unlink(p);
        free(p);
    }
    closedir(d);
}

/* Builds an index in memory from every stored vector, of the factory
 * string kind (NULL: the KB's own). */
static kb_rc build_index(kb_store *store, int dim, const char *kind, FaissIndex **out,
                         kb_err *err)
{
    *out = NULL;
    char *stored = kind ? NULL : kb_store_meta_get(store, "vec_index");
    if (!kind)
        kind = stored && *stored ? stored : DEFAULT_INDEX;
    kb_buf desc;
    kb_buf_init(&desc, 0);
    kb_rc rc = kb_buf_printf(&desc, "IDMap2,%s", kind);
    free(stored);
    FaissIndex *index = NULL;
    sqlite3_stmt *st = NULL;
    float *batch = NULL;
    idx_t *ids = NULL;
    if (rc != KB_OK) {
        rc = kb_err_set(err, rc, "out of memory");
        goto out;
    }
    if (faiss_index_factory(&index, dim, desc.data, METRIC_INNER_PRODUCT) != 0) {
        rc = faiss_error(err, "create the vector index");
        goto out;
    }
    size_t total = 0;
    if ((rc = kb_vec_count(store, &total, err)) != KB_OK)
        goto out;
    batch = malloc((total ? total : 1) * (size_t)dim * sizeof *batch);
    ids = malloc((total ? total : 1) * sizeof *ids);
    if (!batch || !ids) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = kb_store_prepare(store, "SELECT chunk_id, vec FROM embeddings",
                               &st, err)) != KB_OK)
        goto out;
    size_t n = 0;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == total)
            break;   /* more rows than counted: caught below */
        const void *blob = sqlite3_column_blob(st, 1);
        size_t bytes = (size_t)sqlite3_column_bytes(st, 1);
        if (bytes != (size_t)dim * sizeof(float)) {
            rc = kb_err_set(err, KB_ERR_MISMATCH, "a stored vector has %zu bytes, "
                            "not %d dimensions; re-embed with 'kb ingest --reembed'",
                            bytes, dim);
            goto out;
        }
        memcpy(batch + n * (size_t)dim, blob, bytes);
        ids[n++] = (idx_t)sqlite3_column_int64(st, 0);
    }
    if (step != SQLITE_ROW && step != SQLITE_DONE) {
        rc = kb_store_db_error(store, err, "read the stored vectors");
        goto out;
    }
    if (step == SQLITE_ROW || n != total) {
        /* never install an index that lacks vectors as current */
        rc = kb_err_set(err, KB_ERR_DB, "the stored vectors changed while the "
                        "index was built (%zu counted, %s%zu read); run the "
                        "command again", total, step == SQLITE_ROW ? "over " : "", n);
        goto out;
    }
    if (faiss_Index_is_trained(index) == 0 &&
        faiss_Index_train(index, (idx_t)n, batch) != 0) {
        rc = faiss_error(err, "train the vector index");
        goto out;
    }
    if (n && faiss_Index_add_with_ids(index, (idx_t)n, batch, ids) != 0) {
        rc = faiss_error(err, "fill the vector index");
        goto out;
    }
    *out = index;
    index = NULL;
out:
    sqlite3_finalize(st);
    if (index)
        faiss_Index_free(index);
    free(batch);
    free(ids);
    kb_buf_release(&desc);
    return rc;
}

static kb_rc write_and_install(kb_store *store, FaissIndex *index, int dim, kb_err *err);

/* Stamps the index file just written at path (its bytes) for the next
 * process, when it holds every stored vector of generation gen: the
 * vectors did not change while it was built. */
static void stamp_written(kb_store *store, const char *path, long long gen,
                          const kb_buf *bytes, size_t ntotal)
{
    struct stat st;
    size_t count = 0;
    kb_err err;
    kb_err_clear(&err);
    if (stat(path, &st) != 0 || (size_t)st.st_size != bytes->len ||
        kb_vec_count(store, &count, &err) != KB_OK || count != ntotal ||
        meta_ll(store, "vec_generation") != gen)
        return;
    char *stamp = kb_vec_stamp_make(&st, gen, bytes->data, bytes->len, ntotal);
    if (stamp)
        kb_vec_stamp_save(store, stamp);
    free(stamp);
}

kb_rc kb_vec_rebuild(kb_store *store, kb_err *err)
{
    long long dim = meta_ll(store, "embedder_dim");
    if (dim <= 0)
        return KB_OK;   /* no vectors: nothing to build */
    kb_vec_release(store);
    FaissIndex *index = NULL;
    kb_rc rc = build_index(store, (int)dim, NULL, &index, err);
    if (rc != KB_OK)
        return rc;
    return write_and_install(store, index, (int)dim, err);
}

/* Writes index as the current generation's file and installs it (taking
 * it); when only the write fails the index stays installed and the
 * write's error is returned. */
static kb_rc write_and_install(kb_store *store, FaissIndex *index, int dim, kb_err *err)
{
    kb_rc rc = KB_OK;
    long long gen = meta_ll(store, "vec_generation");
    char *path = index_path(store, gen);
    kb_buf bytes;
    kb_buf_init(&bytes, 0);
    if (!path)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    else if ((rc = serialize_index(index, &bytes, err)) == KB_OK &&
             (rc = kb_write_file_atomic(path, bytes.data, bytes.len, err)) == KB_OK) {
        remove_stale_files(store, gen);
        stamp_written(store, path, gen, &bytes, (size_t)faiss_Index_ntotal(index));
    }
    kb_buf_release(&bytes);
    kb_rc irc = vec_install(store, index, dim, gen, err);
    if (rc == KB_OK)
        rc = irc;
    free(path);
    return rc;
}

kb_rc kb_vec_check_index_kind(const char *kind, int dim, kb_err *err)
{
    kb_buf desc;
    kb_buf_init(&desc, 0);
    if (!*kind || kb_buf_printf(&desc, "IDMap2,%s", kind) != KB_OK) {
        kb_buf_release(&desc);
        return kb_err_set(err, *kind ? KB_ERR_NOMEM : KB_ERR_USAGE,
                          *kind ? "out of memory" : "an empty --index");
    }
    FaissIndex *index = NULL;
    kb_rc rc = KB_OK;
    if (faiss_index_factory(&index, dim > 0 ? dim : 384, desc.data,
                            METRIC_INNER_PRODUCT) != 0)
        rc = kb_err_set(err, KB_ERR_USAGE, "bad --index '%s': %s (a FAISS factory "
                        "string: Flat, HNSW32, IVF256,Flat, ...)", kind, faiss_message());
    if (index)
        faiss_Index_free(index);
    kb_buf_release(&desc);
    return rc;
}

kb_rc kb_vec_set_index_kind(kb_store *store, const char *kind, kb_err *err)
{
    char *old = kb_store_meta_get(store, "vec_index");
    const char *was = old && *old ? old : DEFAULT_INDEX;
    long long dim = meta_ll(store, "embedder_dim");
    FaissIndex *index = NULL;
    kb_rc rc = KB_OK;
    if (old && strcmp(old, kind) == 0)
        goto out;
    /* the new index first: one that cannot be built (IVF4096 over a few
     * hundred vectors) leaves the old index and setting as they were */
    if (dim > 0 && kb_vec_any(store)) {
        kb_err berr;
        kb_err_clear(&berr);
        if (build_index(store, (int)dim, kind, &index, &berr) != KB_OK) {
            rc = kb_err_set(err, berr.rc, "%s; the vector index stays '%s'", berr.msg, was);
            goto out;
        }
    }
    if ((rc = kb_store_begin(store, err)) != KB_OK)
        goto out;
    rc = kb_store_meta_set(store, "vec_index", kind, err);
    if (rc == KB_OK)   /* a new kind of index: a new file */
        rc = kb_store_exec(store, "UPDATE meta SET value = CAST(value AS"
                           " INTEGER) + 1 WHERE key = 'vec_generation'", err);
    if (rc == KB_OK)
        rc = kb_store_commit(store, err);
    else
        kb_store_rollback(store);
    if (rc == KB_OK && index) {
        kb_vec_release(store);
        rc = write_and_install(store, index, (int)dim, err);
        index = NULL;
    }
out:
    if (index)
        faiss_Index_free(index);
    free(old);
    return rc;
}

kb_rc kb_vec_check_file(kb_store *store, kb_err *err)
{
    long long dim = meta_ll(store, "embedder_dim");
    size_t count = 0;
    kb_rc rc = kb_vec_count(store, &count, err);
    if (rc != KB_OK || dim <= 0 || count == 0)
        return rc;
    long long gen = meta_ll(store, "vec_generation");
    char *path = index_path(store, gen);
    if (!path)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (access(path, F_OK) != 0) {
        rc = kb_err_set(err, KB_ERR_INDEX, "'%s' is missing (stale or never written): "
                        "the next query rebuilds it", path);
    } else {
        size_t max_bytes = (count + 1) * ((size_t)dim * sizeof(float) + 1024) + (1u << 20);
        struct kb_vec v = { 0 };
        if (!read_index_file(path, max_bytes, NULL, &v))
            rc = kb_err_set(err, KB_ERR_INDEX, "'%s' cannot be used (see above): the "
                            "next query rebuilds it", path);
        else if (vec_d(&v) != dim || vec_ntotal(&v) != count)
            rc = kb_err_set(err, KB_ERR_INDEX, "'%s' holds %zu vectors, not %zu: the "
                            "next query rebuilds it", path, vec_ntotal(&v), count);
        vec_drop(&v);
    }
    free(path);
    return rc;
}

void kb_vec_release(kb_store *store)
{
    kb_store_slot_clear(store, VEC_SLOT);
}

/* Loads the index file of the current generation, or rebuilds the index
 * from SQLite when the file is missing, stale or damaged. */
static kb_rc vec_load(kb_store *store, int dim, kb_err *err)
{
    long long gen = meta_ll(store, "vec_generation");
    struct kb_vec *loaded = kb_store_slot_get(store, VEC_SLOT);
    if (loaded && loaded->generation == gen)
        return KB_OK;
    kb_vec_release(store);
    char *path = index_path(store, gen);
    if (!path)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    /* a stamped file is trusted as it stands; else the vectors are
     * counted (a scan of the table) and the file checked whole, once per
     * load, not per query */
    vec_trust t = { store, gen, 1, 0, NULL };
    struct kb_vec v = { .dim = dim, .generation = gen };
    int ok = read_index_file(path, SIZE_MAX, &t, &v);
    size_t count = t.count;
    if (ok && (vec_d(&v) != dim || vec_ntotal(&v) != count)) {
        vec_drop(&v);   /* the stamp of another file */
        ok = 0;
    }
    if (!ok) {
        kb_rc crc = kb_vec_count(store, &count, err);
        if (crc != KB_OK) {
            free(path);
            return crc;
        }
        /* FAISS's own bytes for a flat index, with room for a graph's links */
        size_t max_bytes = (count + 1) * ((size_t)dim * sizeof(float) + 1024) + (1u << 20);
        t.stamped = 0;
        ok = read_index_file(path, max_bytes, &t, &v);
    }
    if (ok && (vec_d(&v) != dim || vec_ntotal(&v) != count)) {
        kb_log_warn("vector index '%s' holds %zu vectors of %d dimensions, not"
                    " %zu of %d: rebuilding it from kb.sqlite", path,
                    vec_ntotal(&v), vec_d(&v), count, dim);
        vec_drop(&v);
        ok = 0;
    } else if (ok && t.stamp) {
        kb_vec_stamp_save(store, t.stamp);
    }
    free(t.stamp);
    free(path);
    if (ok)
        return vec_park(store, &v, err);
    if (!store->readonly || access(store->dir, W_OK) == 0) {
        /* a derived file: any process that can write the folder may
         * refresh it */
        kb_err werr;
        kb_err_clear(&werr);
        kb_rc wrc = kb_vec_rebuild(store, &werr);
        if (kb_store_slot_get(store, VEC_SLOT)) {
            /* built but not written: serve it from memory, say why the
             * next process will have to build it again */
            if (wrc != KB_OK)
                kb_log_warn("%s", werr.msg);
            return KB_OK;
        }
        if (wrc != KB_OK)   /* the build itself failed: so would another */
            return kb_err_set(err, wrc, "%s", werr.msg);
    }
    FaissIndex *index = NULL;
    kb_rc rc = build_index(store, dim, NULL, &index, err);
    if (rc != KB_OK)
        return rc;
    return vec_install(store, index, dim, gen, err);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The sorted ids of the chunks the filter allows. */
static kb_rc allowed_ids(kb_store *store, const kb_filter *filter,
                         int64_t **ids, size_t *n, kb_err *err)
{
    kb_buf sql;
    kb_buf_init(&sql, 0);
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_buf_puts(&sql, "SELECT c.id FROM chunks c JOIN documents d"
                                 " ON d.id = c.document_id WHERE 1");
    if (rc == KB_OK)
        rc = kb_filter_sql(filter, &sql);
    if (rc != KB_OK) {
        kb_buf_release(&sql);
        return kb_err_set(err, rc, "out of memory");
    }
    rc = kb_store_prepare(store, sql.data, &st, err);
    kb_buf_release(&sql);
    if (rc != KB_OK)
        return rc;
    kb_filter_bind(st, filter, 1);
    size_t cap = 0;
    *n = 0;
    *ids = NULL;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        /* never a cut list: it would drop allowed chunks */
        if ((rc = KB_GROW(*ids, *n + 1, cap)) != KB_OK)
            break;
        (*ids)[(*n)++] = sqlite3_column_int64(st, 0);
    }
    if (rc != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    else if (step != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "read the chunks the filters allow");
    sqlite3_finalize(st);
    if (rc != KB_OK) {
        free(*ids);
        *ids = NULL;
        *n = 0;
        return rc;
    }
    if (*n > 1)   /* qsort of NULL, 0 is undefined */
        qsort(*ids, *n, sizeof **ids, cmp_i64);
    return KB_OK;
}

kb_rc kb_vec_search(kb_store *store, const float *q, int dim, size_t k,
                    const kb_filter *filter, kb_hits *out, kb_err *err)
{
    kb_rc rc = vec_load(store, dim, err);
    if (rc != KB_OK)
        return rc;
    const struct kb_vec *v = kb_store_slot_get(store, VEC_SLOT);
    size_t total = vec_ntotal(v);
    int filtered = filter && !kb_filter_is_empty(filter);
    int64_t *allowed = NULL;
    size_t nallowed = 0;
    if (filtered && (rc = allowed_ids(store, filter, &allowed, &nallowed, err)) != KB_OK)
        return rc;
    /* with filters, search deep enough that k allowed hits survive */
    size_t want = filtered ? (total < 200000 ? total : k * 50) : k;
    if (want > total)
        want = total;
    if (want == 0) {
        free(allowed);
        return KB_OK;
    }
    float *dist = malloc(want * sizeof *dist);
    idx_t *labels = malloc(want * sizeof *labels);
    if (!dist || !labels) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (v->map) {
        if (kb_vec_flat_search(&v->flat, q, want, dist, labels) != KB_OK) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            goto out;
        }
    } else {
        /* one query over a few ten thousand vectors: OpenMP's thread
         * start-up costs more than it saves (10 ms of a 28 ms query here),
         * and BLAS's matrix-vector product beats FAISS's own scan even for
         * one query (1.4 against 4 ms over 10,800 vectors) */
        omp_set_num_threads(1);
        faiss_set_distance_compute_blas_threshold(1);
        if (faiss_Index_search(v->index, 1, q, (idx_t)want, dist, labels) != 0) {
            rc = faiss_error(err, "search the vector index");
            goto out;
        }
    }
    for (size_t i = 0; i < want && out->n < k; i++) {
        if (labels[i] < 0)
            continue;
        int64_t id = (int64_t)labels[i];
        if (filtered && (!nallowed || !bsearch(&id, allowed, nallowed, sizeof *allowed, cmp_i64)))
            continue;
        if ((rc = kb_hits_push(out, id, dist[i])) != KB_OK)
            break;
    }
out:
    free(dist);
    free(labels);
    free(allowed);
    return rc;
}

kb_rc kb_vec_keep_document(kb_store *store, const char *source, const char *key,
                           kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_exec(store, "CREATE TEMP TABLE IF NOT EXISTS kept_vectors("
                             "heading_path TEXT, text TEXT, vec BLOB);"
                             "CREATE INDEX IF NOT EXISTS temp.kept_by_heading"
                             " ON kept_vectors(heading_path);"
                             "DELETE FROM temp.kept_vectors", err);
    if (rc == KB_OK)
        rc = kb_store_prepare(store, "INSERT INTO temp.kept_vectors"
            " SELECT c.heading_path, c.text, e.vec FROM documents d"
            " JOIN chunks c ON c.document_id = d.id"
            " JOIN embeddings e ON e.chunk_id = c.id"
            " WHERE d.source_id = ? AND d.key = ?", &st, err);
    if (rc == KB_OK) {
        sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = kb_store_db_error(store, err, "keep a document's vectors");
    }
    sqlite3_finalize(st);
    return rc;
}

kb_rc kb_vec_restore_document(kb_store *store, int64_t doc_id, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "INSERT OR IGNORE INTO embeddings(chunk_id, vec)"
        " SELECT c.id, (SELECT k.vec FROM temp.kept_vectors k"
        "  WHERE k.heading_path = c.heading_path AND k.text = c.text LIMIT 1)"
        " AS v FROM chunks c WHERE c.document_id = ? AND v IS NOT NULL", &st, err);
    if (rc == KB_OK) {
        sqlite3_bind_int64(st, 1, doc_id);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = kb_store_db_error(store, err, "restore a document's vectors");
    }
    sqlite3_finalize(st);
    if (rc == KB_OK)
        rc = kb_store_exec(store, "DELETE FROM temp.kept_vectors", err);
    return rc;
}
