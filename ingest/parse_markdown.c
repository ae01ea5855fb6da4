/* parse_markdown.c - CommonMark + tables (md4c) into a kb_doc, with the
 * survey's literature list read as paper records (parse_papers.c). */
#include "kb/kb.h"
#include "ingest/ingest_int.h"

#include <ctype.h>
#include <libxml/HTMLparser.h>
#include <libxml/tree.h>
#include <md4c.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    kb_doc *doc;
    kb_rc rc;                /* sticky: the first failure */
    int sphinx;              /* headings map to a Sphinx page's section ids */
    int nheadings;
    kb_strset seen;          /* anchors given so far */

    kb_buf cap;              /* inline text of the current leaf or heading */
    kb_text_link *links;
    size_t nlinks, caplinks;
    int link_open;           /* an MD_SPAN_A is open */
    int img_depth;           /* inside an image: its alt text is dropped */
    int code_span_end;       /* just left inline code, emphasis or a link:
                                a space before a word */
    char *html_anchor;       /* <a id=...> inside a heading */

    int in_heading, hlevel;
    int in_code;
    kb_buf code;
    int in_html;
    kb_buf html;
    int in_table, in_cell, ncells;
    kb_buf table, row;

    kb_buf run;              /* text of the open lists and quotes */
    int containers;          /* open lists and quotes */
    int list_depth;
    int li_fresh;            /* the next leaf starts a list item */
    const char *input, *input_end;   /* what md_parse was given */
} md_state;

static void reset_links(md_state *st)
{
    for (size_t i = 0; i < st->nlinks; i++)
        free(st->links[i].href);
    st->nlinks = 0;
    st->link_open = 0;
}

static void add_block(md_state *st, kb_kind kind, const char *s, size_t n)
{
    if (st->rc == KB_OK) {
        kb_rc rc = kb_doc_add(st->doc, kind, s, n);
        if (rc != KB_OK)
            kb_parse_fail(&st->rc, rc);
    }
}

static void flush_run(md_state *st)
{
    size_t n = st->run.len;
    const char *s = kb_ingest_trim(st->run.data ? st->run.data : "", &n);
    if (n)
        add_block(st, KB_KIND_TEXT, s, n);
    kb_buf_reset(&st->run);
}

/* Reads the captured leaf as literature entries (parse_papers.c). Returns
 * 1 if the leaf was entries, 0 if it is ordinary text (also when no line
 * had a title: "- [12/2023]" alone stays text, not lost). */
static int try_papers(md_state *st)
{
    kb_leaf leaf = { st->cap.data, st->cap.len, st->links, st->nlinks };
    if (!kb_parse_papers_start(&leaf))
        return 0;
    flush_run(st);                  /* keep the document's order */
    return kb_parse_papers_add(st->doc, &leaf, &st->rc) > 0;
}

/* Ends the current leaf (a paragraph or a list item's own text). */
static void end_leaf(md_state *st)
{
    size_t n = st->cap.len;
    const char *s = kb_ingest_trim(st->cap.data ? st->cap.data : "", &n);
    if (n && !try_papers(st)) {
        if (st->li_fresh) {
            for (int i = 1; i < st->list_depth; i++)
                kb_parse_put(&st->rc, &st->run, "  ", 2);
            kb_parse_put(&st->rc, &st->run, "- ", 2);
        }
        kb_parse_put(&st->rc, &st->run, s, n);
        kb_parse_put(&st->rc, &st->run, "\n", 1);
        if (st->containers == 0)
            flush_run(st);
    }
    if (n)
        st->li_fresh = 0;
    kb_buf_reset(&st->cap);
    reset_links(st);
    st->code_span_end = 0;
}

/* ------------------------------------------------------------- headings */

/* Cuts "{#id}" / "{: #id}" / "{#id .class}" off the end of a title. */
static char *attr_anchor(kb_buf *title)
{
    size_t n = title->len;
    while (n && isspace((unsigned char)title->data[n - 1]))
        n--;
    if (!n || title->data[n - 1] != '}')
        return NULL;
    char *open = memrchr(title->data, '{', n);
    if (!open)
        return NULL;
    const char *hash = memchr(open, '#', (size_t)(title->data + n - open));
    if (!hash)
        return NULL;
    const char *e = hash + 1;
    while (e < title->data + n - 1 && !isspace((unsigned char)*e) && *e != '}')
        e++;
    char *id = kb_strndup(hash + 1, (size_t)(e - hash - 1));
    title->len = (size_t)(open - title->data);
    title->data[title->len] = '\0';
    return id;
}

