/*
 * tokenizer.c - the BERT WordPiece tokenizer of all-MiniLM-L6-v2 (uncased),
 * matching Hugging Face tokenizers' BertNormalizer + BertPreTokenizer +
 * WordPiece as configured by the model's tokenizer.json:
 *
 *   - the special tokens [PAD] [UNK] [CLS] [SEP] [MASK] written literally in
 *     the text are single tokens (they are matched before normalisation);
 *   - clean text: U+0000, U+FFFD and control characters (category C*, but
 *     not \t \n \r) dropped, whitespace (\t \n \r, Zs, Zl, Zp) splits;
 *   - CJK ideographs become words of their own;
 *   - accents stripped (NFD, drop Mn), then lower-cased;
 *   - punctuation (ASCII punctuation, Unicode P*) becomes words of its own;
 *   - greedy longest-match-first WordPiece with "##" continuations; a word
 *     longer than 100 characters, or one that cannot be matched, is [UNK].
 */
#include "index/index.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define MAX_WORD_CHARS 100
/* a word is kept in bytes up to MAX_WORD_CHARS characters of 4 bytes each */
#define WORD_BUF (MAX_WORD_CHARS * 4 + 8)

typedef struct {
    const char *s;     /* into the vocab blob, not NUL-terminated */
    uint32_t len;
    int32_t id;
} vocab_slot;

struct kb_tokenizer {
    char *blob;              /* vocab.txt, lines cut in place */
    vocab_slot *slots;       /* open addressing, empty: s == NULL */
    size_t mask;
    size_t maxlen;           /* longest entry in bytes, "##" not counted */
    int32_t unk, cls, sep;
};

/* ------------------------------------------------------------ vocab table */

/* Looks up (cont ? "##" : "") + s[0..n) in the vocab: the id or -1. */
static int32_t vocab_find(const kb_tokenizer *t, int cont, const char *s,
                          size_t n)
{
    uint64_t h = KB_FNV1A_INIT;
    if (cont)
        h = kb_fnv1a(h, "##", 2);
    h = kb_fnv1a(h, s, n);
    size_t want = n + (cont ? 2 : 0);
    for (size_t i = (size_t)h & t->mask;; i = (i + 1) & t->mask) {
        const vocab_slot *sl = &t->slots[i];
        if (!sl->s)
            return -1;
        if (sl->len != want)
            continue;
        if (cont) {
            if (sl->s[0] == '#' && sl->s[1] == '#' && !memcmp(sl->s + 2, s, n))
                return sl->id;
        } else if (!memcmp(sl->s, s, n)) {
            return sl->id;
        }
    }
}

static void vocab_insert(kb_tokenizer *t, const char *s, size_t n, int32_t id)
{
    uint64_t h = kb_fnv1a(KB_FNV1A_INIT, s, n);
    for (size_t i = (size_t)h & t->mask;; i = (i + 1) & t->mask) {
        vocab_slot *sl = &t->slots[i];
        if (!sl->s) {
            sl->s = s;
            sl->len = (uint32_t)n;
            sl->id = id;
            return;
        }
        /* a duplicate line (vocab.txt has none): keep the first */
        if (sl->len == n && !memcmp(sl->s, s, n))
            return;
    }
}

/* vocab.txt's pin (index.h): two tokens swapped, or the file cut short,
 * would change every vector and chunk size silently. */
#define VOCAB_SHA256 KB_MODEL_VOCAB_SHA256

/* Loads the vocabulary at vocab_path; with sha256, only if its bytes have
 * that SHA-256. */
