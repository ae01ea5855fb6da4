/*
 * bert.c - the all-MiniLM-L6-v2 encoder (BERT: 6 layers, hidden 384, 12
 * heads, intermediate 1536, erf GELU, post-LayerNorm with eps 1e-12),
 * mean pooling and L2 normalisation, as Hugging Face BertModel +
 * sentence-transformers compute it.
 *
 * A batch is packed without padding: the dense layers run over all tokens
 * of the batch at once (one GEMM each), attention runs per sequence, so no
 * padded position is ever computed or masked. With several threads, the
 * sequences of a batch are split between workers, each running the whole
 * forward pass over its share with single-threaded BLAS: no synchronisation,
 * and no BLAS threading overhead on the small attention products (BLAS's
 * own threads scale poorly here: see BENCHMARKS.md). Matrix products go
 * through cblas_sgemm; the element-wise work (bias + GELU, softmax, LayerNorm) uses
 * 8-wide vector code, compiled for x86-64-v3 (AVX2, FMA) and for the baseline and
 * picked at run time (target_clones).
 */
#include "index/index.h"
#include "index/blas.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define H 384
#define NHEAD 12
#define DHEAD 32
#define FF 1536
#define NLAYER 6
#define MAXPOS 512
/* a batch this large, or a second call (a server, a bulk pass), fuses the
 * attention's input weights (fuse_qkv); a fresh `kb query`'s one short
 * call never does, and copies no weights */
#define FUSE_MIN_TOKENS 1024

typedef struct {
    const float *qkv_w[3];   /* [H][H] each: query, key, value (in the
                                mapping: nothing is copied, so opening
                                costs no pass over the weights) */
    float qkv_b[3 * H];      /* their biases, fused */
    float *qkv_fused;        /* [3H][H]: the three fused, made by the first
                                large batch (one product packs the input
                                once, not three times: ~10 % of a bulk
                                pass); NULL before */
    const float *ao_w, *ao_b, *ln1_w, *ln1_b;
    const float *in_w, *in_b, *out_w, *out_b, *ln2_w, *ln2_b;
} layer;

struct kb_bert {
    const float *word, *pos, *type, *eln_w, *eln_b;
    size_t vocab;
    layer L[NLAYER];
    int nthreads;            /* workers for a batch */
    unsigned encodes;        /* kb_bert_encode calls so far */
    struct work {
        float *ws;           /* work space */
        size_t tokens;       /* tokens it has room for */
        size_t maxlen;       /* longest sequence it has room for */
    } *work;                 /* [nthreads] */
};

/* ------------------------------------------------------------ vector math */

typedef float f8 __attribute__((vector_size(32)));
typedef int32_t i8 __attribute__((vector_size(32)));

/* the helpers below are always inlined, so their vector ABI never matters */
#pragma GCC diagnostic ignored "-Wpsabi"
#define VINLINE static inline __attribute__((always_inline))

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define KB_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define KB_CLONES
#endif

