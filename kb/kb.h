/*
 * kb.h - the one public header of kb.
 *
 * The CLI (cli/main.c and the cmd_*.c files) and the servers use kb only
 * through what is declared here. Memory rule: a function that returns
 * allocated memory says who frees it; lifecycles are _init/_release for
 * structs the caller owns and _open/_free (or _close) for opaque handles.
 * Library code never prints to stdout and never calls exit().
 */
#ifndef KB_H
#define KB_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>

#include <cjson/cJSON.h>

/* A result the caller must look at (curl's WARN_UNUSED_RESULT). GCC warns
 * even through a (void) cast. */
#define KB_MUST_CHECK __attribute__((warn_unused_result))

/* kb's version, as `kb --version` and the servers report it. */
#define KB_VERSION "0.1.0"

/* ------------------------------------------------------------------ errors */

typedef enum {
    KB_OK = 0,
    KB_ERR_USAGE,     /* bad command line or argument */
    KB_ERR_IO,        /* file system */
    KB_ERR_PARSE,     /* malformed input: manifest, JSON, document */
    KB_ERR_DB,        /* SQLite */
    KB_ERR_NET,       /* fetching */
    KB_ERR_NOMEM,
    KB_ERR_NOTFOUND,  /* no such source, chunk, task, ... */
    KB_ERR_MODEL,     /* missing or broken embedding model */
    KB_ERR_MISMATCH,  /* KB built with another embedder, schema too new, ... */
    KB_ERR_INDEX,     /* FAISS */
    KB_ERR_GPU,
    KB_ERR_PARTIAL,   /* some items of a batch failed, the rest succeeded */
    KB_ERR_INTERNAL
} kb_rc;

/* An error: the code and a message in git's style (lower case, subject
 * quoted, no full stop). The first error set wins: later kb_err_set calls
 * on an error that already holds one keep the original message. */
typedef struct {
    kb_rc rc;
    char msg[1024];
} kb_err;

void kb_err_clear(kb_err *err);
/* Sets err (if it holds no error yet) and returns rc. err may be NULL. A
 * message longer than msg is cut at a character boundary. */
kb_rc kb_err_set(kb_err *err, kb_rc rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The process exit status for a code: 0 ok, 2 usage, 3 partial, 1 else. */
int kb_rc_exit_status(kb_rc rc);
const char *kb_rc_name(kb_rc rc);

/* ------------------------------------------------------------------ buffer */

/* One growable byte buffer (git's strbuf, curl's dynbuf). data is always
 * NUL-terminated. max caps the length (0: no cap); growing past it fails
 * with KB_ERR_NOMEM and leaves the buffer unchanged. */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
    size_t max;
} kb_buf;

void kb_buf_init(kb_buf *b, size_t max);
void kb_buf_release(kb_buf *b);           /* frees data, back to empty */
void kb_buf_reset(kb_buf *b);             /* len = 0, keeps memory */
/* The appends return KB_ERR_NOMEM (buffer unchanged) past max or out of
 * memory; the result must be checked (sticky: rc = ...; if (rc == KB_OK)). */
kb_rc kb_buf_append(kb_buf *b, const void *data, size_t len) KB_MUST_CHECK;
kb_rc kb_buf_puts(kb_buf *b, const char *s) KB_MUST_CHECK;
kb_rc kb_buf_putc(kb_buf *b, char c) KB_MUST_CHECK;
kb_rc kb_buf_printf(kb_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3))) KB_MUST_CHECK;
kb_rc kb_buf_vprintf(kb_buf *b, const char *fmt, va_list ap) KB_MUST_CHECK;
/* Returns the data (caller frees) and leaves b empty; NULL only out of
 * memory. */
char *kb_buf_detach(kb_buf *b);
/* Ends a sticky chain of appends whose result is rc: the data as
 * kb_buf_detach gives it if rc is KB_OK, else NULL (b released). Either
 * way b is left empty; the caller frees what it returns. */
char *kb_buf_finish(kb_buf *b, kb_rc rc);

/* ------------------------------------------------------------------ util */

/* Reads a whole file into b (appending); fails if it exceeds max_bytes.
 * Only a regular file is read (a FIFO or device is refused without
 * waiting on it), unless path names a stream on purpose: /dev/stdin,
 * /dev/fd/N, /proc/self/fd/N. */
kb_rc kb_read_file(const char *path, size_t max_bytes, kb_buf *b, kb_err *err);
/* Writes data to path atomically: a temp file beside it made with
 * mkostemp (a fresh name, O_EXCL: a link planted there is never written
 * through), fsync, rename (a link at path is replaced, not followed). The
 * file gets its folder's permissions less execute (0600 in a 0700 KB).
 * The temp file is hidden and names its writer (".NAME.tmp.PID.XXXXXX"):
 * a reader of the folder skips it, kb_sweep_temp removes it after a
 * kill. */
kb_rc kb_write_file_atomic(const char *path, const void *data, size_t len,
                           kb_err *err);
/* What marks a temp file or folder of kb's: ".NAME" KB_TEMP_MARK "PID.XXXXXX". */
#define KB_TEMP_MARK ".tmp."
/* Makes a fresh temp folder beside path (".NAME.tmp.PID.XXXXXX", mode
 * 0755 at most, as kb_mkdirs) and appends its path to out. */
kb_rc kb_temp_dir(const char *path, kb_buf *out, kb_err *err) KB_MUST_CHECK;
/* 1 if name (no folder part) is a temp name of kb's, *pid (may be NULL)
 * its writer's process id. */
int kb_temp_name(const char *name, long *pid);
/* Removes the temp files and folders of dir whose writer is no longer
 * running (killed part-way); a running writer's are left alone. Returns
 * how many were removed. */
