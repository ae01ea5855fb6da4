/*
 * ingest_int.h - ingest's internals, one section per file: the parsed
 * document every parser fills, the parsers and what they share, the
 * chunker, fetching, the documents an ingest reads and what it writes.
 * The CLI and the servers reach ingest through kb_ingest_run (kb.h).
 */
#ifndef KB_INGEST_INT_H
#define KB_INGEST_INT_H

#include "index/index.h"

#include <sys/stat.h>

/* ------------------------------------------------------------ doc.c */

#define KB_MAX_HEADING_DEPTH 12

/* A link of a paper record, by label: "paper", "code", "blog", ... */
typedef struct {
    char *label;
    char *url;
} kb_link;

/* One entry of a literature list. */
typedef struct {
    char *date;        /* "YYYY-MM" (from "[MM/YYYY]"), or "" */
    char *title;
    kb_link *links;
    size_t nlinks;
} kb_paper;

/* One block of a parsed document: a paragraph run, a code block, a table,
 * a list, or a paper record, under the heading path where it appeared.
 * heading[0] is the document's top heading. anchor is the deep-link anchor
 * of the innermost heading that has one ("" if none). */
typedef struct {
    kb_kind kind;
    char *heading[KB_MAX_HEADING_DEPTH];
    size_t depth;
    char *anchor;
    char *text;
    kb_paper *paper;   /* KB_KIND_PAPER only */
} kb_block;

/* A parsed document. Parsers fill it through kb_doc_heading / kb_doc_add /
 * kb_doc_add_paper; the chunker reads blocks. All strings are owned by the
 * doc and freed by kb_doc_release. */
typedef struct {
    char *title;                                 /* may be NULL */
    kb_block *blocks;
    size_t nblocks, capblocks;
    /* the current heading stack */
    char *stack[KB_MAX_HEADING_DEPTH];
    char *stack_anchor[KB_MAX_HEADING_DEPTH];
    size_t depth;
} kb_doc;

void kb_doc_init(kb_doc *doc);
void kb_doc_release(kb_doc *doc);
/* Opens a section at level (1 = top). Deeper open sections close; a level
 * deeper than depth+1 nests directly under the current one. anchor may be
 * NULL or "". The first level-1 heading also becomes the title if unset. */
kb_rc kb_doc_heading(kb_doc *doc, int level, const char *title,
                     const char *anchor);
/* Adds a block of text/code/table under the current section. Text is copied;
 * empty or all-blank text is ignored. */
kb_rc kb_doc_add(kb_doc *doc, kb_kind kind, const char *text, size_t len);
/* Adds a paper record under the current section (kind paper). The paper's
 * strings are copied. */
kb_rc kb_doc_add_paper(kb_doc *doc, const kb_paper *paper);
void kb_paper_release(kb_paper *p);

/* ------------------------------------------------------------ parse_util.c */

/* What the parsers share; parse_util.c calls no parser. */

/* 1 if data does not look like text: a NUL byte in the first 8 KiB (unless
 * it starts with a UTF-16 byte-order mark), or more than 10% of those bytes
 * control characters other than tab, newline, carriage return, form feed
 * and escape. Empty data is text. */
int kb_ingest_looks_binary(const char *data, size_t len);

/* The check every parser makes first: KB_ERR_PARSE with "'path' does not
 * look like WHAT (binary data)" when data looks binary, or holds a NUL byte
 * anywhere (no parser decodes UTF-16, and a NUL would cut the stored text);
 * KB_OK otherwise, empty data included. path may be NULL. */
kb_rc kb_ingest_check_text(const char *data, size_t len, const char *path,
                           const char *what, kb_err *err);

/* The last component of a path or URL ("a/b/c.cu" -> "c.cu"); a pointer
 * into path, never NULL. */
const char *kb_ingest_basename(const char *path);

/* 1 if s[0, len) holds only white space (or nothing). */
int kb_ingest_blank(const char *s, size_t len);

/* Trims white space at both ends of s[0, *n) and returns the new start. */
const char *kb_ingest_trim(const char *s, size_t *n);

/* A parser's sticky error: keeps the first failure in *rc, so later steps
 * can check one code. */
void kb_parse_fail(kb_rc *rc, kb_rc why);
/* Appends s[0, n) to b; KB_ERR_NOMEM into *rc (kb_parse_fail) when it
 * cannot. */
void kb_parse_put(kb_rc *rc, kb_buf *b, const char *s, size_t n);
/* kb_parse_put for the prose of a page converted from Sphinx HTML, which
 * lost the blanks around its links: a small word glued to the capitalised
 * link text after it ("seeDevice Memory Accesses", "inFigure 2") and a
 * figure or table reference glued to the words around it ("the
 * followingTable 12summarizes") come apart again. */
