/* parse_rst.c - reStructuredText into a kb_doc: sections by adornment (levels
 * in order of first appearance, as docutils assigns them), literal and
 * code-block bodies as code, list-tables and grid/simple tables as rows,
 * other directives as text, comments and includes dropped. */
#include "kb/kb.h"
#include "ingest/ingest_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *s;
    size_t n;              /* without the line end */
} rst_line;

typedef struct {
    char ch;
    int over;              /* has an overline too */
} rst_style;

typedef struct {
    kb_doc *doc;
    kb_rc rc;
    rst_style styles[KB_MAX_HEADING_DEPTH * 2];
    int nstyles;
    kb_strset seen;
    char *label;           /* a ".. _label:" waiting for its section */
    kb_buf run;            /* text not yet added */
    int run_list;          /* run holds list items */
    int depth;             /* nesting of directive bodies and quotes */
} rst_state;

static void add_block(rst_state *st, kb_kind kind, const char *s, size_t n)
{
    if (st->rc == KB_OK && n) {
        kb_rc rc = kb_doc_add(st->doc, kind, s, n);
        if (rc != KB_OK)
            kb_parse_fail(&st->rc, rc);
    }
}

static void flush_run(rst_state *st)
{
    while (st->run.len && isspace((unsigned char)st->run.data[st->run.len - 1]))
        st->run.len--;
    add_block(st, KB_KIND_TEXT, st->run.data, st->run.len);
    kb_buf_reset(&st->run);
    st->run_list = 0;
}

static int blank(const rst_line *l)
{
    for (size_t i = 0; i < l->n; i++)
        if (!isspace((unsigned char)l->s[i]))
            return 0;
    return 1;
}

static size_t indent(const rst_line *l)
{
    size_t i = 0;
    while (i < l->n && (l->s[i] == ' ' || l->s[i] == '\t'))
        i++;
    return i;
}

/* Number of characters (not bytes) of a UTF-8 string, for adornment length. */
static size_t u8len(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            c++;
    return c;
}

static size_t rtrim_len(const char *s, size_t n)
{
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    return n;
}

/* A line of one repeated punctuation character (at least 2), from column 0. */
static int adornment(const rst_line *l, char *ch)
{
    size_t n = rtrim_len(l->s, l->n);
    if (n < 2 || !ispunct((unsigned char)l->s[0]))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (l->s[i] != l->s[0])
            return 0;
    *ch = l->s[0];
    return 1;
}

/* ------------------------------------------------------------- inline */

static int role_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-' || c == ':' ||
           c == '+' || c == '.';
}

/* The shown text of interpreted text / a reference: "text <target>" ->
 * "text"; "<target>" -> "target"; "~a.b.c" -> "c". */
static void put_interpreted(rst_state *st, kb_buf *out, const char *s, size_t n)
{
    if (n && s[n - 1] == '>') {
        const char *lt = memrchr(s, '<', n);
        if (lt) {
            size_t tn = (size_t)(lt - s);
            tn = rtrim_len(s, tn);
            if (tn) {
                n = tn;
            } else {
                const char *t = lt + 1;
                n = (size_t)(s + n - 1 - t);
                s = t;
            }
        }
    }
    if (n && s[0] == '~') {
        s++;
        n--;
        const char *dot = memrchr(s, '.', n);
        if (dot) {
            n -= (size_t)(dot + 1 - s);
            s = dot + 1;
        }
    }
    kb_parse_put(&st->rc, out, s, n);
}

/* Inline markup reduced to its text: literals, roles, references,
 * emphasis markers and backslash escapes. */
