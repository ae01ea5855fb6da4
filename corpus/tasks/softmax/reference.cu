// Reference: one thread per row, three passes (max, sum of exp, write).
extern "C" __global__ void softmax(const float *x, float *y, int m, int n)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= m)
        return;
    const float *xr = x + (size_t)row * n;
    float *yr = y + (size_t)row * n;
    float mx = -3.402823466e38f;
    for (int j = 0; j < n; j++)
        mx = fmaxf(mx, xr[j]);
    float sum = 0.0f;
    for (int j = 0; j < n; j++)
        sum += expf(xr[j] - mx);
    for (int j = 0; j < n; j++)
        yr[j] = expf(xr[j] - mx) / sum;
}
