/* extract.c - the kernel of an LLM reply (its fenced CUDA block, among
 * prose and other blocks), what is wrong with a reply that has none, in
 * words fed back to the model, and a candidate's normalised source hash
 * (gen.h, "extract.c"). */
#include "generator/gen.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* A reply is an LLM's text: a few kB, rarely more. A block beyond this is
 * no kernel a candidate may be. */
#define BLOCK_MAX_BYTES (1u << 20)

void kb_extracted_release(kb_extracted *x)
{
    if (!x)
        return;
    free(x->source);
    free(x->message);
    x->source = x->message = NULL;
    x->status = KB_EXTRACT_OK;
}

/* ------------------------------------------------------------------ blocks */

/* One fenced block: [start, end) of the reply, the code between the fences. */
typedef struct {
    size_t start, end;
    char info[32];             /* the info string's first word ("cuda") */
} block;

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return 0;
    return 1;
}

/* The length of the fence that opens (or closes) line [s, s+n): three or
 * more '`' or '~' after at most three spaces; 0 if it is none. *ch gets
 * the fence character, *after where the info string starts. */
static size_t fence_at(const char *s, size_t n, char *ch, size_t *after)
{
    size_t i = 0;
    while (i < n && i < 3 && s[i] == ' ')
        i++;
    if (i >= n || (s[i] != '`' && s[i] != '~'))
        return 0;
    char c = s[i];
    size_t k = i;
    while (k < n && s[k] == c)
        k++;
    if (k - i < 3)
        return 0;
    *ch = c;
    *after = k;
    return k - i;
}

/* The fenced blocks of text, in order. A block the reply leaves open (a
 * reply cut at its token cap) runs to the end. *out is the caller's to
 * free. */
static kb_rc find_blocks(const char *text, block **out, size_t *n)
{
    block *bs = NULL;
    size_t nb = 0, cap = 0;
    size_t len = strlen(text), pos = 0;
    int open = 0;
    char open_ch = 0;
    size_t open_len = 0;
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        size_t next = nl ? pos + ll + 1 : len;
        char ch = 0;
        size_t after = 0, fl = fence_at(line, ll, &ch, &after);
        if (!open && fl) {
            if (KB_GROW(bs, nb + 1, cap) != KB_OK) {
                free(bs);
                return KB_ERR_NOMEM;
            }
            block *b = &bs[nb++];
            memset(b, 0, sizeof *b);
            size_t i = after, k = 0;
            while (i < ll && line[i] == ' ')
                i++;
            while (i < ll && k + 1 < sizeof b->info && !isspace((unsigned char)line[i]) &&
                   line[i] != '{')
                b->info[k++] = (char)tolower((unsigned char)line[i++]);
            b->start = b->end = next;
            open = 1, open_ch = ch, open_len = fl;
        } else if (open && fl && ch == open_ch && fl >= open_len &&
                   is_blank(line + after, ll - after)) {
            bs[nb - 1].end = pos;
            open = 0;
        }
        pos = next;
    }
    if (open)
        bs[nb - 1].end = len;
    *out = bs;
    *n = nb;
    return KB_OK;
}

/* ------------------------------------------------------------------ scanning */

/* A copy of src[0, n) with comments replaced by spaces (newlines kept),
 * string and character literals left as they are, so that offsets agree
 * with src. Caller frees; NULL out of memory. */
static char *blank_comments(const char *src, size_t n)
{
    char *c = malloc(n + 1);
    if (!c)
        return NULL;
    memcpy(c, src, n);
    c[n] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (c[i] == '"' || c[i] == '\'') {
            char q = c[i];
            for (i++; i < n && c[i] != q && c[i] != '\n'; i++)
                if (c[i] == '\\' && i + 1 < n)
                    i++;
        } else if (c[i] == '/' && i + 1 < n && c[i + 1] == '/') {
            for (; i < n && c[i] != '\n'; i++)
                c[i] = ' ';
        } else if (c[i] == '/' && i + 1 < n && c[i + 1] == '*') {
            c[i] = c[i + 1] = ' ';
            for (i += 2; i < n && !(c[i] == '*' && i + 1 < n && c[i + 1] == '/'); i++)
                if (c[i] != '\n')
                    c[i] = ' ';
            if (i < n)
                c[i] = c[i + 1] = ' ', i++;
        }
    }
    return c;
}

