// kb-launch: kernel=a grid=ceil_div(N,256) block=256
// kb-tensormap: buffer=A dims=K,M box=64,128 swizzle=128
// kb-verify: arch=sm_90a
extern "C" __global__ void a() {}
