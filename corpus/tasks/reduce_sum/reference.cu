// Reference: each block sums 256 values in double (shared-memory tree) into
// partials; one thread then adds the partials in order.
extern "C" __global__ void reduce_partials(const float *x, float *out,
                                           double *partials, int n)
{
    __shared__ double s[256];
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
    int nb = (n + 255) / 256;
    double sum = 0.0;
    for (int b = 0; b < nb; b++)
        sum += partials[b];
    out[0] = (float)sum;
}