size_t kb_sweep_temp(const char *dir);
/* rename(from, to) that never replaces what is at to (EEXIST, or
 * ENOTEMPTY for a folder): renameat2's RENAME_NOREPLACE, and on a file
 * system without it (NFS, CIFS: EINVAL) a folder's plain rename, which
 * refuses a folder that holds anything (an empty one at to is replaced),
 * or a file's link and unlink. 0, or -1 with errno set. */
int kb_rename_noreplace(const char *from, const char *to);
/* rm -rf path, never following a link; a missing path is nothing to do.
 * 0, or -1 when something could not be removed. */
int kb_rmtree(const char *path);
/* mkdir -p; a new folder is 0755, never more open than the one it is
 * made in. */
kb_rc kb_mkdirs(const char *path, kb_err *err);
/* Lower-case hex SHA-256 of data into hex[65]. */
void kb_sha256_hex(const void *data, size_t len, char hex[65]);

/* 1 if s[0, n) is valid UTF-8. */
int kb_utf8_valid(const char *s, size_t n);
/* Appends s[0, n) to out with each byte that is not part of valid UTF-8
 * replaced by U+FFFD; *replaced (if not NULL) counts them. */
kb_rc kb_utf8_repair(const char *s, size_t n, kb_buf *out, size_t *replaced) KB_MUST_CHECK;
/* n bytes as lower-case hex into hex[2n + 1]. */
void kb_hex_encode(const void *bytes, size_t n, char *hex);
/* The SHA-256 of each block bytes of data[0, len) (the last block may be
 * shorter) into md[0 .. ceil(len / block)), on two threads when there is
 * more than one block. */
void kb_sha256_blocks(const void *data, size_t len, size_t block,
                      unsigned char (*md)[32]);
/* SHA-256 of a file's contents. */
kb_rc kb_sha256_file(const char *path, char hex[65], kb_err *err);
/* strdup that aborts on no memory is NOT used: returns NULL on failure. */
char *kb_strdup(const char *s);
char *kb_strndup(const char *s, size_t n);
/* The length of s's longest prefix of at most max bytes that does not end
 * inside a UTF-8 character: what "%.*s" may print of a string quoted in a
 * message without cutting a character in two (a message is JSON, and JSON
 * is UTF-8). Bytes that are not UTF-8 count as one character each. */
int kb_utf8_cut(const char *s, size_t max);
/* Joins a and b with one '/' (caller frees; NULL out of memory). */
char *kb_path_join(const char *a, const char *b);
/* The directory of the running executable, from /proc/self/exe, for files
 * installed beside it (caller frees; NULL if it cannot be told or out of
 * memory). */
char *kb_exe_dir(void);
/* Where kb's own data is: the sources manifest ("sources.json"), the
 * kernel tasks ("tasks") and the skill library ("skills"), laid out alike
 * in a checkout's corpus/ and an installation's PREFIX/share/kb. The
 * folders looked in, in order (kb_data_dirs lists those there, at most
 * KB_DATA_DIRS, each once; the caller frees each):
 *   1. the folder of manifest (KB_MANIFEST), when given;
 *   2. corpus/ in the working directory (a checkout);
 *   3. the folder of built, when given (the manifest the KB was built
 *      with: kb_store_data_find reads it from the KB);
 *   4. corpus/ beside the executable's folder (build/kb of a checkout);
 *   5. share/kb beside it (PREFIX/bin/kb of `make install`).
 * kb_data_find: the first folder's name that exists (caller frees), or
 * NULL. Commands and servers call kb_store_data_find, which says what
 * manifest and built are. */
#define KB_DATA_DIRS 5
size_t kb_data_dirs(const char *manifest, const char *built, char *dirs[KB_DATA_DIRS]);
char *kb_data_find(const char *name, const char *manifest, const char *built);
/* Makes room for need elements of elem bytes in the array whose address
 * is arrp (a T **), of capacity *cap: grows by doubling (at least 8). On
 * failure returns KB_ERR_NOMEM and leaves the array and *cap untouched.
 * Use through KB_GROW(items, need, cap) (git's ALLOC_GROW). */
kb_rc kb_grow(void *arrp, size_t *cap, size_t need, size_t elem) KB_MUST_CHECK;
#define KB_GROW(items, need, cap) kb_grow(&(items), &(cap), (need), sizeof *(items))
/* Milliseconds from a monotonic clock. */
double kb_now_ms(void);
/* The CPUs this process may run on (its affinity: taskset, a container's
 * cpuset), else the online ones; at least 1. */
int kb_cpu_count(void);
/* Strict integer parse of a whole string; KB_ERR_USAGE if not a number in
 * [min, max]. */
kb_rc kb_parse_long(const char *s, long min, long max, long *out);
/* qsort's comparator of an array of strings (const char * items), by
 * strcmp. */
int kb_cmp_str(const void *a, const void *b);
/* 64-bit FNV-1a of p[0, n), continued from h (KB_FNV1A_INIT to start): a
 * hash for tables, not a checksum. */
#define KB_FNV1A_INIT 14695981039346656037ULL
uint64_t kb_fnv1a(uint64_t h, const void *p, size_t n);

/* ------------------------------------------------------------------ json */

/* The one way kb builds JSON objects (kb/json.c): each call adds to o
 * unless *ok is already 0, and clears *ok when it cannot allocate (sticky,
 * like a kb_rc chain), so a long run of puts is checked once at the end.
 * A string or item that is NULL is written as null. kb_json_put_item takes
 * item (deleted when it cannot be added or *ok is 0). The _obj/_arr calls
 * return the new member (NULL once *ok is 0); kb_json_push_obj appends a
 * new object to array a. */
void kb_json_put_str(cJSON *o, const char *key, const char *s, int *ok);
void kb_json_put_num(cJSON *o, const char *key, double x, int *ok);
void kb_json_put_bool(cJSON *o, const char *key, int b, int *ok);
void kb_json_put_null(cJSON *o, const char *key, int *ok);
void kb_json_put_item(cJSON *o, const char *key, cJSON *item, int *ok);
cJSON *kb_json_put_obj(cJSON *o, const char *key, int *ok);
cJSON *kb_json_put_arr(cJSON *o, const char *key, int *ok);
cJSON *kb_json_push_obj(cJSON *a, int *ok);
/* A string s appended to array a (NULL: null). */
void kb_json_push_str(cJSON *a, const char *s, int *ok);

