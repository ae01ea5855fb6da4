/* cpuref.c - CPU float64 implementations of the tasks, against which
 * `kb-verify --reference` checks each task's reference.cu. */
#include "verify/kb-verify/verify_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int kbv_param_index(const kb_task *t, const char *name)
{
    for (size_t i = 0; i < t->nparams; i++)
        if (strcmp(t->params[i].name, name) == 0)
            return (int)i;
    return -1;
}

#define BUF(name) \
    (kbv_param_index(t, name) >= 0 ? bufs[kbv_param_index(t, name)] : NULL)
#define VAL(name) \
    (kbv_param_index(t, name) >= 0 ? vals[kbv_param_index(t, name)] : 0)

static void gelu(const kb_task *t, double **bufs, const double *vals)
{
    const double *x = BUF("x");
    double *y = BUF("y");
    size_t n = (size_t)VAL("n");
    for (size_t i = 0; i < n; i++)
        y[i] = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
}

static void softmax(const kb_task *t, double **bufs, const double *vals)
{
    const double *x = BUF("x");
    double *y = BUF("y");
    size_t m = (size_t)VAL("m"), n = (size_t)VAL("n");
    for (size_t r = 0; r < m; r++) {
        const double *xr = x + r * n;
        double mx = -INFINITY, s = 0;
        for (size_t j = 0; j < n; j++)
            mx = fmax(mx, xr[j]);
        for (size_t j = 0; j < n; j++)
            s += exp(xr[j] - mx);
        for (size_t j = 0; j < n; j++)
            y[r * n + j] = exp(xr[j] - mx) / s;
    }
}

static void layernorm(const kb_task *t, double **bufs, const double *vals)
{
    const double *x = BUF("x"), *g = BUF("gamma"), *b = BUF("beta");
    double *y = BUF("y");
    size_t m = (size_t)VAL("m"), n = (size_t)VAL("n");
    double eps = VAL("eps");
    for (size_t r = 0; r < m; r++) {
        const double *xr = x + r * n;
        double mean = 0, var = 0;
        for (size_t j = 0; j < n; j++)
            mean += xr[j];
        mean /= (double)n;
        for (size_t j = 0; j < n; j++)
            var += (xr[j] - mean) * (xr[j] - mean);
        var /= (double)n;
        double rstd = 1.0 / sqrt(var + eps);
        for (size_t j = 0; j < n; j++)
            y[r * n + j] = (xr[j] - mean) * rstd * g[j] + b[j];
    }
}

static void reduce_sum(const kb_task *t, double **bufs, const double *vals)
{
    const double *x = BUF("x");
    size_t n = (size_t)VAL("n");
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    BUF("out")[0] = s;
}

static void transpose(const kb_task *t, double **bufs, const double *vals)
{
    const double *in = BUF("in");
    double *out = BUF("out");
    size_t m = (size_t)VAL("m"), n = (size_t)VAL("n");
    for (size_t r = 0; r < m; r++)
        for (size_t c = 0; c < n; c++)
            out[c * m + r] = in[r * n + c];
}

static void gemm(const kb_task *t, double **bufs, const double *vals)
{
    const double *A = BUF("A"), *B = BUF("B");
    double *C = BUF("C");
    size_t m = (size_t)VAL("m"), n = (size_t)VAL("n"), k = (size_t)VAL("k");
    for (size_t i = 0; i < m * n; i++)
        C[i] = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t p = 0; p < k; p++) {
            double a = A[i * k + p];
            const double *b = B + p * n;
            double *c = C + i * n;
            for (size_t j = 0; j < n; j++)
                c[j] += a * b[j];
        }
}

static void histogram(const kb_task *t, double **bufs, const double *vals)
{
    const double *x = BUF("x");
    double *bins = BUF("bins");
    size_t n = (size_t)VAL("n");
    for (int b = 0; b < 256; b++)
        bins[b] = 0;
    for (size_t i = 0; i < n; i++)
        bins[(unsigned)x[i] & 255u] += 1;
}

static void scan(const kb_task *t, double **bufs, const double *vals)
{
    const double *x = BUF("x");
    double *y = BUF("y");
    size_t n = (size_t)VAL("n");
    double run = 0;
    for (size_t i = 0; i < n; i++)
        y[i] = run += x[i];
}

static void stencil3x3(const kb_task *t, double **bufs, const double *vals)
{
    const double *in = BUF("in");
    double *out = BUF("out");
    long h = (long)VAL("h"), w = (long)VAL("w");
    static const double wt[3][3] = { { 1, 2, 1 }, { 2, 4, 2 }, { 1, 2, 1 } };
    for (long y = 0; y < h; y++)
        for (long x = 0; x < w; x++) {
            double acc = 0;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    long yy = y + dy, xx = x + dx;
                    if (yy >= 0 && yy < h && xx >= 0 && xx < w)
                        acc += wt[dy + 1][dx + 1] * in[yy * w + xx];
                }
            out[y * w + x] = acc / 16.0;
        }
}

/* ---- level 2 */

