/* parse_html.c - HTML (and XHTML) documents through libxml2's HTML parser.
 *
 * The DOM is walked once. Headings come from h1..h6; their level comes from
 * the document's structure where it has one: a heading that is the first
 * heading inside a sectioning element (<section>, <article>, and the div
 * classes of docutils, DITA and DocBook: "section", "topic", "sect1", ...)
 * titles that element, and its level is the number of titled sections it is
 * nested in, plus one. That gives Sphinx pages (which stop at <h6> while
 * their sections nest deeper) and DITA pages (whose nested topics repeat
 * <h3>) their true depth. Other headings rank by their tag, as in a flat
 * page. The anchor is the heading's own id (or an <a name|id> inside it),
 * else the id of the element it titles, else a slug of its text (GitHub's,
 * made unique in the page: "x", "x-1", ...).
 *
 * Navigation, page headers, footers, scripts, styles and permalinks are
 * dropped. <pre> becomes a code block with its white space kept, a table
 * one line per row ("a | b | c"), everything else text blocks with white
 * space collapsed, one per paragraph, list item or definition.
 */
#include "kb/kb.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/HTMLparser.h>
#include <libxml/tree.h>

#include "ingest/ingest_int.h"

#define MAX_FRAMES 512      /* deeper markup is not descended into */

/* An open section of the walker's own heading stack; level = index + 1. */
typedef struct {
    char *title;
    char *anchor;
    int rank;               /* 1..6 from the tag */
    int titles_container;   /* 1: the title of a sectioning element */
} hsec;

/* An element being walked. */
typedef struct {
    xmlNode *node;
    unsigned long heads_at_entry;   /* headings seen when it was entered */
    size_t nsec_at_entry;           /* the heading stack's size then */
    int container;
} frame;

/* Inline text being gathered, white space collapsed as it comes. */
typedef struct {
    kb_buf b;
    int space;
} textacc;

typedef struct {
    kb_doc *doc;
    kb_rc rc;                       /* sticky */
    textacc para;                   /* the current paragraph */
    kb_buf out;                     /* scratch for a block's final text */
    char *label;                    /* pending admonition title ("Note") */
    int item;                       /* next text block is a list item */
    hsec sec[KB_MAX_HEADING_DEPTH];
    size_t nsec;
    size_t synced;                  /* sec[0..synced) is what doc holds */
    frame frames[MAX_FRAMES];
    size_t nframes;
    unsigned long nheadings;
    kb_strset slugs;                /* anchors given out, for unique slugs */
    int too_deep;                   /* markup past MAX_FRAMES was flattened */
} walker;

static void walk_children(walker *w, xmlNode *node);

/* ------------------------------------------------------------------ names */

static int name_is(const xmlNode *n, const char *name)
{
    return n->name && strcmp((const char *)n->name, name) == 0;
}

static int name_in(const xmlNode *n, const char *const *names)
{
    if (!n->name)
        return 0;
    for (size_t i = 0; names[i]; i++)
        if (strcmp((const char *)n->name, names[i]) == 0)
            return 1;
    return 0;
}

/* The heading rank of h1..h6, else 0. Sphinx writes <h7>, <h8>, ... for
 * sections nested deeper than six; libxml2 keeps them as elements. */
static int heading_rank(const xmlNode *n)
{
    const char *s = (const char *)n->name;
    if (!s || s[0] != 'h' || s[1] < '1' || s[1] > '9')
        return 0;
    if (s[2] == '\0')
        return s[1] - '0';
    if (s[1] == '1' && s[2] >= '0' && s[2] <= '2' && s[3] == '\0')
        return 10 + s[2] - '0';
    return 0;
}

/* An attribute's value without copying it (NULL if absent or not plain). */
static const char *attr(const xmlNode *n, const char *name)
{
    for (const xmlAttr *a = n->properties; a; a = a->next)
        if (a->name && strcasecmp((const char *)a->name, name) == 0) {
            if (a->children && a->children->type == XML_TEXT_NODE &&
                a->children->content)
                return (const char *)a->children->content;
            return "";
        }
    return NULL;
}

/* The next token of the white-space separated list *s, its length in
 * *n; NULL when none is left. *s moves past it. */
static const char *next_token(const char **s, size_t *n)
{
    const char *p = *s;
    while (*p && isspace((unsigned char)*p))
        p++;
    const char *e = p;
    while (*e && !isspace((unsigned char)*e))
        e++;
    *s = e;
    *n = (size_t)(e - p);
    return *n ? p : NULL;
}

