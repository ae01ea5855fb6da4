// Row softmax with the online normaliser (Milakov and Gimelshein, "Online
// normalizer calculation for softmax", 2018): one sweep over the row keeps
// a running maximum m and a running sum d of exp(x - m), rescaling d by
// exp(m_old - m_new) whenever the maximum grows (once per float4, not per
// value). The (m, d) pairs of the threads are merged the same way, with
// warp shuffles and one shared-memory step: one block reduction where the
// three-pass softmax needs two, and one read of the row where it needs
// two before the write pass (which reads the row again, from L1/L2). One
// 256-thread block per row; float4 accesses when a row is a whole number
// of float4s. Keeping a 4096-float row in registers between the sweep and
// the write (four float4 a thread) measured slower on the H200 (0.153 ms
// against 0.138 ms at 16384 x 4096): fewer rows in flight per SM.
// kb-launch: kernel=softmax_online grid=M block=256
#define TPB 256
#define NEG_BIG -3.402823466e38f

/* (m, d) <- the merge of (m, d) and (m2, d2); NEG_BIG - NEG_BIG is 0, and
 * NEG_BIG minus a finite maximum underflows to a factor of 0 */
__device__ __forceinline__ void merge(float &m, float &d, float m2, float d2)
{
    float mn = fmaxf(m, m2);
    d = d * expf(m - mn) + d2 * expf(m2 - mn);
    m = mn;
}

__device__ __forceinline__ void add4(float &m, float &d, float4 v)
{
    float mn = fmaxf(fmaxf(m, fmaxf(v.x, v.y)), fmaxf(v.z, v.w));
    d = d * expf(m - mn) + ((expf(v.x - mn) + expf(v.y - mn)) +
                            (expf(v.z - mn) + expf(v.w - mn)));
    m = mn;
}

__device__ __forceinline__ void add1(float &m, float &d, float v)
{
    float mn = fmaxf(m, v);
    d = d * expf(m - mn) + expf(v - mn);
    m = mn;
}

/* the row's (m, d), in every thread */
__device__ void block_merge(float &m, float &d, float2 *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o /= 2)
        merge(m, d, __shfl_xor_sync(0xffffffffu, m, o),
              __shfl_xor_sync(0xffffffffu, d, o));
    if (lane == 0)
        sh[w] = make_float2(m, d);
    __syncthreads();
    m = sh[0].x, d = sh[0].y;
#pragma unroll
    for (int k = 1; k < TPB / 32; k++)
        merge(m, d, sh[k].x, sh[k].y);
}

__device__ __forceinline__ float4 out4(float4 v, float m, float inv)
{
    return make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv,
                       expf(v.z - m) * inv, expf(v.w - m) * inv);
}

extern "C" __global__ void __launch_bounds__(TPB)
softmax_online(const float *__restrict__ x, float *__restrict__ y, int m, int n)
{
    __shared__ float2 sh[TPB / 32];
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = y + (size_t)blockIdx.x * n;
    float mx = NEG_BIG, d = 0.0f;
    int nv = n / 4;
    const float4 *x4 = reinterpret_cast<const float4 *>(xr);
    float4 *y4 = reinterpret_cast<float4 *>(yr);
    if (n % 4 == 0) {
        for (int j = threadIdx.x; j < nv; j += TPB)
            add4(mx, d, x4[j]);
        block_merge(mx, d, sh);
        float inv = 1.0f / d;
        for (int j = threadIdx.x; j < nv; j += TPB)
            __stcs(y4 + j, out4(__ldcs(x4 + j), mx, inv));
    } else {
        for (int j = threadIdx.x; j < n; j += TPB)
            add1(mx, d, xr[j]);
        block_merge(mx, d, sh);
        float inv = 1.0f / d;
        for (int j = threadIdx.x; j < n; j += TPB)
            yr[j] = expf(xr[j] - mx) * inv;
    }
}