static void adamw(const kb_task *t, double **bufs, const double *vals)
{
    double *p = BUF("p"), *m = BUF("m"), *v = BUF("v");
    const double *g = BUF("g");
    size_t n = (size_t)VAL("n");
    double lr = VAL("lr"), b1 = VAL("beta1"), b2 = VAL("beta2"), eps = VAL("eps");
    double wd = VAL("wd"), bc1 = VAL("bc1"), bc2 = VAL("bc2");
    for (size_t i = 0; i < n; i++) {
        p[i] *= 1.0 - lr * wd;
        m[i] = b1 * m[i] + (1.0 - b1) * g[i];
        v[i] = b2 * v[i] + (1.0 - b2) * g[i] * g[i];
        p[i] -= lr * (m[i] / bc1) / (sqrt(v[i] / bc2) + eps);
    }
}

static void rmsnorm_residual(const kb_task *t, double **bufs, const double *vals)
{
    const double *x = BUF("x"), *res = BUF("res"), *w = BUF("w");
    double *h = BUF("h"), *y = BUF("y");
    size_t m = (size_t)VAL("m"), n = (size_t)VAL("n");
    double eps = VAL("eps");
    for (size_t r = 0; r < m; r++) {
        double ss = 0;
        for (size_t j = 0; j < n; j++) {
            h[r * n + j] = x[r * n + j] + res[r * n + j];
            ss += h[r * n + j] * h[r * n + j];
        }
        double rstd = 1.0 / sqrt(ss / (double)n + eps);
        for (size_t j = 0; j < n; j++)
            y[r * n + j] = h[r * n + j] * rstd * w[j];
    }
}

/* NeoX halves: (x1, x2) -> (x1 c - x2 s, x2 c + x1 s) */
static void rope_heads(const double *x, double *o, const double *cs, const double *sn,
                       const double *pos, size_t tok, size_t heads, size_t d)
{
    size_t half = d / 2;
    for (size_t t = 0; t < tok; t++)
        for (size_t hd = 0; hd < heads; hd++) {
            const double *xr = x + (t * heads + hd) * d;
            double *orow = o + (t * heads + hd) * d;
            size_t at = (size_t)pos[t] * half;
            for (size_t j = 0; j < half; j++) {
                double c = cs[at + j], s = sn[at + j];
                orow[j] = xr[j] * c - xr[j + half] * s;
                orow[j + half] = xr[j + half] * c + xr[j] * s;
            }
        }
}

static void rotary(const kb_task *t, double **bufs, const double *vals)
{
    size_t tok = (size_t)VAL("t"), d = (size_t)VAL("d");
    rope_heads(BUF("q"), BUF("qo"), BUF("cos"), BUF("sin"), BUF("pos"), tok,
               (size_t)VAL("hq"), d);
    rope_heads(BUF("k"), BUF("ko"), BUF("cos"), BUF("sin"), BUF("pos"), tok,
               (size_t)VAL("hk"), d);
}

static void gemv_int4(const kb_task *t, double **bufs, const double *vals)
{
    const double *x = BUF("x"), *w = BUF("w"), *sc = BUF("s");
    double *y = BUF("y");
    size_t m = (size_t)VAL("m"), n = (size_t)VAL("n"), k = (size_t)VAL("k");
    for (size_t r = 0; r < m; r++)
        for (size_t c = 0; c < n; c++) {
            double acc = 0;
            for (size_t j = 0; j < k; j++) {
                unsigned word = (unsigned)w[c * (k / 8) + j / 8];
                int q = (int)((word >> (4 * (j % 8))) & 15u) - 8;
                acc += x[r * k + j] * q * sc[c * (k / 128) + j / 128];
            }
            y[r * n + c] = acc;
        }
}

static void conv3x3(const kb_task *t, double **bufs, const double *vals)
{
    const double *x = BUF("x"), *wt = BUF("wt");
    double *y = BUF("y");
    long nb = (long)VAL("nb"), h = (long)VAL("h"), w = (long)VAL("w");
    long c = (long)VAL("c"), k = (long)VAL("k");
    for (long img = 0; img < nb; img++)
        for (long py = 0; py < h; py++)
            for (long px = 0; px < w; px++)
                for (long ko = 0; ko < k; ko++) {
                    double acc = 0;
                    for (int dy = -1; dy <= 1; dy++)
                        for (int dx = -1; dx <= 1; dx++) {
                            long yy = py + dy, xx = px + dx;
                            if (yy < 0 || yy >= h || xx < 0 || xx >= w)
                                continue;
                            const double *xp = x + ((img * h + yy) * w + xx) * c;
                            const double *wp = wt + (ko * 9 + (dy + 1) * 3 + dx + 1) * c;
                            for (long ci = 0; ci < c; ci++)
                                acc += xp[ci] * wp[ci];
                        }
                    y[((img * h + py) * w + px) * k + ko] = acc;
                }
}

/* the KTOP largest of each row (ties: the lower index), with softmax
 * probabilities over the whole row */
