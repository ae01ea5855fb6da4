/* parse_cuda.c - CUDA / C / C++ sources (.cu, .cuh, .h, .cpp).
 *
 * Output: a level-1 heading with the file name; the file's leading comment
 * as a text block (a licence header dropped); then, in file order, one code
 * block per function definition (kernels, device and host functions,
 * templates) with the comment right above it, under a level-2 heading that
 * is the function's name and an anchor that is its first line ("L42"), and
 * the top-level code between
 * functions (includes, macros, globals, structs) as code blocks under the
 * file heading.
 *
 * This is a scanner, not a C++ parser: it tracks comments, string and
 * character literals (raw strings too), preprocessor lines and bracket
 * depth, which is enough to find top-level definitions and their bodies.
 * namespace { } and extern "C" { } are looked into.
 */
#include "kb/kb.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/ingest_int.h"

#define NONE ((size_t)-1)

typedef struct {
    const char *s;
    size_t n;
} src;

static int is_ident_start(int c)
{
    return isalpha(c) || c == '_' || c == '$';
}

static int is_ident_char(int c)
{
    return isalnum(c) || c == '_' || c == '$';
}

/* 1 if the '#' at i is the first non-blank character of its line. */
static int at_line_start(const src *x, size_t i)
{
    while (i > 0) {
        char c = x->s[i - 1];
        if (c == '\n')
            return 1;
        if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v')
            return 0;
        i--;
    }
    return 1;
}

/* End of a comment starting at i ("//" or slash-star), or i if none. */
static size_t skip_comment(const src *x, size_t i)
{
    if (i + 1 >= x->n || x->s[i] != '/')
        return i;
    if (x->s[i + 1] == '/') {
        /* a line comment ends at a newline not escaped by a backslash */
        for (i += 2; i < x->n; i++) {
            if (x->s[i] == '\n' && !(x->s[i - 1] == '\\' ||
                                     (x->s[i - 1] == '\r' && i >= 2 && x->s[i - 2] == '\\')))
                return i;
        }
        return x->n;
    }
    if (x->s[i + 1] == '*') {
        const char *e = NULL;
        for (size_t j = i + 2; j + 1 < x->n; j++)
            if (x->s[j] == '*' && x->s[j + 1] == '/') {
                e = x->s + j;
                break;
            }
        return e ? (size_t)(e - x->s) + 2 : x->n;
    }
    return i;
}

/* End of a quoted literal whose opening quote is at i. */
static size_t skip_quoted(const src *x, size_t i)
{
    char q = x->s[i];
    for (i++; i < x->n; i++) {
        char c = x->s[i];
        if (c == '\\') {
            i++;
            continue;
        }
        if (c == q)
            return i + 1;
        if (c == '\n')      /* unterminated: stop at the line's end */
            return i;
    }
    return x->n;
}

/* End of a raw string R"delim( ... )delim" whose quote is at i. */
static size_t skip_raw(const src *x, size_t i)
{
    size_t d = i + 1;
    while (d < x->n && x->s[d] != '(' && x->s[d] != '"' && x->s[d] != '\n' &&
           d - i <= 17)
        d++;
    if (d >= x->n || x->s[d] != '(')
        return skip_quoted(x, i);
    size_t dl = d - (i + 1);
    const char *delim = x->s + i + 1;
    for (size_t j = d + 1; j + dl + 1 < x->n + 1; j++) {
        if (x->s[j] == ')' && j + 1 + dl < x->n &&
            memcmp(x->s + j + 1, delim, dl) == 0 && x->s[j + 1 + dl] == '"')
            return j + dl + 2;
    }
    return x->n;
}

/* End of a preprocessor line starting at i (backslash continuations and
 * block comments that run past the line included). */