/* 1 if the white-space separated list s holds the token tok. */
static int has_token(const char *s, const char *tok)
{
    if (!s)
        return 0;
    size_t n = strlen(tok), tn;
    for (const char *t; (t = next_token(&s, &tn)) != NULL;)
        if (tn == n && strncasecmp(t, tok, n) == 0)
            return 1;
    return 0;
}

static int has_class(const xmlNode *n, const char *tok)
{
    return has_token(attr(n, "class"), tok);
}

/* ------------------------------------------------------------------ dropping */

static const char *const drop_tags[] = {
    "script", "style", "noscript", "template", "nav", "footer", "iframe",
    "object", "embed", "svg", "canvas", "form", "button", "input", "select",
    "textarea", "head", "title", "meta", "link", "dialog", NULL
};

static const char *const drop_roles[] = {
    "navigation", "banner", "contentinfo", "search", "menu", "menubar",
    "toolbar", NULL
};

/* class tokens of navigation chrome: Sphinx themes (rtd, classic, pydata,
 * furo, material), permalinks, code line numbers and copy buttons */
static const char *const drop_classes[] = {
    "headerlink", "wy-nav-side", "wy-nav-top", "rst-versions",
    "rst-footer-buttons", "sphinxsidebar", "sphinxsidebarwrapper",
    "bd-sidebar", "bd-sidebar-primary", "bd-sidebar-secondary", "bd-header",
    "bd-footer", "sidebar-drawer", "md-sidebar", "md-header", "md-footer",
    "toctree-wrapper", "linenos", "copybutton", "skip-link", "related",
    "anchor-link", "header-anchor", "heading-anchor", "hash-link",
    "navbar", "navigation", "footer", NULL
};

static const char *const drop_ids[] = {
    "site-nav", "search-results", "sidebar", "navbar", "header", "footer",
    "toc", "resize-nav", NULL
};

/* 1 if a token of the class list is navigation chrome. */
static int class_dropped(const char *cls)
{
    size_t n;
    for (const char *s; (s = next_token(&cls, &n)) != NULL;) {
        for (size_t i = 0; drop_classes[i]; i++)
            if (strlen(drop_classes[i]) == n && strncasecmp(s, drop_classes[i], n) == 0)
                return 1;
        for (size_t i = 0; i + 10 <= n; i++)
            if (strncasecmp(s + i, "breadcrumb", 10) == 0)
                return 1;
    }
    return 0;
}

static int contains_ci(const char *s, const char *sub)
{
    return s && strcasestr(s, sub) != NULL;
}

static int inside_content(const walker *w)
{
    for (size_t i = w->nframes; i-- > 0;)
        if (name_is(w->frames[i].node, "article") || name_is(w->frames[i].node, "main") ||
            name_is(w->frames[i].node, "section"))
            return 1;
    return 0;
}

static int dropped(const walker *w, const xmlNode *n)
{
    if (name_in(n, drop_tags))
        return 1;
    /* a page header goes; a header inside an article holds its title */
    if (name_is(n, "header") && !inside_content(w))
        return 1;
    /* hidden markup: the hidden attribute, aria-hidden icons */
    if (attr(n, "hidden"))
        return 1;
    const char *aria = attr(n, "aria-hidden");
    if (aria && strcasecmp(aria, "true") == 0)
        return 1;
    const char *role = attr(n, "role");
    if (role) {
        for (size_t i = 0; drop_roles[i]; i++)
            if (has_token(role, drop_roles[i]))
                return 1;
    }
    const char *cls = attr(n, "class");
    if (cls && class_dropped(cls))
        return 1;
    /* docutils' local table of contents */
    if (cls && has_token(cls, "contents") && has_token(cls, "topic"))
        return 1;
    const char *id = attr(n, "id");
    if (id) {
        if (contains_ci(id, "breadcrumb"))
            return 1;
        for (size_t i = 0; drop_ids[i]; i++)
            if (strcasecmp(id, drop_ids[i]) == 0)
                return 1;
    }
    if (name_is(n, "aside") && (contains_ci(cls, "sidebar") || contains_ci(cls, "toc")))
        return 1;
    return 0;
}

/* ------------------------------------------------------------------ text */

