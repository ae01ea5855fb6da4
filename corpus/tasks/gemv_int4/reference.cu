// Reference: the weights dequantised to fp32 by one kernel (one thread a
// packed word: 8 nibbles, value (q - 8) * scale of its 128-group), then a
// plain GEMV, one warp an output, lanes striding K, a warp-shuffle sum.
#include <cuda_bf16.h>

extern "C" __global__ void dequant_int4(const __nv_bfloat16 *x, const unsigned *w,
                                        const __nv_bfloat16 *s, float *y, float *wd,
                                        int m, int n, int k)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;   /* a word */
    if (i >= (size_t)n * k / 8)
        return;
    size_t row = i / (k / 8), col = (i % (k / 8)) * 8;
    float sc = __bfloat162float(s[row * (k / 128) + col / 128]);
    unsigned word = w[i];
    for (int j = 0; j < 8; j++)
        wd[row * k + col + j] = (float)((int)((word >> (4 * j)) & 15u) - 8) * sc;
}

extern "C" __global__ void gemv_rows(const __nv_bfloat16 *x, const unsigned *w,
                                     const __nv_bfloat16 *s, float *y, float *wd,
                                     int m, int n, int k)
{
    int out = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (out >= m * n)
        return;
    int row = out / n, col = out % n;
    float acc = 0.0f;
    for (int j = lane; j < k; j += 32)
        acc += __bfloat162float(x[(size_t)row * k + j]) * wd[(size_t)col * k + j];
    for (int o = 16; o > 0; o /= 2)
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0)
        y[out] = acc;
}