static int is_word(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_';
}

/* The next occurrence of word w in code from pos, whole (not part of a
 * longer identifier), or NULL. */
static const char *find_word(const char *code, const char *from, const char *w)
{
    size_t wl = strlen(w);
    for (const char *p = strstr(from, w); p; p = strstr(p + 1, w))
        if ((p == code || !is_word(p[-1])) && !is_word(p[wl]))
            return p;
    return NULL;
}

static const char *skip_space(const char *p)
{
    while (*p && isspace((unsigned char)*p))
        p++;
    return p;
}

/* Past a balanced (...) that p stands on; p itself if it stands on none. */
static const char *skip_parens(const char *p)
{
    if (*p != '(')
        return p;
    int depth = 0;
    for (; *p; p++) {
        if (*p == '(')
            depth++;
        else if (*p == ')' && --depth == 0)
            return p + 1;
    }
    return p;
}

/* The name of the __global__ function declared at g (which points at
 * "__global__"): the identifier before its parameter list, into name[n].
 * 0 if it cannot be told. */
static int kernel_name_at(const char *g, char *name, size_t n)
{
    const char *p = g + strlen("__global__");
    const char *last = NULL;
    size_t lastlen = 0;
    for (int guard = 0; *p && guard < 64; guard++) {
        p = skip_space(p);
        if (*p == '(') {
            if (last && strncmp(last, "__launch_bounds__", lastlen) == 0 &&
                lastlen == strlen("__launch_bounds__")) {
                p = skip_parens(p);
                last = NULL;
                continue;
            }
            break;
        }
        if (is_word(*p)) {
            last = p;
            while (is_word(*p))
                p++;
            lastlen = (size_t)(p - last);
        } else if (*p == '*' || *p == '&') {
            p++;
        } else {
            return 0;
        }
    }
    if (!last || *p != '(' || lastlen + 1 > n)
        return 0;
    memcpy(name, last, lastlen);
    name[lastlen] = '\0';
    return 1;
}

/* 1 if the __global__ at g has C linkage: `extern "C"` in its own
 * declaration (since the previous ';', '}' or '{' that does not open an
 * extern "C" block), or inside an `extern "C" { ... }` block. */
static int has_c_linkage(const char *code, const char *g)
{
    const char *p = g;
    while (p > code && p[-1] != ';' && p[-1] != '}' && p[-1] != '{')
        p--;
    for (const char *e = find_word(code, p, "extern"); e && e < g;
         e = find_word(code, e + 1, "extern")) {
        const char *q = skip_space(e + 6);
        if (strncmp(q, "\"C\"", 3) == 0)
            return 1;
    }
    /* inside extern "C" { ... } */
    for (const char *e = find_word(code, code, "extern"); e && e < g;
         e = find_word(code, e + 1, "extern")) {
        const char *q = skip_space(e + 6);
        if (strncmp(q, "\"C\"", 3) != 0)
            continue;
        q = skip_space(q + 3);
        if (*q != '{')
            continue;
        int depth = 0;
        const char *r = q;
        for (; *r; r++) {
            if (*r == '{')
                depth++;
            else if (*r == '}' && --depth == 0)
                break;
        }
        if (g > q && g < r)
            return 1;
    }
    return 0;
}

/* What one block holds. */
typedef struct {
    int kernels;               /* extern "C" __global__ functions */
    int mangled;               /* __global__ functions without C linkage */
    int defines_wanted;        /* one of the kernels is kernel_name */
    char first_kernel[128];
    char first_mangled[128];
    const char *host;          /* the first host construct found, or NULL */
    int host_line;
} block_scan;

/* Host code a candidate may not carry: kb-verify owns allocation, inputs
 * and launches. */
static const char *const host_words[] = {
    "main", "cudaMalloc", "cudaMallocManaged", "cudaMemcpy", "cudaFree",
    "cudaDeviceSynchronize", "cudaStreamCreate", "cudaEventCreate", "malloc", NULL
};

static int line_of(const char *code, const char *p)
{
    int line = 1;
    for (const char *q = code; q < p; q++)
        if (*q == '\n')
            line++;
    return line;
}

