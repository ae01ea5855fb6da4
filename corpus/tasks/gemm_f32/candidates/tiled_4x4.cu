// fp32 GEMM: 64x64 block tiles through shared memory (A stored transposed),
// BK = 16, each of 256 threads accumulating a 4x4 register tile.
// kb-launch: kernel=gemm_tiled grid=ceil_div(N,64),ceil_div(M,64) block=256
#define BM 64
#define BN 64
#define BK 16

extern "C" __global__ void __launch_bounds__(256)
gemm_tiled(const float *__restrict__ A, const float *__restrict__ B,
           float *__restrict__ C, int m, int n, int k)
{
    __shared__ float As[BK][BM + 4];
    __shared__ float Bs[BK][BN + 4];
    int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < k; k0 += BK) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int e = tid + i * 256;
            int r = e / BK, c = e % BK;
            int gm = m0 + r, gk = k0 + c;
            As[c][r] = (gm < m && gk < k) ? A[(size_t)gm * k + gk] : 0.0f;
            int br = e / BN, bc = e % BN;
            int gk2 = k0 + br, gn = n0 + bc;
            Bs[br][bc] = (gk2 < k && gn < n) ? B[(size_t)gk2 * n + gn] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = As[kk][ty * 4 + i];
                b[i] = Bs[kk][tx * 4 + i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int gm = m0 + ty * 4 + i, gn = n0 + tx * 4 + j;
            if (gm < m && gn < n)
                C[(size_t)gm * n + gn] = acc[i][j];
        }
}