/* ------------------------------------------------------------------ logging */

/* Diagnostics on stderr (library code may log; it never prints to stdout). */
typedef enum { KB_LOG_QUIET = 0, KB_LOG_INFO = 1, KB_LOG_DEBUG = 2 } kb_log_level;
void kb_log_set_level(kb_log_level level);
/* The program's words ("kb query") that a warning starts with, as an
 * error does: "kb query: warning: ..."; NULL or "": "warning: ..." alone. */
void kb_log_set_name(const char *name);
kb_log_level kb_log_get_level(void);
void kb_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void kb_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void kb_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Writes s to f as one line for a terminal: control bytes (a line feed
 * among them) are written escaped ("\\n", "\\x1b"). What the log and the
 * CLI's error line print a message through. */
void kb_fput_line_safe(FILE *f, const char *s);

/* ------------------------------------------------------------------ config */

/* kb's settings from the environment (KB_DIR, KB_EMBED_URL, ...), resolved
 * once by kb_config_load at start and passed down; kb/kb_int.h ("config.c") has the
 * struct and its table. */
typedef struct kb_config kb_config;

/* ------------------------------------------------------------------ kinds, filters */

/* What a chunk holds; stored as its name ("text", "code", ...). */
typedef enum {
    KB_KIND_TEXT = 0,
    KB_KIND_CODE,
    KB_KIND_TABLE,
    KB_KIND_PAPER,
    KB_KIND_SKILL
} kb_kind;

const char *kb_kind_name(kb_kind kind);
/* Returns 0 and sets *out, or -1 if name is no kind. */
int kb_kind_parse(const char *name, kb_kind *out);

#define KB_FILTER_MAX_SOURCES 32

/* Which chunks a search may return: by source and by kind. Its SQL lives
 * beside the schema (kb/store.c), so every index filters alike. */
typedef struct {
    const char *sources[KB_FILTER_MAX_SOURCES];
    size_t nsources;                       /* 0: every source */
    unsigned kinds;                        /* bit (1u << kb_kind); 0: all */
} kb_filter;

/* 1 when the filter lets every chunk through. */
int kb_filter_is_empty(const kb_filter *f);

/* ------------------------------------------------------------------ caches */

/* A bounded, thread-safe cache of byte strings, least recently used out
 * first (kb/lru.c): any number of threads may get and put at once. What
 * it holds never costs more than max_bytes, counting each entry's key,
 * value and bookkeeping; an entry that alone would pass the cap is not
 * kept. The query embeddings and the servers' results are kept in one. */
typedef struct kb_lru kb_lru;

typedef struct {
    size_t entries, bytes;          /* now */
    uint64_t hits, misses, evictions;   /* since kb_lru_new */
} kb_lru_stats;

/* NULL out of memory. Freed with kb_lru_free. */
kb_lru *kb_lru_new(size_t max_bytes);
void kb_lru_free(kb_lru *c);
/* The value kept for key[0..klen): a copy in *val (malloc'd, with a NUL
 * after its *vlen bytes; the caller frees it), and the entry made the
 * newest. KB_ERR_NOTFOUND when there is none (*val NULL), KB_ERR_NOMEM. */
kb_rc kb_lru_get(kb_lru *c, const void *key, size_t klen, void **val, size_t *vlen);
/* Keeps a copy of val[0..vlen) for key, replacing the one there was,
 * evicting the oldest entries until it fits. KB_ERR_NOMEM (nothing
 * changed). */
kb_rc kb_lru_put(kb_lru *c, const void *key, size_t klen, const void *val, size_t vlen);
/* Drops every entry (the counters of hits, misses and evictions stay). */
void kb_lru_clear(kb_lru *c);
void kb_lru_stats_get(kb_lru *c, kb_lru_stats *out);

/* ------------------------------------------------------------------ embeddings */

/* An embedder: text -> L2-normalised float vectors. */
typedef struct kb_embedder kb_embedder;

/* The local all-MiniLM-L6-v2 from model_dir (model.safetensors, vocab.txt;
 * kb_config's model_dir is the usual one; NULL or "" is no model).
 * threads: workers a batch is split across (BLAS itself runs
 * single-threaded); 0 means one per online CPU, at most 16. A missing,
 * truncated or wrong-hash model is KB_ERR_MODEL naming 'kb model fetch' /
 * KB_MODEL_DIR. The weights' SHA-256 verdict is cached in
 * model_dir/.kb-verified (keyed by size, mtime, inode). *out is freed with
 * kb_embedder_free. */
kb_rc kb_embedder_open_local(const char *model_dir, int threads,
                             kb_embedder **out, kb_err *err);
/* An OpenAI-compatible /v1/embeddings endpoint (url is the full endpoint
 * URL; model is required; api_key may be NULL and is never logged). Makes
 * one small request to learn the dimension, so a dead endpoint fails here.
 * Timeout per request: 60 s (kb_embedder_open_config uses the config's). */
kb_rc kb_embedder_open_remote(const char *url, const char *model,
                              const char *api_key, kb_embedder **out,
                              kb_err *err);
/* The embedder cfg names: with embed_url, the remote one (embed_model,
 * embed_api_key, embed_timeout_ms), else the local one (model_dir,
 * threads). */
kb_rc kb_embedder_open_config(const kb_config *cfg, kb_embedder **out,
                              kb_err *err);
void kb_embedder_free(kb_embedder *e);
int kb_embedder_dim(const kb_embedder *e);
/* "all-MiniLM-L6-v2", "all-MiniLM-L6-v2+tuned" (a model_dir holding
 * tuned.json, from kb tune: its weights' SHA-256 is pinned there in place
 * of the base's) or "remote:<model>". */