static size_t skip_directive(const src *x, size_t i)
{
    while (i < x->n) {
        char c = x->s[i];
        if (c == '\n') {
            size_t k = i;
            if (k > 0 && x->s[k - 1] == '\r')
                k--;
            if (k > 0 && x->s[k - 1] == '\\') {
                i++;
                continue;
            }
            return i;
        }
        if (c == '/' && i + 1 < x->n && (x->s[i + 1] == '*' || x->s[i + 1] == '/')) {
            size_t e = skip_comment(x, i);
            if (x->s[i + 1] == '/')
                return e;
            i = e;
            continue;
        }
        if (c == '"' || c == '\'') {
            i = skip_quoted(x, i);
            continue;
        }
        i++;
    }
    return x->n;
}

/* The end of one lexical unit at i that the bracket scanners must not look
 * into: a comment, a literal (with its prefix), a number, an identifier, a
 * preprocessor line; else i + 1. */
static size_t skip_unit(const src *x, size_t i)
{
    char c = x->s[i];
    if (c == '/' && i + 1 < x->n && (x->s[i + 1] == '/' || x->s[i + 1] == '*'))
        return skip_comment(x, i);
    if (c == '"' || c == '\'')
        return skip_quoted(x, i);
    if (c == '#' && at_line_start(x, i))
        return skip_directive(x, i);
    if (isdigit((unsigned char)c)) {
        /* pp-number: digit separators (1'000) and exponents included */
        size_t j = i + 1;
        while (j < x->n) {
            char d = x->s[j];
            if (is_ident_char((unsigned char)d) || d == '.')
                j++;
            else if (d == '\'' && j + 1 < x->n && isalnum((unsigned char)x->s[j + 1]))
                j++;
            else if ((d == '+' || d == '-') &&
                     strchr("eEpP", x->s[j - 1]) != NULL)
                j++;
            else
                break;
        }
        return j;
    }
    if (is_ident_start((unsigned char)c)) {
        size_t j = i + 1;
        while (j < x->n && is_ident_char((unsigned char)x->s[j]))
            j++;
        if (j < x->n && (x->s[j] == '"' || x->s[j] == '\'')) {
            size_t len = j - i;
            const char *p = x->s + i;
            if (x->s[j] == '"' && len <= 3 && p[len - 1] == 'R' &&
                (len == 1 || strncmp(p, "LR", 2) == 0 || strncmp(p, "uR", 2) == 0 ||
                 strncmp(p, "UR", 2) == 0 || strncmp(p, "u8R", 3) == 0))
                return skip_raw(x, j);
            if ((len == 1 && (*p == 'L' || *p == 'u' || *p == 'U')) ||
                (len == 2 && strncmp(p, "u8", 2) == 0))
                return skip_quoted(x, j);
        }
        return j;
    }
    return i + 1;
}

/* The index just past the '}' matching the '{' at i (or the end). */
static size_t match_brace(const src *x, size_t i)
{
    int depth = 0;
    while (i < x->n) {
        char c = x->s[i];
        if (c == '{') {
            depth++;
        } else if (c == '}') {
            if (--depth == 0)
                return i + 1;
        } else {
            i = skip_unit(x, i);
            continue;
        }
        i++;
    }
    return x->n;
}

/* ------------------------------------------------------------------ headers */

typedef struct {
    size_t off, len;
    int ident;
} tok;

/* Splits [a, b) into tokens, leaving out comments and preprocessor lines;
 * at most cap tokens. */
static size_t tokenize(const src *x, size_t a, size_t b, tok *t, size_t cap)
{
    size_t n = 0;
    size_t i = a;
    while (i < b && n < cap) {
        char c = x->s[i];
        if (isspace((unsigned char)c)) {
            i++;
            continue;
        }
        size_t e = skip_unit(x, i);
        if (e > b)
            e = b;
        if ((c == '/' && e > i + 1) || (c == '#' && at_line_start(x, i))) {
            i = e;
            continue;
        }
        if (c == ':' && i + 1 < b && x->s[i + 1] == ':')
            e = i + 2;
        t[n].off = i;
        t[n].len = e - i;
        t[n].ident = is_ident_start((unsigned char)c) && x->s[e - 1] != '"' &&
                     x->s[e - 1] != '\'';
        n++;
        i = e;
    }
    return n;
}

