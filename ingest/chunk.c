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
/* A chunk of text this short that is not a section of its own says a few
 * words ("- Multiplicand B:", "An SM consists of:", "The layout ... is
 * shown in Figure 149.", a code block's closing braces) that lead into
 * or end what is beside it: it joins the next chunk of its section, else
 * the one before of its kind, where they fit (issue 22: alone, such a stub ranks on
 * its heading and shows nothing). */
#define STUB_BYTES 160

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

/* b's first depth headings joined by " > " (caller frees; NULL out of
 * memory). */
static char *heading_text(const kb_block *b, size_t depth)
{
    kb_buf t;
    kb_buf_init(&t, 0);
    kb_rc rc = KB_OK;
    for (size_t i = 0; rc == KB_OK && i < depth; i++) {
        if (i)
            rc = kb_buf_puts(&t, " > ");
        if (rc == KB_OK)
            rc = kb_buf_puts(&t, b->heading[i]);
    }
    return kb_buf_finish(&t, rc);
}

/* The chunk being filled. */
typedef struct {
    const kb_block *first;
    kb_kind kind;
    kb_buf text;
    size_t tokens;       /* of text */
    size_t prefix;       /* of the heading prefix */
    int code_only;       /* every block so far was code: a chunk of code,
                            however short (a small CUDA function) */
    int lead;            /* a stub leading into the block being added */
} pending;

/* The chunker's state: the chunk being filled; a tiny section intro
 * carried into the chunk of its first subsection; and a run of tiny
 * sibling sections (a README's "Supported OSes: Linux, Windows", "Key
 * Concepts: ...") waiting to become one chunk under their parent, since
 * alone each would rank on its heading and say nothing. */
typedef struct {
    kb_chunks *out;
    const kb_tokenizer *tok;
    size_t max;
    pending p;
    kb_buf carry;                /* a tiny parent section's text */
    const kb_block *carry_from;  /* its section's first block */
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
    if (KB_GROW(out->items, out->n + 1, out->cap) != KB_OK)
        return KB_ERR_NOMEM;
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
    if (p->kind == KB_KIND_TEXT && !p->code_only && p->tokens < TINY_SECTION_TOKENS &&
        b->depth >= 2) {
        const char *title = b->heading[b->depth - 1];
        int joins = 0;
        if (ch->run_count && siblings(ch->run_first, b)) {
            /* exactly what the merged chunk would cost, parent path included */
            kb_buf t;
            kb_buf_init(&t, 0);
            char *parent = heading_text(b, b->depth - 1);
            rc = parent ? kb_buf_printf(&t, "%s\n%s\n\n%s: %s", parent,
                                        ch->run.data, title, p->text.data)
                        : KB_ERR_NOMEM;
            /* "\n\nTitle: text" more, in pieces and in bytes */
            if (rc == KB_OK)
                joins = kb_chunk_count_tokens(ch->tok, t.data) <= ch->max &&
                        ch->run.len + 4 + strlen(title) + p->text.len <= KB_CHUNK_MAX_BYTES;
            free(parent);
            kb_buf_release(&t);
            if (rc != KB_OK)
                goto done;
        }
        if (joins) {
            rc = kb_buf_puts(&ch->run, "\n\n");
        } else {
            if ((rc = flush_run(ch)) != KB_OK)
                goto done;
            ch->run_first = b;
            rc = kb_buf_append(&ch->run_single, p->text.data, p->text.len);
        }
        if (rc == KB_OK)
            rc = kb_buf_printf(&ch->run, "%s: ", title);
        if (rc == KB_OK)
            rc = kb_buf_append(&ch->run, p->text.data, p->text.len);
        if (rc == KB_OK)
            ch->run_count++;
        goto done;
    }
    if ((rc = flush_run(ch)) == KB_OK)
        rc = store_chunk(ch, p->code_only ? KB_KIND_CODE : p->kind, b, b->depth,
                         p->text.data, p->text.len);
done:
    kb_buf_reset(&p->text);
    p->first = NULL;
    p->tokens = 0;
    p->code_only = 0;
    p->lead = 0;
    return rc;
}