static kb_rc tokenizer_load(const char *vocab_path, const char *sha256,
                            kb_tokenizer **out, kb_err *err)
{
    *out = NULL;
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_tokenizer *t = NULL;
    kb_err rerr;   /* the caller's err may already hold an earlier error */
    kb_err_clear(&rerr);
    kb_rc rc = kb_read_file(vocab_path, 16u << 20, &b, &rerr);
    if (rc != KB_OK) {
        kb_buf_release(&b);
        return kb_err_set(err, KB_ERR_MODEL,
                          "%s; run 'kb model fetch' or set KB_MODEL_DIR", rerr.msg);
    }
    if (sha256) {
        char hex[65];
        kb_sha256_hex(b.data ? b.data : "", b.len, hex);
        if (strcmp(hex, sha256) != 0) {
            rc = kb_model_corrupt(err, vocab_path);
            goto out;
        }
    }
    t = calloc(1, sizeof *t);
    if (!t) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    size_t lines = 0;
    for (size_t i = 0; i < b.len; i++)
        lines += b.data[i] == '\n';
    lines++;
    size_t cap = 1024;
    while (cap < lines * 2)
        cap *= 2;
    t->slots = calloc(cap, sizeof *t->slots);
    if (!t->slots) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    t->mask = cap - 1;
    t->blob = kb_buf_detach(&b);
    int32_t id = 0;
    char *p = t->blob, *end = t->blob + strlen(t->blob);
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *e = nl ? nl : end;
        size_t n = (size_t)(e - p);
        if (n && p[n - 1] == '\r')
            n--;
        if (n) {
            vocab_insert(t, p, n, id);
            size_t l = (n > 2 && p[0] == '#' && p[1] == '#') ? n - 2 : n;
            if (l > t->maxlen)
                t->maxlen = l;
        }
        id++;
        p = nl ? nl + 1 : end;
    }
    t->unk = vocab_find(t, 0, "[UNK]", 5);
    t->cls = vocab_find(t, 0, "[CLS]", 5);
    t->sep = vocab_find(t, 0, "[SEP]", 5);
    if (t->unk < 0 || t->cls < 0 || t->sep < 0 ||
        vocab_find(t, 0, "[PAD]", 5) < 0) {
        rc = kb_err_set(err, KB_ERR_MODEL,
                        "vocabulary '%s' lacks [UNK]/[CLS]/[SEP]/[PAD]; run 'kb model fetch' or set KB_MODEL_DIR",
                        vocab_path);
        goto out;
    }
    *out = t;
    t = NULL;
out:
    kb_buf_release(&b);
    kb_tokenizer_free(t);
    return rc;
}

kb_rc kb_tokenizer_open(const char *vocab_path, kb_tokenizer **out,
                        kb_err *err)
{
    return tokenizer_load(vocab_path, NULL, out, err);
}

kb_rc kb_tokenizer_open_model(const char *model_dir, kb_tokenizer **out,
                              kb_err *err)
{
    *out = NULL;
    char *vocab = kb_path_join(model_dir, "vocab.txt");
    if (!vocab)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = tokenizer_load(vocab, VOCAB_SHA256, out, err);
    free(vocab);
    return rc;
}

void kb_tokenizer_free(kb_tokenizer *tok)
{
    if (!tok)
        return;
    free(tok->blob);
    free(tok->slots);
    free(tok);
}

/* ------------------------------------------------------------ pieces */

/* Where pieces go: ids[0..max) are stored, n counts all of them; once
 * n reaches stop (0: never) the rest of the text is not looked at. */
typedef struct {
    const kb_tokenizer *tok;
    int32_t *ids;
    size_t max;
    size_t n;
    size_t stop;
    char word[WORD_BUF];
    size_t wlen;       /* bytes in word (valid while wchars <= MAX_WORD_CHARS) */
    size_t wchars;
} sink;

static void emit(sink *k, int32_t id)
{
    if (k->n < k->max)
        k->ids[k->n] = id;
    k->n++;
}

static bool done(const sink *k)
{
    return k->stop && k->n >= k->stop;
}

/* WordPiece of the current word, greedy longest match first. */
static void flush_word(sink *k)
{
    if (!k->wchars)
        return;
    const kb_tokenizer *t = k->tok;
    if (k->wchars > MAX_WORD_CHARS) {
        emit(k, t->unk);
        goto out;
    }
    const char *w = k->word;
    size_t len = k->wlen, start = 0, first = k->n;
    while (start < len) {
        size_t end = len;
        if (end - start > t->maxlen)
            end = start + t->maxlen;
        int32_t id = -1;
        while (end > start) {
            /* only cut at character boundaries */
            if (end < len && ((unsigned char)w[end] & 0xC0) == 0x80) {
                end--;
                continue;
            }
            id = vocab_find(t, start > 0, w + start, end - start);
            if (id >= 0)
                break;
            end--;
        }
        if (id < 0) {
            k->n = first;     /* the whole word is [UNK] */
            emit(k, t->unk);
            goto out;
        }
        emit(k, id);
        start = end;
    }
out:
    k->wlen = k->wchars = 0;
}

