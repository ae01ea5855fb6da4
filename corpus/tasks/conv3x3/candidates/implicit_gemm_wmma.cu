// The convolution as an implicit GEMM on the tensor cores (WMMA, bf16 in,
// fp32 accumulate): rows are output pixels, columns output channels, the
// reduction runs over the 9 taps x C input channels. A block of 8 warps
// makes a 128-pixel x 64-channel tile, each warp 32 x 32 (2 x 2 fragments);
// per step it stages the 128 pixels' 32-channel slice at one tap (zeros
// outside the image, 16-byte loads when C is a multiple of 8) and the 64
// filters' matching slice in shared memory. Fragments leave through a small
// per-warp buffer, clipped at the edges.
// kb-launch: kernel=conv3x3_wmma grid=ceil_div(NB*H*W,128),ceil_div(K,64) block=256
#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

#define BM 128
#define BN 64
#define BK 32
#define LDS (BK + 8)

__device__ __forceinline__ void load_chunk(__nv_bfloat16 *dst, const __nv_bfloat16 *src,
                                           int c0, int c, int valid)
{
    if (valid && (c & 7) == 0 && c0 + 8 <= c) {
        *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src + c0);
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; e++)
        dst[e] = valid && c0 + e < c ? src[c0 + e] : __float2bfloat16(0.0f);
}

extern "C" __global__ void __launch_bounds__(256)
conv3x3_wmma(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ wt,
             float *__restrict__ y, int nb, int h, int w, int c, int k)
{
    __shared__ __align__(128) __nv_bfloat16 sA[BM * LDS];
    __shared__ __align__(128) __nv_bfloat16 sB[BN * LDS];
    __shared__ __align__(128) float stage[8][16 * 16];
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    int wm = warp >> 1, wn = warp & 1;              /* 4 x 2 warps */
    long npix = (long)nb * h * w;
    long m0 = (long)blockIdx.x * BM;
    int n0 = blockIdx.y * BN;
    /* this thread's two pixel rows of A and its filter row of B */
    int ar = tid >> 2, ach = (tid & 3) * 8;
    int pimg[2], py[2], px[2], pok[2];
    for (int i = 0; i < 2; i++) {
        long p = m0 + ar + i * 64;
        pok[i] = p < npix;
        long pp = pok[i] ? p : 0;
        px[i] = (int)(pp % w);
        py[i] = (int)((pp / w) % h);
        pimg[i] = (int)(pp / ((long)w * h));
    }
    int br = tid >> 2, bko = n0 + br;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++)
            wmma::fill_fragment(acc[i][j], 0.0f);

    for (int tap = 0; tap < 9; tap++) {
        int dy = tap / 3 - 1, dx = tap % 3 - 1;
        for (int c0 = 0; c0 < c; c0 += BK) {
            for (int i = 0; i < 2; i++) {
                int yy = py[i] + dy, xx = px[i] + dx;
                int valid = pok[i] && yy >= 0 && yy < h && xx >= 0 && xx < w;
                const __nv_bfloat16 *src = x + (((size_t)pimg[i] * h + (valid ? yy : 0)) * w +
                                                (valid ? xx : 0)) * c;
                load_chunk(sA + (ar + i * 64) * LDS + ach, src, c0 + ach, c, valid);
            }
            load_chunk(sB + br * LDS + ach, wt + ((size_t)(bko < k ? bko : 0) * 9 + tap) * c,
                       c0 + ach, c, bko < k);
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < BK; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b[2];
#pragma unroll
                for (int i = 0; i < 2; i++)
                    wmma::load_matrix_sync(a[i], sA + (wm * 32 + i * 16) * LDS + kk, LDS);
#pragma unroll
                for (int j = 0; j < 2; j++)
                    wmma::load_matrix_sync(b[j], sB + (wn * 32 + j * 16) * LDS + kk, LDS);
#pragma unroll
                for (int i = 0; i < 2; i++)
#pragma unroll
                    for (int j = 0; j < 2; j++)
                        wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
            }
            __syncthreads();
        }
    }
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
            wmma::store_matrix_sync(stage[warp], acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                long p = m0 + wm * 32 + i * 16 + e / 16;
                int ko = n0 + wn * 32 + j * 16 + e % 16;
                if (p < npix && ko < k)
                    y[(size_t)p * k + ko] = stage[warp][e];
            }
            __syncwarp();
        }
}