VINLINE f8 ld8(const float *p)
{
    f8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

#define st8(p, v) do { f8 st8_ = (v); memcpy((p), &st8_, sizeof st8_); } while (0)

VINLINE f8 splat(float x)
{
    return (f8){ x, x, x, x, x, x, x, x };
}

/* lanes of a where mask is set, else of b */
VINLINE f8 vsel(i8 mask, f8 a, f8 b)
{
    return (f8)((mask & (i8)a) | (~mask & (i8)b));
}

VINLINE f8 vmax(f8 a, f8 b) { return vsel(a > b, a, b); }
VINLINE f8 vmin(f8 a, f8 b) { return vsel(a < b, a, b); }

/* exp(x), relative error ~2e-7 on [-87, 88] (Cephes' expf: range reduction
 * by ln 2 in two parts, degree-5 polynomial, 2^n built in the exponent). */
VINLINE f8 vexp(f8 x)
{
    x = vmin(vmax(x, splat(-87.3f)), splat(88.3f));
    f8 fx = x * splat(1.44269504088896341f) + splat(0.5f);
    i8 n = __builtin_convertvector(fx, i8);
    f8 fn = __builtin_convertvector(n, f8);
    n -= (i8)(fn > fx);                       /* floor */
    fn = __builtin_convertvector(n, f8);
    x = x - fn * splat(0.693359375f) + fn * splat(2.12194440e-4f);
    f8 z = x * x;
    f8 y = splat(1.9875691500e-4f);
    y = y * x + splat(1.3981999507e-3f);
    y = y * x + splat(8.3334519073e-3f);
    y = y * x + splat(4.1665795894e-2f);
    y = y * x + splat(1.6666665459e-1f);
    y = y * x + splat(5.0000001201e-1f);
    y = y * z + x + splat(1.0f);
    i8 e = (n + 127) << 23;
    f8 p;
    memcpy(&p, &e, sizeof p);
    return y * p;
}

/* erf(x) (Abramowitz & Stegun 7.1.26, absolute error < 1.5e-7). */
VINLINE f8 verf(f8 x)
{
    i8 neg = x < splat(0.0f);
    f8 a = vmax(x, -x);
    f8 t = splat(1.0f) / (splat(1.0f) + splat(0.3275911f) * a);
    f8 y = splat(1.061405429f);
    y = y * t + splat(-1.453152027f);
    y = y * t + splat(1.421413741f);
    y = y * t + splat(-0.284496736f);
    y = y * t + splat(0.254829592f);
    y = splat(1.0f) - y * t * vexp(-a * a);
    return vsel(neg, -y, y);
}

/* y[t][j] = gelu(y[t][j] + b[j]) over rows of n (n % 8 == 0). */
KB_CLONES static void bias_gelu(float *y, const float *b, size_t rows, size_t n)
{
    for (size_t r = 0; r < rows; r++, y += n)
        for (size_t j = 0; j < n; j += 8) {
            f8 v = ld8(y + j) + ld8(b + j);
            st8(y + j, splat(0.5f) * v *
                           (splat(1.0f) + verf(v * splat(0.70710678118654752f))));
        }
}

/* y[t][j] += b[j] (n % 8 == 0). */
KB_CLONES static void add_bias(float *y, const float *b, size_t rows, size_t n)
{
    for (size_t r = 0; r < rows; r++, y += n)
        for (size_t j = 0; j < n; j += 8)
            st8(y + j, ld8(y + j) + ld8(b + j));
}

/* Softmax of each of rows rows of n floats, in place. */
KB_CLONES static void softmax_rows(float *s, size_t rows, size_t n)
{
    size_t nv = n & ~(size_t)7;
    for (size_t r = 0; r < rows; r++, s += n) {
        f8 mx = splat(-INFINITY);
        for (size_t j = 0; j < nv; j += 8)
            mx = vmax(mx, ld8(s + j));
        float m = -INFINITY;
        for (int k = 0; k < 8; k++)
            m = mx[k] > m ? mx[k] : m;
        for (size_t j = nv; j < n; j++)
            m = s[j] > m ? s[j] : m;
        f8 acc = splat(0.0f), mv = splat(m);
        for (size_t j = 0; j < nv; j += 8) {
            f8 e = vexp(ld8(s + j) - mv);
            st8(s + j, e);
            acc += e;
        }
        float sum = 0;
        for (int k = 0; k < 8; k++)
            sum += acc[k];
        for (size_t j = nv; j < n; j++) {
            s[j] = expf(s[j] - m);
            sum += s[j];
        }
        f8 inv = splat(1.0f / sum);
        for (size_t j = 0; j < nv; j += 8)
            st8(s + j, ld8(s + j) * inv);
        for (size_t j = nv; j < n; j++)
            s[j] *= inv[0];
    }
}

/* x[t] = LayerNorm(x[t] + d[t] + bias) * w + b over rows of H. d and bias
 * may be NULL. */
KB_CLONES static void layer_norm(float *x, const float *d, const float *bias,
                                 const float *w, const float *b, size_t rows)
{
    for (size_t r = 0; r < rows; r++, x += H) {
        f8 s = splat(0.0f);
        for (size_t j = 0; j < H; j += 8) {
            f8 v = ld8(x + j);
            if (d)
                v += ld8(d + r * H + j);
            if (bias)
                v += ld8(bias + j);
            st8(x + j, v);
            s += v;
        }
        float mean = 0;
        for (int k = 0; k < 8; k++)
            mean += s[k];
        mean /= H;
        f8 mv = splat(mean), q = splat(0.0f);
        for (size_t j = 0; j < H; j += 8) {
            f8 v = ld8(x + j) - mv;
            q += v * v;
        }
        float var = 0;
        for (int k = 0; k < 8; k++)
            var += q[k];
        var /= H;
        f8 inv = splat(1.0f / sqrtf(var + 1e-12f));
        for (size_t j = 0; j < H; j += 8)
            st8(x + j, (ld8(x + j) - mv) * inv * ld8(w + j) + ld8(b + j));
    }
}

/* ------------------------------------------------------------ loading */

/* The F32 tensor name with the given shape (d1 0 for a vector), or NULL
 * with the corrupt-model error set. */
static const float *weight(const kb_safetensors *st, const char *name,
                           size_t d0, size_t d1, kb_err *err)
{
    const kb_st_tensor *t = kb_st_get(st, name);
    if (!t || t->dtype != KB_ST_F32 || t->ndim != (d1 ? 2 : 1) ||
        t->shape[0] != d0 || (d1 && t->shape[1] != d1)) {
        kb_model_corrupt(err, st->path);
        return NULL;
    }
    return t->data;
}

/* BLAS runs single-threaded: the parallelism is ours (workers). */
static void blas_single_thread(void)
{
#ifdef KB_BLAS_BLIS
    bli_thread_set_num_threads(1);
#else
    openblas_set_num_threads(1);
#endif
}

/* threads <= 0: the CPUs kb may run on (at most 16); KB_THREADS comes in
 * as threads (kb_config). */
static int pick_threads(int threads)
{
    if (threads > 0)
        return threads > 64 ? 64 : threads;
    int n = kb_cpu_count();
    return n > 16 ? 16 : n;
}

/* Maps the layers' weights (44 MB, all of them read by any text's
 * forward pass) in one pass: a fresh process's first query otherwise
 * takes a page fault for every 64 KiB of them (~700). The word
 * embeddings (47 MB, a few rows a text) stay faulted in as read. Where
 * the kernel cannot (before Linux 5.14), they are faulted in as read. */
static void prefault_layers(const kb_bert *b)
{
    uintptr_t lo = UINTPTR_MAX, hi = 0, page = (uintptr_t)sysconf(_SC_PAGESIZE);
    size_t sum = 0;
    for (int l = 0; l < NLAYER; l++) {
        const layer *L = &b->L[l];
        const struct {
            const float *p;
            size_t n;
        } t[] = { { L->qkv_w[0], H * H }, { L->qkv_w[1], H * H }, { L->qkv_w[2], H * H },
                  { L->ao_w, H * H }, { L->in_w, FF * H }, { L->out_w, H * FF } };
        for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
            uintptr_t a = (uintptr_t)t[k].p, e = a + t[k].n * sizeof(float);
            lo = a < lo ? a : lo;
            hi = e > hi ? e : hi;
            sum += t[k].n * sizeof(float);
        }
    }
    /* one span, unless the file holds much else between them */
    if (hi > lo && hi - lo < 2 * sum) {
        lo &= ~(page - 1);
        (void)madvise((void *)lo, hi - lo, MADV_POPULATE_READ);
    }
}

