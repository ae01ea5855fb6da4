// expect: gelu incorrect
// Right on every element, but the last thread also writes one element past
// the end of y: caught by the guard bytes around every buffer.
extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
    if (i == n - 1)
        y[n] = 0.0f;
}