static int tok_is(const src *x, const tok *t, const char *s)
{
    size_t n = strlen(s);
    return t->len == n && memcmp(x->s + t->off, s, n) == 0;
}

/* identifiers that take a parenthesised argument but are not the name */
static const char *const not_names[] = {
    "__launch_bounds__", "__attribute__", "__declspec", "alignas", "_Alignas",
    "__align__", "__align", "decltype", "sizeof", "alignof", "__cluster_dims__",
    "__maxnreg__", "static_assert", "noexcept", "throw", "if", "while", "for",
    "switch", "return", "__pragma", "_Pragma", "__nv_pure__", NULL
};

static int not_name(const src *x, const tok *t)
{
    for (size_t i = 0; not_names[i]; i++)
        if (tok_is(x, t, not_names[i]))
            return 1;
    return 0;
}

/* Index of the token after the group opened at t[i] ("(", "[" or "<"). */
static size_t skip_group(const src *x, const tok *t, size_t n, size_t i)
{
    char open = x->s[t[i].off];
    char close = open == '(' ? ')' : open == '[' ? ']' : '>';
    int depth = 0, paren = 0;
    for (; i < n; i++) {
        char c = t[i].len == 1 ? x->s[t[i].off] : '\0';
        if (open == '<' && (c == '(' || c == ')')) {
            paren += c == '(' ? 1 : -1;
            continue;
        }
        if (open == '<' && paren > 0)
            continue;
        if (c == open)
            depth++;
        else if (c == close && --depth == 0)
            return i + 1;
    }
    return n;
}

static int all_caps(const src *x, const tok *t)
{
    int letters = 0;
    for (size_t i = 0; i < t->len; i++) {
        char c = x->s[t->off + i];
        if (islower((unsigned char)c))
            return 0;
        letters += isupper((unsigned char)c) != 0;
    }
    return letters > 0;
}

/* For "name<args>(" with t[i] the '(': the index of name, else NONE. */
static size_t specialisation_name(const src *x, const tok *t, size_t i)
{
    int depth = 0;
    size_t k = i - 1;
    for (;; k--) {
        if (tok_is(x, &t[k], ">"))
            depth++;
        else if (tok_is(x, &t[k], "<") && --depth == 0)
            break;
        if (k == 0)
            break;
    }
    if (depth == 0 && k > 0 && t[k - 1].ident && !not_name(x, &t[k - 1]) &&
        !tok_is(x, &t[k - 1], "template"))
        return k - 1;
    return NONE;
}

/* If the n tokens t are a function header, the index of its name (the
 * last part of a qualified one, or "operator"); else NONE. */
static size_t name_token(const src *x, const tok *t, size_t n)
{
    size_t i = 0;
    /* template <...> prefixes */
    while (i < n && tok_is(x, &t[i], "template")) {
        i++;
        if (i < n && tok_is(x, &t[i], "<"))
            i = skip_group(x, t, n, i);
    }
    if (i < n && (tok_is(x, &t[i], "namespace") || tok_is(x, &t[i], "typedef") ||
                  tok_is(x, &t[i], "using")))
        return NONE;
    for (; i < n; i++) {
        char c = t[i].len == 1 ? x->s[t[i].off] : '\0';
        if (tok_is(x, &t[i], "operator"))
            return i;           /* operator==, operator(), operator bool */
        if (c == '=' || c == ';')
            return NONE;        /* an initialiser, not a definition */
        if (c == '[' && i + 1 < n && tok_is(x, &t[i + 1], "[")) {
            i = skip_group(x, t, n, i) - 1;   /* [[attribute]] */
            continue;
        }
        if (c != '(')
            continue;
        if (i >= 2 && tok_is(x, &t[i - 1], ">")) {
            size_t k = specialisation_name(x, t, i);
            if (k != NONE)
                return k;
        }
        if (i == 0 || !t[i - 1].ident)
            return NONE;   /* "(*fp)(...)", "](...)": not a plain function */
        if (not_name(x, &t[i - 1])) {
            i = skip_group(x, t, n, i) - 1;
            continue;
        }
        if (all_caps(x, &t[i - 1])) {
            /* EXPORT(int) name(...): a macro before the real name */
            size_t j = skip_group(x, t, n, i);
            if (j + 1 < n && t[j].ident && !tok_is(x, &t[j], "const") &&
                !tok_is(x, &t[j], "override") && !tok_is(x, &t[j], "final") &&
                !tok_is(x, &t[j], "volatile")) {
                i = j - 1;
                continue;
            }
        }
        return i - 1;
    }
    return NONE;
}

