/* tune.c - the pairs kb tune fine-tunes the embedder on, mined from the KB
 * itself: a section's heading stands for a question, the section's chunk
 * for its answer (scripts/tune-embedder.py trains on them). */
#include "index/index.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* a section gives at most this many pairs: long sections (a PTX
 * instruction family's ten chunks) would otherwise outweigh the rest */
#define CHUNKS_PER_SECTION 2
/* a heading found in this many documents is boilerplate ("Build and Run",
 * "Notices", "kernel.cu"): a question no one chunk answers */
#define RECURRING_DOCUMENTS 3
/* shorter chunks say too little to be an answer; shorter headings too
 * little to be a question */
#define MIN_TEXT 40
#define MIN_QUERY 4

typedef struct {
    char *query;
    char *heading;   /* the section: its heading path's JSON */
    int64_t document;
    int64_t chunk;
    size_t order;    /* the chunk's place in the KB (document, then ord) */
    char *text;
    char *kind;
    int drop;
} pair;

/* The heading without its numbering ("5.1.6.1. ", "A.2. "), or NULL: a
 * number alone. */
static const char *unnumbered(const char *h)
{
    const char *s = h;
    while (*s == ' ')
        s++;
    const char *t = s;
    if (isupper((unsigned char)*t) && t[1] == '.')
        t += 2;
    else if (isdigit((unsigned char)*t))
        while (isdigit((unsigned char)*t))
            t++;
    else
        return s;
    while (*t == '.' || isdigit((unsigned char)*t))
        t++;
    if (*t != ' ')
        return s;   /* "3D textures", "1x1": a word, not a number */
    while (*t == ' ')
        t++;
    return *t ? t : NULL;
}

/* The question a chunk answers: its heading path's last two headings
 * (the last alone for a paper, whose last heading is its title). */
static char *pair_query(const char *heading_json, const char *kind)
{
    cJSON *path = cJSON_Parse(heading_json ? heading_json : "[]");
    const char *parts[2] = { NULL, NULL };
    const cJSON *h;
    cJSON_ArrayForEach(h, path) {
        const char *u = cJSON_IsString(h) ? unnumbered(h->valuestring) : NULL;
        if (u && *u) {
            parts[0] = parts[1];
            parts[1] = u;
        }
    }
    if (strcmp(kind, "paper") == 0)
        parts[0] = NULL;
    kb_buf q;
    kb_buf_init(&q, 0);
    kb_rc rc = KB_OK;
    for (int i = 0; i < 2 && rc == KB_OK; i++)
        if (parts[i]) {
            if (q.len)
                rc = kb_buf_putc(&q, ' ');
            if (rc == KB_OK)
                rc = kb_buf_puts(&q, parts[i]);
        }
    cJSON_Delete(path);
    if (rc != KB_OK) {
        kb_buf_release(&q);
        return NULL;
    }
    if (q.len < MIN_QUERY) {
        kb_buf_release(&q);
        return kb_strdup("");
    }
    return kb_buf_detach(&q);
}

#define CMP(a, b) (((a) > (b)) - ((a) < (b)))

static int by_query_document(const void *a, const void *b)
{
    const pair *x = *(pair *const *)a, *y = *(pair *const *)b;
    int c = strcmp(x->query, y->query);
    return c ? c : CMP(x->document, y->document);
}

static int by_section_order(const void *a, const void *b)
{
    const pair *x = *(pair *const *)a, *y = *(pair *const *)b;
    int c = CMP(x->document, y->document);
    if (!c)
        c = strcmp(x->heading, y->heading);
    return c ? c : CMP(x->order, y->order);
}

/* Marks the pairs past a section's first CHUNKS_PER_SECTION (a section's
 * chunks need not be contiguous: a file's functions interleave with its
 * top level), then those whose query recurs in RECURRING_DOCUMENTS
 * documents. */
