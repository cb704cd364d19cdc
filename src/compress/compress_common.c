/* Host-side pieces the compress operators share. */
#include "compress/compress_common.h"

#include <cuda_runtime_api.h>

#include "common/error.h"

dsv4_status_t cmp_check_run(const char *op, dsv4_stream_t stream, const void *workspace, size_t workspace_bytes) {
    DSV4_TRY(dsv4_check_stream(op, stream));
    return dsv4_check_workspace(op, 0, workspace, workspace_bytes);
}

dsv4_status_t cmp_grid(const char *op, int64_t units, int threads, int ctas_per_sm, unsigned *blocks) {
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* not sticky: clear it so the caller's next call starts clean */
        return dsv4_fail(DSV4_STATUS_CUDA_ERROR, op, "cannot size the grid (multiprocessor count): %s",
                         cudaGetErrorString(e));
    }
    const int64_t need = (units + threads - 1) / threads, wave = (int64_t)sms * ctas_per_sm;
    *blocks = (unsigned)(need < wave ? need : wave);
    return DSV4_STATUS_SUCCESS;
}
