// 256-bin histogram with warp-aggregated shared-memory atomics: before an
// update the lanes of a warp that hold the same bin find each other with
// __match_any_sync, and only the lowest of them adds the group's count
// (__popc of the match mask), so a warp issues one atomic per distinct
// bin instead of one per value. That takes the place of the privatised
// histogram's per-warp copies: one copy of the bins per block suffices
// even on skewed data, where a warp's 32 values often share a bin.
// The grid-stride loop runs whole warps (the bound is warp-uniform, lanes
// past the end carry a value outside the bins and add nothing), so every
// lane named in the match mask takes part.
// kb-launch: kernel=hist_clear grid=1 block=256
// kb-launch: kernel=hist_wagg grid=min(ceil_div(N,8192),1056) block=512
#define NONE 0x100u                /* outside the 256 bins */

extern "C" __global__ void hist_clear(const unsigned *x, unsigned *bins, int n)
{
    bins[threadIdx.x] = 0;
}

__device__ __forceinline__ void add_agg(unsigned *h, unsigned bin, unsigned lt)
{
    unsigned peers = __match_any_sync(0xffffffffu, bin);
    if (bin != NONE && (peers & lt) == 0)     /* the group's lowest lane */
        atomicAdd(&h[bin], (unsigned)__popc(peers));
}

extern "C" __global__ void __launch_bounds__(512)
hist_wagg(const unsigned *__restrict__ x, unsigned *bins, int n)
{
    __shared__ unsigned h[256];
    unsigned lane = threadIdx.x & 31, lt = (1u << lane) - 1;
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        h[i] = 0;
    __syncthreads();
    int nv = n / 4;
    const uint4 *x4 = reinterpret_cast<const uint4 *>(x);
    int stride = gridDim.x * blockDim.x;
    /* warp-uniform bound: the first lane's index decides for the warp */
    for (int i0 = blockIdx.x * blockDim.x + (threadIdx.x & ~31); i0 < nv; i0 += stride) {
        int i = i0 + (int)lane;
        uint4 v = make_uint4(NONE, NONE, NONE, NONE);
        if (i < nv) {
            v = __ldcs(x4 + i);
            v.x &= 255u, v.y &= 255u, v.z &= 255u, v.w &= 255u;
        }
        add_agg(h, v.x, lt);
        add_agg(h, v.y, lt);
        add_agg(h, v.z, lt);
        add_agg(h, v.w, lt);
    }
    if (blockIdx.x == 0 && threadIdx.x < n - nv * 4)
        atomicAdd(&h[x[nv * 4 + threadIdx.x] & 255u], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        if (h[b])
            atomicAdd(&bins[b], h[b]);
}
