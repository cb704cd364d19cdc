/* Host-side pieces the indexer operators share. */
#include "indexer/indexer_common.h"

#include <float.h>

#include "common/error.h"
#include "indexer/indexer_config.h"

dsv4_status_t idx_check_run(const char *op, dsv4_stream_t stream, const void *workspace, size_t workspace_bytes) {
    DSV4_TRY(dsv4_check_stream(op, stream));
    return dsv4_check_workspace(op, 0, workspace, workspace_bytes);
}

dsv4_status_t idx_check_nonneg(const char *op, const char *what, float v) {
    if (v >= 0.0f && v <= FLT_MAX) return DSV4_STATUS_SUCCESS;
    return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "%s = %g is not a finite number >= 0", what, (double)v);
}

#define IDX_MAX_PAGE_TOKENS (1 << 24)

dsv4_status_t idx_check_cache(const char *op, int64_t P, int64_t stride, int64_t num_pages) {
    DSV4_TRY(dsv4_check_range(op, "page_tokens", P, 1, IDX_MAX_PAGE_TOKENS));
    const int64_t used = P * DSV4_INDEXER_STATE_BYTES;
    if (stride < used)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "page_stride_bytes = %lld is smaller than page_tokens*132 = %lld (page_tokens = %lld)",
                         (long long)stride, (long long)used, (long long)P);
    if (stride % 16 != 0)
        return dsv4_fail(DSV4_STATUS_MISALIGNED, op,
                         "page_stride_bytes = %lld is not a multiple of 16 (the kernel's vector stores need it)",
                         (long long)stride);
    return dsv4_check_range(op, "num_pages", num_pages, 1, INT64_MAX / stride);
}

unsigned idx_blocks(int64_t rows, int64_t rows_per_cta) {
    const int64_t need = (rows + rows_per_cta - 1) / rows_per_cta;
    return (unsigned)(need < IDX_MAX_BLOCKS ? need : IDX_MAX_BLOCKS);
}
