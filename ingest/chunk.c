/* chunk.c - the heading-aware chunker: a parsed document's blocks become
 * chunks of at most N word pieces, the heading-path prefix included. */
#include "ingest/ingest_int.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* A code block up to this size stays inside the text chunk around it (a
 * one-line example belongs with its explanation); larger ones stand alone
 * as kind "code". */
#define SMALL_CODE_TOKENS 64
/* A section's own text below this size is carried into the chunk of its
 * first subsection instead of standing alone (a chunk that is little more
 * than its heading ranks high on the heading and says nothing). */
#define TINY_SECTION_TOKENS 24

size_t kb_chunk_count_tokens(const kb_tokenizer *tok, const char *text)
{
    if (tok)
        return kb_tokenizer_count(tok, text);
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)text;
    while (*p) {
        if (isspace(*p)) {
            p++;
        } else if (isalnum(*p) || *p >= 0x80) {
            size_t len = 0;
            while (*p && (isalnum(*p) || *p >= 0x80)) {
                len++;
                p++;
            }
            /* rare and long words fall into several pieces */
            n += len <= 6 ? 1 : 1 + (len - 3) / 4;
        } else {
            n++;   /* punctuation is a token of its own */
            p++;
        }
    }
    return n;
}

static int same_section(const kb_block *a, const kb_block *b)
{
    if (a->depth != b->depth)
        return 0;
    for (size_t i = 0; i < a->depth; i++)
        if (strcmp(a->heading[i], b->heading[i]) != 0)
            return 0;
    return 1;
}

/* 1 if b's section lies strictly inside a's. */
static int is_descendant(const kb_block *a, const kb_block *b)
{
    if (b->depth <= a->depth)
        return 0;
    for (size_t i = 0; i < a->depth; i++)
        if (strcmp(a->heading[i], b->heading[i]) != 0)
            return 0;
    return 1;
}

static char *heading_json(const kb_block *b, size_t depth)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < depth; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(b->heading[i]));
    char *s = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    return s;
}

static char *heading_text(const kb_block *b, size_t depth)
{
    kb_buf t;
    kb_buf_init(&t, 0);
    for (size_t i = 0; i < depth; i++) {
        if (i)
            kb_buf_puts(&t, " > ");
        kb_buf_puts(&t, b->heading[i]);
    }
    return kb_buf_detach(&t);
}

/* The chunk being filled. */
typedef struct {
    const kb_block *first;
    kb_kind kind;
    kb_buf text;
    size_t tokens;       /* of text */
    size_t prefix;       /* of the heading prefix */
} pending;

/* The chunker's state beyond the chunk being filled: a run of tiny
 * sibling sections (a README's "Supported OSes: Linux, Windows", "Key
 * Concepts: ...") waiting to become one chunk under their parent, since
 * alone each would rank on its heading and say nothing. */
typedef struct {
    kb_chunks *out;
    const kb_tokenizer *tok;
    size_t max;
    const kb_block *run_first;
    size_t run_count;
    kb_buf run;          /* "Title: text" per section, blank-line separated */
    kb_buf run_single;   /* the first section's text, unlabelled */
} chunker;

/* Appends a chunk of text under b's first depth headings. */
static kb_rc store_chunk(chunker *ch, kb_kind kind, const kb_block *b,
                         size_t depth, const char *text, size_t len)
{
    kb_chunks *out = ch->out;
    if (out->n == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 64;
        kb_chunk *items = realloc(out->items, cap * sizeof *items);
        if (!items)
            return KB_ERR_NOMEM;
        out->items = items;
        out->cap = cap;
    }
    kb_chunk *c = &out->items[out->n++];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->depth = depth;
    c->heading_json = heading_json(b, depth);
    c->heading_text = heading_text(b, depth);
    c->anchor = kb_strdup(b->anchor ? b->anchor : "");
    c->text = kb_strndup(text, len);
    c->paper = b->paper;
    c->first = b;
    if (!c->heading_json || !c->heading_text || !c->anchor || !c->text)
        return KB_ERR_NOMEM;
    /* word pieces add up across whitespace: the path, a line break, the text */
    c->tokens = (int)(kb_chunk_count_tokens(ch->tok, c->heading_text) +
                      kb_chunk_count_tokens(ch->tok, c->text));
    return KB_OK;
}

static kb_rc flush_run(chunker *ch)
{
    kb_rc rc = KB_OK;
    if (ch->run_count == 1)
        rc = store_chunk(ch, KB_KIND_TEXT, ch->run_first, ch->run_first->depth,
                         ch->run_single.data, ch->run_single.len);
    else if (ch->run_count > 1)
        rc = store_chunk(ch, KB_KIND_TEXT, ch->run_first, ch->run_first->depth - 1,
                         ch->run.data, ch->run.len);
    ch->run_count = 0;
    ch->run_first = NULL;
    kb_buf_reset(&ch->run);
    kb_buf_reset(&ch->run_single);
    return rc;
}

