/* Top-k + SWA combine, host side: validation, planning, launch. */
#include "dsv4/indices.h"
#include "indices/combine_topk_swa_config.h"
#include "indices/index_check.h"

int64_t dsv4_combine_topk_swa_cols(int64_t topk, int64_t window) {
    if (topk < 0 || window < 0 || topk > (INT64_C(1) << 40) || window > (INT64_C(1) << 40)) return -1;
    return (topk + window + 127) / 128 * 128;
}

static dsv4_status_t cmb_check_desc(const char *op, const dsv4_combine_topk_swa_desc_t *d, dsv4_cmb_layout_t *l) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(dsv4_check_range(op, "num_tokens", d->num_tokens, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "num_reqs", d->num_reqs, 1, INT64_C(1) << 30));
    DSV4_TRY(dsv4_check_range(op, "topk", d->topk, 0, INT64_C(1) << 24));
    DSV4_TRY(dsv4_check_range(op, "topk_cols", d->topk_cols, d->topk, INT64_C(1) << 24));
    DSV4_TRY(dsv4_check_range(op, "window", d->window, 1, INT64_C(1) << 20));
    DSV4_TRY(dsv4_check_range(op, "mode", d->mode, DSV4_COMBINE_V4_1, DSV4_COMBINE_V4));
    if (d->mode == DSV4_COMBINE_V4 && d->ratio == 0)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "ratio = 0 is not a V4 case (V4 maps a config ratio of 0 to 1); pass ratio 1 in "
                         "DSV4_COMBINE_V4 mode, or use DSV4_COMBINE_V4_1");
    DSV4_TRY(dsv4_check_range(op, "ratio", d->ratio, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "slab_rows", d->slab_rows, 1, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "swa_row0", d->swa_row0, 0, d->slab_rows));
    if (d->slab_rows * d->num_reqs > INT32_MAX)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "slab_rows * num_reqs = %lld * %lld exceeds 2^31-1: workspace rows would not fit int32",
                         (long long)d->slab_rows, (long long)d->num_reqs);
    l->cols = dsv4_combine_topk_swa_cols(d->topk, d->window);
    l->topk_load = d->ratio == 0 ? 0 : d->topk;
    DSV4_TRY(dsv4_idx_check_stride(op, "topk_stride", d->topk_stride, d->topk_cols, d->num_tokens, &l->topk_stride));
    DSV4_TRY(dsv4_idx_check_stride(op, "out_stride", d->out_stride, l->cols, d->num_tokens, &l->out_stride));
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_cmb_validate(const char *op, const dsv4_combine_topk_swa_desc_t *d,
                                const dsv4_combine_topk_swa_args_t *a, dsv4_cmb_layout_t *l) {
    DSV4_TRY(cmb_check_desc(op, d, l));
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    if (l->topk_load > 0) DSV4_TRY(dsv4_idx_check_i32(op, "topk_indices", a->topk_indices));
    else DSV4_TRY(dsv4_check_align(op, "topk_indices", a->topk_indices, 4)); /* unused; NULL allowed */
    const char *names[] = {"query_start_loc", "seq_lens", "gather_lens", "combined", "combined_lens"};
    const void *ptrs[] = {a->query_start_loc, a->seq_lens, a->gather_lens, a->combined, a->combined_lens};
    return dsv4_idx_check_i32_all(op, 5, names, ptrs);
}

dsv4_status_t dsv4_combine_topk_swa_check(const dsv4_combine_topk_swa_desc_t *desc) {
    dsv4_cmb_layout_t l;
    return cmb_check_desc("combine_topk_swa", desc, &l);
}

dsv4_status_t dsv4_combine_topk_swa_workspace_size(const dsv4_combine_topk_swa_desc_t *desc, size_t *bytes) {
    dsv4_cmb_layout_t l;
    return dsv4_idx_no_workspace("combine_topk_swa", cmb_check_desc("combine_topk_swa", desc, &l), bytes);
}

dsv4_status_t dsv4_combine_topk_swa(const dsv4_combine_topk_swa_desc_t *desc, const dsv4_combine_topk_swa_args_t *args,
                                    void *workspace, size_t workspace_bytes, dsv4_stream_t stream) {
    static const char *op = "combine_topk_swa";
    dsv4_cmb_layout_t l;
    DSV4_TRY(dsv4_cmb_validate(op, desc, args, &l));
    DSV4_TRY(dsv4_idx_check_launch(op, 0, workspace, workspace_bytes, stream));
    dsv4_cmb_params_t p = {0};
    p.topk_indices = l.topk_load > 0 ? args->topk_indices : NULL;
    p.qsl = args->query_start_loc;
    p.seq_lens = args->seq_lens;
    p.gather_lens = args->gather_lens;
    p.out = args->combined;
    p.lens = args->combined_lens;
    p.topk_stride = l.topk_load > 0 ? l.topk_stride : 0; /* never dereferenced otherwise */
    p.out_stride = l.out_stride;
    p.num_tokens = (int32_t)desc->num_tokens;
    p.num_reqs = (int32_t)desc->num_reqs;
    p.topk = (int32_t)desc->topk;
    p.topk_load = (int32_t)l.topk_load;
    p.spec_load = desc->num_tokens <= DSV4_CMB_SPEC_MAX_TOKENS
                      ? (p.topk_load < DSV4_CMB_BATCH_COLS ? p.topk_load : DSV4_CMB_BATCH_COLS)
                      : 0;
    p.window = (int32_t)desc->window;
    p.ratio = (int32_t)desc->ratio;
    p.cols = (int32_t)l.cols;
    p.slab_rows = (int32_t)desc->slab_rows;
    p.swa_row0 = (int32_t)desc->swa_row0;
    p.vec = dsv4_idx_vec16(p.out, l.out_stride, l.cols) &&
            (l.topk_load == 0 || dsv4_idx_vec16(p.topk_indices, l.topk_stride, l.topk_load));
    return dsv4_combine_topk_swa_launch(&p, desc->mode == DSV4_COMBINE_V4, stream);
}
