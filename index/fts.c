/* fts.c - the lexical index: FTS5 rows for chunks, identifier forms, and
 * safe MATCH expressions built from whatever text a user types. */
#include "index/index.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTS 16

/* Words too common to help ranking; the question words people type. */
static const char *const stopwords[] = {
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "could",
    "do", "does", "for", "from", "get", "gives", "has", "have", "how", "i",
    "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or",
    "should", "so", "than", "that", "the", "their", "them", "then", "there",
    "these", "this", "to", "use", "using", "was", "way", "we", "what",
    "when", "where", "whether", "which", "while", "who", "why", "will",
    "with", "would", "you", "your",
};

int kb_fts_is_stopword(const char *w)
{
    for (size_t i = 0; i < sizeof stopwords / sizeof stopwords[0]; i++)
        if (strcmp(w, stopwords[i]) == 0)
            return 1;
    return 0;
}

static int is_word_char(unsigned char c)
{
    return isalnum(c) || c == '_' || c == '.' || c == ':' || c >= 0x80;
}

/* A word is an identifier when its shape says so: inner '_', '.', "::",
 * a lower-to-upper case change, or letters and digits together. Plain
 * numbers ("3.5", "9.7.1") are not. */
int kb_fts_is_identifier(const char *w, size_t len)
{
    int letters = 0, digits = 0, inner_sep = 0, camel = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)w[i];
        if (isalpha(c))
            letters = 1;
        else if (isdigit(c))
            digits = 1;
        else if ((c == '_' || c == '.' || c == ':') && i > 0 && i + 1 < len)
            inner_sep = 1;
        if (i > 0 && islower((unsigned char)w[i - 1]) && isupper(c))
            camel = 1;
    }
    if (!letters)
        return 0;
    if (w[0] == '_' && len > 1)
        inner_sep = 1;   /* __syncthreads, __shfl_down_sync */
    return inner_sep || camel || (letters && digits);
}

/* Splits w into its alphanumeric runs, lower-cased: what unicode61 makes
 * of it ("cp.async.bulk" -> cp async bulk). With camel, also splits at
 * case changes ("cudaFuncSetAttribute" -> cuda func set attribute). */
static size_t split_parts(const char *w, size_t len, int camel,
                          char parts[MAX_PARTS][64])
{
    size_t n = 0, k = 0;
    for (size_t i = 0; i <= len; i++) {
        unsigned char c = i < len ? (unsigned char)w[i] : 0;
        int boundary = !isalnum(c);
        if (camel && !boundary && k > 0 && i > 0) {
            unsigned char prev = (unsigned char)w[i - 1];
            unsigned char next = i + 1 < len ? (unsigned char)w[i + 1] : 0;
            if ((islower(prev) && isupper(c)) ||
                (isupper(prev) && isupper(c) && islower(next)))
                boundary = 2;   /* cut before c, keep c */
        }
        if (boundary && k > 0) {
            parts[n][k] = '\0';
            if (++n == MAX_PARTS)
                return n;
            k = 0;
        }
        if (isalnum(c) && k < 63)
            parts[n][k++] = (char)tolower(c);
    }
    return n;
}

static int has_camel(const char *w, size_t len)
{
    for (size_t i = 1; i < len; i++)
        if (islower((unsigned char)w[i - 1]) && isupper((unsigned char)w[i]))
            return 1;
    return 0;
}

/* The next word of text from *p on (a run of letters, digits and the
 * identifier punctuation "_.:"), with the dots and colons that end
 * sentences or wrap words trimmed: "(__syncthreads)," -> "__syncthreads".
 * Returns 0 at the end of text. */
static int next_word(const char **p, const char **w, size_t *len)
{
    while (**p && !is_word_char((unsigned char)**p))
        (*p)++;
    if (!**p)
        return 0;
    *w = *p;
    while (**p && is_word_char((unsigned char)**p))
        (*p)++;
    *len = (size_t)(*p - *w);
    while (*len && strchr(".:", (*w)[*len - 1]))
        (*len)--;
    while (*len && strchr(".:", (*w)[0]))
        (*w)++, (*len)--;
    return 1;
}

