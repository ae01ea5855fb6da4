// Reference: one thread per element, coalesced reads, strided writes.
extern "C" __global__ void transpose(const float *in, float *out, int m, int n)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < m && col < n)
        out[(size_t)col * m + row] = in[(size_t)row * n + col];
}
