// Dequantisation fused into the GEMV: one block of 8 warps takes 8 rows of
// W (outputs n0..n0+7) for every one of the M <= 8 inputs at once; the
// warps split K in 32-word strides, each lane one packed word (8 nibbles)
// of each row per step with its 16-byte slice of every x row, so W is read
// once, coalesced, and never written out. A nibble becomes (q - 8) through
// the float bits of 2^23 + q. Per-lane sums are reduced by shuffles, then
// across the warps in shared memory. M is a template argument (1..8).
// kb-launch: kernel=gemv_int4_fused grid=ceil_div(N,8) block=256
#include <cuda_bf16.h>

#define ROWS 8
#define WARPS 8

__device__ __forceinline__ float lo(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); }

template <int MM>
__device__ __forceinline__ void gemv_tile(const __nv_bfloat16 *__restrict__ x,
                                          const unsigned *__restrict__ w,
                                          const __nv_bfloat16 *__restrict__ s,
                                          float *__restrict__ y, int n, int k)
{
    __shared__ float red[WARPS][ROWS][MM];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n0 = blockIdx.x * ROWS;
    int kw = k / 8, groups = k / 128;
    float acc[ROWS][MM];
#pragma unroll
    for (int r = 0; r < ROWS; r++)
#pragma unroll
        for (int m = 0; m < MM; m++)
            acc[r][m] = 0.0f;
    for (int j = warp * 32 + lane; j < kw; j += WARPS * 32) {
        float xv[MM][8];
#pragma unroll
        for (int m = 0; m < MM; m++) {
            uint4 u = *reinterpret_cast<const uint4 *>(x + (size_t)m * k + (size_t)j * 8);
            xv[m][0] = lo(u.x), xv[m][1] = hi(u.x), xv[m][2] = lo(u.y), xv[m][3] = hi(u.y);
            xv[m][4] = lo(u.z), xv[m][5] = hi(u.z), xv[m][6] = lo(u.w), xv[m][7] = hi(u.w);
        }
        unsigned word[ROWS];
        float sc[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            int row = n0 + r < n ? n0 + r : n - 1;      /* past N: computed, not stored */
            word[r] = __ldg(w + (size_t)row * kw + j);
            sc[r] = __bfloat162float(s[(size_t)row * groups + j / 16]);
        }
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            float part[MM];
#pragma unroll
            for (int m = 0; m < MM; m++)
                part[m] = 0.0f;
#pragma unroll
            for (int e = 0; e < 8; e++) {
                float q = __uint_as_float(0x4B000000u | ((word[r] >> (4 * e)) & 15u)) - 8388616.0f;
#pragma unroll
                for (int m = 0; m < MM; m++)
                    part[m] = fmaf(q, xv[m][e], part[m]);
            }
#pragma unroll
            for (int m = 0; m < MM; m++)
                acc[r][m] = fmaf(part[m], sc[r], acc[r][m]);
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; r++)
#pragma unroll
        for (int m = 0; m < MM; m++) {
            float v = acc[r][m];
            for (int o = 16; o > 0; o /= 2)
                v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0)
                red[warp][r][m] = v;
        }
    __syncthreads();
    for (int t = threadIdx.x; t < ROWS * MM; t += blockDim.x) {
        int r = t / MM, m = t % MM;
        float v = 0.0f;
#pragma unroll
        for (int q = 0; q < WARPS; q++)
            v += red[q][r][m];
        if (n0 + r < n)
            y[(size_t)m * n + n0 + r] = v;
    }
}

extern "C" __global__ void __launch_bounds__(256)
gemv_int4_fused(const __nv_bfloat16 *__restrict__ x, const unsigned *__restrict__ w,
                const __nv_bfloat16 *__restrict__ s, float *__restrict__ y, float *wd,
                int m, int n, int k)
{
    switch (m) {
    case 1: gemv_tile<1>(x, w, s, y, n, k); break;
    case 2: gemv_tile<2>(x, w, s, y, n, k); break;
    case 3: gemv_tile<3>(x, w, s, y, n, k); break;
    case 4: gemv_tile<4>(x, w, s, y, n, k); break;
    case 5: gemv_tile<5>(x, w, s, y, n, k); break;
    case 6: gemv_tile<6>(x, w, s, y, n, k); break;
    case 7: gemv_tile<7>(x, w, s, y, n, k); break;
    default: gemv_tile<8>(x, w, s, y, n, k); break;
    }
}
