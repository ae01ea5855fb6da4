// Inclusive scan in one pass over memory: a decoupled look-back
// (Merrill and Garland, "Single-pass Parallel Prefix Scan with Decoupled
// Look-back", 2016). Each 256-thread block scans one 4096-value tile
// (16 values, four int4, per thread in registers, then warp shuffles and
// one shared-memory step across the 8 warps), publishes
// its tile's total as an "aggregate" at once, then its first warp looks
// back over the preceding tiles' status words 32 at a time: it adds
// aggregates until it meets a tile that has published its "inclusive"
// prefix, publishes its own inclusive prefix and lets the block write its
// tile. Each value is read once and written once (8 bytes a value, the
// floor), where the three-pass scan moves 16. Of the shapes tried on the
// H200 (1024 x 4, 512 x 8, 512 x 16, 256 x 16 threads x values), 256 x 16
// was fastest: more values a thread, more loads in flight.
// A status word is 64 bits, the flag in the high half and the value in the
// low half, written and read whole with relaxed gpu-scope accesses, so no
// fence is needed between a value and its flag. The words live in the
// task's scratch buffer (tiles - 1 of them: the last tile publishes
// nothing), cleared by a first small kernel before every scan.
// Tiles are numbered by blockIdx.x: a block waits only on lower-numbered
// blocks, which the hardware has already made resident (as CUB assumes).
// kb-launch: kernel=lb_clear grid=ceil_div(N,1048576) block=256
// kb-launch: kernel=lb_scan grid=ceil_div(N,4096) block=256
#define TPB 256                    /* threads a block */
#define IPT 16                     /* values a thread, a multiple of 4 */
#define MINB 8                     /* blocks an SM (launch bounds) */
#define TILE (TPB * IPT)
#define FLAG_AGG 1ull
#define FLAG_INC 2ull
#define FULL 0xffffffffu

__device__ __forceinline__ void st_status(unsigned long long *p, unsigned long long v)
{
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ unsigned long long ld_status(const unsigned long long *p)
{
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned long long pack(unsigned long long flag, int v)
{
    return flag << 32 | (unsigned)v;
}

__device__ __forceinline__ int warp_incl(int v, int lane)
{
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
        int u = __shfl_up_sync(FULL, v, o);
        if (lane >= o)
            v += u;
    }
    return v;
}

__device__ __forceinline__ int warp_sum(int v)
{
#pragma unroll
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(FULL, v, o);
    return v;
}

extern "C" __global__ void lb_clear(const int *x, int *y, int *partials, int n)
{
    int tiles = (n + TILE - 1) / TILE;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < tiles - 1)
        reinterpret_cast<unsigned long long *>(partials)[i] = 0ull;
}

/* The exclusive prefix of tile t (> 0), found by warp 0 looking back over
 * the status words of tiles t-1, t-2, ... 32 at a time. */
__device__ int look_back(const unsigned long long *st, int t, int lane)
{
    int excl = 0;
    for (int end = t - 1;; end -= 32) {
        int idx = end - lane;
        unsigned long long s;
        do
            s = idx >= 0 ? ld_status(st + idx) : pack(FLAG_INC, 0);
        while (__any_sync(FULL, (s >> 32) == 0));
        unsigned inc = __ballot_sync(FULL, (s >> 32) == FLAG_INC);
        /* lane 0 is the nearest tile: add up to the first inclusive one */
        int stop = inc ? __ffs(inc) - 1 : 31;
        excl += warp_sum(lane <= stop ? (int)(unsigned)s : 0);
        if (inc)
            return excl;
    }
}

extern "C" __global__ void __launch_bounds__(TPB, MINB)
lb_scan(const int *__restrict__ x, int *__restrict__ y, int *partials, int n)
{
    __shared__ int wsum[TPB / 32];
    __shared__ int tile_excl;
    unsigned long long *st = reinterpret_cast<unsigned long long *>(partials);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int t = blockIdx.x, last = gridDim.x - 1;
    size_t i = (size_t)t * TILE + threadIdx.x * IPT;
    int v[IPT];
    if (i + IPT <= (size_t)n) {
#pragma unroll
        for (int k = 0; k < IPT; k += 4) {
            int4 q = __ldcs(reinterpret_cast<const int4 *>(x + i + k));
            v[k] = q.x, v[k + 1] = q.y, v[k + 2] = q.z, v[k + 3] = q.w;
        }
    } else {
#pragma unroll
        for (int k = 0; k < IPT; k++)
            v[k] = i + k < (size_t)n ? x[i + k] : 0;
    }
#pragma unroll
    for (int k = 1; k < IPT; k++)
        v[k] += v[k - 1];
    int inc = warp_incl(v[IPT - 1], lane);
    if (lane == 31)
        wsum[w] = inc;
    __syncthreads();
    if (w == 0) {
        int s = lane < TPB / 32 ? wsum[lane] : 0;
        s = warp_incl(s, lane);
        if (lane < TPB / 32)
            wsum[lane] = s;
    }
    __syncthreads();
    if (w == 0) {
        int agg = wsum[TPB / 32 - 1], excl = 0;
        if (t == 0) {
            if (lane == 0 && t < last)
                st_status(st, pack(FLAG_INC, agg));
        } else {
            if (lane == 0 && t < last)
                st_status(st + t, pack(FLAG_AGG, agg));
            excl = look_back(st, t, lane);
            if (lane == 0 && t < last)
                st_status(st + t, pack(FLAG_INC, excl + agg));
        }
        if (lane == 0)
            tile_excl = excl;
    }
    __syncthreads();
    int off = tile_excl + (w ? wsum[w - 1] : 0) + inc - v[IPT - 1];
    if (i + IPT <= (size_t)n) {
#pragma unroll
        for (int k = 0; k < IPT; k += 4)
            __stcs(reinterpret_cast<int4 *>(y + i + k),
                   make_int4(v[k] + off, v[k + 1] + off, v[k + 2] + off, v[k + 3] + off));
    } else {
#pragma unroll
        for (int k = 0; k < IPT; k++)
            if (i + k < (size_t)n)
                y[i + k] = v[k] + off;
    }
}