static void rst_inline(rst_state *st, kb_buf *out, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        char prev = i ? s[i - 1] : ' ';
        if (c == '`' && i + 1 < n && s[i + 1] == '`') {
            const char *end = memmem(s + i + 2, n - i - 2, "``", 2);
            if (end) {
                kb_parse_put(&st->rc, out, s + i + 2, (size_t)(end - (s + i + 2)));
                i = (size_t)(end - s) + 2;
                continue;
            }
        }
        if (c == ':' && !isalnum((unsigned char)prev)) {
            size_t j = i + 1;
            while (j < n && role_name_char(s[j]))
                j++;
            /* ":role:`" - the name ends with the ':' before the backquote */
            if (j > i + 2 && j < n && s[j] == '`' && s[j - 1] == ':') {
                const char *end = memchr(s + j + 1, '`', n - j - 1);
                if (end) {
                    put_interpreted(st, out, s + j + 1, (size_t)(end - (s + j + 1)));
                    i = (size_t)(end - s) + 1;
                    continue;
                }
            }
        }
        if (c == '`') {
            const char *end = memchr(s + i + 1, '`', n - i - 1);
            if (end) {
                put_interpreted(st, out, s + i + 1, (size_t)(end - (s + i + 1)));
                i = (size_t)(end - s) + 1;
                while (i < n && s[i] == '_')
                    i++;
                /* a trailing role: `text`:role: */
                if (i < n && s[i] == ':') {
                    size_t j = i + 1;
                    while (j < n && role_name_char(s[j]) && s[j] != ':')
                        j++;
                    if (j < n && s[j] == ':' && j > i + 1)
                        i = j + 1;
                }
                continue;
            }
        }
        if (c == '*') {
            size_t k = i;
            while (k < n && s[k] == '*')
                k++;
            char next = k < n ? s[k] : ' ';
            int opens = (isspace((unsigned char)prev) || strchr("([{<'\"-/:", prev)) &&
                        !isspace((unsigned char)next);
            int closes = !isspace((unsigned char)prev) &&
                         (isspace((unsigned char)next) || strchr(")]}>'\".,;:!?-/\\", next));
            if (k - i <= 2 && (opens || closes)) {
                i = k;
                continue;
            }
            kb_parse_put(&st->rc, out, s + i, k - i);
            i = k;
            continue;
        }
        if (c == '\\' && i + 1 < n) {
            if (s[i + 1] != ' ')
                kb_parse_put(&st->rc, out, s + i + 1, 1);
            i += 2;
            continue;
        }
        kb_parse_put(&st->rc, out, &c, 1);
        i++;
    }
}

/* ------------------------------------------------------------- sections */

static int style_level(rst_state *st, char ch, int over)
{
    for (int i = 0; i < st->nstyles; i++)
        if (st->styles[i].ch == ch && st->styles[i].over == over)
            return i + 1;
    if (st->nstyles < (int)(sizeof st->styles / sizeof st->styles[0])) {
        st->styles[st->nstyles].ch = ch;
        st->styles[st->nstyles].over = over;
        st->nstyles++;
        return st->nstyles;
    }
    return st->nstyles;
}

static void section(rst_state *st, const rst_line *title, char ch, int over)
{
    flush_run(st);
    int level = style_level(st, ch, over);
    kb_buf t;
    kb_buf_init(&t, 0);
    size_t n = title->n;
    const char *s = title->s;
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    rst_inline(st, &t, s, rtrim_len(s, n));
    char *anchor = kb_ingest_docutils_id(st->label ? st->label
                                                   : (t.data ? t.data : ""));
    if (!anchor) {
        kb_parse_fail(&st->rc, KB_ERR_NOMEM);
        goto out;
    }
    /* a repeated title gets a generated id ("id3") on the page: use the
     * enclosing section's anchor rather than a wrong one */
    if (*anchor && kb_strset_has(&st->seen, anchor))
        anchor[0] = '\0';
    else if (*anchor && kb_strset_add(&st->seen, anchor) != 0)
        kb_parse_fail(&st->rc, KB_ERR_NOMEM);
    /* with a label the section also has its title's id (docutils gives
     * it both), so a later section of the same title gets neither */
    if (st->label) {
        char *tid = kb_ingest_docutils_id(t.data ? t.data : "");
        if (!tid || (*tid && kb_strset_add(&st->seen, tid) != 0))
            kb_parse_fail(&st->rc, KB_ERR_NOMEM);
        free(tid);
    }
    if (st->rc == KB_OK && t.len) {
        kb_rc rc = kb_doc_heading(st->doc, level, t.data, anchor);
        if (rc != KB_OK)
            kb_parse_fail(&st->rc, rc);
    }
out:
    free(anchor);
    free(st->label);
    st->label = NULL;
    kb_buf_release(&t);
}

/* ------------------------------------------------------------- blocks */

static void parse_lines(rst_state *st, const rst_line *L, size_t n, int nested);

/* The end of the indented body that starts at i (lines blank or indented
 * more than base), trailing blank lines excluded. */
