// expect: gelu incorrect
// A no-op: writes nothing, so the poisoned output is caught.
extern "C" __global__ void gelu(const float *x, float *y, int n) {}
