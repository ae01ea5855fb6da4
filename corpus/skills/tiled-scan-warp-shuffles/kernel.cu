// Inclusive scan in three passes with 4096-element tiles: each thread scans
// 4 values, warps scan with shuffles, one block scans the tile totals.
// kb-launch: kernel=scan_tile grid=ceil_div(N,4096) block=1024
// kb-launch: kernel=scan_tops grid=1 block=1024
// kb-launch: kernel=scan_fix grid=ceil_div(N,4096) block=1024
__device__ __forceinline__ int warp_incl(int v)
{
    int lane = threadIdx.x & 31;
    for (int o = 1; o < 32; o *= 2) {
        int u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o)
            v += u;
    }
    return v;
}

/* inclusive scan of one value per thread across the block; total in *tot */
__device__ int block_incl(int v, int *sh, int *tot)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = warp_incl(v);
    if (lane == 31)
        sh[w] = v;
    __syncthreads();
    if (w == 0) {
        int s = lane < (blockDim.x >> 5) ? sh[lane] : 0;
        s = warp_incl(s);
        sh[lane] = s;
    }
    __syncthreads();
    if (w > 0)
        v += sh[w - 1];
    *tot = sh[(blockDim.x >> 5) - 1];
    __syncthreads();
    return v;
}

extern "C" __global__ void scan_tile(const int *__restrict__ x, int *__restrict__ y,
                                     int *partials, int n)
{
    __shared__ int sh[32];
    long base = (long)blockIdx.x * 4096 + threadIdx.x * 4;
    int v[4];
    if (base + 3 < n) {
        int4 q = *reinterpret_cast<const int4 *>(x + base);
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
        for (int i = 0; i < 4; i++)
            v[i] = base + i < n ? x[base + i] : 0;
    }
    v[1] += v[0];
    v[2] += v[1];
    v[3] += v[2];
    int tot;
    int incl = block_incl(v[3], sh, &tot);
    int off = incl - v[3];
    if (base + 3 < n) {
        *reinterpret_cast<int4 *>(y + base) =
            make_int4(v[0] + off, v[1] + off, v[2] + off, v[3] + off);
    } else {
        for (int i = 0; i < 4; i++)
            if (base + i < n)
                y[base + i] = v[i] + off;
    }
    if (threadIdx.x == 0)
        partials[blockIdx.x] = tot;
}

/* exclusive scan of the tile totals, in place, by one block */
extern "C" __global__ void scan_tops(const int *x, int *y, int *partials, int n)
{
    __shared__ int sh[32];
    int nb = (n + 4095) / 4096;
    int per = (nb + blockDim.x - 1) / blockDim.x;
    int lo = threadIdx.x * per, hi = min(lo + per, nb);
    int s = 0;
    for (int i = lo; i < hi; i++)
        s += partials[i];
    int tot;
    int incl = block_incl(s, sh, &tot);
    int run = incl - s;
    for (int i = lo; i < hi; i++) {
        int v = partials[i];
        partials[i] = run;
        run += v;
    }
}

extern "C" __global__ void scan_fix(const int *x, int *__restrict__ y,
                                    int *partials, int n)
{
    int off = partials[blockIdx.x];
    if (off == 0)
        return;
    long base = (long)blockIdx.x * 4096 + threadIdx.x * 4;
    if (base + 3 < n) {
        int4 *p = reinterpret_cast<int4 *>(y + base);
        int4 q = *p;
        *p = make_int4(q.x + off, q.y + off, q.z + off, q.w + off);
    } else {
        for (int i = 0; i < 4; i++)
            if (base + i < n)
                y[base + i] += off;
    }
}
