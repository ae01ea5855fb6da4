// expect: gelu refused
// Reads %globaltimer (to behave differently while timed): refused.
extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = (t & 1) ? 0.0f : 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
