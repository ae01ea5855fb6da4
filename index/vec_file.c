/*
 * vec_file.c - the vector index file's layout, and a flat index searched
 * where it lies in the mapped file.
 *
 * A file is FAISS's serialized index followed by kb's trailer (95 bytes):
 *     kbfaiss1 <20-digit length of FAISS's bytes> <digest>\n
 * or, for an IDMap2 over a flat inner-product index (kb's default),
 *     <pad of zero bytes> FAISS's bytes kbfaiss2 <length> <digest>\n
 * where the pad (under 64 bytes) puts the vectors on a 64-byte boundary,
 * so that a fresh `kb query` or a server searches them in the mapping of
 * the file itself (the page cache): FAISS's reader copies them (17 MB for
 * the corpus: a quarter of a fresh hybrid query's time, in page faults,
 * zeroing and copying, and a second copy in every server), and FAISS
 * 1.7.3 cannot map a flat index. The digest is a SHA-256 tree of one
 * level: SHA-256 over the SHA-256 of each 4 MiB segment of what precedes
 * the trailer, the segments hashed on two threads.
 *
 * The flat search is what FAISS's own does for one query (its BLAS path,
 * which vector.c asks for): one matrix-vector product over the vectors,
 * then the best want by inner product, best first.
 */
#include "index/index.h"
#include "index/blas.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC1 "kbfaiss1 "
#define MAGIC2 "kbfaiss2 "
#define MAGIC_LEN (sizeof MAGIC1 - 1)
#define TRAILER_LEN (MAGIC_LEN + 20 + 1 + 64 + 1)
#define SEGMENT (4u << 20)
#define ALIGN 64

/* The tree digest of data[0, len) as hex into hex[65]; -1 out of
 * memory. */
static int tree_digest(const void *data, size_t len, char hex[65])
{
    size_t nseg = (len + SEGMENT - 1) / SEGMENT;
    unsigned char (*leaves)[32] = malloc((nseg ? nseg : 1) * sizeof *leaves);
    if (!leaves)
        return -1;
    kb_sha256_blocks(data, len, SEGMENT, leaves);
    kb_sha256_hex(leaves, nseg * sizeof *leaves, hex);
    free(leaves);
    return 0;
}

/* Readers of the little-endian fields FAISS writes (x86-64 and arm64
 * alike), at any alignment. */