static void scan_block(const char *code, const char *kernel_name, block_scan *s)
{
    memset(s, 0, sizeof *s);
    for (const char *g = find_word(code, code, "__global__"); g;
         g = find_word(code, g + 1, "__global__")) {
        char name[128];
        if (!kernel_name_at(g, name, sizeof name))
            continue;
        if (has_c_linkage(code, g)) {
            if (!s->kernels++)
                memcpy(s->first_kernel, name, sizeof name);
            if (kernel_name && strcmp(name, kernel_name) == 0)
                s->defines_wanted = 1;
        } else if (!s->mangled++) {
            memcpy(s->first_mangled, name, sizeof name);
        }
    }
    const char *first = NULL, *what = NULL;
    for (size_t i = 0; host_words[i]; i++) {
        const char *w = find_word(code, code, host_words[i]);
        /* main and malloc are host code only as calls or definitions */
        while (w && *skip_space(w + strlen(host_words[i])) != '(')
            w = find_word(code, w + 1, host_words[i]);
        if (w && strcmp(host_words[i], "malloc") == 0) {
            /* a device malloc is kb-verify's to refuse, with its reason;
             * only a malloc beside main is host code */
            if (!find_word(code, code, "main"))
                w = NULL;
        }
        if (w && (!first || w < first))
            first = w, what = host_words[i];
    }
    const char *launch = strstr(code, "<<<");
    if (launch && (!first || launch < first))
        first = launch, what = "<<<...>>>";
    if (first) {
        s->host = what;
        s->host_line = line_of(code, first);
    }
}

/* ------------------------------------------------------------------ extract */

static int lang_ok(const char *info)
{
    static const char *const ok[] = { "", "cuda", "cu", "c++", "cpp", "c", "cc", "cxx",
                                      "cuh", "h", "hpp", NULL };
    for (size_t i = 0; ok[i]; i++)
        if (strcmp(info, ok[i]) == 0)
            return 1;
    return 0;
}

static kb_rc set_message(kb_extracted *out, kb_extract_status st, kb_buf *m)
{
    out->status = st;
    out->message = kb_buf_detach(m);
    return out->message ? KB_OK : KB_ERR_NOMEM;
}

/* No fences: a reply that is all code is taken whole (one block, *whole
 * set). */
static kb_rc whole_reply(const char *reply, block **bs, size_t *nb, int *whole)
{
    char *c = blank_comments(reply, strlen(reply));
    if (!c)
        return KB_ERR_NOMEM;
    kb_rc rc = KB_OK;
    if (find_word(c, c, "__global__")) {
        if (!(*bs = malloc(sizeof **bs))) {
            rc = KB_ERR_NOMEM;
        } else {
            memset(*bs, 0, sizeof **bs);
            (*bs)->end = strlen(reply);
            *nb = 1;
            *whole = 1;
        }
    }
    free(c);
    return rc;
}

/* The blocks' verdict: the best without host code, the best with, what
 * the scan saw. */
typedef struct {
    long pick, pick_host;
    int pick_rank, host_rank, code_blocks, mangled;
    block_scan chosen_host;
    char mangled_name[128];
} block_pick;

/* The block to take: the first that defines kernel_name without host
 * code, else the first kernel block without; a block with host code only
 * when it defines a better kernel than any without (its host code is then
 * what the model is told of). */
static kb_rc pick_block(const char *reply, const block *bs, size_t nb, int whole,
                        const char *kernel_name, block_pick *p)
{
    memset(p, 0, sizeof *p);
    p->pick = p->pick_host = -1;
    block_scan sc;
    for (size_t i = 0; i < nb; i++) {
        if (!whole && !lang_ok(bs[i].info))
            continue;
        size_t n = bs[i].end - bs[i].start;
        if (n > BLOCK_MAX_BYTES || is_blank(reply + bs[i].start, n))
            continue;
        p->code_blocks++;
        char *c = blank_comments(reply + bs[i].start, n);
        if (!c)
            return KB_ERR_NOMEM;
        scan_block(c, kernel_name, &sc);
        free(c);
        if (sc.mangled && !p->mangled++)
            memcpy(p->mangled_name, sc.first_mangled, sizeof p->mangled_name);
        if (!sc.kernels)
            continue;
        int rank = sc.defines_wanted ? 2 : 1;
        if (!sc.host && rank > p->pick_rank)
            p->pick = (long)i, p->pick_rank = rank;
        if (sc.host && rank > p->host_rank)
            p->pick_host = (long)i, p->host_rank = rank, p->chosen_host = sc;
    }
    return KB_OK;
}