kb_rc kb_bert_open(const kb_safetensors *st, int threads, kb_bert **out,
                   kb_err *err)
{
    *out = NULL;
    /* failure is decided from the weights found, never from err->rc: err
     * may hold an earlier error of the caller's */
    kb_rc rc = KB_ERR_MODEL;
    kb_bert *b = calloc(1, sizeof *b);
    if (!b)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    const kb_st_tensor *we = kb_st_get(st, "embeddings.word_embeddings.weight");
    if (!we || we->ndim != 2 || we->shape[1] != H || we->shape[0] < 1000) {
        kb_model_corrupt(err, st->path);
        goto fail;
    }
    b->vocab = we->shape[0];
    b->word = weight(st, "embeddings.word_embeddings.weight", b->vocab, H, err);
    b->pos = weight(st, "embeddings.position_embeddings.weight", MAXPOS, H, err);
    b->type = weight(st, "embeddings.token_type_embeddings.weight", 2, H, err);
    b->eln_w = weight(st, "embeddings.LayerNorm.weight", H, 0, err);
    b->eln_b = weight(st, "embeddings.LayerNorm.bias", H, 0, err);
    if (!b->word || !b->pos || !b->type || !b->eln_w || !b->eln_b)
        goto fail;
    for (int l = 0; l < NLAYER; l++) {
        layer *L = &b->L[l];
        char name[128];
        const float *qkv[6];
        static const char *const parts[3] = { "query", "key", "value" };
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "encoder.layer.%d.attention.self.%s.weight", l, parts[k]);
            qkv[2 * k] = weight(st, name, H, H, err);
            snprintf(name, sizeof name, "encoder.layer.%d.attention.self.%s.bias", l, parts[k]);
            qkv[2 * k + 1] = weight(st, name, H, 0, err);
        }
