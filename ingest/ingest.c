/* ingest.c - the ingest driver: sources -> documents -> parse -> chunk ->
 * store, one transaction per document, incremental by content hash. */
#include "ingest/ingest_int.h"
#include "kb/config.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


/* Documents larger than this are refused with a clear error. */
#define KB_MAX_DOC_BYTES (32u << 20)

/* Bump whenever parsing or chunking changes what a document becomes. The
 * stored hash covers it, so a KB ingested by an older kb has each document
 * read again once, instead of keeping its old chunks as "unchanged". */
#define KB_INGEST_VERSION 5   /* 2: CUDA anchors by line; 3: chunks fit the window;
                                 4: code chunks however short, one-page
                                 sources' titles; 5: Markdown spans apart,
                                 captions with their code */

/* One document to look at: where its bytes are and how results cite it. */
typedef struct {
    char *key;        /* unique within the source */
    char *file;       /* local file to read, or NULL to fetch url */
    char *path;       /* reported 'path' ("" for fetched documents) */
    char *url;        /* citation URL (no anchor) */
    char *fetch;      /* where to fetch it, when not url (NULL: url) */
} doc_ref;

typedef struct {
    doc_ref *items;
    size_t n, cap;
    size_t failed;    /* folders that could not be listed: their
                         documents are neither read nor removed */
    kb_err first;     /* why the first of them could not */
} doc_list;

static void doc_list_release(doc_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].key);
        free(l->items[i].file);
        free(l->items[i].path);
        free(l->items[i].url);
        free(l->items[i].fetch);
    }
    free(l->items);
    memset(l, 0, sizeof *l);
}

static kb_rc doc_list_add(doc_list *l, const char *key, const char *file,
                          const char *path, const char *url, kb_err *err)
{
    if (KB_GROW(l->items, l->n + 1, l->cap) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    doc_ref *d = &l->items[l->n++];
    d->key = kb_strdup(key);
    d->file = file ? kb_strdup(file) : NULL;
    d->path = kb_strdup(path ? path : "");
    d->url = kb_strdup(url ? url : "");
    d->fetch = NULL;
    if (!d->key || (file && !d->file) || !d->path || !d->url)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory"); /* released with the list */
    return KB_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends path to b as a URL's path: bytes other than letters, digits,
 * "/" and "-._~!$&'()*+,;=:@" percent-encoded (a space, a line break, a
 * '#' or '?' in a file name would otherwise break the link). */
static kb_rc put_url_path(kb_buf *b, const char *path)
{
    static const char safe[] = "/-._~!$&'()*+,;=:@";
    kb_rc rc = KB_OK;
    for (const unsigned char *p = (const unsigned char *)path; *p && rc == KB_OK; p++)
        rc = isalnum(*p) || (*p < 0x80 && strchr(safe, *p))
                 ? kb_buf_putc(b, (char)*p) : kb_buf_printf(b, "%%%02X", *p);
    return rc;
}

/* base + "/" + rel as a URL, rel encoded (caller frees; NULL out of
 * memory). */
static char *url_join(const char *base, const char *rel)
{
    kb_buf u;
    kb_buf_init(&u, 0);
    size_t n = strlen(base);
    while (n && base[n - 1] == '/')
        n--;
    kb_rc rc = kb_buf_append(&u, base, n);
    if (rc == KB_OK)
        rc = kb_buf_putc(&u, '/');
    if (rc == KB_OK)
        rc = put_url_path(&u, rel);
    return kb_buf_finish(&u, rc);
}

/* A walk of a folder tree. Every folder is read once, known by device and
 * inode, so a link back up (`self -> .`, `sub/up -> ..`) cannot make the
 * walk endless and two ways to one folder do not store its files twice.
 * Links to folders are followed after every folder reached without one,
 * so a file is cited by its own path, not a link's. */
typedef struct {
    const char *format;      /* the source's format hint */
    const char *folder_url;  /* the URL that the tree's files hang under */
    doc_list *out;
    struct { dev_t dev; ino_t ino; } *dirs;
    size_t ndirs, capdirs;
    struct { char *full, *rel, *url_rel; } *links;
    size_t nlinks, caplinks;
    size_t failed;           /* subfolders that could not be read */
    kb_err first;            /* the first of them */
} walk;

/* Adds st's folder to the walk: 1 if it is new, 0 if it was read
 * already, -1 on no memory. */
static int walk_enter(walk *w, const struct stat *st)
{
    for (size_t i = 0; i < w->ndirs; i++)
        if (w->dirs[i].dev == st->st_dev && w->dirs[i].ino == st->st_ino)
            return 0;
    if (KB_GROW(w->dirs, w->ndirs + 1, w->capdirs) != KB_OK)
        return -1;
    w->dirs[w->ndirs].dev = st->st_dev;
    w->dirs[w->ndirs].ino = st->st_ino;
    w->ndirs++;
    return 1;
}

/* Keeps a link to a folder for later; takes the three strings. */
static kb_rc walk_defer(walk *w, char *full, char *rel, char *url_rel, kb_err *err)
{
    if (KB_GROW(w->links, w->nlinks + 1, w->caplinks) != KB_OK) {
        free(full);
        free(rel);
        free(url_rel);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    w->links[w->nlinks].full = full;
    w->links[w->nlinks].rel = rel;
    w->links[w->nlinks].url_rel = url_rel;
    w->nlinks++;
    return KB_OK;
}

static kb_rc walk_folder(walk *w, const char *dir, const char *rel,
                         const char *url_rel, kb_err *err);

/* walk_folder of a folder below the walk's root: one that cannot be read
 * is counted and reported, and the others proceed. */
static kb_rc walk_subfolder(walk *w, const char *dir, const char *rel,
                            const char *url_rel, kb_err *err)
{
    kb_err serr;
    kb_err_clear(&serr);
    kb_rc rc = walk_folder(w, dir, rel, url_rel, &serr);
    if (rc == KB_ERR_IO) {
        kb_log_warn("%s", serr.msg);
        if (w->failed++ == 0)
            kb_err_set(&w->first, rc, "%s", serr.msg);
        return KB_OK;
    }
    if (rc != KB_OK)
        kb_err_set(err, rc, "%s", serr.msg);
    return rc;
}

/* Adds every supported file under dir (sorted, hidden entries skipped) to
 * the walk; links to folders are kept for later. rel is dir's path
 * relative to the mirror root, url_rel its path under the folder URL. */
static kb_rc walk_folder(walk *w, const char *dir, const char *rel,
                         const char *url_rel, kb_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return kb_err_set(err, KB_ERR_IO, "cannot open folder '%s': %s", dir,
                          strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (KB_GROW(names, n + 1, cap) != KB_OK)
            break;
        if ((names[n] = kb_strdup(e->d_name)) == NULL)
            break;
        n++;
    }
    closedir(d);
    if (e) {
        /* a short listing would let the prune remove documents */
        for (size_t i = 0; i < n; i++)
            free(names[i]);
        free(names);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory listing '%s'", dir);
    }
    qsort(names, n, sizeof *names, cmp_str);
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < n; i++) {
        char *full = kb_path_join(dir, names[i]);
        char *r = kb_path_join(rel, names[i]);
        char *ur = *url_rel ? kb_path_join(url_rel, names[i]) : kb_strdup(names[i]);
        struct stat lst, st;
        if (!full || !r || !ur) {
            if (rc == KB_OK)
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        } else if (rc != KB_OK || lstat(full, &lst) != 0 || stat(full, &st) != 0) {
            /* after a failure, or a dangling link: nothing to add */
        } else if (S_ISDIR(st.st_mode) && S_ISLNK(lst.st_mode)) {
            rc = walk_defer(w, full, r, ur, err);
            full = r = ur = NULL;
        } else if (S_ISDIR(st.st_mode)) {
            int added = walk_enter(w, &st);
            if (added < 0)
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            else if (added)
                rc = walk_subfolder(w, full, r, ur, err);
        } else if (S_ISREG(st.st_mode) && kb_parser_for(full, w->format)) {
            char *url = *w->folder_url ? url_join(w->folder_url, ur) : kb_strdup("");
            rc = url ? doc_list_add(w->out, r, full, r, url, err)
                     : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            free(url);
        }
        free(full);
        free(r);
        free(ur);
        free(names[i]);
    }
    free(names);
    return rc;
}

/* Every supported file of the tree at dir (a folder: st, from stat), its
 * own folders first, then those reached through links, each once. A
 * subfolder that cannot be read is counted in out->failed (out->first
 * says why) and the rest is listed. */
static kb_rc walk_tree(const char *dir, const struct stat *st, const char *rel,
                       const char *format, const char *folder_url, doc_list *out,
                       kb_err *err)
{
    walk w = { .format = format, .folder_url = folder_url, .out = out };
    kb_err_clear(&w.first);
    kb_rc rc = walk_enter(&w, st) < 0
                   ? kb_err_set(err, KB_ERR_NOMEM, "out of memory")
                   : walk_folder(&w, dir, rel, "", err);
    /* links found while following links are appended: read them too */
    for (size_t i = 0; i < w.nlinks && rc == KB_OK; i++) {
        const char *full = w.links[i].full;
        struct stat lst;
        int added = stat(full, &lst) == 0 ? walk_enter(&w, &lst) : 0;
        if (added < 0)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        else if (added)
            rc = walk_subfolder(&w, full, w.links[i].rel, w.links[i].url_rel, err);
        else
            kb_log_warn("skipping '%s': a link to a folder already read", full);
    }
    if (w.failed && out->failed == 0)
        kb_err_set(&out->first, w.first.rc, "%s", w.first.msg);
    out->failed += w.failed;
    for (size_t i = 0; i < w.nlinks; i++) {
        free(w.links[i].full);
        free(w.links[i].rel);
        free(w.links[i].url_rel);
    }
    free(w.links);
    free(w.dirs);
    return rc;
}

static char *file_url(const char *path);

/* The documents of a local source: its paths in the folder that holds the
 * manifest, each reported (and keyed) from the folder above it
 * ("corpus/skills/x/SKILL.md" for corpus/sources.json, whatever the working
 * directory), cited under files_url when the source has one, else by
 * file:// URL. */
static kb_rc list_local_docs(const kb_source *src, const char *manifest_path,
                             doc_list *out, kb_err *err)
{
    const char *slash = strrchr(manifest_path, '/');
    char *mdir = slash ? kb_strndup(manifest_path, (size_t)(slash - manifest_path))
                       : kb_strdup(".");
    char *real = mdir ? realpath(*mdir ? mdir : "/", NULL) : NULL;
    const char *top = real ? kb_ingest_basename(real) : "";
    kb_rc rc = mdir ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < src->nlocal && rc == KB_OK; i++) {
        const char *l = src->local[i];
        size_t ll = strlen(l);
        while (ll > 1 && l[ll - 1] == '/')
            ll--;
        char *lp = kb_strndup(l, ll);
        char *full = lp ? kb_path_join(mdir, lp) : NULL;
        char *rel = lp && *top && strcmp(top, "/") ? kb_path_join(top, lp)
                                                   : (lp ? kb_strdup(lp) : NULL);
        struct stat st;
        if (!full || !rel) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        } else if (stat(full, &st) != 0) {
            rc = kb_err_set(err, KB_ERR_IO, "cannot find '%s' beside the manifest "
                            "'%s': %s", l, manifest_path, strerror(errno));
        } else {
            char *url = *src->files_url ? (S_ISDIR(st.st_mode) ? kb_strdup(src->files_url)
                                                                : url_join(src->files_url, lp))
                                        : file_url(full);
            if (!url)
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            else if (S_ISDIR(st.st_mode))
                rc = walk_tree(full, &st, rel, src->format, url, out, err);
            else
                rc = doc_list_add(out, rel, full, rel, url, err);
            free(url);
        }
        free(lp);
        free(full);
        free(rel);
    }
    free(real);
    free(mdir);
    return rc;
}

