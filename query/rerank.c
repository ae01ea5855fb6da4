/* rerank.c - the local reranking stage: the best sections of both
 * candidate lists scored again from what kb knows of each - both lists'
 * places and scores, the cosine of the section's own chunks, the query's
 * words in its text and titles, its identifiers, its kind, and how many
 * documents open a chunk the same way (boilerplate and templates) - with
 * a few weights fit on the two development sets (BENCHMARKS.md,
 * "Reranking"). */
#include "query/query_int.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Sections taken from each list's top: 90 % of the judged sections of
 * unseen questions are within the two lists' top 50 (issue 13), but the
 * stage adds at most 0.2 to fusion's score (1 for first in both lists),
 * and 20, 30 and 40 gave the same nDCG@10 on both sets: 30 costs half of
 * 40's time. */
#define POOL_PER_LIST 30
/* What of a section's text is searched for the query's words. */
#define SECTION_TEXT_MAX 4096
#define MAX_QWORDS 24
/* Boilerplate and templates: a chunk whose opening words open chunks of
 * this many documents or more (licence headers, NVIDIA's notices, a
 * README's "Supported OSes", "Prerequisites", "Build and Run": about 290
 * chunks of the corpus). Fewer is a family of sibling documents sharing
 * content (the five architectures' tuning guides say "The maximum number
 * of concurrent warps per SM ..." each; at 3 documents, dev2's arch
 * questions lost 0.07). Such a section is kept and found, but ranked
 * behind the rest of the pool unless the question asks for it: at least
 * this share of the query's words in its text. */
#define BOILERPLATE_DOCS 8
#define BOILERPLATE_ASKED 0.5
#define BOILERPLATE_DEMOTION 1.0
#define MAX_QIDENTS 8
/* The lexical list's first section is shown within this many places
 * unless the vector list ranks more of those above it above it. */
#define LEXICAL_FIRST_PLACE 3

static const char *const feature_names[KB_RERANK_NFEAT] = {
    "lex_norm", "lex_rr", "vec_rr", "sec_cos", "sec_cos_rel", "lex_sec",
    "cover", "title_cover", "ident", "code", "paper", "table", "boiler",
    "doc_pool", "short", "rrf", "ident_title", "arch",
};

/* A query's instruction name ("cp.async.bulk.tensor") that is its
 * section's title, or a whole word of it, puts the canonical section
 * ahead of its generated variants ("cp.async.bulk.tensor.1d.global...");
 * a question's architecture ("Hopper", "B200", "sm_90a") favours the
 * sections whose targets are that architecture's, and sets back those
 * whose targets do not run there (arch.c). Hybrid nDCG@10 dev / dev2:
 * neither 0.785 / 0.719; ident_title 0.1 / 0.2 / 0.3: 0.785 / 0.786 /
 * 0.775 and 0.719 each (0.708 before words of mixed case such as
 * "PyTorch" were left out); with ident_title 0.2, arch 0.05 / 0.1 / 0.15:
 * 0.786 / 0.786 / 0.790 and 0.719 / 0.724 / 0.724 (counting "compute
 * capability 9.0" as a target too, arch 0.15 / 0.2 / 0.3: 0.791 / 0.788 /
 * 0.767 and 0.722 / 0.723 / 0.713). */
#define W_IDENT_TITLE 0.2
#define W_ARCH 0.15

/* The weights of the features above, in their order (fit with
 * scripts/fit-rerank.py on both development sets; 0: unused). */
static const double weights[KB_RERANK_NFEAT] = {
    0, 0, 0, 0, 0, 0, 0.1, 0.1, 0, 0, 0, 0, 0, 0, 0, 1, W_IDENT_TITLE, W_ARCH,
};

const char *kb_rerank_feature_name(size_t i)
{
    return i < KB_RERANK_NFEAT ? feature_names[i] : "";
}

/* The query's words as the stage compares them: content words (stop
 * words and one-letter words left out) as lower-case prefixes that stand
 * for their inflections, and identifiers as typed, lower case. */
typedef struct {
    char word[MAX_QWORDS][32];
    size_t nword;
    char ident[MAX_QIDENTS][64];
    size_t nident;
    kb_arch_set arch;      /* the architectures it names */
} query_words;

