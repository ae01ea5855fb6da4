/* code_text.c - a query that is source code (kb query --file kernel.cu,
 * pasted code): its licence comment is no part of the question; the
 * code's identifiers are (issue 22: a kernel file's query was the first
 * 32 words of its BSD licence, and found the guide's legal notices);
 * and whether a text has a word to search for at all. */
#include "query/query_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* At most this many bytes of identifiers and comment words go on. */
#define CODE_QUERY_MAX 2000

/* Words of C, C++ and CUDA that every kernel has: no question's words. */
static const char *const keywords[] = {
    "auto", "bool", "break", "case", "char", "class", "const", "constexpr",
    "continue", "default", "define", "delete", "do", "double", "else", "endif",
    "enum", "extern", "false", "float", "for", "goto", "if", "ifdef", "ifndef",
    "include", "inline", "int", "int16_t", "int32_t", "int64_t", "int8_t", "long",
    "namespace", "new", "nullptr", "operator", "pragma", "private", "public",
    "return", "short", "signed", "size_t", "sizeof", "static", "std", "struct",
    "switch", "template", "this", "true", "typedef", "typename", "uint16_t",
    "uint32_t", "uint64_t", "uint8_t", "union", "unsigned", "using", "void",
    "volatile", "while", "__global__", "__device__", "__host__", "__forceinline__",
    "__restrict__", "__noinline__", "main", "argc", "argv", "printf", "unroll",
};

static int is_keyword(const char *w, size_t n)
{
    for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++)
        if (strlen(keywords[i]) == n && memcmp(keywords[i], w, n) == 0)
            return 1;
    return 0;
}

/* A licence or copyright comment, not a word of the code's purpose. */
static int is_licence(const char *s, size_t n)
{
    static const char *const marks[] = {
        "copyright", "license", "licence", "spdx", "redistribution",
        "warrant", "all rights reserved",
    };
    for (size_t i = 0; i + 4 < n; i++)
        for (size_t k = 0; k < sizeof marks / sizeof *marks; k++) {
            size_t ml = strlen(marks[k]);
            if (i + ml <= n && strncasecmp(s + i, marks[k], ml) == 0)
                return 1;
        }
    return 0;
}

/* An identifier that says what the code does: a CUDA name
 * (__shfl_down_sync, cudaMemcpyAsync, blockIdx.x, cp.async.bulk), not a
 * plain lower-case word (i, tile, sum). */
static int distinctive(const char *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (w[i] == '_' || w[i] == '.' || w[i] == ':' ||
            (i > 0 && islower((unsigned char)w[i - 1]) && isupper((unsigned char)w[i])))
            return 1;
    return 0;
}

/* The code's parts: the text less its licence comments, the identifiers
 * of that (strings' too: inline PTX; comments' words) by kind, and
 * whether it looks like code at all (lines that end in ';', '{' or '}',
 * a preprocessor line). */
typedef struct {
    kb_buf names, words, prose;
    int code_lines, licence;
} code_parts;

static kb_rc add_word(kb_buf *b, const char *w, size_t n)
{
    kb_rc rc = KB_OK;
    if (b->len + n + 1 > CODE_QUERY_MAX)
        return KB_OK;
    /* each once */
    for (const char *p = b->data; p && (p = strstr(p, " ")) != NULL;) {
        p++;
        if (strncmp(p, w, n) == 0 && (p[n] == ' ' || !p[n]))
            return KB_OK;
    }
    if (b->len == 0)
        rc = kb_buf_putc(b, ' ');
    if (rc == KB_OK)
        rc = kb_buf_append(b, w, n);
    return rc == KB_OK ? kb_buf_putc(b, ' ') : rc;
}

/* The identifiers of s[0, n): letters, digits and '_', joined by '.' or
 * "::". */
