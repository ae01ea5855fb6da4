/* cite.c - what a draft skill cites (gen.h, "cite.c"): the passages of its
 * prompt that helped its kernel, each by a link that holds no machine's
 * path, since the skill may be committed and read elsewhere. */
#include "generator/gen.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_MIN 4      /* shorter identifiers say too little */
#define TOKEN_MAX 64

/* ------------------------------------------------------------ links */

/* 1 for a source whose documents are skills' files. */
static int skill_source(const kb_gen_cite *c)
{
    return (c->skill && *c->skill) || (c->source && (!strcmp(c->source, "skills") ||
                                                     !strcmp(c->source, "skill-drafts")));
}

char *kb_gen_cite_link(const kb_gen_cite *c)
{
    const char *url = c->url ? c->url : "";
    if (strncmp(url, "file:", 5) != 0)
        return *url ? kb_strdup(url) : NULL;
    if (!skill_source(c))
        return NULL;
    /* file:///.../skills/NAME/FILE#anchor: skill://NAME/FILE#anchor, the
     * name the servers give the file */
    const char *hash = strchr(url, '#');
    size_t end = hash ? (size_t)(hash - url) : strlen(url);
    size_t file = end;
    while (file > 5 && url[file - 1] != '/')
        file--;
    size_t name = file > 5 ? file - 1 : file;
    while (name > 5 && url[name - 1] != '/')
        name--;
    if (file <= 5 || name >= file - 1 || file == end)
        return NULL;
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_buf_puts(&b, "skill://");
    if (rc == KB_OK)
        rc = kb_buf_append(&b, url + name, end - name);
    if (rc == KB_OK && hash)
        rc = kb_buf_puts(&b, hash);
    return kb_buf_finish(&b, rc);
}

const char *kb_gen_cite_where(const kb_gen_cite *c)
{
    const char *p = c->path && *c->path ? c->path : "";
    if (*p == '/') {   /* a machine's path: its file's name alone */
        const char *slash = strrchr(p, '/');
        p = slash[1] ? slash + 1 : "";
    }
    return p;
}

/* ------------------------------------------------------------ helped */

/* 1 when token (n bytes) stands in text as a whole identifier. */
static int has_token(const char *text, const char *token, size_t n)
{
    for (const char *p = text; (p = strstr(p, token)); p++) {
        char before = p > text ? p[-1] : ' ', after = p[n];
        if (!(isalnum((unsigned char)before) || before == '_' || before == '.') &&
            !(isalnum((unsigned char)after) || after == '_'))
            return 1;
    }
    return 0;
}

/* 1 for an identifier that says something: TOKEN_MIN bytes or more and
 * more than a word of prose (an '_', a '.', a digit, or camelCase):
 * float4, __shfl_xor_sync, cp.async, TILE_DIM, blockDim. */
static int telling(const char *t, size_t n)
{
    if (n < TOKEN_MIN)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (t[i] == '_' || t[i] == '.' || isdigit((unsigned char)t[i]) ||
            (i && isupper((unsigned char)t[i]) && islower((unsigned char)t[i - 1])))
            return 1;
    return 0;
}

int kb_gen_cite_helped(const kb_gen_cite *c, const char *kernel, const char *reference)
{
    const char *t = c->text;
    if (!t || !kernel)
        return 0;
    while (*t) {
        if (!(isalpha((unsigned char)*t) || *t == '_')) {
            t++;
            continue;
        }
        const char *s = t;
        while (isalnum((unsigned char)*t) || *t == '_' || (*t == '.' && isalpha((unsigned char)t[1])))
            t++;
        size_t n = (size_t)(t - s);
        if (n > TOKEN_MAX || !telling(s, n))
            continue;
        char tok[TOKEN_MAX + 1];
        memcpy(tok, s, n);
        tok[n] = '\0';
        if (has_token(kernel, tok, n) && !(reference && has_token(reference, tok, n)))
            return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ paths */

kb_rc kb_gen_scrub_paths(char **text)
{
    if (!*text || !strstr(*text, "file:/"))
        return KB_OK;
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = KB_OK;
    const char *p = *text;
    for (const char *f; rc == KB_OK && (f = strstr(p, "file:/"));) {
        rc = kb_buf_append(&b, p, (size_t)(f - p));
        size_t n = strcspn(f, " \t\r\n)>]\"'`");
        size_t base = n;
        while (base && f[base - 1] != '/')
            base--;
        if (rc == KB_OK)   /* the file's name, as text: no link to a path */
            rc = kb_buf_append(&b, f + base, n - base);
        p = f + n;
    }
    if (rc == KB_OK)
        rc = kb_buf_puts(&b, p);
    char *out = kb_buf_finish(&b, rc);
    if (!out)
        return KB_ERR_NOMEM;
    free(*text);
    *text = out;
    return KB_OK;
}