/* Block b of reply as the source, with one trailing newline (none of the
 * fence's indentation games). */
static kb_rc take_block(const char *reply, const block *b, kb_extracted *out)
{
    size_t n = b->end - b->start;
    if (!(out->source = malloc(n + 2)))
        return KB_ERR_NOMEM;
    memcpy(out->source, reply + b->start, n);
    while (n && (out->source[n - 1] == '\n' || out->source[n - 1] == ' ' ||
                 out->source[n - 1] == '\r'))
        n--;
    out->source[n++] = '\n';
    out->source[n] = '\0';
    out->status = KB_EXTRACT_OK;
    return KB_OK;
}

/* What the model is told when its reply holds no code. */
static kb_rc no_code(const char *kernel_name, kb_buf *m, kb_extracted *out)
{
    kb_rc rc = kb_buf_puts(m, "your reply holds no code: no fenced block and no kernel. "
                           "Answer with one ```cuda block that holds the whole candidate: "
                           "the extern \"C\" __global__ kernel");
    if (rc == KB_OK && kernel_name)
        rc = kb_buf_printf(m, " '%s'", kernel_name);
    if (rc == KB_OK)
        rc = kb_buf_puts(m, " and its __device__ helpers, nothing else.");
    if (rc == KB_OK)
        rc = set_message(out, KB_EXTRACT_NO_CODE, m);
    return rc;
}

/* What the model is told when its kernel comes with host code, or when
 * its code defines no kernel. */
static kb_rc no_kernel(const block_pick *p, const char *kernel_name, kb_buf *m,
                       kb_extracted *out)
{
    kb_rc rc;
    if (p->pick_host >= 0) {
        rc = kb_buf_printf(m, "your kernel comes with host code (%s, line %d of its "
                           "block): kb-verify owns allocation, inputs, the stream and the "
                           "launches. Send device code only: the extern \"C\" __global__ "
                           "kernel and its __device__ helpers in one ```cuda block, with "
                           "`// kb-launch:` lines if the launch is not the task's.",
                           p->chosen_host.host, p->chosen_host.host_line);
        if (rc == KB_OK)
            rc = set_message(out, KB_EXTRACT_HOST_CODE, m);
        return rc;
    }
    rc = kb_buf_printf(m, "your reply's code (%d block%s) defines no extern \"C\" "
                       "__global__ kernel", p->code_blocks, p->code_blocks == 1 ? "" : "s");
    if (rc == KB_OK && p->mangled)
        rc = kb_buf_printf(m, ": '%s' is __global__ but has C++ linkage, so its name "
                           "is mangled and kb-verify cannot find it; declare it "
                           "extern \"C\" __global__", p->mangled_name);
    if (rc == KB_OK && kernel_name)
        rc = kb_buf_printf(m, ". The task launches '%s'.", kernel_name);
    else if (rc == KB_OK)
        rc = kb_buf_putc(m, '.');
    if (rc == KB_OK)
        rc = set_message(out, KB_EXTRACT_NO_KERNEL, m);
    return rc;
}

kb_rc kb_gen_extract(const char *reply, const char *kernel_name, kb_extracted *out,
                     kb_err *err)
{
    memset(out, 0, sizeof *out);
    if (!reply)
        reply = "";
    block *bs = NULL;
    size_t nb = 0;
    int whole = 0;
    block_pick p;
    kb_buf m;
    kb_buf_init(&m, 0);
    kb_rc rc = find_blocks(reply, &bs, &nb);
    if (rc == KB_OK && nb == 0)
        rc = whole_reply(reply, &bs, &nb, &whole);
    if (rc == KB_OK && nb == 0)
        rc = no_code(kernel_name, &m, out);
    else if (rc == KB_OK && (rc = pick_block(reply, bs, nb, whole, kernel_name, &p)) == KB_OK)
        rc = p.pick >= 0 && p.pick_rank >= p.host_rank ? take_block(reply, &bs[p.pick], out)
                                                       : no_kernel(&p, kernel_name, &m, out);
    free(bs);
    kb_buf_release(&m);
    if (rc != KB_OK) {
        kb_extracted_release(out);
        return kb_err_set(err, rc, "out of memory extracting a kernel from a reply");
    }
    return KB_OK;
}

