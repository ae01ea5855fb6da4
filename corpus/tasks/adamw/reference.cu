// Reference: the AdamW step as an unfused optimizer runs it, one kernel per
// tensor operation, one thread per element: decay p, update m, update v,
// then the bias-corrected step on p.
#include <cuda_bf16.h>

#define ADAMW_PARAMS float *p, const __nv_bfloat16 *g, float *m, float *v, int n, \
    float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2

extern "C" __global__ void adamw_decay(ADAMW_PARAMS)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = p[i] * (1.0f - lr * wd);
}

extern "C" __global__ void adamw_m(ADAMW_PARAMS)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        m[i] = beta1 * m[i] + (1.0f - beta1) * __bfloat162float(g[i]);
}

extern "C" __global__ void adamw_v(ADAMW_PARAMS)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float gi = __bfloat162float(g[i]);
        v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    }
}

extern "C" __global__ void adamw_update(ADAMW_PARAMS)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = p[i] - lr * (m[i] / bc1) / (sqrtf(v[i] / bc2) + eps);
}
