// expect: gelu compile_error
// Does not compile.
extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    y[i] = x[i]
}
