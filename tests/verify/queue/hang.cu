// A poisoned job for the queue's tests: a candidate whose compile runs far
// past a short time limit (the front end evaluates an exponential
// recursion, for seconds, then gives up). Under `--timeout 1` the runner
// kills kb-verify before it answers, as for a kernel that hangs: no result.
__device__ constexpr unsigned long long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
extern "C" __global__ void gelu(const float *x, float *y, int N)
{
    constexpr unsigned long long k = fib(60);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N)
        y[i] = x[i] * (float)(k & 1);
}