/* The documents of a manifest source: its local files (beside the
 * manifest), its mirror files when a mirror is given, else its URL. */
static kb_rc list_source_docs(const kb_source *src, const char *manifest_path,
                              const char *mirror, doc_list *out, kb_err *err)
{
    if (src->nlocal > 0)
        return list_local_docs(src, manifest_path, out, err);
    if (mirror && src->nmirror > 0) {
        for (size_t i = 0; i < src->nmirror; i++) {
            const char *m = src->mirror[i];
            char *full = kb_path_join(mirror, m);
            size_t ml = strlen(m);
            kb_rc rc = KB_OK;
            struct stat st;
            if (stat(full, &st) != 0) {
                rc = kb_err_set(err, KB_ERR_IO, "cannot find '%s' in the mirror "
                                "'%s': %s", m, mirror, strerror(errno));
            } else if (m[ml - 1] == '/' || S_ISDIR(st.st_mode)) {
                char *rel = kb_strndup(m, m[ml - 1] == '/' ? ml - 1 : ml);
                rc = walk_tree(full, &st, rel, src->format,
                               *src->files_url ? src->files_url : src->url, out, err);
                free(rel);
            } else {
                rc = doc_list_add(out, m, full, m, src->url, err);
            }
            free(full);
            if (rc != KB_OK)
                return rc;
        }
        return KB_OK;
    }
    if (!*src->url)
        return kb_err_set(err, KB_ERR_USAGE, "source '%s' has no URL and no "
                          "mirror was given (--mirror DIR or KB_MIRROR)", src->id);
    /* a folder's URL is a repository's web page, not its files: ingesting
     * that page would fill the KB with the site's navigation */
    for (size_t i = 0; i < src->nmirror; i++) {
        size_t ml = strlen(src->mirror[i]);
        if (ml && src->mirror[i][ml - 1] == '/')
            return kb_err_set(err, KB_ERR_USAGE, "source '%s' is a folder ('%s'): "
                              "it is read from a mirror (--mirror DIR or "
                              "KB_MIRROR), not fetched", src->id, src->mirror[i]);
    }
    kb_rc rc = doc_list_add(out, src->url, NULL, "", src->url, err);
    if (rc == KB_OK && *src->fetch_url &&
        (out->items[out->n - 1].fetch = kb_strdup(src->fetch_url)) == NULL)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return rc;
}