void kb_parse_put_unglued(kb_rc *rc, kb_buf *b, const char *s, size_t n);

/* The GitHub-style slug of a heading ("Loop Counters: Signed" ->
 * "loop-counters-signed"). Caller frees; NULL out of memory. */
char *kb_slugify(const char *heading);

/* The id docutils (and so Sphinx) gives a section with this title:
 * lower-case, compatibility-decomposed to ASCII, runs of other characters
 * to one '-', leading digits and dashes and trailing dashes dropped
 * ("12.1.5. Loop Counters Signed vs. Unsigned" ->
 * "loop-counters-signed-vs-unsigned"). Caller frees; "" if nothing is
 * left; NULL only on no memory. */
char *kb_ingest_docutils_id(const char *title);

/* A set of strings, for de-duplicating anchors. */
typedef struct {
    char **slots;
    size_t cap, n;
} kb_strset;

void kb_strset_init(kb_strset *s);
void kb_strset_release(kb_strset *s);
int kb_strset_has(const kb_strset *s, const char *key);
/* Adds a copy of key; returns 0, or -1 on no memory. */
int kb_strset_add(kb_strset *s, const char *key);

/* The GitHub slug of heading, made unique against seen ("x", "x-1",
 * "x-2", ...) and added to it. Caller frees; NULL out of memory. */
char *kb_ingest_unique_slug(kb_strset *seen, const char *heading);

/* --------------------------------- parse_html.c, parse_markdown.c, ... */

/* Every parser takes the raw bytes of one document and fills doc. path is
 * the document's path or URL, for messages and for formats that depend on
 * the file name. A parser never fails on merely odd input (it recovers);
 * it fails with KB_ERR_PARSE on input that is not its format at all (for
 * example binary data given as HTML). */
typedef kb_rc (*kb_parse_fn)(const char *data, size_t len, const char *path,
                             kb_doc *doc, kb_err *err);

/* parse_html.c */
kb_rc kb_parse_html(const char *data, size_t len, const char *path,
                    kb_doc *doc, kb_err *err);
/* parse_markdown.c: CommonMark + tables. List items of the form
 * "[MM/YYYY] Title [[label]](url) | ..." become paper records. */
kb_rc kb_parse_markdown(const char *data, size_t len, const char *path,
                        kb_doc *doc, kb_err *err);
/* parse_rst.c */
kb_rc kb_parse_rst(const char *data, size_t len, const char *path,
                   kb_doc *doc, kb_err *err);
/* parse_cuda.c: .cu/.cuh/.h/.cpp: the leading comment, then one code block
 * per function with its preceding comment. */
kb_rc kb_parse_cuda(const char *data, size_t len, const char *path,
                    kb_doc *doc, kb_err *err);
/* parse_text.c */
kb_rc kb_parse_text(const char *data, size_t len, const char *path,
                    kb_doc *doc, kb_err *err);
/* parse_skill.c: a SKILL.md (skills/skill.h) as blocks of kind skill: the
 * heading "NAME (STATUS, SPEEDUPx)", the description with a line of the
 * skill's metadata and "When to apply" first, then the other sections. A
 * SKILL.md that does not parse is KB_ERR_PARSE with its file:line. */
kb_rc kb_parse_skill(const char *data, size_t len, const char *path,
                     kb_doc *doc, kb_err *err);

/* ------------------------------------------------------------ parse_papers.c */

/* A link in a leaf of text: its text is the leaf's text[start, end). */
typedef struct {
    size_t start, end;
    char *href;
} kb_text_link;

/* A leaf of inline text (a paragraph, a list item's own text) and its
 * links, borrowed. */
typedef struct {
    const char *text;
    size_t len;
    const kb_text_link *links;
    size_t nlinks;
} kb_leaf;

/* 1 if the leaf's first line starts a literature entry: "[date] ..."
 * ("[MM/YYYY]", "[YYYY-MM]", "[YYYY]"), or "[note] ..." with a "[label]"
 * link on the line. */
int kb_parse_papers_start(const kb_leaf *leaf);
/* Adds the leaf's entries to doc as paper records, one per line that
 * starts an entry (the lines after it continue it): the title is the
 * text before the first link, each link a labelled URL. Returns how many
 * it added (0: the leaf is ordinary text; an entry with no title is
 * none). A failure goes to *rc (sticky, kb_parse_fail). */
size_t kb_parse_papers_add(kb_doc *doc, const kb_leaf *leaf, kb_rc *rc);

/* ------------------------------------------------------------ parsers.c */

