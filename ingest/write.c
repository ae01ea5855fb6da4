/* write.c - what an ingest writes: one document read (or fetched),
 * parsed, chunked and stored in one transaction, unless its content hash
 * is unchanged; the sources' rows; the removal of documents gone; the
 * lock that keeps to one writer a KB. */
#include "ingest/ingest_int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

/* Documents larger than this are refused with a clear error. */
#define KB_MAX_DOC_BYTES (32u << 20)

/* Bump whenever parsing or chunking changes what a document becomes. The
 * stored hash covers it, so a KB ingested by an older kb has each document
 * read again once, instead of keeping its old chunks as "unchanged". */
#define KB_INGEST_VERSION 6   /* 2: CUDA anchors by line; 3: chunks fit the window;
                                 4: code chunks however short, one-page
                                 sources' titles; 5: Markdown spans apart,
                                 captions with their code; 6: stubs join
                                 their neighbours, Sphinx pages' glued
                                 links apart */

/* One ingest at a time per KB: a second waits for the first to finish
 * (its documents and its embedding pass), saying so, instead of
 * interleaving transactions with it. The lock is DIR/ingest.lock held
 * with flock, so it goes with the process, killed or not. Sets *fd to the
 * locked file (the caller closes it to unlock). */
kb_rc kb_ingest_lock(kb_store *store, int *fd, kb_err *err)
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

kb_rc kb_ingest_source_record(kb_store *store, const char *id, const char *title,
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
kb_rc kb_ingest_source_finish(kb_store *store, const char *id, const char *error,
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
                            const kb_docref *ref, const char *hash,
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
kb_rc kb_ingest_remove_gone(kb_store *store, const char *source, const char *under,
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
        if (bsearch(&key, seen, nseen, sizeof *seen, kb_cmp_str))
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
kb_rc kb_ingest_document(kb_store *store, const kb_ingest_opts *opts,
                         const char *source, const char *format, const char *title,
                         const kb_docref *ref, const kb_tokenizer *tok,
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
        kb_log_warn("%s: %zu %s not UTF-8 stored as U+FFFD", name, bad,
                    bad == 1 ? "byte that is" : "bytes that are");
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
