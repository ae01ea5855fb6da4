/* remove.c - kb rm: the documents of a file, folder, URL or source out
 * of the KB, all targets or none, and the vector index after them. */
#include "ingest/ingest_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void kb_rm_result_release(kb_rm_result *r)
{
    for (size_t i = 0; i < r->ndocs; i++)
        free(r->docs[i]);
    free(r->docs);
    free(r->items);
    memset(r, 0, sizeof *r);
}

/* The absolute, link-free spelling of a path that may no longer exist
 * (caller frees; NULL out of memory): its real path, else its folder's
 * real path and its name, else the path made absolute. */
static char *canonical_path(const char *t)
{
    char *canon = realpath(t, NULL);
    if (canon)
        return canon;
    size_t n = strlen(t);
    while (n > 1 && t[n - 1] == '/')
        n--;
    char *copy = kb_strndup(t, n);
    if (!copy)
        return NULL;
    char *slash = strrchr(copy, '/');
    const char *base = slash ? slash + 1 : copy;
    char *dir = slash ? (slash == copy ? kb_strdup("/") : kb_strndup(copy, (size_t)(slash - copy)))
                      : kb_strdup(".");
    char *rdir = dir ? realpath(dir, NULL) : NULL;
    char *out = NULL;
    if (rdir) {
        out = kb_path_join(rdir, base);
    } else if (copy[0] == '/') {
        out = kb_strdup(copy);
    } else {
        char *cwd = getcwd(NULL, 0);
        out = cwd ? kb_path_join(cwd, copy) : NULL;
        free(cwd);
    }
    free(rdir);
    free(dir);
    free(copy);
    return out;
}

/* 1 if id is a source of the KB, 0 if not, -1 on a database error. */
static int is_kb_source(kb_store *store, const char *id)
{
    sqlite3_stmt *st = NULL;
    kb_err e;
    kb_err_clear(&e);
    if (kb_store_prepare(store, "SELECT 1 FROM sources WHERE id = ?", &st, &e) != KB_OK)
        return -1;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    sqlite3_finalize(st);
    return step == SQLITE_ROW ? 1 : step == SQLITE_DONE ? 0 : -1;
}

/* "known sources: a, b" into b, for a target that matched nothing. */
static kb_rc known_sources(kb_store *store, kb_buf *b, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "SELECT id FROM sources ORDER BY id", &st, err);
    size_t n = 0;
    while (rc == KB_OK && sqlite3_step(st) == SQLITE_ROW)
        rc = kb_buf_printf(b, "%s%s", n++ ? ", " : "", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (rc == KB_OK && n == 0)
        rc = kb_buf_puts(b, "none");
    return rc;
}

/* Removes (or with dry_run counts) the documents that target local
 * matches: a source's (source), a URL's, or a path's (key, its canonical
 * spelling) and what lies under it; item counts them, out->docs names
 * them. */