/* The qualified name around t[found]: a::b::c, ~T, operator+, operator()
 * (caller frees; NULL out of memory). */
static char *qualified_name(const src *x, const tok *t, size_t n, size_t found)
{
    size_t first = found;
    while (first >= 2 && tok_is(x, &t[first - 1], "::") && t[first - 2].ident)
        first -= 2;
    if (first >= 1 && tok_is(x, &t[first - 1], "::"))
        first--;
    if (first >= 1 && tok_is(x, &t[first - 1], "~"))
        first--;
    size_t last = found;
    if (tok_is(x, &t[found], "operator")) {
        /* operator() or the symbols up to the parameter list */
        if (found + 2 < n && tok_is(x, &t[found + 1], "(") && tok_is(x, &t[found + 2], ")"))
            last = found + 2;
        else
            while (last + 1 < n && !tok_is(x, &t[last + 1], "("))
                last++;
    }
    kb_buf nm;
    kb_buf_init(&nm, 0);
    kb_rc rc = KB_OK;
    for (size_t k = first; rc == KB_OK && k <= last; k++) {
        if (k > first && t[k].ident && t[k - 1].ident)
            rc = kb_buf_putc(&nm, ' ');      /* operator bool */
        if (rc == KB_OK)
            rc = kb_buf_append(&nm, x->s + t[k].off, t[k].len);
    }
    return kb_buf_finish(&nm, rc);
}

/* If [a, b) (the text before a '{') is a function header, the name (caller
 * frees); else NULL. Out of memory it sets *rc and returns NULL. */
static char *function_name(const src *x, size_t a, size_t b, kb_rc *rc)
{
    tok t[512];
    size_t n = tokenize(x, a, b, t, sizeof t / sizeof t[0]);
    size_t found = n ? name_token(x, t, n) : NONE;
    if (found == NONE)
        return NULL;
    char *name = qualified_name(x, t, n, found);
    if (!name)
        *rc = KB_ERR_NOMEM;
    return name;
}

/* 1 if [a, b) opens a scope to look into: namespace X, extern "C". */
static int transparent_scope(const src *x, size_t a, size_t b)
{
    tok t[64];
    size_t n = tokenize(x, a, b, t, sizeof t / sizeof t[0]);
    if (n == 0)
        return 0;
    size_t i = 0;
    if (tok_is(x, &t[0], "inline"))
        i++;
    if (i < n && tok_is(x, &t[i], "namespace")) {
        for (size_t k = i; k < n; k++)
            if (tok_is(x, &t[k], "(") || tok_is(x, &t[k], "="))
                return 0;
        return 1;
    }
    return n == 2 && tok_is(x, &t[0], "extern") && x->s[t[1].off] == '"';
}

/* 1 if [a, b) has a parenthesis outside brackets and no '=' there and
 * does not start a struct/class/union/enum: a definition whose name we
 * could not find, which ends at its '}'. */
