/* dsv4_compress_v4: host side (validate, plan, launch). Contract: include/dsv4/compress.h. */
#include <float.h>

#include "common/error.h"
#include "compress/compress_common.h"
#include "compress/v4_math.h"
#include "compress/v4_plan.h"

static const char *const op = "compress_v4";

/* fp32 strides are multiples of 4 elements: the kernels move rows in 16-byte pieces. */
dsv4_status_t v4_plan(const dsv4_compress_v4_desc_t *d, v4_plan_t *plan) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(dsv4_check_range(op, "num_tokens", d->num_tokens, 0, INT32_MAX));
    if (d->ratio != 4 && d->ratio != 128)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "ratio = %lld is not 4 or 128", (long long)d->ratio);
    if (d->head_dim != 0 && d->head_dim != 128 && d->head_dim != 512)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "head_dim = %lld is not 0, 128 or 512", (long long)d->head_dim);
    if (!(d->eps >= 0.0f && d->eps <= FLT_MAX))
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "eps = %g is not a finite number >= 0", (double)d->eps);
    plan->head = v4_head(d->head_dim);
    plan->width = V4_COFF(d->ratio) * plan->head;
    plan->window = V4_WINDOW(d->ratio);
    const int64_t row = 2 * plan->width, B = d->state_block_rows;
    DSV4_TRY(dsv4_given_stride(op, "kv_stride", d->kv_stride, d->num_tokens, row, &plan->kv_stride));
    DSV4_TRY(dsv4_check_row_stride(op, "kv_stride", plan->kv_stride, row, d->num_tokens, 4, 4));
    DSV4_TRY(dsv4_check_range(op, "state_block_rows", B, 1, V4_MAX_BLOCK_ROWS));
    DSV4_TRY(dsv4_check_range(op, "state_blocks", d->state_blocks, 1, INT64_MAX));
    DSV4_TRY(dsv4_given_stride(op, "state_stride_row", d->state_stride_row, B, row, &plan->state_stride_row));
    DSV4_TRY(dsv4_check_row_stride(op, "state_stride_row", plan->state_stride_row, row, B, 4, 4));
    DSV4_TRY(dsv4_given_stride(op, "state_stride_block", d->state_stride_block, d->state_blocks,
                               B * plan->state_stride_row, &plan->state_stride_block));
    DSV4_TRY(dsv4_check_row_stride(op, "state_stride_block", plan->state_stride_block, B * plan->state_stride_row,
                                   d->state_blocks, 4, 4));
    DSV4_TRY(dsv4_check_range(op, "num_reqs", d->num_reqs, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "max_blocks", d->max_blocks, 1, INT32_MAX));
    DSV4_TRY(dsv4_given_stride(op, "block_table_stride", d->block_table_stride, d->num_reqs, d->max_blocks,
                               &plan->block_table_stride));
    DSV4_TRY(
        dsv4_check_row_stride(op, "block_table_stride", plan->block_table_stride, d->max_blocks, d->num_reqs, 4, 1));
    DSV4_TRY(dsv4_check_pages(op, d->page_tokens, d->page_stride_bytes, d->num_pages,
                              plan->head == 512 ? DSV4_KV_RECORD_BYTES : DSV4_INDEXER_STATE_BYTES));
    return dsv4_check_range(op, "max_position", d->max_position, 1, INT64_MAX / 256);
}

dsv4_status_t dsv4_compress_v4_check(const dsv4_compress_v4_desc_t *desc) {
    v4_plan_t plan;
    return v4_plan(desc, &plan);
}

dsv4_status_t dsv4_compress_v4_workspace_size(const dsv4_compress_v4_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    DSV4_TRY(dsv4_compress_v4_check(desc));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

/* Pointers and the alignment of the kernels' accesses; the reference checks the same. */
static dsv4_status_t check_args(const dsv4_compress_v4_args_t *a) {
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    DSV4_TRY(dsv4_check_ptr(op, "kv_score", a->kv_score));
    DSV4_TRY(dsv4_check_ptr(op, "ape", a->ape));
    DSV4_TRY(dsv4_check_ptr(op, "positions", a->positions));
    DSV4_TRY(dsv4_check_ptr(op, "state_slot", a->state_slot));
    DSV4_TRY(dsv4_check_ptr(op, "req_idx", a->req_idx));
    DSV4_TRY(dsv4_check_ptr(op, "block_table", a->block_table));
    DSV4_TRY(dsv4_check_ptr(op, "gamma", a->gamma));
    DSV4_TRY(dsv4_check_ptr(op, "cos_sin_cache", a->cos_sin_cache));
    DSV4_TRY(dsv4_check_ptr(op, "slot_mapping", a->slot_mapping));
    DSV4_TRY(dsv4_check_ptr(op, "state", a->state));
    DSV4_TRY(dsv4_check_ptr(op, "cache", a->cache));
    DSV4_TRY(dsv4_check_align(op, "kv_score", a->kv_score, 16));
    DSV4_TRY(dsv4_check_align(op, "ape", a->ape, 16));
    DSV4_TRY(dsv4_check_align(op, "positions", a->positions, 8));
    DSV4_TRY(dsv4_check_align(op, "state_slot", a->state_slot, 8));
    DSV4_TRY(dsv4_check_align(op, "req_idx", a->req_idx, 4));
    DSV4_TRY(dsv4_check_align(op, "block_table", a->block_table, 4));
    DSV4_TRY(dsv4_check_align(op, "gamma", a->gamma, 8));
    DSV4_TRY(dsv4_check_align(op, "cos_sin_cache", a->cos_sin_cache, 16));
    DSV4_TRY(dsv4_check_align(op, "slot_mapping", a->slot_mapping, 8));
    DSV4_TRY(dsv4_check_align(op, "state", a->state, 16));
    return dsv4_check_align(op, "cache", a->cache, 16);
}

dsv4_status_t dsv4_compress_v4(const dsv4_compress_v4_desc_t *desc, const dsv4_compress_v4_args_t *args,
                               void *workspace, size_t workspace_bytes, dsv4_stream_t stream) {
    v4_plan_t plan;
    DSV4_TRY(v4_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    DSV4_TRY(cmp_check_run(op, stream, workspace, workspace_bytes));
    if (desc->num_tokens == 0) return DSV4_STATUS_SUCCESS;
    return v4_launch(desc, &plan, args, stream);
}

dsv4_status_t dsv4_compress_v4_ref(const dsv4_compress_v4_desc_t *desc, const dsv4_compress_v4_args_t *args) {
    v4_plan_t plan;
    DSV4_TRY(v4_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    return v4_ref_run(desc, &plan, args);
}
