// Reference: one thread per element of C, K-loop straight from global
// memory, then the epilogue (bias of the column, ReLU) on the sum.
extern "C" __global__ void gemm_bias_relu(const float *A, const float *B,
                                          const float *bias, float *C,
                                          int m, int n, int k)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= m || col >= n)
        return;
    float acc = 0.0f;
    for (int p = 0; p < k; p++)
        acc += A[(size_t)row * k + p] * B[(size_t)p * n + col];
    C[(size_t)row * n + col] = fmaxf(acc + bias[col], 0.0f);
}
