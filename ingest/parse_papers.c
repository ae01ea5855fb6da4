/* parse_papers.c - literature lists: a leaf of text whose lines start
 * "[MM/YYYY] Title [[label]](url) | ..." (or "[note] ..." with a labelled
 * link) read as paper records, one per entry. The Markdown parser hands
 * it each leaf with its links. */
#include "ingest/ingest_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "[MM/YYYY]", "[M/YYYY]", "[YYYY-MM]", "[YYYY]" -> "YYYY-MM" / "YYYY". */
static int parse_date(const char *s, size_t n, char out[8])
{
    while (n && s[0] == ' ') { s++; n--; }
    while (n && s[n - 1] == ' ') n--;
    int d[8], nd = 0;
    size_t i = 0;
    for (; i < n && nd < 8; i++) {
        if (!isdigit((unsigned char)s[i]))
            break;
        d[nd++] = s[i] - '0';
    }
    if (nd == 4 && i == n) {
        snprintf(out, 8, "%d%d%d%d", d[0], d[1], d[2], d[3]);
        return 1;
    }
    if ((nd == 1 || nd == 2) && i < n && (s[i] == '/' || s[i] == '.') &&
        n - i - 1 == 4) {
        int month = nd == 1 ? d[0] : d[0] * 10 + d[1];
        const char *y = s + i + 1;
        for (int k = 0; k < 4; k++)
            if (!isdigit((unsigned char)y[k]))
                return 0;
        if (month < 1 || month > 12)
            return 0;
        snprintf(out, 8, "%.4s-%02d", y, month);
        return 1;
    }
    if (nd == 4 && i < n && s[i] == '-' && n - i - 1 == 2 &&
        isdigit((unsigned char)s[i + 1]) && isdigit((unsigned char)s[i + 2])) {
        int month = (s[i + 1] - '0') * 10 + (s[i + 2] - '0');
        if (month < 1 || month > 12)
            return 0;
        snprintf(out, 8, "%.4s-%02d", s, month);
        return 1;
    }
    return 0;
}

static int in_link(const kb_leaf *leaf, size_t off)
{
    for (size_t i = 0; i < leaf->nlinks; i++)
        if (off >= leaf->links[i].start && off < leaf->links[i].end)
            return 1;
    return 0;
}

/* The label of a literature link: "[paper] " -> "paper". */
static char *link_label(const char *s, size_t n)
{
    /* brackets on either side, matched or not ("[code]]" from a
     * mistyped "[[code\]](url)") */
    for (;;) {
        s = kb_ingest_trim(s, &n);
        if (n && (s[0] == '[' || s[0] == ']')) {
            s++;
            n--;
        } else if (n && (s[n - 1] == ']' || s[n - 1] == '[')) {
            n--;
        } else {
            break;
        }
    }
    return n ? kb_strndup(s, n) : kb_strdup("link");
}

static int bracketed_label(const char *s, size_t n)
{
    s = kb_ingest_trim(s, &n);
    return n >= 3 && s[0] == '[' && s[n - 1] == ']';
}

/* Does the line text[a, b) start an entry ("[date] ..." or "[note] ..."
 * followed by a labelled link)? Sets *after to the offset after ']' and
 * date ("" when the bracket is no date). */
static int entry_start(const kb_leaf *leaf, size_t a, size_t b, size_t *after,
                       char date[8])
{
    const char *t = leaf->text;
    while (a < b && isspace((unsigned char)t[a]))
        a++;
    if (a >= b || t[a] != '[' || in_link(leaf, a))
        return 0;
    size_t close = a + 1;
    while (close < b && close - a < 48 && t[close] != ']' && t[close] != '[')
        close++;
    if (close >= b || t[close] != ']')
        return 0;
    *after = close + 1;
    if (parse_date(t + a + 1, close - a - 1, date))
        return 1;
    date[0] = '\0';
    /* no date: an entry only if the line has a "[label]" link */
    for (size_t i = 0; i < leaf->nlinks; i++) {
        const kb_text_link *l = &leaf->links[i];
        if (l->start >= *after && l->start < b &&
            bracketed_label(t + l->start, l->end - l->start))
            return 1;
    }
    return 0;
}

/* Strips separators a title keeps before its links ("Title —", "Title |").
 * An empty title (an entry that is only its date) has no data to trim. */
