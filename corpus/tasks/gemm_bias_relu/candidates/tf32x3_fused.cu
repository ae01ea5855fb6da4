// GEMM with a fused epilogue: C = relu(A B + bias), the bias added and
// the ReLU applied to the accumulators in registers, in the loop that
// stores the tile, so C is written once and never read back. The
// main loop is the 3xTF32 tensor-core GEMM of gemm_f32's tf32x3_mma.cu
// (mma.sync m16n8k8 on split tf32 operands, a 3-stage cp.async ring,
// 64 x 128 block tiles, grouped tile order): only the epilogue differs.
// Its unfused twin, tf32x3_unfused.cu (the same GEMM storing A B, then a
// second kernel reading C back to add the bias and clamp), is what the
// fusion is measured against: one write of C instead of write, read and
// write again (2 x 4 M N bytes saved).
// kb-launch: kernel=gemm_3xtf32_bias_relu grid=ceil_div(N,128)*ceil_div(M,64) block=128 shared=79872
#define BM 64
#define BN 128
#define BK 32
#define WM 32
#define WN 64
#define STAGES 3
#define NT 128
#define MINB 2
#define FLUSHK 2
#define LDA (BK + 4)
#define LDB (BN + 8)
#define MT (WM / 16)
#define NTL (WN / 8)
#define A_STAGE (BM * LDA)
#define B_STAGE (BK * LDB)
#define WARPS_N (BN / WN)

__device__ __forceinline__ unsigned smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp16(unsigned dst, const void *src, bool pred)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(pred ? 16 : 0));
}

__device__ __forceinline__ void cp4(unsigned dst, const void *src, bool pred)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(dst), "l"(src), "r"(pred ? 4 : 0));
}

__device__ __forceinline__ void split_tf32(float x, unsigned &big, unsigned &small)
{
    unsigned b, s;
    b = __float_as_uint(x) & 0xffffe000u;
    float r = x - __uint_as_float(b);
    s = __float_as_uint(r);
    big = b;
    small = s;
}

__device__ __forceinline__ void mma_tf32(float *c, const unsigned *a, const unsigned *b)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void load_tile(float *As, float *Bs, const float *A,
                                          const float *B, int m, int n, int k,
                                          int m0, int n0, int k0, int tid, bool vec)
{
    if (vec) {
#pragma unroll
        for (int i = 0; i < BM * BK / 4 / NT; i++) {
            int c = tid + i * NT, r = c / (BK / 4), q = (c % (BK / 4)) * 4;
            int gm = m0 + r, gk = k0 + q;
            bool p = gm < m && gk < k;
            cp16(smem_addr(As + r * LDA + q), p ? A + (size_t)gm * k + gk : A, p);
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 4 / NT; i++) {
            int c = tid + i * NT, r = c / (BN / 4), q = (c % (BN / 4)) * 4;
            int gk = k0 + r, gn = n0 + q;
            bool p = gk < k && gn < n;
            cp16(smem_addr(Bs + r * LDB + q), p ? B + (size_t)gk * n + gn : B, p);
        }
    } else {
        for (int i = 0; i < BM * BK / NT; i++) {
            int c = tid + i * NT, r = c / BK, q = c % BK;
            int gm = m0 + r, gk = k0 + q;
            bool p = gm < m && gk < k;
            cp4(smem_addr(As + r * LDA + q), p ? A + (size_t)gm * k + gk : A, p);
        }
        for (int i = 0; i < BK * BN / NT; i++) {
            int c = tid + i * NT, r = c / BN, q = c % BN;
            int gk = k0 + r, gn = n0 + q;
            bool p = gk < k && gn < n;
            cp4(smem_addr(Bs + r * LDB + q), p ? B + (size_t)gk * n + gn : B, p);
        }
    }
}

