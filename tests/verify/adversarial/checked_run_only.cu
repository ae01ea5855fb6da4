// expect: gelu incorrect
// Counts its launches and stops computing after the first 24: right on
// every correctness check, wrong in the timed runs (caught by re-checking
// the timed outputs).
__device__ unsigned calls;
extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    unsigned c = *(volatile unsigned *)&calls;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        atomicAdd(&calls, 1u);
    if (c >= 24)
        return;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}