static kb_rc drop_pairs(pair *p, size_t n, kb_err *err)
{
    pair **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        sorted[i] = &p[i];
    qsort(sorted, n, sizeof *sorted, by_section_order);
    for (size_t i = 0, kept = 0; i < n; i++) {
        int same = i > 0 && sorted[i]->document == sorted[i - 1]->document &&
                   strcmp(sorted[i]->heading, sorted[i - 1]->heading) == 0;
        if (!same)
            kept = 0;
        if (!sorted[i]->drop && kept++ >= CHUNKS_PER_SECTION)
            sorted[i]->drop = 1;
    }
    qsort(sorted, n, sizeof *sorted, by_query_document);
    for (size_t i = 0; i < n;) {
        size_t j = i, docs = 0;
        for (; j < n && strcmp(sorted[j]->query, sorted[i]->query) == 0; j++)
            docs += j == i || sorted[j]->document != sorted[j - 1]->document;
        for (size_t k = i; k < j; k++)
            sorted[k]->drop |= docs >= RECURRING_DOCUMENTS;
        i = j;
    }
    free(sorted);
    return KB_OK;
}

static kb_rc put_pair(kb_buf *out, const pair *p, kb_err *err)
{
    cJSON *o = cJSON_CreateObject();
    char *line = NULL;
    if (o && cJSON_AddStringToObject(o, "q", p->query) &&
        cJSON_AddStringToObject(o, "p", p->text) &&
        cJSON_AddStringToObject(o, "kind", p->kind) &&
        cJSON_AddNumberToObject(o, "chunk", (double)p->chunk))
        line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    kb_rc rc = line ? kb_buf_puts(out, line) : KB_ERR_NOMEM;
    if (rc == KB_OK)
        rc = kb_buf_putc(out, '\n');
    free(line);
    return rc == KB_OK ? KB_OK : kb_err_set(err, rc, "out of memory");
}

kb_rc kb_tune_pairs(kb_store *store, kb_buf *out, size_t *npairs, kb_err *err)
{
    *npairs = 0;
    sqlite3_stmt *st = NULL;
    pair *p = NULL;
    size_t n = 0, cap = 0;
    kb_rc rc = kb_store_prepare(store,
        "SELECT id, document_id, heading_path, kind, text FROM chunks"
        " ORDER BY document_id, ord", &st, err);
    int step = SQLITE_DONE;
    while (rc == KB_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *heading = (const char *)sqlite3_column_text(st, 2);
        const char *kind = (const char *)sqlite3_column_text(st, 3);
        const char *text = (const char *)sqlite3_column_text(st, 4);
        size_t tlen = text ? strlen(text) : 0;
        while (tlen && isspace((unsigned char)text[tlen - 1]))
            tlen--;
        if (tlen < MIN_TEXT)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            pair *np = realloc(p, ncap * sizeof *np);
            if (!np) {
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                break;
            }
            p = np;
            cap = ncap;
        }
        pair *x = &p[n];
        memset(x, 0, sizeof *x);
        x->chunk = sqlite3_column_int64(st, 0);
        x->document = sqlite3_column_int64(st, 1);
        x->order = n;
        x->heading = kb_strdup(heading ? heading : "[]");
        x->query = pair_query(x->heading, kind ? kind : "");
        x->text = kb_strdup(text);
        x->kind = kb_strdup(kind ? kind : "");
        n++;
        if (!x->heading || !x->query || !x->text || !x->kind)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        else
            x->drop = !*x->query;
    }
    if (rc == KB_OK && step != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "read the chunks");
    sqlite3_finalize(st);
    if (rc == KB_OK)
        rc = drop_pairs(p, n, err);
    for (size_t i = 0; rc == KB_OK && i < n; i++)
        if (!p[i].drop) {
            rc = put_pair(out, &p[i], err);
            ++*npairs;
        }
    for (size_t i = 0; i < n; i++) {
        free(p[i].heading);
        free(p[i].query);
        free(p[i].text);
        free(p[i].kind);
    }
    free(p);
    return rc;
}
