/*
 * Internal device helpers of the indices family: 4-column chunk loads and stores with a
 * 16-byte form and an element form, and warp reductions. All kernels of the family give
 * each output element to exactly one lane (race-free by construction), so nothing here
 * needs atomics.
 */
#ifndef DSV4_INDICES_INDEX_DEVICE_CUH
#define DSV4_INDICES_INDEX_DEVICE_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "indices/index_check.h" /* dsv4_idx_grid_cap */

#define DSV4_IDX_FULL 0xFFFFFFFFu

/* Columns 4c .. 4c+3 of a row, as an array so unrolled loops index it at compile time.
 * VEC: one 16-byte load; the caller guarantees the row is 16-byte aligned and the chunk
 * lies inside the row. Otherwise element loads, and columns >= ncols read as -1. */
template <bool VEC>
static __device__ __forceinline__ void dsv4_idx_load4(int (&v)[4], const int32_t *__restrict__ row, int c, int ncols) {
    if (VEC) {
        const int4 x = __ldg(reinterpret_cast<const int4 *>(row) + c);
        v[0] = x.x;
        v[1] = x.y;
        v[2] = x.z;
        v[3] = x.w;
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = 4 * c + e < ncols ? __ldg(row + 4 * c + e) : -1;
    }
}

/* dst = src for a batch of U chunks: the next row's prefetched chunks become the current
 * ones at the end of a multi-row warp loop (registers only, unrolled). */
template <int U> static __device__ __forceinline__ void dsv4_idx_take(int (&dst)[U][4], const int (&src)[U][4]) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
        for (int e = 0; e < 4; ++e) dst[u][e] = src[u][e];
}

/* Store columns 4c .. 4c+3 (those < ncols in the element form). The outputs are written
 * once and read by another kernel later, so the stores are streaming (evict-first). */
template <bool VEC>
static __device__ __forceinline__ void dsv4_idx_store4(int32_t *__restrict__ row, int c, const int (&v)[4], int ncols) {
    if (VEC) {
        __stcs(reinterpret_cast<int4 *>(row) + c, make_int4(v[0], v[1], v[2], v[3]));
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
            if (4 * c + e < ncols) __stcs(row + 4 * c + e, v[e]);
    }
}

/* Grid of a grid-stride ("persistent") kernel: the CTAs that fit on the device at once
 * (occupancy x SMs), at most `need` (and at most the test hook dsv4_idx_grid_cap when it is
 * set). Only a speed choice: the kernels are correct for any grid. The occupancy is cached per kernel (`*cache`, 0 = not asked yet; racing writers
 * store the same value); errors of these host-only queries are cleared and give `need`.
 * No stream work, so it is legal during CUDA graph capture. */
static inline unsigned dsv4_idx_resident_grid(const void *kernel, int threads, int64_t need, int *cache) {
    if (dsv4_idx_grid_cap > 0 && need > dsv4_idx_grid_cap) need = dsv4_idx_grid_cap;
    int dev = 0, sms = 0, occ = *(volatile int *)cache;
    if (occ == 0 && cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, threads, 0) == cudaSuccess && occ > 0)
        *(volatile int *)cache = occ;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || occ <= 0) {
        cudaGetLastError();
        return (unsigned)need;
    }
    const int64_t cap = (int64_t)occ * sms;
    return (unsigned)(need < cap ? need : cap);
}

static __device__ __forceinline__ int dsv4_idx_warp_sum(int x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(DSV4_IDX_FULL, x, o);
    return x;
}
static __device__ __forceinline__ int dsv4_idx_warp_min(int x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = min(x, __shfl_xor_sync(DSV4_IDX_FULL, x, o));
    return x;
}
static __device__ __forceinline__ int dsv4_idx_warp_max(int x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = max(x, __shfl_xor_sync(DSV4_IDX_FULL, x, o));
    return x;
}

#endif /* DSV4_INDICES_INDEX_DEVICE_CUH */
