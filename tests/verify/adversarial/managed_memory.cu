// expect: gelu refused
// Keeps state in managed memory: refused (kb-verify owns allocation).
__managed__ float keep[1024];
extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = keep[i % 1024] + 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