static kb_rc remove_documents(kb_store *store, int source, const char *local,
                              const char *key, int dry_run, kb_rm_item *item,
                              kb_rm_result *out, kb_err *err)
{
    /* ?1 the key (a path: also what lies under it), ?2 as given */
    const char *where = source ? "d.source_id = ?2"
                      : kb_ingest_is_url(local) ? "d.key = ?2 OR d.url = ?2"
                      : "d.key = ?1 OR substr(d.key, 1, length(?1) + 1) = ?1 || '/'"
                        " OR d.key = ?2";
    kb_buf sql;
    kb_buf_init(&sql, 0);
    sqlite3_stmt *sel = NULL, *del = NULL;
    kb_rc rc = kb_buf_printf(&sql, "SELECT d.id, CASE WHEN d.path != '' THEN d.path"
                             " ELSE d.url END, (SELECT count(*) FROM chunks c WHERE"
                             " c.document_id = d.id) FROM documents d WHERE %s"
                             " ORDER BY 2", where);
    if (rc != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = kb_store_prepare(store, sql.data, &sel, err);
    if (rc == KB_OK)
        rc = kb_store_prepare(store, "DELETE FROM documents WHERE id = ?", &del, err);
    if (rc == KB_OK) {
        if (key)
            sqlite3_bind_text(sel, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(sel, 2, local, -1, SQLITE_STATIC);
    }
    int step = SQLITE_DONE;
    while (rc == KB_OK && (step = sqlite3_step(sel)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(sel, 1);
        item->documents++;
        item->chunks += (size_t)sqlite3_column_int64(sel, 2);
        if (KB_GROW(out->docs, out->ndocs + 1, out->capdocs) != KB_OK ||
            !(out->docs[out->ndocs] = kb_strdup(name ? name : ""))) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            break;
        }
        out->ndocs++;
        if (dry_run)
            continue;
        sqlite3_reset(del);
        sqlite3_bind_int64(del, 1, sqlite3_column_int64(sel, 0));
        if (sqlite3_step(del) != SQLITE_DONE)
            rc = kb_store_db_error(store, err, "remove a document");
    }
    if (rc == KB_OK && step != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "find the documents to remove");
    sqlite3_finalize(sel);
    sqlite3_finalize(del);
    kb_buf_release(&sql);
    return rc;
}

/* Removes (or with dry_run counts) the documents of one target; item
 * gets what it matched. as_source: the target is a source id, even where
 * a file or folder of that name exists. */
static kb_rc remove_target(kb_store *store, const char *target, int dry_run, int as_source,
                           kb_rm_item *item, kb_rm_result *out, kb_err *err)
{
    char *local = NULL, *key = NULL;
    kb_rc rc = kb_ingest_target(target, &local, err);
    if (rc != KB_OK)
        return rc;
    struct stat st;
    int exists = !as_source && !kb_ingest_is_url(local) && stat(local, &st) == 0;
    int source = as_source;
    if (as_source) {
        item->what = "source";
    } else if (kb_ingest_is_url(local)) {
        item->what = "URL";
    } else if (!exists && (source = is_kb_source(store, local)) < 0) {
        rc = kb_store_db_error(store, err, "look up a source");
        goto out;
    } else if (source) {
        item->what = "source";
    } else {
        item->what = exists && S_ISDIR(st.st_mode) ? "folder" : "file";
    }
    if (!kb_ingest_is_url(local) && !source && !(key = canonical_path(local))) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    rc = remove_documents(store, source, local, key, dry_run, item, out, err);
    if (rc == KB_OK && source && !dry_run) {
        sqlite3_stmt *ds = NULL;
        rc = kb_store_prepare(store, "DELETE FROM sources WHERE id = ?", &ds, err);
        if (rc == KB_OK) {
            sqlite3_bind_text(ds, 1, local, -1, SQLITE_STATIC);
            if (sqlite3_step(ds) != SQLITE_DONE)
                rc = kb_store_db_error(store, err, "remove a source");
        }
        sqlite3_finalize(ds);
    }
    /* a folder of the source's name (`kb rm skills` in kb's own tree)
     * that holds no ingested file: the source is meant */
    if (rc == KB_OK && !source && exists && item->documents == 0 &&
        is_kb_source(store, local) == 1) {
        free(local);
        free(key);
        return remove_target(store, target, dry_run, 1, item, out, err);
    }
    if (rc == KB_OK && !source && item->documents == 0) {
        kb_buf known;
        kb_buf_init(&known, 4096);
        rc = known_sources(store, &known, err);
        if (rc == KB_OK)
            rc = kb_err_set(err, KB_ERR_NOTFOUND, "'%s' matches nothing in the KB: no "
                            "document, folder or source of that name (sources: %s)",
                            target, known.data);
        kb_buf_release(&known);
    }
out:
    free(local);
    free(key);
    return rc;
}

kb_rc kb_ingest_remove(kb_store *store, char *const *targets, size_t ntargets,
                       int dry_run, kb_rm_result *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    int lock = -1;
    out->items = calloc(ntargets ? ntargets : 1, sizeof *out->items);
    if (!out->items)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    out->n = ntargets;
    kb_rc rc = kb_ingest_lock(store, &lock, err);
    if (rc == KB_OK)
        rc = kb_store_begin(store, err);
    if (rc != KB_OK)
        goto out;
    size_t chunks = 0;
    for (size_t i = 0; i < ntargets && rc == KB_OK; i++) {
        out->items[i].target = targets[i];
        rc = remove_target(store, targets[i], dry_run, 0, &out->items[i], out, err);
        chunks += out->items[i].chunks;
    }
    /* all of it or nothing: a target that matched nothing removes nothing */
    if (rc == KB_OK && !dry_run)
        rc = kb_store_commit(store, err);
    else
        kb_store_rollback(store);
    /* the vectors went with their chunks: the index follows now, not at
     * the next query */
    if (rc == KB_OK && !dry_run && chunks)
        rc = kb_vec_rebuild(store, err);
out:
    if (lock >= 0)
        close(lock);
    return rc;
}
