/* dsv4_kv_insert: host side (validate, plan, launch). Contract: include/dsv4/kvcache.h. */
#include "common/error.h"
#include "kvcache/kv_common.h"
#include "kvcache/kv_insert_config.h"

static const char *const op = "kv_insert";

dsv4_status_t kv_insert_plan(const dsv4_kv_insert_desc_t *d, kv_insert_plan_t *plan) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(dsv4_check_range(op, "num_tokens", d->num_tokens, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_pages(op, d->page_tokens, d->page_stride_bytes, d->num_pages, DSV4_KV_RECORD_BYTES));
    int64_t k_stride;
    DSV4_TRY(dsv4_given_stride(op, "k_stride_row", d->k_stride_row, d->num_tokens, DSV4_KV_DIM, &k_stride));
    DSV4_TRY(DSV4_CHECK_BF16_ROWS(op, "k_stride_row", k_stride, DSV4_KV_DIM, d->num_tokens));
    plan->k_stride_row = k_stride;
    plan->blocks = (d->num_tokens + KV_INSERT_WARPS - 1) / KV_INSERT_WARPS;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_kv_insert_check(const dsv4_kv_insert_desc_t *desc) {
    kv_insert_plan_t plan;
    return kv_insert_plan(desc, &plan);
}

dsv4_status_t dsv4_kv_insert_workspace_size(const dsv4_kv_insert_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    DSV4_TRY(dsv4_kv_insert_check(desc));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

/* Pointers and the alignment the kernel relies on (the reference needs the same). */
static dsv4_status_t check_args(const dsv4_kv_insert_args_t *a) {
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    DSV4_TRY(dsv4_check_ptr(op, "k", a->k));
    DSV4_TRY(dsv4_check_ptr(op, "slot_mapping", a->slot_mapping));
    DSV4_TRY(dsv4_check_ptr(op, "cache", a->cache));
    DSV4_TRY(dsv4_check_align(op, "k", a->k, 16));
    DSV4_TRY(dsv4_check_align(op, "slot_mapping", a->slot_mapping, 8));
    return dsv4_check_align(op, "cache", a->cache, 16);
}

dsv4_status_t dsv4_kv_insert(const dsv4_kv_insert_desc_t *desc, const dsv4_kv_insert_args_t *args, void *workspace,
                             size_t workspace_bytes, dsv4_stream_t stream) {
    kv_insert_plan_t plan;
    DSV4_TRY(kv_insert_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    DSV4_TRY(kv_check_run(op, stream, workspace, workspace_bytes));
    if (desc->num_tokens == 0) return DSV4_STATUS_SUCCESS;
    return kv_insert_launch(desc, &plan, args, stream);
}

dsv4_status_t dsv4_kv_insert_ref(const dsv4_kv_insert_desc_t *desc, const dsv4_kv_insert_args_t *args) {
    kv_insert_plan_t plan;
    DSV4_TRY(kv_insert_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    return kv_insert_ref_run(desc, &plan, args);
}
