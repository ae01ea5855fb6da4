// expect: gelu refused
// Allocates on the device heap: refused.
extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    float *tmp = (float *)malloc(sizeof(float));
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
    free(tmp);
}
