/* store.c - the KB directory and its SQLite database: open, schema and
 * migrations, transactions, the KB's status. SQLite is the source of
 * truth. */
#include "kb/kb_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Migrations, applied in order; the schema version is their count. Never
 * edit one that has shipped: add another. */
static const char *const migrations[] = {
    /* 1: sources, documents, chunks, papers, the FTS index */
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE sources("
    "  id TEXT PRIMARY KEY, title TEXT NOT NULL DEFAULT '',"
    "  url TEXT NOT NULL DEFAULT '', format TEXT NOT NULL DEFAULT '',"
    "  version TEXT NOT NULL DEFAULT '', last_ingest INTEGER,"
    "  last_error TEXT);"
    "CREATE TABLE documents("
    "  id INTEGER PRIMARY KEY,"
    "  source_id TEXT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,"
    "  key TEXT NOT NULL,"              /* mirror path, URL or local path */
    "  path TEXT NOT NULL DEFAULT '',"  /* what results report as 'path' */
    "  url TEXT NOT NULL DEFAULT '',"
    "  title TEXT NOT NULL DEFAULT '',"
    "  content_hash TEXT NOT NULL,"
    "  etag TEXT, last_modified TEXT,"
    "  fetched_at INTEGER, indexed_at INTEGER,"
    "  UNIQUE(source_id, key));"
    "CREATE TABLE chunks("
    "  id INTEGER PRIMARY KEY,"
    "  document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,"
    "  ord INTEGER NOT NULL, kind TEXT NOT NULL,"
    "  heading_path TEXT NOT NULL,"     /* JSON array, top down */
    "  anchor TEXT NOT NULL DEFAULT '',"
    "  text TEXT NOT NULL, tokens INTEGER NOT NULL);"
    "CREATE INDEX chunks_by_document ON chunks(document_id, ord);"
    "CREATE TABLE papers("
    "  chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,"
    "  date TEXT NOT NULL DEFAULT '', title TEXT NOT NULL,"
    "  section TEXT NOT NULL DEFAULT '',"   /* "A > B" */
    "  links TEXT NOT NULL DEFAULT '{}');"  /* JSON object label -> url */
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(title, heading, body, idents,"
    "  tokenize = 'porter unicode61 remove_diacritics 2');"
    "CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN"
    "  DELETE FROM chunks_fts WHERE rowid = old.id; END;",
    /* 2: embeddings; a generation counter that every change of them bumps,
     * so a FAISS file built for another generation is never used */
    "CREATE TABLE embeddings("
    "  chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,"
    "  vec BLOB NOT NULL);"
    "INSERT OR IGNORE INTO meta(key, value) VALUES('vec_generation', '0');"
    "CREATE TRIGGER embeddings_insert AFTER INSERT ON embeddings BEGIN"
    "  UPDATE meta SET value = CAST(value AS INTEGER) + 1"
    "  WHERE key = 'vec_generation'; END;"
    "CREATE TRIGGER embeddings_delete AFTER DELETE ON embeddings BEGIN"
    "  UPDATE meta SET value = CAST(value AS INTEGER) + 1"
    "  WHERE key = 'vec_generation'; END;",
    /* 3: what the reranking stage looks up per candidate section: the
     * chunks of a section, and how many documents open a chunk with the
     * same words (boilerplate and templates recur across documents) */
    "CREATE INDEX chunks_by_section ON chunks(document_id, heading_path);"
    "CREATE INDEX chunks_by_opening ON chunks(substr(text, 1, 48));",
    /* 4: query expansion's cache (query/expand.c): an LLM's rewrites of a
     * query, by the query's text, the model and the prompt's version, so
     * that asking again costs no LLM call */
    "CREATE TABLE query_expansions("
    "  query TEXT NOT NULL, model TEXT NOT NULL, prompt INTEGER NOT NULL,"
    "  searches TEXT NOT NULL,"        /* JSON [{"type","query"}] */
    "  reply TEXT NOT NULL,"           /* the LLM's text as it came */
    "  llm_ms REAL NOT NULL, created INTEGER NOT NULL,"
    "  PRIMARY KEY(query, model, prompt)) WITHOUT ROWID;",
};
/* A cache parked with the store (kb_store_slot_set). */
struct kb_store_slot {
    const char *name;
    void *p;
    kb_slot_free_fn free_fn;
};

static const int schema_version = (int)(sizeof migrations / sizeof migrations[0]);

/* The CLI passes kb_config's kb_dir; the environment's rule lives in
 * config.c. */
char *kb_store_default_dir(const char *dir)
{
    if (dir && *dir)
        return kb_strdup(dir);
    return kb_config_env_kb_dir();
}

kb_rc kb_store_db_error(kb_store *store, kb_err *err, const char *what)
{
    int code = sqlite3_errcode(store->db);
    if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
        return kb_err_set(err, KB_ERR_DB,
                          "'%s/kb.sqlite' is not a usable kb database (%s); "
                          "move it away and ingest again", store->dir,
                          sqlite3_errmsg(store->db));
    if (code == SQLITE_READONLY || code == SQLITE_CANTOPEN)
        return kb_err_set(err, KB_ERR_IO, "cannot %s in '%s': %s", what,
                          store->dir, sqlite3_errmsg(store->db));
    return kb_err_set(err, KB_ERR_DB, "cannot %s: %s", what,
                      sqlite3_errmsg(store->db));
}

kb_rc kb_store_version(kb_store *store, long long *data_version, long long *changes,
                       kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "PRAGMA data_version", &st, err);
    if (rc == KB_OK && sqlite3_step(st) == SQLITE_ROW)
        *data_version = sqlite3_column_int64(st, 0);
    else if (rc == KB_OK)
        rc = kb_store_db_error(store, err, "read the KB's data version");
    sqlite3_finalize(st);
    if (changes)
        *changes = (long long)sqlite3_total_changes64(store->db);
    return rc;
}

kb_rc kb_store_prepare(kb_store *store, const char *sql, sqlite3_stmt **stmt,
                       kb_err *err)
{
    if (sqlite3_prepare_v2(store->db, sql, -1, stmt, NULL) != SQLITE_OK)
        return kb_store_db_error(store, err, "prepare a query");
    return KB_OK;
}

kb_rc kb_store_exec(kb_store *store, const char *sql, kb_err *err)
{
    if (sqlite3_exec(store->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return kb_store_db_error(store, err, "update the database");
    return KB_OK;
}

kb_rc kb_store_count(kb_store *store, const char *sql, const char *what,
                     size_t *count, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    *count = 0;
    kb_rc rc = kb_store_prepare(store, sql, &st, err);
    if (rc == KB_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            *count = (size_t)sqlite3_column_int64(st, 0);
        else
            rc = kb_store_db_error(store, err, what);
    }
    sqlite3_finalize(st);
    return rc;
}

kb_rc kb_store_begin(kb_store *store, kb_err *err)
{
    return kb_store_exec(store, "BEGIN IMMEDIATE", err);
}

kb_rc kb_store_commit(kb_store *store, kb_err *err)
{
    return kb_store_exec(store, "COMMIT", err);
}

void kb_store_rollback(kb_store *store)
{
    if (!sqlite3_get_autocommit(store->db))
        sqlite3_exec(store->db, "ROLLBACK", NULL, NULL, NULL);
}

char *kb_store_meta_get(kb_store *store, const char *key)
{
    sqlite3_stmt *st = NULL;
    char *value = NULL;
    if (sqlite3_prepare_v2(store->db, "SELECT value FROM meta WHERE key = ?",
                           -1, &st, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
        value = kb_strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return value;
}

char *kb_store_dir_meta(const char *dir, const char *key)
{
    char *dbpath = dir ? kb_path_join(dir, "kb.sqlite") : NULL;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char *value = NULL;
    /* read-only, never created: no KB there is no value */
    if (dbpath && access(dbpath, R_OK) == 0 &&
        sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                        NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?", -1, &st,
                           NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW)
            value = kb_strdup((const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    free(dbpath);
    return value;
}

char *kb_store_data_find(const kb_config *cfg, const char *kb_dir, const char *name)
{
    const char *manifest = cfg ? cfg->manifest : NULL;
    /* KB_MANIFEST is the manifest, there or not: its error names it */
    if (manifest && strcmp(name, "sources.json") == 0)
        return kb_strdup(manifest);
    const char *dir = kb_dir && *kb_dir ? kb_dir : cfg ? cfg->kb_dir : NULL;
    char *own = dir ? NULL : kb_config_env_kb_dir();
    char *built = kb_store_dir_meta(dir ? dir : own, "manifest");
    char *found = kb_data_find(name, manifest, built);
    free(built);
    free(own);
    return found;
}

kb_rc kb_store_meta_set(kb_store *store, const char *key, const char *value,
                        kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store,
        "INSERT INTO meta(key, value) VALUES(?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value", &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "write the KB's metadata");
    sqlite3_finalize(st);
    return rc;
}

int kb_store_schema_version(kb_store *store)
{
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(store->db, "PRAGMA user_version", -1, &st,
                           NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return version;
}

static char *col_dup(sqlite3_stmt *st, int i)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    return kb_strdup(s ? (const char *)s : "");
}

kb_rc kb_store_status(kb_store *store, kb_status *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store,
        "SELECT s.id, s.title, s.url, s.last_ingest, s.last_error, s.version,"
        " (SELECT count(*) FROM documents d WHERE d.source_id = s.id),"
        " (SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id"
        "   WHERE d.source_id = s.id),"
        " (SELECT count(*) FROM papers p JOIN chunks c ON c.id = p.chunk_id"
        "   JOIN documents d ON d.id = c.document_id WHERE d.source_id = s.id)"
        " FROM sources s ORDER BY s.rowid", &st, err);
    if (rc != KB_OK)
        return rc;
    size_t cap = 0;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (KB_GROW(out->sources, out->n + 1, cap) != KB_OK) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            goto out;
        }
        kb_source_status *s = &out->sources[out->n++];
        s->id = col_dup(st, 0);
        s->title = col_dup(st, 1);
        s->url = col_dup(st, 2);
        s->last_ingest = sqlite3_column_int64(st, 3);
        s->last_error = sqlite3_column_type(st, 4) == SQLITE_NULL ? NULL : col_dup(st, 4);
        s->version = col_dup(st, 5);
        s->documents = (size_t)sqlite3_column_int64(st, 6);
        s->chunks = (size_t)sqlite3_column_int64(st, 7);
        s->papers = (size_t)sqlite3_column_int64(st, 8);
        out->documents += s->documents;
        out->chunks += s->chunks;
        out->papers += s->papers;
    }
    if (step != SQLITE_DONE) {
        rc = kb_store_db_error(store, err, "read the sources");
        goto out;
    }
    rc = kb_store_count(store, "SELECT count(*) FROM embeddings",
                        "count the stored vectors", &out->embeddings, err);
    if (rc != KB_OK)
        goto out;
    out->schema_version = kb_store_schema_version(store);
    out->disk_bytes = kb_store_disk_size(store);
    char *e = kb_store_meta_get(store, "embedder");
    out->embedder = e ? e : kb_strdup("");
    char *x = kb_store_meta_get(store, "vec_index");
    out->vec_index = x && *x ? x : kb_strdup("Flat");
    if (x && !*x)
        free(x);
    if (!out->embedder || !out->vec_index)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
out:
    sqlite3_finalize(st);
    if (rc != KB_OK)
        kb_status_release(out);
    return rc;
}

void kb_status_release(kb_status *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->sources[i].id);
        free(s->sources[i].title);
        free(s->sources[i].url);
        free(s->sources[i].version);
        free(s->sources[i].last_error);
    }
    free(s->sources);
    free(s->embedder);
    free(s->vec_index);
    memset(s, 0, sizeof *s);
}

static kb_rc migrate(kb_store *store, int from, kb_err *err)
{
    kb_rc rc = kb_store_begin(store, err);
    for (int v = from; rc == KB_OK && v < schema_version; v++) {
        rc = kb_store_exec(store, migrations[v], err);
        kb_log_debug("schema migrated to version %d", v + 1);
    }
    if (rc == KB_OK) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", schema_version);
        rc = kb_store_exec(store, sql, err);
    }
    if (rc == KB_OK)
        rc = kb_store_commit(store, err);
    if (rc != KB_OK)
        kb_store_rollback(store);
    return rc;
}

