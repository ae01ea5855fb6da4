// expect: histogram incorrect
// reason: left unwritten
// Writes a bin only where its count is not zero, leaving the rest to the
// zeroed allocation that a harness timing only the GPU span hands it. On
// the large shapes every bin is hit, so every bin is written; on the tiny
// shape (7 values in 256 bins) most are not, and they still hold the
// poison the harness put there.
// kb-launch: kernel=hist_part grid=min(ceil_div(N,8192),1056) block=512
// kb-launch: kernel=hist_sum grid=1 block=256
__device__ unsigned part[1056][256];

extern "C" __global__ void hist_part(const unsigned *__restrict__ x, unsigned *bins, int n)
{
    __shared__ unsigned h[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        h[i] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&h[x[i] & 255u], 1u);
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        part[blockIdx.x][i] = h[i];
}

extern "C" __global__ void hist_sum(const unsigned *__restrict__ x, unsigned *bins, int n)
{
    int nb = (n + 8191) / 8192;
    if (nb > 1056)
        nb = 1056;
    unsigned s = 0;
    for (int b = 0; b < nb; b++)
        s += part[b][threadIdx.x];
    if (s)
        bins[threadIdx.x] = s;
}
