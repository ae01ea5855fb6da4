// Reference: one thread per element of C, bf16 operands widened to float,
// fp32 accumulation.
#include <cuda_bf16.h>

extern "C" __global__ void gemm_bf16(const __nv_bfloat16 *A,
                                     const __nv_bfloat16 *B, float *C,
                                     int m, int n, int k)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= m || col >= n)
        return;
    float acc = 0.0f;
    for (int p = 0; p < k; p++)
        acc += __bfloat162float(A[(size_t)row * k + p]) *
               __bfloat162float(B[(size_t)p * n + col]);
    C[(size_t)row * n + col] = acc;
}
