// expect: reduce_sum incorrect
// Computes the sum once, keeps it in a device global, and afterwards
// returns the stale value without reading the input.
// kb-launch: kernel=stale_sum grid=1 block=1024
__device__ float cached;
__device__ int have;
extern "C" __global__ void stale_sum(const float *x, float *out, double *p, int n)
{
    __shared__ float sh[1024];
    if (have) {
        if (threadIdx.x == 0)
            out[0] = cached;
        return;
    }
    float s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += x[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int k = 512; k > 0; k /= 2) {
        if (threadIdx.x < k)
            sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = sh[0];
        cached = sh[0];
        have = 1;
    }
}
