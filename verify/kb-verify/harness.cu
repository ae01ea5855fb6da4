// harness.cu - kb-verify's own device code: input generation, checksums,
// output comparison and guard checks. Built by nvcc at build time into a
// fatbin that kb-verify embeds, so no candidate can see or change it.
// dtype codes follow kb_dtype: 0 f32, 1 bf16, 2 f16, 3 i32, 4 u32, 5 f64.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ unsigned long long mix64(unsigned long long x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

__device__ __forceinline__ double u01(unsigned long long h)
{
    return ((h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// One value of a distribution for hash h (seed: the fill's, for the
// skewed distribution's common value). dist: 0 uniform [a,b), 1 normal(mean
// a, std b), 2 integers in [a,b), 3 skewed integers in [a,b): three
// quarters are one value.
__device__ __forceinline__ double draw(unsigned long long h, unsigned long long seed,
                                       int dist, double a, double b)
{
    if (dist == 0)
        return a + (b - a) * u01(h);
    if (dist == 1) {
        double u1 = u01(h), u2 = u01(mix64(h));
        return a + b * sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);
    }
    long long lo = (long long)a, span = (long long)b - lo;
    if (span < 1)
        span = 1;
    if (dist == 3 && (h & 3) != 0)
        return (double)(lo + (long long)(mix64(seed) % (unsigned long long)span));
    return (double)(lo + (long long)((h >> 8) % (unsigned long long)span));
}

__device__ __forceinline__ void store(void *p, int dtype, unsigned long long i, double v)
{
    switch (dtype) {
    case 0: ((float *)p)[i] = (float)v; break;
    case 1: ((__nv_bfloat16 *)p)[i] = __double2bfloat16(v); break;
    case 2: ((__half *)p)[i] = __double2half(v); break;
    case 3: ((int *)p)[i] = (int)v; break;
    case 4: ((unsigned *)p)[i] = (unsigned)(long long)v; break;
    default: ((double *)p)[i] = v; break;
    }
}

__device__ __forceinline__ double load_as_double(const void *p, int dtype,
                                                 unsigned long long i)
{
    switch (dtype) {
    case 0: return ((const float *)p)[i];
    case 1: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case 2: return __half2float(((const __half *)p)[i]);
    case 3: return ((const int *)p)[i];
    case 4: return ((const unsigned *)p)[i];
    default: return ((const double *)p)[i];
    }
}

extern "C" __global__ void kbv_fill(void *p, unsigned long long n, int dtype,
                                    int dist, double a, double b,
                                    unsigned long long seed)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x)
        store(p, dtype, i, draw(mix64(seed ^ mix64(i)), seed, dist, a, b));
}

// Changes k of n elements, one at a random place in each of k equal
// stretches of the buffer (all of them when k >= n), each to a new draw of
// the same distribution that differs from the old value (up to 16 tries:
// a distribution of one value cannot change).
extern "C" __global__ void kbv_perturb(void *p, unsigned long long n, int dtype,
                                       int dist, double a, double b,
                                       unsigned long long seed,
                                       unsigned long long k)
{
    if (k > n)
        k = n;
    for (unsigned long long j = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         j < k; j += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned long long lo = j * n / k, hi = (j + 1) * n / k;
        unsigned long long i = lo + mix64(seed ^ mix64(j)) % (hi - lo);
        double old = load_as_double(p, dtype, i);
        for (unsigned long long t = 0; t < 16; t++) {
            store(p, dtype, i, draw(mix64(seed ^ mix64(i + 0x51ED270Bull * (t + 1))),
                                    seed + t, dist, a, b));
            if (load_as_double(p, dtype, i) != old)
                break;
        }
    }
}

// An order-free 64-bit checksum of nbytes bytes (sum of mixed words).
extern "C" __global__ void kbv_checksum(const unsigned char *p,
                                        unsigned long long nbytes,
                                        unsigned long long *out)
{
    unsigned long long words = nbytes / 4, h = 0;
    const unsigned *w = (const unsigned *)p;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < words; i += (unsigned long long)gridDim.x * blockDim.x)
        h += mix64(((unsigned long long)w[i] << 32) ^ i);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (unsigned long long i = words * 4; i < nbytes; i++)
            h += mix64(((unsigned long long)p[i] << 40) ^ i);
    for (int o = 16; o > 0; o /= 2)
        h += __shfl_down_sync(0xffffffffu, h, o);
    if ((threadIdx.x & 31) == 0)
        atomicAdd(out, h);
}

