// expect: histogram incorrect
// Accumulates into the bins without clearing them first: it relies on the
// output buffer starting at zero, which the poisoned buffers are not.
// kb-launch: kernel=histogram grid=ceil_div(N,256) block=256
extern "C" __global__ void histogram(const unsigned *x, unsigned *bins, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&bins[x[i] & 255u], 1u);
}
