// Reference: three passes. Each block scans 256 values (Hillis-Steele in
// shared memory) and records its total; one thread scans the totals; each
// block then adds the totals of the blocks before it.
extern "C" __global__ void scan_blocks(const int *x, int *y, int *partials, int n)
{
    __shared__ int s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0;
    __syncthreads();
    for (int off = 1; off < blockDim.x; off *= 2) {
        int v = threadIdx.x >= off ? s[threadIdx.x - off] : 0;
        __syncthreads();
        s[threadIdx.x] += v;
        __syncthreads();
    }
    if (i < n)
        y[i] = s[threadIdx.x];
    if (threadIdx.x == blockDim.x - 1)
        partials[blockIdx.x] = s[threadIdx.x];
}

extern "C" __global__ void scan_partials(const int *x, int *y, int *partials, int n)
{
    int nb = (n + 255) / 256;
    int run = 0;
    for (int b = 0; b < nb; b++) {
        int v = partials[b];
        partials[b] = run;   /* exclusive: what comes before block b */
        run += v;
    }
}

extern "C" __global__ void scan_add(const int *x, int *y, int *partials, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] += partials[blockIdx.x];
}
