/* dsv4_compress: host side (validate, plan, launch). Contract: include/dsv4/compress.h. */
#include <float.h>

#include "common/error.h"
#include "compress/compress_common.h"
#include "compress/latent_plan.h"

static const char *const op = "compress";

/* An fp32 row stride in elements: >= min_elems, `rows` rows of it addressable with 64-bit
 * byte offsets, and a multiple of 16 (the kernel reads rows in 16-byte pieces). */
dsv4_status_t latent_plan(const dsv4_compress_desc_t *d, latent_plan_t *plan) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(dsv4_check_range(op, "num_tokens", d->num_tokens, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "ratio", d->ratio, 1, 2));
    if (!(d->eps >= 0.0f && d->eps <= FLT_MAX))
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "eps = %g is not a finite number >= 0", (double)d->eps);
    const int64_t width = DSV4_COMPRESS_DIM * d->ratio;
    int64_t ks, rs;
    DSV4_TRY(dsv4_given_stride(op, "kv_stride", d->kv_stride, d->num_tokens, width, &ks));
    DSV4_TRY(dsv4_check_row_stride(op, "kv_stride", ks, width, d->num_tokens, 4, 16));
    plan->kv_stride = ks;
    plan->ring_stride = 0;
    if (d->ratio == 1) return DSV4_STATUS_SUCCESS;
    DSV4_TRY(dsv4_check_range(op, "num_reqs", d->num_reqs, 0, (int64_t)INT32_MAX - 1));
    const int64_t cap = d->ring_cap;
    DSV4_TRY(dsv4_check_range(op, "ring_cap", cap, DSV4_COMPRESS_MIN_RING_CAP, DSV4_COMPRESS_MAX_RING_CAP));
    if (cap & (cap - 1))
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "ring_cap = %lld is not a power of two", (long long)cap);
    DSV4_TRY(dsv4_check_range(op, "ring_rows", d->ring_rows, cap, INT64_MAX));
    if (d->ring_rows % cap)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "ring_rows = %lld is not a multiple of ring_cap = %lld",
                         (long long)d->ring_rows, (long long)cap);
    DSV4_TRY(dsv4_given_stride(op, "ring_stride", d->ring_stride, d->ring_rows, 2 * DSV4_COMPRESS_DIM, &rs));
    DSV4_TRY(dsv4_check_row_stride(op, "ring_stride", rs, 2 * DSV4_COMPRESS_DIM, d->ring_rows, 4, 16));
    plan->ring_stride = rs;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_compress_check(const dsv4_compress_desc_t *desc) {
    latent_plan_t plan;
    return latent_plan(desc, &plan);
}

dsv4_status_t dsv4_compress_workspace_size(const dsv4_compress_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    DSV4_TRY(dsv4_compress_check(desc));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

/* Pointers the ratio needs and the alignment of the kernels' 16-byte (fp32) and 8-byte
 * (bf16) accesses; the reference checks the same. */
static dsv4_status_t check_args(const dsv4_compress_desc_t *d, const dsv4_compress_args_t *a) {
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    DSV4_TRY(dsv4_check_ptr(op, "kv_score", a->kv_score));
    DSV4_TRY(dsv4_check_ptr(op, "gamma", a->gamma));
    DSV4_TRY(dsv4_check_ptr(op, "latent", a->latent));
    if (d->ratio == 1) {
        DSV4_TRY(dsv4_check_ptr(op, "slot", a->slot));
    } else {
        DSV4_TRY(dsv4_check_ptr(op, "positions", a->positions));
        DSV4_TRY(dsv4_check_ptr(op, "ring_slot", a->ring_slot));
        DSV4_TRY(dsv4_check_ptr(op, "query_start_loc", a->query_start_loc));
        DSV4_TRY(dsv4_check_ptr(op, "ring", a->ring));
    }
    DSV4_TRY(dsv4_check_align(op, "kv_score", a->kv_score, 16));
    DSV4_TRY(dsv4_check_align(op, "gamma", a->gamma, 8));
    DSV4_TRY(dsv4_check_align(op, "latent", a->latent, 8));
    if (d->ratio == 1) return dsv4_check_align(op, "slot", a->slot, 8);
    DSV4_TRY(dsv4_check_align(op, "positions", a->positions, 8));
    DSV4_TRY(dsv4_check_align(op, "ring_slot", a->ring_slot, 8));
    DSV4_TRY(dsv4_check_align(op, "query_start_loc", a->query_start_loc, 4));
    return dsv4_check_align(op, "ring", a->ring, 16);
}

dsv4_status_t dsv4_compress(const dsv4_compress_desc_t *desc, const dsv4_compress_args_t *args, void *workspace,
                            size_t workspace_bytes, dsv4_stream_t stream) {
    latent_plan_t plan;
    DSV4_TRY(latent_plan(desc, &plan));
    DSV4_TRY(check_args(desc, args));
    DSV4_TRY(cmp_check_run(op, stream, workspace, workspace_bytes));
    if (desc->num_tokens == 0) return DSV4_STATUS_SUCCESS;
    return latent_launch(desc, &plan, args, stream);
}

dsv4_status_t dsv4_compress_ref(const dsv4_compress_desc_t *desc, const dsv4_compress_args_t *args) {
    latent_plan_t plan;
    DSV4_TRY(latent_plan(desc, &plan));
    DSV4_TRY(check_args(desc, args));
    return latent_ref_run(desc, &plan, args);
}