/* Length of the longest prefix of s[0..len) that fits budget tokens and
 * max_bytes bytes, cut at the best boundary available: a blank line, a
 * line end, a sentence end, a space. Always at least one character. Costs
 * at most a few dozen counts of max_bytes, however long s is. */
static size_t fit_prefix(const kb_tokenizer *tok, const char *s, size_t len,
                         size_t budget, size_t max_bytes)
{
    /* binary search on length for the largest piece within budget */
    /* no word piece is longer than a few dozen bytes: search only there */
    size_t hi = len < budget * 32 ? len : budget * 32;
    if (hi > max_bytes)
        hi = max_bytes;
    size_t lo = 1, best = 1;
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

/* The carried intro as a chunk of its own, after all: its subsection
 * never came. */
static kb_rc emit_carry(chunker *ch)
{
    pending alone = { ch->carry_from, KB_KIND_TEXT, ch->carry, 0, 0, 0, 0 };
    alone.tokens = kb_chunk_count_tokens(ch->tok, ch->carry.data);
    kb_rc rc = emit(ch, &alone);
    ch->carry = alone.text;   /* emptied by emit, still ours */
    ch->carry_from = NULL;
    return rc;
}

/* Before block b (of kind, btok pieces, budget for its text) is added:
 * the chunk being filled ends unless b continues it. A tiny section intro
 * followed by its subsection is carried into the subsection's chunk; a
 * carried intro whose subsection never came stands alone. */
static kb_rc end_pending(chunker *ch, const kb_block *b, kb_kind kind,
                         size_t btok, size_t budget)
{
    pending *p = &ch->p;
    kb_rc rc = KB_OK;
    int joins = p->first && same_section(p->first, b) && p->kind == kind &&
                kind != KB_KIND_PAPER && kind != KB_KIND_CODE &&
                p->tokens + btok + 1 <= budget;
    /* a caption ("add: Add two values. Syntax") before its section's code
     * block: alone it would stand for the section and say nothing, so the
     * code chunk carries it */
    if (!joins && p->first && p->kind == KB_KIND_TEXT && kind == KB_KIND_CODE &&
        p->tokens < TINY_SECTION_TOKENS && same_section(p->first, b) &&
        p->tokens + btok + 1 <= budget) {
        p->kind = KB_KIND_CODE;
        return KB_OK;
    }
    /* a stub before text or a table of its section ("An SM consists of:",
     * "- Multiplicand B:") leads their chunk, the block cut after it
     * where the two do not fit together */
    if (!joins && p->first && p->kind == KB_KIND_TEXT && p->text.len < STUB_BYTES &&
        (kind == KB_KIND_TEXT || kind == KB_KIND_TABLE) && same_section(p->first, b)) {
        p->kind = kind;
        p->lead = 1;
        return KB_OK;
    }
    if (!joins && p->first) {
        if (p->kind == KB_KIND_TEXT && p->tokens < TINY_SECTION_TOKENS &&
            is_descendant(p->first, b) && ch->carry.len == 0) {
            if ((rc = kb_buf_append(&ch->carry, p->text.data, p->text.len)) != KB_OK)
                return rc;
            ch->carry_from = p->first;
            kb_buf_reset(&p->text);
            p->first = NULL;
            p->tokens = 0;
        } else if ((rc = emit(ch, p)) != KB_OK) {
            return rc;
        }
    }
    if (ch->carry.len && ch->carry_from && !is_descendant(ch->carry_from, b))
        rc = emit_carry(ch);
    return rc;
}

/* Starts a chunk at block b, with the carried intro first if b is text. */
static kb_rc start_pending(chunker *ch, const kb_block *b, kb_kind kind,
                           size_t prefix)
{
    pending *p = &ch->p;
    p->first = b;
    p->kind = kind;
    p->prefix = prefix;
    p->code_only = b->kind == KB_KIND_CODE;
    if (ch->carry.len && kind == KB_KIND_TEXT) {
        p->code_only = 0;
        kb_rc rc = kb_buf_append(&p->text, ch->carry.data, ch->carry.len);
        if (rc != KB_OK)
            return rc;
        p->tokens = kb_chunk_count_tokens(ch->tok, ch->carry.data);
        kb_buf_reset(&ch->carry);
        ch->carry_from = NULL;
    }
    return KB_OK;
}

/* Word pieces of the rest of a block, s (NUL-terminated, len bytes), for
 * the question "does it fit a chunk?": a rest longer than a chunk may be
 * never fits, and is not counted (counting it after every piece was the
 * chunker's quadratic cost). */
static size_t rest_tokens(const kb_tokenizer *tok, const char *s, size_t len)
{
    return len <= KB_CHUNK_MAX_BYTES ? kb_chunk_count_tokens(tok, s) : SIZE_MAX;
}

/* Adds block b's text to the chunks, cut into pieces that fit budget (and
 * KB_CHUNK_MAX_BYTES): a block that would fit a chunk on its own starts a
 * fresh one rather than be split. Papers and code blocks end their
 * chunk. */
static kb_rc add_block(chunker *ch, const kb_block *b, kb_kind kind,
                       size_t prefix, size_t budget, size_t btok)
{
    pending *p = &ch->p;
    const kb_tokenizer *tok = ch->tok;
    const char *s = b->text;
    size_t len = strlen(s);
    kb_rc rc = KB_OK;
    if (len > KB_CHUNK_MAX_BYTES)
        btok = SIZE_MAX;
    while (len > 0 && rc == KB_OK) {
        if (!p->first && (rc = start_pending(ch, b, kind, prefix)) != KB_OK)
            return rc;
        size_t room = budget > p->tokens + 1 ? budget - p->tokens - 1 : 0;
        /* the text so far, the separator, the piece */
        size_t room_bytes = KB_CHUNK_MAX_BYTES > p->text.len + 2
                                ? KB_CHUNK_MAX_BYTES - p->text.len - 2 : 0;
        size_t take;
        if (btok <= room && len <= room_bytes) {
            take = len;
        } else if (p->tokens > 0) {
            /* a lead-in (end_pending) takes the start of the block it
             * leads into rather than stand alone */
            if ((btok <= budget && !p->lead) || room < 16 || room_bytes < 64) {
                rc = emit(ch, p);
                continue;
            }
            take = fit_prefix(tok, s, len, room, room_bytes);
        } else {
            take = fit_prefix(tok, s, len, budget, KB_CHUNK_MAX_BYTES);
        }
        if (p->text.len)
            rc = kb_buf_puts(&p->text, kind == KB_KIND_TABLE ? "\n" : "\n\n");
        if (rc == KB_OK)
            rc = kb_buf_append(&p->text, s, take);
        p->code_only &= b->kind == KB_KIND_CODE;
        if (rc != KB_OK)
            return rc;
        p->tokens = kb_chunk_count_tokens(tok, p->text.data);
        s += take;
        len -= take;
        while (len > 0 && (*s == ' ' || *s == '\n')) {
            s++;
            len--;
        }
        if (len > 0) {
            rc = emit(ch, p);
            btok = rest_tokens(tok, s, len);
        }
    }
    if (rc == KB_OK && (kind == KB_KIND_PAPER || kind == KB_KIND_CODE))
        rc = emit(ch, p);
    return rc;
}

/* One block through the chunker: its budget (the heading prefix counts
 * against it), the end of the chunk before it, its text. */
static kb_rc chunk_block(chunker *ch, const kb_block *b)
{
    char *htext = heading_text(b, b->depth);
    if (!htext)
        return KB_ERR_NOMEM;
    size_t prefix = kb_chunk_count_tokens(ch->tok, htext);
    free(htext);
    /* only an absurdly deep path (over max - 32 pieces) leaves the text
     * less than its due */
    size_t budget = prefix + 32 <= ch->max ? ch->max - prefix : 32;
    size_t btok = kb_chunk_count_tokens(ch->tok, b->text);
    kb_kind kind = b->kind;
    if (kind == KB_KIND_CODE && btok <= SMALL_CODE_TOKENS)
        kind = KB_KIND_TEXT;   /* stays with its explanation */
    kb_rc rc = end_pending(ch, b, kind, btok, budget);
    if (rc == KB_OK)
        rc = add_block(ch, b, kind, prefix, budget, btok);
    return rc;
}

/* Whether chunks a and b are of one section (the same heading path). */
static int same_chunk_section(const kb_chunk *a, const kb_chunk *b)
{
    return a->kind != KB_KIND_PAPER && b->kind != KB_KIND_PAPER &&
           strcmp(a->heading_json, b->heading_json) == 0;
}

/* Joins stub chunk s's text to chunk to's (before it when first) if the
 * result fits max pieces and KB_CHUNK_MAX_BYTES: 1 if joined, 0 if not,
 * -1 out of memory. */
static int join_stub(const kb_tokenizer *tok, size_t max, const kb_chunk *s,
                     kb_chunk *to, int first)
{
    size_t len = strlen(s->text) + 2 + strlen(to->text);
    if (len > KB_CHUNK_MAX_BYTES)
        return 0;
    kb_buf t;
    kb_buf_init(&t, 0);
    kb_rc rc = kb_buf_printf(&t, "%s\n\n%s", first ? s->text : to->text,
                             first ? to->text : s->text);
    size_t tokens = rc == KB_OK ? kb_chunk_count_tokens(tok, to->heading_text) +
                                      kb_chunk_count_tokens(tok, t.data) : 0;
    if (rc != KB_OK || tokens > max) {
        kb_buf_release(&t);
        return rc == KB_OK ? 0 : -1;
    }
    char *text = kb_buf_detach(&t);
    if (!text)
        return -1;
    free(to->text);
    to->text = text;
    to->tokens = (int)tokens;
    return 1;
}

/* Stubs (STUB_BYTES) into the chunk after them in their section, else the
 * one before when of their kind (a paragraph after a code block is not
 * code); a stub that is its section's only chunk stays. */
static kb_rc merge_stubs(kb_chunks *out, const kb_tokenizer *tok, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < out->n; i++) {
        kb_chunk *c = &out->items[i];
        int joined = 0;
        if (c->kind != KB_KIND_PAPER && strlen(c->text) < STUB_BYTES) {
            if (i + 1 < out->n && same_chunk_section(c, &out->items[i + 1]))
                joined = join_stub(tok, max, c, &out->items[i + 1], 1);
            if (!joined && n > 0 && same_chunk_section(c, &out->items[n - 1]) &&
                out->items[n - 1].kind == c->kind)
                joined = join_stub(tok, max, c, &out->items[n - 1], 0);
            if (joined < 0)
                return KB_ERR_NOMEM;
        }
        if (joined) {
            free(c->heading_json);
            free(c->heading_text);
            free(c->anchor);
            free(c->text);
            continue;
        }
        out->items[n++] = *c;
    }
    out->n = n;
    return KB_OK;
}

kb_rc kb_chunk_doc(const kb_doc *doc, const kb_tokenizer *tok, int max_tokens,
                   kb_chunks *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    size_t max = max_tokens > 0 ? (size_t)max_tokens : KB_CHUNK_MAX_TOKENS;
    chunker ch = { .out = out, .tok = tok, .max = max };
    kb_buf_init(&ch.p.text, 0);
    kb_buf_init(&ch.carry, 0);
    kb_buf_init(&ch.run, 0);
    kb_buf_init(&ch.run_single, 0);
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < doc->nblocks && rc == KB_OK; i++)
        rc = chunk_block(&ch, &doc->blocks[i]);
    if (rc == KB_OK)
        rc = emit(&ch, &ch.p);
    if (rc == KB_OK && ch.carry.len && ch.carry_from)
        rc = emit_carry(&ch);
    if (rc == KB_OK)
        rc = flush_run(&ch);
    if (rc == KB_OK)
        rc = merge_stubs(out, tok, max);
    kb_buf_release(&ch.p.text);
    kb_buf_release(&ch.carry);
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