static kb_rc add_identifiers(code_parts *c, const char *s, size_t n)
{
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < n && rc == KB_OK;) {
        if (!isalpha((unsigned char)s[i]) && s[i] != '_') {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && (isalnum((unsigned char)s[j]) || s[j] == '_' ||
                         ((s[j] == '.' || s[j] == ':') && j + 1 < n &&
                          (isalpha((unsigned char)s[j + 1]) || s[j + 1] == '_' ||
                           s[j + 1] == ':'))))
            j++;
        size_t len = j - i;
        if (len >= 3 && !is_keyword(s + i, len))
            rc = add_word(distinctive(s + i, len) ? &c->names : &c->words, s + i, len);
        i = j;
    }
    return rc;
}

/* Walks the text: comments, string literals, the rest. */
static kb_rc split_code(const char *t, code_parts *c)
{
    kb_rc rc = KB_OK;
    size_t n = strlen(t), from = 0;
    for (size_t i = 0; i < n && rc == KB_OK;) {
        size_t end = i;
        int comment = 0;
        if (t[i] == '/' && i + 1 < n && t[i + 1] == '/') {
            const char *e = strchr(t + i, '\n');
            end = e ? (size_t)(e - t) : n;
            comment = 1;
        } else if (t[i] == '/' && i + 1 < n && t[i + 1] == '*') {
            const char *e = strstr(t + i + 2, "*/");
            end = e ? (size_t)(e - t) + 2 : n;
            comment = 1;
        } else if (t[i] == '"') {
            for (end = i + 1; end < n && t[end] != '"' && t[end] != '\n'; end++)
                if (t[end] == '\\' && end + 1 < n)
                    end++;
            i = end + 1;   /* a string: no comment starts in it */
            continue;
        } else {
            i++;
            continue;
        }
        if (comment && is_licence(t + i, end - i)) {
            c->licence = 1;
            rc = kb_buf_append(&c->prose, t + from, i - from);
            from = end;
        }
        i = end;
    }
    if (rc == KB_OK)
        rc = kb_buf_append(&c->prose, t + from, n - from);
    return rc;
}

/* The lines that end as code does. */
static void code_shape(const char *t, code_parts *c)
{
    const char *p = t;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        size_t b = 0, e = len;
        while (b < e && isspace((unsigned char)p[b]))
            b++;
        while (e > b && isspace((unsigned char)p[e - 1]))
            e--;
        if (e > b && (strchr(";{}", p[e - 1]) || p[b] == '#'))
            c->code_lines++;
        p += len + (nl != NULL);
    }
}

int kb_query_has_words(const char *s)
{
    for (; *s; s++)
        if (isalnum((unsigned char)*s) || (unsigned char)*s >= 0x80)
            return 1;
    return 0;
}

kb_rc kb_query_code_text(const char *text, kb_buf *out, int *rewritten)
{
    *rewritten = 0;
    code_parts c;
    memset(&c, 0, sizeof c);
    kb_buf_init(&c.names, 0);
    kb_buf_init(&c.words, 0);
    kb_buf_init(&c.prose, 0);
    kb_rc rc = split_code(text, &c);
    code_shape(text, &c);
    const char *prose = c.prose.data ? c.prose.data : "";
    kb_buf_reset(out);
    if (rc == KB_OK && c.code_lines >= 3) {   /* code: its identifiers */
        rc = add_identifiers(&c, prose, c.prose.len);
        if (rc == KB_OK)
            rc = kb_buf_printf(out, "%s%s", c.names.data ? c.names.data : "",
                               c.words.data ? c.words.data : "");
        *rewritten = rc == KB_OK && kb_query_has_words(out->data);
    } else if (rc == KB_OK && c.licence) {    /* text: less the licence */
        rc = kb_buf_puts(out, prose);
        *rewritten = rc == KB_OK && kb_query_has_words(out->data);
    }
    kb_buf_release(&c.names);
    kb_buf_release(&c.words);
    kb_buf_release(&c.prose);
    return rc;
}
