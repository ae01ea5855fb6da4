// Softmax and top-k in two reads of the row, one block of 1024 threads a
// row. Read 1: each thread's running max and sum of exponentials (online,
// rescaled), and its own maximum. The KTOP-th largest of the 1024 thread
// maxima bounds the row's KTOP-th largest from below (KTOP distinct
// elements reach it), so read 2 keeps only the elements at or above it
// (a few hundred on ordinary rows) in shared memory, one atomic a warp.
// A bitonic sort by (value down, index up) gives the top KTOP; their
// probabilities come from the row's max and sum. Rows whose survivors
// overflow the buffer (many equal values) fall back to KTOP rounds of a
// block-wide "next in order" search, correct but slow.
// kb-launch: kernel=softmax_topk_fused grid=B block=1024

#define NT 1024
#define CAP 4096
#define NEG_INF (-__int_as_float(0x7f800000))

/* a before b in the order: larger value first, then the lower index */
__device__ __forceinline__ bool before(float av, int ai, float bv, int bi)
{
    return av > bv || (av == bv && ai < bi);
}

/* sorts n (a power of two, <= CAP) entries of (val, idx) into the order */
__device__ void bitonic(float *val, int *idx, int n)
{
    for (int size = 2; size <= n; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int t = threadIdx.x; t < n / 2; t += blockDim.x) {
                int i = 2 * t - (t & (stride - 1)), j = i + stride;
                bool up = (i & size) == 0;
                float vi = val[i], vj = val[j];
                int ii = idx[i], ij = idx[j];
                if (before(vj, ij, vi, ii) == up) {
                    val[i] = vj, val[j] = vi;
                    idx[i] = ij, idx[j] = ii;
                }
            }
            __syncthreads();
        }
}

extern "C" __global__ void __launch_bounds__(NT, 1)
softmax_topk_fused(const float *__restrict__ x, float *__restrict__ probs, int *__restrict__ idx,
                   float *sm, int b, int v, int ktop)
{
    __shared__ float cval[CAP];
    __shared__ int cidx[CAP];
    __shared__ float wm[32], ws[32];
    __shared__ int count;
    __shared__ float bestv[32];
    __shared__ int besti[32];
    const float *xr = x + (size_t)blockIdx.x * v;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    /* read 1: online max and sum; this thread's maximum */
    float m = NEG_INF, s = 0.0f;
    for (int j = tid; j < v; j += NT) {
        float a = xr[j];
        if (a > m) {
            s = s * __expf(m - a) + 1.0f;
            m = a;
        } else {
            s += __expf(a - m);
        }
    }
    float tmax = m;
    for (int o = 16; o > 0; o /= 2) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        float mm = fmaxf(m, m2);
        s = (m == NEG_INF ? 0.0f : s * __expf(m - mm)) + (m2 == NEG_INF ? 0.0f : s2 * __expf(m2 - mm));
        m = mm;
    }
    if (lane == 0)
        wm[warp] = m, ws[warp] = s;
    cval[tid] = tmax;
    cidx[tid] = tid;
    if (tid == 0)
        count = 0;
    __syncthreads();
    float rmax = NEG_INF, rsum = 0.0f;
    for (int q = 0; q < NT / 32; q++)
        rmax = fmaxf(rmax, wm[q]);
    for (int q = 0; q < NT / 32; q++)
        if (wm[q] != NEG_INF)
            rsum += ws[q] * __expf(wm[q] - rmax);
    /* the ktop-th largest thread maximum */
    bitonic(cval, cidx, NT);
    float thr = cval[ktop <= NT ? ktop - 1 : NT - 1];
    if (ktop > NT)
        thr = NEG_INF;
    __syncthreads();

    /* read 2: the survivors */
    for (int j0 = 0; j0 < v; j0 += NT) {
        int j = j0 + tid;
        float a = j < v ? xr[j] : NEG_INF;
        bool keep = j < v && a >= thr;
        unsigned mask = __ballot_sync(0xffffffffu, keep);
        int base = 0;
        if (lane == 0 && mask)
            base = atomicAdd(&count, __popc(mask));
        base = __shfl_sync(0xffffffffu, base, 0);
        int at = base + __popc(mask & ((1u << lane) - 1));
        if (keep && at < CAP)
            cval[at] = a, cidx[at] = j;
    }
    __syncthreads();
    int n = count;
    float *pr = probs + (size_t)blockIdx.x * ktop;
    int *ir = idx + (size_t)blockIdx.x * ktop;
    if (n <= CAP) {
        int p2 = 1;
        while (p2 < n)
            p2 <<= 1;
        for (int i = n + tid; i < p2; i += NT)
            cval[i] = NEG_INF, cidx[i] = 0x7fffffff;
        __syncthreads();
        bitonic(cval, cidx, p2);
        for (int r = tid; r < ktop; r += NT) {
            bool ok = r < n;
            pr[r] = ok ? __expf(cval[r] - rmax) / rsum : 0.0f;
            ir[r] = ok ? cidx[r] : -1;
        }
        return;
    }
    /* fallback: the next element in the order after the last one, ktop times */
    float lastv = __int_as_float(0x7f800000);
    int lasti = -1;
    for (int r = 0; r < ktop; r++) {
        float bv = NEG_INF;
        int bi = -1;
        for (int j = tid; j < v; j += NT) {
            float a = xr[j];
            if (before(lastv, lasti, a, j) && (bi < 0 || before(a, j, bv, bi)))
                bv = a, bi = j;
        }
        for (int o = 16; o > 0; o /= 2) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (oi >= 0 && (bi < 0 || before(ov, oi, bv, bi)))
                bv = ov, bi = oi;
        }
        if (lane == 0)
            bestv[warp] = bv, besti[warp] = bi;
        __syncthreads();
        bv = bestv[0], bi = besti[0];
        for (int q = 1; q < NT / 32; q++)
            if (besti[q] >= 0 && (bi < 0 || before(bestv[q], besti[q], bv, bi)))
                bv = bestv[q], bi = besti[q];
        __syncthreads();
        if (tid == 0) {
            pr[r] = bi >= 0 ? __expf(bv - rmax) / rsum : 0.0f;
            ir[r] = bi;
        }
        lastv = bv, lasti = bi;
    }
}