/* Creates the KB directory, private (0700: a team's notes and skills may
 * be in it), its parents as usual (0755); a directory already there keeps
 * its mode, so `chmod 755 DIR` shares a KB. */
static kb_rc make_kb_dir(const char *dir, kb_err *err)
{
    char *parent = kb_strdup(dir);
    if (!parent)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/')
        parent[--n] = '\0';
    char *slash = strrchr(parent, '/');
    kb_rc rc = KB_OK;
    if (slash && slash != parent) {
        *slash = '\0';
        rc = kb_mkdirs(parent, err);
    }
    free(parent);
    if (rc == KB_OK && mkdir(dir, 0700) != 0 && errno != EEXIST)
        rc = kb_err_set(err, KB_ERR_IO, "cannot create directory '%s': %s", dir,
                        strerror(errno));
    return rc;
}

/* PRAGMA quick_check: KB_OK, or KB_ERR_DB with SQLite's first complaint and
 * how to recover. */
static kb_rc quick_check(kb_store *store, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "PRAGMA quick_check(1)", &st, err);
    if (rc != KB_OK)
        return rc;
    int step = sqlite3_step(st);
    const char *res = step == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
    if (step != SQLITE_ROW) {
        rc = kb_store_db_error(store, err, "check the database");
    } else if (!res || strcmp(res, "ok") != 0) {
        /* SQLite's first complaint, without its "*** in database main ***" */
        const char *why = res ? res : "no answer";
        if (strncmp(why, "***", 3) == 0 && strchr(why, '\n'))
            why = strchr(why, '\n') + 1;
        int n = (int)strcspn(why, "\n");
        rc = kb_err_set(err, KB_ERR_DB,
                        "'%s/kb.sqlite' fails SQLite's integrity check (%.*s); nothing"
                        " was written: move it away and run 'kb ingest' to read the"
                        " sources again, or recover what it holds with \"sqlite3"
                        " '%s/kb.sqlite' .recover | sqlite3 recovered.sqlite\"",
                        store->dir, n, why, store->dir);
    }
    sqlite3_finalize(st);
    return rc;
}

