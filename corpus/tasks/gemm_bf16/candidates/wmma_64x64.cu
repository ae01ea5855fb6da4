// bf16 GEMM on tensor cores (WMMA 16x16x16, fp32 accumulators): 64x64
// block tiles, 4 warps of 32x32, bf16 tiles staged in shared memory with
// zero fill at the edges, the result staged through shared memory.
// kb-launch: kernel=gemm_wmma grid=ceil_div(N,64),ceil_div(M,64) block=128
#include <cuda_bf16.h>
#include <mma.h>
using namespace nvcuda;

#define BK 32

extern "C" __global__ void __launch_bounds__(128)
gemm_wmma(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
          float *__restrict__ C, int m, int n, int k)
{
    __shared__ __align__(128) __nv_bfloat16 As[64][BK + 8];
    __shared__ __align__(128) __nv_bfloat16 Bs[BK][64 + 8];
    __shared__ __align__(128) float Cs[64][64 + 4];
    int tid = threadIdx.x, warp = tid / 32;
    int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
    int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            wmma::fill_fragment(acc[i][j], 0.0f);
    __nv_bfloat16 zero = __float2bfloat16(0.0f);
    for (int k0 = 0; k0 < k; k0 += BK) {
        for (int e = tid; e < 64 * BK; e += 128) {
            int r = e / BK, c = e % BK;
            int gm = m0 + r, gk = k0 + c;
            As[r][c] = (gm < m && gk < k) ? A[(size_t)gm * k + gk] : zero;
        }
        for (int e = tid; e < BK * 64; e += 128) {
            int r = e / 64, c = e % 64;
            int gk = k0 + r, gn = n0 + c;
            Bs[r][c] = (gk < k && gn < n) ? B[(size_t)gk * n + gn] : zero;
        }
        __syncthreads();
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b[2];
            for (int i = 0; i < 2; i++)
                wmma::load_matrix_sync(a[i], &As[wm + i * 16][kk], BK + 8);
            for (int j = 0; j < 2; j++)
                wmma::load_matrix_sync(b[j], &Bs[kk][wn + j * 16], 64 + 8);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++)
                    wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            wmma::store_matrix_sync(&Cs[wm + i * 16][wn + j * 16], acc[i][j],
                                    64 + 4, wmma::mem_row_major);
    __syncthreads();
    for (int e = tid; e < 64 * 64; e += 128) {
        int r = e / 64, c = e % 64;
        int gm = m0 + r, gn = n0 + c;
        if (gm < m && gn < n)
            C[(size_t)gm * n + gn] = Cs[r][c];
    }
}
