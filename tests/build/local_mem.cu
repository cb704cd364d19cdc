// Gate fixture: stores and loads at run-time indices force the array into local memory
// (a stack frame).
__global__ void local_mem(float *o, int k) {
    float a[64];
    for (int i = 0; i < 64; ++i) a[(i * k + threadIdx.x) & 63] = o[i];
    o[threadIdx.x] = a[(k + threadIdx.x) & 63];
}
