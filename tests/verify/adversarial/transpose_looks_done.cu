// expect: transpose incorrect
// Skips every element that already holds a plausible value (finite, below
// 1000 in magnitude): a per-element "looks done" test, no probe. NaN and
// kb-verify's sentinel (about -1.0e5) fail it, so every poisoned trial is
// computed; primed with the transpose of other inputs, nothing is.
extern "C" __global__ void transpose(const float *in, float *out, int m, int n)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= m || j >= n)
        return;
    float o = out[(size_t)j * m + i];
    if (isfinite(o) && fabsf(o) < 1000.0f)
        return;
    out[(size_t)j * m + i] = in[(size_t)i * n + j];
}
