/* task_candidate.c - candidate source: what its header comments ask
 * for (kb-launch, kb-tensormap, kb-verify lines) and the refusal of source
 * a verification cannot trust (%globaltimer, managed memory, device-side
 * allocation and launches, host APIs, includes). */
#include "verify/verify.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ candidate source */

/* Copies src with comments blanked out (newlines kept), and the insides of
 * string/char literals blanked too unless keep_strings. The copy has src's
 * length, so an offset in it is the same offset in src. Caller frees. */
static char *strip_comments(const char *src, int keep_strings)
{
    size_t n = strlen(src);
    char *o = malloc(n + 1);
    if (!o)
        return NULL;
    size_t i = 0;
    while (i < n) {
        if (src[i] == '/' && src[i + 1] == '/') {
            while (i < n && src[i] != '\n')
                o[i++] = ' ';
        } else if (src[i] == '/' && src[i + 1] == '*') {
            o[i++] = ' ';
            o[i++] = ' ';
            while (i < n && !(src[i] == '*' && src[i + 1] == '/')) {
                o[i] = src[i] == '\n' ? '\n' : ' ';
                i++;
            }
            for (int k = 0; k < 2 && i < n; k++)
                o[i++] = ' ';
        } else if (src[i] == '"' || src[i] == '\'') {
            char q = src[i];
            o[i++] = q;
            while (i < n && src[i] != q && src[i] != '\n') {
                if (src[i] == '\\' && i + 1 < n) {
                    o[i] = keep_strings ? src[i] : ' ';
                    i++;
                }
                o[i] = keep_strings ? src[i] : ' ';
                i++;
            }
            if (i < n)
                o[i] = src[i], i++;
        } else {
            o[i] = src[i];
            i++;
        }
    }
    o[n] = '\0';
    return o;
}

/* 1 if word occurs in s as a whole identifier (followed by '(' when call). */
static int has_word(const char *s, const char *word, int call)
{
    size_t wl = strlen(word);
    for (const char *p = s; (p = strstr(p, word)); p += wl) {
        if (p > s && (isalnum((unsigned char)p[-1]) || p[-1] == '_'))
            continue;
        const char *q = p + wl;
        if (isalnum((unsigned char)*q) || *q == '_')
            continue;
        if (!call)
            return 1;
        while (isspace((unsigned char)*q))
            q++;
        if (*q == '(')
            return 1;
    }
    return 0;
}

/* Copies code (comments already blanked, strings kept) with adjacent string
 * literals joined, as the compiler joins them: "%%global" "timer" becomes
 * "%%globaltimer". Caller frees. */
static char *join_strings(const char *code)
{
    size_t n = strlen(code);
    char *o = malloc(n + 1);
    if (!o)
        return NULL;
    size_t i = 0, k = 0;
    while (i < n) {
        char c = code[i];
        if (c == '\'') {
            o[k++] = code[i++];
            while (i < n && code[i] != '\'' && code[i] != '\n') {
                if (code[i] == '\\' && i + 1 < n)
                    o[k++] = code[i++];
                o[k++] = code[i++];
            }
            if (i < n)
                o[k++] = code[i++];
        } else if (c == '"') {
            o[k++] = code[i++];
            for (;;) {
                while (i < n && code[i] != '"' && code[i] != '\n') {
                    if (code[i] == '\\' && i + 1 < n)
                        o[k++] = code[i++];
                    o[k++] = code[i++];
                }
                if (i >= n || code[i] != '"')
                    break;
                /* closing quote: another literal after blanks continues it */
                size_t j = i + 1;
                while (j < n && isspace((unsigned char)code[j]))
                    j++;
                if (j < n && code[j] == '"') {
                    i = j + 1;
                    continue;
                }
                o[k++] = code[i++];
                break;
            }
        } else {
            o[k++] = code[i++];
        }
    }
    o[k] = '\0';
    return o;
}

/* Marks the candidate refused and appends the first refusal's reason to
 * why; later ones are not kept. Out of memory why is emptied, never left
 * with part of a reason: the refusal stands, and kb_verify_refuse's
 * caller reads the empty reason as out of memory. */
