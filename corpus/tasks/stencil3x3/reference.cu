// Reference: one thread per pixel, nine loads, zero outside the image.
extern "C" __global__ void stencil3x3(const float *in, float *out, int h, int w)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h)
        return;
    const float wt[3][3] = { { 1, 2, 1 }, { 2, 4, 2 }, { 1, 2, 1 } };
    float acc = 0.0f;
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
            int yy = y + dy, xx = x + dx;
            if (yy >= 0 && yy < h && xx >= 0 && xx < w)
                acc += wt[dy + 1][dx + 1] * in[(size_t)yy * w + xx];
        }
    out[(size_t)y * w + x] = acc * (1.0f / 16.0f);
}