static int seen_word(const query_words *q, const char *w)
{
    for (size_t i = 0; i < q->nword; i++)
        if (strcmp(q->word[i], w) == 0)
            return 1;
    return 0;
}

static void split_query(const char *text, query_words *q)
{
    memset(q, 0, sizeof *q);
    const char *p = text;
    while (*p) {
        while (*p && !isalnum((unsigned char)*p) && *p != '_')
            p++;
        const char *w = p;
        /* the identifier's extent: letters, digits and "_.:" inside */
        while (*p && (isalnum((unsigned char)*p) || strchr("_.:", *p)))
            p++;
        size_t len = (size_t)(p - w);
        while (len && strchr(".:", w[len - 1]))
            len--;
        if (len >= 3 && len < 64 && q->nident < MAX_QIDENTS &&
            kb_fts_is_identifier(w, len)) {
            for (size_t i = 0; i < len; i++)
                q->ident[q->nident][i] = (char)tolower((unsigned char)w[i]);
            q->ident[q->nident++][len] = '\0';
        }
        /* its words: the alphanumeric runs */
        const char *e = w + len;
        for (const char *s = w; s < e;) {
            while (s < e && !isalnum((unsigned char)*s))
                s++;
            const char *b = s;
            while (s < e && isalnum((unsigned char)*s))
                s++;
            size_t n = (size_t)(s - b);
            if (n < 2 || n >= 32 || q->nword == MAX_QWORDS)
                continue;
            char lw[32];
            for (size_t i = 0; i < n; i++)
                lw[i] = (char)tolower((unsigned char)b[i]);
            lw[n] = '\0';
            if (kb_fts_is_stopword(lw))
                continue;
            /* a prefix for the inflections: "coalesced" and "coalescing"
             * share "coalesc" */
            size_t keep = n > 5 ? n - 2 : n;
            lw[keep] = '\0';
            if (!seen_word(q, lw)) {
                memcpy(q->word[q->nword], lw, keep + 1);
                q->nword++;
            }
        }
    }
}

/* Lower-cases text in place (ASCII): the searches below compare bytes. */
static void lower(kb_buf *text)
{
    for (size_t i = 0; i < text->len; i++)
        text->data[i] = (char)tolower((unsigned char)text->data[i]);
}

/* The share of the query's words that start a word of text (lower case,
 * len bytes): one pass over the word starts, each compared with the
 * words that begin with its letter. */
static double words_found(const query_words *q, const char *text, size_t len)
{
    if (!q->nword)
        return 0;
    int found[MAX_QWORDS] = { 0 };
    size_t nfound = 0, wl[MAX_QWORDS];
    for (size_t k = 0; k < q->nword; k++)
        wl[k] = strlen(q->word[k]);
    for (size_t i = 0; i < len && nfound < q->nword; i++) {
        if (!isalnum((unsigned char)text[i]) ||
            (i > 0 && isalnum((unsigned char)text[i - 1])))
            continue;
        for (size_t k = 0; k < q->nword; k++)
            if (!found[k] && q->word[k][0] == text[i] && i + wl[k] <= len &&
                memcmp(text + i, q->word[k], wl[k]) == 0) {
                found[k] = 1;
                nfound++;
            }
    }
    return (double)nfound / (double)q->nword;
}

/* 1 if s occurs in text (both lower case; text len bytes). */
static int has_substring(const char *text, size_t len, const char *s)
{
    size_t sl = strlen(s);
    return sl <= len && memmem(text, len, s, sl) != NULL;
}

/* 20 / (20 + rank): 1 near the top, falling slowly; 0 for no place. */
static double rank_weight(int rank)
{
    return rank > 0 ? 20.0 / (20.0 + rank - 1) : 0;
}

/* One section of the pool: its fused hit and what the features need. */
typedef struct {
    size_t at;             /* its index in the fused list */
    int64_t shown;         /* the chunk to show instead of the hit's; 0 */
    double boiler_text;    /* the query's words in a boilerplate chunk
                              shown for it (1: not boilerplate) */
    int64_t doc;
    double f[KB_RERANK_NFEAT];
    double score;
} pool_item;