static void acc_init(textacc *t)
{
    kb_buf_init(&t->b, 0);
    t->space = 0;
}

static void acc_reset(textacc *t)
{
    kb_buf_reset(&t->b);
    t->space = 0;
}

/* Appends s with white space (and U+00A0) collapsed; the pilcrow '¶' of
 * permalinks is dropped. */
static kb_rc acc_text(textacc *t, const char *s)
{
    kb_rc rc = KB_OK;
    const unsigned char *p = (const unsigned char *)s;
    while (*p && rc == KB_OK) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' ||
            *p == '\v') {
            t->space = 1;
            p++;
            continue;
        }
        if (p[0] == 0xC2 && p[1] == 0xA0) {
            t->space = 1;
            p += 2;
            continue;
        }
        if (p[0] == 0xC2 && p[1] == 0xB6) {
            p += 2;
            continue;
        }
        if (t->space && t->b.len > 0)
            rc = kb_buf_putc(&t->b, ' ');
        t->space = 0;
        /* copy the run up to the next byte that needs a look */
        const unsigned char *q = p + 1;
        while (*q && *q != ' ' && *q != '\t' && *q != '\n' && *q != '\r' &&
               *q != '\f' && *q != '\v' && *q != 0xC2)
            q++;
        if (rc == KB_OK)
            rc = kb_buf_append(&t->b, p, (size_t)(q - p));
        p = q;
    }
    return rc;
}

/* The text of n's subtree where it is nested too deep to be walked
 * (MAX_FRAMES): kept, its structure not, gone through without recursion
 * (parent pointers), collapsed into t, or raw into b when t is NULL. */
static void flat_text(walker *w, textacc *t, kb_buf *b, xmlNode *top)
{
    w->too_deep = 1;
    xmlNode *n = top->children;
    while (n && w->rc == KB_OK) {
        if ((n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) && n->content) {
            if (t) {
                t->space = 1;
                w->rc = acc_text(t, (const char *)n->content);
            } else {
                w->rc = kb_buf_puts(b, (const char *)n->content);
            }
        }
        if (n->type == XML_ELEMENT_NODE && n->children && !dropped(w, n)) {
            n = n->children;
            continue;
        }
        while (n != top && !n->next)
            n = n->parent;
        if (n == top)
            break;
        n = n->next;
    }
}

/* Gathers the text of n's subtree, skipping what is dropped: collapsed
 * into t (block elements and <br> mark a space), or, when t is NULL, raw
 * into b (white space as it is, <br> a newline: a <pre>). */
static void gather(walker *w, textacc *t, kb_buf *b, xmlNode *n, int depth)
{
    if (depth >= MAX_FRAMES) {
        flat_text(w, t, b, n);
        return;
    }
    for (xmlNode *c = n->children; c && w->rc == KB_OK; c = c->next) {
        if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) {
            if (c->content)
                w->rc = t ? acc_text(t, (const char *)c->content)
                          : kb_buf_puts(b, (const char *)c->content);
        } else if (c->type == XML_ELEMENT_NODE && !dropped(w, c)) {
            if (!t && name_is(c, "br")) {
                w->rc = kb_buf_putc(b, '\n');
                continue;
            }
            int block = t && (name_is(c, "p") || name_is(c, "li") ||
                              name_is(c, "div") || name_is(c, "td") ||
                              name_is(c, "th"));
            if (block || (t && name_is(c, "br")))
                t->space = 1;
            gather(w, t, b, c, depth + 1);
            if (block)
                t->space = 1;
        }
    }
}

/* ------------------------------------------------------------------ headings */

static void sec_free(hsec *s)
{
    free(s->title);
    free(s->anchor);
    s->title = s->anchor = NULL;
}

static void sec_truncate(walker *w, size_t n)
{
    while (w->nsec > n)
        sec_free(&w->sec[--w->nsec]);
    if (w->synced > w->nsec)
        w->synced = w->nsec;
}

/* Brings the doc's heading stack in line with the walker's before a block
 * is added: sections without content never reach the doc. */