static int looks_callable(const src *x, size_t a, size_t b)
{
    tok t[512];
    size_t n = tokenize(x, a, b, t, sizeof t / sizeof t[0]);
    int paren = 0;
    size_t i = 0;
    while (i < n && tok_is(x, &t[i], "template")) {
        i++;
        if (i < n && tok_is(x, &t[i], "<"))
            i = skip_group(x, t, n, i);
    }
    for (size_t k = i; k < n; k++) {
        if (tok_is(x, &t[k], "struct") || tok_is(x, &t[k], "class") ||
            tok_is(x, &t[k], "union") || tok_is(x, &t[k], "enum"))
            return 0;
        if (tok_is(x, &t[k], "="))
            return 0;
        if (tok_is(x, &t[k], "("))
            paren = 1;
    }
    return paren;
}

/* The conditional directive (#if, #ifdef, #ifndef, #elif, #else, #endif)
 * at i, as the length of its keyword, or 0. */
static size_t conditional_at(const src *x, size_t i)
{
    static const char *const kw[] = { "ifndef", "ifdef", "if", "elif", "else",
                                       "endif", NULL };
    if (i >= x->n || x->s[i] != '#')
        return 0;
    i++;
    while (i < x->n && (x->s[i] == ' ' || x->s[i] == '\t'))
        i++;
    for (size_t k = 0; kw[k]; k++) {
        size_t n = strlen(kw[k]);
        if (i + n <= x->n && memcmp(x->s + i, kw[k], n) == 0 &&
            (i + n == x->n || !is_ident_char((unsigned char)x->s[i + n])))
            return n;
    }
    return 0;
}

static int is_endif(const src *x, size_t i)
{
    if (!conditional_at(x, i))
        return 0;
    i++;
    while (i < x->n && (x->s[i] == ' ' || x->s[i] == '\t'))
        i++;
    return x->n - i >= 5 && memcmp(x->s + i, "endif", 5) == 0;
}

/* Where the conditional directives (#if X, ...) that end [a, b) start,
 * or b: an "#if" right above a function belongs to it. */
static size_t conditional_tail(const src *x, size_t a, size_t b)
{
    size_t tail = NONE;
    size_t i = a;
    while (i < b) {
        size_t ls = i;
        while (i < b && (x->s[i] == ' ' || x->s[i] == '\t' || x->s[i] == '\r'))
            i++;
        if (i < b && x->s[i] == '\n') {
            i++;
            continue;
        }
        if (i >= b)
            break;
        if (conditional_at(x, i)) {
            if (tail == NONE)
                tail = ls;
            i = skip_directive(x, i);
        } else {
            tail = NONE;
            const char *nl = memchr(x->s + i, '\n', b - i);
            i = nl ? (size_t)(nl - x->s) + 1 : b;
        }
    }
    return tail == NONE ? b : tail;
}

/* ------------------------------------------------------------------ comments */

static const char *const licence_marks[] = {
    "Redistribution and use in source and binary forms",
    "SPDX-License-Identifier",
    "Permission is hereby granted, free of charge",
    "Licensed under the Apache License",
    NULL
};

static int is_licence(const char *s, size_t len)
{
    for (size_t i = 0; licence_marks[i]; i++) {
        size_t m = strlen(licence_marks[i]);
        for (size_t j = 0; j + m <= len; j++)
            if (s[j] == licence_marks[i][0] && memcmp(s + j, licence_marks[i], m) == 0)
                return 1;
    }
    return 0;
}

/* 1 if the line is only comment-banner characters ("// ------", " *****"). */
static int banner_line(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\r')
            continue;
        if (!strchr("-=*/#~_+", c))
            return 0;
    }
    return 1;
}

/* Appends the text of comment source [a, b) to o without the comment
 * markers, line by line; banner lines become blank lines. */