const char *kb_embedder_name(const kb_embedder *e);
/* SHA-256 of the weights (local) or "" (remote): recorded in the KB. */
const char *kb_embedder_weights_hash(const kb_embedder *e);
/* Embeds n texts into out[n * dim], each row L2-normalised (texts longer
 * than 256 tokens are truncated). One call at a time per embedder: it owns
 * its work buffers (the tokenizer alone is safe to share). */
kb_rc kb_embedder_embed(kb_embedder *e, const char *const *texts, size_t n,
                        float *out, kb_err *err);
/* kb_embedder_embed for query texts, through the process's cache of
 * query embeddings (kb_embed_cache): the texts found there are not
 * embedded again, the others are (in one batch) and kept. The vectors are
 * the embedder's own, bit for bit. Ingest's chunks do not go this way. */
kb_rc kb_embedder_embed_queries(kb_embedder *e, const char *const *texts, size_t n,
                                float *out, kb_err *err);
/* The process's cache of query embeddings (index/embed_cache.c), made on
 * first use: keyed by the embedder's identity (name, weights hash,
 * dimension) and the exact text it is given, at most
 * KB_EMBED_CACHE_BYTES (some 10,000 queries of 384 dimensions). NULL
 * when it could not be made (then nothing is cached). For its counters
 * (kb_lru_stats_get) and the tests. */
#define KB_EMBED_CACHE_BYTES (16u << 20)
kb_lru *kb_embed_cache(void);

/* ------------------------------------------------------------------ store */

/* An open KB: the directory, its kb.sqlite (WAL) and vector index. */
typedef struct kb_store kb_store;

enum {
    KB_STORE_READONLY = 1,   /* never writes; fails if the KB does not exist */
    KB_STORE_CREATE = 2      /* create the directory and schema if missing */
};

/* The KB directory to use: dir if given, else $KB_DIR, else
 * $XDG_DATA_HOME/kb, else ~/.local/share/kb. Caller frees. */
char *kb_store_default_dir(const char *dir);
/* Opens (and with KB_STORE_CREATE creates/migrates) the KB in dir.
 * *out is freed with kb_store_close. */
kb_rc kb_store_open(const char *dir, int flags, kb_store **out, kb_err *err);
void kb_store_close(kb_store *store);
const char *kb_store_dir(const kb_store *store);

/* kb_data_find (above) for a command or a server: manifest is KB_MANIFEST
 * (which is itself the answer for "sources.json"), built the manifest the
 * KB in kb_dir (NULL: cfg's) was last ingested from, as the KB records
 * it. The path (caller frees), or NULL when no folder has name. */
char *kb_store_data_find(const kb_config *cfg, const char *kb_dir, const char *name);

/* ------------------------------------------------------------------ manifest */

typedef struct {
    char *id;
    char *title;
    char *url;
    char *files_url;   /* a folder's files hang under this URL ("": url) */
    char *fetch_url;   /* where a page's bytes are fetched ("": url) */
    char *format;
    char *version;
    char **mirror;     /* paths relative to the mirror root; "x/" = folder */
    size_t nmirror;
    char **local;      /* paths relative to the manifest's folder, read from
                        * disk with or without a mirror; "x/" = folder */
    size_t nlocal;
} kb_source;

typedef struct {
    char *path;
    kb_source *sources;
    size_t n;
} kb_manifest;

/* Loads a sources manifest ({"sources":[{"id","title","url","mirror",
 * "format","version"}]}, and optionally "files_url": for a folder source,
 * the URL its files' relative paths are appended to, when that is not
 * "url" - a repository's page is not where its files are served - and
 * "fetch_url": for a page source, where its raw bytes are fetched, when
 * that is not the page cited, such as a GitHub README's raw file), and
 * "local": instead of "mirror" and "url", paths relative to the folder
 * that holds the manifest (the repository's own files, such as the skill
 * library: "skills/" beside corpus/sources.json), always read from disk.
 * kb_manifest_release frees it. */
kb_rc kb_manifest_load(const char *path, kb_manifest *m, kb_err *err);
void kb_manifest_release(kb_manifest *m);
const kb_source *kb_manifest_find(const kb_manifest *m, const char *id);
/* The manifest to use: KB_MANIFEST, else sources.json where
 * kb_store_data_find finds it (the working directory's corpus/, the
 * manifest the KB in kb_dir (NULL: cfg's) was built from, beside the
 * executable, the installed share/kb), else "corpus/sources.json" (for
 * the error that names it). Caller frees; NULL out of memory. */
char *kb_manifest_path(const kb_config *cfg, const char *kb_dir);

/* ------------------------------------------------------------------ ingest */

/* Progress of an ingest, reported after each document and at the end of
 * each source (finished = 1). */
typedef struct {
    const char *source;        /* source id */
    size_t source_index;       /* 0-based */
    size_t nsources;
    size_t docs_done;          /* documents of this source looked at */
    size_t docs_total;         /* 0 while unknown */
    size_t changed, unchanged, removed, failed;
    size_t chunks;             /* chunks written for this source */
    double elapsed_ms;         /* since this source started */
    int finished;
    const char *error;         /* the source's error, when it failed */
} kb_ingest_progress;

typedef void (*kb_ingest_progress_fn)(const kb_ingest_progress *p, void *ctx);

typedef struct {
    const char *manifest_path;  /* NULL: corpus/sources.json */
    const char *mirror_dir;     /* NULL: fetch URLs */
    const char *adhoc_source;   /* source id for ad-hoc paths/URLs */
    int force;                  /* re-parse unchanged documents */
    int embed;                  /* compute embeddings for new chunks */
    int reembed;                /* drop every vector and embed again */
    const char *index_kind;     /* FAISS factory string ("Flat", "HNSW32");
                                   NULL keeps the KB's */
    kb_ingest_progress_fn progress;
    void *progress_ctx;
    const kb_config *config;    /* the embedder and model; required */
} kb_ingest_opts;