static void sync_headings(walker *w)
{
    if (w->rc != KB_OK)
        return;
    kb_doc *doc = w->doc;
    if (w->synced == w->nsec && doc->depth == w->nsec)
        return;
    for (size_t j = w->synced; j < w->nsec && w->rc == KB_OK; j++)
        w->rc = kb_doc_heading(doc, (int)j + 1, w->sec[j].title, w->sec[j].anchor);
    /* close deeper sections of the doc by reopening the innermost one */
    if (w->rc == KB_OK && w->nsec > 0 && doc->depth > w->nsec)
        w->rc = kb_doc_heading(doc, (int)w->nsec, w->sec[w->nsec - 1].title,
                               w->sec[w->nsec - 1].anchor);
    w->synced = w->nsec;
}

static void add_block(walker *w, kb_kind kind, const char *text, size_t len);

static void flush_label(walker *w)
{
    if (!w->label)
        return;
    char *l = w->label;
    w->label = NULL;
    add_block(w, KB_KIND_TEXT, l, strlen(l));
    free(l);
}

static void add_block(walker *w, kb_kind kind, const char *text, size_t len)
{
    if (w->rc != KB_OK)
        return;
    if (kind != KB_KIND_TEXT)
        flush_label(w);
    sync_headings(w);
    if (w->rc == KB_OK)
        w->rc = kb_doc_add(w->doc, kind, text, len);
}

/* 1 if s has a letter or digit: text of only punctuation ("-->", "|",
 * "»") is debris of markup, not content. U+0080..U+00BF (lead byte 0xC2)
 * are Latin-1 symbols; later code points count as letters. */
static int has_word(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isalnum(c) || c >= 0xC3)
            return 1;
    }
    return 0;
}

/* Ends the current paragraph: one text block. */
static void flush(walker *w)
{
    if (w->rc != KB_OK)
        return;
    textacc *t = &w->para;
    if (t->b.len == 0 || !has_word(t->b.data, t->b.len)) {
        acc_reset(t);
        return;
    }
    kb_buf *o = &w->out;
    kb_buf_reset(o);
    kb_rc rc = KB_OK;
    if (w->label) {
        size_t ll = strlen(w->label);
        rc = kb_buf_puts(o, w->label);
        if (rc == KB_OK && ll && w->label[ll - 1] != ':')
            rc = kb_buf_putc(o, ':');
        if (rc == KB_OK)
            rc = kb_buf_putc(o, ' ');
        free(w->label);
        w->label = NULL;
    }
    if (rc == KB_OK && w->item) {
        rc = kb_buf_puts(o, "- ");
        w->item = 0;
    }
    if (rc == KB_OK)
        rc = kb_buf_append(o, t->b.data, t->b.len);
    w->rc = rc;
    if (w->rc == KB_OK)
        add_block(w, KB_KIND_TEXT, o->data, o->len);
    acc_reset(t);
}

/* The innermost frame of a sectioning element, or NULL. */
static frame *innermost_container(walker *w)
{
    for (size_t i = w->nframes; i-- > 0;)
        if (w->frames[i].container)
            return &w->frames[i];
    return NULL;
}

/* An anchor inside the heading: <a name=...> or any descendant's id. */
static const char *inner_anchor(const xmlNode *n, int depth)
{
    for (const xmlNode *c = n->children; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || depth > 8)
            continue;
        if (has_class(c, "headerlink"))
            continue;
        const char *id = attr(c, "id");
        if (id && *id)
            return id;
        if (name_is(c, "a")) {
            const char *nm = attr(c, "name");
            if (nm && *nm)
                return nm;
        }
        const char *a = inner_anchor(c, depth + 1);
        if (a)
            return a;
    }
    return NULL;
}

