// Q and K rotated in one launch, one block a token: the token's position
// and its cos/sin row are read once, each thread takes 8-element chunks
// of a half-head (16-byte loads of x[i..i+7] and x[i+D/2..]), the Q heads
// then the K heads. Half-heads that are no whole number of chunks take a
// scalar path.
// kb-launch: kernel=rotary_fused grid=T block=128
#include <cuda_bf16.h>

__device__ __forceinline__ float lo(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); }
__device__ __forceinline__ unsigned pack(float a, float b)
{
    __nv_bfloat162 r = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<unsigned *>(&r);
}

extern "C" __global__ void __launch_bounds__(128)
rotary_fused(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
             const float *__restrict__ cs, const float *__restrict__ sn,
             const int *__restrict__ pos, __nv_bfloat16 *__restrict__ qo,
             __nv_bfloat16 *__restrict__ ko, int t, int hq, int hk, int d)
{
    int tok = blockIdx.x, half = d / 2;
    const float *c = cs + (size_t)pos[tok] * half, *s = sn + (size_t)pos[tok] * half;
    int heads = hq + hk;
    if (half % 8 == 0) {
        int per = half / 8;                      /* chunks a half-head */
        for (int j = threadIdx.x; j < heads * per; j += blockDim.x) {
            int hd = j / per, i = (j % per) * 8;
            const __nv_bfloat16 *xr = hd < hq ? q + ((size_t)tok * hq + hd) * d
                                              : k + ((size_t)tok * hk + hd - hq) * d;
            __nv_bfloat16 *orow = hd < hq ? qo + ((size_t)tok * hq + hd) * d
                                          : ko + ((size_t)tok * hk + hd - hq) * d;
            uint4 a = *reinterpret_cast<const uint4 *>(xr + i);
            uint4 b = *reinterpret_cast<const uint4 *>(xr + i + half);
            float4 c0 = *reinterpret_cast<const float4 *>(c + i);
            float4 c1 = *reinterpret_cast<const float4 *>(c + i + 4);
            float4 s0 = *reinterpret_cast<const float4 *>(s + i);
            float4 s1 = *reinterpret_cast<const float4 *>(s + i + 4);
            float cc[8] = { c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w };
            float ss[8] = { s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w };
            unsigned *pa = &a.x, *pb = &b.x;
            uint4 oa, ob;
            unsigned *qa = &oa.x, *qb = &ob.x;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float x1l = lo(pa[e]), x1h = hi(pa[e]), x2l = lo(pb[e]), x2h = hi(pb[e]);
                float cl = cc[2 * e], ch = cc[2 * e + 1], sl = ss[2 * e], sh = ss[2 * e + 1];
                qa[e] = pack(x1l * cl - x2l * sl, x1h * ch - x2h * sh);
                qb[e] = pack(x2l * cl + x1l * sl, x2h * ch + x1h * sh);
            }
            *reinterpret_cast<uint4 *>(orow + i) = oa;
            *reinterpret_cast<uint4 *>(orow + i + half) = ob;
        }
        return;
    }
    for (int j = threadIdx.x; j < heads * half; j += blockDim.x) {
        int hd = j / half, i = j % half;
        const __nv_bfloat16 *xr = hd < hq ? q + ((size_t)tok * hq + hd) * d
                                          : k + ((size_t)tok * hk + hd - hq) * d;
        __nv_bfloat16 *orow = hd < hq ? qo + ((size_t)tok * hq + hd) * d
                                      : ko + ((size_t)tok * hk + hd - hq) * d;
        float x1 = __bfloat162float(xr[i]), x2 = __bfloat162float(xr[i + half]);
        orow[i] = __float2bfloat16(x1 * c[i] - x2 * s[i]);
        orow[i + half] = __float2bfloat16(x2 * c[i] + x1 * s[i]);
    }
}
