/* dsv4_engram_lookup: host side (validate, plan, launch). Contract: include/dsv4/compress.h. */
#include "common/error.h"
#include "compress/compress_common.h"
#include "compress/engram_lookup_config.h"

static const char *const op = "engram_lookup";

#define ENGRAM_MAX_COLS 65536

/* A table's row stride in bytes: at least a row, and `rows` rows of it addressable. */
static dsv4_status_t check_table_stride(const char *what, int64_t v, int64_t row_bytes, int64_t rows) {
    return dsv4_check_range(op, what, v, row_bytes, rows > 1 ? INT64_MAX / rows : INT64_MAX);
}

dsv4_status_t engram_plan(const dsv4_engram_lookup_desc_t *d, engram_plan_t *plan) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(dsv4_check_range(op, "num_tokens", d->num_tokens, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "n_cols", d->n_cols, 1, ENGRAM_MAX_COLS));
    DSV4_TRY(dsv4_check_range(op, "head_start", d->head_start, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "local_heads", d->local_heads, 1, ENGRAM_MAX_COLS));
    const int64_t D = d->head_dim;
    DSV4_TRY(dsv4_check_range(op, "head_dim", D, DSV4_ENGRAM_BLOCK, DSV4_ENGRAM_MAX_HEAD_DIM));
    if (D % DSV4_ENGRAM_BLOCK)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "head_dim = %lld is not a multiple of %d (one scale per %d dims)", (long long)D,
                         DSV4_ENGRAM_BLOCK, DSV4_ENGRAM_BLOCK);
    DSV4_TRY(dsv4_check_range(op, "vocab_start", d->vocab_start, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "vocab_end", d->vocab_end, d->vocab_start, (int64_t)INT32_MAX + 1));
    /* ids: every (t, h) element offset, times 4 bytes, fits in int64. */
    int64_t sh, st, vs, ss;
    DSV4_TRY(dsv4_given_stride(op, "ids_stride_head", d->ids_stride_head, d->n_cols, 1, &sh));
    DSV4_TRY(dsv4_check_range(op, "ids_stride_head", sh, 1, INT64_MAX / 4 / d->n_cols));
    DSV4_TRY(dsv4_given_stride(op, "ids_stride_token", d->ids_stride_token, d->num_tokens, d->n_cols * sh, &st));
    const int64_t reach = INT64_MAX / 4 - d->n_cols * sh;
    DSV4_TRY(dsv4_check_range(op, "ids_stride_token", st, 1, d->num_tokens > 1 ? reach / d->num_tokens : reach));
    const int64_t table_rows = d->vocab_end - d->vocab_start;
    DSV4_TRY(dsv4_given_stride(op, "values_stride_bytes", d->values_stride_bytes, table_rows, D, &vs));
    DSV4_TRY(check_table_stride("values_stride_bytes", vs, D, table_rows));
    if (vs % 16)
        return dsv4_fail(DSV4_STATUS_MISALIGNED, op,
                         "values_stride_bytes = %lld is not a multiple of 16 (rows are read in 16-byte pieces)",
                         (long long)vs);
    DSV4_TRY(
        dsv4_given_stride(op, "scales_stride_bytes", d->scales_stride_bytes, table_rows, D / DSV4_ENGRAM_BLOCK, &ss));
    DSV4_TRY(check_table_stride("scales_stride_bytes", ss, D / DSV4_ENGRAM_BLOCK, table_rows));
    plan->ids_stride_token = st;
    plan->ids_stride_head = sh;
    plan->values_stride_bytes = vs;
    plan->scales_stride_bytes = ss;
    plan->rows = d->num_tokens * d->local_heads;
    plan->units = plan->rows * (D / ENGRAM_PIECE);
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_engram_lookup_check(const dsv4_engram_lookup_desc_t *desc) {
    engram_plan_t plan;
    return engram_plan(desc, &plan);
}

dsv4_status_t dsv4_engram_lookup_workspace_size(const dsv4_engram_lookup_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    DSV4_TRY(dsv4_engram_lookup_check(desc));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

/* Pointers and the alignment of the kernel's 16-byte code loads and stores. */
static dsv4_status_t check_args(const dsv4_engram_lookup_args_t *a) {
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    DSV4_TRY(dsv4_check_ptr(op, "values", a->values));
    DSV4_TRY(dsv4_check_ptr(op, "scales", a->scales));
    DSV4_TRY(dsv4_check_ptr(op, "ids", a->ids));
    DSV4_TRY(dsv4_check_ptr(op, "out", a->out));
    DSV4_TRY(dsv4_check_align(op, "values", a->values, 16));
    DSV4_TRY(dsv4_check_align(op, "ids", a->ids, 4));
    return dsv4_check_align(op, "out", a->out, 16);
}

dsv4_status_t dsv4_engram_lookup(const dsv4_engram_lookup_desc_t *desc, const dsv4_engram_lookup_args_t *args,
                                 void *workspace, size_t workspace_bytes, dsv4_stream_t stream) {
    engram_plan_t plan;
    DSV4_TRY(engram_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    DSV4_TRY(cmp_check_run(op, stream, workspace, workspace_bytes));
    if (desc->num_tokens == 0) return DSV4_STATUS_SUCCESS;
    return engram_launch(desc, &plan, args, stream);
}

dsv4_status_t dsv4_engram_lookup_ref(const dsv4_engram_lookup_desc_t *desc, const dsv4_engram_lookup_args_t *args) {
    engram_plan_t plan;
    DSV4_TRY(engram_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    return engram_ref_run(desc, &plan, args);
}