static size_t body_end(const rst_line *L, size_t n, size_t i, size_t base)
{
    size_t j = i, last = i;
    while (j < n && (blank(&L[j]) || indent(&L[j]) > base)) {
        if (!blank(&L[j]))
            last = j + 1;
        j++;
    }
    return last;
}

/* Lines [i, j) shifted left by their common indentation; caller frees. */
static rst_line *dedent(const rst_line *L, size_t i, size_t j)
{
    size_t m = (size_t)-1;
    for (size_t k = i; k < j; k++)
        if (!blank(&L[k]) && indent(&L[k]) < m)
            m = indent(&L[k]);
    if (m == (size_t)-1)
        m = 0;
    rst_line *out = malloc((j - i + 1) * sizeof *out);
    if (!out)
        return NULL;
    for (size_t k = i; k < j; k++) {
        size_t cut = blank(&L[k]) ? L[k].n : m;
        out[k - i].s = L[k].s + cut;
        out[k - i].n = L[k].n - cut;
    }
    return out;
}

/* Lines [i, j) as one code block, dedented, blank ends dropped. */
static void code_block(rst_state *st, const rst_line *L, size_t i, size_t j)
{
    while (i < j && blank(&L[i]))
        i++;
    while (j > i && blank(&L[j - 1]))
        j--;
    if (i >= j)
        return;
    flush_run(st);
    rst_line *D = dedent(L, i, j);
    if (!D) {
        kb_parse_fail(&st->rc, KB_ERR_NOMEM);
        return;
    }
    kb_buf code;
    kb_buf_init(&code, 0);
    for (size_t k = 0; k < j - i; k++) {
        if (k)
            kb_parse_put(&st->rc, &code, "\n", 1);
        kb_parse_put(&st->rc, &code, D[k].s, rtrim_len(D[k].s, D[k].n));
    }
    add_block(st, KB_KIND_CODE, code.data, code.len);
    kb_buf_release(&code);
    free(D);
}

static void recurse(rst_state *st, const rst_line *L, size_t i, size_t j)
{
    if (i >= j)
        return;
    rst_line *D = dedent(L, i, j);
    if (!D) {
        kb_parse_fail(&st->rc, KB_ERR_NOMEM);
        return;
    }
    st->depth++;
    if (st->depth < 32)
        parse_lines(st, D, j - i, 1);
    st->depth--;
    free(D);
}

static void cell_text(rst_state *st, kb_buf *row, const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    n = rtrim_len(s, n);
    if (!n)
        return;
    if (row->len && row->data[row->len - 1] != ' ' && row->data[row->len - 1] != '\x1f')
        kb_parse_put(&st->rc, row, " ", 1);
    rst_inline(st, row, s, n);
}

/* Joins cells (separated by \x1f in row) into "a | b | c". */
static void end_row(rst_state *st, kb_buf *table, kb_buf *row)
{
    int empty = 1;
    for (size_t i = 0; i < row->len; i++)
        if (row->data[i] != '\x1f' && !isspace((unsigned char)row->data[i]))
            empty = 0;
    if (!empty) {
        for (size_t i = 0; i < row->len; i++) {
            if (row->data[i] == '\x1f')
                kb_parse_put(&st->rc, table, i ? " | " : "", i ? 3 : 0);
            else
                kb_parse_put(&st->rc, table, row->data + i, 1);
        }
        kb_parse_put(&st->rc, table, "\n", 1);
    }
    kb_buf_reset(row);
}

/* The body of a list-table directive: "* - a" starts a row, "- b" a cell,
 * deeper lines continue the cell. */
static void list_table(rst_state *st, const char *caption, size_t caplen,
                       const rst_line *L, size_t i, size_t j)
{
    flush_run(st);
    kb_buf table, row;
    kb_buf_init(&table, 0);
    kb_buf_init(&row, 0);
    if (caplen) {
        rst_inline(st, &table, caption, caplen);
        kb_parse_put(&st->rc, &table, "\n", 1);
    }
    size_t row_ind = (size_t)-1, ncells = 0;
    for (size_t k = i; k < j; k++) {
        if (blank(&L[k]))
            continue;
        size_t ind = indent(&L[k]);
        const char *s = L[k].s + ind;
        size_t n = L[k].n - ind;
        if (row_ind == (size_t)-1 && *s == ':')
            continue;                          /* an option */
        if (n >= 1 && *s == '*' && (n == 1 || s[1] == ' ') &&
            (row_ind == (size_t)-1 || ind <= row_ind)) {
            if (ncells)
                end_row(st, &table, &row);
            row_ind = ind;
            ncells = 0;
            s++;
            n--;
            while (n && *s == ' ') {
                s++;
                n--;
            }
        }
        if (n >= 1 && *s == '-' && (n == 1 || s[1] == ' ')) {
            if (ncells++)
                kb_parse_put(&st->rc, &row, "\x1f", 1);
            s++;
            n--;
        }
        cell_text(st, &row, s, n);
    }
    if (ncells)
        end_row(st, &table, &row);
    add_block(st, KB_KIND_TABLE, table.data, rtrim_len(table.data ? table.data : "", table.len));
    kb_buf_release(&table);
    kb_buf_release(&row);
}

