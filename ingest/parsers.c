/* parsers.c - the choice of a parser for a document. */
#include "kb/kb.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ingest/ingest_int.h"

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