#define W(field, suffix, d0, d1)                                              \
        snprintf(name, sizeof name, "encoder.layer.%d.%s", l, suffix);        \
        L->field = weight(st, name, d0, d1, err)
        W(ao_w, "attention.output.dense.weight", H, H);
        W(ao_b, "attention.output.dense.bias", H, 0);
        W(ln1_w, "attention.output.LayerNorm.weight", H, 0);
        W(ln1_b, "attention.output.LayerNorm.bias", H, 0);
        W(in_w, "intermediate.dense.weight", FF, H);
        W(in_b, "intermediate.dense.bias", FF, 0);
        W(out_w, "output.dense.weight", H, FF);
        W(out_b, "output.dense.bias", H, 0);
        W(ln2_w, "output.LayerNorm.weight", H, 0);
        W(ln2_b, "output.LayerNorm.bias", H, 0);
#undef W
        for (int k = 0; k < 6; k++)
            if (!qkv[k])
                goto fail;
        if (!L->ao_w || !L->ao_b || !L->ln1_w || !L->ln1_b || !L->in_w ||
            !L->in_b || !L->out_w || !L->out_b || !L->ln2_w || !L->ln2_b)
            goto fail;
        for (int k = 0; k < 3; k++) {
            L->qkv_w[k] = qkv[2 * k];
            memcpy(L->qkv_b + k * H, qkv[2 * k + 1], H * sizeof(float));
        }
    }
    prefault_layers(b);
    b->nthreads = pick_threads(threads);
    b->work = calloc((size_t)b->nthreads, sizeof *b->work);
    if (!b->work) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto fail;
    }
    blas_single_thread();
    *out = b;
    return KB_OK;
fail:
    kb_bert_free(b);
    return rc;
}

void kb_bert_free(kb_bert *b)
{
    if (!b)
        return;
    for (int l = 0; l < NLAYER; l++)
        free(b->L[l].qkv_fused);
    if (b->work)
        for (int i = 0; i < b->nthreads; i++)
            free(b->work[i].ws);
    free(b->work);
    free(b);
}

void kb_bert_get_weights(const kb_bert *b, kb_bert_weights *w)
{
    memset(w, 0, sizeof *w);
    w->word = b->word;
    w->pos = b->pos;
    w->type = b->type;
    w->eln_w = b->eln_w;
    w->eln_b = b->eln_b;
    w->vocab = b->vocab;
    for (int l = 0; l < NLAYER; l++) {
        const layer *L = &b->L[l];
        for (int k = 0; k < 3; k++)
            w->L[l].qkv_w[k] = L->qkv_w[k];
        w->L[l].qkv_b = L->qkv_b;
        w->L[l].ao_w = L->ao_w;
        w->L[l].ao_b = L->ao_b;
        w->L[l].ln1_w = L->ln1_w;
        w->L[l].ln1_b = L->ln1_b;
        w->L[l].in_w = L->in_w;
        w->L[l].in_b = L->in_b;
        w->L[l].out_w = L->out_w;
        w->L[l].out_b = L->out_b;
        w->L[l].ln2_w = L->ln2_w;
        w->L[l].ln2_b = L->ln2_b;
    }
}