static int grid_border(const rst_line *l)
{
    size_t n = rtrim_len(l->s, l->n);
    if (n < 3 || l->s[0] != '+' || l->s[n - 1] != '+')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("+-=:", l->s[i]))
            return 0;
    return 1;
}

/* A grid table: rows between "+---+" borders, cells at the '+' columns. */
static size_t grid_table(rst_state *st, const rst_line *L, size_t n, size_t i)
{
    flush_run(st);
    size_t cols[64], ncols = 0;
    size_t bn = rtrim_len(L[i].s, L[i].n);
    for (size_t k = 0; k < bn && ncols < 64; k++)
        if (L[i].s[k] == '+')
            cols[ncols++] = k;
    kb_buf table, row;
    kb_buf_init(&table, 0);
    kb_buf_init(&row, 0);
    size_t k = i + 1;
    int have = 0;
    /* the text of each cell accumulates in cells[c] */
    kb_buf cells[64];
    for (size_t c = 0; c < 64; c++)
        kb_buf_init(&cells[c], 0);
    for (; k < n; k++) {
        const rst_line *l = &L[k];
        if (blank(l) || (l->s[0] != '+' && l->s[0] != '|'))
            break;
        if (grid_border(l)) {
            if (have) {
                for (size_t c = 0; c + 1 < ncols; c++) {
                    if (c)
                        kb_parse_put(&st->rc, &row, "\x1f", 1);
                    kb_parse_put(&st->rc, &row, cells[c].data ? cells[c].data : "", cells[c].len);
                    kb_buf_reset(&cells[c]);
                }
                end_row(st, &table, &row);
            }
            have = 0;
            continue;
        }
        for (size_t c = 0; c + 1 < ncols; c++) {
            size_t a = cols[c] + 1, b = cols[c + 1];
            if (a >= l->n)
                break;
            if (b > l->n)
                b = l->n;
            cell_text(st, &cells[c], l->s + a, b - a);
        }
        have = 1;
    }
    for (size_t c = 0; c < 64; c++)
        kb_buf_release(&cells[c]);
    add_block(st, KB_KIND_TABLE, table.data, rtrim_len(table.data ? table.data : "", table.len));
    kb_buf_release(&table);
    kb_buf_release(&row);
    return k;
}

/* "=====  ======  ===": a simple table border with at least two columns. */
static int simple_border(const rst_line *l, size_t *cols, size_t *ncols)
{
    size_t n = rtrim_len(l->s, l->n);
    if (n < 3 || l->s[0] != '=')
        return 0;
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        if (l->s[i] != '=' && l->s[i] != ' ')
            return 0;
        if (l->s[i] == '=' && (i == 0 || l->s[i - 1] == ' ')) {
            if (c < 64)
                cols[c++] = i;
        }
    }
    *ncols = c;
    return c >= 2;
}

