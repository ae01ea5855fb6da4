// expect: gelu incorrect
// Right output, but it overwrites its input (through a cast away of const).
extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
        ((float *)x)[i] = 0.0f;
    }
}
