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

unsigned idx_blocks(int64_t rows, int64_t rows_per_cta) {
    const int64_t need = (rows + rows_per_cta - 1) / rows_per_cta;
    return (unsigned)(need < IDX_MAX_BLOCKS ? need : IDX_MAX_BLOCKS);
}