static void refuse(kb_buf *why, int *refused, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(kb_buf *why, int *refused, const char *fmt, ...)
{
    if (*refused)
        return;
    *refused = 1;
    va_list ap;
    va_start(ap, fmt);
    if (kb_buf_vprintf(why, fmt, ap) != KB_OK)
        kb_buf_reset(why);
    va_end(ap);
}

int kb_verify_refuse(const char *src, kb_buf *why)
{
    /* %globaltimer sits in asm strings, so it is looked for in the source
     * without comments but with its string literals, joined as the compiler
     * joins them; everything else in the source without either. */
    char *code = strip_comments(src, 0);
    char *withstr = strip_comments(src, 1);
    char *joined = withstr ? join_strings(withstr) : NULL;
    int refused = 0;
    if (!code || !joined) {
        free(code);
        free(withstr);
        free(joined);
        refuse(why, &refused, "out of memory");
        return 1;
    }
    if (strstr(joined, "globaltimer"))
        refuse(why, &refused, "reads %%globaltimer: kb-verify owns timing");
    free(withstr);
    free(joined);
    if (has_word(code, "__managed__", 0))
        refuse(why, &refused,
               "declares __managed__ memory: kb-verify owns allocation");
    if (has_word(code, "malloc", 1) || has_word(code, "free", 1) ||
        has_word(code, "cudaMalloc", 1) || has_word(code, "new", 0) ||
        has_word(code, "delete", 0))
        refuse(why, &refused, "allocates memory on the device "
               "(malloc/free/new): kb-verify owns allocation");
    if (strstr(code, "<<<") || has_word(code, "cudaLaunchDevice", 1) ||
        has_word(code, "cudaGetParameterBuffer", 1) ||
        has_word(code, "cudaGraphLaunch", 1) ||
        has_word(code, "cudaLaunchKernel", 1))
        refuse(why, &refused, "launches kernels from the device: kb-verify "
               "owns the launches");
    if (has_word(code, "cudaStreamCreate", 1) ||
        has_word(code, "cudaStreamCreateWithFlags", 1) ||
        has_word(code, "cudaDeviceSynchronize", 1) ||
        has_word(code, "cudaEventRecord", 1))
        refuse(why, &refused, "calls the CUDA runtime from the device: "
               "kb-verify owns streams and events");
    for (const char *p = code; (p = strstr(p, "#")); p++) {
        const char *q = p + 1;
        while (*q == ' ' || *q == '\t')
            q++;
        if (strncmp(q, "include", 7) != 0)
            continue;
        q += 7;
        while (*q == ' ' || *q == '\t')
            q++;
        /* NVRTC's own headers are fine; anything else is not there */
        static const char *ok[] = { "<cuda_bf16.h>", "<cuda_fp16.h>",
                                    "<mma.h>", "<cuda/barrier>",
                                    "<cooperative_groups.h>",
                                    "<cooperative_groups/reduce.h>",
                                    "<cuda_pipeline.h>", "<stdint.h>",
                                    "<cstdint>", "<math_constants.h>" };
        int good = 0;
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
            if (strncmp(q, ok[i], strlen(ok[i])) == 0)
                good = 1;
        if (!good) {
            /* code has the name's quotes blanked: print it from src, which
             * has the same offsets, up to the line's end in code (where a
             * trailing comment is already blank) */
            const char *e = q;
            while (*e && *e != '\n')
                e++;
            while (e > q && isspace((unsigned char)e[-1]))
                e--;
            refuse(why, &refused, "includes '%.*s': a candidate is "
                   "self-contained device code", (int)(e - q), src + (q - code));
        }
    }
    free(code);
    return refused;
}

/* Splits s at top-level commas into up to max expressions. */
static kb_rc split_list(const char *s, size_t len, char **out, int max,
                        const char *what, kb_err *err)
{
    int depth = 0, k = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        char c = i < len ? s[i] : ',';
        if (c == '(' && ++depth > KB_EXPR_MAX_DEPTH)
            return kb_err_set(err, KB_ERR_PARSE, "%s list nested too deeply (at "
                              "most %d levels)", what, KB_EXPR_MAX_DEPTH);
        else if (c == ')')
            depth--;
        else if (c == ',' && depth == 0) {
            if (k == max || i == start)
                return kb_err_set(err, KB_ERR_PARSE, "bad %s list '%.*s'",
                                  what, (int)len, s);
            out[k++] = kb_strndup(s + start, i - start);
            start = i + 1;
        }
        if (depth < 0)
            return kb_err_set(err, KB_ERR_PARSE, "unbalanced ')' in %s list '%.*s'",
                              what, (int)len, s);
    }
    if (depth != 0)
        return kb_err_set(err, KB_ERR_PARSE, "unbalanced '(' in %s list '%.*s'",
                          what, (int)len, s);
    return KB_OK;
}