static kb_rc upsert_source(kb_store *store, const char *id, const char *title,
                           const char *url, const char *format,
                           const char *version, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store,
        "INSERT INTO sources(id, title, url, format, version) VALUES(?,?,?,?,?) "
        "ON CONFLICT(id) DO UPDATE SET title = excluded.title, url = excluded.url,"
        " format = excluded.format, version = excluded.version", &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, title, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, url, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, format, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, version, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "record a source");
    sqlite3_finalize(st);
    return rc;
}

/* Records a source's pass: when it ran, and its first error (NULL: none). */
static kb_rc finish_source(kb_store *store, const char *id, const char *error,
                           kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "UPDATE sources SET last_ingest = ?,"
                                " last_error = ? WHERE id = ?", &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)time(NULL));
    if (error)
        sqlite3_bind_text(st, 2, error, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 2);
    sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "record a source's pass");
    sqlite3_finalize(st);
    return rc;
}

/* The stored hash of a document into *hash (caller frees), NULL if it is
 * not in the KB. */
static kb_rc stored_hash(kb_store *store, const char *source, const char *key,
                         char **hash, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    *hash = NULL;
    kb_rc rc = kb_store_prepare(store, "SELECT content_hash FROM documents "
                                "WHERE source_id = ? AND key = ?", &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        const char *h = (const char *)sqlite3_column_text(st, 0);
        if (h && (*hash = kb_strdup(h)) == NULL)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    } else if (step != SQLITE_DONE) {
        rc = kb_store_db_error(store, err, "read a document's hash");
    }
    sqlite3_finalize(st);
    return rc;
}

/* Points an unchanged document at its URL from the manifest, where that
 * moved (a source's files_url set or corrected). */
static kb_rc update_url(kb_store *store, const char *source, const char *key,
                        const char *url, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "UPDATE documents SET url = ?1 WHERE"
                                " source_id = ?2 AND key = ?3 AND url IS NOT ?1",
                                &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_text(st, 1, url, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, source, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "update a document's URL");
    sqlite3_finalize(st);
    return rc;
}

static char *paper_links_json(const kb_paper *p)
{
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; i < p->nlinks; i++)
        if (!cJSON_GetObjectItemCaseSensitive(o, p->links[i].label))
            cJSON_AddStringToObject(o, p->links[i].label, p->links[i].url);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The paper's section path: its heading path without the title itself
 * (caller frees; NULL out of memory). */
static char *paper_section(const kb_block *b)
{
    kb_buf t;
    kb_buf_init(&t, 0);
    kb_rc rc = KB_OK;
    for (size_t i = 0; rc == KB_OK && i + 1 < b->depth; i++) {
        if (i)
            rc = kb_buf_puts(&t, " > ");
        if (rc == KB_OK)
            rc = kb_buf_puts(&t, b->heading[i]);
    }
    return kb_buf_finish(&t, rc);
}

/* The paper record of chunk c (chunk_id), through the prepared ins. */
static kb_rc write_paper(kb_store *store, sqlite3_stmt *ins, sqlite3_int64 chunk_id,
                         const kb_chunk *c, kb_err *err)
{
    char *links = paper_links_json(c->paper);
    char *section = paper_section(c->first);
    kb_rc rc = KB_OK;
    if (!section) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    sqlite3_reset(ins);
    sqlite3_bind_int64(ins, 1, chunk_id);
    sqlite3_bind_text(ins, 2, c->paper->date, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 3, c->paper->title, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 4, section, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 5, links ? links : "{}", -1, SQLITE_STATIC);
    if (sqlite3_step(ins) != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "write a paper record");
out:
    free(links);
    free(section);
    return rc;
}

/* The chunks of document doc_id, each with its FTS row and, for a paper,
 * its record, through the prepared ins_chunk and ins_paper. */
static kb_rc write_chunks(kb_store *store, sqlite3_stmt *ins_chunk,
                          sqlite3_stmt *ins_paper, sqlite3_int64 doc_id,
                          const kb_chunks *chunks, kb_err *err)
{
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < chunks->n && rc == KB_OK; i++) {
        const kb_chunk *c = &chunks->items[i];
        sqlite3_reset(ins_chunk);
        sqlite3_bind_int64(ins_chunk, 1, doc_id);
        sqlite3_bind_int64(ins_chunk, 2, (sqlite3_int64)i);
        sqlite3_bind_text(ins_chunk, 3, kb_kind_name(c->kind), -1, SQLITE_STATIC);
        sqlite3_bind_text(ins_chunk, 4, c->heading_json, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins_chunk, 5, c->anchor, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins_chunk, 6, c->text, -1, SQLITE_STATIC);
        sqlite3_bind_int(ins_chunk, 7, c->tokens);
        if (sqlite3_step(ins_chunk) != SQLITE_DONE)
            return kb_store_db_error(store, err, "write a chunk");
        sqlite3_int64 chunk_id = sqlite3_last_insert_rowid(store->db);
        const kb_block *b = c->first;
        rc = kb_fts_add(store, chunk_id, c->depth ? b->heading[c->depth - 1] : "",
                        c->heading_text, c->text, err);
        if (rc == KB_OK && c->paper)
            rc = write_paper(store, ins_paper, chunk_id, c, err);
    }
    return rc;
}