/* kb.sqlite is a regular file of the KB's own: a link (even a dangling
 * one, which SQLite would create through, out of the KB) or a FIFO (which
 * would block the open) is refused. *created: there is none yet. */
static kb_rc db_file_check(const char *dbpath, int *created, kb_err *err)
{
    struct stat st;
    *created = lstat(dbpath, &st) != 0;
    if (*created || S_ISREG(st.st_mode))
        return KB_OK;
    return kb_err_set(err, KB_ERR_IO, "'%s' is %s: kb opens only a regular file of "
                      "the KB's own there", dbpath,
                      S_ISLNK(st.st_mode) ? "a symbolic link" : "not a regular file");
}

kb_rc kb_store_open(const char *dir, int flags, kb_store **out, kb_err *err)
{
    *out = NULL;
    if (!dir || !*dir)
        return kb_err_set(err, KB_ERR_USAGE, "no KB directory given");
    kb_store *store = calloc(1, sizeof *store);
    if (!store)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    store->dir = kb_strdup(dir);
    store->readonly = (flags & KB_STORE_READONLY) != 0;
    char *dbpath = kb_path_join(dir, "kb.sqlite");
    kb_rc rc = KB_OK;
    int created = 0;
    if ((rc = db_file_check(dbpath, &created, err)) != KB_OK)
        goto out;
    if (created) {
        if (!(flags & KB_STORE_CREATE)) {
            rc = kb_err_set(err, KB_ERR_NOTFOUND,
                            "no KB in '%s'; run 'kb ingest' first (or give "
                            "--kb DIR)", dir);
            goto out;
        }
        if ((rc = make_kb_dir(dir, err)) != KB_OK)
            goto out;
        if (access(dir, W_OK) != 0) {
            rc = kb_err_set(err, KB_ERR_IO, "cannot create a KB in '%s': %s",
                            dir, strerror(errno));
            goto out;
        }
    }
    int oflags = store->readonly ? SQLITE_OPEN_READONLY
                                 : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(dbpath, &store->db, oflags | SQLITE_OPEN_NOMUTEX |
                        SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
        rc = kb_err_set(err, KB_ERR_IO, "cannot open '%s': %s", dbpath,
                        store->db ? sqlite3_errmsg(store->db) : "out of memory");
        goto out;
    }
    sqlite3_busy_timeout(store->db, 10000);
    kb_sweep_temp(dir);   /* what killed writers left (an index: megabytes) */
    /* a new database file gets its folder's permissions less execute, as
     * kb_write_file_atomic's files do; SQLite gives its -wal and -shm the
     * database's */
    struct stat dst;
    if (!store->readonly && created && stat(dir, &dst) == 0)
        chmod(dbpath, dst.st_mode & 0666);
    int version = kb_store_schema_version(store);
    if (version < 0) {
        rc = kb_store_db_error(store, err, "read the schema");
        goto out;
    }
    if (version > schema_version) {
        rc = kb_err_set(err, KB_ERR_MISMATCH,
                        "the KB in '%s' has schema version %d, newer than this "
                        "kb (%d); upgrade kb", dir, version, schema_version);
        goto out;
    }
    if (!store->readonly) {
        if ((rc = kb_store_exec(store, "PRAGMA journal_mode = WAL", err)) != KB_OK)
            goto out;
    }
    if ((rc = kb_store_exec(store, "PRAGMA foreign_keys = ON", err)) != KB_OK)
        goto out;
    if (version < schema_version) {
        /* an older KB that may be written is upgraded by a reader too, once,
         * through a writer's handle: the migrations only add, and a new kb
         * should not ask for an ingest before the first query */
        if (store->readonly && version > 0 && access(dbpath, W_OK) == 0 &&
            access(dir, W_OK) == 0) {
            kb_store *writer = NULL;
            rc = kb_store_open(dir, flags & ~KB_STORE_READONLY, &writer, err);
            kb_store_close(writer);
            if (rc != KB_OK)
                goto out;
            free(dbpath);
            kb_store_close(store);
            return kb_store_open(dir, flags, out, err);
        }
        if (store->readonly) {
            rc = kb_err_set(err, version == 0 ? KB_ERR_NOTFOUND : KB_ERR_MISMATCH,
                            version == 0 ? "the KB in '%s' is empty; run 'kb ingest'"
                                         : "the KB in '%s' needs a schema upgrade; "
                                           "run 'kb ingest' once", dir);
            goto out;
        }
        if ((rc = migrate(store, version, err)) != KB_OK)
            goto out;
    }
    /* a quick integrity probe: a damaged file fails here, clearly */
    if ((rc = kb_store_exec(store, "SELECT count(*) FROM sources", err)) != KB_OK)
        goto out;
    /* a writer checks every page first: writing into a damaged database
     * spreads the damage (0.1 s for the corpus's 43 MB) */
    if (!store->readonly && (rc = quick_check(store, err)) != KB_OK)
        goto out;
    *out = store;
out:
    free(dbpath);
    if (rc != KB_OK)
        kb_store_close(store);
    return rc;
}