void kb_cand_header_release(kb_cand_header *h)
{
    kb_launches_free(h->launches, h->nlaunches);
    for (size_t i = 0; i < h->nmaps; i++) {
        free(h->maps[i].buffer);
        for (int d = 0; d < KB_TMAP_MAX_RANK; d++) {
            free(h->maps[i].dims[d]);
            free(h->maps[i].box[d]);
        }
    }
    free(h->maps);
    free(h->arch);
    memset(h, 0, sizeof *h);
}

/* Calls item(key, value) for each key=value of a header line's rest. */
typedef kb_rc (*header_item_fn)(void *obj, const char *k, size_t kl,
                                const char *v, size_t vl, kb_err *err);

static kb_rc header_items(const char *q, const char *stop, const char *tag,
                          header_item_fn item, void *obj, kb_err *err)
{
    while (q < stop) {
        while (q < stop && isspace((unsigned char)*q))
            q++;
        const char *ks = q;
        while (q < stop && !isspace((unsigned char)*q))
            q++;
        if (q == ks)
            break;
        const char *eq = memchr(ks, '=', (size_t)(q - ks));
        if (!eq)
            return kb_err_set(err, KB_ERR_PARSE, "bad %s item '%.*s' (want key=value)",
                              tag, (int)(q - ks), ks);
        kb_rc rc = item(obj, ks, (size_t)(eq - ks), eq + 1, (size_t)(q - eq - 1), err);
        if (rc != KB_OK)
            return rc;
    }
    return KB_OK;
}

static int key_is(const char *k, size_t kl, const char *want)
{
    return kl == strlen(want) && strncmp(k, want, kl) == 0;
}

static kb_rc repeated(const char *tag, const char *k, size_t kl, kb_err *err)
{
    return kb_err_set(err, KB_ERR_PARSE, "%s key '%.*s' given twice", tag,
                      (int)kl, k);
}

static kb_rc launch_item(void *obj, const char *k, size_t kl, const char *v,
                         size_t vl, kb_err *err)
{
    kb_launch *x = obj;
    if ((key_is(k, kl, "kernel") && x->kernel) || (key_is(k, kl, "grid") && x->grid[0]) ||
        (key_is(k, kl, "block") && x->block[0]) || (key_is(k, kl, "shared") && x->shared))
        return repeated("kb-launch", k, kl, err);
    if (key_is(k, kl, "kernel"))
        x->kernel = kb_strndup(v, vl);
    else if (key_is(k, kl, "grid"))
        return split_list(v, vl, x->grid, 3, "kb-launch dimension", err);
    else if (key_is(k, kl, "block"))
        return split_list(v, vl, x->block, 3, "kb-launch dimension", err);
    else if (key_is(k, kl, "shared"))
        x->shared = kb_strndup(v, vl);
    else
        return kb_err_set(err, KB_ERR_PARSE, "unknown kb-launch key '%.*s'",
                          (int)kl, k);
    return KB_OK;
}

