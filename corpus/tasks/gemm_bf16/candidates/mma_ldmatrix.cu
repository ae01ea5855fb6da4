// bf16 GEMM (fp32 accumulate, fp32 out) on tensor cores with mma.sync
// m16n8k16: BMxBN block tiles, BK-deep k-tiles in a STAGES-deep cp.async
// ring (16-byte copies when K and N are multiples of 8; element loads with
// zero fill otherwise), fragments through ldmatrix (.trans for the
// row-major B), rows padded by 16 bytes (conflict-free ldmatrix), grouped
// block order for L2 reuse.
// kb-launch: kernel=gemm_mma_bf16 grid=ceil_div(N,128)*ceil_div(M,128) block=128 shared=75776
#include <cuda_bf16.h>

#define BM 128
#define BN 128
#define BK 32
#define WM 64
#define WN 64
#define STAGES 4
#define NT 128
#define MINB 2
#define LDA (BK + 8)
#define LDB (BN + 8)
#define MT (WM / 16)
#define NTL (WN / 8)
#define A_STAGE (BM * LDA)
#define B_STAGE (BK * LDB)
#define WARPS_N (BN / WN)

typedef unsigned short u16;

__device__ __forceinline__ unsigned smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp16(unsigned dst, const void *src, bool pred)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(pred ? 16 : 0));
}

__device__ __forceinline__ void ldsm4(unsigned *r, unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void ldsm4t(unsigned *r, unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float *c, const unsigned *a, const unsigned *b)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void load_tile(u16 *As, u16 *Bs, const u16 *A,
                                          const u16 *B, int m, int n, int k,
                                          int m0, int n0, int k0, int tid, bool vec)
{
    if (vec) {
#pragma unroll
        for (int i = 0; i < BM * BK / 8 / NT; i++) {
            int c = tid + i * NT, r = c / (BK / 8), q = (c % (BK / 8)) * 8;
            int gm = m0 + r, gk = k0 + q;
            bool p = gm < m && gk < k;
            cp16(smem_addr(As + r * LDA + q), p ? A + (size_t)gm * k + gk : A, p);
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 8 / NT; i++) {
            int c = tid + i * NT, r = c / (BN / 8), q = (c % (BN / 8)) * 8;
            int gk = k0 + r, gn = n0 + q;
            bool p = gk < k && gn < n;
            cp16(smem_addr(Bs + r * LDB + q), p ? B + (size_t)gk * n + gn : B, p);
        }
    } else {
        for (int c = tid; c < BM * BK; c += NT) {
            int r = c / BK, q = c % BK, gm = m0 + r, gk = k0 + q;
            As[r * LDA + q] = (gm < m && gk < k) ? A[(size_t)gm * k + gk] : (u16)0;
        }
        for (int c = tid; c < BK * BN; c += NT) {
            int r = c / BN, q = c % BN, gk = k0 + r, gn = n0 + q;
            Bs[r * LDB + q] = (gk < k && gn < n) ? B[(size_t)gk * n + gn] : (u16)0;
        }
    }
}

extern "C" __global__ void __launch_bounds__(NT, MINB)
gemm_mma_bf16(const __nv_bfloat16 *__restrict__ Ab, const __nv_bfloat16 *__restrict__ Bb,
              float *__restrict__ C, int m, int n, int k)
{
    extern __shared__ __align__(16) u16 smem[];
    const u16 *A = (const u16 *)Ab, *B = (const u16 *)Bb;
    u16 *As = smem, *Bs = smem + STAGES * A_STAGE;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int g = lane >> 2, t = lane & 3;
    int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;

    int nbn = (n + BN - 1) / BN, nbm = (m + BM - 1) / BM;
    int bid = blockIdx.x, per = 8 * nbn;
    int first = (bid / per) * 8, gsz = min(nbm - first, 8);
    int bm = first + (bid % per) % gsz, bn = (bid % per) / gsz;
    int m0 = bm * BM, n0 = bn * BN;

    bool vec = (k % 8 == 0) && (n % 8 == 0) &&
               (((size_t)A | (size_t)B) % 16 == 0);

    float acc[MT][NTL][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NTL; j++)
#pragma unroll
            for (int r = 0; r < 4; r++)
                acc[i][j][r] = 0.0f;

    int ktiles = (k + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ktiles)
            load_tile(As + s * A_STAGE, Bs + s * B_STAGE, A, B, m, n, k, m0, n0,
                      s * BK, tid, vec);
        asm volatile("cp.async.commit_group;\n");
    }

    /* ldmatrix row/column of this lane inside a 16x16 block */
    int lr = lane & 15, lc = (lane >> 4) * 8;
    for (int kt = 0; kt < ktiles; kt++) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
        __syncthreads();
        int nk = kt + STAGES - 1;
        if (nk < ktiles) {
            int s = nk % STAGES;
            load_tile(As + s * A_STAGE, Bs + s * B_STAGE, A, B, m, n, k, m0, n0,
                      nk * BK, tid, vec);
        }
        asm volatile("cp.async.commit_group;\n");

        unsigned as = smem_addr(As + (kt % STAGES) * A_STAGE + (wm0 + lr) * LDA + lc);
        unsigned bs = smem_addr(Bs + (kt % STAGES) * B_STAGE + lr * LDB + wn0 + lc);
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned af[MT][4], bf[NTL][2];
#pragma unroll
            for (int i = 0; i < MT; i++)
                ldsm4(af[i], as + (i * 16 * LDA + kk) * 2);
#pragma unroll
            for (int j = 0; j < NTL; j += 2) {
                unsigned r[4];
                ldsm4t(r, bs + (kk * LDB + j * 8) * 2);
                bf[j][0] = r[0];
                bf[j][1] = r[1];
                bf[j + 1][0] = r[2];
                bf[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < NTL; j++)
                    mma_bf16(acc[i][j], af[i], bf[j]);
        }
    }
    asm volatile("cp.async.wait_group 0;\n");

    bool even = (n % 2) == 0;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NTL; j++) {
            int col = n0 + wn0 + j * 8 + 2 * t;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int row = m0 + wm0 + i * 16 + g + h * 8;
                if (row >= m)
                    continue;
                float *p = C + (size_t)row * n + col;
                if (even && col + 1 < n) {
                    *(float2 *)p = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                } else {
                    if (col < n)
                        p[0] = acc[i][j][2 * h];
                    if (col + 1 < n)
                        p[1] = acc[i][j][2 * h + 1];
                }
            }
        }
}