static void do_heading(walker *w, xmlNode *n, int rank)
{
    flush(w);
    flush_label(w);
    textacc t;
    acc_init(&t);
    gather(w, &t, NULL, n, (int)w->nframes);
    if (w->rc != KB_OK || t.b.len == 0) {
        /* an empty heading (DITA writes some) opens nothing */
        kb_buf_release(&t.b);
        return;
    }
    frame *c = innermost_container(w);
    int titles = c && c->heads_at_entry == w->nheadings;

    const char *anchor = attr(n, "id");
    if (!anchor || !*anchor)
        anchor = inner_anchor(n, 0);
    if (!anchor || !*anchor) {
        /* the nearest enclosing element with an id, as long as this is
         * the first heading inside it */
        anchor = NULL;
        for (size_t i = w->nframes; i-- > 0;) {
            frame *f = &w->frames[i];
            if (f->heads_at_entry != w->nheadings || name_is(f->node, "body"))
                break;
            const char *id = attr(f->node, "id");
            if (id && *id) {
                anchor = id;
                break;
            }
        }
    }
    char *a = anchor ? kb_strdup(anchor) : kb_ingest_unique_slug(&w->slugs, t.b.data);
    if (anchor && kb_strset_add(&w->slugs, anchor) != 0)
        w->rc = KB_ERR_NOMEM;
    char *title = kb_buf_detach(&t.b);
    if (!a || !title) {
        free(a);
        free(title);
        w->rc = KB_ERR_NOMEM;
        return;
    }
    w->nheadings++;

    if (titles) {
        /* free headings of the enclosing section that rank at or below
         * this one end here */
        while (w->nsec > 0 && !w->sec[w->nsec - 1].titles_container &&
               w->sec[w->nsec - 1].rank >= rank)
            sec_truncate(w, w->nsec - 1);
        if (c->nsec_at_entry > w->nsec)
            c->nsec_at_entry = w->nsec;
    } else {
        /* a flat heading closes same-or-lower ranked ones, within the
         * innermost section element */
        size_t floor = c ? c->nsec_at_entry : 0;
        while (w->nsec > floor && w->sec[w->nsec - 1].rank >= rank)
            sec_truncate(w, w->nsec - 1);
    }
    if (w->nsec == KB_MAX_HEADING_DEPTH)
        sec_truncate(w, w->nsec - 1);
    hsec *s = &w->sec[w->nsec++];
    s->title = title;
    s->anchor = a;
    s->rank = rank;
    s->titles_container = titles;
}

/* ------------------------------------------------------------------ blocks */

static void do_pre(walker *w, xmlNode *n)
{
    flush(w);
    kb_buf code;
    kb_buf_init(&code, 0);
    gather(w, NULL, &code, n, (int)w->nframes);
    /* blank lines before the first and after the last line are layout,
     * not code; the first line keeps its indentation */
    size_t start = 0, end = code.len;
    for (size_t i = 0; i < end; i++) {
        if (code.data[i] == '\n')
            start = i + 1;
        else if (!isspace((unsigned char)code.data[i]))
            break;
    }
    while (end > start && isspace((unsigned char)code.data[end - 1]))
        end--;
    if (w->rc == KB_OK && end > start)
        add_block(w, KB_KIND_CODE, code.data + start, end - start);
    kb_buf_release(&code);
}

/* 1 if the subtree of a table holds headings: a layout table, walked as
 * ordinary content. */
static int has_heading(const xmlNode *n, int depth)
{
    for (const xmlNode *c = n->children; c; c = c->next)
        if (c->type == XML_ELEMENT_NODE &&
            (heading_rank(c) || (depth < 64 && has_heading(c, depth + 1))))
            return 1;
    return 0;
}

static void table_rows(walker *w, xmlNode *n, kb_buf *o, kb_buf *row,
                       textacc *cell, int depth)
{
    for (xmlNode *c = n->children; c && w->rc == KB_OK; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || dropped(w, c))
            continue;
        if (name_is(c, "tr")) {
            kb_buf_reset(row);
            int any = 0, first = 1;
            for (xmlNode *td = c->children; td && w->rc == KB_OK; td = td->next) {
                if (td->type != XML_ELEMENT_NODE ||
                    !(name_is(td, "td") || name_is(td, "th")) || dropped(w, td))
                    continue;
                acc_reset(cell);
                gather(w, cell, NULL, td, depth + 1);
                if (w->rc == KB_OK && !first)
                    w->rc = kb_buf_puts(row, " | ");
                first = 0;
                if (w->rc == KB_OK && cell->b.len) {
                    any = 1;
                    w->rc = kb_buf_append(row, cell->b.data, cell->b.len);
                }
            }
            if (w->rc == KB_OK && any) {
                if (o->len)
                    w->rc = kb_buf_putc(o, '\n');
                if (w->rc == KB_OK)
                    w->rc = kb_buf_append(o, row->data, row->len);
            }
        } else if (name_is(c, "thead") || name_is(c, "tbody") || name_is(c, "tfoot")) {
            if (depth < MAX_FRAMES)
                table_rows(w, c, o, row, cell, depth + 1);
        }
    }
}

