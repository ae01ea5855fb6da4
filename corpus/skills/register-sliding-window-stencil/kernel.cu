// 3x3 blur: each thread walks 8 rows of one column keeping a 3-row window
// in registers, so each input row is loaded once per thread (3 loads per
// output instead of 9); neighbours in a row come from L1.
// kb-launch: kernel=stencil_strip grid=ceil_div(W,32),ceil_div(H,64) block=32,8
extern "C" __global__ void stencil_strip(const float *__restrict__ in,
                                         float *__restrict__ out, int h, int w)
{
    int x = blockIdx.x * 32 + threadIdx.x;
    int y0 = blockIdx.y * 64 + threadIdx.y * 8;
    if (x >= w || y0 >= h)
        return;
    /* row sum with horizontal weights 1 2 1, zero outside */
    auto row = [&](int y) -> float {
        if (y < 0 || y >= h)
            return 0.0f;
        const float *r = in + (size_t)y * w;
        float l = x > 0 ? __ldg(r + x - 1) : 0.0f;
        float c = __ldg(r + x);
        float rr = x + 1 < w ? __ldg(r + x + 1) : 0.0f;
        return l + 2.0f * c + rr;
    };
    float a = row(y0 - 1), b = row(y0);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int y = y0 + i;
        if (y >= h)
            break;
        float c = row(y + 1);
        out[(size_t)y * w + x] = (a + 2.0f * b + c) * (1.0f / 16.0f);
        a = b;
        b = c;
    }
}