void kb_store_close(kb_store *store)
{
    if (!store)
        return;
    /* the caches first: a destructor may still use the connection */
    for (size_t i = store->nslots; i-- > 0;)
        store->slots[i].free_fn(store->slots[i].p);
    free(store->slots);
    if (store->db)
        sqlite3_close_v2(store->db);
    free(store->dir);
    free(store);
}

const char *kb_store_dir(const kb_store *store)
{
    return store->dir;
}

void *kb_store_slot_get(const kb_store *store, const char *name)
{
    for (size_t i = 0; i < store->nslots; i++)
        if (strcmp(store->slots[i].name, name) == 0)
            return store->slots[i].p;
    return NULL;
}

kb_rc kb_store_slot_set(kb_store *store, const char *name, void *p,
                        kb_slot_free_fn free_fn, kb_err *err)
{
    if (!p) {
        kb_store_slot_clear(store, name);
        return KB_OK;
    }
    for (size_t i = 0; i < store->nslots; i++)
        if (strcmp(store->slots[i].name, name) == 0) {
            kb_store_slot old = store->slots[i];
            store->slots[i].p = p;
            store->slots[i].free_fn = free_fn;
            if (old.p != p)
                old.free_fn(old.p);
            return KB_OK;
        }
    if (KB_GROW(store->slots, store->nslots + 1, store->capslots) != KB_OK) {
        free_fn(p);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    store->slots[store->nslots++] = (kb_store_slot){ name, p, free_fn };
    return KB_OK;
}

void kb_store_slot_clear(kb_store *store, const char *name)
{
    for (size_t i = 0; i < store->nslots; i++)
        if (strcmp(store->slots[i].name, name) == 0) {
            kb_store_slot old = store->slots[i];
            store->slots[i] = store->slots[--store->nslots];
            old.free_fn(old.p);
            return;
        }
}

/* ------------------------------------------------------------ kinds, filters */

static const char *const kind_names[] = { "text", "code", "table", "paper", "skill" };
#define NKINDS (sizeof kind_names / sizeof kind_names[0])

const char *kb_kind_name(kb_kind kind)
{
    if ((size_t)kind < NKINDS)
        return kind_names[kind];
    return "text";
}

int kb_kind_parse(const char *name, kb_kind *out)
{
    for (size_t i = 0; i < NKINDS; i++)
        if (strcmp(name, kind_names[i]) == 0) {
            *out = (kb_kind)i;
            return 0;
        }
    return -1;
}

int kb_filter_is_empty(const kb_filter *f)
{
    return f->nsources == 0 && f->kinds == 0;
}

kb_rc kb_filter_sql(const kb_filter *f, kb_buf *sql)
{
    kb_rc rc = KB_OK;
    if (f->nsources) {
        rc = kb_buf_puts(sql, " AND d.source_id IN (?");
        for (size_t i = 1; i < f->nsources && rc == KB_OK; i++)
            rc = kb_buf_puts(sql, ",?");
        if (rc == KB_OK)
            rc = kb_buf_putc(sql, ')');
    }
    if (f->kinds && rc == KB_OK) {
        const char *sep = " AND c.kind IN (?";
        for (size_t k = 0; k < NKINDS && rc == KB_OK; k++)
            if (f->kinds & (1u << k)) {
                rc = kb_buf_puts(sql, sep);
                sep = ",?";
            }
        if (rc == KB_OK)
            rc = kb_buf_putc(sql, ')');
    }
    return rc;
}

int kb_filter_bind(sqlite3_stmt *st, const kb_filter *f, int i)
{
    for (size_t s = 0; s < f->nsources; s++)
        sqlite3_bind_text(st, i++, f->sources[s], -1, SQLITE_STATIC);
    for (size_t k = 0; k < NKINDS; k++)
        if (f->kinds & (1u << k))
            sqlite3_bind_text(st, i++, kind_names[k], -1, SQLITE_STATIC);
    return i;
}

long long kb_store_disk_size(const kb_store *store)
{
    DIR *d = opendir(store->dir);
    if (!d)
        return 0;
    long long total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *p = kb_path_join(store->dir, e->d_name);
        struct stat st;
        if (p && stat(p, &st) == 0 && S_ISREG(st.st_mode))
            total += (long long)st.st_size;
        free(p);
    }
    closedir(d);
    return total;
}