/* Replaces a document and its chunks in one transaction. */
static kb_rc store_document(kb_store *store, const char *source,
                            const doc_ref *ref, const char *hash,
                            const kb_doc *doc, const kb_chunks *chunks,
                            const kb_fetch_result *fetched, kb_err *err)
{
    sqlite3_stmt *del = NULL, *ins_doc = NULL, *ins_chunk = NULL, *ins_paper = NULL;
    kb_rc rc = kb_store_begin(store, err);
    if (rc != KB_OK)
        return rc;
    if ((rc = kb_store_prepare(store, "DELETE FROM documents WHERE source_id = ? "
                               "AND key = ?", &del, err)) != KB_OK ||
        (rc = kb_store_prepare(store, "INSERT INTO documents(source_id, key, path,"
                               " url, title, content_hash, etag, last_modified,"
                               " fetched_at, indexed_at) VALUES(?,?,?,?,?,?,?,?,?,?)",
                               &ins_doc, err)) != KB_OK ||
        (rc = kb_store_prepare(store, "INSERT INTO chunks(document_id, ord, kind,"
                               " heading_path, anchor, text, tokens) "
                               "VALUES(?,?,?,?,?,?,?)", &ins_chunk, err)) != KB_OK ||
        (rc = kb_store_prepare(store, "INSERT INTO papers(chunk_id, date, title,"
                               " section, links) VALUES(?,?,?,?,?)",
                               &ins_paper, err)) != KB_OK)
        goto out;

    if ((rc = kb_vec_keep_document(store, source, ref->key, err)) != KB_OK)
        goto out;
    sqlite3_bind_text(del, 1, source, -1, SQLITE_STATIC);
    sqlite3_bind_text(del, 2, ref->key, -1, SQLITE_STATIC);
    if (sqlite3_step(del) != SQLITE_DONE) {
        rc = kb_store_db_error(store, err, "remove the old document");
        goto out;
    }
    sqlite3_int64 now = (sqlite3_int64)time(NULL);
    sqlite3_bind_text(ins_doc, 1, source, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins_doc, 2, ref->key, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins_doc, 3, ref->path, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins_doc, 4, ref->url, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins_doc, 5, doc->title ? doc->title : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(ins_doc, 6, hash, -1, SQLITE_STATIC);
    if (fetched && fetched->etag)
        sqlite3_bind_text(ins_doc, 7, fetched->etag, -1, SQLITE_STATIC);
    if (fetched && fetched->last_modified)
        sqlite3_bind_text(ins_doc, 8, fetched->last_modified, -1, SQLITE_STATIC);
    sqlite3_bind_int64(ins_doc, 9, now);
    sqlite3_bind_int64(ins_doc, 10, now);
    if (sqlite3_step(ins_doc) != SQLITE_DONE) {
        rc = kb_store_db_error(store, err, "record a document");
        goto out;
    }
    sqlite3_int64 doc_id = sqlite3_last_insert_rowid(store->db);
    rc = write_chunks(store, ins_chunk, ins_paper, doc_id, chunks, err);
    if (rc == KB_OK)
        rc = kb_vec_restore_document(store, doc_id, err);
    if (rc == KB_OK)
        rc = kb_store_commit(store, err);
out:
    sqlite3_finalize(del);
    sqlite3_finalize(ins_doc);
    sqlite3_finalize(ins_chunk);
    sqlite3_finalize(ins_paper);
    if (rc != KB_OK)
        kb_store_rollback(store);
    return rc;
}

/* Removes the source's documents whose keys are not in seen (sorted); with
 * under, only those under that folder. */
static kb_rc remove_gone(kb_store *store, const char *source, const char *under,
                         char **seen, size_t nseen, size_t *removed, kb_err *err)
{
    sqlite3_stmt *sel = NULL, *del = NULL;
    kb_rc rc = kb_store_begin(store, err);
    if (rc != KB_OK)
        return rc;
    if ((rc = kb_store_prepare(store, "SELECT id, key FROM documents WHERE "
                               "source_id = ?1 AND (?2 IS NULL OR substr(key, 1,"
                               " length(?2) + 1) = ?2 || '/')", &sel, err)) != KB_OK ||
        (rc = kb_store_prepare(store, "DELETE FROM documents WHERE id = ?", &del,
                               err)) != KB_OK)
        goto out;
    sqlite3_bind_text(sel, 1, source, -1, SQLITE_STATIC);
    if (under)
        sqlite3_bind_text(sel, 2, under, -1, SQLITE_STATIC);
    while (sqlite3_step(sel) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(sel, 1);
        if (bsearch(&key, seen, nseen, sizeof *seen, cmp_str))
            continue;
        sqlite3_reset(del);
        sqlite3_bind_int64(del, 1, sqlite3_column_int64(sel, 0));
        if (sqlite3_step(del) != SQLITE_DONE) {
            rc = kb_store_db_error(store, err, "remove a document");
            goto out;
        }
        (*removed)++;
    }
    rc = kb_store_commit(store, err);
out:
    sqlite3_finalize(sel);
    sqlite3_finalize(del);
    if (rc != KB_OK)
        kb_store_rollback(store);
    return rc;
}

/* 1 if a fetched body is an HTML page (a repository's or folder's web
 * page, say, where the manifest describes the files behind it). */
static int looks_like_html(const char *data, size_t len)
{
    size_t i = 0;
    while (i < len && i < 512 && (data[i] == ' ' || data[i] == '\n' ||
                                  data[i] == '\r' || data[i] == '\t'))
        i++;
    return len - i >= 5 && (strncasecmp(data + i, "<!doc", 5) == 0 ||
                            strncasecmp(data + i, "<html", 5) == 0);
}

/* Text before a document's first heading sits under the document's title
 * (or file name), so every chunk has a heading path to cite. */
static void give_headings(kb_doc *doc, const char *name)
{
    const char *base = kb_ingest_basename(name);
    const char *title = doc->title && *doc->title ? doc->title : base;
    for (size_t i = 0; i < doc->nblocks; i++) {
        kb_block *b = &doc->blocks[i];
        if (b->depth == 0 && (b->heading[0] = kb_strdup(title)) != NULL)
            b->depth = 1;
    }
}

/* Reads (or fetches) one document, and unless its hash is unchanged parses,
 * chunks and stores it. *changed tells which happened. */
static kb_rc ingest_document(kb_store *store, const kb_ingest_opts *opts,
                             const char *source, const char *format, const char *title,
                             const doc_ref *ref, const kb_tokenizer *tok,
                             int *changed, size_t *nchunks, kb_err *err)
{
    kb_fetch_result fetched;
    kb_fetch_result_init(&fetched);
    kb_buf raw;
    kb_buf_init(&raw, 0);
    kb_doc doc;
    kb_doc_init(&doc);
    kb_chunks chunks = { 0 };
    char *old = NULL;
    kb_rc rc;
    *changed = 0;

    if (ref->file) {
        rc = kb_read_file(ref->file, KB_MAX_DOC_BYTES, &raw, err);
    } else {
        char *cache = kb_path_join(store->dir, "cache");
        kb_fetch_opts fo;
        kb_fetch_opts_default(&fo);
        fo.max_bytes = KB_MAX_DOC_BYTES;
        rc = kb_mkdirs(cache, err);
        if (rc == KB_OK)
            rc = kb_fetch_url(ref->fetch ? ref->fetch : ref->url, cache, &fo,
                              &fetched, err);
        free(cache);
        if (rc == KB_OK)
            rc = kb_buf_append(&raw, fetched.body.data, fetched.body.len);
    }
    if (rc != KB_OK)
        goto out;
    char raw_hash[65], keyed[80], hash[65];
    kb_sha256_hex(raw.data ? raw.data : "", raw.len, raw_hash);
    snprintf(keyed, sizeof keyed, "kb-ingest %d %s", KB_INGEST_VERSION, raw_hash);
    kb_sha256_hex(keyed, strlen(keyed), hash);
    if ((rc = stored_hash(store, source, ref->key, &old, err)) != KB_OK)
        goto out;
    if (old && strcmp(old, hash) == 0 && !opts->force) {
        /* unchanged; but the manifest may cite it somewhere new now */
        rc = update_url(store, source, ref->key, ref->url, err);
        goto out;
    }
    const char *name = ref->file ? ref->file : ref->fetch ? ref->fetch : ref->url;
    kb_parse_fn parse = kb_parser_for(name, format);
    if (!ref->file && looks_like_html(raw.data ? raw.data : "", raw.len))
        parse = kb_parse_html;   /* a web page, whatever the source's format */
    if (!parse) {
        rc = kb_err_set(err, KB_ERR_PARSE, "'%s' is not a format kb reads", name);
        goto out;
    }
    if (parse != kb_parse_html && raw.len && !kb_utf8_valid(raw.data, raw.len)) {
        /* libxml2 reads an HTML page's own encoding; other documents are
         * UTF-8, and bytes that are not are made U+FFFD, said once */
        kb_buf fixed;
        kb_buf_init(&fixed, 0);
        size_t bad = 0;
        if ((rc = kb_utf8_repair(raw.data, raw.len, &fixed, &bad)) != KB_OK) {
            kb_buf_release(&fixed);
            rc = kb_err_set(err, rc, "out of memory");
            goto out;
        }
        kb_log_warn("%s: %zu byte%s that are not UTF-8 stored as U+FFFD", name, bad,
                    bad == 1 ? "" : "s");
        kb_buf_release(&raw);
        raw = fixed;
    }
    if ((rc = parse(raw.data ? raw.data : "", raw.len, name, &doc, err)) != KB_OK)
        goto out;
    if (title && *title) {
        free(doc.title);
        if (!(doc.title = kb_strdup(title))) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    give_headings(&doc, name);
    if ((rc = kb_chunk_doc(&doc, tok, KB_CHUNK_MAX_TOKENS, &chunks, err)) != KB_OK)
        goto out;
    rc = store_document(store, source, ref, hash, &doc, &chunks,
                        ref->file ? NULL : &fetched, err);
    if (rc == KB_OK) {
        *changed = 1;
        *nchunks = chunks.n;
    }
out:
    free(old);
    kb_chunks_release(&chunks);
    kb_doc_release(&doc);
    kb_buf_release(&raw);
    kb_fetch_result_release(&fetched);
    return rc;
}

typedef struct {
    const char *id;
    const char *format;
    doc_list docs;
    int prune;          /* remove documents that are gone (manifest sources) */
    char *prune_under;  /* an ad-hoc folder: remove the documents under it
                           that are gone (owned) */
    const char *title;  /* a source that is one page: its documents' title
                           (a Sphinx page's <title> is its first section's) */
} ingest_job;

static kb_rc run_job(kb_store *store, const kb_ingest_opts *opts,
                     ingest_job *job, kb_ingest_progress *pr,
                     const kb_tokenizer *tok, kb_ingest_stats *stats,
                     kb_err *err)
{
    double t0 = kb_now_ms();
    char **seen = calloc(job->docs.n + 1, sizeof *seen);
    if (!seen)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    size_t nseen = 0;
    kb_rc result = KB_OK;
    pr->docs_total = job->docs.n;
    if (job->docs.failed) {   /* folders not read: nothing under them goes */
        pr->failed += job->docs.failed;
        kb_err_set(err, job->docs.first.rc, "%s", job->docs.first.msg);
        result = KB_ERR_PARTIAL;
    }
    for (size_t i = 0; i < job->docs.n; i++) {
        const doc_ref *ref = &job->docs.items[i];
        kb_err derr;
        kb_err_clear(&derr);
        int changed = 0;
        size_t nchunks = 0;
        kb_rc rc = ingest_document(store, opts, job->id, job->format, job->title, ref,
                                   tok, &changed, &nchunks, &derr);
        if (rc == KB_OK) {
            seen[nseen++] = ref->key;
            if (changed) {
                pr->changed++;
                pr->chunks += nchunks;
            } else {
                pr->unchanged++;
            }
        } else {
            /* nothing lost: the document keeps its previous version */
            seen[nseen++] = ref->key;
            pr->failed++;
            kb_log_warn("%s: %s", job->id, derr.msg);
            kb_err_set(err, rc, "%s", derr.msg);
            result = KB_ERR_PARTIAL;
            if (rc == KB_ERR_DB || rc == KB_ERR_NOMEM) {
                /* the store itself is failing: stop this source */
                result = rc;
                pr->docs_done = i + 1;
                break;
            }
        }
        pr->docs_done = i + 1;
        pr->elapsed_ms = kb_now_ms() - t0;
        if (opts->progress)
            opts->progress(pr, opts->progress_ctx);
    }
    /* Only a source read in full says which documents are gone: after a
     * failure (a fetch that did not answer, where the KB holds the same
     * source read from a mirror under other keys) nothing is removed. */
    if ((job->prune || job->prune_under) && result == KB_OK) {
        qsort(seen, nseen, sizeof *seen, cmp_str);
        kb_err rerr;
        kb_err_clear(&rerr);
        if (remove_gone(store, job->id, job->prune_under, seen, nseen, &pr->removed,
                        &rerr) != KB_OK) {
            kb_err_set(err, rerr.rc, "%s", rerr.msg);
            result = KB_ERR_PARTIAL;
        }
    }
    free(seen);
    stats->docs_changed += pr->changed;
    stats->docs_unchanged += pr->unchanged;
    stats->docs_removed += pr->removed;
    stats->docs_failed += pr->failed;
    stats->chunks_written += pr->chunks;
    return result;
}

/* "file:///abs/path" for a local path, encoded (caller frees; NULL out
 * of memory). */
static char *file_url(const char *path)
{
    char *abs = realpath(path, NULL);
    kb_buf url;
    kb_buf_init(&url, 0);
    kb_rc rc = kb_buf_puts(&url, "file://");
    if (rc == KB_OK)
        rc = put_url_path(&url, abs ? abs : path);
    free(abs);
    return kb_buf_finish(&url, rc);
}

static int is_url(const char *s)
{
    return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

/* 1 if s starts with a URL scheme ("ftp://", "file://"). */
static int has_scheme(const char *s)
{
    if (!isalpha((unsigned char)*s))
        return 0;
    size_t n = 1;
    while (isalnum((unsigned char)s[n]) || strchr("+-.", s[n]))
        n++;
    return s[n] && strncmp(s + n, "://", 3) == 0;
}

/* A target as ingest reads it, into *out (caller frees): a file:// URL is
 * the local path it names (percent-decoded), http(s) URLs, ids and paths
 * stay as they are; any other URL (ftp://...) is an error, not a source
 * id that is not there. */
static kb_rc target_of(const char *t, char **out, kb_err *err)
{
    *out = NULL;
    if (!has_scheme(t) || is_url(t)) {
        *out = kb_strdup(t);
        return *out ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    const char *p = NULL;
    if (strncmp(t, "file:///", 8) == 0)
        p = t + 7;
    else if (strncmp(t, "file://localhost/", 17) == 0)
        p = t + 16;
    if (!p)
        return kb_err_set(err, KB_ERR_USAGE, "cannot ingest '%s': kb fetches http://"
                          " and https:// URLs, and reads local files (a path, or"
                          " file:///path)", t);
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = KB_OK;
    for (; *p && *p != '?' && *p != '#' && rc == KB_OK; p++) {
        if (*p != '%') {
            rc = kb_buf_putc(&b, *p);
        } else if (isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2]) &&
                   (p[1] != '0' || p[2] != '0')) {
            char hex[3] = { p[1], p[2], '\0' };
            rc = kb_buf_putc(&b, (char)strtol(hex, NULL, 16));
            p += 2;
        } else {
            kb_buf_release(&b);
            return kb_err_set(err, KB_ERR_USAGE, "cannot ingest '%s': a bad %%-escape", t);
        }
    }
    *out = kb_buf_finish(&b, rc);
    return *out ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
}

/* One kb_ingest_run: what its steps share. */
typedef struct {
    kb_store *store;
    const kb_ingest_opts *opts;
    kb_ingest_stats *stats;
    const char *mirror;      /* the mirror's root, or NULL */
    char *manifest_path;
    kb_manifest manifest;    /* loaded when a target needs it */
    int need_manifest;
    ingest_job *jobs;        /* one per source or target */
    size_t njobs, nplanned;  /* jobs made so far, jobs the run will have */
    kb_tokenizer *tok;       /* NULL: chunk sizes estimated */
    kb_err first;            /* the first source's failure, for KB_ERR_PARTIAL */
} ingest_run;

/* --source names where ad-hoc files go: never a source of the manifest,
 * whose next pass would delete them as gone from its mirror or URL. */
static kb_rc check_adhoc_source(ingest_run *r, kb_err *err)
{
    const char *id = r->opts->adhoc_source;
    if (!id)
        return KB_OK;
    if (!*id || strchr(id, '/'))
        return kb_err_set(err, KB_ERR_USAGE, "--source wants an id for the ad-hoc "
                          "files and URLs (my-notes), not '%s'", id);
    int in_manifest = 0;
    if (r->need_manifest) {
        in_manifest = kb_manifest_find(&r->manifest, id) != NULL;
    } else {
        kb_manifest m;
        kb_err merr;
        kb_err_clear(&merr);
        if (kb_manifest_load(r->manifest_path, &m, &merr) == KB_OK) {
            in_manifest = kb_manifest_find(&m, id) != NULL;
            kb_manifest_release(&m);
        }
    }
    /* or one the KB holds from a manifest (it has a URL of its own) */
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(r->store, "SELECT 1 FROM sources WHERE id = ? AND"
                                " url != ''", &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    in_manifest |= sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (in_manifest)
        return kb_err_set(err, KB_ERR_USAGE, "--source '%s' is a source of the "
                          "manifest: its next ingest would remove files added to it; "
                          "give ad-hoc files an id of their own (--source my-notes)", id);
    return KB_OK;
}

/* Every target must make sense before anything is written: a manifest
 * source (the manifest is loaded when some target is not a file or a URL,
 * or when there are none), a file or folder, or a URL. A bare name that
 * is a source id is that source even where a file of that name is in the
 * working directory (`kb ingest skills` in kb's own tree): that file is
 * ./name. */
static kb_rc check_targets(ingest_run *r, char *const *targets, size_t ntargets,
                           kb_err *err)
{
    r->need_manifest = ntargets == 0;
    int bare = 0;
    for (size_t i = 0; i < ntargets; i++) {
        struct stat st;
        if (!is_url(targets[i]) && stat(targets[i], &st) != 0)
            r->need_manifest = 1;
        else if (!is_url(targets[i]) && !strchr(targets[i], '/'))
            bare = 1;
    }
    kb_rc rc;
    if (r->need_manifest &&
        (rc = kb_manifest_load(r->manifest_path, &r->manifest, err)) != KB_OK)
        return rc;
    if (!r->need_manifest && bare) {
        /* only to tell ids from files: no manifest is no error here */
        kb_err lerr;
        kb_err_clear(&lerr);
        r->need_manifest = kb_manifest_load(r->manifest_path, &r->manifest, &lerr) == KB_OK;
    }
    for (size_t i = 0; i < ntargets; i++) {
        const char *t = targets[i];
        struct stat st;
        if (!(r->need_manifest && kb_manifest_find(&r->manifest, t)) && !is_url(t) &&
            stat(t, &st) != 0)
            return kb_err_set(err, KB_ERR_NOTFOUND,
                              "'%s' is neither a source in '%s', a file, nor a URL",
                              t, r->manifest_path);
    }
    return check_adhoc_source(r, err);
}

/* The job of a manifest source: its documents listed from the mirror or
 * its URL. A source that cannot be listed fails alone (recorded, reported
 * through progress, job->id left NULL); the others proceed. */
static kb_rc plan_source(ingest_run *r, const kb_source *src, ingest_job *job,
                         kb_err *err)
{
    job->id = src->id;
    job->format = src->format;
    job->prune = 1;
    size_t m0 = src->nmirror ? strlen(src->mirror[0]) : 0;
    if (src->nmirror <= 1 && (!m0 || src->mirror[0][m0 - 1] != '/'))
        job->title = src->title;
    kb_rc rc = upsert_source(r->store, src->id, src->title, src->url, src->format,
                             src->version, err);
    if (rc != KB_OK)
        return rc;
    kb_err lerr;
    kb_err_clear(&lerr);
    if (list_source_docs(src, r->manifest_path, r->mirror, &job->docs, &lerr) == KB_OK)
        return KB_OK;
    job->format = NULL;
    if (!r->opts->progress)   /* else progress says it, once */
        kb_log_warn("%s: %s", src->id, lerr.msg);
    if ((rc = finish_source(r->store, src->id, lerr.msg, err)) != KB_OK)
        return rc;
    kb_err_set(&r->first, lerr.rc, "%s", lerr.msg);
    r->stats->sources_failed++;
    if (r->opts->progress) {
        kb_ingest_progress pr = { .source = src->id, .source_index = r->njobs - 1,
                                  .nsources = r->nplanned, .finished = 1,
                                  .error = lerr.msg };
        r->opts->progress(&pr, r->opts->progress_ctx);
    }
    job->id = NULL;
    return KB_OK;
}

/* The job of a URL or a local file or folder, under the ad-hoc source
 * (--source) or "web" / "local". */
static kb_rc plan_target(ingest_run *r, const char *t, ingest_job *job, kb_err *err)
{
    const char *adhoc = r->opts->adhoc_source;
    struct stat st;
    kb_rc rc;
    job->format = "";
    if (is_url(t)) {
        job->id = adhoc ? adhoc : "web";
        rc = upsert_source(r->store, job->id, "Ad-hoc URLs", "", "", "", err);
        if (rc == KB_OK)
            rc = doc_list_add(&job->docs, t, NULL, "", t, err);
        return rc;
    }
    if (stat(t, &st) != 0)   /* gone since it was checked */
        return kb_err_set(err, KB_ERR_IO, "cannot read '%s': %s", t, strerror(errno));
    /* one document per file, however it is spelt (notes.md, ./notes.md,
     * its absolute path, through a link): the key is its real path */
    char *canon = realpath(t, NULL);
    if (!canon)
        return kb_err_set(err, errno == ENOMEM ? KB_ERR_NOMEM : KB_ERR_IO,
                          "cannot resolve '%s': %s", t, strerror(errno));
    job->id = adhoc ? adhoc : "local";
    rc = upsert_source(r->store, job->id, "Local files", "", "", "", err);
    char *url = file_url(canon);
    if (rc == KB_OK && !url)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && S_ISDIR(st.st_mode)) {
        rc = walk_tree(canon, &st, canon, "", url, &job->docs, err);
        job->prune_under = canon;   /* a folder read again: what is gone goes */
        canon = NULL;
    } else if (rc == KB_OK) {
        rc = doc_list_add(&job->docs, canon, canon, canon, url, err);
    }
    free(url);
    free(canon);
    return rc;
}

/* One job per target, or per manifest source when there are no targets. */
static kb_rc plan_jobs(ingest_run *r, char *const *targets, size_t ntargets,
                       kb_err *err)
{
    r->nplanned = ntargets ? ntargets : r->manifest.n;
    r->jobs = calloc(r->nplanned ? r->nplanned : 1, sizeof *r->jobs);
    if (!r->jobs)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < r->nplanned && rc == KB_OK; i++) {
        const char *t = ntargets ? targets[i] : r->manifest.sources[i].id;
        const kb_source *src = r->need_manifest ? kb_manifest_find(&r->manifest, t)
                                                : NULL;
        ingest_job *job = &r->jobs[r->njobs++];   /* released with the run */
        rc = src ? plan_source(r, src, job, err) : plan_target(r, t, job, err);
    }
    return rc;
}

/* The embedder's tokenizer (from the model in mdir) into *tok, so chunks
 * are sized in its word pieces; NULL (sizes estimated) when its
 * vocabulary is not installed. A vocabulary that is there but not the
 * model's own is an error: it would size every chunk wrongly. */
static kb_rc open_chunk_tokenizer(const char *mdir, kb_tokenizer **tok, kb_err *err)
{
    *tok = NULL;
    char *vocab = mdir && *mdir ? kb_path_join(mdir, "vocab.txt") : NULL;
    int there = vocab && access(vocab, F_OK) == 0;
    free(vocab);
    if (!there) {
        kb_log_debug("chunk sizes estimated: no vocabulary in '%s'", mdir ? mdir : "");
        return KB_OK;
    }
    return kb_tokenizer_open_model(mdir, tok, err);
}

/* Runs every job that was planned, recording each source's pass. A failing
 * source is counted and the rest proceed, unless the store itself fails. */
static kb_rc run_jobs(ingest_run *r, kb_err *err)
{
    for (size_t j = 0; j < r->njobs; j++) {
        ingest_job *job = &r->jobs[j];
        if (!job->id)
            continue;
        r->stats->sources++;
        kb_ingest_progress pr = { .source = job->id, .source_index = j,
                                  .nsources = r->njobs };
        /* each source records its own first failure; the run reports the
         * first of all */
        kb_err jerr;
        kb_err_clear(&jerr);
        kb_rc jrc = run_job(r->store, r->opts, job, &pr, r->tok, r->stats, &jerr);
        if (jrc != KB_OK) {
            r->stats->sources_failed++;
            kb_err_set(&r->first, jerr.rc != KB_OK ? jerr.rc : jrc, "%s", jerr.msg);
        }
        kb_rc rc = finish_source(r->store, job->id, jrc == KB_OK ? NULL : jerr.msg,
                                 err);
        if (rc != KB_OK)
            return rc;
        pr.finished = 1;
        pr.error = jrc == KB_OK ? NULL : jerr.msg;
        if (r->opts->progress)
            r->opts->progress(&pr, r->opts->progress_ctx);
        if (jrc == KB_ERR_DB || jrc == KB_ERR_NOMEM)
            return kb_err_set(err, jrc, "%s", jerr.msg);
    }
    return KB_OK;
}

/* Vectors for every chunk that has none: new and changed documents, and
 * whatever an interrupted pass left (all of them again with reembed). */
static kb_rc embed_pending(ingest_run *r, kb_embedder *emb, kb_err *err)
{
    const kb_ingest_opts *opts = r->opts;
    kb_rc rc = KB_OK;
    if (opts->reembed)
        rc = kb_vec_clear(r->store, err);
    if (rc == KB_OK)
        rc = kb_vec_embed_pending(r->store, emb, opts->progress, opts->progress_ctx,
                                  &r->stats->chunks_embedded, err);
    return rc;
}

/* The near-duplicate skills among the SKILL.md files this run read
 * (changed or not), into the run's stats; by their texts too when the
 * run embeds (emb). */
static kb_rc flag_skill_dups(ingest_run *r, kb_embedder *emb, kb_err *err)
{
    kb_skill_ref *refs = NULL;
    size_t n = 0, cap = 0;
    kb_rc rc = KB_OK;
    for (size_t j = 0; j < r->njobs && rc == KB_OK; j++) {
        const ingest_job *job = &r->jobs[j];
        for (size_t i = 0; job->id && i < job->docs.n && rc == KB_OK; i++) {
            const doc_ref *d = &job->docs.items[i];
            if (!d->file || strcmp(kb_ingest_basename(d->file), "SKILL.md") != 0)
                continue;
            if (KB_GROW(refs, n + 1, cap) != KB_OK) {
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                break;
            }
            refs[n++] = (kb_skill_ref){ .source = job->id, .key = d->key,
                                        .file = d->file, .path = d->path };
        }
    }
    if (rc == KB_OK)
        rc = kb_ingest_skill_dups(emb, refs, n, r->stats, err);
    free(refs);
    return rc;
}

void kb_ingest_stats_release(kb_ingest_stats *stats)
{
    for (size_t i = 0; i < stats->ndups; i++) {
        free(stats->dups[i].a);
        free(stats->dups[i].b);
        free(stats->dups[i].path_a);
        free(stats->dups[i].path_b);
    }
    free(stats->dups);
    stats->dups = NULL;
    stats->ndups = 0;
}

/* One ingest at a time per KB: a second waits for the first to finish
 * (its documents and its embedding pass), saying so, instead of
 * interleaving transactions with it. The lock is DIR/ingest.lock held
 * with flock, so it goes with the process, killed or not. Sets *fd to the
 * locked file (the caller closes it to unlock). */
static kb_rc lock_ingest(kb_store *store, int *fd, kb_err *err)
{
    *fd = -1;
    char *path = kb_path_join(kb_store_dir(store), "ingest.lock");
    if (!path)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = KB_OK;
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (f < 0) {
        rc = kb_err_set(err, KB_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
        goto out;
    }
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        char pid[24] = "";
        ssize_t n = pread(f, pid, sizeof pid - 1, 0);
        pid[n > 0 ? strcspn(pid, "\n") : 0] = '\0';
        kb_log_info("waiting for another ingest into '%s'%s%s%s to finish",
                    kb_store_dir(store), *pid ? " (pid " : "", pid, *pid ? ")" : "");
        int lrc;
        while ((lrc = flock(f, LOCK_EX)) != 0 && errno == EINTR)
            ;
        if (lrc != 0) {
            rc = kb_err_set(err, KB_ERR_IO, "cannot lock '%s': %s", path, strerror(errno));
            close(f);
            goto out;
        }
    }
    char pid[24];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(f, 0) != 0 || pwrite(f, pid, (size_t)n, 0) != n)
        kb_log_debug("cannot write the pid into '%s': %s", path, strerror(errno));
    *fd = f;
out:
    free(path);
    return rc;
}

