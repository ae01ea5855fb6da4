// GELU, two float4 per thread: 16-byte loads and stores, more bytes in flight.
// kb-launch: kernel=gelu_vec4 grid=ceil_div(N,2048) block=256
__device__ __forceinline__ float g(float v)
{
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

extern "C" __global__ void gelu_vec4(const float *__restrict__ x,
                                     float *__restrict__ y, int n)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int nv = n / 4;
    int i0 = t, i1 = t + gridDim.x * blockDim.x;
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    float4 *y4 = reinterpret_cast<float4 *>(y);
    float4 a = make_float4(0, 0, 0, 0), b = a;
    if (i0 < nv) a = __ldcs(x4 + i0);
    if (i1 < nv) b = __ldcs(x4 + i1);
    if (i0 < nv) __stcs(y4 + i0, make_float4(g(a.x), g(a.y), g(a.z), g(a.w)));
    if (i1 < nv) __stcs(y4 + i1, make_float4(g(b.x), g(b.y), g(b.z), g(b.w)));
    if (t < n - nv * 4) {
        int i = nv * 4 + t;
        y[i] = g(x[i]);
    }
}