/* 1 if a and b are sections with the same parent. */
static int siblings(const kb_block *a, const kb_block *b)
{
    if (a->depth != b->depth || a->depth < 2)
        return 0;
    for (size_t i = 0; i + 1 < a->depth; i++)
        if (strcmp(a->heading[i], b->heading[i]) != 0)
            return 0;
    return 1;
}

/* Finishes the chunk being filled: a tiny text section joins the run of
 * its tiny siblings; anything else ends the run and is stored. */
static kb_rc emit(chunker *ch, pending *p)
{
    kb_rc rc = KB_OK;
    if (!p->first || p->text.len == 0)
        goto done;
    const kb_block *b = p->first;
    if (p->kind == KB_KIND_TEXT && p->tokens < TINY_SECTION_TOKENS && b->depth >= 2) {
        const char *title = b->heading[b->depth - 1];
        int joins = 0;
        if (ch->run_count && siblings(ch->run_first, b)) {
            /* exactly what the merged chunk would cost, parent path included */
            kb_buf t;
            kb_buf_init(&t, 0);
            char *parent = heading_text(b, b->depth - 1);
            kb_buf_printf(&t, "%s\n%s\n\n%s: %s", parent ? parent : "",
                          ch->run.data, title, p->text.data);
            joins = kb_chunk_count_tokens(ch->tok, t.data) <= ch->max;
            free(parent);
            kb_buf_release(&t);
        }
        if (joins) {
            kb_buf_puts(&ch->run, "\n\n");
        } else {
            if ((rc = flush_run(ch)) != KB_OK)
                goto done;
            ch->run_first = b;
            kb_buf_append(&ch->run_single, p->text.data, p->text.len);
        }
        kb_buf_printf(&ch->run, "%s: ", title);
        kb_buf_append(&ch->run, p->text.data, p->text.len);
        ch->run_count++;
        goto done;
    }
    if ((rc = flush_run(ch)) == KB_OK)
        rc = store_chunk(ch, p->kind, b, b->depth, p->text.data, p->text.len);
done:
    kb_buf_reset(&p->text);
    p->first = NULL;
    p->tokens = 0;
    return rc;
}

/* Length of the longest prefix of s[0..len) that fits budget tokens, cut at
 * the best boundary available: a blank line, a line end, a sentence end,
 * a space. Always at least one character. */
static size_t fit_prefix(const kb_tokenizer *tok, const char *s, size_t len,
                         size_t budget)
{
    /* binary search on length for the largest piece within budget */
    /* no word piece is longer than a few dozen bytes: search only there */
    size_t lo = 1, hi = len < budget * 32 ? len : budget * 32, best = 1;
    char *tmp = malloc(hi + 1);
    if (!tmp)
        return len;
    while (lo <= hi) {
        size_t mid = lo + (hi - lo) / 2;
        memcpy(tmp, s, mid);
        tmp[mid] = '\0';
        if (kb_chunk_count_tokens(tok, tmp) <= budget) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    free(tmp);
    if (best >= len)
        return len;
    static const char *const cuts[] = { "\n\n", "\n", ". ", "; ", " " };
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        size_t cl = strlen(cuts[c]);
        for (size_t i = best; i > best / 3 && i >= cl; i--)
            if (memcmp(s + i - cl, cuts[c], cl) == 0)
                return i;
    }
    /* no boundary: do not cut inside a UTF-8 sequence */
    while (best > 1 && ((unsigned char)s[best] & 0xC0) == 0x80)
        best--;
    return best;
}

