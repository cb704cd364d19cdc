/*
 * dsv4_mhc_seam: post of this sublayer fused with the pre of the next site:
 * the V4.1 delayed seam (mhc_fused_post_pre_delayed) and the V4 fused seam
 * (mhc_fused_post_pre). Host side: validate, describe the pipeline, plan, launch.
 */
#include <string.h>

#include "common/error.h"
#include "mhc/mhc_host.h"

static const char *op = "mhc_seam";

dsv4_status_t dsv4_mhc_seam_check(const dsv4_mhc_seam_desc_t *d) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(mhc_check_shape(op, d->tokens, d->hidden));
    DSV4_TRY(mhc_check_variant(op, d->variant));
    DSV4_TRY(mhc_check_route(op, d->route));
    DSV4_TRY(mhc_check_gate_params(op, &d->gate));
    DSV4_TRY(mhc_check_eps(op, "norm_eps", d->norm_eps));
    const int64_t H = d->hidden;
    int64_t s;
    DSV4_TRY(mhc_stride(op, "x_stride", d->x_stride, d->tokens, H, &s));
    DSV4_TRY(mhc_stride(op, "residual_stride", d->residual_stride, d->tokens, 4 * H, &s));
    DSV4_TRY(mhc_stride(op, "residual_out_stride", d->residual_out_stride, d->tokens, 4 * H, &s));
    DSV4_TRY(mhc_stride(op, "layer_input_stride", d->layer_input_stride, d->tokens, H, &s));
    DSV4_TRY(mhc_stride(op, "aux_stride", d->aux_stride, d->tokens, H, &s));
    dsv4_mhc_plan_t pl;
    return mhc_plan_compute(op, d->tokens, H, 0, d->route, &pl);
}

dsv4_status_t dsv4_mhc_seam_workspace_size(const dsv4_mhc_seam_desc_t *d, size_t *bytes) {
    DSV4_TRY(dsv4_mhc_seam_check(d));
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    dsv4_mhc_plan_t pl;
    DSV4_TRY(mhc_plan_compute(op, d->tokens, d->hidden, 0, d->route, &pl));
    *bytes = pl.workspace_bytes;
    return DSV4_STATUS_SUCCESS;
}

/* Validates everything and describes the run; p->T == 0 means nothing to do. */
static dsv4_status_t mhc_seam_setup(const dsv4_mhc_seam_desc_t *d, const dsv4_mhc_seam_args_t *a, int run,
                                    mhc_pipe_t *p) {
    DSV4_TRY(dsv4_mhc_seam_check(d));
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    memset(p, 0, sizeof *p);
    const int64_t T = d->tokens, H = d->hidden;
    if (T == 0) return DSV4_STATUS_SUCCESS;
    if (d->variant == DSV4_MHC_V4 && a->pre_mix)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "pre_mix must be NULL with variant DSV4_MHC_V4 (the collapse uses the fresh pre)");
    p->T = T;
    p->H = H;
    p->prod = MHC_PROD_POST;
    p->epi = d->variant == DSV4_MHC_V41 ? MHC_EPI_DELAYED : MHC_EPI_IMMEDIATE;
    p->proj_collapse = p->epi == MHC_EPI_DELAYED;
    p->sq_rounded = d->variant == DSV4_MHC_V41;
    p->rms_numel = 4 * H;
    p->gate = d->gate;
    p->norm_eps = d->norm_eps;
    mhc_stride(op, "x_stride", d->x_stride, d->tokens, H, &p->x_stride);
    mhc_stride(op, "residual_stride", d->residual_stride, d->tokens, 4 * H, &p->res_stride);
    mhc_stride(op, "residual_out_stride", d->residual_out_stride, d->tokens, 4 * H, &p->res_out_stride);
    mhc_stride(op, "layer_input_stride", d->layer_input_stride, d->tokens, H, &p->li_stride);
    mhc_stride(op, "aux_stride", d->aux_stride, d->tokens, H, &p->aux_stride);
    p->x = a->x;
    p->res = a->residual;
    p->post_in = a->post;
    p->comb_in = a->comb;
    p->pre_mix = a->pre_mix;
    p->fn = a->fn;
    p->scale = a->scale;
    p->base = a->base;
    p->fn_hl = a->fn_split; /* NULL: the fn split writes it into the workspace */
    p->norm_w = a->norm_weight;
    p->res_out = a->residual_out;
    p->li = a->layer_input;
    p->aux = a->aux;
    p->post_out = a->post_out;
    p->comb_out = a->comb_out;
    p->pre_out = a->pre_out;
    p->mix_out = a->mix;
    p->col_src = a->residual_out;
    p->col_src_stride = p->res_out_stride;

    mhc_args_check_t c = {op, run, 0, {{0}}};
    DSV4_TRY(mhc_arg_rows(&c, "x", a->x, 1, T, p->x_stride, H, 0));
    DSV4_TRY(mhc_arg_rows(&c, "residual", a->residual, 1, T, p->res_stride, 4 * H, 0));
    DSV4_TRY(mhc_arg(&c, "post", a->post, 1, 16, (size_t)T * 4 * sizeof(float), 0));
    DSV4_TRY(mhc_arg(&c, "comb", a->comb, 1, 16, (size_t)T * 16 * sizeof(float), 0));
    DSV4_TRY(mhc_collapse_args(&c, p, 1));
    DSV4_TRY(mhc_pipe_args(&c, p, "post_out", "comb_out", "pre_out"));
    DSV4_TRY(mhc_check_overlaps(&c));
    return mhc_plan_pipe(op, p, d->route);
}

dsv4_status_t dsv4_mhc_seam(const dsv4_mhc_seam_desc_t *desc, const dsv4_mhc_seam_args_t *args, void *workspace,
                            size_t workspace_bytes, dsv4_stream_t stream) {
    mhc_pipe_t p;
    DSV4_TRY(mhc_seam_setup(desc, args, 1, &p));
    return mhc_pipe_launch(op, &p, workspace, workspace_bytes, stream);
}

dsv4_status_t dsv4_mhc_seam_ref(const dsv4_mhc_seam_desc_t *desc, const dsv4_mhc_seam_args_t *args) {
    mhc_pipe_t p;
    DSV4_TRY(mhc_seam_setup(desc, args, 0, &p));
    if (p.T) mhc_pipe_ref_run(&p);
    return DSV4_STATUS_SUCCESS;
}
