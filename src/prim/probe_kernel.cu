/*
 * Ceiling probes (include/dsv4/probe.h).
 *
 * mma throughput: every warp holds DSV4_PROBE_MMA_CHAINS independent fp32 accumulator
 * tiles and issues one mma.sync.m16n8k16 bf16 into each per round, so the tensor pipe
 * never waits on a dependency; operands stay in registers, so no memory traffic limits
 * it. The grid should cover every SM several times over (the benchmark uses 8 CTAs of
 * 8 warps per SM). FLOPs per mma = 2 * 16 * 8 * 16.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "prim/mma.cuh"

__global__ void dsv4_probe_empty_kernel(void) {}

/* Reads every 16-byte word of buf once through L2 (ld.global.cg: normal priority, no L1),
 * so that L2 ends up holding clean lines of buf; xor-accumulates the words into *sink
 * (one atomic per thread), which keeps the loads alive and lets a test check them. */
__global__ void dsv4_probe_read_kernel(const uint4 *buf, size_t n, unsigned *sink) {
    unsigned x = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcg(buf + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    atomicXor(sink, x);
}

__global__ void __launch_bounds__(DSV4_PROBE_MMA_WARPS * 32) dsv4_probe_mma_kernel(int iters, float *sink) {
    const uint32_t seed = threadIdx.x * 2654435761u + blockIdx.x;
    uint32_t a[4], b[2];
    /* Small bf16 values from the thread id: not constants, so nothing folds away. */
    for (int i = 0; i < 4; ++i) a[i] = 0x3F803F80u ^ ((seed >> i) & 0x00070007u);
    for (int i = 0; i < 2; ++i) b[i] = 0x3F003F00u ^ ((seed >> (i + 4)) & 0x00070007u);
    float acc[DSV4_PROBE_MMA_CHAINS][4];
#pragma unroll
    for (int c = 0; c < DSV4_PROBE_MMA_CHAINS; ++c)
        for (int j = 0; j < 4; ++j) acc[c][j] = 0.0f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < DSV4_PROBE_MMA_CHAINS; ++c) dsv4_mma_bf16_16816(acc[c], a, b, acc[c]);
    }
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < DSV4_PROBE_MMA_CHAINS; ++c) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    if (threadIdx.x == 0) sink[blockIdx.x] = s;
}

extern "C" dsv4_status_t dsv4_probe_empty(dsv4_stream_t stream) {
    DSV4_TRY(dsv4_check_stream("probe_empty", stream));
    dsv4_launch(dsv4_probe_empty_kernel, 1, 32, 0, (cudaStream_t)stream);
    return dsv4_launch_status("probe_empty");
}

extern "C" dsv4_status_t dsv4_probe_read(const void *buf, size_t bytes, int blocks, unsigned *sink,
                                         dsv4_stream_t stream) {
    static const char *op = "probe_read";
    DSV4_TRY(dsv4_check_ptr(op, "buf", buf));
    DSV4_TRY(dsv4_check_ptr(op, "sink", sink));
    DSV4_TRY(dsv4_check_range(op, "blocks", blocks, 1, 1 << 20));
    DSV4_TRY(dsv4_check_stream(op, stream));
    if ((uintptr_t)buf % 16 || bytes % 16)
        return dsv4_fail(DSV4_STATUS_MISALIGNED, op, "buf and bytes must be multiples of 16");
    dsv4_launch(dsv4_probe_read_kernel, blocks, 256, 0, (cudaStream_t)stream, (const uint4 *)buf, bytes / 16, sink);
    return dsv4_launch_status(op);
}

extern "C" double dsv4_probe_mma_flops(int blocks, int iters) {
    return 2.0 * 16 * 8 * 16 * (double)DSV4_PROBE_MMA_CHAINS * DSV4_PROBE_MMA_WARPS * (double)blocks * iters;
}

extern "C" dsv4_status_t dsv4_probe_mma_bf16(int blocks, int iters, float *sink, dsv4_stream_t stream) {
    static const char *op = "probe_mma_bf16";
    DSV4_TRY(dsv4_check_range(op, "blocks", blocks, 1, 1 << 20));
    DSV4_TRY(dsv4_check_range(op, "iters", iters, 1, 1 << 24));
    DSV4_TRY(dsv4_check_ptr(op, "sink", sink));
    DSV4_TRY(dsv4_check_stream(op, stream));
    dsv4_launch(dsv4_probe_mma_kernel, blocks, DSV4_PROBE_MMA_WARPS * 32, 0, (cudaStream_t)stream, iters, sink);
    return dsv4_launch_status(op);
}
