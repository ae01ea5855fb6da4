// A GELU that is right and fast on the timed shape ('target') and hangs on
// the tiny one (n < 16), which kb-verify checks after timing the target: a
// result that ends in `timeout` after a shape was timed carries no
// speedup_geomean (t4020, tests/verify/receipts-run.sh).
extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    volatile const float *v = x;
    while (n < 16 && v[0] == v[0])
        ;
    if (i < n)
        y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}
