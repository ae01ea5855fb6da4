// 256-bin histogram on thread-block clusters of 2 blocks: each block
// builds per-warp shared-memory sub-histograms (as the privatised
// histogram does) and folds them into its first copy; after a cluster
// barrier, block r of the cluster sums bins [128r, 128r+128) over the two
// blocks' copies through distributed shared memory (the other blocks'
// shared memory, addressed through mapa and ld.shared::cluster) and adds them to
// the global bins: the merge is spread over the cluster and the global
// atomics drop by the cluster's size. A second cluster barrier keeps every
// block's shared memory alive until the others have read it.
// The cluster shape is fixed at compile time (__cluster_dims__), so a plain
// launch starts clusters; the grid is a multiple of 2 (1056 blocks, as
// the privatised histogram's). Clusters of 4 and 8 measured slower. The cluster
// operations are the PTX ones (cooperative_groups' cluster_group wraps the
// same instructions, but needs libcu++ headers NVRTC is not given here).
// kb-verify: arch=sm_90
// kb-launch: kernel=hist_clear grid=1 block=256
// kb-launch: kernel=hist_cluster grid=2*min(ceil_div(N,16384),528) block=512
#define CLUSTER 2
#define WARPS 16
#define SLICE (256 / CLUSTER)

__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

/* barrier.cluster: all threads of all blocks of the cluster; release and
 * acquire order the shared-memory writes before it with reads after it */
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* the word at p (this block's shared memory) in block rank's copy */
__device__ __forceinline__ unsigned ld_rank(const unsigned *p, unsigned rank)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(p), r, v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(r) : "memory");
    return v;
}

extern "C" __global__ void hist_clear(const unsigned *x, unsigned *bins, int n)
{
    bins[threadIdx.x] = 0;
}

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(512)
hist_cluster(const unsigned *__restrict__ x, unsigned *bins, int n)
{
    __shared__ unsigned h[WARPS][256];
    int w = threadIdx.x >> 5;
    for (int i = threadIdx.x; i < WARPS * 256; i += blockDim.x)
        (&h[0][0])[i] = 0;
    __syncthreads();
    int nv = n / 4;
    const uint4 *x4 = reinterpret_cast<const uint4 *>(x);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nv;
         i += gridDim.x * blockDim.x) {
        uint4 v = __ldcs(x4 + i);
        atomicAdd(&h[w][v.x & 255u], 1u);
        atomicAdd(&h[w][v.y & 255u], 1u);
        atomicAdd(&h[w][v.z & 255u], 1u);
        atomicAdd(&h[w][v.w & 255u], 1u);
    }
    if (blockIdx.x == 0 && threadIdx.x < n - nv * 4)
        atomicAdd(&h[w][x[nv * 4 + threadIdx.x] & 255u], 1u);
    __syncthreads();
    if (threadIdx.x < 256) {
        unsigned s = 0;
#pragma unroll
        for (int k = 0; k < WARPS; k++)
            s += h[k][threadIdx.x];
        h[0][threadIdx.x] = s;
    }
    cluster_sync();                /* every block's h[0] is complete */
    unsigned r = cluster_rank();
    if (threadIdx.x < SLICE) {
        int b = (int)r * SLICE + threadIdx.x;
        unsigned s = 0;
#pragma unroll
        for (int k = 0; k < CLUSTER; k++)
            s += ld_rank(&h[0][b], (unsigned)k);
        if (s)
            atomicAdd(&bins[b], s);
    }
    cluster_sync();                /* no block leaves while others read it */
}
