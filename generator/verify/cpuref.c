/* cpuref.c - CPU float64 implementations of the tasks, against which
 * `kb-verify --reference` checks each task's reference.cu. */
#include "generator/verify/verify_int.h"

#include <math.h>
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
    };
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        if (strcmp(impls[i].name, t->cpu_ref) == 0) {
            impls[i].fn(t, bufs, vals);
            return 0;
        }
    kbv_why(why, "no CPU implementation named '%s'", t->cpu_ref);
    return -1;
}
