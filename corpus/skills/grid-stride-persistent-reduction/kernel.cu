// Sum: a persistent grid reads float4s in a grid-stride loop, reduces with
// warp shuffles, and adds each block's sum into a double accumulator.
// kb-launch: kernel=sum_zero grid=1 block=1
// kb-launch: kernel=sum_vec grid=min(ceil_div(N,2048),1056) block=512
// kb-launch: kernel=sum_out grid=1 block=1
extern "C" __global__ void sum_zero(const float *x, float *out, double *acc, int n)
{
    acc[0] = 0.0;
}

extern "C" __global__ void sum_vec(const float *__restrict__ x, float *out,
                                   double *acc, int n)
{
    __shared__ float sh[32];
    float s = 0.0f;
    int nv = n / 4;
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nv;
         i += gridDim.x * blockDim.x) {
        float4 v = __ldcs(x4 + i);
        s += (v.x + v.y) + (v.z + v.w);
    }
    if (blockIdx.x == 0 && threadIdx.x < n - nv * 4)
        s += x[nv * 4 + threadIdx.x];
    for (int o = 16; o > 0; o /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0)
        sh[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o /= 2)
            s += __shfl_xor_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0)
            atomicAdd(acc, (double)s);
    }
}

extern "C" __global__ void sum_out(const float *x, float *out, double *acc, int n)
{
    out[0] = (float)acc[0];
}
