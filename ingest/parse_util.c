/* parse_util.c - what the parsers share: the text check every parser
 * makes first, slugs and anchors, a set of strings, the sticky append.
 * It calls no parser (parsers.c, which picks one, sits above both). */
#include "kb/kb.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "ingest/ingest_int.h"

/* ------------------------------------------------------------------ text */

int kb_ingest_looks_binary(const char *data, size_t len)
{
    size_t n = len < 8192 ? len : 8192;
    const unsigned char *p = (const unsigned char *)data;
    if (n >= 2 && ((p[0] == 0xFF && p[1] == 0xFE) || (p[0] == 0xFE && p[1] == 0xFF)))
        return 0;
    size_t ctrl = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c == 0)
            return 1;
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' &&
             c != 0x1b) || c == 0x7f)
            ctrl++;
    }
    return n > 0 && ctrl * 10 > n;
}

kb_rc kb_ingest_check_text(const char *data, size_t len, const char *path,
                           const char *what, kb_err *err)
{
    if (kb_ingest_looks_binary(data, len) || (len && memchr(data, '\0', len)))
        return kb_err_set(err, KB_ERR_PARSE,
                          "'%s' does not look like %s (binary data)",
                          path ? path : "", what);
    return KB_OK;
}

const char *kb_ingest_basename(const char *path)
{
    if (!path)
        return "";
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')    /* "dir/" names dir */
        n--;
    const char *base = path;
    for (size_t i = 0; i + 1 < n; i++)
        if (path[i] == '/')
            base = path + i + 1;
    return base;
}

int kb_ingest_blank(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!isspace((unsigned char)s[i]))
            return 0;
    return 1;
}

const char *kb_ingest_trim(const char *s, size_t *n)
{
    while (*n && isspace((unsigned char)*s)) {
        s++;
        (*n)--;
    }
    while (*n && isspace((unsigned char)s[*n - 1]))
        (*n)--;
    return s;
}

void kb_parse_fail(kb_rc *rc, kb_rc why)
{
    if (*rc == KB_OK)
        *rc = why;
}

void kb_parse_put(kb_rc *rc, kb_buf *b, const char *s, size_t n)
{
    if (kb_buf_append(b, s, n) != KB_OK)
        kb_parse_fail(rc, KB_ERR_NOMEM);
}

/* ------------------------------------------------------------------ slugs */

/* github-slugger: lower-case; drop every character that is not a letter, a
 * mark, a number, connector punctuation ('_'), '-' or a space; each space
 * becomes '-'. Bytes that are not valid UTF-8 are dropped. */
char *kb_slugify(const char *heading)
{
    kb_buf out;
    kb_buf_init(&out, 0);
    kb_rc rc = KB_OK;
    const utf8proc_uint8_t *s = (const utf8proc_uint8_t *)(heading ? heading : "");
    utf8proc_ssize_t left = (utf8proc_ssize_t)strlen((const char *)s);
    /* leading and trailing white space is not part of the heading text */
    while (left > 0 && isspace(*s)) {
        s++;
        left--;
    }
    while (left > 0 && isspace(s[left - 1]))
        left--;
    while (left > 0 && rc == KB_OK) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t n = utf8proc_iterate(s, left, &cp);
        if (n <= 0) {
            s++;
            left--;
            continue;
        }
        s += n;
        left -= n;
        if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == '-') {
            rc = kb_buf_putc(&out, '-');
            continue;
        }
        utf8proc_category_t cat = utf8proc_category(cp);
        int keep = 0;
        switch (cat) {
        case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
        case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL:
        case UTF8PROC_CATEGORY_NO: case UTF8PROC_CATEGORY_PC:
            keep = 1;
            break;
        default:
            break;
        }
        if (!keep)
            continue;
        utf8proc_uint8_t enc[4];
        utf8proc_ssize_t m = utf8proc_encode_char(utf8proc_tolower(cp), enc);
        rc = kb_buf_append(&out, enc, (size_t)m);
    }
    return kb_buf_finish(&out, rc);
}

/* ------------------------------------------------------------------ anchors */

char *kb_ingest_docutils_id(const char *title)
{
    utf8proc_uint8_t *norm = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)(title ? title : ""),
                                      0, &norm,
                                      UTF8PROC_NULLTERM | UTF8PROC_DECOMPOSE |
                                      UTF8PROC_COMPAT);
    kb_buf out;
    kb_buf_init(&out, 0);
    const char *s = title ? title : "";
    if (n >= 0 && norm)
        s = (const char *)norm;
    int dash = 0;
    kb_rc rc = KB_OK;
    for (const unsigned char *p = (const unsigned char *)s; *p && rc == KB_OK; p++) {
        unsigned char c = (unsigned char)tolower(*p);
        if (c < 0x80 && isalnum(c)) {
            /* leading digits and dashes are not allowed in an id */
            if (out.len == 0 && isdigit(c)) {
                dash = 0;
                continue;
            }
            if (dash && out.len > 0)
                rc = kb_buf_putc(&out, '-');
            dash = 0;
            if (rc == KB_OK)
                rc = kb_buf_putc(&out, (char)c);
        } else if (c < 0x80) {
            dash = 1;       /* one separator per run */
        }
        /* what is still not ASCII is dropped without a trace, as
         * docutils' encode('ascii', 'ignore') does */
    }
    free(norm);
    return kb_buf_finish(&out, rc);
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

