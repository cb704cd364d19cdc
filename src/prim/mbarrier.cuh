/*
 * Shared-memory mbarriers (SM80: mbarrier.init / arrive / test_wait, and
 * cp.async.mbarrier.arrive), for a producer whose data arrives by cp.async and whose
 * consumer must not wait for the producer threads themselves.
 *
 * A producer thread issues its cp.async copies, then dsv4_mbar_arrive_copies (the
 * barrier's pending count goes up by one now and down by one when this thread's earlier
 * copies have landed) and dsv4_mbar_arrive (down by one, release: its earlier shared
 * reads and writes are ordered before the phase completes). A barrier initialised with
 * the number of producer threads then completes a phase once every producer arrived and
 * every copy landed; the consumer waits for it with dsv4_mbar_wait (acquire) and sees
 * the copied data. Phases alternate parity 0, 1, 0, ...
 */
#ifndef DSV4_PRIM_MBARRIER_CUH
#define DSV4_PRIM_MBARRIER_CUH

#include <stdint.h>

#include "prim/cp_async.cuh"

static __device__ __forceinline__ void dsv4_mbar_init(uint64_t *bar, unsigned count) {
    asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(dsv4_smem_addr(bar)), "r"(count) : "memory");
}
/* Completion of this thread's earlier cp.async copies counts as one arrival. */
static __device__ __forceinline__ void dsv4_mbar_arrive_copies(uint64_t *bar) {
    asm volatile("cp.async.mbarrier.arrive.shared.b64 [%0];\n" ::"r"(dsv4_smem_addr(bar)) : "memory");
}
static __device__ __forceinline__ void dsv4_mbar_arrive(uint64_t *bar) {
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared.b64 st, [%0];\n}\n" ::"r"(dsv4_smem_addr(bar))
                 : "memory");
}
/* Spin until the phase of the given parity has completed. */
static __device__ __forceinline__ void dsv4_mbar_wait(uint64_t *bar, unsigned parity) {
    uint32_t done;
    do {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.test_wait.parity.shared.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(dsv4_smem_addr(bar)), "r"(parity)
            : "memory");
    } while (!done);
}

#endif /* DSV4_PRIM_MBARRIER_CUH */
