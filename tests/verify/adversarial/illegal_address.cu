// expect: gelu crash
// Writes through a wild pointer: an illegal address error (sticky).
extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float *wild = (float *)0xdead000000000ull;
    if (i < n)
        wild[i] = x[i];
}
