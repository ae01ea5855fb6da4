// expect: reduce_sum incorrect
// reason: did not change when the input did
// An input cache keyed by the shape alone: the first call at a size
// computes the sum and keeps it; every later call at that size returns it
// without reading x, as a harness that times one input over and over
// would reward. The trial after the shape's first call (its inputs with a
// few elements changed) gets the kept sum.
// kb-launch: kernel=probe grid=1 block=1
// kb-launch: kernel=sum_blocks grid=min(ceil_div(N,2048),1056) block=512
// kb-launch: kernel=finish grid=1 block=1
__device__ int kept_n = -1, hit;
__device__ float kept_out;
__device__ double acc;

extern "C" __global__ void probe(const float *x, float *out, double *partials, int n)
{
    hit = kept_n == n;
    if (hit)
        out[0] = kept_out;
    acc = 0.0;
}

extern "C" __global__ void sum_blocks(const float *x, float *out, double *partials, int n)
{
    if (hit)
        return;
    double s = 0.0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        s += x[i];
    for (int o = 16; o > 0; o /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0)
        atomicAdd(&acc, s);
}

extern "C" __global__ void finish(const float *x, float *out, double *partials, int n)
{
    if (hit)
        return;
    out[0] = (float)acc;
    kept_out = out[0];
    kept_n = n;
}
