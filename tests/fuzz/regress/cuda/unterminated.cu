/* a comment
__global__ void k(int *p) { /* 