/* A permalink inside the heading ("[](#id "Permalink")", "[¶](#id)"):
 * its id, with its text cut from the title. */
static char *permalink_anchor(md_state *st)
{
    for (size_t i = st->nlinks; i-- > 0;) {
        kb_text_link *l = &st->links[i];
        if (!l->href || l->href[0] != '#' || !l->href[1])
            continue;
        size_t n = l->end - l->start;
        const char *s = kb_ingest_trim(st->cap.data + l->start, &n);
        int noise = n == 0 || (n == 1 && (*s == '#' || *s == '\xc2')) ||
                    (n == 2 && memcmp(s, "\xc2\xb6", 2) == 0) ||
                    (n == 4 && memcmp(s, "\xf0\x9f\x94\x97", 4) == 0);
        if (!noise)
            continue;
        char *id = kb_strdup(l->href + 1);
        memmove(st->cap.data + l->start, st->cap.data + l->end,
                st->cap.len - l->end + 1);
        st->cap.len -= l->end - l->start;
        return id;
    }
    return NULL;
}

/* "12.1.5. Title" -> "Title" (a section number as NVIDIA's pages print). */
static const char *skip_section_number(const char *t)
{
    const char *p = t;
    if (!isdigit((unsigned char)*p))
        return t;
    while (isdigit((unsigned char)*p) || *p == '.')
        p++;
    if (p[-1] != '.' || *p != ' ')
        return t;
    while (*p == ' ')
        p++;
    return *p ? p : t;
}

static void end_heading(md_state *st)
{
    char *anchor = attr_anchor(&st->cap);
    if (!anchor)
        anchor = permalink_anchor(st);
    if (!anchor && st->html_anchor) {
        anchor = st->html_anchor;
        st->html_anchor = NULL;
    }
    size_t n = st->cap.len;
    const char *s = kb_ingest_trim(st->cap.data ? st->cap.data : "", &n);
    char *title = kb_strndup(s, n);
    if (!title) {
        kb_parse_fail(&st->rc, KB_ERR_NOMEM);
        goto out;
    }
    if (anchor) {
        if (kb_strset_add(&st->seen, anchor) != 0)
            kb_parse_fail(&st->rc, KB_ERR_NOMEM);
    } else if (st->sphinx) {
        /* The converter's page-title heading has no section of its own. */
        anchor = st->nheadings == 0 ? kb_strdup("")
                                    : kb_ingest_docutils_id(skip_section_number(title));
        /* A repeated title got a generated id on the page ("id3"): use
         * the enclosing section's anchor instead of a wrong one. */
        if (anchor && *anchor) {
            if (kb_strset_has(&st->seen, anchor))
                anchor[0] = '\0';
            else if (kb_strset_add(&st->seen, anchor) != 0)
                kb_parse_fail(&st->rc, KB_ERR_NOMEM);
        }
    } else {
        anchor = kb_ingest_unique_slug(&st->seen, title);
    }
    if (!anchor) {
        kb_parse_fail(&st->rc, KB_ERR_NOMEM);
        goto out;
    }
    if (st->rc == KB_OK && *title) {
        kb_rc rc = kb_doc_heading(st->doc, st->hlevel, title, anchor);
        if (rc != KB_OK)
            kb_parse_fail(&st->rc, rc);
    }
    st->nheadings++;
out:
    free(title);
    free(anchor);
    free(st->html_anchor);
    st->html_anchor = NULL;
    kb_buf_reset(&st->cap);
    reset_links(st);
}

/* ------------------------------------------------------------- raw HTML */

static int is_block_tag(const char *name)
{
    static const char *const tags[] = { "p", "div", "br", "li", "tr", "h1",
        "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "pre", "center",
        "blockquote", "details", "summary", "section", NULL };
    for (size_t i = 0; tags[i]; i++)
        if (strcmp(name, tags[i]) == 0)
            return 1;
    return 0;
}

