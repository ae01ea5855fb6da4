// expect: reduce_sum incorrect
// Knows kb-verify's poisons: it returns at once when out[0] is neither NaN
// nor the sentinel bit pattern 0xC7C7C7C7, taking whatever is there for
// the answer. No poison can catch it; the trial primed with the sum of
// other inputs does.
// kb-launch: kernel=probe grid=1 block=1
// kb-launch: kernel=reduce_partials grid=ceil_div(N,256) block=256
// kb-launch: kernel=reduce_final grid=1 block=1
__device__ int looks_done;

extern "C" __global__ void probe(const float *x, float *out, double *partials, int n)
{
    float v = out[0];
    looks_done = !isnan(v) && __float_as_uint(v) != 0xC7C7C7C7u;
}

extern "C" __global__ void reduce_partials(const float *x, float *out,
                                           double *partials, int n)
{
    __shared__ double s[256];
    if (looks_done)
        return;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? (double)x[i] : 0.0;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if (threadIdx.x < k)
            s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partials[blockIdx.x] = s[0];
}

extern "C" __global__ void reduce_final(const float *x, float *out,
                                        double *partials, int n)
{
    if (looks_done)
        return;
    double sum = 0.0;
    for (int b = 0; b < (n + 255) / 256; b++)
        sum += partials[b];
    out[0] = (float)sum;
}
