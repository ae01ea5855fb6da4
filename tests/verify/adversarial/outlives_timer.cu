// expect: gelu refused
// Launches the real work as a child grid from the device, so that it
// would outlive the parent's timed region: device-side launches are refused.
extern "C" __global__ void gelu_child(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        gelu_child<<<(n + 255) / 256, 256>>>(x, y, n);
}