/* Two skills of one ingest that look like one: the same kernel.cu (by
 * SHA-256) for the same kb-task and kb-bottleneck (lint's duplicate rule),
 * or description and "When to apply" embedded nearly alike (cosine >=
 * KB_SKILL_DUP_COSINE). */
#define KB_SKILL_DUP_COSINE 0.98

typedef struct {
    char *a, *b;               /* the skills' names, in ingest order */
    char *path_a, *path_b;     /* their SKILL.md as results report them */
    int same_kernel;           /* the kernel rule */
    double cosine;             /* of the two texts; -1 when not embedded */
} kb_skill_dup;

typedef struct {
    size_t sources, sources_failed;
    size_t docs_changed, docs_unchanged, docs_removed, docs_failed;
    size_t chunks_written, chunks_embedded;
    double took_ms;
    kb_skill_dup *dups;        /* near-duplicate skills (each also logged
                                * as a warning); kb_ingest_stats_release */
    size_t ndups;
} kb_ingest_stats;

/* Frees what kb_ingest_run put in stats (the near-duplicates). */
void kb_ingest_stats_release(kb_ingest_stats *stats);

/* Ingests targets: manifest source ids, local paths (files or folders) or
 * http(s) URLs; none means every source of the manifest. Each document is
 * written in its own transaction. A failing source or document is reported
 * through progress (error) and the rest proceed: the result is then
 * KB_ERR_PARTIAL with err naming the first failure. */
kb_rc kb_ingest_run(kb_store *store, const kb_ingest_opts *opts,
                    char *const *targets, size_t ntargets,
                    kb_ingest_stats *stats, kb_err *err);

/* What one target of kb_ingest_remove matched. */
typedef struct {
    const char *target;      /* as given (the caller's string) */
    const char *what;        /* "source", "folder", "file" or "URL" */
    size_t documents, chunks;
} kb_rm_item;

typedef struct {
    kb_rm_item *items;       /* one per target, in order */
    size_t n;
    char **docs;             /* the path (else URL) of each document matched */
    size_t ndocs, capdocs;
} kb_rm_result;

/* Removes what the targets name, all in one transaction: a source of the
 * KB (it and its documents), a local file or folder (the documents of that
 * real path or under it, files deleted since included), a URL (the
 * document fetched from it or cited by it); chunks, papers and vectors go
 * with their documents and the vector index is rebuilt. A target that
 * matches nothing is KB_ERR_NOTFOUND naming the KB's sources, and nothing
 * is removed. dry_run: out says what would go; nothing does. Release out
 * with kb_rm_result_release (also after a failure). */
kb_rc kb_ingest_remove(kb_store *store, char *const *targets, size_t ntargets,
                       int dry_run, kb_rm_result *out, kb_err *err);
void kb_rm_result_release(kb_rm_result *r);

/* ------------------------------------------------------------------ query */

typedef enum { KB_MODE_HYBRID = 0, KB_MODE_LEXICAL, KB_MODE_VECTOR } kb_mode;

const char *kb_mode_name(kb_mode mode);
int kb_mode_parse(const char *name, kb_mode *out);

/* A sub-query: the caller's own rewrite of the question, searched as a
 * list of its own and fused with the query's lists like hybrid's (a
 * lexical list weighs 1, a vector list less). lex: keywords (FTS5); vec:
 * a question or phrase, embedded; hyde: a hypothetical passage written in
 * the documents' own words, embedded. */
typedef enum { KB_SEARCH_LEX = 0, KB_SEARCH_VEC, KB_SEARCH_HYDE } kb_search_type;

typedef struct {
    kb_search_type type;
    const char *text;
} kb_search;

#define KB_QUERY_MAX_SEARCHES 10

/* "lex", "vec", "hyde". */
const char *kb_search_type_name(kb_search_type type);

/* 1 if text holds a word to search for (a letter or digit, or any
 * character beyond ASCII); a query of blanks or punctuation alone has none
 * and kb_query_run gives it no results. */
int kb_query_has_words(const char *text);
/* KB_ERR_USAGE naming the KB's sources when the filter names one the
 * KB does not hold: a mistake in the arguments to say (REST's 400, not
 * 404: no such endpoint), not a filter that quietly matches nothing
 * (kb_query_run checks it too). */
kb_rc kb_query_check_sources(kb_store *store, const kb_filter *filter, kb_err *err);
/* Returns 0 and sets *out, or -1 if name is no type. */
int kb_search_type_parse(const char *name, kb_search_type *out);

/* Called by the reranking stage with each pooled section's best chunk
 * and its features (kb eval --features dumps them to fit the weights). */
typedef void (*kb_rerank_trace_fn)(void *ctx, int64_t chunk_id,
                                   const double *features, size_t n);

/* A model that kb's caller lends the llm stage in place of an endpoint:
 * `kb mcp`'s client, through MCP sampling (serve/mcp_sampling.c). The
 * stage asks it only when config names no LLM (KB_LLM_URL): the
 * configured endpoint comes first. */
typedef struct {
    /* One completion of a system prompt and a user message, the reply at
     * most max_tokens, within timeout_ms: KB_OK with *text the reply's
     * text (caller frees) and model[0..size) the name of the model that
     * wrote it ("" when unsaid); else an error in err (a refusal, a
     * timeout, a reply without text), after which the stage keeps kb's
     * own order. */
    kb_rc (*complete)(void *ctx, const char *system, const char *user,
                      long max_tokens, long timeout_ms, char **text,
                      char *model, size_t size, kb_err *err);
    void *ctx;
    const char *name;   /* who lends it ("sampling: claude-code"): the
                           cache's key, and the model reported until a
                           reply names one */
    const char *via;    /* a literal for the results: "sampling" */
} kb_llm_lent;

