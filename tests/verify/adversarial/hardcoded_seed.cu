// expect: gelu incorrect
// Ignores its input and returns the outputs for one fixed seed: it
// regenerates kb-verify's inputs for seed 1 with the harness's own
// generator, so it would pass if the inputs were not drawn fresh.
__device__ unsigned long long mix64(unsigned long long x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
extern "C" __global__ void gelu(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned long long h = mix64(1ull ^ mix64(i));
    double u1 = ((h >> 11) + 0.5) / 9007199254740992.0;
    double u2 = ((mix64(h) >> 11) + 0.5) / 9007199254740992.0;
    float v = (float)(sqrt(-2.0 * log(u1)) * cospi(2.0 * u2));
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f));
}
