/*
 * dsv4_mhc_gates: projection + RMS + gates + Sinkhorn of a residual, or of the first
 * layer's embedding with fn_bcast. Host side: validate, plan, launch.
 */
#include <string.h>

#include "common/error.h"
#include "mhc/mhc_host.h"

static const char *op = "mhc_gates";

dsv4_status_t dsv4_mhc_gates_check(const dsv4_mhc_gates_desc_t *d) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(mhc_check_shape(op, d->tokens, d->hidden));
    DSV4_TRY(mhc_check_flag(op, "broadcast", d->broadcast));
    DSV4_TRY(mhc_check_route(op, d->route));
    DSV4_TRY(mhc_check_gate_params(op, &d->gate));
    int64_t s;
    DSV4_TRY(
        mhc_stride(op, "residual_stride", d->residual_stride, d->tokens, d->broadcast ? d->hidden : 4 * d->hidden, &s));
    dsv4_mhc_plan_t pl;
    return mhc_plan_compute(op, d->tokens, d->hidden, d->broadcast, d->route, &pl);
}

dsv4_status_t dsv4_mhc_gates_workspace_size(const dsv4_mhc_gates_desc_t *d, size_t *bytes) {
    DSV4_TRY(dsv4_mhc_gates_check(d));
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    dsv4_mhc_plan_t pl;
    DSV4_TRY(mhc_plan_compute(op, d->tokens, d->hidden, d->broadcast, d->route, &pl));
    *bytes = pl.workspace_bytes;
    return DSV4_STATUS_SUCCESS;
}

static dsv4_status_t mhc_gates_setup(const dsv4_mhc_gates_desc_t *d, const dsv4_mhc_gates_args_t *a, int run,
                                     mhc_pipe_t *p) {
    DSV4_TRY(dsv4_mhc_gates_check(d));
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    memset(p, 0, sizeof *p);
    const int64_t T = d->tokens, H = d->hidden;
    const int bc = d->broadcast != 0;
    if (T == 0) return DSV4_STATUS_SUCCESS;
    p->T = T;
    p->H = H;
    p->prod = bc ? MHC_PROD_BCAST : MHC_PROD_RES;
    p->epi = MHC_EPI_GATES;
    p->rms_numel = bc ? H : 4 * H;
    p->gate = d->gate;
    mhc_stride(op, "residual_stride", d->residual_stride, d->tokens, bc ? H : 4 * H, &p->res_stride);
    p->res = a->residual;
    p->fn = a->fn;
    p->scale = a->scale;
    p->base = a->base;
    p->fn_hl = a->fn_split; /* NULL: the fn split writes it into the workspace */
    p->sqrsum_in = a->sqrsum;
    p->post_out = a->post;
    p->comb_out = a->comb;
    p->pre_out = a->pre;
    p->mix_out = a->mix;

    mhc_args_check_t c = {op, run, 0, {{0}}};
    DSV4_TRY(mhc_arg_rows(&c, "residual", a->residual, 1, T, p->res_stride, bc ? H : 4 * H, 0));
    DSV4_TRY(mhc_pipe_args(&c, p, "post", "comb", "pre"));
    DSV4_TRY(mhc_check_overlaps(&c));
    return mhc_plan_pipe(op, p, d->route);
}

dsv4_status_t dsv4_mhc_gates(const dsv4_mhc_gates_desc_t *desc, const dsv4_mhc_gates_args_t *args, void *workspace,
                             size_t workspace_bytes, dsv4_stream_t stream) {
    mhc_pipe_t p;
    DSV4_TRY(mhc_gates_setup(desc, args, 1, &p));
    return mhc_pipe_launch(op, &p, workspace, workspace_bytes, stream);
}

dsv4_status_t dsv4_mhc_gates_ref(const dsv4_mhc_gates_desc_t *desc, const dsv4_mhc_gates_args_t *args) {
    mhc_pipe_t p;
    DSV4_TRY(mhc_gates_setup(desc, args, 0, &p));
    if (p.T) mhc_pipe_ref_run(&p);
    return DSV4_STATUS_SUCCESS;
}
