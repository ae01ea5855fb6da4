/* parsers.c - heading slugs and the choice of a parser for a document. */
#include "kb/kb.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <utf8proc.h>

#include "ingest/parse_int.h"
#include "ingest/parsers_int.h"

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

/* ------------------------------------------------------------------ dispatch */

/* The extension of path's last component, without a URL's query or
 * fragment, into ext (cut to its size); NULL if there is none. */
static const char *extension(const char *path, char *ext, size_t size)
{
    size_t end = strlen(path);
    if (strstr(path, "://"))
        end = strcspn(path, "?#");
    size_t start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    const char *dot = NULL;
    for (size_t i = start + 1; i < end; i++)
        if (path[i] == '.')
            dot = path + i;
    if (!dot)
        return NULL;
    size_t n = (size_t)(path + end - dot - 1);
    if (n >= size)
        n = size - 1;
    memcpy(ext, dot + 1, n);
    ext[n] = '\0';
    return ext;
}

static int ext_in(const char *ext, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcasecmp(ext, list[i]) == 0)
            return 1;
    return 0;
}

static const char *const ext_html[] = { "html", "htm", "xhtml", NULL };
static const char *const ext_md[] = { "md", "markdown", NULL };
static const char *const ext_rst[] = { "rst", NULL };
static const char *const ext_cuda[] = { "cu", "cuh", "h", "hpp", "cpp", "c",
                                        "cc", NULL };
static const char *const ext_text[] = { "txt", NULL };
/* binaries and formats kb does not ingest */
static const char *const ext_skip[] = {
    "png", "jpg", "jpeg", "gif", "svg", "pdf", "ico", "webp", "bmp", "zip",
    "gz", "tgz", "tar", "xz", "bz2", "o", "a", "so", "bin", "exe", "woff",
    "woff2", "ttf", "eot", "mp4", "mov", "pyc", "json", "ipynb", NULL
};

static kb_parse_fn by_extension(const char *ext, int *skip)
{
    *skip = 0;
    if (!ext)
        return NULL;
    if (ext_in(ext, ext_html))
        return kb_parse_html;
    if (ext_in(ext, ext_md))
        return kb_parse_markdown;
    if (ext_in(ext, ext_rst))
        return kb_parse_rst;
    if (ext_in(ext, ext_cuda))
        return kb_parse_cuda;
    if (ext_in(ext, ext_text))
        return kb_parse_text;
    if (ext_in(ext, ext_skip))
        *skip = 1;
    return NULL;
}

static kb_parse_fn by_hint(const char *hint)
{
    if (!hint || !*hint)
        return NULL;
    if (strcasecmp(hint, "html") == 0)
        return kb_parse_html;
    if (strcasecmp(hint, "markdown") == 0 || strcasecmp(hint, "md") == 0)
        return kb_parse_markdown;
    if (strcasecmp(hint, "rst") == 0)
        return kb_parse_rst;
    if (strcasecmp(hint, "cuda-source") == 0 || strcasecmp(hint, "cuda") == 0)
        return kb_parse_cuda;
    if (strcasecmp(hint, "text") == 0)
        return kb_parse_text;
    /* "markdown+rst" and other mixes: decided by extension only */
    return NULL;
}

/* The first bytes of a local file, for sniffing: NULL if unreadable. */
static char *read_head(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1024);
    if (buf)
        *n = fread(buf, 1, 1024, f);
    fclose(f);
    return buf;
}

static kb_parse_fn sniff(const char *p, size_t n)
{
    size_t i = 0;
    if (n >= 3 && (unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB &&
        (unsigned char)p[2] == 0xBF)
        i = 3;
    while (i < n && isspace((unsigned char)p[i]))
        i++;
    const char *s = p + i;
    size_t left = n - i;
    if ((left >= 14 && strncasecmp(s, "<!DOCTYPE html", 14) == 0) ||
        (left >= 5 && strncasecmp(s, "<html", 5) == 0))
        return kb_parse_html;
    /* an ATX heading: one to six '#' then a space */
    size_t h = 0;
    while (h < left && h < 7 && s[h] == '#')
        h++;
    if (h >= 1 && h <= 6 && h < left && (s[h] == ' ' || s[h] == '\t'))
        return kb_parse_markdown;
    return NULL;
}

kb_parse_fn kb_parser_for(const char *path, const char *format_hint)
{
    if (!path)
        path = "";
    if (strcmp(kb_ingest_basename(path), "SKILL.md") == 0)
        return kb_parse_skill;     /* a skill of the library, through skills/ */
    int skip = 0;
    char ext[16];
    kb_parse_fn fn = by_extension(extension(path, ext, sizeof ext), &skip);
    if (fn)
        return fn;
    if (skip)
        return NULL;
    /* LICENSE, COPYING, copyright and the like: plain text whatever the
     * source's format says */
    const char *base = kb_ingest_basename(path);
    if (strncasecmp(base, "LICENSE", 7) == 0 || strncasecmp(base, "LICENCE", 7) == 0 ||
        strncasecmp(base, "COPYING", 7) == 0 || strcasecmp(base, "NOTICE") == 0 ||
        strcasecmp(base, "COPYRIGHT") == 0 || strcasecmp(base, "AUTHORS") == 0)
        return kb_parse_text;
    fn = by_hint(format_hint);
    if (fn)
        return fn;
    size_t n = 0;
    char *head = read_head(path, &n);
    if (!head)
        return NULL;
    if (!kb_ingest_looks_binary(head, n))
        fn = sniff(head, n);
    free(head);
    return fn;
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