static kb_rc comment_text(const src *x, size_t a, size_t b, kb_buf *o)
{
    kb_rc rc = KB_OK;
    size_t i = a;
    while (i < b && rc == KB_OK) {
        const char *nl = memchr(x->s + i, '\n', b - i);
        size_t e = nl ? (size_t)(nl - x->s) : b;
        const char *p = x->s + i, *q = x->s + e;
        while (p < q && isspace((unsigned char)*p))
            p++;
        while (q > p && isspace((unsigned char)q[-1]))
            q--;
        if (q - p >= 2 && q[-2] == '*' && q[-1] == '/')
            q -= 2;
        if (q - p >= 2 && p[0] == '/' && (p[1] == '/' || p[1] == '*')) {
            p += 2;
            while (p < q && (*p == '/' || *p == '*' || *p == '!' || *p == '<'))
                p++;
        } else if (p < q && *p == '*') {
            p++;
        }
        if (p < q && *p == ' ')
            p++;
        while (q > p && isspace((unsigned char)q[-1]))
            q--;
        if (!banner_line(p, (size_t)(q - p)))
            rc = kb_buf_append(o, p, (size_t)(q - p));
        if (rc == KB_OK)
            rc = kb_buf_putc(o, '\n');
        i = nl ? e + 1 : b;
    }
    return rc;
}

/* ------------------------------------------------------------------ blocks */

typedef struct {
    const src *x;
    kb_doc *doc;
    const char *file;
    int in_func;       /* the doc's current section is a function's */
    kb_rc rc;
    size_t line_pos;   /* lines counted up to here (functions come in order) */
    int line;          /* 1-based line of line_pos */
} emitter;

/* Adds the code [a, b) trimmed of blank lines at both ends. */
static void emit_code(emitter *em, size_t a, size_t b)
{
    const src *x = em->x;
    if (em->rc != KB_OK)
        return;
    /* from the start of a's line when only blanks precede it */
    size_t ls = a;
    while (ls > 0 && (x->s[ls - 1] == ' ' || x->s[ls - 1] == '\t'))
        ls--;
    if (ls == 0 || x->s[ls - 1] == '\n')
        a = ls;
    /* leading blank lines */
    for (size_t i = a; i < b; i++) {
        if (x->s[i] == '\n')
            a = i + 1;
        else if (!isspace((unsigned char)x->s[i]))
            break;
    }
    while (b > a && isspace((unsigned char)x->s[b - 1]))
        b--;
    if (b > a)
        em->rc = kb_doc_add(em->doc, KB_KIND_CODE, x->s + a, b - a);
}

static void emit_toplevel(emitter *em, size_t a, size_t b)
{
    if (em->rc != KB_OK || a >= b)
        return;
    size_t i = a;
    while (i < b && isspace((unsigned char)em->x->s[i]))
        i++;
    if (i == b)
        return;
    if (em->in_func) {
        em->rc = kb_doc_heading(em->doc, 1, em->file, NULL);
        em->in_func = 0;
    }
    emit_code(em, a, b);
}

/* The 1-based line of the first non-blank character at or after a. */
static int line_at(emitter *em, size_t a)
{
    const src *x = em->x;
    while (a < x->n && isspace((unsigned char)x->s[a]))
        a++;
    for (; em->line_pos < a; em->line_pos++)
        em->line += x->s[em->line_pos] == '\n';
    return em->line;
}

/* A function's section: its name as heading, its first line as anchor
 * ("L42": what a repository's file view jumps to). */
static void emit_function(emitter *em, const char *name, size_t a, size_t b)
{
    if (em->rc != KB_OK)
        return;
    char anchor[24];
    snprintf(anchor, sizeof anchor, "L%d", line_at(em, a));
    em->rc = kb_doc_heading(em->doc, 2, name, anchor);
    em->in_func = 1;
    emit_code(em, a, b);
}

/* ------------------------------------------------------------------ leading */