/* ------------------------------------------------------------------ hash */

/* A line comment that kb-verify reads (// kb-launch:, // kb-tensormap:,
 * // kb-verify:) is part of the candidate, not a comment. */
static int directive_at(const char *p)
{
    p += 2;
    while (*p == ' ' || *p == '\t')
        p++;
    return strncmp(p, "kb-launch:", 10) == 0 || strncmp(p, "kb-tensormap:", 13) == 0 ||
           strncmp(p, "kb-verify:", 10) == 0;
}

static int is_bracket(char c)
{
    return strchr("()[]{};,", c) != NULL;
}

/* The normal form: comments dropped (but kb-verify's directives, kept as
 * lines), whitespace dropped except one space where two words or two
 * operator characters would otherwise run together, and the newline that
 * ends a preprocessor line. */
static kb_rc normalise(const char *src, kb_buf *o)
{
    kb_rc rc = KB_OK;
    size_t n = strlen(src);
    int pp = 0, line_start = 1, pending_ws = 0, pending_nl = 0;
    char prev = 0;
    for (size_t i = 0; i < n && rc == KB_OK;) {
        char c = src[i];
        if (c == '/' && i + 1 < n && src[i + 1] == '/' && directive_at(src + i)) {
            const char *nl = strchr(src + i, '\n');
            size_t len = nl ? (size_t)(nl - (src + i)) : n - i;
            while (len && isspace((unsigned char)src[i + len - 1]))
                len--;
            if (o->len)
                rc = kb_buf_putc(o, '\n');
            if (rc == KB_OK)
                rc = kb_buf_append(o, src + i, len);
            if (rc == KB_OK)
                rc = kb_buf_putc(o, '\n');
            i = nl ? (size_t)(nl - src) : n;
            prev = '\n', pending_ws = pending_nl = 0;
            continue;
        }
        if (c == '/' && i + 1 < n && src[i + 1] == '/') {
            while (i < n && src[i] != '\n')
                i++;
            pending_ws = 1;
            continue;
        }
        if (c == '/' && i + 1 < n && src[i + 1] == '*') {
            const char *e = strstr(src + i + 2, "*/");
            i = e ? (size_t)(e - src) + 2 : n;
            pending_ws = 1;
            continue;
        }
        if (isspace((unsigned char)c)) {
            if (c == '\n') {
                if (pp)
                    pending_nl = 1;
                pp = 0;
                line_start = 1;
            }
            pending_ws = 1;
            i++;
            continue;
        }
        if (line_start && c == '#')
            pp = 1;
        line_start = 0;
        if (pending_nl && prev && prev != '\n')
            rc = kb_buf_putc(o, '\n');
        else if (pending_ws && prev && prev != '\n' &&
                 ((is_word(prev) && is_word(c)) ||
                  (ispunct((unsigned char)prev) && ispunct((unsigned char)c) &&
                   !is_bracket(prev) && !is_bracket(c) && prev != '"' && c != '"')))
            rc = kb_buf_putc(o, ' ');
        pending_ws = pending_nl = 0;
        if (rc != KB_OK)
            break;
        if (c == '"' || c == '\'') {
            /* a literal as it is */
            size_t j = i + 1;
            for (; j < n && src[j] != c && src[j] != '\n'; j++)
                if (src[j] == '\\' && j + 1 < n)
                    j++;
            if (j < n && src[j] == c)
                j++;
            rc = kb_buf_append(o, src + i, j - i);
            prev = src[j - 1];
            i = j;
            continue;
        }
        rc = kb_buf_putc(o, c);
        prev = c;
        i++;
    }
    return rc;
}

void kb_gen_source_hash(const char *source, char out[65])
{
    kb_buf o;
    kb_buf_init(&o, 0);
    if (normalise(source ? source : "", &o) == KB_OK)
        kb_sha256_hex(o.data ? o.data : "", o.len, out);
    else   /* out of memory: the source as it is, still a stable hash */
        kb_sha256_hex(source ? source : "", source ? strlen(source) : 0, out);
    kb_buf_release(&o);
}