kb_rc kb_chunk_doc(const kb_doc *doc, const kb_tokenizer *tok, int max_tokens,
                   kb_chunks *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    pending p = { 0 };
    kb_buf_init(&p.text, 0);
    kb_buf carry;               /* a tiny parent section's text */
    kb_buf_init(&carry, 0);
    const kb_block *carry_from = NULL;
    kb_rc rc = KB_OK;
    size_t max = max_tokens > 0 ? (size_t)max_tokens : KB_CHUNK_MAX_TOKENS;
    chunker ch = { .out = out, .tok = tok, .max = max };
    kb_buf_init(&ch.run, 0);
    kb_buf_init(&ch.run_single, 0);

    for (size_t i = 0; i < doc->nblocks && rc == KB_OK; i++) {
        const kb_block *b = &doc->blocks[i];
        char *htext = heading_text(b, b->depth);
        size_t prefix = htext ? kb_chunk_count_tokens(tok, htext) : 0;
        free(htext);
        /* the prefix counts against the budget; only an absurdly deep path
         * (over max - 32 pieces) leaves the text less than its due */
        size_t budget = prefix + 32 <= max ? max - prefix : 32;
        size_t btok = kb_chunk_count_tokens(tok, b->text);
        kb_kind kind = b->kind;
        if (kind == KB_KIND_CODE && btok <= SMALL_CODE_TOKENS)
            kind = KB_KIND_TEXT;   /* stays with its explanation */

        int joins = p.first && same_section(p.first, b) && p.kind == kind &&
                    kind != KB_KIND_PAPER && kind != KB_KIND_CODE &&
                    p.tokens + btok + 1 <= budget;
        if (!joins && p.first) {
            /* a tiny section intro goes with its first subsection */
            if (p.kind == KB_KIND_TEXT && p.tokens < TINY_SECTION_TOKENS &&
                is_descendant(p.first, b) && carry.len == 0) {
                kb_buf_append(&carry, p.text.data, p.text.len);
                carry_from = p.first;
                kb_buf_reset(&p.text);
                p.first = NULL;
                p.tokens = 0;
            } else if ((rc = emit(&ch, &p)) != KB_OK) {
                break;
            }
        }
        if (carry.len && carry_from && !is_descendant(carry_from, b)) {
            /* the subsection never came: the intro stands alone after all */
            pending alone = { carry_from, KB_KIND_TEXT, carry, 0, 0 };
            alone.tokens = kb_chunk_count_tokens(tok, carry.data);
            rc = emit(&ch, &alone);
            carry = alone.text;
            kb_buf_reset(&carry);
            carry_from = NULL;
            if (rc != KB_OK)
                break;
        }
        /* the block, cut into pieces that fit */
        const char *s = b->text;
        size_t len = strlen(s);
        while (len > 0 && rc == KB_OK) {
            if (!p.first) {
                p.first = b;
                p.kind = kind;
                p.prefix = prefix;
                if (carry.len && kind == KB_KIND_TEXT) {
                    kb_buf_append(&p.text, carry.data, carry.len);
                    p.tokens = kb_chunk_count_tokens(tok, carry.data);
                    kb_buf_reset(&carry);
                    carry_from = NULL;
                }
            }
            size_t room = budget > p.tokens + 1 ? budget - p.tokens - 1 : 0;
            size_t take;
            if (btok <= room) {
                take = len;
            } else if (p.tokens > 0) {
                /* start a fresh chunk rather than split a block that would
                 * fit one on its own */
                if (btok <= budget) {
                    rc = emit(&ch, &p);
                    continue;
                }
                if (room < 16) {
                    rc = emit(&ch, &p);
                    continue;
                }
                take = fit_prefix(tok, s, len, room);
            } else {
                take = fit_prefix(tok, s, len, budget);
            }
            if (p.text.len)
                kb_buf_puts(&p.text, kind == KB_KIND_TABLE ? "\n" : "\n\n");
            kb_buf_append(&p.text, s, take);
            p.tokens = kb_chunk_count_tokens(tok, p.text.data);
            s += take;
            len -= take;
            while (len > 0 && (*s == ' ' || *s == '\n')) {
                s++;
                len--;
            }
            if (len > 0) {
                rc = emit(&ch, &p);
                btok = kb_chunk_count_tokens(tok, s);
            }
        }
        if (rc == KB_OK && (kind == KB_KIND_PAPER || kind == KB_KIND_CODE))
            rc = emit(&ch, &p);
    }
    if (rc == KB_OK)
        rc = emit(&ch, &p);
    if (rc == KB_OK && carry.len && carry_from) {
        pending alone = { carry_from, KB_KIND_TEXT, carry, 0, 0 };
        alone.tokens = kb_chunk_count_tokens(tok, carry.data);
        rc = emit(&ch, &alone);
        carry = alone.text;
    }
    if (rc == KB_OK)
        rc = flush_run(&ch);
    kb_buf_release(&p.text);
    kb_buf_release(&carry);
    kb_buf_release(&ch.run);
    kb_buf_release(&ch.run_single);
    if (rc != KB_OK) {
        kb_chunks_release(out);
        return kb_err_set(err, rc, "out of memory while chunking");
    }
    return KB_OK;
}

void kb_chunks_release(kb_chunks *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->items[i].heading_json);
        free(c->items[i].heading_text);
        free(c->items[i].anchor);
        free(c->items[i].text);
    }
    free(c->items);
    memset(c, 0, sizeof *c);
}
