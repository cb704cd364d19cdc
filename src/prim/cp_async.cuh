/*
 * Ampere asynchronous global -> shared copies (cp.async, SM80).
 *
 * Each call copies 16 bytes; both addresses must be 16-byte aligned. Copies issued by a
 * thread since its last commit form one group; dsv4_cp_async_wait<N>() blocks until at
 * most N of this thread's groups are still in flight. Other threads' copies become
 * visible only after the wait and a __syncthreads() (or a named barrier) that orders them.
 * The .cg form bypasses L1, which suits data read once per CTA.
 */
#ifndef DSV4_PRIM_CP_ASYNC_CUH
#define DSV4_PRIM_CP_ASYNC_CUH

#include <stdint.h>

#include "prim/mma.cuh"

/* 16 bytes from global `src` to shared `dst`. */
static __device__ __forceinline__ void dsv4_cp_async_16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dsv4_smem_addr(dst)), "l"(src) : "memory");
}

/* As dsv4_cp_async_16 when `valid`, else writes 16 zero bytes to `dst` and reads nothing
 * (src-size 0: `src` must still be a valid-looking address, pass any mapped pointer). */
static __device__ __forceinline__ void dsv4_cp_async_16_zfill(void *dst, const void *src, bool valid) {
    int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dsv4_smem_addr(dst)), "l"(src), "r"(n)
                 : "memory");
}

/* 4 bytes (both addresses 4-byte aligned), through L1 (.ca: the only form for sizes
 * below 16). For small values that must arrive later without holding a register, such
 * as the row ids of a gather a few steps ahead. */
static __device__ __forceinline__ void dsv4_cp_async_4(void *dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dsv4_smem_addr(dst)), "l"(src) : "memory");
}

static __device__ __forceinline__ void dsv4_cp_async_commit(void) {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N> static __device__ __forceinline__ void dsv4_cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* Hint: bring the 128-byte line holding `p` (a mapped global address) into L2, without
 * waiting or touching registers. Gathers whose rows come from DRAM issue this several
 * steps ahead of their cp.async, so the copy later finds the line in L2: the DRAM
 * latency is paid off the critical path without spending shared memory on more stages. */
static __device__ __forceinline__ void dsv4_prefetch_l2(const void *p) {
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

#endif /* DSV4_PRIM_CP_ASYNC_CUH */
