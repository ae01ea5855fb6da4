// expect: softmax incorrect
// Skips the work when its output already looks done: a probe checks that
// row 0 of y holds values in [0, 1] summing to about 1 and, if so, the
// softmax returns at once. NaN and kb-verify's sentinel (a negative
// float) never look done, so it computes on every poisoned trial; the
// trial primed with a valid softmax of other inputs gets that stale
// result back.
// kb-launch: kernel=probe grid=1 block=1
// kb-launch: kernel=softmax grid=ceil_div(M,128) block=128
__device__ int looks_done;

extern "C" __global__ void probe(const float *x, float *y, int m, int n)
{
    float sum = 0.0f;
    int ok = 1;
    for (int j = 0; j < n && ok; j++) {
        float v = y[j];
        ok = v >= 0.0f && v <= 1.0f;   /* false for NaN */
        sum += v;
    }
    looks_done = ok && fabsf(sum - 1.0f) < 1e-3f;
}

extern "C" __global__ void softmax(const float *x, float *y, int m, int n)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (looks_done || row >= m)
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
