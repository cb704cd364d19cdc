/* dsv4_kv_swa_write: host side (validate, plan, launch). Contract: include/dsv4/kvcache.h. */
#include <math.h>

#include "common/error.h"
#include "kvcache/kv_common.h"
#include "kvcache/kv_swa_write_config.h"

static const char *const op = "kv_swa_write";

dsv4_status_t kv_swa_plan(const dsv4_kv_swa_write_desc_t *d, kv_swa_plan_t *plan) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(dsv4_check_range(op, "num_tokens", d->num_tokens, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "num_insert", d->num_insert, 0, d->num_tokens));
    DSV4_TRY(dsv4_check_range(op, "num_heads", d->num_heads, 1, KV_SWA_MAX_HEADS));
    const int64_t hp = d->num_heads_padded ? d->num_heads_padded : d->num_heads;
    DSV4_TRY(dsv4_check_range(op, "num_heads_padded", hp, d->num_heads, KV_SWA_MAX_HEADS));
    DSV4_TRY(dsv4_check_range(op, "max_position", d->max_position, 1, INT64_MAX / 256));
    if (!(d->eps >= 0.0f) || isinf(d->eps))
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "eps = %g is not a finite value >= 0", (double)d->eps);
    DSV4_TRY(dsv4_check_range(op, "skip_q_norm", d->skip_q_norm, 0, 1));
    DSV4_TRY(dsv4_check_pages(op, d->page_tokens, d->page_stride_bytes, d->num_pages, DSV4_KV_RECORD_BYTES));

    /* Head rows must not overlap: the kernel rewrites them in place in parallel. */
    int64_t sh, st, kvs;
    DSV4_TRY(dsv4_given_stride(op, "q_stride_head", d->q_stride_head, hp, DSV4_KV_DIM, &sh));
    DSV4_TRY(DSV4_CHECK_BF16_ROWS(op, "q_stride_head", sh, DSV4_KV_DIM, hp));
    DSV4_TRY(dsv4_given_stride(op, "q_stride_token", d->q_stride_token, d->num_tokens, hp * sh, &st));
    DSV4_TRY(DSV4_CHECK_BF16_ROWS(op, "q_stride_token", st, d->num_tokens > 1 ? hp * sh : 0, d->num_tokens));
    DSV4_TRY(dsv4_given_stride(op, "kv_stride_row", d->kv_stride_row, d->num_insert, DSV4_KV_DIM, &kvs));
    DSV4_TRY(DSV4_CHECK_BF16_ROWS(op, "kv_stride_row", kvs, DSV4_KV_DIM, d->num_insert));

    plan->heads_padded = hp;
    plan->q_stride_head = sh;
    plan->q_stride_token = st;
    plan->kv_stride_row = kvs;
    plan->tasks_per_token = hp + 1;
    plan->blocks = (d->num_tokens * plan->tasks_per_token + KV_SWA_WARPS - 1) / KV_SWA_WARPS;
    if (plan->blocks > KV_SWA_MAX_BLOCKS)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "num_tokens * (num_heads_padded + 1) = %lld * %lld needs more than %lld CTAs",
                         (long long)d->num_tokens, (long long)plan->tasks_per_token, (long long)KV_SWA_MAX_BLOCKS);
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_kv_swa_write_check(const dsv4_kv_swa_write_desc_t *desc) {
    kv_swa_plan_t plan;
    return kv_swa_plan(desc, &plan);
}

dsv4_status_t dsv4_kv_swa_write_workspace_size(const dsv4_kv_swa_write_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    DSV4_TRY(dsv4_kv_swa_write_check(desc));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

static dsv4_status_t check_args(const dsv4_kv_swa_write_args_t *a) {
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    DSV4_TRY(dsv4_check_ptr(op, "q", a->q));
    DSV4_TRY(dsv4_check_ptr(op, "kv", a->kv));
    DSV4_TRY(dsv4_check_ptr(op, "position_ids", a->position_ids));
    DSV4_TRY(dsv4_check_ptr(op, "slot_mapping", a->slot_mapping));
    DSV4_TRY(dsv4_check_ptr(op, "cos_sin_cache", a->cos_sin_cache));
    DSV4_TRY(dsv4_check_ptr(op, "cache", a->cache));
    DSV4_TRY(dsv4_check_align(op, "q", a->q, 16));
    DSV4_TRY(dsv4_check_align(op, "kv", a->kv, 16));
    DSV4_TRY(dsv4_check_align(op, "position_ids", a->position_ids, 8));
    DSV4_TRY(dsv4_check_align(op, "slot_mapping", a->slot_mapping, 8));
    DSV4_TRY(dsv4_check_align(op, "cos_sin_cache", a->cos_sin_cache, 16));
    return dsv4_check_align(op, "cache", a->cache, 16);
}

dsv4_status_t dsv4_kv_swa_write(const dsv4_kv_swa_write_desc_t *desc, const dsv4_kv_swa_write_args_t *args,
                                void *workspace, size_t workspace_bytes, dsv4_stream_t stream) {
    kv_swa_plan_t plan;
    DSV4_TRY(kv_swa_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    DSV4_TRY(kv_check_run(op, stream, workspace, workspace_bytes));
    if (desc->num_tokens == 0) return DSV4_STATUS_SUCCESS;
    return kv_swa_launch(desc, &plan, args, stream);
}

dsv4_status_t dsv4_kv_swa_write_ref(const dsv4_kv_swa_write_desc_t *desc, const dsv4_kv_swa_write_args_t *args) {
    kv_swa_plan_t plan;
    DSV4_TRY(kv_swa_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    return kv_swa_ref_run(desc, &plan, args);
}