static void do_table(walker *w, xmlNode *n)
{
    flush(w);
    kb_buf o;
    kb_buf_init(&o, 0);
    textacc cell;
    acc_init(&cell);
    for (xmlNode *c = n->children; c && w->rc == KB_OK; c = c->next)
        if (c->type == XML_ELEMENT_NODE && name_is(c, "caption")) {
            gather(w, &cell, NULL, c, (int)w->nframes);
            if (w->rc == KB_OK && cell.b.len)
                w->rc = kb_buf_append(&o, cell.b.data, cell.b.len);
            acc_reset(&cell);
        }
    kb_buf row;
    kb_buf_init(&row, 0);
    table_rows(w, n, &o, &row, &cell, (int)w->nframes);
    kb_buf_release(&row);
    if (w->rc == KB_OK && o.len)
        add_block(w, KB_KIND_TABLE, o.data, o.len);
    kb_buf_release(&cell.b);
    kb_buf_release(&o);
}

static const char *const block_tags[] = {
    "address", "article", "aside", "blockquote", "body", "center", "dd",
    "details", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure",
    "header", "hgroup", "hr", "li", "main", "menu", "ol", "p", "section",
    "summary", "tbody", "td", "tfoot", "th", "thead", "tr", "ul", "caption",
    "html", NULL
};

/* Sectioning elements: their first heading titles them. */
static int is_container(const xmlNode *n)
{
    if (name_is(n, "section") || name_is(n, "article"))
        return 1;
    if (!name_is(n, "div"))
        return 0;
    const char *cls = attr(n, "class");
    if (!cls)
        return 0;
    static const char *const tokens[] = {
        "section", "topic", "sect1", "sect2", "sect3", "sect4", "sect5",
        "sect6", "refsect1", "refsect2", "refsect3", "chapter", "appendix",
        NULL
    };
    for (size_t i = 0; tokens[i]; i++)
        if (has_token(cls, tokens[i]))
            return 1;
    return 0;
}

static void walk_element(walker *w, xmlNode *n)
{
    if (dropped(w, n))
        return;
    int rank = heading_rank(n);
    if (rank) {
        do_heading(w, n, rank);
        return;
    }
    if (name_is(n, "pre") || name_is(n, "xmp") || name_is(n, "listing")) {
        do_pre(w, n);
        return;
    }
    if (name_is(n, "table") && !has_heading(n, 0)) {
        do_table(w, n);
        return;
    }
    if (name_is(n, "br")) {
        w->para.space = 1;
        return;
    }
    if (name_is(n, "img"))
        return;
    if (name_is(n, "p") && (has_class(n, "admonition-title") || has_class(n, "topic-title") ||
                            has_class(n, "rubric"))) {
        /* "Note", Sphinx rubrics ("Description", "PTX ISA Notes"): prefixed
         * to the next paragraph, or a block of their own before code */
        flush(w);
        flush_label(w);
        textacc t;
        acc_init(&t);
        gather(w, &t, NULL, n, (int)w->nframes);
        if (t.b.len)
            w->label = kb_buf_detach(&t.b);
        kb_buf_release(&t.b);
        return;
    }
    if (w->nframes >= MAX_FRAMES) {
        flat_text(w, &w->para, NULL, n);
        return;
    }
    int block = name_in(n, block_tags) || name_is(n, "table");
    if (block)
        flush(w);
    if (name_is(n, "li") || name_is(n, "dd"))
        w->item = name_is(n, "li");
    frame *f = &w->frames[w->nframes++];
    f->node = n;
    f->heads_at_entry = w->nheadings;
    f->nsec_at_entry = w->nsec;
    f->container = is_container(n);
    walk_children(w, n);
    f = &w->frames[--w->nframes];
    if (block)
        flush(w);
    if (name_is(n, "li"))
        w->item = 0;
    if (f->container) {
        flush_label(w);
        sec_truncate(w, f->nsec_at_entry);
    }
}

static void walk_children(walker *w, xmlNode *node)
{
    for (xmlNode *c = node->children; c && w->rc == KB_OK; c = c->next) {
        if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) {
            if (c->content)
                w->rc = acc_text(&w->para, (const char *)c->content);
        } else if (c->type == XML_ELEMENT_NODE) {
            walk_element(w, c);
        }
    }
}

/* ------------------------------------------------------------------ entry */

static xmlNode *find_element(xmlNode *n, const char *name, int depth)
{
    for (xmlNode *c = n; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE)
            continue;
        if (name_is(c, name))
            return c;
        if (depth < 3) {
            xmlNode *r = find_element(c->children, name, depth + 1);
            if (r)
                return r;
        }
    }
    return NULL;
}