/* ------------------------------------------------------------ forward */

/* y[rows][n] = x[rows][k] W^T, W being [n][k] (PyTorch's Linear layout);
 * y's rows are ldy floats apart. */
static void linear_ld(const float *x, const float *w, float *y, size_t rows,
                      size_t n, size_t k, size_t ldy)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n,
                (int)k, 1.0f, x, (int)k, w, (int)k, 0.0f, y, (int)ldy);
}

static void linear(const float *x, const float *w, float *y, size_t rows,
                   size_t n, size_t k)
{
    linear_ld(x, w, y, rows, n, k, n);
}

/* One worker's share: sequences [s0, s1) of the batch, their ids from
 * ids, vectors into out. */
typedef struct {
    const kb_bert *b;
    struct work *w;
    const int32_t *ids;
    const size_t *lens;
    size_t nseq;
    float *out;
    int failed;
} job;

static void forward(job *jb)
{
    const kb_bert *b = jb->b;
    const size_t *lens = jb->lens;
    size_t batch = jb->nseq, T = 0, maxlen = 0;
    for (size_t s = 0; s < batch; s++) {
        T += lens[s];
        maxlen = lens[s] > maxlen ? lens[s] : maxlen;
    }
    struct work *w = jb->w;
    if (T > w->tokens || maxlen > w->maxlen) {
        size_t nt = T > w->tokens ? T : w->tokens;
        size_t nl = maxlen > w->maxlen ? maxlen : w->maxlen;
        free(w->ws);
        w->ws = malloc((nt * (H + 3 * H + H + FF) + nl * nl) * sizeof(float));
        if (!w->ws) {
            w->tokens = w->maxlen = 0;
            jb->failed = 1;
            return;
        }
        w->tokens = nt;
        w->maxlen = nl;
    }
    const int32_t *ids = jb->ids;
    float *x = w->ws;                       /* [T][H] hidden states */
    float *qkv = x + w->tokens * H;         /* [T][3H] */
    float *ctx = qkv + w->tokens * 3 * H;   /* [T][H] attention output */
    float *ff = ctx + w->tokens * H;        /* [T][FF] */
    float *sc = ff + w->tokens * FF;        /* [maxlen][maxlen] scores */
    /* embeddings: word + position + token type 0, LayerNorm */
    size_t t = 0;
    for (size_t s = 0; s < batch; s++)
        for (size_t p = 0; p < lens[s]; p++, t++) {
            const float *we = b->word + (size_t)ids[t] * H;
            const float *ps = b->pos + p * H;
            float *xt = x + t * H;
            for (size_t j = 0; j < H; j++)
                xt[j] = we[j] + ps[j] + b->type[j];
        }
    layer_norm(x, NULL, NULL, b->eln_w, b->eln_b, T);

    const float scale = 1.0f / sqrtf((float)DHEAD);
    for (int l = 0; l < NLAYER; l++) {
        const layer *L = &b->L[l];
        if (L->qkv_fused)
            linear(x, L->qkv_fused, qkv, T, 3 * H, H);
        else
            for (int k = 0; k < 3; k++)
                linear_ld(x, L->qkv_w[k], qkv + k * H, T, H, H, 3 * H);
        add_bias(qkv, L->qkv_b, T, 3 * H);
        size_t r0 = 0;
        for (size_t s = 0; s < batch; s++) {
            int n = (int)lens[s];
            for (int h = 0; h < NHEAD; h++) {
                const float *q = qkv + r0 * 3 * H + h * DHEAD;
                const float *k = q + H;
                const float *v = q + 2 * H;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, DHEAD,
                            scale, q, 3 * H, k, 3 * H, 0.0f, sc, n);
                softmax_rows(sc, (size_t)n, (size_t)n);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, DHEAD, n,
                            1.0f, sc, n, v, 3 * H, 0.0f, ctx + r0 * H + h * DHEAD, H);
            }
            r0 += lens[s];
        }
        /* attention output projection, residual, LayerNorm; the projection
         * goes to qkv (free now) */
        linear(ctx, L->ao_w, qkv, T, H, H);
        layer_norm(x, qkv, L->ao_b, L->ln1_w, L->ln1_b, T);
        linear(x, L->in_w, ff, T, FF, H);
        bias_gelu(ff, L->in_b, T, FF);
        linear(ff, L->out_w, qkv, T, H, FF);
        layer_norm(x, qkv, L->out_b, L->ln2_w, L->ln2_b, T);
    }

    /* mean pooling over each sequence, L2 normalisation */
    t = 0;
    for (size_t s = 0; s < batch; s++) {
        float *o = jb->out + s * H;
        double acc[H] = { 0 };
        for (size_t p = 0; p < lens[s]; p++, t++)
            for (size_t j = 0; j < H; j++)
                acc[j] += x[t * H + j];
        double norm = 0;
        for (size_t j = 0; j < H; j++) {
            acc[j] /= (double)lens[s];
            norm += acc[j] * acc[j];
        }
        norm = sqrt(norm);
        if (norm < 1e-12)
            norm = 1e-12;
        for (size_t j = 0; j < H; j++)
            o[j] = (float)(acc[j] / norm);
    }
}

