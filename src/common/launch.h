/*
 * Internal: what every launcher does around a kernel launch.
 *
 *   static int my_kernel_smem;   // one cache per kernel, zero-initialised
 *   DSV4_TRY(dsv4_launch_prepare("kv_insert", (const void *)my_kernel, dyn, &my_kernel_smem));
 *   dsv4_launch(my_kernel, grid, block, dyn, stream, ...);
 *   return dsv4_launch_status("kv_insert");
 *
 * dsv4_launch takes the status of the launch itself (cudaLaunchKernelEx's return value)
 * and dsv4_launch_status reports the first failure among this call's launches. Neither
 * reads cudaGetLastError, which would report (and clear) an error left by an unrelated
 * earlier call of the caller's; only a failure of our own launch is cleared, once
 * reported.
 *
 * dsv4_launch_prepare is the run-time half of the shared-memory gate: it refuses a
 * launch whose static (from the loaded cubin) plus dynamic shared memory exceeds
 * DSV4_MAX_SMEM_PER_CTA. The build-time half is tools/ptxas_gate.sh, and each config
 * header static_asserts its dynamic size. Neither call synchronizes or allocates, so
 * both are legal during CUDA graph capture.
 */
#ifndef DSV4_COMMON_LAUNCH_H
#define DSV4_COMMON_LAUNCH_H

#include <stddef.h>

#include "dsv4/dsv4.h"

#ifdef __cplusplus
extern "C" {
#endif

dsv4_status_t dsv4_launch_prepare(const char *op, const void *kernel, size_t dyn_smem, int *static_smem_cache);
dsv4_status_t dsv4_launch_status(const char *op);
/* Records a launch's own status (int: a cudaError_t) for this thread's next
 * dsv4_launch_status, keeping the first failure. */
void dsv4_launch_note(int cuda_error);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include <cuda_runtime.h>

#include <utility>

/* Launch `kernel` and note the launch's own status. */
template <typename... P, typename... A>
static inline void dsv4_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                               A &&...args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    if constexpr (sizeof...(P) == 0) dsv4_launch_note((int)cudaLaunchKernelExC(&cfg, (const void *)kernel, nullptr));
    else dsv4_launch_note((int)cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...));
}
#endif

/* Compile-time half for dynamic shared memory, used in every <op>_config.h. */
#ifdef __cplusplus
#define DSV4_SMEM_BUDGET_ASSERT(bytes, what)                                                                           \
    static_assert((bytes) <= DSV4_MAX_SMEM_PER_CTA, what " exceeds 48 KB of shared memory per CTA")
#else
#define DSV4_SMEM_BUDGET_ASSERT(bytes, what)                                                                           \
    _Static_assert((bytes) <= DSV4_MAX_SMEM_PER_CTA, what " exceeds 48 KB of shared memory per CTA")
#endif

#endif
