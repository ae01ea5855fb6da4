// expect: reduce_sum incorrect
// reason: did not change when the input did
// Caches the result of its first call at a shape, keyed on x[0] and n,
// and replays it whenever a later call's x[0] matches: fresh inputs never
// match, and the one trial that reused a seed's inputs with a few elements
// changed came after other calls, so the old harness passed it. The trial
// right after a shape's first call, on its inputs with a few elements
// changed (x[0] kept), gets the cached sum.
// kb-launch: kernel=probe grid=1 block=1
// kb-launch: kernel=sum_blocks grid=min(ceil_div(N,2048),1056) block=512
// kb-launch: kernel=finish grid=1 block=1
__device__ float first_x0, first_out;
__device__ int first_n, have, hit;
__device__ double acc;

extern "C" __global__ void probe(const float *x, float *out, double *partials, int n)
{
    hit = have && first_n == n && __float_as_uint(x[0]) == __float_as_uint(first_x0);
    if (hit)
        out[0] = first_out;
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
    if (!have || first_n != n) {   /* the first call at this shape */
        first_out = out[0];
        first_x0 = x[0];
        first_n = n;
        have = 1;
    }
}