/* Picks a parser from the file name (SKILL.md, else the extension), else
 * from format hint ("html", "markdown", "rst", "cuda-source", "text"),
 * else by sniffing.
 * Returns NULL for a file kb does not ingest (images, binaries). */
kb_parse_fn kb_parser_for(const char *path, const char *format_hint);

/* ------------------------------------------------------------ chunk.c */

typedef struct {
    kb_kind kind;
    size_t depth;          /* of the heading path (the first block's, or one
                              less for tiny sibling sections merged) */
    char *heading_json;    /* JSON array of the heading path */
    char *heading_text;    /* "A > B > C", what the FTS heading column gets */
    char *anchor;
    char *text;
    int tokens;            /* word pieces, including the heading prefix */
    const kb_paper *paper; /* borrowed from the doc, KB_KIND_PAPER only */
    const kb_block *first; /* borrowed: the first block, for its heading */
} kb_chunk;

typedef struct {
    kb_chunk *items;
    size_t n, cap;
} kb_chunks;

/* The encoder's window (KB_TOK_MAX_LEN, 256 pieces) less the [CLS] and
 * [SEP] it adds: a chunk this long is embedded whole. */
#define KB_CHUNK_MAX_TOKENS 254
/* A chunk's text is also at most this many bytes: a 20 MB "word" is one
 * [UNK] piece, and must not become one 20 MB chunk. Far above any real
 * chunk (the corpus's longest is 2.4 KB). */
#define KB_CHUNK_MAX_BYTES 8192

/* Counts word pieces: with tok, exactly; without, an estimate that follows
 * BERT's pre-tokenisation (words, punctuation, long words in pieces). */
size_t kb_chunk_count_tokens(const kb_tokenizer *tok, const char *text);
/* Splits doc into chunks of at most max_tokens word pieces each, including
 * the heading-path prefix the embedder sees, and of at most
 * KB_CHUNK_MAX_BYTES of text; in time linear in the document's length.
 * Borrowed pointers in the
 * chunks point into doc: release the chunks before the doc. */
kb_rc kb_chunk_doc(const kb_doc *doc, const kb_tokenizer *tok, int max_tokens,
                   kb_chunks *out, kb_err *err);
void kb_chunks_release(kb_chunks *c);

/* ------------------------------------------------------------ fetch.c */

typedef struct {
    long connect_timeout_s;   /* default 10 */
    long timeout_s;           /* whole transfer, default 60 */
    long low_speed_time_s;    /* cut off after this long below 1 byte/s,
                                 default 30 */
    int max_retries;          /* on 5xx/429/network errors, default 3 */
    long retry_base_ms;       /* backoff base, doubles each retry, default 500;
                                 each wait (and Retry-After) capped at 30 s */
    size_t max_bytes;         /* body cap, default 64 MiB */
    long max_redirects;       /* default 5 */
} kb_fetch_opts;

void kb_fetch_opts_default(kb_fetch_opts *opts);

typedef struct {
    kb_buf body;
    long status;          /* final HTTP status (200, or 304 served from cache) */
    int from_cache;       /* 1 if the body came from the cache (304) */
    char *etag;           /* may be NULL; caller frees via release */
    char *last_modified;  /* may be NULL */
    char *effective_url;  /* after redirects */
    int attempts;         /* requests made (1 + retries) */
} kb_fetch_result;

void kb_fetch_result_init(kb_fetch_result *r);
void kb_fetch_result_release(kb_fetch_result *r);
/* GETs url (http/https only). With cache_dir, a cached copy's ETag/
 * Last-Modified are sent as conditional headers, a 304 returns the cached
 * body, and a 200 updates the cache atomically: <cache_dir>/<sha256(url)>
 * holds the body, <sha256(url)>.json the URL, validators, fetch time and
 * the body's SHA-256 (a cache entry that does not match is ignored). A
 * failed fetch leaves the cache as it was. Retries 5xx/429/transient
 * network errors with backoff (honouring Retry-After); 4xx, an oversized
 * body and too many redirects fail at once. out must have been through
 * kb_fetch_result_init; its old contents are released, and the caller
 * releases it with kb_fetch_result_release (also on failure). Errors are
 * KB_ERR_NET ("cannot fetch 'URL': HTTP 404"), KB_ERR_USAGE for a URL that
 * is not http(s), KB_ERR_NOMEM. Thread-safe (one easy handle per call). */
kb_rc kb_fetch_url(const char *url, const char *cache_dir,
                   const kb_fetch_opts *opts, kb_fetch_result *out,
                   kb_err *err);

/* ------------------------------------------------------------ docs.c */

