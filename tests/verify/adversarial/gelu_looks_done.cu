// expect: gelu incorrect
// Skips the work when y[0] is finite and plausible for a GELU (at least
// -0.17, not huge): a probe decides before anything is written, and the
// elementwise kernel returns at once. NaN fails the test and kb-verify's
// sentinel (about -1.0e5) is no GELU value, so it computes on every
// poisoned trial; primed with a valid result of other inputs it keeps it.
// kb-launch: kernel=probe grid=1 block=1
// kb-launch: kernel=gelu grid=ceil_div(N,256) block=256
__device__ int looks_done;

extern "C" __global__ void probe(const float *x, float *y, int n)
{
    float v = y[0];
    looks_done = isfinite(v) && v >= -0.2f && v < 1e6f;
}

extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (looks_done || i >= n)
        return;
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}
