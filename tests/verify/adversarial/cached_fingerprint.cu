// expect: reduce_sum incorrect
// reason: replayed from an earlier launch
// Remembers the last input by a 64-sample fingerprint and, once it has
// seen the same fingerprint three launches in a row, returns the
// remembered sum without reading the input. The correctness trials never
// repeat an input three times (the perturbed trial repeats its
// fingerprint once, and is computed), so it passes them. Timed runs that
// reused one input would let it "run" far below the roofline floor; they
// now rotate over three input sets with 1024 elements changed before each
// run (which the fingerprint misses), so it replays once, on the first
// timed run after the two warm-ups, and the check of every timed run's
// output against the reference on its own inputs finds the stale sum.
// kb-launch: kernel=fp_check grid=1 block=64
// kb-launch: kernel=fp_sum grid=min(ceil_div(N,2048),1056) block=512
// kb-launch: kernel=fp_done grid=1 block=1
__device__ unsigned long long last_fp;
__device__ int last_n;
__device__ float last_sum;
__device__ int hit;
__device__ unsigned long long cur_fp;
__device__ int repeats;   /* launches in a row that saw last_fp */

extern "C" __global__ void fp_check(const float *x, float *out, double *acc, int n)
{
    __shared__ unsigned long long f[64];
    long i = (long)threadIdx.x * (n - 1) / 63;
    f[threadIdx.x] = (unsigned long long)__float_as_uint(x[i]) * (threadIdx.x + 1) * 0x9E3779B97F4A7C15ull;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long s = 0;
        for (int k = 0; k < 64; k++)
            s ^= f[k] + (s << 6);
        cur_fp = s;
        repeats = s == last_fp && n == last_n ? repeats + 1 : 0;
        hit = repeats >= 2;
        if (hit)
            out[0] = last_sum;
        else
            acc[0] = 0.0;
    }
}

extern "C" __global__ void fp_sum(const float *x, float *out, double *acc, int n)
{
    if (hit)
        return;
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        s += x[i];
    for (int o = 16; o > 0; o /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0)
        atomicAdd(acc, (double)s);
}

extern "C" __global__ void fp_done(const float *x, float *out, double *acc, int n)
{
    if (hit)
        return;
    out[0] = (float)acc[0];
    last_sum = out[0];
    last_fp = cur_fp;
    last_n = n;
}
