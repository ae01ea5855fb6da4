/*
 * kb_int.h - the store's internals, for the modules above kb/ that keep
 * tables in it (one section per file, SQLite's fts5Int.h). The CLI and the
 * servers use kb.h only.
 */
#ifndef KB_INT_H
#define KB_INT_H

#include "kb/kb.h"

#include <sqlite3.h>

/* ------------------------------------------------------------ kb/store.c */

typedef struct kb_store_slot kb_store_slot;

struct kb_store {
    char *dir;
    sqlite3 *db;
    int readonly;
    kb_store_slot *slots;    /* caches of the modules above, by name */
    size_t nslots, capslots;
};

/* What the KB is now, for caches kept with a store: SQLite's data_version
 * (moves when another connection commits) and, when changes is not NULL,
 * the rows this connection has changed (its own commits do not move
 * data_version). */
kb_rc kb_store_version(kb_store *store, long long *data_version, long long *changes,
                       kb_err *err);

/* Named slots (the idea of SQLite's sqlite3_set_clientdata): a module above
 * the store parks a cache with it (index/ its loaded vector index, query/
 * its default embedder) and the store frees it on close with the given
 * destructor, knowing nothing of what it holds. */
typedef void (*kb_slot_free_fn)(void *p);
/* The value parked under name, or NULL. */
void *kb_store_slot_get(const kb_store *store, const char *name);
/* Parks p under name (the name is not copied: a string literal), freeing
 * the value it replaces with that value's destructor; p NULL empties the
 * slot. On failure (KB_ERR_NOMEM) p is freed with free_fn, so the caller
 * never leaks it. */
kb_rc kb_store_slot_set(kb_store *store, const char *name, void *p,
                        kb_slot_free_fn free_fn, kb_err *err)
    __attribute__((warn_unused_result));

/* Empties name's slot, freeing its value. */
void kb_store_slot_clear(kb_store *store, const char *name);

/* The filter's SQL over chunks c joined with documents d: appends
 * " AND d.source_id IN (?,..) AND c.kind IN (?,..)" to sql;
 * kb_filter_bind binds the values from parameter index i on and returns
 * the next free index. */
kb_rc kb_filter_sql(const kb_filter *f, kb_buf *sql)
    __attribute__((warn_unused_result));
int kb_filter_bind(sqlite3_stmt *st, const kb_filter *f, int i);

/* Prepares sql on the store's connection; on failure sets err. */
kb_rc kb_store_prepare(kb_store *store, const char *sql, sqlite3_stmt **stmt,
                       kb_err *err);
/* Runs sql (no results, no parameters). */
kb_rc kb_store_exec(kb_store *store, const char *sql, kb_err *err);
/* Runs sql (no parameters), a query of one row whose first column is a
 * count (SELECT count(*) ...), into *count; on a database error, err says
 * "cannot WHAT". */
kb_rc kb_store_count(kb_store *store, const char *sql, const char *what,
                     size_t *count, kb_err *err);
/* BEGIN IMMEDIATE / COMMIT / ROLLBACK. */
kb_rc kb_store_begin(kb_store *store, kb_err *err);
kb_rc kb_store_commit(kb_store *store, kb_err *err);
void kb_store_rollback(kb_store *store);
/* Sets err from the connection's last error, with a prefix ("cannot X"). */
kb_rc kb_store_db_error(kb_store *store, kb_err *err, const char *what);
/* meta table: get (caller frees, NULL if unset) and set. */
char *kb_store_meta_get(kb_store *store, const char *key);
kb_rc kb_store_meta_set(kb_store *store, const char *key, const char *value,
                        kb_err *err);
/* The text of the first chunk (by ord) of the document that holds chunk
 * chunk_id, "" when there is none; *out freed by the caller. */
kb_rc kb_store_first_text(kb_store *store, int64_t chunk_id, char **out, kb_err *err);
/* Total size in bytes of the files in the KB directory. */
long long kb_store_disk_size(const kb_store *store);
/* The schema version, or -1 when the file is not a database; 0 when new. */
int kb_store_schema_version(kb_store *store);

/* results.c: frees what one result holds (not r itself). */
void kb_result_release(kb_result *r);
/* results.c: frees r's results; its mode and timings stay. */
void kb_results_clear(kb_results *r);

/* Whether the KB holds the document at url (its first url_len bytes) and
 * a chunk of it with anchor (NULL or "": any chunk): *doc and *section 1
 * or 0. A failed lookup sets err ("cannot look up a link"). */
kb_rc kb_store_link_lookup(kb_store *store, const char *url, size_t url_len,
                           const char *anchor, int *doc, int *section,
                           kb_err *err);

/* The chunks of the document that holds chunk chunk_id, in order: fn gets
 * each one's id, heading path (JSON text) and text (either may be NULL)
 * and returns nonzero to stop. KB_OK when fn stopped or every chunk was
 * seen; a database error otherwise. */
typedef int (*kb_store_chunk_fn)(void *ctx, long long id, const char *heading_path,
                                 const char *text);
kb_rc kb_store_doc_chunks(kb_store *store, long long chunk_id, kb_store_chunk_fn fn,
                          void *ctx, kb_err *err);

#endif
