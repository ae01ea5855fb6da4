// expect: reduce_sum incorrect
// reason: replayed from an earlier launch
// A memo of the last eight inputs, each known by a 64-sample fingerprint
// and the size: an input seen twice before gets its remembered sum back
// without a read of x, padded with a dependent spin so that its time stays
// above 0.7 x the roofline floor. The trials never show one fingerprint
// three times; timing over three input sets in turn would, every third
// run, if a few changed elements did not escape the fingerprint, so the
// memo replays and the re-check of each timed run against the reference
// on that run's own inputs finds the stale sum.
// kb-launch: kernel=fp_check grid=1 block=64
// kb-launch: kernel=fp_sum grid=min(ceil_div(N,2048),1056) block=512
// kb-launch: kernel=fp_done grid=1 block=1
#define SLOTS 8
__device__ unsigned long long memo_fp[SLOTS];
__device__ int memo_n[SLOTS], memo_seen[SLOTS], next_slot;
__device__ float memo_sum[SLOTS];
__device__ int hit, cur_slot;
__device__ unsigned long long cur_fp;
__device__ unsigned long long sink;

extern "C" __global__ void fp_check(const float *x, float *out, double *acc, int n)
{
    __shared__ unsigned long long f[64];
    long i = (long)threadIdx.x * (n - 1) / 63;
    f[threadIdx.x] = (unsigned long long)__float_as_uint(x[i]) * (threadIdx.x + 1) * 0x9E3779B97F4A7C15ull;
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    unsigned long long s = 0;
    for (int k = 0; k < 64; k++)
        s ^= f[k] + (s << 6);
    cur_fp = s;
    cur_slot = -1;
    for (int k = 0; k < SLOTS; k++)
        if (memo_fp[k] == s && memo_n[k] == n && memo_seen[k] > 0)
            cur_slot = k;
    hit = cur_slot >= 0 && memo_seen[cur_slot] >= 2;
    if (hit) {
        /* a dependent spin: about 60 us, the roofline floor's order */
        unsigned long long v = s;
        long long t0 = clock64();
        while (clock64() - t0 < 110000)
            v = v * 6364136223846793005ull + 1442695040888963407ull;
        sink = v;
        out[0] = memo_sum[cur_slot];
        memo_seen[cur_slot]++;
    } else {
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
    int k = cur_slot;
    if (k < 0) {
        k = next_slot;
        next_slot = (next_slot + 1) % SLOTS;
        memo_fp[k] = cur_fp;
        memo_n[k] = n;
        memo_seen[k] = 0;
    }
    memo_sum[k] = out[0];
    memo_seen[k]++;
}
