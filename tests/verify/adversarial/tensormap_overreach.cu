// expect: gemm_bf16 refused
// A tensor map that claims one more row of A than the buffer holds, to read
// what lies beyond it (another buffer, or last run's output): kb-verify
// refuses to encode a map that reaches past its buffer.
// kb-launch: kernel=gemm grid=1 block=32
// kb-tensormap: buffer=A dims=K,M+1 box=64,128 swizzle=128
struct __align__(64) tensor_map { unsigned long long w[16]; };
extern "C" __global__ void gemm(const unsigned short *A, const unsigned short *B, float *C,
                                int m, int n, int k, const __grid_constant__ tensor_map mapA) {}