/* All text under node, white space collapsed, into out. */
static void html_flat_text(md_state *st, xmlNode *node, kb_buf *out)
{
    for (xmlNode *n = node; n; n = n->next) {
        if (n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) {
            for (const char *c = (const char *)n->content; c && *c; c++) {
                if (isspace((unsigned char)*c)) {
                    if (out->len && out->data[out->len - 1] != ' ')
                        kb_parse_put(&st->rc, out, " ", 1);
                } else {
                    kb_parse_put(&st->rc, out, c, 1);
                }
            }
        } else if (n->type == XML_ELEMENT_NODE &&
                   strcmp((const char *)n->name, "script") != 0 &&
                   strcmp((const char *)n->name, "style") != 0) {
            if (strcmp((const char *)n->name, "br") == 0 ||
                strcmp((const char *)n->name, "p") == 0)
                if (out->len && out->data[out->len - 1] != ' ')
                    kb_parse_put(&st->rc, out, " ", 1);
            html_flat_text(st, n->children, out);
        }
    }
}

/* The <tr> rows under node (not inside nested tables) into table. */
static void html_rows(md_state *st, xmlNode *node, kb_buf *table)
{
    for (xmlNode *n = node; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        const char *name = (const char *)n->name;
        if (strcmp(name, "caption") == 0 || strcmp(name, "tr") == 0) {
            kb_buf row;
            kb_buf_init(&row, 0);
            if (name[0] == 'c') {
                html_flat_text(st, n->children, &row);
            } else {
                int cells = 0;
                for (xmlNode *c = n->children; c; c = c->next) {
                    if (c->type != XML_ELEMENT_NODE ||
                        (strcmp((const char *)c->name, "td") != 0 &&
                         strcmp((const char *)c->name, "th") != 0))
                        continue;
                    kb_buf cell;
                    kb_buf_init(&cell, 0);
                    html_flat_text(st, c->children, &cell);
                    size_t cn = cell.len;
                    const char *cs = kb_ingest_trim(cell.data ? cell.data : "", &cn);
                    if (cells++)
                        kb_parse_put(&st->rc, &row, " | ", 3);
                    kb_parse_put(&st->rc, &row, cs, cn);
                    kb_buf_release(&cell);
                }
            }
            size_t rn = row.len;
            const char *rs = kb_ingest_trim(row.data ? row.data : "", &rn);
            int empty = 1;
            for (size_t i = 0; i < rn && empty; i++)
                if (rs[i] != '|' && rs[i] != ' ')
                    empty = 0;
            if (!empty) {
                if (table->len)
                    kb_parse_put(&st->rc, table, "\n", 1);
                kb_parse_put(&st->rc, table, rs, rn);
            }
            kb_buf_release(&row);
        } else if (strcmp(name, "table") != 0) {
            html_rows(st, n->children, table);  /* thead, tbody, ... */
        }
    }
}

static void emit_html_text(md_state *st, kb_buf *text)
{
    size_t n = text->len;
    const char *s = kb_ingest_trim(text->data ? text->data : "", &n);
    if (n) {
        kb_parse_put(&st->rc, &st->run, s, n);
        kb_parse_put(&st->rc, &st->run, "\n", 1);
        if (st->containers == 0)
            flush_run(st);
    }
    kb_buf_reset(text);
}

/* The text of raw HTML (block elements on their own lines); a <table>
 * becomes a table block, one row per line. */
static void html_text(md_state *st, xmlNode *node, kb_buf *out, int *h1)
{
    for (xmlNode *n = node; n; n = n->next) {
        if (n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) {
            if (n->content)
                kb_parse_put(&st->rc, out, (const char *)n->content,
                    strlen((const char *)n->content));
        } else if (n->type == XML_ELEMENT_NODE) {
            const char *name = (const char *)n->name;
            if (strcmp(name, "script") == 0 || strcmp(name, "style") == 0 ||
                strcmp(name, "img") == 0)
                continue;
            if (strcmp(name, "table") == 0) {
                emit_html_text(st, out);
                flush_run(st);
                kb_buf table;
                kb_buf_init(&table, 0);
                html_rows(st, n->children, &table);
                add_block(st, KB_KIND_TABLE, table.data, table.len);
                kb_buf_release(&table);
                continue;
            }
            if (strcmp(name, "h1") == 0)
                *h1 = 1;
            int block = is_block_tag(name);
            if (block)
                kb_parse_put(&st->rc, out, "\n", 1);
            html_text(st, n->children, out, h1);
            if (block)
                kb_parse_put(&st->rc, out, "\n", 1);
        }
    }
}

/* A raw HTML block: its text; an <h1> block opens a section (READMEs put
 * their title in one). */