/* The statements the stage runs per section. */
typedef struct {
    sqlite3_stmt *rep;     /* the representative chunk */
    sqlite3_stmt *chunks;  /* the section's chunks with their vectors */
    sqlite3_stmt *opening; /* documents opening a chunk the same way */
} rerank_stmts;

static void stmts_finalize(rerank_stmts *s)
{
    sqlite3_finalize(s->rep);
    sqlite3_finalize(s->chunks);
    sqlite3_finalize(s->opening);
}

/* The section's chunks come in the order of chunks_by_section's entries:
 * by rowid, which is the document's order. */
static kb_rc stmts_prepare(kb_store *store, rerank_stmts *s, int full,
                           kb_err *err)
{
    kb_rc rc = kb_store_prepare(store,
        "SELECT c.document_id, c.heading_path, c.kind, d.title, c.text"
        " FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE c.id = ?", &s->rep, err);
    if (rc == KB_OK)
        rc = kb_store_prepare(store, full
        ? "SELECT c.id, c.text, e.vec FROM chunks c"
          " LEFT JOIN embeddings e ON e.chunk_id = c.id"
          " WHERE c.document_id = ? AND c.heading_path = ?"
        : "SELECT c.id, c.text, NULL FROM chunks c"
          " WHERE c.document_id = ? AND c.heading_path = ?",
        &s->chunks, err);
    if (rc == KB_OK)
        rc = kb_store_prepare(store,
        "SELECT count(*) FROM (SELECT DISTINCT document_id FROM chunks"
        " WHERE substr(text, 1, 48) = substr(?, 1, 48) LIMIT 64)", &s->opening, err);
    return rc;
}

/* The last entry of a heading path's JSON array, as raw JSON text (the
 * quotes and escapes do not matter to a word search). */
static void last_heading(const char *hp, const char **s, size_t *len)
{
    const char *end = hp + strlen(hp);
    while (end > hp && (end[-1] == ']' || end[-1] == '"' || isspace((unsigned char)end[-1])))
        end--;
    const char *b = end;
    while (b > hp && !(b[-1] == '"' && (b - 1 == hp || b[-2] != '\\')))
        b--;
    *s = b;
    *len = (size_t)(end - b);
}