kb_rc kb_ingest_run(kb_store *store, const kb_ingest_opts *opts,
                    char *const *targets, size_t ntargets,
                    kb_ingest_stats *stats, kb_err *err)
{
    memset(stats, 0, sizeof *stats);
    double t0 = kb_now_ms();
    ingest_run r = { .store = store, .opts = opts, .stats = stats };
    kb_err_clear(&r.first);
    if (!opts->config) {
        stats->took_ms = kb_now_ms() - t0;
        return kb_err_set(err, KB_ERR_USAGE, "ingest needs a configuration");
    }
    r.manifest_path = opts->manifest_path ? kb_strdup(opts->manifest_path)
                                          : kb_manifest_default_path();
    r.mirror = opts->mirror_dir;
    if (r.mirror && !*r.mirror)
        r.mirror = NULL;

    int lock = -1, embed_failed = 0;
    char **tv = calloc(ntargets ? ntargets : 1, sizeof *tv);
    kb_rc rc = tv ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ntargets && rc == KB_OK; i++)
        rc = target_of(targets[i], &tv[i], err);
    targets = tv;
    if (rc == KB_OK)
        rc = check_targets(&r, targets, ntargets, err);
    if (rc == KB_OK)
        rc = lock_ingest(store, &lock, err);
    if (rc == KB_OK)
        rc = open_chunk_tokenizer(opts->config->model_dir, &r.tok, err);
    /* the embedder first: a missing model is a clear error before anything
     * is written, not documents stored without their vectors */
    kb_embedder *emb = NULL;
    if (rc == KB_OK && (opts->embed || opts->reembed))
        rc = kb_embedder_open_config(opts->config, &emb, err);
    /* a factory string FAISS cannot read is refused before anything is
     * stored, not saved for every later query to fail on */
    if (rc == KB_OK && opts->index_kind)
        rc = kb_vec_check_index_kind(opts->index_kind, emb ? kb_embedder_dim(emb) : 0, err);
    if (rc == KB_OK)
        rc = plan_jobs(&r, targets, ntargets, err);
    if (rc == KB_OK)
        rc = run_jobs(&r, err);
    if (rc == KB_OK && (opts->embed || opts->reembed)) {
        kb_err eerr;
        kb_err_clear(&eerr);
        rc = embed_pending(&r, emb, &eerr);
        /* documents stored, their vectors not: some of the work stands */
        if (rc != KB_OK && stats->docs_changed > 0) {
            kb_err_set(&r.first, rc, "the documents were stored but not embedded:"
                       " %s; run 'kb ingest' again to embed them", eerr.msg);
            embed_failed = 1;
            rc = KB_OK;
        } else if (rc != KB_OK) {
            kb_err_set(err, rc, "%s", eerr.msg);
        }
    }
    /* the new kind of index last, over every vector: one that cannot be
     * built leaves the KB's index and setting as they were */
    if (rc == KB_OK && opts->index_kind && !embed_failed)
        rc = kb_vec_set_index_kind(store, opts->index_kind, err);
    if (rc == KB_OK)
        rc = flag_skill_dups(&r, embed_failed ? NULL : emb, err);
    if (rc == KB_OK && (stats->sources_failed || stats->docs_failed || embed_failed)) {
        rc = KB_ERR_PARTIAL;
        kb_err_set(err, r.first.rc, "%s", r.first.msg);
    }
    stats->took_ms = kb_now_ms() - t0;
    for (size_t j = 0; j < r.njobs; j++) {
        doc_list_release(&r.jobs[j].docs);
        free(r.jobs[j].prune_under);
    }
    free(r.jobs);
    kb_tokenizer_free(r.tok);
    kb_manifest_release(&r.manifest);
    free(r.manifest_path);
    kb_embedder_free(emb);
    if (lock >= 0)
        close(lock);
    for (size_t i = 0; tv && i < ntargets; i++)
        free(tv[i]);
    free(tv);
    return rc;
}