static void end_html(md_state *st)
{
    if (!st->html.len)
        return;
    htmlDocPtr hd = htmlReadMemory(st->html.data, (int)st->html.len, NULL, "UTF-8",
                                   HTML_PARSE_RECOVER | HTML_PARSE_NOERROR |
                                   HTML_PARSE_NOWARNING | HTML_PARSE_NONET |
                                   HTML_PARSE_NOIMPLIED);
    kb_buf text;
    kb_buf_init(&text, 0);
    int h1 = 0;
    if (hd)
        html_text(st, hd->children, &text, &h1);
    size_t n = text.len;
    const char *s = kb_ingest_trim(text.data ? text.data : "", &n);
    if (n && h1 && !memchr(s, '\n', n)) {
        kb_buf_reset(&st->cap);
        kb_parse_put(&st->rc, &st->cap, s, n);
        st->hlevel = 1;
        end_heading(st);
    } else {
        emit_html_text(st, &text);
    }
    kb_buf_release(&text);
    if (hd)
        xmlFreeDoc(hd);
    kb_buf_reset(&st->html);
}

/* ------------------------------------------------------------- md4c */

static int on_enter_block(MD_BLOCKTYPE type, void *detail, void *ud)
{
    md_state *st = ud;
    switch (type) {
    case MD_BLOCK_DOC:
        break;
    case MD_BLOCK_QUOTE:
        end_leaf(st);
        st->containers++;
        break;
    case MD_BLOCK_UL:
    case MD_BLOCK_OL:
        end_leaf(st);
        st->containers++;
        st->list_depth++;
        break;
    case MD_BLOCK_LI:
        end_leaf(st);
        st->li_fresh = 1;
        break;
    case MD_BLOCK_HR:
        end_leaf(st);
        break;
    case MD_BLOCK_H:
        end_leaf(st);
        flush_run(st);
        st->in_heading = 1;
        st->hlevel = (int)((MD_BLOCK_H_DETAIL *)detail)->level;
        break;
    case MD_BLOCK_CODE:
        end_leaf(st);
        flush_run(st);
        st->in_code = 1;
        kb_buf_reset(&st->code);
        break;
    case MD_BLOCK_HTML:
        end_leaf(st);
        st->in_html = 1;
        kb_buf_reset(&st->html);
        break;
    case MD_BLOCK_P:
        end_leaf(st);
        break;
    case MD_BLOCK_TABLE:
        end_leaf(st);
        flush_run(st);
        st->in_table = 1;
        kb_buf_reset(&st->table);
        break;
    case MD_BLOCK_THEAD:
    case MD_BLOCK_TBODY:
        break;
    case MD_BLOCK_TR:
        kb_buf_reset(&st->row);
        st->ncells = 0;
        break;
    case MD_BLOCK_TH:
    case MD_BLOCK_TD:
        st->in_cell = 1;
        kb_buf_reset(&st->cap);
        reset_links(st);
        break;
    }
    return st->rc != KB_OK;
}

static int on_leave_block(MD_BLOCKTYPE type, void *detail, void *ud)
{
    md_state *st = ud;
    switch (type) {
    case MD_BLOCK_DOC:
        end_leaf(st);
        flush_run(st);
        break;
    case MD_BLOCK_QUOTE:
    case MD_BLOCK_UL:
    case MD_BLOCK_OL:
        end_leaf(st);
        if (type != MD_BLOCK_QUOTE)
            st->list_depth--;
        if (--st->containers == 0)
            flush_run(st);
        break;
    case MD_BLOCK_LI:
    case MD_BLOCK_P:
        end_leaf(st);
        break;
    case MD_BLOCK_HR:
        break;
    case MD_BLOCK_H:
        st->in_heading = 0;
        end_heading(st);
        break;
    case MD_BLOCK_CODE: {
        st->in_code = 0;
        /* the code as written, without the blank lines before the fence */
        size_t n = st->code.len;
        while (n && isspace((unsigned char)st->code.data[n - 1]))
            n--;
        if (n)
            add_block(st, KB_KIND_CODE, st->code.data, n);
        break;
    }
    case MD_BLOCK_HTML:
        st->in_html = 0;
        end_html(st);
        break;
    case MD_BLOCK_TABLE:
        st->in_table = 0;
        /* rows end with '\n'; the block does not */
        if (st->table.len > 1)
            add_block(st, KB_KIND_TABLE, st->table.data, st->table.len - 1);
        break;
    case MD_BLOCK_THEAD:
    case MD_BLOCK_TBODY:
        break;
    case MD_BLOCK_TR: {
        size_t n = st->row.len;
        const char *s = kb_ingest_trim(st->row.data ? st->row.data : "", &n);
        /* a row of empty cells says nothing */
        int empty = 1;
        for (size_t i = 0; i < n && empty; i++)
            if (s[i] != '|' && s[i] != ' ')
                empty = 0;
        if (!empty) {
            kb_parse_put(&st->rc, &st->table, st->row.data, st->row.len);
            kb_parse_put(&st->rc, &st->table, "\n", 1);
        }
        break;
    }
    case MD_BLOCK_TH:
    case MD_BLOCK_TD: {
        st->in_cell = 0;
        /* one line per row: breaks inside a cell become spaces */
        for (size_t i = 0; i < st->cap.len; i++)
            if (st->cap.data[i] == '\n')
                st->cap.data[i] = ' ';
        size_t n = st->cap.len;
        const char *s = kb_ingest_trim(st->cap.data ? st->cap.data : "", &n);
        if (st->ncells++)
            kb_parse_put(&st->rc, &st->row, " | ", 3);
        kb_parse_put(&st->rc, &st->row, s, n);
        kb_buf_reset(&st->cap);
        reset_links(st);
        break;
    }
    }
    (void)detail;
    return st->rc != KB_OK;
}