/* The stage that reorders fusion's sections (kb query --rerank, the
 * search tool's rerank, KB_RERANK): DEFAULT is the configuration's
 * (KB_RERANK, else local); LOCAL the feature-weighted stage, then
 * KB_RERANK_URL's cross-encoder when one is set (hybrid only); LLM the
 * local stage, then one listwise request to KB_LLM_URL's model over the
 * best sections (query/rerank_llm.c); NONE fusion's order. */
typedef enum {
    KB_RERANK_DEFAULT = 0, KB_RERANK_LOCAL, KB_RERANK_LLM, KB_RERANK_NONE
} kb_rerank_kind;

/* "default", "local", "llm", "none". */
const char *kb_rerank_kind_name(kb_rerank_kind kind);
/* Returns 0 and sets *out for "local", "llm" or "none"; -1 otherwise. */
int kb_rerank_kind_parse(const char *name, kb_rerank_kind *out);
/* The stage a query asking for kind runs under config (NULL: none): DEFAULT
 * becomes KB_RERANK's, else LOCAL. KB_ERR_USAGE, naming the variable to
 * set, for a bad KB_RERANK, or for LLM when config names no usable LLM
 * (KB_LLM_URL, KB_LLM_API; KB_LLM_MODEL for Anthropic) and no model is
 * lent (lent NULL: none; a bad KB_LLM_URL fails even with one). */
kb_rc kb_query_rerank_resolve(const kb_config *config, kb_rerank_kind kind,
                              const kb_llm_lent *lent, kb_rerank_kind *out,
                              kb_err *err);

/* What the reranking stage did for one query (kb_results.rerank). */
typedef struct {
    kb_rerank_kind stage;      /* what ran: LOCAL, LLM or NONE (a mode or a
                                  list without a stage: NONE) */
    int remote;                /* LOCAL: KB_RERANK_URL's cross-encoder ran too */
    const char *model;         /* LLM: the model asked (KB_LLM_MODEL, else the
                                  URL); the config's string */
    int cached;                /* LLM: the order came from the cache, no request */
    size_t pool;               /* LLM: the sections it was asked to order */
    size_t ordered;            /* LLM: the known ids its reply gave */
    double llm_ms;             /* LLM: the request's time; 0 when cached */
    char fallback[256];        /* LLM: "" when its order was used, else why
                                  kb's own order was kept */
    const char *via;           /* LLM: "endpoint" (KB_LLM_URL) or the lent
                                  model's via ("sampling"); a literal */
    char lent_model[96];       /* LLM, lent: the model its reply named */
} kb_rerank_info;

/* The llm stage over a caller's own pool (the generator's candidate
 * passages): one request to config's LLM (KB_LLM_URL; else lent, when
 * given) with the stage's prompt - question, then each of ids[0..n) (chunk
 * ids) as a numbered passage - its parser, timeout and cache. order
 * (room for n) gets order[0..*norder): indices into ids of the passages
 * its reply named, in its order; *norder 0 when it fell back (info says
 * why; a warning is logged). Fails only when config names no usable LLM
 * and none is lent (KB_ERR_USAGE), a chunk is not in the KB, or on
 * memory. */
kb_rc kb_query_llm_order(kb_store *store, const kb_config *config, const kb_llm_lent *lent,
                         const char *question, const int64_t *ids, size_t n, size_t *order,
                         size_t *norder, kb_rerank_info *info, kb_err *err);

typedef struct {
    const char *text;
    kb_mode mode;
    const kb_search *searches;             /* sub-queries fused with the
                                              query's lists; the vector
                                              ones are dropped on a KB
                                              without vectors */
    size_t nsearches;                      /* at most KB_QUERY_MAX_SEARCHES */
    int k;                                 /* results wanted, default 10 */
    kb_filter filter;                      /* sources and kinds */
    int snippet;                           /* 1: text is a snippet, 0: whole */
    const kb_config *config;               /* opens the store's default
                                              embedder when none is given */
    int no_rerank;                         /* 1: fusion's order as it is
                                              (rerank NONE) */
    kb_rerank_kind rerank;                 /* the stage; DEFAULT: config's */
    kb_rerank_trace_fn trace;              /* NULL, or told each reranked
                                              section's features */
    void *trace_ctx;
    const kb_llm_lent *llm;                /* NULL, or the llm stage's model
                                              when config names no LLM */
} kb_query_opts;

void kb_query_opts_init(kb_query_opts *opts);

/* One result, in the shape of `kb query --json` (docs/design.md, Retrieval). */
typedef struct kb_result kb_result;
struct kb_result {
    int rank;                 /* 1-based */
    double score;
    int64_t chunk_id;
    char *source;             /* manifest id */
    char *title;              /* document title */
    char **heading_path;      /* top down; for a paper: section path, title */
    size_t depth;
    char *url;                /* with #anchor when the section has one */
    char *path;               /* mirror-relative, local path, or "" */
    kb_kind kind;
    char *text;
    char *version;            /* the source's version ("" when it has none) */
    int lexical_rank;         /* 0: not in that list */
    int vector_rank;
    double lexical_score;
    double vector_score;
    /* the results whose text is near-identical to this one's, shown as
     * this one (their text ""; ranks, scores unset), best first */
    kb_result *similar;
    size_t nsimilar;
};

/* At most this many skills are shown apart from the results (below). */
#define KB_QUERY_SKILLS 3

typedef struct {
    kb_result *items;
    size_t n;
    /* A query with no source or kind filter ranks the documentation; the
     * skill library's best matches come apart from it, one result a skill
     * (its best chunk, as a snippet), ranked among themselves: a verified
     * technique is worth showing, but three chunks of one skill should not
     * push the guide's sections out. A filter ranks skills like the rest. */
    kb_result *skills;
    size_t nskills;
    double took_ms;
    kb_mode mode;
    /* where the time went (0 for a step that did not run): the lexical
     * search, the query's embedding (in parallel with it), the vector
     * search, fusion and reading the results */
    double lexical_ms, embed_ms, vector_ms, results_ms;
    kb_rerank_info rerank;     /* what the reranking stage did */
} kb_results;

