/*
 * Named CTA barriers (bar.sync / bar.arrive, SM70+), for producer / consumer handoffs
 * between warps of one CTA.
 *
 * dsv4_bar_sync(id, n) waits until n threads (a multiple of 32, whole warps) have
 * arrived at barrier `id` (1..15; 0 is __syncthreads); dsv4_bar_arrive<ID>(n) counts the
 * calling warp in without waiting. Shared-memory writes made before an arrive are
 * visible to the threads that complete the matching sync (PTX memory model: the arrive
 * releases, the sync acquires), so a producer warp can publish a buffer with one arrive.
 * The <ID> forms take the id as an immediate: ptxas then reserves ids 0..ID only, where
 * a register id makes it reserve all 16.
 */
#ifndef DSV4_PRIM_NAMED_BARRIER_CUH
#define DSV4_PRIM_NAMED_BARRIER_CUH

static __device__ __forceinline__ void dsv4_bar_sync(int id, int n) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

template <int ID> static __device__ __forceinline__ void dsv4_bar_sync(int n) {
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "r"(n) : "memory");
}
template <int ID> static __device__ __forceinline__ void dsv4_bar_arrive(int n) {
    asm volatile("bar.arrive %0, %1;\n" ::"n"(ID), "r"(n) : "memory");
}

#endif /* DSV4_PRIM_NAMED_BARRIER_CUH */
