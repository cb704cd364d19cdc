/* dsv4_inv_rope: host side (validate, plan, launch). Contract: include/dsv4/compress.h. */
#include "common/error.h"
#include "compress/compress_common.h"
#include "compress/inv_rope_config.h"

static const char *const op = "inv_rope";

#define INV_ROPE_MAX_HEADS 1024

dsv4_status_t inv_rope_plan(const dsv4_inv_rope_desc_t *d, inv_rope_plan_t *plan) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(dsv4_check_range(op, "num_tokens", d->num_tokens, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "num_heads", d->num_heads, 1, INV_ROPE_MAX_HEADS));
    const int64_t hp = d->num_heads_padded ? d->num_heads_padded : d->num_heads;
    DSV4_TRY(dsv4_check_range(op, "num_heads_padded", hp, d->num_heads, INV_ROPE_MAX_HEADS));
    DSV4_TRY(dsv4_check_range(op, "max_position", d->max_position, 1, INT64_MAX / 256));
    /* Head rows must not overlap: they are rewritten in place in parallel. */
    int64_t sh, st;
    DSV4_TRY(dsv4_given_stride(op, "o_stride_head", d->o_stride_head, hp, DSV4_INV_ROPE_HEAD_DIM, &sh));
    DSV4_TRY(DSV4_CHECK_BF16_ROWS(op, "o_stride_head", sh, DSV4_INV_ROPE_HEAD_DIM, hp));
    DSV4_TRY(dsv4_given_stride(op, "o_stride_token", d->o_stride_token, d->num_tokens, hp * sh, &st));
    DSV4_TRY(DSV4_CHECK_BF16_ROWS(op, "o_stride_token", st, d->num_tokens > 1 ? hp * sh : 0, d->num_tokens));
    plan->heads_padded = hp;
    plan->o_stride_head = sh;
    plan->o_stride_token = st;
    plan->units = d->num_tokens * d->num_heads * INV_ROPE_SEGS_PER_ROW;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_inv_rope_check(const dsv4_inv_rope_desc_t *desc) {
    inv_rope_plan_t plan;
    return inv_rope_plan(desc, &plan);
}

dsv4_status_t dsv4_inv_rope_workspace_size(const dsv4_inv_rope_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    DSV4_TRY(dsv4_inv_rope_check(desc));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

/* Pointers and the alignment the kernel's 16-byte accesses need (the reference checks the same). */
static dsv4_status_t check_args(const dsv4_inv_rope_args_t *a) {
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    DSV4_TRY(dsv4_check_ptr(op, "o", a->o));
    DSV4_TRY(dsv4_check_ptr(op, "position_ids", a->position_ids));
    DSV4_TRY(dsv4_check_ptr(op, "cos_sin_cache", a->cos_sin_cache));
    DSV4_TRY(dsv4_check_align(op, "o", a->o, 16));
    DSV4_TRY(dsv4_check_align(op, "position_ids", a->position_ids, 8));
    return dsv4_check_align(op, "cos_sin_cache", a->cos_sin_cache, 16);
}

dsv4_status_t dsv4_inv_rope(const dsv4_inv_rope_desc_t *desc, const dsv4_inv_rope_args_t *args, void *workspace,
                            size_t workspace_bytes, dsv4_stream_t stream) {
    inv_rope_plan_t plan;
    DSV4_TRY(inv_rope_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    DSV4_TRY(cmp_check_run(op, stream, workspace, workspace_bytes));
    if (desc->num_tokens == 0) return DSV4_STATUS_SUCCESS;
    return inv_rope_launch(desc, &plan, args, stream);
}

dsv4_status_t dsv4_inv_rope_ref(const dsv4_inv_rope_desc_t *desc, const dsv4_inv_rope_args_t *args) {
    inv_rope_plan_t plan;
    DSV4_TRY(inv_rope_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    return inv_rope_ref_run(desc, &plan, args);
}