/* Sticky appends: each does nothing once *rc holds an error (FTS5's
 * pRc), so the expression builders below read as straight lines. */
static void put(kb_buf *out, const char *s, kb_rc *rc)
{
    if (*rc == KB_OK)
        *rc = kb_buf_puts(out, s);
}

static void putch(kb_buf *out, char c, kb_rc *rc)
{
    if (*rc == KB_OK)
        *rc = kb_buf_putc(out, c);
}

kb_rc kb_fts_idents(const char *text, kb_buf *out)
{
    const char *p = text, *w;
    size_t len;
    char parts[MAX_PARTS][64];
    kb_rc rc = KB_OK;
    while (rc == KB_OK && next_word(&p, &w, &len)) {
        if (len < 3 || len > 200 || !kb_fts_is_identifier(w, len))
            continue;
        size_t n = split_parts(w, len, 0, parts);
        /* the whole identifier, joined, and its dotted prefixes
         * (cp.async.bulk.tensor.2d -> cpasync, cpasyncbulk, ...) */
        int dotted = memchr(w, '.', len) != NULL;
        for (size_t upto = dotted ? 2 : n; upto <= n; upto++) {
            for (size_t i = 0; i < upto; i++)
                put(out, parts[i], &rc);
            putch(out, ' ', &rc);
        }
        if (has_camel(w, len)) {
            n = split_parts(w, len, 1, parts);
            for (size_t i = 0; i < n; i++) {
                put(out, parts[i], &rc);
                putch(out, ' ', &rc);
            }
        }
        put(out, ", ", &rc);
    }
    return rc;
}

/* Appends "part part ..." as an FTS5 string (parts are alphanumeric, so
 * no quoting is needed beyond the surrounding quotes). */
static void put_phrase(kb_buf *out, char parts[MAX_PARTS][64], size_t n,
                       kb_rc *rc)
{
    putch(out, '"', rc);
    for (size_t i = 0; i < n; i++) {
        if (i)
            putch(out, ' ', rc);
        put(out, parts[i], rc);
    }
    putch(out, '"', rc);
}

/* At most this many distinct terms of a query reach the MATCH, each at
 * most MAX_REPEAT times: every OR-ed term costs FTS5 a pass over its
 * postings, and 10 KiB of words pasted as a query took seconds (two
 * minutes for 60 KiB). A word typed twice stays twice, since BM25 sums
 * over the terms and a question's repeated word is what it is about
 * (dropping repeats cost the dev set 0.02 nDCG@10); its longest question
 * has 25 words, none more than 3 times. */
#define MAX_TERMS 32
#define MAX_REPEAT 3

/* The OR-ed clauses of a MATCH being built: each distinct clause at most
 * MAX_REPEAT times, in the order typed, at most MAX_TERMS distinct. */
typedef struct {
    kb_buf text;
    char *seen[MAX_TERMS];
    int times[MAX_TERMS];
    size_t n;        /* distinct clauses */
    size_t terms;    /* clauses in text */
} clause_list;

/* Adds clause (one term's MATCH text) to l unless it is there MAX_REPEAT
 * times already or l is full. */
static void add_clause(clause_list *l, const kb_buf *clause, kb_rc *rc)
{
    if (*rc != KB_OK || !clause->len)
        return;
    size_t i = 0;
    while (i < l->n && strcmp(l->seen[i], clause->data) != 0)
        i++;
    if (i < l->n && l->times[i] == MAX_REPEAT)
        return;
    if (i == l->n) {
        if (l->n == MAX_TERMS)
            return;
        if ((l->seen[i] = kb_strdup(clause->data)) == NULL) {
            *rc = KB_ERR_NOMEM;
            return;
        }
        l->times[i] = 0;
        l->n++;
    }
    l->times[i]++;
    if (l->terms++)
        put(&l->text, " OR ", rc);
    put(&l->text, clause->data, rc);
}

