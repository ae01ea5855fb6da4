// Causal attention in one pass (FlashAttention-2 style) on the tensor
// cores: mma.sync m16n8k16 bf16 with fp32 accumulation, ldmatrix from
// padded shared tiles. A block of 4 warps takes 64 queries of one (batch,
// head), each warp 16 rows whose Q fragments stay in registers; it walks
// the key tiles of 64 up to the diagonal, S = Q K^T in registers, an
// online softmax (running max and sum per row, exp2 with the scale
// folded in), P re-packed as bf16 A fragments for O += P V (V through
// ldmatrix.trans). Only the diagonal tile and the last one are masked.
// Key and value tiles come by cp.async into two stages: the next pair
// loads while this one computes.
// Query tiles run from the longest (last) first. D = 64 or 128.
// kb-launch: kernel=attn_flash grid=ceil_div(L,64),B*H block=128 shared=4*64*(D+8)*2
#include <cuda_bf16.h>

#define BQ 64
#define BKV 64
#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ unsigned smem_u32(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2,
                                        unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2,
                                          unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void mma16816(float *c, const unsigned *a, unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi)
{
    __nv_bfloat162 r = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&r);
}

/* rows [r0, r0+64) of a (L x D) matrix into a padded tile, zeros past L,
 * by cp.async (16 bytes a copy; none read past L) */
template <int D>
__device__ __forceinline__ void load_tile(__nv_bfloat16 *dst, const __nv_bfloat16 *src, int r0,
                                          int l)
{
    constexpr int LD = D + 8, CH = D / 8;
    for (int c = threadIdx.x; c < 64 * CH; c += blockDim.x) {
        int r = c / CH, e = (c % CH) * 8;
        int ok = r0 + r < l;
        const __nv_bfloat16 *g = src + (size_t)(ok ? r0 + r : 0) * D + e;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                     :: "r"(smem_u32(dst + r * LD + e)), "l"(g), "r"(ok ? 16 : 0) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}

__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

template <int D>
__device__ void attn_tile(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                          const __nv_bfloat16 *__restrict__ v, __nv_bfloat16 *__restrict__ o,
                          int l, float scale, __nv_bfloat16 *smem)
{
    constexpr int LD = D + 8, KD = D / 16, ND = D / 8, TILE = 64 * LD;
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    int g = lane >> 2, t4 = lane & 3;
    int qt = gridDim.x - 1 - blockIdx.x, q0 = qt * BQ;
    size_t off = (size_t)blockIdx.y * l * D;
    q += off, k += off, v += off, o += off;

    /* Q: through the first K tile's space into registers */
    load_tile<D>(smem, q, q0, l);
    cp_wait_all();
    __syncthreads();
    unsigned qf[KD][4];
#pragma unroll
    for (int kk = 0; kk < KD; kk++) {
        int row = warp * 16 + (lane & 15), col = kk * 16 + (lane >> 4) * 8;
        ldsm_x4(smem_u32(smem + row * LD + col), qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
    }
    __syncthreads();
    /* two stages of (K, V) tiles: the next one loads while this one computes */
    load_tile<D>(smem, k, 0, l);
    load_tile<D>(smem + TILE, v, 0, l);

    float acc[ND][4];
#pragma unroll
    for (int i = 0; i < ND; i++)
        acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    float mrow[2] = { NEG_INF, NEG_INF }, lrow[2] = { 0.0f, 0.0f };
    const float sl2 = scale * 1.4426950408889634f;
    int qi[2] = { q0 + warp * 16 + g, q0 + warp * 16 + g + 8 };

    for (int kt = 0; kt <= qt; kt++) {
        int k0 = kt * BKV;
        const __nv_bfloat16 *sk = smem + (kt & 1) * 2 * TILE, *sv = sk + TILE;
        if (kt < qt) {
            __nv_bfloat16 *nk = smem + ((kt + 1) & 1) * 2 * TILE;
            load_tile<D>(nk, k, k0 + BKV, l);
            load_tile<D>(nk + TILE, v, k0 + BKV, l);
            asm volatile("cp.async.wait_group 2;" ::: "memory");   /* this tile's two */
        } else {
            cp_wait_all();
        }
        __syncthreads();
        float s[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++)
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KD; kk++)
#pragma unroll
            for (int n = 0; n < 8; n += 2) {
                unsigned b0, b1, b2, b3;
                int key = n * 8 + (lane & 7) + (lane >> 4) * 8;
                int col = kk * 16 + ((lane >> 3) & 1) * 8;
                ldsm_x4(smem_u32(sk + key * LD + col), b0, b1, b2, b3);
                mma16816(s[n], qf[kk], b0, b1);
                mma16816(s[n + 1], qf[kk], b2, b3);
            }
        bool mask = kt == qt || k0 + BKV > l;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float mx = mrow[h];
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float &x = s[n][2 * h + e];
                    int key = k0 + n * 8 + 2 * t4 + e;
                    x = (mask && (key > qi[h] || key >= l)) ? NEG_INF : x * sl2;
                    mx = fmaxf(mx, x);
                }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            float alpha = exp2f(mrow[h] - mx);      /* 0 on the first tile */
            mrow[h] = mx;
            float sum = 0.0f;
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float &x = s[n][2 * h + e];
                    x = exp2f(x - mx);
                    sum += x;
                }
            lrow[h] = lrow[h] * alpha + sum;
#pragma unroll
            for (int i = 0; i < ND; i++)
                acc[i][2 * h] *= alpha, acc[i][2 * h + 1] *= alpha;
        }
        /* O += P V: P's accumulators become A fragments, 16 keys a step */
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            unsigned a[4] = { pack_bf16(s[2 * ks][0], s[2 * ks][1]),
                              pack_bf16(s[2 * ks][2], s[2 * ks][3]),
                              pack_bf16(s[2 * ks + 1][0], s[2 * ks + 1][1]),
                              pack_bf16(s[2 * ks + 1][2], s[2 * ks + 1][3]) };
#pragma unroll
            for (int dn = 0; dn < ND; dn += 2) {
                unsigned b0, b1, b2, b3;
                int key = ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
                int col = dn * 8 + (lane >> 4) * 8;
                ldsm_x4_t(smem_u32(sv + key * LD + col), b0, b1, b2, b3);
                mma16816(acc[dn], a, b0, b1);
                mma16816(acc[dn + 1], a, b2, b3);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float tot = lrow[h];
        tot += __shfl_xor_sync(0xffffffffu, tot, 1);
        tot += __shfl_xor_sync(0xffffffffu, tot, 2);
        float inv = 1.0f / tot;
        if (qi[h] < l)
#pragma unroll
            for (int dn = 0; dn < ND; dn++)
                *reinterpret_cast<unsigned *>(o + (size_t)qi[h] * D + dn * 8 + 2 * t4) =
                    pack_bf16(acc[dn][2 * h] * inv, acc[dn][2 * h + 1] * inv);
    }
}

extern "C" __global__ void __launch_bounds__(128)
attn_flash(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
           const __nv_bfloat16 *__restrict__ v, __nv_bfloat16 *__restrict__ o, float *s,
           int b, int h, int l, int d, float scale)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __nv_bfloat16 *sm = reinterpret_cast<__nv_bfloat16 *>(smem_raw);
    if (d == 64)
        attn_tile<64>(q, k, v, o, l, scale, sm);
    else if (d == 128)
        attn_tile<128>(q, k, v, o, l, scale, sm);
}