static int32_t get_i32(const unsigned char *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static int64_t get_i64(const unsigned char *p)
{
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* FAISS's header of an index (write_index_header): d, ntotal, two
 * dummies, is_trained, metric_type (inner product: 0, no metric_arg). */
#define HEADER_LEN (4 + 8 + 8 + 8 + 1 + 4)

static int header_ok(const unsigned char *p, const char *fourcc, int32_t *d, int64_t *n)
{
    if (memcmp(p, fourcc, 4) != 0)
        return 0;
    p += 4;
    *d = get_i32(p);
    *n = get_i64(p + 4);
    return *d > 0 && *d <= 65536 && *n >= 0 && p[28] == 1 && get_i32(p + 29) == 0;
}

/* The offset of the vectors in FAISS's bytes data[0, len) when they are
 * an IDMap2 over a flat inner-product index, its parts filling them
 * exactly; else 0. */
static size_t flat_layout(const unsigned char *data, size_t len, int32_t *d, int64_t *n)
{
    int32_t d2;
    int64_t n2;
    size_t at = 2 * (4 + HEADER_LEN) + 8;
    if (len < at || !header_ok(data, "IxM2", d, n) ||
        !header_ok(data + 4 + HEADER_LEN, "IxFI", &d2, &n2) || d2 != *d || n2 != *n ||
        (uint64_t)*n > ((uint64_t)1 << 40) / (uint64_t)*d)
        return 0;
    size_t nf = (size_t)*n * (size_t)*d;
    if (get_i64(data + at - 8) != (int64_t)nf || len - at < nf * 4 + 8 ||
        get_i64(data + at + nf * 4) != *n || len != at + nf * 4 + 8 + (size_t)*n * 8)
        return 0;
    return at;
}

kb_rc kb_vec_file_wrap(const char *faiss, size_t len, kb_buf *out)
{
    int32_t d;
    int64_t n;
    size_t at = flat_layout((const unsigned char *)faiss, len, &d, &n);
    size_t pad = at ? (ALIGN - at % ALIGN) % ALIGN : 0;
    static const char zeros[ALIGN];
    size_t start = out->len;
    char hex[65];
    kb_rc rc = kb_buf_append(out, zeros, pad);
    if (rc == KB_OK)
        rc = kb_buf_append(out, faiss, len);
    if (rc != KB_OK)
        return rc;
    if (tree_digest(out->data + start, pad + len, hex) != 0)
        return KB_ERR_NOMEM;
    return kb_buf_printf(out, "%s%020zu %s\n", at ? MAGIC2 : MAGIC1, len, hex);
}

const char *kb_vec_file_read(const char *data, size_t size, int check, size_t *off,
                             size_t *len)
{
    static const char no_sum[] = "has no checksum (written by an older kb, or cut short)";
    if (size < TRAILER_LEN)
        return no_sum;
    const char *t = data + size - TRAILER_LEN;
    int v2 = memcmp(t, MAGIC2, MAGIC_LEN) == 0;
    if (!v2 && memcmp(t, MAGIC1, MAGIC_LEN) != 0)
        return no_sum;
    t += MAGIC_LEN;
    size_t n = 0;
    for (int i = 0; i < 20; i++) {
        if (t[i] < '0' || t[i] > '9')
            return "has a damaged checksum";
        n = n * 10 + (size_t)(t[i] - '0');
    }
    if (n > size - TRAILER_LEN)
        return "is not the size it was written with";
    size_t pad = size - TRAILER_LEN - n;
    for (size_t i = 0; i < pad; i++)
        if (pad >= ALIGN || !v2 || data[i] != 0)
            return "is not the size it was written with";
    if (check) {
        char hex[65];
        if (tree_digest(data, size - TRAILER_LEN, hex) != 0)
            return "cannot be checked (out of memory)";
        if (memcmp(hex, t + 21, 64) != 0 || t[85] != '\n')
            return "does not match its checksum (damaged)";
    }
    *off = pad;
    *len = n;
    return NULL;
}

int kb_vec_flat_open(const char *faiss, size_t len, kb_vec_flat *f)
{
    int32_t d;
    int64_t n;
    size_t at = flat_layout((const unsigned char *)faiss, len, &d, &n);
    /* the vectors where a float may be read (a file of kbfaiss1, with the
     * vectors at 82, is left to FAISS) */
    if (!at || (uintptr_t)(faiss + at) % ALIGN != 0)
        return 0;
    f->vecs = (const float *)(const void *)(faiss + at);
    f->ids = (const unsigned char *)faiss + at + (size_t)n * (size_t)d * 4 + 8;
    f->n = (size_t)n;
    f->dim = d;
    return 1;
}

/* The min-heap of the best so far: h[0] the worst of them. */
typedef struct {
    float s;
    size_t i;
} scored;

/* a worse than b: a lower score, or the same at a later vector */
static int worse(const scored *a, const scored *b)
{
    return a->s < b->s || (a->s == b->s && a->i > b->i);
}

static void sift_down(scored *h, size_t n, size_t i)
{
    for (;;) {
        size_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && worse(&h[l], &h[w]))
            w = l;
        if (r < n && worse(&h[r], &h[w]))
            w = r;
        if (w == i)
            return;
        scored x = h[i];
        h[i] = h[w];
        h[w] = x;
        i = w;
    }
}

kb_rc kb_vec_flat_search(const kb_vec_flat *f, const float *q, size_t want,
                         float *dist, int64_t *labels)
{
    if (want > f->n)
        want = f->n;
    if (!want)
        return KB_OK;
    float *s = malloc(f->n * sizeof *s);
    scored *h = malloc(want * sizeof *h);
    if (!s || !h) {
        free(s);
        free(h);
        return KB_ERR_NOMEM;
    }
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)f->n, f->dim, 1.0f, f->vecs,
                f->dim, q, 1, 0.0f, s, 1);
    size_t k = 0;
    for (size_t i = 0; i < f->n; i++) {
        scored x = { s[i], i };
        if (k < want) {
            h[k++] = x;
            if (k == want)
                for (size_t j = want / 2; j-- > 0;)
                    sift_down(h, want, j);
        } else if (worse(&h[0], &x)) {
            h[0] = x;
            sift_down(h, want, 0);
        }
    }
    /* the heap emptied worst first, into the lists' ends */
    for (size_t j = want; j-- > 0;) {
        dist[j] = h[0].s;
        labels[j] = get_i64(f->ids + h[0].i * 8);
        h[0] = h[j];
        sift_down(h, j, 0);
    }
    free(s);
    free(h);
    return KB_OK;
}
