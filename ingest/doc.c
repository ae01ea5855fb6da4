/* doc.c - the parsed-document builder every parser fills. */
#include "ingest/ingest_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

void kb_doc_init(kb_doc *doc)
{
    memset(doc, 0, sizeof *doc);
}

void kb_paper_release(kb_paper *p)
{
    if (!p)
        return;
    free(p->date);
    free(p->title);
    for (size_t i = 0; i < p->nlinks; i++) {
        free(p->links[i].label);
        free(p->links[i].url);
    }
    free(p->links);
    memset(p, 0, sizeof *p);
}

void kb_doc_release(kb_doc *doc)
{
    for (size_t i = 0; i < doc->nblocks; i++) {
        kb_block *b = &doc->blocks[i];
        for (size_t d = 0; d < b->depth; d++)
            free(b->heading[d]);
        free(b->anchor);
        free(b->text);
        if (b->paper) {
            kb_paper_release(b->paper);
            free(b->paper);
        }
    }
    free(doc->blocks);
    for (size_t d = 0; d < doc->depth; d++) {
        free(doc->stack[d]);
        free(doc->stack_anchor[d]);
    }
    free(doc->title);
    memset(doc, 0, sizeof *doc);
}

/* Copies s with runs of white space collapsed to one space and ends trimmed:
 * headings come from markup with arbitrary line breaks. */
static char *collapse_space(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t j = 0;
    int space = 0;
    for (size_t i = 0; i < n; i++) {
        if (isspace((unsigned char)s[i])) {
            space = j > 0;
            continue;
        }
        if (space)
            out[j++] = ' ';
        space = 0;
        out[j++] = s[i];
    }
    out[j] = '\0';
    return out;
}

kb_rc kb_doc_heading(kb_doc *doc, int level, const char *title,
                     const char *anchor)
{
    if (level < 1)
        level = 1;
    size_t keep = (size_t)level - 1;
    if (keep > doc->depth)
        keep = doc->depth;
    if (keep >= KB_MAX_HEADING_DEPTH)
        keep = KB_MAX_HEADING_DEPTH - 1;
    while (doc->depth > keep) {
        doc->depth--;
        free(doc->stack[doc->depth]);
        free(doc->stack_anchor[doc->depth]);
        doc->stack[doc->depth] = doc->stack_anchor[doc->depth] = NULL;
    }
    char *t = collapse_space(title ? title : "");
    char *a = kb_strdup(anchor ? anchor : "");
    if (!t || !a) {
        free(t);
        free(a);
        return KB_ERR_NOMEM;
    }
    doc->stack[doc->depth] = t;
    doc->stack_anchor[doc->depth] = a;
    doc->depth++;
    if (!doc->title && level == 1 && *t)
        doc->title = kb_strdup(t);
    return KB_OK;
}

static kb_block *new_block(kb_doc *doc, kb_kind kind)
{
    if (KB_GROW(doc->blocks, doc->nblocks + 1, doc->capblocks) != KB_OK)
        return NULL;
    kb_block *b = &doc->blocks[doc->nblocks];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    const char *anchor = "";
    for (size_t d = 0; d < doc->depth; d++) {
        b->heading[d] = kb_strdup(doc->stack[d]);
        if (doc->stack_anchor[d][0])
            anchor = doc->stack_anchor[d];
    }
    b->depth = doc->depth;
    b->anchor = kb_strdup(anchor);
    doc->nblocks++;
    return b;
}

kb_rc kb_doc_add(kb_doc *doc, kb_kind kind, const char *text, size_t len)
{
    if (!text || kb_ingest_blank(text, len))
        return KB_OK;
    kb_block *b = new_block(doc, kind);
    if (!b)
        return KB_ERR_NOMEM;
    b->text = kb_strndup(text, len);
    return b->text ? KB_OK : KB_ERR_NOMEM;
}

kb_rc kb_doc_add_paper(kb_doc *doc, const kb_paper *paper)
{
    kb_block *b = new_block(doc, KB_KIND_PAPER);
    if (!b)
        return KB_ERR_NOMEM;
    kb_paper *p = calloc(1, sizeof *p);
    if (!p)
        return KB_ERR_NOMEM;
    b->paper = p;
    p->date = kb_strdup(paper->date ? paper->date : "");
    p->title = collapse_space(paper->title ? paper->title : "");
    p->links = calloc(paper->nlinks ? paper->nlinks : 1, sizeof *p->links);
    if (!p->date || !p->title || !p->links)
        return KB_ERR_NOMEM;
    for (size_t i = 0; i < paper->nlinks; i++) {
        p->links[i].label = kb_strdup(paper->links[i].label);
        p->links[i].url = kb_strdup(paper->links[i].url);
        p->nlinks++;
        if (!p->links[i].label || !p->links[i].url)
            return KB_ERR_NOMEM;
    }
    /* The block's text is what search sees: the title, the date, labels. */
    kb_buf t;
    kb_buf_init(&t, 0);
    kb_rc rc = kb_buf_puts(&t, p->title);
    if (rc == KB_OK && p->date[0])
        rc = kb_buf_printf(&t, " (%s)", p->date);
    for (size_t i = 0; rc == KB_OK && i < p->nlinks; i++)
        rc = kb_buf_printf(&t, "%s[%s](%s)", i ? " | " : "\n",
                           p->links[i].label, p->links[i].url);
    if (rc != KB_OK) {
        kb_buf_release(&t);
        return rc;
    }
    b->text = kb_buf_detach(&t);
    /* the paper's own title ends its heading path */
    if (b->depth < KB_MAX_HEADING_DEPTH)
        b->heading[b->depth++] = kb_strdup(p->title);
    return KB_OK;
}