static void word_add(sink *k, int32_t c)
{
    k->wchars++;
    if (k->wchars > MAX_WORD_CHARS)
        return;   /* [UNK] anyway: only count */
    k->wlen += (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)k->word + k->wlen);
}

static void single(sink *k, int32_t c)
{
    flush_word(k);
    word_add(k, c);
    flush_word(k);
}

static bool is_cjk(int32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool is_punct(int32_t c)
{
    if (c < 0x80)
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) ||
               (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return true;
    default:
        return false;
    }
}

/* A normalised character (accents stripped, lower-cased) into the stream. */
static void put_char(sink *k, int32_t c)
{
    if (is_punct(c))
        single(k, c);
    else
        word_add(k, c);
}

/* One character of the raw text (not ASCII). */
static void put_unicode(sink *k, int32_t c)
{
    if (c == 0xFFFD)
        return;
    utf8proc_category_t cat = utf8proc_category(c);
    switch (cat) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CS:
        return;
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
        flush_word(k);
        return;
    default:
        break;
    }
    bool cjk = is_cjk(c);
    if (cjk)
        flush_word(k);
    utf8proc_int32_t d[32];
    int last = 0;
    utf8proc_ssize_t nd = utf8proc_decompose_char(c, d, 32, UTF8PROC_DECOMPOSE,
                                                  &last);
    if (nd < 0 || nd > 32) {
        d[0] = c;
        nd = 1;
    }
    for (utf8proc_ssize_t i = 0; i < nd; i++) {
        if (utf8proc_category(d[i]) == UTF8PROC_CATEGORY_MN)
            continue;
        put_char(k, utf8proc_tolower(d[i]));
    }
    if (cjk)
        flush_word(k);
}

static const char *const specials[] = { "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]" };

/* A special token written literally at s: its length (and *id), or 0. */
static size_t special_at(const kb_tokenizer *t, const char *s, int32_t *id)
{
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        size_t n = strlen(specials[i]);
        if (!strncmp(s, specials[i], n)) {
            *id = vocab_find(t, 0, specials[i], n);
            if (*id >= 0)
                return n;
        }
    }
    return 0;
}

static void run(sink *k, const char *text)
{
    const unsigned char *p = (const unsigned char *)text;
    k->wlen = k->wchars = 0;
    while (*p && !done(k)) {
        unsigned c = *p;
        if (c < 0x80) {
            p++;
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                flush_word(k);
            } else if (c < 0x20 || c == 0x7F) {
                /* control: dropped */
            } else if (c >= 'A' && c <= 'Z') {
                word_add(k, (int32_t)(c + 32));
            } else if (c == '[') {
                int32_t id;
                size_t n = special_at(k->tok, (const char *)p - 1, &id);
                if (n) {
                    flush_word(k);
                    emit(k, id);
                    p += n - 1;
                } else {
                    single(k, '[');
                }
            } else if (is_punct((int32_t)c)) {
                single(k, (int32_t)c);
            } else {
                word_add(k, (int32_t)c);
            }
            continue;
        }
        utf8proc_int32_t cp;
        utf8proc_ssize_t n = utf8proc_iterate(p, -1, &cp);
        if (n <= 0) {
            p++;       /* invalid UTF-8: a replacement character, dropped */
            continue;
        }
        p += n;
        put_unicode(k, cp);
    }
    if (!done(k))
        flush_word(k);
}

kb_rc kb_tokenizer_encode(const kb_tokenizer *tok, const char *text,
                          int32_t *ids, size_t max, size_t *n)
{
    *n = 0;
    if (max < 2)
        return KB_ERR_USAGE;
    sink k;
    k.tok = tok;
    k.ids = ids + 1;
    k.max = max - 2;
    k.n = 0;
    k.stop = max - 2 + 1;   /* one more than fits: enough to know it is cut */
    run(&k, text ? text : "");
    size_t np = k.n < k.max ? k.n : k.max;
    ids[0] = tok->cls;
    ids[np + 1] = tok->sep;
    *n = np + 2;
    return KB_OK;
}

size_t kb_tokenizer_count(const kb_tokenizer *tok, const char *text)
{
    sink k;
    k.tok = tok;
    k.ids = NULL;
    k.max = 0;
    k.n = 0;
    k.stop = 0;
    run(&k, text ? text : "");
    return k.n;
}