/* md4c can report a run one byte past the input (an unterminated link at
 * the end of a table cell): a run that starts inside the input is cut at
 * its end, so (data, len) is all that is ever read. */
static MD_SIZE clamp(const md_state *st, const MD_CHAR *text, MD_SIZE size)
{
    if (text >= st->input && text <= st->input_end &&
        size > (MD_SIZE)(st->input_end - text))
        return (MD_SIZE)(st->input_end - text);
    return size;
}

static char *attr_dup(const md_state *st, const MD_ATTRIBUTE *a)
{
    return a->text ? kb_strndup(a->text, clamp(st, a->text, a->size)) : kb_strdup("");
}

static int on_enter_span(MD_SPANTYPE type, void *detail, void *ud)
{
    md_state *st = ud;
    if (type == MD_SPAN_IMG) {
        st->img_depth++;
    } else if (type == MD_SPAN_A && !st->img_depth && !st->link_open) {
        if (KB_GROW(st->links, st->nlinks + 1, st->caplinks) != KB_OK) {
            kb_parse_fail(&st->rc, KB_ERR_NOMEM);
            return 1;
        }
        kb_text_link *l = &st->links[st->nlinks++];
        l->start = l->end = st->cap.len;
        l->href = attr_dup(st, &((MD_SPAN_A_DETAIL *)detail)->href);
        st->link_open = 1;
    }
    /* converted pages glue inline code, emphasis and links to the words
     * around them ("use`x`and", "called*architecture-specific*features",
     * "see[Feature Set](...)"), which CommonMark reads as intraword spans */
    if ((type == MD_SPAN_CODE || type == MD_SPAN_EM || type == MD_SPAN_STRONG ||
         (type == MD_SPAN_A && st->link_open)) && !st->in_code && !st->img_depth &&
        st->cap.len && isalnum((unsigned char)st->cap.data[st->cap.len - 1]))
        kb_parse_put(&st->rc, &st->cap, " ", 1);
    if (type == MD_SPAN_A && st->link_open && st->nlinks)
        st->links[st->nlinks - 1].start = st->cap.len;
    return st->rc != KB_OK;
}

static int on_leave_span(MD_SPANTYPE type, void *detail, void *ud)
{
    md_state *st = ud;
    if (type == MD_SPAN_IMG) {
        st->img_depth--;
    } else if (type == MD_SPAN_A && !st->img_depth && st->link_open) {
        kb_text_link *l = &st->links[st->nlinks - 1];
        l->end = st->cap.len;
        st->link_open = 0;
        /* a URL shown as its own text, glued to the word before it
         * ("website[https://...](https://...)"): keep them apart */
        if (l->start > 0 && l->end - l->start > 4 &&
            isalnum((unsigned char)st->cap.data[l->start - 1]) &&
            strncmp(st->cap.data + l->start, "http", 4) == 0 &&
            kb_buf_putc(&st->cap, ' ') == KB_OK) {
            memmove(st->cap.data + l->start + 1, st->cap.data + l->start,
                    l->end - l->start);
            st->cap.data[l->start] = ' ';
            l->start++;
            l->end++;
        }
    }
    if (type == MD_SPAN_CODE || type == MD_SPAN_EM || type == MD_SPAN_STRONG ||
        (type == MD_SPAN_A && !st->img_depth))
        st->code_span_end = 1;
    (void)detail;
    return st->rc != KB_OK;
}

