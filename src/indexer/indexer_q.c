/* dsv4_indexer_q: host side (validate, plan, launch). Contract: include/dsv4/indexer.h. */
#include <math.h>

#include "common/error.h"
#include "indexer/indexer_common.h"
#include "indexer/indexer_config.h"

static const char *const op = "indexer_q";

dsv4_status_t idx_q_plan(const dsv4_indexer_q_desc_t *d, idx_q_plan_t *plan) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(dsv4_check_range(op, "num_tokens", d->num_tokens, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "num_heads", d->num_heads, 1, DSV4_INDEXER_MAX_HEADS));
    DSV4_TRY(dsv4_check_range(op, "max_position", d->max_position, 1, INT64_MAX / 256));
    int64_t sh, st, sw;
    DSV4_TRY(dsv4_given_stride(op, "q_stride_head", d->q_stride_head, d->num_heads, DSV4_INDEXER_HEAD_DIM, &sh));
    DSV4_TRY(DSV4_CHECK_BF16_ROWS(op, "q_stride_head", sh, DSV4_INDEXER_HEAD_DIM, d->num_heads));
    DSV4_TRY(dsv4_given_stride(op, "q_stride_token", d->q_stride_token, d->num_tokens, d->num_heads * sh, &st));
    DSV4_TRY(DSV4_CHECK_BF16_ROWS(op, "q_stride_token", st, d->num_tokens > 1 ? d->num_heads * sh : 0, d->num_tokens));
    DSV4_TRY(dsv4_given_stride(op, "w_stride_token", d->w_stride_token, d->num_tokens, d->num_heads, &sw));
    DSV4_TRY(dsv4_check_row_stride(op, "w_stride_token", sw, d->num_heads, d->num_tokens, 2, 1));
    DSV4_TRY(idx_check_nonneg(op, "softmax_scale", d->softmax_scale));
    DSV4_TRY(idx_check_nonneg(op, "head_scale", d->head_scale));
    plan->q_stride_head = sh;
    plan->q_stride_token = st;
    plan->w_stride_token = sw;
    plan->softmax_scale = d->softmax_scale != 0.0f ? d->softmax_scale : (float)(1.0 / sqrt(128.0));
    plan->head_scale = d->head_scale != 0.0f ? d->head_scale : (float)(1.0 / sqrt((double)d->num_heads));
    plan->rows = d->num_tokens * d->num_heads;
    plan->blocks = idx_blocks(plan->rows, IDX_Q_ROWS_PER_CTA);
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_indexer_q_check(const dsv4_indexer_q_desc_t *desc) {
    idx_q_plan_t plan;
    return idx_q_plan(desc, &plan);
}

dsv4_status_t dsv4_indexer_q_workspace_size(const dsv4_indexer_q_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    DSV4_TRY(dsv4_indexer_q_check(desc));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

/* Pointers and the alignment the kernel's accesses need (the reference checks the same). */
static dsv4_status_t check_args(const dsv4_indexer_q_args_t *a) {
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    DSV4_TRY(dsv4_check_ptr(op, "q", a->q));
    DSV4_TRY(dsv4_check_ptr(op, "w_raw", a->w_raw));
    DSV4_TRY(dsv4_check_ptr(op, "positions", a->positions));
    DSV4_TRY(dsv4_check_ptr(op, "cos_sin", a->cos_sin));
    DSV4_TRY(dsv4_check_ptr(op, "q8", a->q8));
    DSV4_TRY(dsv4_check_ptr(op, "w", a->w));
    DSV4_TRY(dsv4_check_align(op, "q", a->q, 16));
    DSV4_TRY(dsv4_check_align(op, "w_raw", a->w_raw, 2));
    DSV4_TRY(dsv4_check_align(op, "positions", a->positions, 8));
    DSV4_TRY(dsv4_check_align(op, "cos_sin", a->cos_sin, 16));
    DSV4_TRY(dsv4_check_align(op, "q8", a->q8, 16));
    return dsv4_check_align(op, "w", a->w, 4);
}

dsv4_status_t dsv4_indexer_q(const dsv4_indexer_q_desc_t *desc, const dsv4_indexer_q_args_t *args, void *workspace,
                             size_t workspace_bytes, dsv4_stream_t stream) {
    idx_q_plan_t plan;
    DSV4_TRY(idx_q_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    DSV4_TRY(idx_check_run(op, stream, workspace, workspace_bytes));
    if (desc->num_tokens == 0) return DSV4_STATUS_SUCCESS;
    return idx_q_launch(desc, &plan, args, stream);
}

dsv4_status_t dsv4_indexer_q_ref(const dsv4_indexer_q_desc_t *desc, const dsv4_indexer_q_args_t *args) {
    idx_q_plan_t plan;
    DSV4_TRY(idx_q_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    return idx_q_ref_run(desc, &plan, args);
}