void kb_strset_init(kb_strset *s)
{
    s->slots = NULL;
    s->cap = s->n = 0;
}

void kb_strset_release(kb_strset *s)
{
    for (size_t i = 0; i < s->cap; i++)
        free(s->slots[i]);
    free(s->slots);
    kb_strset_init(s);
}

int kb_strset_has(const kb_strset *s, const char *key)
{
    if (!s->cap)
        return 0;
    for (size_t i = hash_str(key) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (!s->slots[i])
            return 0;
        if (strcmp(s->slots[i], key) == 0)
            return 1;
    }
}

static void strset_put(char **slots, size_t cap, char *key)
{
    size_t i = hash_str(key) & (cap - 1);
    while (slots[i])
        i = (i + 1) & (cap - 1);
    slots[i] = key;
}

int kb_strset_add(kb_strset *s, const char *key)
{
    if (kb_strset_has(s, key))
        return 0;
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        char **slots = calloc(cap, sizeof *slots);
        if (!slots)
            return -1;
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i])
                strset_put(slots, cap, s->slots[i]);
        free(s->slots);
        s->slots = slots;
        s->cap = cap;
    }
    char *k = kb_strdup(key);
    if (!k)
        return -1;
    strset_put(s->slots, s->cap, k);
    s->n++;
    return 0;
}

char *kb_ingest_unique_slug(kb_strset *seen, const char *heading)
{
    char *base = kb_slugify(heading);
    if (!base)
        return NULL;
    if (!kb_strset_has(seen, base)) {
        if (kb_strset_add(seen, base) != 0) {
            free(base);
            return NULL;
        }
        return base;
    }
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = KB_OK;
    for (unsigned long i = 1;; i++) {
        kb_buf_reset(&b);
        rc = kb_buf_printf(&b, "%s-%lu", base, i);
        if (rc != KB_OK || !kb_strset_has(seen, b.data))
            break;
    }
    free(base);
    if (rc == KB_OK && kb_strset_add(seen, b.data) != 0)
        rc = KB_ERR_NOMEM;
    return kb_buf_finish(&b, rc);
}

/* Words that converted Sphinx pages glue to the link text after them
 * ("seeDevice Memory Accesses", "inFigure 2", "Refer toWarp Shuffle
 * Functions"): a link's words lost the blank before them. */
static const char *const glue_words[] = {
    "see", "in", "to", "of", "by", "the", "and", "under", "from", "with",
    "on", "for", "or", "also", "following", "using", "Refer", "refer",
};

/* A figure or table reference's name ("Figure 12", "Table 3"), at s:
 * its length up to the number's end, or 0. */
static size_t figure_ref(const char *s, size_t n)
{
    static const char *const names[] = { "Figure ", "Table " };
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        size_t l = strlen(names[k]);
        if (n > l && memcmp(s, names[k], l) == 0 && isdigit((unsigned char)s[l])) {
            while (l < n && isdigit((unsigned char)s[l]))
                l++;
            return l;
        }
    }
    return 0;
}

/* The length of a glue word that starts s (at a word start) and is
 * followed by a capitalised word or acronym of two letters or more, or 0. */
static size_t glued_word(const char *s, size_t n)
{
    for (size_t k = 0; k < sizeof glue_words / sizeof *glue_words; k++) {
        size_t l = strlen(glue_words[k]);
        if (l + 2 < n && memcmp(s, glue_words[k], l) == 0 &&
            isupper((unsigned char)s[l]) && isalpha((unsigned char)s[l + 1]))
            return l;
    }
    return 0;
}

void kb_parse_put_unglued(kb_rc *rc, kb_buf *b, const char *s, size_t n)
{
    char prev = b->len ? b->data[b->len - 1] : ' ';
    size_t from = 0, spaced = SIZE_MAX;   /* a blank put before s[spaced] */
    for (size_t i = 0; i < n; i++) {
        char before = i ? s[i - 1] : prev;
        size_t cut = !isalnum((unsigned char)before) && before != '_'
                         ? glued_word(s + i, n - i) : 0;
        if (cut) {   /* "seeDevice" */
            kb_parse_put(rc, b, s + from, i + cut - from);
            kb_parse_put(rc, b, " ", 1);
            from = spaced = i + cut;
            i += cut - 1;
            continue;
        }
        size_t ref = figure_ref(s + i, n - i);
        if (!ref)
            continue;
        /* "schematicFigure 1", "10.3.Table 25" */
        if (spaced != i && (islower((unsigned char)before) ||
            (before == '.' && i >= 2 && isalnum((unsigned char)s[i - 2])))) {
            kb_parse_put(rc, b, s + from, i - from);
            kb_parse_put(rc, b, " ", 1);
            from = i;
        }
        if (i + ref + 1 < n && isalpha((unsigned char)s[i + ref]) &&
            isalpha((unsigned char)s[i + ref + 1])) {   /* "12summarizes", "9Matrix" */
            kb_parse_put(rc, b, s + from, i + ref - from);
            kb_parse_put(rc, b, " ", 1);
            from = i + ref;
        }
        i += ref - 1;
    }
    kb_parse_put(rc, b, s + from, n - from);
}