/* "&amp;", "&#955;", "&#x3bb;" -> UTF-8 into out (unknown: as is). */
static void put_entity(md_state *st, kb_buf *out, const char *s, size_t n)
{
    unsigned long cp = 0;
    if (n >= 4 && s[1] == '#') {
        char tmp[16];
        size_t m = n - 3 < sizeof tmp - 1 ? n - 3 : sizeof tmp - 1;
        memcpy(tmp, s + 2, m);
        tmp[m] = '\0';
        cp = (tmp[0] == 'x' || tmp[0] == 'X') ? strtoul(tmp + 1, NULL, 16)
                                              : strtoul(tmp, NULL, 10);
    } else if (n >= 3) {
        char name[40];
        size_t m = n - 2 < sizeof name - 1 ? n - 2 : sizeof name - 1;
        memcpy(name, s + 1, m);
        name[m] = '\0';
        const htmlEntityDesc *e = htmlEntityLookup((const xmlChar *)name);
        if (e)
            cp = e->value;
    }
    if (cp == 0 || cp > 0x10FFFF) {
        kb_parse_put(&st->rc, out, s, n);
        return;
    }
    char u[4];
    size_t k;
    if (cp < 0x80) { u[0] = (char)cp; k = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); k = 2; }
    else if (cp < 0x10000) { u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F)); k = 3; }
    else { u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)); u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); k = 4; }
    kb_parse_put(&st->rc, out, u, k);
}

/* Words of prose, as written, or with a converted Sphinx page's glued
 * links apart (kb_parse_put_unglued). */
static void put_words(md_state *st, kb_buf *out, const char *s, size_t n)
{
    if (st->sphinx)   /* converted from HTML: the links' blanks are lost */
        kb_parse_put_unglued(&st->rc, out, s, n);
    else
        kb_parse_put(&st->rc, out, s, n);
}

/* Prose text. A "**" left over from emphasis that did not parse
 * ("**Note:**Use ...", common in converted pages) is dropped, with a
 * space where it glued a word to punctuation. */
static void put_prose(md_state *st, kb_buf *out, const char *s, size_t n)
{
    size_t i = 0, from = 0;
    while (i + 1 < n) {
        if (s[i] == '*' && s[i + 1] == '*') {
            put_words(st, out, s + from, i - from);
            char prev = out->len ? out->data[out->len - 1] : ' ';
            char next = i + 2 < n ? s[i + 2] : ' ';
            if (ispunct((unsigned char)prev) && isalnum((unsigned char)next))
                kb_parse_put(&st->rc, out, " ", 1);
            i += 2;
            from = i;
            continue;
        }
        i++;
    }
    put_words(st, out, s + from, n - from);
}

/* <a id="x"> / <a name="x"> in a heading: the heading's explicit anchor. */
static void inline_html_anchor(md_state *st, const char *s, size_t n)
{
    if (st->html_anchor || n < 6 || strncasecmp(s, "<a ", 3) != 0)
        return;
    for (size_t i = 3; i + 4 < n; i++) {
        size_t skip = 0;
        if (strncasecmp(s + i, "id=", 3) == 0 && isspace((unsigned char)s[i - 1]))
            skip = 3;
        else if (i + 5 < n && strncasecmp(s + i, "name=", 5) == 0 &&
                 isspace((unsigned char)s[i - 1]))
            skip = 5;
        if (!skip)
            continue;
        const char *v = s + i + skip;
        const char *end = s + n;
        char q = (*v == '"' || *v == '\'') ? *v++ : 0;
        const char *e = v;
        while (e < end && (q ? *e != q : (!isspace((unsigned char)*e) && *e != '>')))
            e++;
        if (e > v)
            st->html_anchor = kb_strndup(v, (size_t)(e - v));
        return;
    }
}

