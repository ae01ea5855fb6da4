// Residual add and RMSNorm fused: one block of 256 threads a row; each
// thread adds its 16-byte chunks of x and res, writes h, keeps the sums
// in registers (up to 4 chunks, rows of up to 8192) and its share of the
// sum of squares; one reduction (warp shuffles, then across warps); y
// from the registers, never re-reading h. Rows that are not a whole
// number of 16-byte chunks, or longer, take a scalar path that re-reads h.
// kb-launch: kernel=rmsnorm_fused grid=M block=256
#include <cuda_bf16.h>

#define CHUNKS 4

__device__ __forceinline__ float block_sum(float s, float *sh)
{
    for (int o = 16; o > 0; o /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0)
        sh[w] = s;
    __syncthreads();
    s = lane < (int)(blockDim.x >> 5) ? sh[lane] : 0.0f;
    for (int o = 16; o > 0; o /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

__device__ __forceinline__ float lo(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); }
__device__ __forceinline__ unsigned pack(float a, float b)
{
    __nv_bfloat162 r = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<unsigned *>(&r);
}

extern "C" __global__ void __launch_bounds__(256)
rmsnorm_fused(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ res,
              const __nv_bfloat16 *__restrict__ w, __nv_bfloat16 *__restrict__ h,
              __nv_bfloat16 *__restrict__ y, int m, int n, float eps)
{
    __shared__ float sh[32];
    size_t base = (size_t)blockIdx.x * n;
    int nch = n / 8;
    if (n % 8 == 0 && nch <= CHUNKS * (int)blockDim.x) {
        const uint4 *xr = reinterpret_cast<const uint4 *>(x + base);
        const uint4 *rr = reinterpret_cast<const uint4 *>(res + base);
        uint4 *hr = reinterpret_cast<uint4 *>(h + base);
        uint4 hv[CHUNKS];
        float ss = 0.0f;
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            int j = threadIdx.x + c * blockDim.x;
            if (j < nch) {
                uint4 a = xr[j], b = rr[j];
                unsigned *pa = &a.x, *pb = &b.x, *ph = &hv[c].x;
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    ph[e] = pack(lo(pa[e]) + lo(pb[e]), hi(pa[e]) + hi(pb[e]));
                    float l0 = lo(ph[e]), h0 = hi(ph[e]);
                    ss += l0 * l0 + h0 * h0;
                }
                hr[j] = hv[c];
            }
        }
        float rstd = rsqrtf(block_sum(ss, sh) / n + eps);
        const uint4 *wr = reinterpret_cast<const uint4 *>(w);
        uint4 *yr = reinterpret_cast<uint4 *>(y + base);
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            int j = threadIdx.x + c * blockDim.x;
            if (j < nch) {
                uint4 wv = wr[j], o;
                unsigned *pw = &wv.x, *ph = &hv[c].x, *po = &o.x;
#pragma unroll
                for (int e = 0; e < 4; e++)
                    po[e] = pack(lo(ph[e]) * rstd * lo(pw[e]), hi(ph[e]) * rstd * hi(pw[e]));
                yr[j] = o;
            }
        }
        return;
    }
    float ss = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        __nv_bfloat16 hb = __float2bfloat16(__bfloat162float(x[base + j]) +
                                            __bfloat162float(res[base + j]));
        h[base + j] = hb;
        float a = __bfloat162float(hb);
        ss += a * a;
    }
    float rstd = rsqrtf(block_sum(ss, sh) / n + eps);
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        y[base + j] = __float2bfloat16(__bfloat162float(h[base + j]) * rstd *
                                       __bfloat162float(w[j]));
}