static double dot(const float *a, const float *b, int dim)
{
    double s = 0;
    for (int i = 0; i < dim; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* How many documents (at most 64) have a chunk that opens as text does
 * (its first 48 characters); 0 on a database error (no evidence either
 * way). */
static int64_t opening_docs(rerank_stmts *st, const char *text)
{
    /* 48 characters are at most 192 bytes of UTF-8: bind no more */
    size_t n = strlen(text);
    sqlite3_reset(st->opening);
    sqlite3_bind_text(st->opening, 1, text, n < 192 ? (int)n : 192,
                      SQLITE_TRANSIENT);
    return sqlite3_step(st->opening) == SQLITE_ROW
               ? sqlite3_column_int64(st->opening, 0) : 0;
}

/* words_found over text not yet lower-cased. */
static double words_found_raw(const query_words *qw, const char *text)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    double v = 0;
    if (kb_buf_puts(&b, text) == KB_OK) {
        lower(&b);
        v = words_found(qw, b.data, b.len);
    }
    kb_buf_release(&b);
    return v;
}

/* The share of the query's words in the section's title (the last of
 * heading path hp) and its document's title, into *out; text is scratch. */
static kb_rc title_words(const query_words *qw, const char *hp, const char *title,
                         kb_buf *text, double *out)
{
    const char *sec_title;
    size_t sec_len;
    last_heading(hp, &sec_title, &sec_len);
    kb_buf_reset(text);
    kb_rc rc = kb_buf_append(text, sec_title, sec_len);
    if (rc == KB_OK)
        rc = kb_buf_printf(text, " %s", title);
    if (rc != KB_OK)
        return rc;
    lower(text);
    *out = words_found(qw, text->data, text->len);
    return KB_OK;
}

/* The share of the query's identifiers (qw->nident > 0) found in the
 * lower-cased text. */
static double idents_found(const query_words *qw, const kb_buf *text)
{
    size_t found = 0;
    for (size_t i = 0; i < qw->nident; i++)
        found += (size_t)has_substring(text->data, text->len, qw->ident[i]);
    return (double)found / (double)qw->nident;
}

/* The share of the query's identifiers (qw->nident > 0) that are the
 * section's title (the last of heading path hp) or a whole word of it:
 * "cp.async.bulk.tensor" is "Data Movement and Conversion Instructions:
 * cp.async.bulk.tensor" but not its generated variant
 * "cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group". */
static double ident_title(const query_words *qw, const char *hp, kb_buf *text)
{
    const char *t;
    size_t len;
    last_heading(hp, &t, &len);
    kb_buf_reset(text);
    if (kb_buf_append(text, t, len) != KB_OK)
        return 0;
    lower(text);
    size_t found = 0, asked = 0;
    for (size_t i = 0; i < qw->nident; i++) {
        size_t il = strlen(qw->ident[i]);
        if (strcspn(qw->ident[i], "._:") == il)
            continue;   /* a word of mixed case ("PyTorch") is no instruction */
        asked++;
        for (const char *p = text->data; (p = memmem(p, text->len - (size_t)(p - text->data),
                                                     qw->ident[i], il)) != NULL; p++) {
            char before = p > text->data ? p[-1] : ' ';
            char after = p[il], next = after ? p[il + 1] : '\0';
            int joined = isalnum((unsigned char)before) || strchr("_.:", before);
            joined |= isalnum((unsigned char)after) || after == '_' ||
                      (strchr(".:", after) && after && (isalnum((unsigned char)next) ||
                                                        next == ':'));
            if (!joined) {
                found++;
                break;
            }
        }
    }
    return asked ? (double)found / (double)asked : 0;
}

/* Fills it->f for the section of fused hit h; a section shown by a
 * boilerplate chunk that has one of its own words is shown by that. The
 * features of weight 0 that cost most (the section's vectors, its
 * lexical sum) only when full: for a trace, which fitting reads. */
static kb_rc section_features(kb_store *store, rerank_stmts *st,
                              const query_words *qw, const float *qvec, int dim,
                              const kb_hits *lex, double top_lex, double top_vec,
                              double rrf_scale, const kb_hit *h, pool_item *it,
                              kb_buf *text, int full, kb_err *err)
{
    double *f = it->f;
    sqlite3_reset(st->rep);
    sqlite3_bind_int64(st->rep, 1, h->id);
    if (sqlite3_step(st->rep) != SQLITE_ROW)
        return kb_store_db_error(store, err, "read a chunk");
    it->doc = sqlite3_column_int64(st->rep, 0);
    const char *hp = (const char *)sqlite3_column_text(st->rep, 1);
    const char *kind = (const char *)sqlite3_column_text(st->rep, 2);
    const char *title = (const char *)sqlite3_column_text(st->rep, 3);
    const char *rep_text = (const char *)sqlite3_column_text(st->rep, 4);
    hp = hp ? hp : "[]";
    title = title ? title : "";
    rep_text = rep_text ? rep_text : "";

    f[0] = h->lex_rank && top_lex > 0 ? h->lex_score / top_lex : 0;
    f[15] = h->score * rrf_scale;
    f[1] = rank_weight(h->lex_rank);
    f[2] = rank_weight(h->vec_rank);
    f[9] = kind && strcmp(kind, "code") == 0;
    f[10] = kind && strcmp(kind, "paper") == 0;
    f[11] = kind && strcmp(kind, "table") == 0;

    /* the section's title words and the document's */
    kb_rc rc = title_words(qw, hp, title, text, &f[7]);
    if (rc != KB_OK)
        return kb_err_set(err, rc, "out of memory");
    f[16] = qw->nident ? ident_title(qw, hp, text) : 0;
    int arch = 0;   /* what its chunks say of the question's architectures */

    /* how many documents open a chunk with these words */
    int64_t docs = opening_docs(st, rep_text);
    f[12] = docs > 1 ? log2((double)docs) : 0;
    it->boiler_text = docs >= BOILERPLATE_DOCS
                          ? words_found_raw(qw, rep_text) : 1.0;

    /* the section's chunks: their text, their cosine, their lexical
     * scores */
    kb_buf_reset(text);
    rc = kb_buf_puts(text, hp);
    double best_cos = 0, lex_sum = 0;
    int any_vec = 0;
    sqlite3_reset(st->chunks);
    sqlite3_bind_int64(st->chunks, 1, it->doc);
    sqlite3_bind_text(st->chunks, 2, hp, -1, SQLITE_TRANSIENT);
    int step;
    size_t bytes = 0;
    while (rc == KB_OK && (step = sqlite3_step(st->chunks)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st->chunks, 0);
        const char *t = (const char *)sqlite3_column_text(st->chunks, 1);
        size_t tl = t ? strlen(t) : 0;
        bytes += tl;
        if (qw->arch.n && tl)
            kb_arch_scan(&qw->arch, t, tl, &arch);
        if (text->len < SECTION_TEXT_MAX && tl) {
            size_t room = SECTION_TEXT_MAX - text->len;
            rc = kb_buf_putc(text, '\n');
            if (rc == KB_OK)
                rc = kb_buf_append(text, t, tl < room ? tl : room);
        }
        const void *blob = full ? sqlite3_column_blob(st->chunks, 2) : NULL;
        double c = -2;
        if (qvec && blob && sqlite3_column_bytes(st->chunks, 2) ==
                                (int)(dim * (int)sizeof(float))) {
            float v[1024];
            if (dim <= 1024) {
                memcpy(v, blob, (size_t)dim * sizeof(float));
                c = dot(qvec, v, dim);
                if (!any_vec || c > best_cos)
                    best_cos = c;
                any_vec = 1;
            }
        }
        /* the section's own words, when a template line stands for it */
        if (it->boiler_text < 1.0 && id != h->id && t && !it->shown &&
            opening_docs(st, t) < BOILERPLATE_DOCS)
            it->shown = id;   /* the first of them, in the document's order */
        for (size_t i = 0; full && lex && i < lex->n; i++)
            if (lex->items[i].id == id)
                lex_sum += lex->items[i].score;
    }
    if (rc != KB_OK)
        return kb_err_set(err, rc, "out of memory");
    f[3] = any_vec ? best_cos : 0;
    f[4] = any_vec && top_vec > 0 ? best_cos - top_vec : 0;
    f[5] = top_lex > 0 ? lex_sum / top_lex : 0;
    lower(text);
    f[6] = words_found(qw, text->data, text->len);
    if (qw->nident)
        f[8] = idents_found(qw, text);
    f[14] = bytes < 120;
    f[17] = kb_arch_feature(arch);
    if (it->shown) {   /* the section is more than its template line */
        f[12] = 0;
        it->boiler_text = 1.0;
    }
    return KB_OK;
}

/* The lexical list's first section stays within the first LEXICAL_FIRST_PLACE
 * places unless more sections that the vector list ranks above it pass it
 * (issue 22: fusion and the features put a lexical #1 that the vector list
 * did not contradict at #5 and lower); boilerplate the question does not
 * ask for is not kept up. pool is in its new order. */
static void keep_lexical_first(pool_item *pool, size_t npool, const kb_hits *fused)
{
    size_t at = npool;
    for (size_t i = 0; i < npool && at == npool; i++)
        if (fused->items[pool[i].at].lex_rank == 1)
            at = i;
    if (at == npool || at < LEXICAL_FIRST_PLACE || pool[at].boiler_text < BOILERPLATE_ASKED)
        return;
    const kb_hit *l = &fused->items[pool[at].at];
    size_t better = 0;   /* above it, and above it in the vector list */
    for (size_t i = 0; i < at; i++) {
        const kb_hit *h = &fused->items[pool[i].at];
        better += h->vec_rank > 0 && (l->vec_rank == 0 || h->vec_rank < l->vec_rank);
    }
    size_t to = better >= LEXICAL_FIRST_PLACE ? better : LEXICAL_FIRST_PLACE - 1;
    if (to >= at)
        return;
    pool_item p = pool[at];
    memmove(pool + to + 1, pool + to, (at - to) * sizeof *pool);
    p.score = pool[to + 1].score;
    pool[to] = p;
}

kb_rc kb_rerank_local(kb_store *store, const char *query, const float *qvec,
                      int dim, const kb_hits *lex, const kb_hits *vec,
                      kb_hits *fused, double rrf_scale, kb_rerank_trace_fn trace,
                      void *trace_ctx, kb_err *err)
{
    rerank_stmts st = { 0 };
    pool_item *pool = NULL;
    kb_hit *order = NULL;
    kb_buf text;
    kb_buf_init(&text, 0);
    query_words qw;
    split_query(query, &qw);
    kb_arch_of_query(query, &qw.arch);
    size_t npool = 0;
    double top_lex = 0, top_vec = 0;
    for (size_t i = 0; lex && i < lex->n; i++)
        top_lex = lex->items[i].score > top_lex ? lex->items[i].score : top_lex;
    for (size_t i = 0; vec && i < vec->n; i++)
        top_vec = vec->items[i].score > top_vec ? vec->items[i].score : top_vec;
    kb_rc rc = stmts_prepare(store, &st, trace != NULL, err);
    if (rc != KB_OK)
        goto out;
    pool = calloc(fused->n + 1, sizeof *pool);
    order = calloc(fused->n + 1, sizeof *order);
    if (!pool || !order) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < fused->n; i++) {
        const kb_hit *h = &fused->items[i];
        if (!((h->lex_rank && h->lex_rank <= POOL_PER_LIST) ||
              (h->vec_rank && h->vec_rank <= POOL_PER_LIST)))
            continue;
        pool_item *it = &pool[npool++];
        it->at = i;
        rc = section_features(store, &st, &qw, qvec, dim, lex, top_lex, top_vec,
                              rrf_scale, h, it, &text, trace != NULL, err);
        if (rc != KB_OK)
            goto out;
    }
    /* a document's other sections in the pool: evidence for the document */
    for (size_t i = 0; i < npool; i++) {
        size_t same = 0;
        for (size_t j = 0; j < npool; j++)
            same += j != i && pool[j].doc == pool[i].doc;
        pool[i].f[13] = log2(1.0 + (double)same);
    }
    for (size_t i = 0; i < npool; i++) {
        double s = 0;
        for (size_t k = 0; k < KB_RERANK_NFEAT; k++)
            s += weights[k] * pool[i].f[k];
        /* boilerplate a question does not ask for goes behind the rest */
        if (pool[i].boiler_text < BOILERPLATE_ASKED)
            s -= BOILERPLATE_DEMOTION;
        pool[i].score = s;
        if (trace)
            trace(trace_ctx, fused->items[pool[i].at].id, pool[i].f,
                  KB_RERANK_NFEAT);
    }
    /* insertion sort by score (stable): the pool is short */
    for (size_t i = 1; i < npool; i++) {
        pool_item p = pool[i];
        size_t j = i;
        while (j > 0 && pool[j - 1].score < p.score) {
            pool[j] = pool[j - 1];
            j--;
        }
        pool[j] = p;
    }
    keep_lexical_first(pool, npool, fused);
    /* the pool in its new order, then the rest as fusion ranked it */
    size_t n = 0;
    for (size_t i = 0; i < npool; i++) {
        if (pool[i].shown)
            fused->items[pool[i].at].id = pool[i].shown;
        order[n] = fused->items[pool[i].at];
        order[n++].score = pool[i].score;
        fused->items[pool[i].at].id = 0;
    }
    double floor_score = npool ? pool[npool - 1].score : 0;
    for (size_t i = 0; i < fused->n; i++)
        if (fused->items[i].id) {
            order[n] = fused->items[i];
            order[n++].score = floor_score - 1.0 - (double)i * 1e-6;
        }
    if (n)   /* memcpy of NULL, 0 is undefined */
        memcpy(fused->items, order, n * sizeof *order);
    fused->n = n;
out:
    stmts_finalize(&st);
    free(pool);
    free(order);
    kb_buf_release(&text);
    return rc;
}
