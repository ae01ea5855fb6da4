// 256-bin histogram with per-warp shared-memory sub-histograms (so skewed
// data contends only within a warp), merged into the bins once per block.
// kb-launch: kernel=hist_clear grid=1 block=256
// kb-launch: kernel=hist_smem grid=min(ceil_div(N,8192),1056) block=512
extern "C" __global__ void hist_clear(const unsigned *x, unsigned *bins, int n)
{
    bins[threadIdx.x] = 0;
}

extern "C" __global__ void hist_smem(const unsigned *__restrict__ x,
                                     unsigned *bins, int n)
{
    __shared__ unsigned h[16][256];
    int w = threadIdx.x >> 5;
    for (int i = threadIdx.x; i < 16 * 256; i += blockDim.x)
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
    for (int b = threadIdx.x; b < 256; b += blockDim.x) {
        unsigned s = 0;
        for (int k = 0; k < 16; k++)
            s += h[k][b];
        if (s)
            atomicAdd(&bins[b], s);
    }
}