static kb_rc tensormap_item(void *obj, const char *k, size_t kl, const char *v,
                            size_t vl, kb_err *err)
{
    kb_tensormap *m = obj;
    if ((key_is(k, kl, "buffer") && m->buffer) || (key_is(k, kl, "dims") && m->dims[0]) ||
        (key_is(k, kl, "box") && m->box[0]) || (key_is(k, kl, "swizzle") && m->swizzle_set))
        return repeated("kb-tensormap", k, kl, err);
    if (key_is(k, kl, "buffer"))
        m->buffer = kb_strndup(v, vl);
    else if (key_is(k, kl, "dims"))
        return split_list(v, vl, m->dims, KB_TMAP_MAX_RANK, "kb-tensormap dims", err);
    else if (key_is(k, kl, "box"))
        return split_list(v, vl, m->box, KB_TMAP_MAX_RANK, "kb-tensormap box", err);
    else if (key_is(k, kl, "swizzle")) {
        static const int sizes[] = { 0, 32, 64, 128 };
        m->swizzle_set = 1;
        m->swizzle = -1;
        for (int i = 0; i < 4; i++) {
            char want[8];
            snprintf(want, sizeof want, "%d", sizes[i]);
            if (key_is(v, vl, want))
                m->swizzle = sizes[i];
        }
        if (m->swizzle < 0)
            return kb_err_set(err, KB_ERR_PARSE, "kb-tensormap swizzle must be "
                              "0, 32, 64 or 128 (bytes), not '%.*s'", (int)vl, v);
    } else {
        return kb_err_set(err, KB_ERR_PARSE, "unknown kb-tensormap key '%.*s'",
                          (int)kl, k);
    }
    return KB_OK;
}

static int list_len(char *const *l, int max)
{
    int n = 0;
    while (n < max && l[n])
        n++;
    return n;
}

/* Grows the array *items of *n elements of size bytes by one zeroed
 * element and returns it; NULL (the array untouched) when out of memory. */
static void *append_zeroed(void **items, size_t *n, size_t size)
{
    char *p = realloc(*items, (*n + 1) * size);
    if (!p)
        return NULL;
    *items = p;
    memset(p + *n * size, 0, size);
    return p + (*n)++ * size;
}

kb_rc kb_cand_header_parse(const char *src, kb_cand_header *out, kb_err *err)
{
    kb_cand_header h;
    memset(&h, 0, sizeof h);
    memset(out, 0, sizeof *out);
    kb_rc rc = KB_OK;
    for (const char *line = src; line && *line && rc == KB_OK;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *p = line, *stop = line + len;
        while (p < stop && isspace((unsigned char)*p))
            p++;
        if (strncmp(p, "//", 2) == 0) {
            p += 2;
            while (*p == ' ' || *p == '\t')
                p++;
        } else {
            p = stop;
        }
        if (strncmp(p, "kb-launch:", 10) == 0) {
            kb_launch *x = append_zeroed((void **)&h.launches, &h.nlaunches, sizeof *x);
            if (!x) {
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                break;
            }
            rc = header_items(p + 10, stop, "kb-launch", launch_item, x, err);
            if (rc == KB_OK && (!x->kernel || !x->grid[0] || !x->block[0]))
                rc = kb_err_set(err, KB_ERR_PARSE,
                                "kb-launch needs kernel=, grid= and block=");
        } else if (strncmp(p, "kb-tensormap:", 13) == 0) {
            kb_tensormap *m = append_zeroed((void **)&h.maps, &h.nmaps, sizeof *m);
            if (!m) {
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                break;
            }
            rc = header_items(p + 13, stop, "kb-tensormap", tensormap_item, m, err);
            m->rank = list_len(m->dims, KB_TMAP_MAX_RANK);
            if (rc == KB_OK && (!m->buffer || !m->rank ||
                                list_len(m->box, KB_TMAP_MAX_RANK) != m->rank))
                rc = kb_err_set(err, KB_ERR_PARSE,
                                "kb-tensormap needs buffer=, dims= and box= "
                                "with as many entries as dims");
        } else if (strncmp(p, "kb-verify:", 10) == 0) {
            const char *a = strstr(p, "arch=");
            if (a && a < stop) {
                a += 5;
                const char *e = a;
                while (e < stop && !isspace((unsigned char)*e))
                    e++;
                free(h.arch);
                h.arch = kb_strndup(a, (size_t)(e - a));
            }
        }
        line = end ? end + 1 : NULL;
    }
    if (rc != KB_OK) {
        kb_cand_header_release(&h);
        return rc;
    }
    *out = h;
    return KB_OK;
}
