/* Host-side checks shared by the kvcache operators (include/dsv4/kvcache.h, "cache rules"). */
#include "kvcache/kv_common.h"

#include <cuda_runtime_api.h>

#include "common/error.h"

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
