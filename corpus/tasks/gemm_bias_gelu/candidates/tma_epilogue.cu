// GEMM with its bias + GELU epilogue fused, for Hopper: the persistent
// warp-specialised TMA + wgmma kernel of gemm_bf16 (TMA copies into
// 128-byte-swizzled shared memory, wgmma m64n256k16 on 128 x 256 tiles,
// one producer thread keeping a 4-stage ring full, two consumer
// warpgroups), whose consumers add the bias and apply the exact (erf)
// GELU to the accumulators in registers before the tile leaves through
// TMA bulk stores: Y is written once, and the fp32 product never goes to
// memory and back as it does between cuBLAS and a separate epilogue.
// Shapes whose rows TMA cannot map (K or N not a multiple of 8) take a
// plain fallback path with the same epilogue; only the target is timed.
// kb-verify: arch=sm_90a
// kb-launch: kernel=gemm_bias_gelu_tma grid=min(132,ceil_div(M,128)*ceil_div(N,256)) block=384 shared=230400
// kb-tensormap: buffer=A dims=K,M box=64,128 swizzle=128
// kb-tensormap: buffer=B dims=N,K box=64,64 swizzle=128
// kb-tensormap: buffer=Y dims=N,M box=32,16 swizzle=128
#include <cuda_bf16.h>

#define BM 128
#define BN 256
#define BK 64
#define STAGES 4
#define GROUP_ROWS 16                     /* block rows per band of the tile order */
#define A_BYTES (BM * BK * 2)             /* one 128 x 64 box */
#define B_BOX_BYTES (64 * BK * 2)         /* B comes as four 64 x 64 boxes */
#define STAGE_BYTES (A_BYTES + 4 * B_BOX_BYTES)
#define OUT_BLOCK_BYTES (16 * 32 * 4)     /* one 16 x 32 block of Y */

/* CUtensorMap's size and alignment; kb-verify fills it on the host */
struct __align__(64) tensor_map {
    unsigned long long w[16];
};

__device__ __forceinline__ unsigned smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    unsigned done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n"
                     " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}

__device__ __forceinline__ void tma_load(unsigned dst, const tensor_map *map, int c0,
                                         int c1, unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

__device__ __forceinline__ void tma_store(const tensor_map *map, int c0, int c1, unsigned src)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(map), "r"(c0), "r"(c1), "r"(src) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

/* wgmma shared-memory descriptor, 128-byte swizzle */
__device__ __forceinline__ unsigned long long desc(unsigned addr, unsigned lbo, unsigned sbo)
{
    return (unsigned long long)((addr & 0x3FFFF) >> 4) |
           ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}

/* D (64 x 256, fp32, in registers) += A (64 x 16, K-major) * B (16 x 256,
 * N-major), both from shared memory */
__device__ __forceinline__ void wgmma256(float *d, unsigned long long da, unsigned long long db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, 1;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db));
}

/* the tile order: bands of GROUP_ROWS block rows, each walked column by
 * column, so that the tiles in flight share their rows of A and columns of B */
__device__ __forceinline__ void tile_origin(int tile, int nbm, int nbn, int *m0, int *n0)
{
    int per = GROUP_ROWS * nbn, first = (tile / per) * GROUP_ROWS;
    int rows = min(nbm - first, GROUP_ROWS);
    *m0 = (first + (tile % per) % rows) * BM;
    *n0 = ((tile % per) / rows) * BN;
}

__device__ __forceinline__ float gelu(float z)
{
    return 0.5f * z * (1.0f + erff(z * 0.70710678118654752f));
}

/* For shapes TMA cannot map: one output per thread and step, K summed in
 * fp32 from global memory, then the epilogue. Untimed shapes only (the
 * odd and tiny ones). */
__device__ void gemm_plain(const unsigned short *A, const unsigned short *B, const float *bias,
                           float *Y, int m, int n, int k, int m0, int n0)
{
    for (int i = threadIdx.x; i < BM * BN; i += blockDim.x) {
        int row = m0 + i / BN, col = n0 + i % BN;
        if (row >= m || col >= n)
            continue;
        float acc = 0.0f;
        for (int kk = 0; kk < k; kk++)
            acc += __uint_as_float((unsigned)A[(size_t)row * k + kk] << 16) *
                   __uint_as_float((unsigned)B[(size_t)kk * n + col] << 16);
        Y[(size_t)row * n + col] = gelu(acc + bias[col]);
    }
}

