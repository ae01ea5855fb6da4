/*
 * bert_gpu.cu - the device half of index/bert_gpu.c: the element-wise
 * steps of the MiniLM forward (embeddings + LayerNorm, bias, bias + GELU,
 * attention, residual + LayerNorm, mean pooling + L2 normalisation); the
 * matrix products are cuBLAS's. Embedded in kb as text and compiled at run
 * time by NVRTC (no CUDA toolkit is needed to build kb). float32
 * throughout and accurate math (no fast-math), in the CPU path's order of
 * operations where it matters: the vectors match bert.c's to cosine
 * >= 0.9999 (tests/unit/test_bert_gpu.c).
 *
 * A batch is packed as on the CPU: T tokens of nseq sequences back to
 * back, no padding; start[s] and len[s] place sequence s.
 */
#define H 384
#define DHEAD 32
#define PER (H / 32)          /* a row's values per lane */
#define FULL 0xffffffffu

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(FULL, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
    return v;
}

/* One warp's row v (lane holds elements lane + 32k), LayerNorm'd with w
 * and b (eps 1e-12) into out. */
__device__ void ln_store(const float *v, const float *w, const float *b,
                         float *out, int lane)
{
    float s = 0.0f;
    for (int k = 0; k < PER; k++)
        s += v[k];
    float mean = warp_sum(s) / H;
    float q = 0.0f;
    for (int k = 0; k < PER; k++) {
        float d = v[k] - mean;
        q += d * d;
    }
    float inv = 1.0f / sqrtf(warp_sum(q) / H + 1e-12f);
    for (int k = 0; k < PER; k++) {
        int j = lane + 32 * k;
        out[j] = (v[k] - mean) * inv * w[j] + b[j];
    }
}

/* x[t] = LayerNorm(word[ids[t]] + posemb[pos[t]] + type[0]): a warp a
 * token. */
extern "C" __global__ void embed_ln(const int *ids, const int *pos,
                                    const float *word, const float *posemb,
                                    const float *type, const float *w,
                                    const float *b, float *x, int T)
{
    int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (t >= T)
        return;
    const float *we = word + (size_t)ids[t] * H;
    const float *pe = posemb + (size_t)pos[t] * H;
    float v[PER];
    for (int k = 0; k < PER; k++) {
        int j = lane + 32 * k;
        v[k] = we[j] + pe[j] + type[j];
    }
    ln_store(v, w, b, x + (size_t)t * H, lane);
}

/* x[t] = LayerNorm(x[t] + d[t] + bias): the residual after a projection. */
extern "C" __global__ void add_ln(float *x, const float *d, const float *bias,
                                  const float *w, const float *b, int T)
{
    int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (t >= T)
        return;
    float *xt = x + (size_t)t * H;
    const float *dt = d + (size_t)t * H;
    float v[PER];
    for (int k = 0; k < PER; k++) {
        int j = lane + 32 * k;
        v[k] = xt[j] + dt[j] + bias[j];
    }
    ln_store(v, w, b, xt, lane);
}

/* y[i] += b[i % cols] over n values. */
extern "C" __global__ void add_bias(float *y, const float *b, long long n, int cols)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        y[i] += b[i % cols];
}

/* y[i] = gelu(y[i] + b[i % cols]), erf GELU. */
extern "C" __global__ void bias_gelu(float *y, const float *b, long long n, int cols)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float v = y[i] + b[i % cols];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

/* Self-attention of one sequence (blockIdx.x) and head (blockIdx.y):
 * ctx = softmax(scale q k^T) v. Its keys and values are staged in shared
 * memory (keys padded to 33 columns: lane j reading key j's column d
 * hits bank j + d), and each warp takes query rows in turn, a lane per
 * key for the scores and a lane per dimension (DHEAD is 32) for the
 * output. Dynamic shared memory: (33 + 32 + warps) * len floats. */
extern "C" __global__ void attention(const float *qkv, float *ctx, const int *start,
                                     const int *len, float scale)
{
    extern __shared__ float sm[];
    int s = blockIdx.x, h = blockIdx.y, n = len[s], r0 = start[s];
    int nw = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    float *K = sm, *V = sm + n * 33, *p = V + n * 32 + warp * n;
    const float *base = qkv + (size_t)r0 * 3 * H + h * DHEAD;
    for (int i = threadIdx.x; i < n * 32; i += blockDim.x) {
        int j = i >> 5, d = i & 31;
        K[j * 33 + d] = base[(size_t)j * 3 * H + H + d];
        V[j * 32 + d] = base[(size_t)j * 3 * H + 2 * H + d];
    }
    __syncthreads();
    for (int i = warp; i < n; i += nw) {
        float q = base[(size_t)i * 3 * H + lane];
        float mx = -__int_as_float(0x7f800000);   /* -inf */
        for (int j0 = 0; j0 < n; j0 += 32) {
            int j = j0 + lane;
            float sc = 0.0f;
            for (int d = 0; d < 32; d++) {
                float qd = __shfl_sync(FULL, q, d);
                if (j < n)
                    sc += qd * K[j * 33 + d];
            }
            if (j < n) {
                sc *= scale;
                p[j] = sc;
                mx = fmaxf(mx, sc);
            }
        }
        mx = warp_max(mx);
        float sum = 0.0f;
        for (int j = lane; j < n; j += 32) {
            float e = expf(p[j] - mx);
            p[j] = e;
            sum += e;
        }
        sum = warp_sum(sum);
        __syncwarp();
        float acc = 0.0f;
        for (int j = 0; j < n; j++)
            acc += p[j] * V[j * 32 + lane];
        ctx[(size_t)(r0 + i) * H + h * DHEAD + lane] = acc / sum;
        __syncwarp();
    }
}

/* out[s] = the L2-normalised mean of sequence s's rows of x, in double as
 * bert.c does: a block of H threads a sequence. */
extern "C" __global__ void pool(const float *x, const int *start, const int *len,
                                float *out)
{
    __shared__ double part[H / 32];
    int s = blockIdx.x, j = threadIdx.x, n = len[s];
    const float *xs = x + (size_t)start[s] * H;
    double acc = 0.0;
    for (int t = 0; t < n; t++)
        acc += xs[(size_t)t * H + j];
    double m = acc / n, sq = m * m;
    for (int o = 16; o > 0; o >>= 1)
        sq += __shfl_xor_sync(FULL, sq, o);
    if ((j & 31) == 0)
        part[j / 32] = sq;
    __syncthreads();
    double norm = 0.0;
    for (int k = 0; k < H / 32; k++)
        norm += part[k];
    norm = sqrt(norm);
    if (norm < 1e-12)
        norm = 1e-12;
    out[(size_t)s * H + j] = (float)(m / norm);
}