void kb_results_release(kb_results *r);
/* Runs a query. emb may be NULL for lexical mode (and is opened on demand
 * by callers for the other modes). */
kb_rc kb_query_run(kb_store *store, kb_embedder *emb, const kb_query_opts *opts,
                   kb_results *out, kb_err *err);

/* ------------------------------------------------------------------ expand */

/* Query expansion (kb query --expand): the LLM of KB_LLM_URL writes a
 * hypothetical passage in the documents' words (a hyde sub-query) and a
 * few keyword rewrites (lex sub-queries) for a query, which are searched
 * beside it and fused as kb_query_opts.searches are. */
#define KB_EXPAND_MAX_SEARCHES 4   /* one passage, up to 3 keyword rewrites */

typedef struct {
    kb_search searches[KB_EXPAND_MAX_SEARCHES];   /* texts owned */
    size_t n;
    int cached;               /* 1: read from the KB's cache, no LLM call */
    double llm_ms;            /* the LLM call's wall time; 0 when cached */
    char *model;              /* the cache's key: KB_LLM_MODEL, else the URL */
    char *error;              /* NULL, or why the LLM gave nothing usable
                                 (the query is then searched alone) */
} kb_expansion;

void kb_expansion_init(kb_expansion *x);
void kb_expansion_release(kb_expansion *x);

/* KB_ERR_USAGE, saying which variable to set, when config names no LLM
 * (KB_LLM_URL) or a bad KB_LLM_API; KB_OK otherwise. */
kb_rc kb_query_expand_check(const kb_config *config, kb_err *err);

/* Expands query: from the KB's cache (query text, model, prompt version)
 * when it holds it, else by one LLM request (about 120 tokens, temperature
 * 0), whose usable reply is then cached through a writable handle of the
 * same KB (store itself may be read-only; a cache that cannot be written
 * costs the next run a request, nothing else). A failed request or a reply
 * with nothing usable is no error: out->error says why, a warning is
 * logged, and out->n is 0. Fails only without an LLM configured
 * (KB_ERR_USAGE) or memory. out must have been through kb_expansion_init;
 * release it with kb_expansion_release. */
kb_rc kb_query_expand(kb_store *store, const kb_config *config, const char *query,
                      kb_expansion *out, kb_err *err);
/* x as `kb query --json --expand` reports it: {"model", "cached",
 * "llm_ms", "searches":[{"type","query"}], "error"} (error null when the
 * LLM answered). Caller frees; NULL when out of memory. */
cJSON *kb_expansion_json(const kb_expansion *x);
/* Appends x's sub-queries to searches (an array of KB_QUERY_MAX_SEARCHES
 * holding *n, the caller's own) as far as there is room, and drops from x
 * those that found none, so x says what was searched. The texts stay x's. */
void kb_expansion_apply(kb_expansion *x, kb_search *searches, size_t *n);

/* ------------------------------------------------------------------ browse */

/* What `kb status` shows. */
typedef struct {
    char *id;
    char *title;
    char *url;
    char *version;             /* the manifest's, "" when it gives none */
    size_t documents, chunks, papers;
    long long last_ingest;     /* unix time, 0 if never */
    char *last_error;          /* NULL if the last ingest succeeded */
} kb_source_status;

typedef struct {
    kb_source_status *sources;
    size_t n;
    size_t documents, chunks, papers, embeddings;
    int schema_version;
    long long disk_bytes;
    char *embedder;            /* "" when the KB has no vectors */
    char *vec_index;           /* the FAISS factory string ("Flat") */
} kb_status;

kb_rc kb_store_status(kb_store *store, kb_status *out, kb_err *err);
void kb_status_release(kb_status *s);

/* One chunk by id as a result (rank 1), or with whole_section every chunk
 * of its section in document order. */
kb_rc kb_get_chunk(kb_store *store, int64_t chunk_id, int whole_section,
                   kb_results *out, kb_err *err);

/* Paper records, optionally only those whose section path contains
 * section, and those whose title or section holds every one of words
 * (split at spaces); both case-insensitive, NULL for none. */
typedef struct {
    int64_t chunk_id;
    char *date;
    char *title;
    char *section;
    char *links_json;          /* {"paper": url, "code": url, ...} */
} kb_paper_row;

typedef struct {
    kb_paper_row *items;
    size_t n;
} kb_paper_list;

kb_rc kb_papers_list(kb_store *store, const char *section, const char *words,
                     kb_paper_list *out, kb_err *err);
void kb_paper_list_release(kb_paper_list *l);

/* ------------------------------------------------------------------ tools */

/* The tool table (api/, assembled once in api/api.c: kb_api_tools):
 * each operation a client can call, declared once - its name, a
 * description written for an agent, JSON Schemas (draft 2020-12) of its
 * arguments and of its result, a handler that makes the result as cJSON,
 * and flags that say where it is offered (MCP, REST), whether a server
 * must opt in to it (it runs kernels) and what a server must attach to
 * its store first (a skill library, verify's settings). The CLI's --json
 * output, `kb serve` and `kb mcp` all call that one table, so they cannot
 * drift apart. State the tools need besides the store (a verifier
 * process, an LLM client, the library) lives in the store's named slots,
 * so one kb_tool_ctx serves every tool.
 *
 * Thread safety: tools keep no state of their own; one kb_tool_ctx (a
 * store and an embedder) per thread, as a server keeps one per worker. */