kb_rc kb_store_link_lookup(kb_store *store, const char *url, size_t url_len,
                           const char *anchor, int *doc, int *section,
                           kb_err *err)
{
    sqlite3_stmt *st = NULL;
    *doc = *section = 0;
    kb_rc rc = kb_store_prepare(store,
        "SELECT (SELECT count(*) FROM documents WHERE url = ?1),"
        " (SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id"
        "  WHERE d.url = ?1 AND (?2 = '' OR c.anchor = ?2))", &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_text(st, 1, url, (int)url_len, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, anchor ? anchor : "", -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW) {
        *doc = sqlite3_column_int(st, 0) > 0;
        *section = sqlite3_column_int(st, 1) > 0;
    } else {
        rc = kb_store_db_error(store, err, "look up a link");
    }
    sqlite3_finalize(st);
    return rc;
}

kb_rc kb_store_doc_chunks(kb_store *store, long long chunk_id, kb_store_chunk_fn fn,
                          void *ctx, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "SELECT id, heading_path, text FROM chunks WHERE "
                                "document_id = (SELECT document_id FROM chunks WHERE "
                                "id = ?) ORDER BY ord", &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_int64(st, 1, chunk_id);
    int step, stop = 0;
    while (!stop && (step = sqlite3_step(st)) == SQLITE_ROW)
        stop = fn(ctx, sqlite3_column_int64(st, 0),
                  (const char *)sqlite3_column_text(st, 1),
                  (const char *)sqlite3_column_text(st, 2));
    if (!stop && step != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "read a document's chunks");
    sqlite3_finalize(st);
    return rc;
}

kb_rc kb_store_doc_first_chunk(kb_store *store, const char *source, const char *path,
                             long long *id, kb_err *err)
{
    *id = 0;
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "SELECT c.id FROM chunks c JOIN documents d ON "
                                "d.id = c.document_id WHERE d.source_id = ? AND d.path = ? "
                                "ORDER BY c.ord LIMIT 1", &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, path, -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        *id = sqlite3_column_int64(st, 0);
    else if (s != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "find a skill's kernel");
    sqlite3_finalize(st);
    return rc;
}

static int first_text_of(void *ctx, long long id, const char *heading_path, const char *text)
{
    char **out = ctx;
    *out = kb_strdup(text ? text : "");
    return 1;   /* the first chunk is all it wants */
}

kb_rc kb_store_first_text(kb_store *store, int64_t chunk_id, char **out, kb_err *err)
{
    *out = NULL;
    kb_rc rc = kb_store_doc_chunks(store, (long long)chunk_id, first_text_of, out, err);
    if (rc == KB_OK && !*out && !(*out = kb_strdup("")))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return rc;
}