static size_t simple_table(rst_state *st, const rst_line *L, size_t n, size_t i)
{
    flush_run(st);
    size_t cols[64], ncols = 0;
    simple_border(&L[i], cols, &ncols);
    kb_buf table, row;
    kb_buf_init(&table, 0);
    kb_buf_init(&row, 0);
    size_t k = i + 1;
    size_t tmp[64], tn;
    for (; k < n; k++) {
        const rst_line *l = &L[k];
        if (simple_border(l, tmp, &tn)) {
            /* the closing border is followed by a blank line or the end */
            if (k + 1 >= n || blank(&L[k + 1])) {
                k++;
                break;
            }
            continue;
        }
        if (blank(l))
            continue;
        size_t ln = rtrim_len(l->s, l->n);
        int dashes = 1;
        for (size_t x = 0; x < ln; x++)
            if (l->s[x] != '-' && l->s[x] != ' ')
                dashes = 0;
        if (dashes)
            continue;
        /* a blank first column continues the row above */
        int cont = cols[1] <= ln && rtrim_len(l->s, cols[1]) == 0 && row.len;
        if (!cont && row.len)
            end_row(st, &table, &row);
        for (size_t c = 0; c < ncols; c++) {
            size_t a = cols[c], b = c + 1 < ncols ? cols[c + 1] : ln;
            if (a >= ln)
                break;
            if (b > ln)
                b = ln;
            if (!cont && c)
                kb_parse_put(&st->rc, &row, "\x1f", 1);
            cell_text(st, &row, l->s + a, b - a);
        }
    }
    if (row.len)
        end_row(st, &table, &row);
    add_block(st, KB_KIND_TABLE, table.data, rtrim_len(table.data ? table.data : "", table.len));
    kb_buf_release(&table);
    kb_buf_release(&row);
    return k;
}

static int is_bullet(const char *s, size_t n)
{
    if (n >= 2 && strchr("-*+", s[0]) && s[1] == ' ')
        return 1;
    if (n >= 4 && memcmp(s, "\xe2\x80\xa2 ", 4) == 0)
        return 1;
    size_t i = 0;
    while (i < n && isdigit((unsigned char)s[i]))
        i++;
    if (i == 0 && n >= 2 && s[0] == '#')
        i = 1;
    return i > 0 && i + 1 < n && (s[i] == '.' || s[i] == ')') && s[i + 1] == ' ';
}

static int name_eq(const char *s, size_t n, const char *name)
{
    return strlen(name) == n && strncasecmp(s, name, n) == 0;
}

static int in_list(const char *s, size_t n, const char *const *names)
{
    for (size_t i = 0; names[i]; i++)
        if (name_eq(s, n, names[i]))
            return 1;
    return 0;
}

static const char *const code_directives[] = { "code-block", "code",
    "sourcecode", NULL };
static const char *const skip_directives[] = { "include", "toctree",
    "contents", "image", "raw", "highlight", "index", "meta",
    "tabularcolumns", "currentmodule", "module", "literalinclude",
    "autosummary", "sectnum", "default-role", "role", "title", NULL };
static const char *const admonitions[] = { "note", "warning", "tip",
    "important", "caution", "attention", "danger", "error", "hint",
    "seealso", "admonition", "deprecated", "versionadded", "versionchanged",
    NULL };

/* A hyperlink target ".. _label:" in s[0, n) (no URL: it names the next
 * element, which takes it as its anchor); alone is 1 when it has no body. */
static void hyperlink_target(rst_state *st, const char *s, size_t n, int alone)
{
    const char *colon = s[1] == '`' ? memchr(s + 2, '`', n - 2) : s;
    colon = colon ? memchr(colon, ':', n - (size_t)(colon - s)) : NULL;
    if (!colon)
        return;
    const char *name = s + 1;
    size_t nn = (size_t)(colon - name);
    if (nn && name[0] == '`') {
        name++;
        nn -= nn >= 2 ? 2 : 1;
    }
    size_t rest = n - (size_t)(colon + 1 - s);
    if (rtrim_len(colon + 1, rest) == 0 && alone && nn) {
        free(st->label);
        st->label = kb_strndup(name, nn);
    }
}

/* A footnote or citation "[x] text" in s[0, n), with its body [i+1, end):
 * its text goes into the run. */
static void footnote(rst_state *st, const char *s, size_t n, const rst_line *L,
                     size_t i, size_t end)
{
    const char *cl = memchr(s, ']', n);
    if (!cl)
        return;
    kb_buf t;
    kb_buf_init(&t, 0);
    rst_inline(st, &t, cl + 1, n - (size_t)(cl + 1 - s));
    kb_parse_put(&st->rc, &st->run, t.data ? t.data : "", t.len);
    kb_parse_put(&st->rc, &st->run, "\n", 1);
    kb_buf_release(&t);
    recurse(st, L, i + 1, end);
}