extern "C" __global__ void __launch_bounds__(NT, MINB)
gemm_3xtf32_bias_relu(const float *__restrict__ A, const float *__restrict__ B,
                      const float *__restrict__ bias, float *__restrict__ C,
                      int m, int n, int k)
{
    extern __shared__ __align__(16) float smem[];
    float *As = smem, *Bs = smem + STAGES * A_STAGE;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int g = lane >> 2, t = lane & 3;
    int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;

    /* grouped order: 8 block rows at a time share B tiles in L2 */
    int nbn = (n + BN - 1) / BN, nbm = (m + BM - 1) / BM;
    int bid = blockIdx.x, per = 8 * nbn;
    int first = (bid / per) * 8, gsz = min(nbm - first, 8);
    int bm = first + (bid % per) % gsz, bn = (bid % per) / gsz;
    int m0 = bm * BM, n0 = bn * BN;

    bool vec = (k % 4 == 0) && (n % 4 == 0) &&
               (((size_t)A | (size_t)B) % 16 == 0);

    float acc[MT][NTL][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NTL; j++)
#pragma unroll
            for (int r = 0; r < 4; r++)
                acc[i][j][r] = 0.0f;

    float tmp[MT][NTL][4];
    int ktiles = (k + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ktiles)
            load_tile(As + s * A_STAGE, Bs + s * B_STAGE, A, B, m, n, k, m0, n0,
                      s * BK, tid, vec);
        asm volatile("cp.async.commit_group;\n");
    }

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

        if (kt % FLUSHK == 0)
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < NTL; j++)
#pragma unroll
                for (int r = 0; r < 4; r++)
                    tmp[i][j][r] = 0.0f;
        const float *as = As + (kt % STAGES) * A_STAGE + wm0 * LDA;
        const float *bs = Bs + (kt % STAGES) * B_STAGE + wn0;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            unsigned bb[NTL][2], bl[NTL][2];
#pragma unroll
            for (int j = 0; j < NTL; j++) {
                split_tf32(bs[(kk + t) * LDB + j * 8 + g], bb[j][0], bl[j][0]);
                split_tf32(bs[(kk + t + 4) * LDB + j * 8 + g], bb[j][1], bl[j][1]);
            }
#pragma unroll
            for (int i = 0; i < MT; i++) {
                unsigned ab[4], al[4];
                const float *a = as + (i * 16 + g) * LDA + kk + t;
                split_tf32(a[0], ab[0], al[0]);
                split_tf32(a[8 * LDA], ab[1], al[1]);
                split_tf32(a[4], ab[2], al[2]);
                split_tf32(a[8 * LDA + 4], ab[3], al[3]);
#pragma unroll
                for (int j = 0; j < NTL; j++) {
                    mma_tf32(tmp[i][j], al, bb[j]);
                    mma_tf32(tmp[i][j], ab, bl[j]);
                    mma_tf32(tmp[i][j], ab, bb[j]);
                }
            }
        }
        /* the tensor cores' fp32 accumulation truncates: sum each k-tile
         * apart (small partial sums) and add it in with a rounded FADD */
        if (kt % FLUSHK == FLUSHK - 1 || kt == ktiles - 1)
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < NTL; j++)
#pragma unroll
                for (int r = 0; r < 4; r++)
                    acc[i][j][r] += tmp[i][j][r];
    }
    asm volatile("cp.async.wait_group 0;\n");

    /* the epilogue, in registers: bias of the column, then ReLU */
    bool even = (n % 2) == 0;
#pragma unroll
    for (int j = 0; j < NTL; j++) {
        int col = n0 + wn0 + j * 8 + 2 * t;
        float b0 = col < n ? __ldg(bias + col) : 0.0f;
        float b1 = col + 1 < n ? __ldg(bias + col + 1) : 0.0f;
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                acc[i][j][2 * h] = fmaxf(acc[i][j][2 * h] + b0, 0.0f);
                acc[i][j][2 * h + 1] = fmaxf(acc[i][j][2 * h + 1] + b1, 0.0f);
            }
    }
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
