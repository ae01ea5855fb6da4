// Reference: Q and K rotated by two kernels, one thread per pair (x[i],
// x[i + D/2]) of a head (NeoX halves), the angle's cos and sin read from
// the tables at the token's position.
#include <cuda_bf16.h>

__device__ void rotate(const __nv_bfloat16 *x, __nv_bfloat16 *o, const float *cs,
                       const float *sn, const int *pos, int t, int heads, int d)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int half = d / 2;
    if (i >= (size_t)t * heads * half)
        return;
    int j = (int)(i % half);
    size_t th = i / half;                 /* token * heads + head */
    int tok = (int)(th / heads);
    const __nv_bfloat16 *xr = x + th * d;
    __nv_bfloat16 *orow = o + th * d;
    float c = cs[(size_t)pos[tok] * half + j], s = sn[(size_t)pos[tok] * half + j];
    float x1 = __bfloat162float(xr[j]), x2 = __bfloat162float(xr[j + half]);
    orow[j] = __float2bfloat16(x1 * c - x2 * s);
    orow[j + half] = __float2bfloat16(x2 * c + x1 * s);
}

extern "C" __global__ void rotary_q(const __nv_bfloat16 *q, const __nv_bfloat16 *k,
                                    const float *cs, const float *sn, const int *pos,
                                    __nv_bfloat16 *qo, __nv_bfloat16 *ko, int t, int hq,
                                    int hk, int d)
{
    rotate(q, qo, cs, sn, pos, t, hq, d);
}

extern "C" __global__ void rotary_k(const __nv_bfloat16 *q, const __nv_bfloat16 *k,
                                    const float *cs, const float *sn, const int *pos,
                                    __nv_bfloat16 *qo, __nv_bfloat16 *ko, int t, int hq,
                                    int hk, int d)
{
    rotate(k, ko, cs, sn, pos, t, hk, d);
}