/* Handles the comments at the top of the file: the ones not attached to
 * the first code (a blank line between) become a text block, a licence
 * group dropped. Returns where scanning continues. */
static size_t leading_comment(emitter *em, size_t i)
{
    const src *x = em->x;
    size_t gstart[64], gend[64];
    size_t ng = 0;
    int blank_before = 1;     /* a blank line separates this from the last */
    for (;;) {
        size_t nl = 0;
        while (i < x->n && isspace((unsigned char)x->s[i])) {
            nl += x->s[i] == '\n';
            i++;
        }
        if (nl >= 2)
            blank_before = 1;
        if (i >= x->n || skip_comment(x, i) == i)
            break;
        size_t e = skip_comment(x, i);
        if (!blank_before && ng > 0) {
            gend[ng - 1] = e;
        } else if (ng < 64) {
            gstart[ng] = i;
            gend[ng] = e;
            ng++;
        } else {
            gend[ng - 1] = e;
        }
        blank_before = 0;
        i = e;
    }
    size_t resume = i;
    /* the last group, directly above the code, stays with the code */
    if (ng > 0 && !blank_before && i < x->n) {
        ng--;
        resume = gstart[ng];
    }
    kb_buf text;
    kb_buf_init(&text, 0);
    kb_rc rc = KB_OK;
    for (size_t g = 0; g < ng && rc == KB_OK; g++) {
        if (is_licence(x->s + gstart[g], gend[g] - gstart[g]))
            continue;
        if (text.len)
            rc = kb_buf_putc(&text, '\n');
        if (rc == KB_OK)
            rc = comment_text(x, gstart[g], gend[g], &text);
    }
    /* squeeze runs of blank lines */
    kb_buf out;
    kb_buf_init(&out, 0);
    int blanks = 0;
    for (size_t k = 0; k < text.len && rc == KB_OK; k++) {
        if (text.data[k] == '\n') {
            if (++blanks > 2 || out.len == 0)
                continue;
        } else {
            blanks = 0;
        }
        rc = kb_buf_putc(&out, text.data[k]);
    }
    if (em->rc == KB_OK)
        em->rc = rc;
    while (out.len && isspace((unsigned char)out.data[out.len - 1]))
        out.data[--out.len] = '\0';
    if (em->rc == KB_OK && out.len)
        em->rc = kb_doc_add(em->doc, KB_KIND_TEXT, out.data, out.len);
    kb_buf_release(&out);
    kb_buf_release(&text);
    return resume;
}

/* ------------------------------------------------------------------ entry */

/* The top-level walk of kb_parse_cuda: where it is, what is pending. */
typedef struct {
    emitter *em;
    size_t i;        /* the scan position */
    size_t run;      /* start of the pending top-level code */
    size_t cstart;   /* start of the comments above the next statement */
    size_t last;     /* end of the last code (or trailing comment) */
    int scopes;      /* open namespace / extern "C" braces */
} walk;

/* Steps over what lies between statements at w->i: space, a comment, a
 * directive, the '}' of a namespace, a stray ';' or '}'. 1 if it took
 * something, 0 if a statement starts there. */
static int between_statements(walk *w)
{
    const src *x = w->em->x;
    size_t i = w->i;
    char c = x->s[i];
    if (isspace((unsigned char)c)) {
        w->i = i + 1;
        return 1;
    }
    size_t e = skip_comment(x, i);
    if (e != i) {
        /* a comment on the line where code ended belongs to that code */
        int trailing = w->last != NONE && memchr(x->s + w->last, '\n', i - w->last) == NULL;
        if (w->cstart == NONE && !trailing)
            w->cstart = i;
        w->i = e;
        if (trailing)
            w->last = e;
        return 1;
    }
    if (c == '#' && at_line_start(x, i)) {
        w->last = w->i = skip_directive(x, i);
        w->cstart = NONE;
        return 1;
    }
    if (c == '}' && w->scopes > 0)
        w->scopes--;
    else if (c != ';' && c != '}')
        return 0;
    w->last = w->i = i + 1;
    w->cstart = NONE;
    return 1;
}

