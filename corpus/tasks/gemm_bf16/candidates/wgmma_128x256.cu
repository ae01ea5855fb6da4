// bf16 GEMM (fp32 accumulate, fp32 out) on Hopper's wgmma: 128x256 block
// tiles, two warpgroups of m64n256k16 (A K-major, B MN-major, both in the
// 128-byte swizzled shared-memory layout), 64-deep k-tiles in a 4-stage
// cp.async ring (16-byte copies when K and N are multiples of 8, element
// stores with zero fill otherwise), each tile's wgmma overlapped with the
// next tile's issue (wait_group 1).
// kb-verify: arch=sm_90a
// kb-launch: kernel=gemm_wgmma grid=ceil_div(N,256)*ceil_div(M,128) block=256 shared=197632
#include <cuda_bf16.h>

#define BM 128
#define BN 256
#define BK 64
#define STAGES 4
#define A_BYTES 16384
#define STAGE_BYTES 49152
#define B_LBO 8192
#define B_SBO 1024

typedef unsigned short u16;

__device__ __forceinline__ void cp16(unsigned dst, const void *src, bool pred)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(pred ? 16 : 0));
}

__device__ __forceinline__ unsigned long long desc(unsigned addr, unsigned lbo, unsigned sbo)
{
    return (unsigned long long)((addr & 0x3FFFF) >> 4) |
           ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}

/* byte offsets in the 128B-swizzled layouts: A row r, column c (0..63);
 * B row k, column n (0..255) in 64-column blocks B_LBO apart */
__device__ __forceinline__ unsigned a_off(int r, int c)
{
    return r * 128 + ((((c >> 3) ^ (r & 7))) << 4) + (c & 7) * 2;
}
__device__ __forceinline__ unsigned b_off(int k, int n)
{
    int nn = n & 63;
    return (n >> 6) * 8192 + k * 128 + ((((nn >> 3) ^ (k & 7))) << 4) + (nn & 7) * 2;
}

__device__ __forceinline__ void load_tile(unsigned sA, unsigned sB, u16 *pA, u16 *pB,
                                          const u16 *A, const u16 *B, int m, int n,
                                          int k, int m0, int n0, int k0, int tid, bool vec)
{
    if (vec) {
#pragma unroll
        for (int i = 0; i < BM * BK / 8 / 256; i++) {
            int c = tid + i * 256, r = c >> 3, q = (c & 7) * 8;
            int gm = m0 + r, gk = k0 + q;
            bool p = gm < m && gk < k;
            cp16(sA + a_off(r, q), p ? A + (size_t)gm * k + gk : A, p);
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 8 / 256; i++) {
            int c = tid + i * 256, r = c >> 5, q = (c & 31) * 8;
            int gk = k0 + r, gn = n0 + q;
            bool p = gk < k && gn < n;
            cp16(sB + b_off(r, q), p ? B + (size_t)gk * n + gn : B, p);
        }
    } else {
        for (int c = tid; c < BM * BK; c += 256) {
            int r = c / BK, q = c % BK, gm = m0 + r, gk = k0 + q;
            pA[a_off(r, q) / 2] = (gm < m && gk < k) ? A[(size_t)gm * k + gk] : (u16)0;
        }
        for (int c = tid; c < BK * BN; c += 256) {
            int r = c / BN, q = c % BN, gk = k0 + r, gn = n0 + q;
            pB[b_off(r, q) / 2] = (gk < k && gn < n) ? B[(size_t)gk * n + gn] : (u16)0;
        }
    }
}

__device__ __forceinline__ void wgmma256(float *d, unsigned long long da, unsigned long long db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, 1;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db));
}

extern "C" __global__ void __launch_bounds__(256, 1)
gemm_wgmma(const __nv_bfloat16 *__restrict__ Ab, const __nv_bfloat16 *__restrict__ Bb,
           float *__restrict__ C, int m, int n, int k)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const u16 *A = (const u16 *)Ab, *B = (const u16 *)Bb;
    unsigned raw = (unsigned)__cvta_generic_to_shared(smem_raw);
    unsigned base = (raw + 1023) & ~1023u;
    unsigned char *gbase = smem_raw + (base - raw);
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;

    int nbn = (n + BN - 1) / BN, nbm = (m + BM - 1) / BM;
    int bid = blockIdx.x, per = 8 * nbn;
    int first = (bid / per) * 8, gsz = min(nbm - first, 8);
    int bm = first + (bid % per) % gsz, bn = (bid % per) / gsz;
    int m0 = bm * BM, n0 = bn * BN;
    bool vec = (k % 8 == 0) && (n % 8 == 0) && (((size_t)A | (size_t)B) % 16 == 0);

    float d[128];
#pragma unroll
    for (int i = 0; i < 128; i++)
        d[i] = 0.0f;

    int ktiles = (k + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 2; s++) {
        if (s < ktiles)
            load_tile(base + s * STAGE_BYTES, base + s * STAGE_BYTES + A_BYTES,
                      (u16 *)(gbase + s * STAGE_BYTES),
                      (u16 *)(gbase + s * STAGE_BYTES + A_BYTES), A, B, m, n, k,
                      m0, n0, s * BK, tid, vec);
        asm volatile("cp.async.commit_group;\n");
    }
    for (int kt = 0; kt < ktiles; kt++) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 3));
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        int nk = kt + STAGES - 2;
        if (nk < ktiles) {
            int s = nk % STAGES;
            load_tile(base + s * STAGE_BYTES, base + s * STAGE_BYTES + A_BYTES,
                      (u16 *)(gbase + s * STAGE_BYTES),
                      (u16 *)(gbase + s * STAGE_BYTES + A_BYTES), A, B, m, n, k,
                      m0, n0, nk * BK, tid, vec);
        }
        asm volatile("cp.async.commit_group;\n");
        unsigned sa = base + (kt % STAGES) * STAGE_BYTES + wg * 64 * 128;
        unsigned sb = base + (kt % STAGES) * STAGE_BYTES + A_BYTES;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int s = 0; s < BK / 16; s++)
            wgmma256(d, desc(sa + s * 32, 16, 1024), desc(sb + s * 16 * 128, B_LBO, B_SBO));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    asm volatile("cp.async.wait_group 0;\n");

    int g = lane >> 2, t = lane & 3;
    int row0 = m0 + wg * 64 + (warp & 3) * 16 + g;
    bool even = (n % 2) == 0;
#pragma unroll
    for (int i = 0; i < BN / 8; i++) {
        int col = n0 + i * 8 + 2 * t;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int row = row0 + h * 8;
            if (row >= m)
                continue;
            float *p = C + (size_t)row * n + col;
            float v0 = d[4 * i + 2 * h], v1 = d[4 * i + 2 * h + 1];
            if (even && col + 1 < n) {
                *(float2 *)p = make_float2(v0, v1);
            } else {
                if (col < n)
                    p[0] = v0;
                if (col + 1 < n)
                    p[1] = v1;
            }
        }
    }
}
