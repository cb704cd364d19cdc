/* dsv4_indexer_k_store: host side (validate, plan, launch). Contract: include/dsv4/indexer.h. */
#include "common/error.h"
#include "indexer/indexer_common.h"
#include "indexer/indexer_config.h"

static const char *const op = "indexer_k_store";

dsv4_status_t idx_k_plan(const dsv4_indexer_k_store_desc_t *d, idx_k_plan_t *plan) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(dsv4_check_range(op, "num_tokens", d->num_tokens, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "ratio", d->ratio, 1, 2));
    DSV4_TRY(idx_check_nonneg(op, "eps", d->eps));
    DSV4_TRY(dsv4_check_range(op, "max_position", d->max_position, 1, INT64_MAX / 256));
    DSV4_TRY(dsv4_check_pages(op, d->page_tokens, d->page_stride_bytes, d->num_pages, DSV4_INDEXER_STATE_BYTES));
    int64_t ks;
    DSV4_TRY(dsv4_given_stride(op, "k_stride_row", d->k_stride_row, d->num_tokens, DSV4_INDEXER_HEAD_DIM, &ks));
    DSV4_TRY(DSV4_CHECK_BF16_ROWS(op, "k_stride_row", ks, DSV4_INDEXER_HEAD_DIM, d->num_tokens));
    plan->k_stride_row = ks;
    /* num_pages * page_tokens <= INT64_MAX / 132: no overflow. */
    plan->slots = d->num_pages * d->page_tokens;
    plan->blocks = idx_blocks(d->num_tokens, IDX_K_ROWS_PER_CTA);
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_indexer_k_store_check(const dsv4_indexer_k_store_desc_t *desc) {
    idx_k_plan_t plan;
    return idx_k_plan(desc, &plan);
}

dsv4_status_t dsv4_indexer_k_store_workspace_size(const dsv4_indexer_k_store_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    DSV4_TRY(dsv4_indexer_k_store_check(desc));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

/* Pointers and the alignment the kernel's accesses need (the reference checks the same). */
static dsv4_status_t check_args(const dsv4_indexer_k_store_args_t *a) {
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    DSV4_TRY(dsv4_check_ptr(op, "k_pre", a->k_pre));
    DSV4_TRY(dsv4_check_ptr(op, "gamma", a->gamma));
    DSV4_TRY(dsv4_check_ptr(op, "positions", a->positions));
    DSV4_TRY(dsv4_check_ptr(op, "slot_mapping", a->slot_mapping));
    DSV4_TRY(dsv4_check_ptr(op, "cos_sin", a->cos_sin));
    DSV4_TRY(dsv4_check_ptr(op, "cache", a->cache));
    DSV4_TRY(dsv4_check_align(op, "k_pre", a->k_pre, 16));
    DSV4_TRY(dsv4_check_align(op, "gamma", a->gamma, 16));
    DSV4_TRY(dsv4_check_align(op, "positions", a->positions, 8));
    DSV4_TRY(dsv4_check_align(op, "slot_mapping", a->slot_mapping, 8));
    DSV4_TRY(dsv4_check_align(op, "cos_sin", a->cos_sin, 16));
    return dsv4_check_align(op, "cache", a->cache, 16);
}

dsv4_status_t dsv4_indexer_k_store(const dsv4_indexer_k_store_desc_t *desc, const dsv4_indexer_k_store_args_t *args,
                                   void *workspace, size_t workspace_bytes, dsv4_stream_t stream) {
    idx_k_plan_t plan;
    DSV4_TRY(idx_k_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    DSV4_TRY(idx_check_run(op, stream, workspace, workspace_bytes));
    if (desc->num_tokens == 0) return DSV4_STATUS_SUCCESS;
    return idx_k_launch(desc, &plan, args, stream);
}

dsv4_status_t dsv4_indexer_k_store_ref(const dsv4_indexer_k_store_desc_t *desc,
                                       const dsv4_indexer_k_store_args_t *args) {
    idx_k_plan_t plan;
    DSV4_TRY(idx_k_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    return idx_k_ref_run(desc, &plan, args);
}
