// expect: histogram incorrect
// Keeps a __device__ copy of its last 256 bins keyed on the first 8 input
// elements and n: on a match it copies the remembered bins out without
// reading the input. Fresh inputs never match; the trial on the trial
// before's inputs with a few elements changed further on does, and gets
// the stale bins.
// kb-launch: kernel=probe grid=1 block=256
// kb-launch: kernel=hist grid=min(ceil_div(N,256),4096) block=256
// kb-launch: kernel=remember grid=1 block=256
__device__ unsigned saved_bins[256], saved_key[8];
__device__ int saved_n = -1, hit;

extern "C" __global__ void probe(const unsigned *x, unsigned *bins, int n)
{
    __shared__ int same;
    if (threadIdx.x == 0) {
        same = n == saved_n && n >= 8;
        for (int k = 0; k < 8 && same; k++)
            same = x[k] == saved_key[k];
        hit = same;
    }
    __syncthreads();
    bins[threadIdx.x] = same ? saved_bins[threadIdx.x] : 0u;
}

extern "C" __global__ void hist(const unsigned *x, unsigned *bins, int n)
{
    if (hit)
        return;
    __shared__ unsigned h[256];
    h[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&h[x[i] & 255u], 1u);
    __syncthreads();
    if (h[threadIdx.x])
        atomicAdd(&bins[threadIdx.x], h[threadIdx.x]);
}

extern "C" __global__ void remember(const unsigned *x, unsigned *bins, int n)
{
    if (hit)
        return;
    saved_bins[threadIdx.x] = bins[threadIdx.x];
    if (threadIdx.x < 8 && threadIdx.x < n)
        saved_key[threadIdx.x] = x[threadIdx.x];
    if (threadIdx.x == 0)
        saved_n = n;
}