/* Where a function whose body closes at end really ends: past the
 * "#endif"s that close the conditions around it. */
static size_t past_endifs(const src *x, size_t end)
{
    const char *data = x->s;
    size_t len = x->n;
    for (;;) {
        size_t k = end;
        while (k < len && isspace((unsigned char)data[k]) && data[k] != '\n')
            k++;
        if (k < len && data[k] == '\n')
            k++;
        while (k < len && (data[k] == ' ' || data[k] == '\t'))
            k++;
        if (!is_endif(x, k))
            return end;
        end = skip_directive(x, k);
    }
}

/* The function called name, its header at st and its body opening at w->i:
 * the top-level code before it, then the function with the comments and
 * the conditions around it. */
static void take_function(walk *w, size_t st, const char *name)
{
    const src *x = w->em->x;
    size_t end = past_endifs(x, match_brace(x, w->i));
    size_t fstart = w->cstart != NONE ? w->cstart : st;
    size_t cond = conditional_tail(x, w->run, fstart);
    emit_toplevel(w->em, w->run, cond);
    fstart = cond < fstart ? cond : fstart;
    emit_function(w->em, name, fstart, end);
    w->run = w->i = end;
}

/* A statement from w->i: up to ';' or '{' outside brackets. A '{' opens a
 * namespace or extern "C" (walked into), a function's body (emitted), or
 * braces that are skipped: struct, class, enum, initialiser go on to the
 * ';', something else with a parameter list ends at its '}'. */
static void statement(walk *w)
{
    emitter *em = w->em;
    const src *x = em->x;
    size_t st = w->i, i = w->i;
    int done = 0, depth = 0;
    while (i < x->n && !done) {
        char d = x->s[i];
        if (d == '(' || d == '[') {
            depth++;
            i++;
        } else if (d == ')' || d == ']') {
            if (depth > 0)
                depth--;
            i++;
        } else if (d == ';' && depth == 0) {
            i++;
            done = 1;
        } else if (d == '}' && depth == 0) {
            done = 1;         /* a scope ends without ';': leave it */
        } else if (d == '{' && depth == 0) {
            if (transparent_scope(x, st, i)) {
                w->scopes++;
                i++;
                break;
            }
            char *name = function_name(x, st, i, &em->rc);
            if (em->rc != KB_OK)
                break;
            if (name) {
                w->i = i;
                take_function(w, st, name);
                free(name);
                i = w->i;
                break;
            }
            int callable = looks_callable(x, st, i);
            i = match_brace(x, i);
            if (callable)
                done = 1;
        } else {
            i = skip_unit(x, i);
        }
    }
    w->i = w->last = i;
    w->cstart = NONE;
}

kb_rc kb_parse_cuda(const char *data, size_t len, const char *path,
                    kb_doc *doc, kb_err *err)
{
    if (!path)
        path = "";
    kb_rc crc = kb_ingest_check_text(data, len, path, "source code", err);
    if (crc != KB_OK)
        return crc;
    src x = { data, len };
    const char *base = kb_ingest_basename(path);
    emitter em = { &x, doc, *base ? base : "source", 0, KB_OK, 0, 1 };
    em.rc = kb_doc_heading(doc, 1, em.file, NULL);

    size_t i = 0;
    if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0)
        i = 3;
    i = leading_comment(&em, i);
    walk w = { .em = &em, .i = i, .run = i, .cstart = NONE, .last = NONE };
    while (w.i < len && em.rc == KB_OK)
        if (!between_statements(&w))
            statement(&w);
    emit_toplevel(&em, w.run, len);
    if (em.rc != KB_OK)
        return kb_err_set(err, em.rc, "cannot parse '%s': %s", path,
                          kb_rc_name(em.rc));
    return KB_OK;
}
