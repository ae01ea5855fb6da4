/* browse.c - looking around a KB: one chunk or section, papers. */
#include "query/query_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *col_dup(sqlite3_stmt *st, int i)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    return kb_strdup(s ? (const char *)s : "");
}

static kb_rc push_result(kb_results *out, size_t *cap, sqlite3_stmt *st,
                         kb_err *err)
{
    if (KB_GROW(out->items, out->n + 1, *cap) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_result *r = &out->items[out->n++];
    if (kb_result_from_row(st, r) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    r->rank = (int)out->n;
    return KB_OK;
}

kb_rc kb_get_chunk(kb_store *store, int64_t chunk_id, int whole_section,
                   kb_results *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = NULL;
    const char *sql = whole_section
        ? "SELECT " KB_RESULT_COLUMNS " FROM " KB_RESULT_TABLES
          " JOIN chunks me ON me.id = ?1 WHERE c.document_id ="
          " me.document_id AND c.heading_path = me.heading_path ORDER BY c.ord"
        : "SELECT " KB_RESULT_COLUMNS " FROM " KB_RESULT_TABLES " WHERE c.id = ?1";
    kb_rc rc = kb_store_prepare(store, sql, &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_int64(st, 1, chunk_id);
    size_t cap = 0;
    int step = SQLITE_DONE;
    while (rc == KB_OK && (step = sqlite3_step(st)) == SQLITE_ROW)
        rc = push_result(out, &cap, st, err);
    if (rc == KB_OK && step != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "read the chunk");
    sqlite3_finalize(st);
    if (rc == KB_OK && out->n == 0)
        rc = kb_err_set(err, KB_ERR_NOTFOUND, "no chunk %lld in this KB; pass a chunk_id "
                        "that search returned",
                        (long long)chunk_id);
    if (rc != KB_OK)
        kb_results_release(out);
    return rc;
}

kb_rc kb_get_chunk_doc(kb_store *store, int64_t chunk_id, kb_result *r,
                       int64_t *doc_id, kb_err *err)
{
    memset(r, 0, sizeof *r);
    *doc_id = 0;
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "SELECT " KB_RESULT_COLUMNS ","
                                " c.document_id FROM " KB_RESULT_TABLES
                                " WHERE c.id = ?", &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_int64(st, 1, chunk_id);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        if (kb_result_from_row(st, r) != KB_OK)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        *doc_id = sqlite3_column_int64(st, KB_RESULT_NCOLUMNS);
    } else if (step == SQLITE_DONE) {
        rc = kb_err_set(err, KB_ERR_NOTFOUND, "no chunk %lld in this KB",
                        (long long)chunk_id);
    } else {
        rc = kb_store_db_error(store, err, "read the chunk");
    }
    sqlite3_finalize(st);
    return rc;
}

/* 1 when every word of words (split at spaces) is in title or section,
 * case-insensitive. */
static int has_words(const char *title, const char *section, const char *words)
{
    char w[256];
    title = title ? title : "";
    section = section ? section : "";
    for (const char *p = words; p && *p;) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " ");
        if (n == 0)
            break;
        snprintf(w, sizeof w, "%.*s", (int)(n < sizeof w ? n : sizeof w - 1), p);
        if (!strcasestr(title, w) && !strcasestr(section, w))
            return 0;
        p += n;
    }
    return 1;
}

kb_rc kb_papers_list(kb_store *store, const char *section, const char *words,
                     kb_paper_list *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store,
        "SELECT p.chunk_id, p.date, p.title, p.section, p.links FROM papers p"
        " JOIN chunks c ON c.id = p.chunk_id"
        " WHERE ?1 IS NULL OR instr(lower(p.section), lower(?1)) > 0"
        " ORDER BY c.document_id, c.ord", &st, err);
    if (rc != KB_OK)
        return rc;
    if (section)
        sqlite3_bind_text(st, 1, section, -1, SQLITE_STATIC);
    size_t cap = 0;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (!has_words((const char *)sqlite3_column_text(st, 2),
                       (const char *)sqlite3_column_text(st, 3), words))
            continue;
        if (KB_GROW(out->items, out->n + 1, cap) != KB_OK) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            break;
        }
        kb_paper_row *r = &out->items[out->n++];
        r->chunk_id = sqlite3_column_int64(st, 0);
        r->date = col_dup(st, 1);
        r->title = col_dup(st, 2);
        r->section = col_dup(st, 3);
        r->links_json = col_dup(st, 4);
    }
    if (rc == KB_OK && step != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "read the papers");
    sqlite3_finalize(st);
    if (rc != KB_OK)
        kb_paper_list_release(out);
    return rc;
}

void kb_paper_list_release(kb_paper_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].date);
        free(l->items[i].title);
        free(l->items[i].section);
        free(l->items[i].links_json);
    }
    free(l->items);
    memset(l, 0, sizeof *l);
}
