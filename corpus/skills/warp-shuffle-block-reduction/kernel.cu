// Row softmax, one 256-thread block per row: coalesced loads, warp-shuffle
// reductions for the max and the sum, the row re-read from L1/L2.
// kb-launch: kernel=softmax_block grid=M block=256
__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ float block_reduce(float v, bool is_max, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    float r = lane < (blockDim.x >> 5) ? sh[lane] : (is_max ? -3.402823466e38f : 0.0f);
    r = is_max ? warp_max(r) : warp_sum(r);
    __syncthreads();
    return r;
}

extern "C" __global__ void softmax_block(const float *__restrict__ x,
                                         float *__restrict__ y, int m, int n)
{
    __shared__ float sh[32];
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = y + (size_t)blockIdx.x * n;
    bool vec = (n % 4) == 0;
    float mx = -3.402823466e38f;
    if (vec) {
        const float4 *x4 = reinterpret_cast<const float4 *>(xr);
        for (int j = threadIdx.x; j < n / 4; j += blockDim.x) {
            float4 v = x4[j];
            mx = fmaxf(mx, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
        }
    } else {
        for (int j = threadIdx.x; j < n; j += blockDim.x)
            mx = fmaxf(mx, xr[j]);
    }
    mx = block_reduce(mx, true, sh);
    float s = 0.0f;
    if (vec) {
        const float4 *x4 = reinterpret_cast<const float4 *>(xr);
        for (int j = threadIdx.x; j < n / 4; j += blockDim.x) {
            float4 v = x4[j];
            s += expf(v.x - mx) + expf(v.y - mx) + expf(v.z - mx) + expf(v.w - mx);
        }
    } else {
        for (int j = threadIdx.x; j < n; j += blockDim.x)
            s += expf(xr[j] - mx);
    }
    s = block_reduce(s, false, sh);
    float inv = 1.0f / s;
    if (vec) {
        const float4 *x4 = reinterpret_cast<const float4 *>(xr);
        float4 *y4 = reinterpret_cast<float4 *>(yr);
        for (int j = threadIdx.x; j < n / 4; j += blockDim.x) {
            float4 v = x4[j];
            y4[j] = make_float4(expf(v.x - mx) * inv, expf(v.y - mx) * inv,
                                expf(v.z - mx) * inv, expf(v.w - mx) * inv);
        }
    } else {
        for (int j = threadIdx.x; j < n; j += blockDim.x)
            yr[j] = expf(xr[j] - mx) * inv;
    }
}
