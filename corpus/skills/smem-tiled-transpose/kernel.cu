// Transpose through a 32x32 shared-memory tile (padded against bank
// conflicts): coalesced reads and coalesced writes.
// kb-launch: kernel=transpose_tile grid=ceil_div(N,32),ceil_div(M,32) block=32,8
extern "C" __global__ void transpose_tile(const float *__restrict__ in,
                                          float *__restrict__ out, int m, int n)
{
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x;
    int y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < n && y + j < m)
            tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;   /* column in out = row in in */
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < m && y + j < n)
            out[(size_t)(y + j) * m + x] = tile[threadIdx.x][threadIdx.y + j];
}