/* An explicit markup block at L[i] (".. "), with its body [i+1, end). */
static void explicit_markup(rst_state *st, const rst_line *L, size_t i,
                            size_t end)
{
    const char *s = L[i].s + 2;
    size_t n = L[i].n - 2;
    while (n && *s == ' ') {
        s++;
        n--;
    }
    n = rtrim_len(s, n);
    if (n >= 2 && s[0] == '_') {
        hyperlink_target(st, s, n, end == i + 1);
        return;
    }
    if (n && s[0] == '|')
        return;                               /* substitution definition */
    /* directive "name:: argument" */
    size_t k = 0;
    while (k < n && (isalnum((unsigned char)s[k]) || s[k] == '-' || s[k] == '_' ||
                     s[k] == ':' || s[k] == '.'))
        k++;
    const char *dc = k >= 2 ? memmem(s, k + 1 > n ? n : k + 1, "::", 2) : NULL;
    if (!dc) {
        if (n && s[0] == '[')
            footnote(st, s, n, L, i, end);
        return;                               /* a comment */
    }
    size_t nlen = (size_t)(dc - s);
    const char *arg = dc + 2;
    size_t alen = n - (size_t)(arg - s);
    while (alen && *arg == ' ') {
        arg++;
        alen--;
    }
    /* options: ":name: value" lines right after the directive line */
    size_t b = i + 1;
    while (b < end && !blank(&L[b]) && L[b].s[indent(&L[b])] == ':')
        b++;
    /* an argument can continue on the next lines before the options */
    if (in_list(s, nlen, skip_directives))
        return;
    if (in_list(s, nlen, code_directives)) {
        code_block(st, L, b, end);
        return;
    }
    if (name_eq(s, nlen, "list-table")) {
        list_table(st, arg, alen, L, b, end);
        return;
    }
    if (in_list(s, nlen, admonitions)) {
        kb_buf t;
        kb_buf_init(&t, 0);
        kb_parse_put(&st->rc, &t, s, nlen);
        if (t.len)
            t.data[0] = (char)toupper((unsigned char)t.data[0]);
        kb_parse_put(&st->rc, &t, ":", 1);
        if (alen) {
            kb_parse_put(&st->rc, &t, " ", 1);
            rst_inline(st, &t, arg, alen);
        }
        kb_parse_put(&st->rc, &st->run, t.data, t.len);
        kb_parse_put(&st->rc, &st->run, "\n", 1);
        kb_buf_release(&t);
    } else if (alen) {
        /* rubric, topic, figure, ...: the argument is text */
        rst_inline(st, &st->run, arg, alen);
        kb_parse_put(&st->rc, &st->run, "\n", 1);
    }
    recurse(st, L, b, end);
    if (!st->depth)
        flush_run(st);
}

/* The paragraph L[i, j): its text into the run; returns 1 if it ends with
 * "::" (a literal block follows). */
static int paragraph(rst_state *st, const rst_line *L, size_t i, size_t j)
{
    int bullet = is_bullet(L[i].s, L[i].n);
    if (!bullet && st->run_list)
        flush_run(st);
    kb_buf t;
    kb_buf_init(&t, 0);
    for (size_t k = i; k < j; k++) {
        const char *s = L[k].s + indent(&L[k]);
        size_t n = rtrim_len(s, L[k].n - indent(&L[k]));
        if (k > i && is_bullet(s, n)) {
            bullet = 1;
            kb_parse_put(&st->rc, &t, "\n", 1);
        } else if (k > i) {
            kb_parse_put(&st->rc, &t, " ", 1);
        }
        rst_inline(st, &t, s, n);
    }
    int literal = 0;
    if (t.len >= 2 && memcmp(t.data + t.len - 2, "::", 2) == 0) {
        literal = 1;
        t.len -= 1;                         /* "Example::" -> "Example:" */
        if (t.len == 1 || isspace((unsigned char)t.data[t.len - 2])) {
            t.len--;                        /* " ::" disappears */
            t.len = rtrim_len(t.data, t.len);
        }
        t.data[t.len] = '\0';
    }
    if (t.len) {
        kb_parse_put(&st->rc, &st->run, t.data, t.len);
        kb_parse_put(&st->rc, &st->run, "\n", 1);
    }
    kb_buf_release(&t);
    if (bullet)
        st->run_list = 1;
    else if (!st->depth)
        flush_run(st);
    return literal;
}

