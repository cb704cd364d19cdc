// Does compute-sanitizer racecheck honour bar.arrive -> bar.sync ordering?
// Warp 0 produces buf, warp 1 consumes it; each direction is ordered by a named barrier
// (MODE 0: the side that hands over arrives, the side that waits syncs, the PTX
// producer / consumer pattern; MODE 1: bar.sync on both sides). Both are correctly
// ordered and print the same result. With CUDA 13's compute-sanitizer, `compute-sanitizer
// --tool racecheck` reports hazards for MODE 0 and none for MODE 1: racecheck does not
// treat an arrive as ordering the arriving warp's earlier accesses. This is why
// scripts/gpu_check.sh's racecheck run leaves the warp-specialised attention kernels
// (configurations ws32 and ws64) out. Build: cmake -DDSV4_BUILD_TOOLS=ON (target
// racecheck_arrive_repro), or nvcc -arch=sm_80 -lineinfo tools/racecheck_arrive_repro.cu.
#include <cstdio>
__device__ __forceinline__ void bsync(int id) { asm volatile("bar.sync %0, 64;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void barr(int id) { asm volatile("bar.arrive %0, 64;" ::"r"(id) : "memory"); }
template <int MODE> __global__ void k(int *out) {
    __shared__ int buf[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, acc = 0;
    for (int i = 0; i < 8; ++i) {
        if (warp == 0) {
            if (i > 0) bsync(2); /* consumer has read the previous value */
            buf[lane] = i * 100 + lane;
            if (MODE == 0) barr(1);
            else bsync(1);
        } else {
            bsync(1);
            acc += buf[31 - lane];
            if (MODE == 0) {
                if (i < 7) barr(2);
            } else {
                if (i < 7) bsync(2);
            }
        }
    }
    if (warp == 1) out[lane] = acc;
}
int main() {
    int *d;
    cudaMalloc(&d, 128);
    k<0><<<1, 64>>>(d);
    k<1><<<1, 64>>>(d);
    int h[32];
    cudaMemcpy(h, d, 128, cudaMemcpyDeviceToHost);
    printf("out[0] = %d (want %d)\n", h[0], 2800 + 8 * 31);
    return 0;
}
