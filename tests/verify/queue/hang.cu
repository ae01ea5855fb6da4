// A poisoned job for the queue's tests: a candidate whose compile runs far
// past a short time limit on any machine (600 distinct functions, made by
// the preprocessor, that NVRTC compiles one by one: tens of seconds, where
// a plain candidate takes 0.1 s). Under `--timeout 1` the runner kills
// kb-verify before it answers, as for a kernel that hangs: no result.
#define FN(n) __device__ __noinline__ float f##n(float v) \
    { for (int k = 0; k < n % 7 + 3; k++) v = v * 1.0001f + (float)n * v * v; return v; }
#define CALL(n) v = f##n(v);
#define TEN(M, p) M(p##0) M(p##1) M(p##2) M(p##3) M(p##4) M(p##5) M(p##6) M(p##7) M(p##8) M(p##9)
#define HUNDRED(M, p) TEN(M, p##0) TEN(M, p##1) TEN(M, p##2) TEN(M, p##3) TEN(M, p##4) \
    TEN(M, p##5) TEN(M, p##6) TEN(M, p##7) TEN(M, p##8) TEN(M, p##9)
#define SIX_HUNDRED(M) HUNDRED(M, 1) HUNDRED(M, 2) HUNDRED(M, 3) HUNDRED(M, 4) HUNDRED(M, 5) HUNDRED(M, 6)

SIX_HUNDRED(FN)

extern "C" __global__ void gelu(const float *x, float *y, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N)
        return;
    float v = x[i];
    SIX_HUNDRED(CALL)
    y[i] = v;
}