/* One document to look at: where its bytes are and how results cite it. */
typedef struct {
    char *key;        /* unique within the source */
    char *file;       /* local file to read, or NULL to fetch url */
    char *path;       /* reported 'path' ("" for fetched documents) */
    char *url;        /* citation URL (no anchor) */
    char *fetch;      /* where to fetch it, when not url (NULL: url) */
} kb_docref;

typedef struct {
    kb_docref *items;
    size_t n, cap;
    size_t failed;    /* folders that could not be listed: their
                         documents are neither read nor removed */
    kb_err first;     /* why the first of them could not */
} kb_doclist;

void kb_doclist_release(kb_doclist *l);
/* Appends a document (file NULL: fetched from url); the strings are
 * copied. On failure the half-made entry is released with the list. */
kb_rc kb_doclist_add(kb_doclist *l, const char *key, const char *file,
                     const char *path, const char *url, kb_err *err);
/* The documents of a manifest source: its local files (beside the
 * manifest at manifest_path), its mirror files when mirror is given,
 * else its URL. */
kb_rc kb_doclist_source(const kb_source *src, const char *manifest_path,
                        const char *mirror, kb_doclist *out, kb_err *err);
/* Every supported file of the tree at dir (a folder: st, from stat), its
 * own folders first, then those reached through links, each once; rel is
 * what its files' keys and paths start with, folder_url the URL they hang
 * under (format: the source's hint). A subfolder that cannot be read is
 * counted in out->failed (out->first says why) and the rest is listed. */
kb_rc kb_doclist_tree(const char *dir, const struct stat *st, const char *rel,
                      const char *format, const char *folder_url,
                      kb_doclist *out, kb_err *err);
/* "file:///abs/path" for a local path, encoded (caller frees; NULL out
 * of memory). */
char *kb_ingest_file_url(const char *path);
/* 1 if s is an http:// or https:// URL. */
int kb_ingest_is_url(const char *s);
/* A target as ingest reads it, into *out (caller frees): a file:// URL is
 * the local path it names (percent-decoded), http(s) URLs, ids and paths
 * stay as they are; any other URL (ftp://...) is KB_ERR_USAGE. */
kb_rc kb_ingest_target(const char *t, char **out, kb_err *err);

/* ------------------------------------------------------------ write.c */

/* One ingest (or kb rm) at a time per KB: waits for another to finish,
 * saying so. Sets *fd to the locked file (the caller closes it to
 * unlock). */
kb_rc kb_ingest_lock(kb_store *store, int *fd, kb_err *err);
/* Records a source (inserted or updated). */
kb_rc kb_ingest_source_record(kb_store *store, const char *id, const char *title,
                              const char *url, const char *format,
                              const char *version, kb_err *err);
/* Records a source's pass: when it ran, and its first error (NULL: none). */
kb_rc kb_ingest_source_finish(kb_store *store, const char *id, const char *error,
                              kb_err *err);
/* Reads (or fetches) one document of source, and unless its hash is
 * unchanged (or opts->force) parses, chunks (sized by tok, NULL:
 * estimated) and stores it in one transaction; title, when set, is its
 * title. *changed says which happened, *nchunks how many chunks it has. */
kb_rc kb_ingest_document(kb_store *store, const kb_ingest_opts *opts,
                         const char *source, const char *format, const char *title,
                         const kb_docref *ref, const kb_tokenizer *tok,
                         int *changed, size_t *nchunks, kb_err *err);
/* Removes the source's documents whose keys are not in seen (sorted by
 * kb_cmp_str); with under, only those under that folder. Adds
 * their number to *removed. */
kb_rc kb_ingest_remove_gone(kb_store *store, const char *source, const char *under,
                            char **seen, size_t nseen, size_t *removed, kb_err *err);

/* ------------------------------------------------------------ skill_dups.c */

/* A SKILL.md that an ingest read: where its document is stored and where
 * the file is. */
typedef struct {
    const char *source;    /* the document's source id */
    const char *key;       /* its key within the source */
    const char *file;      /* the SKILL.md on disk */
    const char *path;      /* its path as results report it */
} kb_skill_ref;

/* Appends to stats->dups every pair of refs that are near-duplicate
 * skills (kb_skill_dup), logging each as a warning. The texts are compared
 * only with an embedder (NULL: by kernel only). A SKILL.md that does not
 * parse is skipped (the document's own ingest said why). Errors:
 * KB_ERR_NOMEM, the embedder's. */
kb_rc kb_ingest_skill_dups(kb_embedder *emb, const kb_skill_ref *refs, size_t n,
                           kb_ingest_stats *stats, kb_err *err);

#endif