static void trim_title(kb_buf *title)
{
    static const char *const tails[] = { "\xe2\x80\x94", "\xe2\x80\x93",
                                         "\xef\xbd\x9c", "|", "-", ":", ",", "[" };
    for (int again = title->data != NULL; again;) {
        again = 0;
        size_t n = title->len;
        const char *s = kb_ingest_trim(title->data, &n);
        memmove(title->data, s, n);
        title->len = n;
        title->data[n] = '\0';
        for (size_t k = 0; k < sizeof tails / sizeof tails[0]; k++) {
            size_t tl = strlen(tails[k]);
            if (title->len >= tl &&
                memcmp(title->data + title->len - tl, tails[k], tl) == 0) {
                title->len -= tl;
                title->data[title->len] = '\0';
                again = 1;
            }
        }
    }
}

/* Adds the entry text[from, to) as a paper record; returns 1 if it was one
 * (it has a title), 0 if not. */
static int add_paper(kb_doc *doc, const kb_leaf *leaf, kb_rc *rc,
                     const char *date, size_t from, size_t to)
{
    /* title: the text before the first link, on one line */
    size_t title_end = to;
    for (size_t i = 0; i < leaf->nlinks; i++)
        if (leaf->links[i].start >= from && leaf->links[i].start < title_end)
            title_end = leaf->links[i].start;
    kb_buf title;
    kb_buf_init(&title, 0);
    kb_paper p = { 0 };
    kb_link *links = NULL;
    int added = 0;
    for (size_t i = from; i < title_end; i++) {
        char c = leaf->text[i];
        if (kb_buf_putc(&title, c == '\n' ? ' ' : c) != KB_OK) {
            kb_parse_fail(rc, KB_ERR_NOMEM);
            goto out;
        }
    }
    trim_title(&title);
    p.date = (char *)date;
    p.title = title.data ? title.data : (char *)"";
    links = calloc(leaf->nlinks ? leaf->nlinks : 1, sizeof *links);
    if (!links) {
        kb_parse_fail(rc, KB_ERR_NOMEM);
        goto out;
    }
    p.links = links;
    for (size_t i = 0; i < leaf->nlinks; i++) {
        const kb_text_link *l = &leaf->links[i];
        if (l->start < from || l->start >= to || !l->href || !*l->href)
            continue;
        links[p.nlinks].label = link_label(leaf->text + l->start,
                                           l->end - l->start);
        links[p.nlinks].url = l->href;
        if (!links[p.nlinks].label) {
            kb_parse_fail(rc, KB_ERR_NOMEM);
            goto out;
        }
        p.nlinks++;
    }
    if (title.len && *rc == KB_OK) {
        kb_rc arc = kb_doc_add_paper(doc, &p);
        if (arc != KB_OK)
            kb_parse_fail(rc, arc);
        added = 1;
    }
out:
    if (links)
        for (size_t i = 0; i < p.nlinks; i++)
            free(links[i].label);
    free(links);
    kb_buf_release(&title);
    return added;
}

int kb_parse_papers_start(const kb_leaf *leaf)
{
    size_t after;
    char date[8];
    size_t eol = 0;
    while (eol < leaf->len && leaf->text[eol] != '\n')
        eol++;
    return entry_start(leaf, 0, eol, &after, date);
}

size_t kb_parse_papers_add(kb_doc *doc, const kb_leaf *leaf, kb_rc *rc)
{
    const char *t = leaf->text;
    size_t n = leaf->len;
    size_t after;
    char date[8];
    size_t eol = 0;
    while (eol < n && t[eol] != '\n')
        eol++;
    if (!entry_start(leaf, 0, eol, &after, date))
        return 0;
    size_t from = after;
    char cur[8];
    memcpy(cur, date, sizeof cur);
    size_t line = eol < n ? eol + 1 : n;
    size_t papers = 0;
    while (line < n) {
        size_t e = line;
        while (e < n && t[e] != '\n')
            e++;
        if (entry_start(leaf, line, e, &after, date)) {
            papers += (size_t)add_paper(doc, leaf, rc, cur, from, line);
            memcpy(cur, date, sizeof cur);
            from = after;
        }
        line = e < n ? e + 1 : n;
    }
    papers += (size_t)add_paper(doc, leaf, rc, cur, from, n);
    return papers;
}
