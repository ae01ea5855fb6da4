/* similar.c - near-identical texts: a text's word pairs as a sorted set
 * of hashes, and the Jaccard similarity of two such sets. The results of
 * a query whose texts are near-identical (the variants of one generated
 * wrapper, a file copied into several skills, a template page's
 * siblings) are shown as one, the others listed with it (issue 13). */
#include "query/query_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Texts longer than this are compared by their first part: a chunk is at
 * most about 1,500 characters of prose, more of code. */
#define SHINGLE_TEXT_MAX 8192

static int word_byte(unsigned char c)
{
    return isalnum(c) || c == '_' || c >= 0x80;
}

/* FNV-1a of a word, lower case, continued from h. */
static uint64_t hash_word(uint64_t h, const char *w, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)tolower((unsigned char)w[i]);
        h *= 1099511628211ull;
    }
    return h;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

kb_rc kb_shingles_make(const char *text, kb_shingles *out)
{
    memset(out, 0, sizeof *out);
    size_t len = strnlen(text, SHINGLE_TEXT_MAX);
    size_t cap = len / 2 + 1;   /* at most one word every two bytes */
    out->h = malloc(cap * sizeof *out->h);
    if (!out->h)
        return KB_ERR_NOMEM;
    const char *prev = NULL;
    size_t prev_len = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && !word_byte((unsigned char)text[i]))
            i++;
        size_t b = i;
        while (i < len && word_byte((unsigned char)text[i]))
            i++;
        if (i == b)
            break;
        /* a pair of neighbouring words; a one-word text is its word */
        if (prev) {
            uint64_t h = hash_word(14695981039346656037ull, prev, prev_len);
            h = hash_word(h ^ ' ', text + b, i - b);
            out->h[out->n++] = h;
        }
        prev = text + b;
        prev_len = i - b;
    }
    if (out->n == 0 && prev)
        out->h[out->n++] = hash_word(14695981039346656037ull, prev, prev_len);
    qsort(out->h, out->n, sizeof *out->h, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < out->n; i++)
        if (u == 0 || out->h[u - 1] != out->h[i])
            out->h[u++] = out->h[i];
    out->n = u;
    return KB_OK;
}

double kb_shingles_jaccard(const kb_shingles *a, const kb_shingles *b)
{
    if (a->n == 0 || b->n == 0)
        return 0;
    size_t i = 0, j = 0, both = 0;
    while (i < a->n && j < b->n) {
        if (a->h[i] == b->h[j]) {
            both++;
            i++;
            j++;
        } else if (a->h[i] < b->h[j]) {
            i++;
        } else {
            j++;
        }
    }
    return (double)both / (double)(a->n + b->n - both);
}

void kb_shingles_release(kb_shingles *s)
{
    free(s->h);
    memset(s, 0, sizeof *s);
}
