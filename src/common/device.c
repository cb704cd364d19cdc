/* Device query through the CUDA runtime's C API. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "common/error.h"
#include "common/launch.h"

dsv4_status_t dsv4_device_count(int *count) {
    DSV4_TRY(dsv4_check_ptr("device_count", "count", count));
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
        cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        n = 0;
    } else if (e != cudaSuccess) {
        cudaGetLastError();
        return dsv4_fail(DSV4_STATUS_CUDA_ERROR, "device_count", "cudaGetDeviceCount: %s", cudaGetErrorString(e));
    }
    *count = n;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_device_query(int device, dsv4_device_info_t *info) {
    DSV4_TRY(dsv4_check_ptr("device_query", "info", info));
    int n = 0;
    DSV4_TRY(dsv4_device_count(&n));
    if (device < 0 || device >= n)
        return dsv4_fail(DSV4_STATUS_NO_DEVICE, "device_query", "device %d does not exist (%d CUDA devices)", device,
                         n);
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess)
        return dsv4_fail(DSV4_STATUS_CUDA_ERROR, "device_query", "cudaGetDeviceProperties(%d): %s", device,
                         cudaGetErrorString(e));
    memset(info, 0, sizeof *info);
    info->device = device;
    info->arch = p.major * 10 + p.minor;
    info->sm_count = p.multiProcessorCount;
    info->smem_per_block = (int64_t)p.sharedMemPerBlock;
    info->smem_per_block_optin = (int64_t)p.sharedMemPerBlockOptin;
    info->l2_bytes = (int64_t)p.l2CacheSize;
    info->global_mem_bytes = (int64_t)p.totalGlobalMem;
    info->supported = info->arch >= 80;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    return DSV4_STATUS_SUCCESS;
}

/* The first failing launch of this thread's current call (launch.h). */
static _Thread_local cudaError_t launch_error = cudaSuccess;

dsv4_status_t dsv4_launch_prepare(const char *op, const void *kernel, size_t dyn_smem, int *static_smem_cache) {
    int cached = *(volatile int *)static_smem_cache;
    if (cached == 0) {
        struct cudaFuncAttributes a;
        cudaError_t e = cudaFuncGetAttributes(&a, kernel);
        if (e != cudaSuccess) {
            cudaGetLastError();
            launch_error = cudaSuccess; /* the call ends here: no launch of it is reported later */
            dsv4_status_t st = (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) ? DSV4_STATUS_NO_DEVICE
                               : e == cudaErrorInvalidDeviceFunction                        ? DSV4_STATUS_UNSUPPORTED
                                                                                            : DSV4_STATUS_CUDA_ERROR;
            return dsv4_fail(st, op, "cannot load the kernel: %s", cudaGetErrorString(e));
        }
        /* +1 so that 0 keeps meaning "not yet asked"; racing writers store the same value. */
        cached = (int)a.sharedSizeBytes + 1;
        *(volatile int *)static_smem_cache = cached;
    }
    size_t total = (size_t)(cached - 1) + dyn_smem;
    if (total > DSV4_MAX_SMEM_PER_CTA) {
        launch_error = cudaSuccess;
        return dsv4_fail(DSV4_STATUS_UNSUPPORTED, op,
                         "kernel needs %zu bytes of shared memory per CTA (%d static + %zu dynamic), over the %d-byte "
                         "limit that keeps every kernel runnable on SM86",
                         total, cached - 1, dyn_smem, DSV4_MAX_SMEM_PER_CTA);
    }
    return DSV4_STATUS_SUCCESS;
}

void dsv4_launch_note(int cuda_error) {
    if (launch_error == cudaSuccess) launch_error = (cudaError_t)cuda_error;
}

dsv4_status_t dsv4_launch_status(const char *op) {
    const cudaError_t e = launch_error;
    launch_error = cudaSuccess;
    if (e == cudaSuccess) return DSV4_STATUS_SUCCESS;
    cudaGetLastError(); /* our failed launch is the runtime's last error: reported here, so cleared */
    dsv4_status_t st =
        (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) ? DSV4_STATUS_NO_DEVICE : DSV4_STATUS_CUDA_ERROR;
    return dsv4_fail(st, op, "kernel launch failed: %s", cudaGetErrorString(e));
}
