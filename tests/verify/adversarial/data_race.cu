// expect: transpose incorrect
// The tiled transpose without the barrier between the shared-memory writes
// and the reads of other warps' elements: a data race.
// kb-launch: kernel=transpose_race grid=ceil_div(N,32),ceil_div(M,32) block=32,8
extern "C" __global__ void transpose_race(const float *in, float *out, int m, int n)
{
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < n && y + j < m)
            tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * n + x];
    /* missing __syncthreads() */
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < m && y + j < n)
            out[(size_t)(y + j) * m + x] = tile[threadIdx.x][threadIdx.y + j];
}
