// expect: gelu incorrect
// Writes only the even elements.
extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