static void *forward_thread(void *arg)
{
    forward(arg);
    return NULL;
}

/* The query, key and value weights fused, for large batches (no memory:
 * they stay apart, which is only slower). */
static void fuse_qkv(kb_bert *b)
{
    for (int l = 0; l < NLAYER; l++) {
        layer *L = &b->L[l];
        if (L->qkv_fused || !(L->qkv_fused = malloc(3 * H * H * sizeof(float))))
            continue;
        for (int k = 0; k < 3; k++)
            memcpy(L->qkv_fused + (size_t)k * H * H, L->qkv_w[k], H * H * sizeof(float));
    }
}

kb_rc kb_bert_encode(kb_bert *b, const int32_t *ids, const size_t *lens,
                     size_t batch, float *out, kb_err *err)
{
    size_t T = 0;
    for (size_t s = 0; s < batch; s++) {
        if (lens[s] < 1 || lens[s] > MAXPOS)
            return kb_err_set(err, KB_ERR_INTERNAL, "bad sequence length %zu", lens[s]);
        T += lens[s];
    }
    for (size_t t = 0; t < T; t++)
        if (ids[t] < 0 || (size_t)ids[t] >= b->vocab)
            return kb_err_set(err, KB_ERR_INTERNAL, "token id %d out of range",
                              (int)ids[t]);
    if ((T >= FUSE_MIN_TOKENS || b->encodes++ > 0) && !b->L[0].qkv_fused)
        fuse_qkv(b);
    /* split the sequences into nw runs of about T / nw tokens */
    size_t nw = (size_t)b->nthreads < batch ? (size_t)b->nthreads : batch;
    job jobs[64];
    size_t s = 0, t = 0, done_tokens = 0;
    for (size_t i = 0; i < nw; i++) {
        size_t goal = T * (i + 1) / nw, s0 = s, t0 = t;
        while (s < batch && (done_tokens < goal || s == s0) &&
               batch - s > nw - i - 1) {
            done_tokens += lens[s];
            t += lens[s];
            s++;
        }
        if (i == nw - 1)
            while (s < batch) {
                t += lens[s];
                s++;
            }
        jobs[i] = (job){ b, &b->work[i], ids + t0, lens + s0, s - s0,
                         out + s0 * H, 0 };
    }
    pthread_t tid[64];
    int started[64] = { 0 };
    for (size_t i = 1; i < nw; i++)
        started[i] = pthread_create(&tid[i], NULL, forward_thread, &jobs[i]) == 0;
    forward(&jobs[0]);
    kb_rc rc = KB_OK;
    for (size_t i = 1; i < nw; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            forward(&jobs[i]);   /* no thread: do it here */
    }
    for (size_t i = 0; i < nw; i++)
        if (jobs[i].failed)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory for %zu tokens", T);
    return rc;
}