/* Counts the h1 elements outside dropped parts, up to 2; sets *first. */
static void count_h1(walker *w, xmlNode *n, int depth, int *count, xmlNode **first)
{
    for (xmlNode *c = n->children; c && *count < 2; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || dropped(w, c))
            continue;
        if (name_is(c, "h1")) {
            if (!*count)
                *first = c;
            ++*count;
        } else if (depth < MAX_FRAMES) {
            count_h1(w, c, depth + 1, count, first);
        }
    }
}

kb_rc kb_parse_html(const char *data, size_t len, const char *path,
                    kb_doc *doc, kb_err *err)
{
    if (!path)
        path = "";
    kb_rc crc = kb_ingest_check_text(data, len, path, "HTML", err);
    if (crc != KB_OK)
        return crc;
    if (len > INT_MAX)
        return kb_err_set(err, KB_ERR_PARSE, "'%s' is too large to parse as HTML",
                          path);
    if (kb_ingest_blank(data, len))
        return KB_OK;
    xmlInitParser();
    /* XML_PARSE_HUGE: without it libxml2 stops at 256 levels of nesting,
     * an error that NOERROR hides, and everything after the deep part
     * was dropped; the document is at most 32 MiB either way */
    htmlDocPtr hd = htmlReadMemory(data, (int)len, NULL, NULL,
                                   HTML_PARSE_RECOVER | HTML_PARSE_NOERROR |
                                   HTML_PARSE_NOWARNING | HTML_PARSE_NONET |
                                   HTML_PARSE_COMPACT | XML_PARSE_HUGE);
    if (!hd)
        return kb_err_set(err, KB_ERR_PARSE, "cannot parse '%s' as HTML", path);
    xmlNode *root = xmlDocGetRootElement(hd);
    if (!root) {
        xmlFreeDoc(hd);
        return KB_OK;
    }

    walker *w = calloc(1, sizeof *w);
    if (!w) {
        xmlFreeDoc(hd);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    w->doc = doc;
    kb_strset_init(&w->slugs);
    acc_init(&w->para);
    kb_buf_init(&w->out, 0);

    xmlNode *body = find_element(root, "body", 0);
    xmlNode *top = body ? body : root;
    /* the title: the page's one h1, else <title>, else the first top
     * heading (kb_doc's default) */
    int nh1 = 0;
    xmlNode *h1 = NULL;
    count_h1(w, top, 0, &nh1, &h1);
    xmlNode *title_el = find_element(root, "title", 0);
    textacc t;
    acc_init(&t);
    if (nh1 == 1)
        gather(w, &t, NULL, h1, 0);
    if (t.b.len == 0 && title_el)
        gather(w, &t, NULL, title_el, 0);
    /* a single-page manual of several chapters (PTX ISA) was saved from
     * its first chapter: "1. Introduction — PTX ISA 9.1 documentation"
     * names the manual after the dash, not the chapter before it */
    const char *dash = nh1 > 1 && t.b.len ? strstr(t.b.data, " \xe2\x80\x94 ") : NULL;
    if (dash && dash[5]) {
        size_t from = (size_t)(dash + 5 - t.b.data);
        size_t n = t.b.len - from;
        if (n > 14 && strcmp(t.b.data + t.b.len - 14, " documentation") == 0)
            n -= 14;
        memmove(t.b.data, t.b.data + from, n);
        t.b.len = n;
        t.b.data[n] = '\0';
    }
    if (t.b.len && !doc->title)
        doc->title = kb_buf_detach(&t.b);
    kb_buf_release(&t.b);

    if (body)
        walk_children(w, body);
    else
        walk_element(w, root);
    flush(w);
    flush_label(w);

    kb_rc rc = w->rc;
    if (rc == KB_OK && w->too_deep)
        kb_log_warn("'%s': markup nested deeper than %d levels: its text is kept"
                    " without its structure", path, MAX_FRAMES);
    sec_truncate(w, 0);
    kb_strset_release(&w->slugs);
    free(w->label);
    kb_buf_release(&w->para.b);
    kb_buf_release(&w->out);
    free(w);
    xmlFreeDoc(hd);
    if (rc != KB_OK)
        return kb_err_set(err, rc, "cannot parse '%s': %s", path, kb_rc_name(rc));
    return KB_OK;
}
