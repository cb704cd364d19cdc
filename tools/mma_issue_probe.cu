// How fast can one warp issue mma.sync.m16n8k16 (bf16, fp32 accumulate)? Each warp holds C
// independent accumulators and issues one mma into each per round, operands in registers,
// one CTA of W warps per SM; prints cycles per mma per warp (clock) and the SM's rate.
// docs/attention.md uses it to bound what a lone score warp's mma chains cost, apart from
// the other warps sharing its SM. Build: cmake -DDSV4_BUILD_TOOLS=ON (target
// mma_issue_probe), or nvcc -O3 -arch=sm_90 tools/mma_issue_probe.cu.
#include <cstdio>
#include <cstdint>
template <int C> __global__ void k(int iters, float *sink, unsigned *cyc) {
    uint32_t a[4], b[2];
    const uint32_t seed = threadIdx.x * 2654435761u + blockIdx.x;
    for (int i = 0; i < 4; ++i) a[i] = 0x3F803F80u ^ ((seed >> i) & 0x00070007u);
    for (int i = 0; i < 2; ++i) b[i] = 0x3F003F00u ^ ((seed >> (i + 4)) & 0x00070007u);
    float acc[C][4];
#pragma unroll
    for (int c = 0; c < C; ++c)
        for (int j = 0; j < 4; ++j) acc[c][j] = 0.f;
    unsigned t0 = clock();
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < C; ++c)
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                "{%0,%1,%2,%3};"
                : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    float s = 0;
#pragma unroll
    for (int c = 0; c < C; ++c) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    unsigned t1 = clock();
    if ((threadIdx.x & 31) == 0) {
        cyc[blockIdx.x * 64 + threadIdx.x / 32] = t1 - t0;
    }
    if (threadIdx.x == 0) sink[blockIdx.x] = s;
}
template <int C> void run(int warps, int ctas_per_sm) {
    float *sink;
    unsigned *cyc;
    int n = 132 * ctas_per_sm, iters = 4096;
    cudaMalloc(&sink, n * 4);
    cudaMalloc(&cyc, n * 64 * 4);
    cudaMemset(cyc, 0, n * 64 * 4);
    k<C><<<n, warps * 32>>>(iters, sink, cyc);
    cudaDeviceSynchronize();
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0);
    k<C><<<n, warps * 32>>>(iters, sink, cyc);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    unsigned h[64];
    cudaMemcpy(h, cyc, 64 * 4, cudaMemcpyDeviceToHost);
    double tf = 2.0 * 16 * 8 * 16 * C * warps * (double)n * iters / (ms * 1e-3) / 1e12;
    printf("chains %d warps/CTA %2d CTAs/SM %d (warps/scheduler %d): %.1f cycles per mma per warp, SM %.1f TF/s\n", C,
           warps, ctas_per_sm, warps * ctas_per_sm / 4, (double)h[0] / (iters * C), tf);
    cudaFree(sink);
    cudaFree(cyc);
}
int main() {
    for (int w : {4, 8, 12, 16}) {
        run<1>(w, 1);
        run<2>(w, 1);
        run<4>(w, 1);
        run<8>(w, 1);
    }
    run<4>(8, 8);
    run<8>(8, 8);
    return 0;
}
