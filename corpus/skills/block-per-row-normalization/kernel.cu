// Row LayerNorm, one 256-thread block per row: coalesced loads, two-pass
// mean and variance reduced with warp shuffles, the row re-read from L1/L2.
// kb-launch: kernel=layernorm_block grid=M block=256
__device__ float block_sum(float v, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    float r = lane < (blockDim.x >> 5) ? sh[lane] : 0.0f;
    for (int o = 16; o > 0; o /= 2)
        r += __shfl_xor_sync(0xffffffffu, r, o);
    __syncthreads();
    return r;
}

extern "C" __global__ void layernorm_block(const float *__restrict__ x,
                                           const float *__restrict__ gamma,
                                           const float *__restrict__ beta,
                                           float *__restrict__ y, int m, int n,
                                           float eps)
{
    __shared__ float sh[32];
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = y + (size_t)blockIdx.x * n;
    float s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        s += xr[j];
    float mean = block_sum(s, sh) / n;
    float v = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float d = xr[j] - mean;
        v += d * d;
    }
    float rstd = rsqrtf(block_sum(v, sh) / n + eps);
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
}
