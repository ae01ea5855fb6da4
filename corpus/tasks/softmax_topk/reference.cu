// Reference: the softmax of each row written whole (one block a row: max,
// sum, then every probability), then KTOP rounds per row of a block-wide
// arg max over the logits not taken yet (ties to the lower index), each
// round marking its pick taken in the softmax buffer (-1).

#define NEG_INF (-__int_as_float(0x7f800000))

__device__ float block_reduce_max(float x, float *sh)
{
    sh[threadIdx.x] = x;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s)
            sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void softmax_rows(const float *x, float *probs, int *idx, float *sm,
                                        int b, int v, int ktop)
{
    __shared__ float sh[256];
    const float *xr = x + (size_t)blockIdx.x * v;
    float *sr = sm + (size_t)blockIdx.x * v;
    float mx = NEG_INF;
    for (int j = threadIdx.x; j < v; j += blockDim.x)
        mx = fmaxf(mx, xr[j]);
    mx = block_reduce_max(mx, sh);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < v; j += blockDim.x)
        sum += expf(xr[j] - mx);
    sh[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    sum = sh[0];
    for (int j = threadIdx.x; j < v; j += blockDim.x)
        sr[j] = expf(xr[j] - mx) / sum;
}

extern "C" __global__ void topk_rows(const float *x, float *probs, int *idx, float *sm,
                                     int b, int v, int ktop)
{
    __shared__ float bv[256];
    __shared__ int bi[256];
    const float *xr = x + (size_t)blockIdx.x * v;
    float *sr = sm + (size_t)blockIdx.x * v;
    for (int r = 0; r < ktop; r++) {
        float best = NEG_INF;
        int at = -1;
        for (int j = threadIdx.x; j < v; j += blockDim.x)
            if (sr[j] >= 0.0f && (at < 0 || xr[j] > best)) {
                best = xr[j];
                at = j;
            }
        bv[threadIdx.x] = best;
        bi[threadIdx.x] = at;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s /= 2) {
            if (threadIdx.x < s) {
                float ov = bv[threadIdx.x + s];
                int oi = bi[threadIdx.x + s];
                if (oi >= 0 && (bi[threadIdx.x] < 0 || ov > bv[threadIdx.x] ||
                                (ov == bv[threadIdx.x] && oi < bi[threadIdx.x]))) {
                    bv[threadIdx.x] = ov;
                    bi[threadIdx.x] = oi;
                }
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            int j = bi[0];
            probs[(size_t)blockIdx.x * ktop + r] = j >= 0 ? sr[j] : 0.0f;
            idx[(size_t)blockIdx.x * ktop + r] = j;
            if (j >= 0)
                sr[j] = -1.0f;
        }
        __syncthreads();
    }
}
