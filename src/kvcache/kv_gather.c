/* dsv4_kv_gather: host side (validate, plan, launch). Contract: include/dsv4/kvcache.h. */
#include "common/error.h"
#include "kvcache/kv_common.h"
#include "kvcache/kv_gather_config.h"

static const char *const op = "kv_gather";

dsv4_status_t kv_gather_plan(const dsv4_kv_gather_desc_t *d, kv_gather_plan_t *plan) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(dsv4_check_range(op, "num_reqs", d->num_reqs, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "block_table_width", d->block_table_width, 0, INT32_MAX));
    int64_t bts, srow, sreq;
    DSV4_TRY(dsv4_given_stride(op, "block_table_stride", d->block_table_stride,
                               d->block_table_width > 0 ? d->num_reqs : 0, d->block_table_width, &bts));
    DSV4_TRY(dsv4_check_range(op, "block_table_stride", bts, d->block_table_width,
                              INT64_MAX / 4 / (d->num_reqs > 1 ? d->num_reqs : 1)));
    DSV4_TRY(dsv4_check_range(op, "out_rows", d->out_rows, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "offset", d->offset, 0, d->out_rows));
    DSV4_TRY(dsv4_check_range(op, "max_gather_len", d->max_gather_len, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_pages(op, d->page_tokens, d->page_stride_bytes, d->num_pages, DSV4_KV_RECORD_BYTES));
    /* Rows and slabs must not overlap: warps write them in parallel. */
    DSV4_TRY(dsv4_given_stride(op, "out_stride_row", d->out_stride_row, d->out_rows, DSV4_KV_DIM, &srow));
    DSV4_TRY(DSV4_CHECK_BF16_ROWS(op, "out_stride_row", srow, DSV4_KV_DIM, d->out_rows));
    const int64_t slab = d->out_rows * srow;
    DSV4_TRY(
        dsv4_given_stride(op, "out_stride_req", d->out_stride_req, d->out_rows > 0 ? d->num_reqs : 0, slab, &sreq));
    DSV4_TRY(DSV4_CHECK_BF16_ROWS(op, "out_stride_req", sreq, d->num_reqs > 1 ? slab : 0, d->num_reqs));

    plan->block_table_stride = bts;
    plan->out_stride_row = srow;
    plan->out_stride_req = sreq;
    int64_t bound = d->out_rows - d->offset;
    if (d->max_gather_len > 0 && d->max_gather_len < bound) bound = d->max_gather_len;
    const int64_t per_cta = (int64_t)KV_GATHER_WARPS * KV_GATHER_ROWS;
    int64_t workers = (bound + per_cta - 1) / per_cta;
    plan->workers = workers < 1 ? 1 : (workers > KV_GATHER_MAX_WORKERS ? KV_GATHER_MAX_WORKERS : workers);
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_kv_gather_check(const dsv4_kv_gather_desc_t *desc) {
    kv_gather_plan_t plan;
    return kv_gather_plan(desc, &plan);
}

dsv4_status_t dsv4_kv_gather_workspace_size(const dsv4_kv_gather_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    DSV4_TRY(dsv4_kv_gather_check(desc));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

static dsv4_status_t check_args(const dsv4_kv_gather_args_t *a) {
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    DSV4_TRY(dsv4_check_ptr(op, "cache", a->cache));
    DSV4_TRY(dsv4_check_ptr(op, "seq_lens", a->seq_lens));
    DSV4_TRY(dsv4_check_ptr(op, "block_table", a->block_table));
    DSV4_TRY(dsv4_check_ptr(op, "out", a->out));
    DSV4_TRY(dsv4_check_align(op, "cache", a->cache, 16));
    DSV4_TRY(dsv4_check_align(op, "seq_lens", a->seq_lens, 4));
    if (a->gather_lens) DSV4_TRY(dsv4_check_align(op, "gather_lens", a->gather_lens, 4));
    DSV4_TRY(dsv4_check_align(op, "block_table", a->block_table, 4));
    return dsv4_check_align(op, "out", a->out, 16);
}

dsv4_status_t dsv4_kv_gather(const dsv4_kv_gather_desc_t *desc, const dsv4_kv_gather_args_t *args, void *workspace,
                             size_t workspace_bytes, dsv4_stream_t stream) {
    kv_gather_plan_t plan;
    DSV4_TRY(kv_gather_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    DSV4_TRY(kv_check_run(op, stream, workspace, workspace_bytes));
    if (desc->num_reqs == 0 || desc->offset == desc->out_rows) return DSV4_STATUS_SUCCESS;
    return kv_gather_launch(desc, &plan, args, stream);
}

dsv4_status_t dsv4_kv_gather_ref(const dsv4_kv_gather_desc_t *desc, const dsv4_kv_gather_args_t *args) {
    kv_gather_plan_t plan;
    DSV4_TRY(kv_gather_plan(desc, &plan));
    DSV4_TRY(check_args(args));
    return kv_gather_ref_run(desc, &plan, args);
}
