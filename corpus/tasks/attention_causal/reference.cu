// Reference: the three plain kernels of attention. Scores S = Q K^T * scale
// by a 16 x 16 tiled product through shared memory (keys after the query
// masked to -inf), a row softmax over S in place (one block a row), and
// O = P V by the same tiled product; S lives in scratch (B*H x L x L fp32).

#define NEG_INF (-__int_as_float(0x7f800000))
#include <cuda_bf16.h>

#define ATTN_PARAMS const __nv_bfloat16 *q, const __nv_bfloat16 *k, \
    const __nv_bfloat16 *v, __nv_bfloat16 *o, float *s, int b, int h, int l, int d, float scale

extern "C" __global__ void attn_scores(ATTN_PARAMS)
{
    __shared__ float tq[16][17], tk[16][17];
    size_t bh = blockIdx.z;
    int i = blockIdx.y * 16 + threadIdx.y, j = blockIdx.x * 16 + threadIdx.x;
    const __nv_bfloat16 *qb = q + bh * l * d, *kb = k + bh * l * d;
    float acc = 0.0f;
    for (int d0 = 0; d0 < d; d0 += 16) {
        int qi = blockIdx.y * 16 + threadIdx.y, kj = blockIdx.x * 16 + threadIdx.y;
        tq[threadIdx.y][threadIdx.x] = qi < l && d0 + threadIdx.x < d
            ? __bfloat162float(qb[(size_t)qi * d + d0 + threadIdx.x]) : 0.0f;
        tk[threadIdx.y][threadIdx.x] = kj < l && d0 + threadIdx.x < d
            ? __bfloat162float(kb[(size_t)kj * d + d0 + threadIdx.x]) : 0.0f;
        __syncthreads();
        for (int e = 0; e < 16; e++)
            acc += tq[threadIdx.y][e] * tk[threadIdx.x][e];
        __syncthreads();
    }
    if (i < l && j < l)
        s[(bh * l + i) * l + j] = j <= i ? acc * scale : NEG_INF;
}

extern "C" __global__ void attn_softmax(ATTN_PARAMS)
{
    __shared__ float sh[256];
    size_t row = blockIdx.x;
    int i = (int)(row % l);
    float *sr = s + row * l;
    float mx = NEG_INF;
    for (int j = threadIdx.x; j <= i; j += blockDim.x)
        mx = fmaxf(mx, sr[j]);
    sh[threadIdx.x] = mx;
    __syncthreads();
    for (int t = blockDim.x / 2; t > 0; t /= 2) {
        if (threadIdx.x < t)
            sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + t]);
        __syncthreads();
    }
    mx = sh[0];
    __syncthreads();
    float sum = 0.0f;
    for (int j = threadIdx.x; j <= i; j += blockDim.x)
        sum += expf(sr[j] - mx);
    sh[threadIdx.x] = sum;
    __syncthreads();
    for (int t = blockDim.x / 2; t > 0; t /= 2) {
        if (threadIdx.x < t)
            sh[threadIdx.x] += sh[threadIdx.x + t];
        __syncthreads();
    }
    sum = sh[0];
    for (int j = threadIdx.x; j < l; j += blockDim.x)
        sr[j] = j <= i ? expf(sr[j] - mx) / sum : 0.0f;
}

extern "C" __global__ void attn_pv(ATTN_PARAMS)
{
    __shared__ float tp[16][17], tv[16][17];
    size_t bh = blockIdx.z;
    int i = blockIdx.y * 16 + threadIdx.y, e = blockIdx.x * 16 + threadIdx.x;
    const __nv_bfloat16 *vb = v + bh * l * d;
    const float *sb = s + bh * l * l;
    int jmax = min(l, blockIdx.y * 16 + 16);     /* P is 0 past the tile's last query */
    float acc = 0.0f;
    for (int j0 = 0; j0 < jmax; j0 += 16) {
        int pj = j0 + threadIdx.x, vj = j0 + threadIdx.y;
        tp[threadIdx.y][threadIdx.x] = i < l && pj < l ? sb[(size_t)i * l + pj] : 0.0f;
        tv[threadIdx.y][threadIdx.x] = vj < l && e < d
            ? __bfloat162float(vb[(size_t)vj * d + e]) : 0.0f;
        __syncthreads();
        for (int t = 0; t < 16; t++)
            acc += tp[threadIdx.y][t] * tv[t][threadIdx.x];
        __syncthreads();
    }
    if (i < l && e < d)
        o[(bh * l + i) * d + e] = __float2bfloat16(acc);
}