static void clause_list_release(clause_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->seen[i]);
    kb_buf_release(&l->text);
}

kb_rc kb_fts_build_match(const char *text, kb_buf *out)
{
    char parts[MAX_PARTS][64];
    clause_list terms = { 0 };
    clause_list plain = { 0 };  /* stop words, used only if nothing else is left */
    kb_buf clause;
    kb_buf_init(&clause, 0);
    const char *p = text, *w;
    size_t len;
    kb_rc rc = KB_OK;
    while (rc == KB_OK && terms.n < MAX_TERMS && next_word(&p, &w, &len)) {
        if (len == 0 || len > 200)
            continue;
        size_t n = split_parts(w, len, 0, parts);
        if (n == 0)
            continue;
        kb_buf_reset(&clause);
        if (n == 1 && !kb_fts_is_identifier(w, len)) {
            put_phrase(&clause, parts, 1, &rc);
            add_clause(kb_fts_is_stopword(parts[0]) || strlen(parts[0]) < 2 ? &plain : &terms,
                       &clause, &rc);
            continue;
        }
        /* an identifier: its parts as a phrase, or its joined form */
        putch(&clause, '(', &rc);
        put_phrase(&clause, parts, n, &rc);
        put(&clause, " OR idents : \"", &rc);
        for (size_t i = 0; i < n; i++)
            put(&clause, parts[i], &rc);
        putch(&clause, '"', &rc);
        if (has_camel(w, len)) {
            size_t m = split_parts(w, len, 1, parts);
            put(&clause, " OR idents : ", &rc);
            put_phrase(&clause, parts, m, &rc);
        }
        putch(&clause, ')', &rc);
        add_clause(&terms, &clause, &rc);
        /* and each part of three or more characters alone:
         * mma.sync.aligned.m16n8k16 also finds a section that says
         * m16n8k16 (lexical nDCG@10 +0.004 on dev, +0.007 on dev2; with
         * the two-letter parts too, dev's concepts lost 0.03) */
        for (size_t i = 0; n > 1 && i < n; i++) {
            if (kb_fts_is_stopword(parts[i]) || strlen(parts[i]) < 3)
                continue;
            kb_buf_reset(&clause);
            putch(&clause, '"', &rc);
            put(&clause, parts[i], &rc);
            putch(&clause, '"', &rc);
            add_clause(&terms, &clause, &rc);
        }
    }
    const clause_list *use = terms.terms ? &terms : &plain;
    if (rc == KB_OK && use->n)
        rc = kb_buf_append(out, use->text.data, use->text.len);
    clause_list_release(&terms);
    clause_list_release(&plain);
    kb_buf_release(&clause);
    return rc;
}

/* The body the index sees: URLs dropped (their pieces only add noise). */
static kb_rc strip_urls(const char *body, kb_buf *out)
{
    const char *p = body;
    kb_rc rc = KB_OK;
    while (*p && rc == KB_OK) {
        if ((strncmp(p, "http://", 7) == 0 || strncmp(p, "https://", 8) == 0)) {
            while (*p && !isspace((unsigned char)*p) && *p != ')')
                p++;
            continue;
        }
        /* up to the next URL in one append */
        const char *e = p + 1;
        while (*e && strncmp(e, "http://", 7) != 0 && strncmp(e, "https://", 8) != 0)
            e++;
        rc = kb_buf_append(out, p, (size_t)(e - p));
        p = e;
    }
    return rc;
}

