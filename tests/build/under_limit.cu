// Gate fixture: 40 KB of static shared memory, no stack: must compile.
__global__ void under_limit(float *o) {
    __shared__ float s[10240];
    s[threadIdx.x] = o[threadIdx.x];
    __syncthreads();
    o[threadIdx.x] = s[threadIdx.x + 1];
}