typedef struct {
    kb_store *store;       /* the open KB; read-only is enough for query/'s */
    kb_embedder *emb;      /* the query embedder; NULL: the store's default,
                              opened on first use and kept with the store */
    const kb_config *config;   /* where that default comes from */
    int budget_tokens;     /* the token budget of a search or get result
                              when the call names none: kb mcp's is
                              KB_TOOL_BUDGET_DEFAULT, 0 is none (kb query
                              --json, the REST API) */
    struct kb_result_cache *results;   /* the answers of the tools marked
                              cached, shared by a server's threads (NULL:
                              none, each call runs) */
    int cache_hit;         /* out: kb_tool_run sets it, 1 when the answer
                              came from results */
    const kb_llm_lent *llm;   /* NULL, or the model search's llm stage uses
                              when config names none (kb mcp: the client's,
                              through sampling) */
} kb_tool_ctx;

/* A server's cache of tool answers (api/api.c): keyed by the tool,
 * its arguments in canonical form (keys sorted), the context's budget and
 * the KB's generation - which moves when anything commits to the KB (an
 * ingest; SQLite's data_version, checked on each call), so an answer is
 * never served from an older KB. At most max_bytes; thread-safe. One
 * cache serves one configuration (the embedder and reranker its callers
 * were opened with). An answer from the cache is the miss's JSON, byte
 * for byte, but for took_ms: the time the hit took. */
typedef struct kb_result_cache kb_result_cache;
#define KB_RESULT_CACHE_BYTES (64u << 20)
/* *out freed with kb_result_cache_free. */
kb_rc kb_result_cache_new(size_t max_bytes, kb_result_cache **out, kb_err *err);
void kb_result_cache_free(kb_result_cache *c);
void kb_result_cache_stats(kb_result_cache *c, kb_lru_stats *out);

/* What an agent's context gets by default: a result under ~8,000 tokens
 * (Claude Code warns at 10,000). */
#define KB_TOOL_BUDGET_DEFAULT 8000
/* The search tool's limits, which kb query checks too (the same in text
 * and --json, said in the CLI's words): k from 1 to KB_TOOL_SEARCH_K_MAX,
 * budget_tokens from KB_TOOL_BUDGET_MIN to KB_TOOL_BUDGET_MAX. */
#define KB_TOOL_SEARCH_K_MAX 50
#define KB_TOOL_BUDGET_MIN 1000
#define KB_TOOL_BUDGET_MAX 200000

/* A handler: runs the operation with args (an object already checked
 * against the tool's input_schema by kb_tool_run) and sets *out to the
 * result object, which the caller frees with cJSON_Delete. On failure
 * *out is NULL and err says why: KB_ERR_USAGE for arguments the schema
 * cannot express, else the operation's own code (KB_ERR_NOTFOUND, ...). */
typedef kb_rc (*kb_tool_fn)(kb_tool_ctx *ctx, const cJSON *args, cJSON **out,
                            kb_err *err);

typedef struct {
    const char *name;           /* [a-z0-9_]+, unique */
    const char *description;    /* one paragraph for an agent: when to use
                                   it, what comes back */
    const char *input_schema;   /* JSON Schema text: "type":"object",
                                   "additionalProperties":false, required
                                   fields listed */
    const char *output_schema;  /* JSON Schema text of the result object */
    int read_only;              /* 1: changes nothing (MCP readOnlyHint) */
    kb_tool_fn fn;
    int cached;                 /* 1: its answers are worth keeping in a
                                   kb_result_cache (a search's) */
    unsigned flags;             /* KB_TOOL_*: where it is offered, what it
                                   needs */
} kb_tool;

#define KB_TOOL_MCP 1u            /* offered over MCP (kb mcp, /mcp) */
#define KB_TOOL_REST 2u           /* offered over REST (kb serve's /v1) */
#define KB_TOOL_OPT_IN 4u         /* offered only when the server opts in:
                                     it runs kernels on the GPU */
#define KB_TOOL_NEEDS_SKILLS 8u   /* the skill library attached first */
#define KB_TOOL_NEEDS_VERIFY 16u  /* verify's settings attached first */
#define KB_TOOL_NEEDS_LIBRARY 32u /* answers from the skill library alone:
                                     not offered by a server that serves
                                     none (skill_get) */

/* The tool of table[0..n) named name, or NULL. */
const kb_tool *kb_tool_lookup(const kb_tool *table, size_t n, const char *name);
/* kb_tool_lookup in the one table (api/api.h, kb_api_tools). */
const kb_tool *kb_tool_find(const char *name);
/* Checks args (NULL: no arguments) against tool's input_schema: types,
 * ranges, enums, lengths, required and unknown keys. A failure is
 * KB_ERR_USAGE with a message naming the tool, the argument and what it
 * must be ("search: 'k' must be an integer from 1 to 50, not 0"); a schema
 * that uses a keyword this checker does not know is KB_ERR_INTERNAL. */
kb_rc kb_tool_check_args(const kb_tool *tool, const cJSON *args, kb_err *err);
/* An optional argument given as "" is absent (agents under strict function
 * calling fill every field, "" for those they do not mean): *trimmed is a
 * copy of args without them (caller frees), or NULL when args has none.
 * Only the schema's own properties: an unknown one stays for the checker
 * to refuse, "" or not.
 * KB_ERR_NOMEM when out of memory. kb_tool_run applies it. */
kb_rc kb_tool_drop_empty(const kb_tool *tool, const cJSON *args, cJSON **trimmed);
/* Checks args (kb_tool_check_args) and runs tool's handler; *out as for
 * kb_tool_fn (caller frees with cJSON_Delete; NULL on failure). The only
 * way a handler should be called. With ctx->results and a tool marked
 * cached, the answer is the cache's when it holds one for this call and
 * this generation of the KB (ctx->cache_hit 1), else the handler's, then
 * kept. */
kb_rc kb_tool_run(const kb_tool *tool, kb_tool_ctx *ctx, const cJSON *args,
                  cJSON **out, kb_err *err);
/* kb_tool_run of kb_tool_find(name); an unknown name is KB_ERR_USAGE
 * listing the tools. */
kb_rc kb_tool_call(kb_tool_ctx *ctx, const char *name, const cJSON *args,
                   cJSON **out, kb_err *err);

#endif /* KB_H */