static void parse_lines(rst_state *st, const rst_line *L, size_t n, int nested)
{
    size_t i = 0;
    while (i < n && st->rc == KB_OK) {
        if (blank(&L[i])) {
            i++;
            continue;
        }
        size_t ind = indent(&L[i]);
        if (ind > 0) {                        /* a block quote */
            size_t j = body_end(L, n, i, 0);
            recurse(st, L, i, j);
            i = j;
            continue;
        }
        char ch, ch2;
        /* section title with overline */
        if (!nested && i + 2 < n && adornment(&L[i], &ch) && !blank(&L[i + 1]) &&
            adornment(&L[i + 2], &ch2) && ch == ch2 && !adornment(&L[i + 1], &ch2)) {
            section(st, &L[i + 1], ch, 1);
            i += 3;
            continue;
        }
        /* section title with underline */
        if (!nested && i + 1 < n && !adornment(&L[i], &ch2) && adornment(&L[i + 1], &ch) &&
            (u8len(L[i + 1].s, rtrim_len(L[i + 1].s, L[i + 1].n)) >= 3 ||
             u8len(L[i + 1].s, rtrim_len(L[i + 1].s, L[i + 1].n)) >=
                 u8len(L[i].s, rtrim_len(L[i].s, L[i].n)))) {
            section(st, &L[i], ch, 0);
            i += 2;
            continue;
        }
        /* explicit markup */
        if (L[i].n >= 2 && L[i].s[0] == '.' && L[i].s[1] == '.' &&
            (L[i].n == 2 || L[i].s[2] == ' ')) {
            size_t j = body_end(L, n, i + 1, 0);
            explicit_markup(st, L, i, j);
            i = j;
            continue;
        }
        size_t cols[64], ncols;
        if (grid_border(&L[i])) {
            i = grid_table(st, L, n, i);
            continue;
        }
        if (simple_border(&L[i], cols, &ncols)) {
            i = simple_table(st, L, n, i);
            continue;
        }
        if (adornment(&L[i], &ch) && rtrim_len(L[i].s, L[i].n) >= 4) {
            i++;                              /* a transition */
            continue;
        }
        /* a paragraph: up to a blank line, a new list item or a quote */
        size_t j = i + 1;
        while (j < n && !blank(&L[j])) {
            size_t ji = indent(&L[j]);
            if (ji == 0 && is_bullet(L[j].s, L[j].n))
                break;
            if (ji == 0 && L[j].n >= 3 && memcmp(L[j].s, ".. ", 3) == 0)
                break;
            j++;
        }
        free(st->label);
        st->label = NULL;
        int literal = paragraph(st, L, i, j);
        i = j;
        if (literal) {
            size_t k = i;
            while (k < n && blank(&L[k]))
                k++;
            if (k < n && indent(&L[k]) > 0) {
                size_t e = body_end(L, n, k, 0);
                code_block(st, L, k, e);
                i = e;
            }
        }
    }
}

kb_rc kb_parse_rst(const char *data, size_t len, const char *path,
                   kb_doc *doc, kb_err *err)
{
    kb_rc crc = kb_ingest_check_text(data, len, path, "reStructuredText", err);
    if (crc != KB_OK)
        return crc;
    rst_state st;
    memset(&st, 0, sizeof st);
    st.doc = doc;
    kb_strset_init(&st.seen);
    kb_buf_init(&st.run, 0);
    kb_rc rc = KB_OK;

    size_t nlines = 0, cap = 0;
    rst_line *L = NULL;
    size_t p = 0;
    if (len >= 3 && memcmp(data, "\xef\xbb\xbf", 3) == 0)
        p = 3;
    while (p < len) {
        const char *nl = memchr(data + p, '\n', len - p);
        size_t e = nl ? (size_t)(nl - data) : len;
        if (KB_GROW(L, nlines + 1, cap) != KB_OK) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory parsing '%s'",
                            path ? path : "");
            goto out;
        }
        size_t ln = e - p;
        if (ln && data[e - 1] == '\r')
            ln--;
        L[nlines].s = data + p;
        L[nlines].n = ln;
        nlines++;
        p = e + 1;
    }
    parse_lines(&st, L, nlines, 0);
    flush_run(&st);
    if (st.rc != KB_OK)
        rc = kb_err_set(err, st.rc, "cannot parse '%s': %s", path ? path : "",
                        st.rc == KB_ERR_NOMEM ? "out of memory" : kb_rc_name(st.rc));
out:
    free(L);
    free(st.label);
    kb_strset_release(&st.seen);
    kb_buf_release(&st.run);
    return rc;
}
