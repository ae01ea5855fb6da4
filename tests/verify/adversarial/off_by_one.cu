// expect: transpose incorrect
// A tiled transpose whose grid is rounded down: right whenever the shape
// is a multiple of 32, the last partial tiles missing otherwise.
// kb-launch: kernel=transpose_tile grid=N/32,M/32 block=32,8
extern "C" __global__ void transpose_tile(const float *in, float *out, int m, int n)
{
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < n && y + j < m)
            tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < m && y + j < n)
            out[(size_t)(y + j) * m + x] = tile[threadIdx.x][threadIdx.y + j];
}