/* ------------------------------------------------------------------ kb rm */

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

/* Removes (or with dry_run counts) the documents of one target; item
 * gets what it matched. as_source: the target is a source id, even where
 * a file or folder of that name exists. */
static kb_rc remove_target(kb_store *store, const char *target, int dry_run, int as_source,
                           kb_rm_item *item, kb_rm_result *out, kb_err *err)
{
    char *local = NULL, *key = NULL;
    kb_rc rc = target_of(target, &local, err);
    if (rc != KB_OK)
        return rc;
    struct stat st;
    int exists = !as_source && !is_url(local) && stat(local, &st) == 0;
    int source = as_source;
    if (as_source) {
        item->what = "source";
    } else if (is_url(local)) {
        item->what = "URL";
    } else if (!exists && (source = is_kb_source(store, local)) < 0) {
        rc = kb_store_db_error(store, err, "look up a source");
        goto out;
    } else if (source) {
        item->what = "source";
    } else {
        item->what = exists && S_ISDIR(st.st_mode) ? "folder" : "file";
    }
    if (!is_url(local) && !source && !(key = canonical_path(local))) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* ?1 the key (a path: also what lies under it), ?2 as given */
    const char *where = source ? "d.source_id = ?2"
                      : is_url(local) ? "d.key = ?2 OR d.url = ?2"
                      : "d.key = ?1 OR substr(d.key, 1, length(?1) + 1) = ?1 || '/'"
                        " OR d.key = ?2";
    kb_buf sql;
    kb_buf_init(&sql, 0);
    sqlite3_stmt *sel = NULL, *del = NULL;
    rc = kb_buf_printf(&sql, "SELECT d.id, CASE WHEN d.path != '' THEN d.path ELSE"
                       " d.url END, (SELECT count(*) FROM chunks c WHERE"
                       " c.document_id = d.id) FROM documents d WHERE %s ORDER BY 2",
                       where);
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
    kb_rc rc = lock_ingest(store, &lock, err);
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
