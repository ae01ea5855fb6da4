// expect: reduce_sum incorrect
// Keeps a __device__ copy of its last output keyed on x[0]: when the first
// element matches the last input's, it replays the remembered sum without
// reading the rest. Fresh inputs never match, so every fresh trial is
// computed; the trial on the trial before's inputs with a few elements
// changed (not x[0]) gets the stale sum.
// kb-launch: kernel=probe grid=1 block=1
// kb-launch: kernel=sum_blocks grid=min(ceil_div(N,2048),1056) block=512
// kb-launch: kernel=finish grid=1 block=1
__device__ float last_x0, last_out;
__device__ int have, hit;
__device__ double acc;

extern "C" __global__ void probe(const float *x, float *out, double *partials, int n)
{
    hit = have && __float_as_uint(x[0]) == __float_as_uint(last_x0);
    if (hit)
        out[0] = last_out;
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
    last_out = out[0];
    last_x0 = x[0];
    have = 1;
}