kb_rc kb_fts_add(kb_store *store, int64_t chunk_id, const char *title,
                 const char *heading, const char *body, kb_err *err)
{
    kb_buf clean, idents;
    kb_buf_init(&clean, 0);
    kb_buf_init(&idents, 0);
    sqlite3_stmt *st = NULL;
    kb_rc rc = strip_urls(body, &clean);
    if (rc == KB_OK)
        rc = kb_fts_idents(heading, &idents);
    if (rc == KB_OK)
        rc = kb_fts_idents(clean.data ? clean.data : "", &idents);
    if (rc != KB_OK)
        rc = kb_err_set(err, rc, "out of memory indexing a chunk");
    if (rc == KB_OK)
        rc = kb_store_prepare(store,
        "INSERT INTO chunks_fts(rowid, title, heading, body, idents)"
        " VALUES(?,?,?,?,?)",
        &st, err);
    if (rc == KB_OK) {
        sqlite3_bind_int64(st, 1, chunk_id);
        sqlite3_bind_text(st, 2, title, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, heading, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, clean.data ? clean.data : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, idents.data ? idents.data : "", -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = kb_store_db_error(store, err, "index a chunk");
    }
    sqlite3_finalize(st);
    kb_buf_release(&clean);
    kb_buf_release(&idents);
    return rc;
}

/* BM25 column weights: section title, heading path, body, identifier forms
 * (chosen on the dev set: docs/design.md's design notes). */
#define W_TITLE 5.0
#define W_HEADING 2.0
#define W_BODY 1.0
#define W_IDENTS 1.0

kb_rc kb_fts_search(kb_store *store, const char *text, const kb_filter *filter,
                    size_t depth, kb_hits *out, kb_err *err)
{
    kb_buf match, sql;
    kb_buf_init(&match, 0);
    kb_buf_init(&sql, 0);
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_fts_build_match(text, &match);
    if (rc != KB_OK) {
        rc = kb_err_set(err, rc, "out of memory building the search");
        goto out;
    }
    if (match.len == 0)
        goto out;   /* nothing searchable: no lexical candidates */
    int filtered = filter && !kb_filter_is_empty(filter);
    rc = kb_buf_printf(&sql, "SELECT chunks_fts.rowid, bm25(chunks_fts, %g, %g,"
                       " %g, %g) AS s FROM chunks_fts", W_TITLE, W_HEADING,
                       W_BODY, W_IDENTS);
    /* the joins cost a third of the time: only when a filter needs them */
    if (rc == KB_OK && filtered)
        rc = kb_buf_puts(&sql, " JOIN chunks c ON c.id = chunks_fts.rowid"
                               " JOIN documents d ON d.id = c.document_id");
    if (rc == KB_OK)
        rc = kb_buf_puts(&sql, " WHERE chunks_fts MATCH ?");
    if (rc == KB_OK && filtered)
        rc = kb_filter_sql(filter, &sql);
    if (rc == KB_OK)
        rc = kb_buf_puts(&sql, " ORDER BY s LIMIT ?");
    if (rc != KB_OK) {
        rc = kb_err_set(err, rc, "out of memory building the search");
        goto out;
    }
    if ((rc = kb_store_prepare(store, sql.data, &st, err)) != KB_OK)
        goto out;
    sqlite3_bind_text(st, 1, match.data, -1, SQLITE_STATIC);
    int i = filtered ? kb_filter_bind(st, filter, 2) : 2;
    sqlite3_bind_int64(st, i, (sqlite3_int64)depth);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        double s = -sqlite3_column_double(st, 1);
        if ((rc = kb_hits_push(out, sqlite3_column_int64(st, 0), s)) != KB_OK)
            goto out;
        out->items[out->n - 1].lex_rank = (int)out->n;
        out->items[out->n - 1].lex_score = s;
    }
    if (step != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "search the lexical index");
out:
    if (rc != KB_OK)
        kb_log_debug("fts match: %s", match.data ? match.data : "");
    sqlite3_finalize(st);
    kb_buf_release(&match);
    kb_buf_release(&sql);
    return rc;
}