static int on_text(MD_TEXTTYPE type, const MD_CHAR *text, MD_SIZE size, void *ud)
{
    md_state *st = ud;
    size = clamp(st, text, size);
    if (st->in_code) {
        kb_parse_put(&st->rc, &st->code, text, size);
        return st->rc != KB_OK;
    }
    if (st->in_html) {
        kb_parse_put(&st->rc, &st->html, text, size);
        return st->rc != KB_OK;
    }
    if (st->img_depth)
        return 0;
    kb_buf *out = &st->cap;
    switch (type) {
    case MD_TEXT_NULLCHAR:
        break;
    case MD_TEXT_BR:
    case MD_TEXT_SOFTBR:
        kb_parse_put(&st->rc, out, "\n", 1);
        break;
    case MD_TEXT_ENTITY:
        put_entity(st, out, text, size);
        break;
    case MD_TEXT_HTML:
        if (st->in_heading)
            inline_html_anchor(st, text, size);
        else if (size >= 3 && strncasecmp(text, "<br", 3) == 0)
            kb_parse_put(&st->rc, out, "\n", 1);
        break;
    case MD_TEXT_CODE:
        kb_parse_put(&st->rc, out, text, size);
        break;
    default:
        if (st->code_span_end && size && isalnum((unsigned char)text[0]))
            kb_parse_put(&st->rc, out, " ", 1);
        put_prose(st, out, text, size);
        break;
    }
    if (type != MD_TEXT_CODE)
        st->code_span_end = 0;
    return st->rc != KB_OK;
}

/* Markdown converted from a Sphinx HTML page names it near the top:
 * "**来源**: [https://docs.nvidia.com/...](...)" (or "**Source**:"). */
static int converted_from_sphinx(const char *data, size_t len)
{
    size_t n = len < 4096 ? len : 4096;
    for (size_t i = 0; i < n;) {
        const char *line = data + i;
        const char *nl = memchr(line, '\n', n - i);
        size_t ll = nl ? (size_t)(nl - line) : n - i;
        if (ll > 4 && line[0] == '*' && line[1] == '*' &&
            memmem(line, ll, "**: [http", 9) && memmem(line, ll, "docs.nvidia.com/", 16))
            return 1;
        i += ll + 1;
    }
    return 0;
}

kb_rc kb_parse_markdown(const char *data, size_t len, const char *path,
                        kb_doc *doc, kb_err *err)
{
    kb_rc crc = kb_ingest_check_text(data, len, path, "Markdown", err);
    if (crc != KB_OK)
        return crc;
    md_state st;
    memset(&st, 0, sizeof st);
    st.doc = doc;
    st.input = data;
    st.input_end = data + len;
    st.sphinx = converted_from_sphinx(data, len);
    kb_strset_init(&st.seen);
    kb_buf_init(&st.cap, 0);
    kb_buf_init(&st.code, 0);
    kb_buf_init(&st.html, 0);
    kb_buf_init(&st.table, 0);
    kb_buf_init(&st.row, 0);
    kb_buf_init(&st.run, 0);

    MD_PARSER parser;
    memset(&parser, 0, sizeof parser);
    parser.flags = MD_FLAG_TABLES | MD_FLAG_STRIKETHROUGH |
                   MD_FLAG_PERMISSIVEURLAUTOLINKS | MD_FLAG_PERMISSIVEWWWAUTOLINKS;
    parser.enter_block = on_enter_block;
    parser.leave_block = on_leave_block;
    parser.enter_span = on_enter_span;
    parser.leave_span = on_leave_span;
    parser.text = on_text;

    kb_rc rc = KB_OK;
    if (len > (size_t)(MD_SIZE)-1) {
        rc = kb_err_set(err, KB_ERR_PARSE, "'%s' is too large to parse", path ? path : "");
        goto out;
    }
    int r = md_parse(data, (MD_SIZE)len, &parser, &st);
    if (st.rc != KB_OK)
        rc = kb_err_set(err, st.rc, "cannot parse '%s': %s", path ? path : "",
                        st.rc == KB_ERR_NOMEM ? "out of memory" : kb_rc_name(st.rc));
    else if (r != 0)
        rc = kb_err_set(err, KB_ERR_PARSE, "cannot parse '%s' as Markdown",
                        path ? path : "");
out:
    reset_links(&st);
    free(st.links);
    free(st.html_anchor);
    kb_strset_release(&st.seen);
    kb_buf_release(&st.cap);
    kb_buf_release(&st.code);
    kb_buf_release(&st.html);
    kb_buf_release(&st.table);
    kb_buf_release(&st.row);
    kb_buf_release(&st.run);
    return rc;
}
