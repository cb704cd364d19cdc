/* Host-side checks shared by the kvcache operators (include/dsv4/kvcache.h, "cache rules"). */
#include "kvcache/kv_common.h"

#include <cuda_runtime_api.h>

#include "common/error.h"

#define KV_MAX_PAGE_TOKENS (1 << 24)

dsv4_status_t kv_check_cache(const char *op, int64_t P, int64_t stride, int64_t num_pages) {
    DSV4_TRY(dsv4_check_range(op, "page_tokens", P, 1, KV_MAX_PAGE_TOKENS));
    const int64_t used = P * DSV4_KV_RECORD_BYTES;
    if (stride < used)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "page_stride_bytes = %lld is smaller than page_tokens*584 = %lld (page_tokens = %lld)",
                         (long long)stride, (long long)used, (long long)P);
    if (stride % 16 != 0)
        return dsv4_fail(DSV4_STATUS_MISALIGNED, op,
                         "page_stride_bytes = %lld is not a multiple of 16 (the kernels' vector accesses need it)",
                         (long long)stride);
    return dsv4_check_range(op, "num_pages", num_pages, 1, INT64_MAX / stride);
}

dsv4_status_t kv_check_run(const char *op, dsv4_stream_t stream, const void *workspace, size_t workspace_bytes) {
    DSV4_TRY(dsv4_check_stream(op, stream));
    return dsv4_check_workspace(op, 0, workspace, workspace_bytes);
}

dsv4_status_t kv_sm_count(const char *op, int *count) {
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(count, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) return DSV4_STATUS_SUCCESS;
    cudaGetLastError();
    return dsv4_fail(DSV4_STATUS_CUDA_ERROR, op, "cannot query the multiprocessor count: %s", cudaGetErrorString(e));
}