extern "C" __global__ void __launch_bounds__(384, 1)
gemm_bias_gelu_tma(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                   const float *__restrict__ bias, float *__restrict__ Y, float *acc, int m,
                   int n, int k, const __grid_constant__ tensor_map mapA,
                   const __grid_constant__ tensor_map mapB, const __grid_constant__ tensor_map mapC)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long bars[2 * STAGES];
    int tid = threadIdx.x, wg = tid >> 7;
    int nbm = (m + BM - 1) / BM, nbn = (n + BN - 1) / BN, ntiles = nbm * nbn;
    int m0, n0;

    if ((k & 7) || (n & 7)) {
        for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
            tile_origin(tile, nbm, nbn, &m0, &n0);
            gemm_plain((const unsigned short *)A, (const unsigned short *)B, bias, Y, m, n, k,
                       m0, n0);
        }
        return;
    }

    /* the ring (4 stages of A and B), then each consumer warp's two output
     * buffers; 1024-byte aligned for the 128-byte swizzle */
    unsigned base = (smem_addr(smem_raw) + 1023) & ~1023u;
    unsigned full = smem_addr(&bars[0]), empty = smem_addr(&bars[STAGES]);
    int ktiles = (k + BK - 1) / BK;
    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full + 8 * s, 1);    /* the producer, plus the bytes */
            mbar_init(empty + 8 * s, 2);   /* both consumer warpgroups */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        /* the producer: one thread issues every copy; `it` counts k-tiles
         * over all of this CTA's tiles, so the ring runs on across tiles */
        if (tid == 0) {
            int it = 0;
            for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
                tile_origin(tile, nbm, nbn, &m0, &n0);
                for (int kt = 0; kt < ktiles; kt++, it++) {
                    int s = it % STAGES;
                    if (it >= STAGES)   /* wait until both consumers freed it */
                        mbar_wait(empty + 8 * s, ((it / STAGES) + 1) & 1);
                    unsigned bar = full + 8 * s, sa = base + s * STAGE_BYTES;
                    mbar_expect_tx(bar, STAGE_BYTES);
                    tma_load(sa, &mapA, kt * BK, m0, bar);
                    for (int box = 0; box < 4; box++)
                        tma_load(sa + A_BYTES + box * B_BOX_BYTES, &mapB, n0 + box * 64,
                                 kt * BK, bar);
                }
            }
        }
        __syncwarp();
        return;
    }

    /* a consumer warpgroup: rows cw*64 .. cw*64+63 of each tile */
    int cw = wg - 1, lane = tid & 31, warp = (tid >> 5) & 3;
    int g = lane >> 2, t = lane & 3;
    unsigned out = base + STAGES * STAGE_BYTES + (cw * 4 + warp) * 2 * OUT_BLOCK_BYTES;
    int it = 0;
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        tile_origin(tile, nbm, nbn, &m0, &n0);
        float d[128];
#pragma unroll
        for (int i = 0; i < 128; i++)
            d[i] = 0.0f;
        for (int kt = 0; kt < ktiles; kt++, it++) {
            int s = it % STAGES;
            mbar_wait(full + 8 * s, (it / STAGES) & 1);
            unsigned sa = base + s * STAGE_BYTES + cw * 64 * 128;
            unsigned sb = base + s * STAGE_BYTES + A_BYTES;
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++)
                wgmma256(d, desc(sa + kk * 32, 16, 1024),
                         desc(sb + kk * 16 * 128, B_BOX_BYTES, 1024));
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            /* one group stays in flight; the one before it is done, so
             * its stage goes back to the producer */
            asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
            if (kt > 0 && (tid & 127) == 0)
                mbar_arrive(empty + 8 * ((it - 1) % STAGES));
            __syncwarp();
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        if ((tid & 127) == 0)
            mbar_arrive(empty + 8 * ((it - 1) % STAGES));
        __syncwarp();

        /* the warp's 16 rows leave in 16 x 32 blocks through two buffers
         * laid out as Y's map says (128-byte swizzle); a buffer is
         * rewritten only once TMA has read its previous block. TMA clips
         * what lies outside Y. */
        int wrow = m0 + cw * 64 + warp * 16;
#pragma unroll
        for (int i0 = 0; i0 < BN / 8; i0 += 4) {
            unsigned buf = out + ((i0 >> 2) & 1) * OUT_BLOCK_BYTES;
            if (lane == 0)
                asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
            __syncwarp();
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    /* fragment element: row g + 8h, columns 8(i0+j) + 2t, +1 */
                    int r = g + 8 * h, c = j * 8 + 2 * t;
                    unsigned a = buf + r * 128 + (((c >> 2) ^ (r & 7)) << 4) + (c & 3) * 4;
                    /* the epilogue, in registers: bias and GELU */
                    int col = n0 + i0 * 8 + c;
                    float y0 = gelu(d[4 * (i0 + j) + 2 * h] + (col < n ? bias[col] : 0.0f));
                    float y1 = gelu(d[4 * (i0 + j) + 2 * h + 1] +
                                    (col + 1 < n ? bias[col + 1] : 0.0f));
                    asm volatile("st.shared.v2.f32 [%0], {%1, %2};"
                                 :: "r"(a), "f"(y0), "f"(y1) : "memory");
                }
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            __syncwarp();
            if (lane == 0)
                tma_store(&mapC, n0 + i0 * 8, wrow, buf);
        }
    }
    if (lane == 0)
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