static void softmax_topk(const kb_task *t, double **bufs, const double *vals)
{
    const double *x = BUF("x");
    double *probs = BUF("probs"), *idx = BUF("idx");
    size_t b = (size_t)VAL("b"), v = (size_t)VAL("v"), kt = (size_t)VAL("ktop");
    unsigned char *taken = calloc(v ? v : 1, 1);
    if (!taken)
        return;
    for (size_t r = 0; r < b; r++) {
        const double *xr = x + r * v;
        double mx = -INFINITY, sum = 0;
        for (size_t j = 0; j < v; j++)
            mx = fmax(mx, xr[j]);
        for (size_t j = 0; j < v; j++)
            sum += exp(xr[j] - mx);
        memset(taken, 0, v);
        for (size_t q = 0; q < kt; q++) {
            size_t at = v;
            for (size_t j = 0; j < v; j++)
                if (!taken[j] && (at == v || xr[j] > xr[at]))
                    at = j;
            if (at == v) {
                probs[r * kt + q] = 0, idx[r * kt + q] = -1;
                continue;
            }
            taken[at] = 1;
            probs[r * kt + q] = exp(xr[at] - mx) / sum;
            idx[r * kt + q] = (double)at;
        }
    }
    free(taken);
}

static void attention_causal(const kb_task *t, double **bufs, const double *vals)
{
    const double *q = BUF("q"), *k = BUF("k"), *v = BUF("v");
    double *o = BUF("o");
    size_t bh = (size_t)VAL("b") * (size_t)VAL("h"), l = (size_t)VAL("l"), d = (size_t)VAL("d");
    double scale = 1.0 / sqrt((double)d);
    double *p = malloc((l ? l : 1) * sizeof *p);
    if (!p)
        return;
    for (size_t z = 0; z < bh; z++)
        for (size_t i = 0; i < l; i++) {
            const double *qi = q + (z * l + i) * d;
            double mx = -INFINITY, sum = 0;
            for (size_t j = 0; j <= i; j++) {
                const double *kj = k + (z * l + j) * d;
                double s = 0;
                for (size_t e = 0; e < d; e++)
                    s += qi[e] * kj[e];
                p[j] = s * scale;
                mx = fmax(mx, p[j]);
            }
            for (size_t j = 0; j <= i; j++)
                sum += p[j] = exp(p[j] - mx);
            double *oi = o + (z * l + i) * d;
            for (size_t e = 0; e < d; e++) {
                double acc = 0;
                for (size_t j = 0; j <= i; j++)
                    acc += p[j] * v[(z * l + j) * d + e];
                oi[e] = acc / sum;
            }
        }
    free(p);
}

/* Y = A B + bias (one per column), the GEMM of the epilogue tasks. */
static void gemm_bias(const double *A, const double *B, const double *bias,
                      double *Y, size_t m, size_t n, size_t k)
{
    for (size_t i = 0; i < m * n; i++)
        Y[i] = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t p = 0; p < k; p++) {
            double a = A[i * k + p];
            for (size_t j = 0; j < n; j++)
                Y[i * n + j] += a * B[p * n + j];
        }
    for (size_t i = 0; i < m * n; i++)
        Y[i] += bias[i % n];
}

static void gemm_bias_gelu(const kb_task *t, double **bufs, const double *vals)
{
    double *Y = BUF("Y");
    size_t m = (size_t)VAL("m"), n = (size_t)VAL("n");
    gemm_bias(BUF("A"), BUF("B"), BUF("bias"), Y, m, n, (size_t)VAL("k"));
    for (size_t i = 0; i < m * n; i++)
        Y[i] = 0.5 * Y[i] * (1.0 + erf(Y[i] / sqrt(2.0)));
}

static void gemm_bias_relu(const kb_task *t, double **bufs, const double *vals)
{
    double *C = BUF("C");
    size_t m = (size_t)VAL("m"), n = (size_t)VAL("n");
    gemm_bias(BUF("A"), BUF("B"), BUF("bias"), C, m, n, (size_t)VAL("k"));
    for (size_t i = 0; i < m * n; i++)
        C[i] = fmax(C[i], 0.0);
}

int kbv_cpu_ref(const kb_task *t, double **bufs, const double *vals,
                kb_buf *why)
{
    static const struct {
        const char *name;
        void (*fn)(const kb_task *, double **, const double *);
    } impls[] = {
        { "gelu", gelu }, { "softmax", softmax }, { "layernorm", layernorm },
        { "reduce_sum", reduce_sum }, { "transpose", transpose },
        { "gemm", gemm }, { "gemm_f32", gemm }, { "gemm_bf16", gemm },
        { "histogram", histogram }, { "scan", scan },
        { "stencil3x3", stencil3x3 },
        { "adamw", adamw }, { "rmsnorm_residual", rmsnorm_residual },
        { "rotary", rotary }, { "gemv_int4", gemv_int4 }, { "conv3x3", conv3x3 },
        { "softmax_topk", softmax_topk }, { "attention_causal", attention_causal },
        { "gemm_bias_gelu", gemm_bias_gelu }, { "gemm_bias_relu", gemm_bias_relu },
    };
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        if (strcmp(impls[i].name, t->cpu_ref) == 0) {
            impls[i].fn(t, bufs, vals);
            return 0;
        }
    kbv_why(why, "no CPU implementation named '%s'", t->cpu_ref);
    return -1;
}