// Counts bytes in [p, p+n) that differ from pattern.
extern "C" __global__ void kbv_guard(const unsigned char *p,
                                     unsigned long long n, unsigned pattern,
                                     unsigned long long *bad)
{
    unsigned long long c = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x)
        c += p[i] != (unsigned char)pattern;
    if (c)
        atomicAdd(bad, c);
}

struct kbv_cmp {
    unsigned long long nbad;
    unsigned long long first_bad;   // initialised to ~0 by the host
    unsigned long long nonfinite;
    unsigned max_abs_bits;           // non-negative floats order as uints
    unsigned max_rel_bits;
    double cand_at_first;            // read back by the host, exactly
    double ref_at_first;
};

// Compares a candidate's output with the reference's: bad where
// |c - r| > atol + rtol * |r|, where c is non-finite and r finite, or where
// r is non-finite and c differs. Each thread counts its elements, a warp
// sums its threads', and one atomic a warp adds them up: an output wrong
// everywhere (or a reference whose every element changed) must not cost an
// atomic on one address per element.
//
// With sens (else NULL), the tolerance of element i grows by k * sens[i]:
// how far the reference's own result moves when its inputs move by a few
// units in the last place (kbv_sens), so that an ill-conditioned element
// (layernorm of three values close together) is judged by what its inputs
// can say.
extern "C" __global__ void kbv_compare(const void *cand, const void *ref,
                                       unsigned long long n, int dtype,
                                       double atol, double rtol,
                                       kbv_cmp *res, const float *sens, double k)
{
    unsigned long long nbad = 0, first = ~0ull, nonfinite = 0;
    float max_abs = 0.0f, max_rel = 0.0f;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x) {
        double c = load_as_double(cand, dtype, i);
        double r = load_as_double(ref, dtype, i);
        bool bad;
        if (!isfinite(r)) {
            bad = !(c == r || (isnan(c) && isnan(r)));
        } else if (!isfinite(c)) {
            bad = true;
            nonfinite++;
        } else {
            double e = fabs(c - r);
            bad = e > atol + rtol * fabs(r) + (sens ? k * sens[i] : 0.0);
            max_abs = fmaxf(max_abs, (float)e);
            max_rel = fmaxf(max_rel, (float)(e / fmax(fabs(r), 1e-30)));
        }
        if (bad && nbad++ == 0)
            first = i;
    }
    for (int o = 16; o > 0; o /= 2) {
        nbad += __shfl_down_sync(0xffffffffu, nbad, o);
        nonfinite += __shfl_down_sync(0xffffffffu, nonfinite, o);
        unsigned long long f = __shfl_down_sync(0xffffffffu, first, o);
        first = f < first ? f : first;
        max_abs = fmaxf(max_abs, __shfl_down_sync(0xffffffffu, max_abs, o));
        max_rel = fmaxf(max_rel, __shfl_down_sync(0xffffffffu, max_rel, o));
    }
    if ((threadIdx.x & 31) != 0)
        return;
    if (nbad) {
        atomicAdd(&res->nbad, nbad);
        atomicMin(&res->first_bad, first);
    }
    if (nonfinite)
        atomicAdd(&res->nonfinite, nonfinite);
    if (max_abs > 0.0f)
        atomicMax(&res->max_abs_bits, __float_as_uint(max_abs));
    if (max_rel > 0.0f)
        atomicMax(&res->max_rel_bits, __float_as_uint(max_rel));
}

// Moves every element of a floating-point buffer by a random relative
// amount of up to ulps units in the last place of its type (integers are
// left alone): the inputs whose reference result says how sensitive each
// output is to its inputs' rounding.
extern "C" __global__ void kbv_jitter(void *p, unsigned long long n, int dtype,
                                      unsigned long long seed, double ulps)
{
    double eps = dtype == 1 ? 0x1p-7 : dtype == 2 ? 0x1p-10 : dtype == 5 ? 0x1p-52 : 0x1p-23;
    if (dtype == 3 || dtype == 4)
        return;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x) {
        double u = 2.0 * u01(mix64(seed ^ mix64(i))) - 1.0;
        double x = load_as_double(p, dtype, i);
        store(p, dtype, i, x * (1.0 + u * ulps * eps));
    }
}

// sens[i] = max(sens[i], |ref[i] - alt[i]|): alt is the reference's result
// on jittered inputs. A non-finite difference adds nothing.
extern "C" __global__ void kbv_sens(float *sens, const void *ref, const void *alt,
                                    unsigned long long n, int dtype)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x) {
        double d = fabs(load_as_double(ref, dtype, i) - load_as_double(alt, dtype, i));
        if (isfinite(d))
            sens[i] = fmaxf(sens[i], (float)d);
    }
}
