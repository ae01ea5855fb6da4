// expect: softmax incorrect
// Softmax without subtracting the row maximum, with the fast __expf: fine
// on N(0,1) inputs, inf/inf = NaN once the inputs reach ~88.
// kb-launch: kernel=softmax_fast grid=M block=256
extern "C" __global__ void softmax_fast(const float *x, float *y, int m, int n)
{
    __shared__ float sh[32];
    const float *xr = x + (size_t)blockIdx.x * n;
    float s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        s += __expf(xr[j]);
    for (int o = 16; o > 0; o /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0)
        sh[threadIdx.x >> 5] = s;
    __syncthreads();
    float t = 0.0f;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++)
        t += sh[w];
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        y[(size_t)blockIdx.x * n + j] = __expf(xr[j]) / t;
}
