/*
 * The gates pipeline shared by dsv4_mhc_gates, dsv4_mhc_pre and dsv4_mhc_seam: the
 * pointer checks every variant has (and those pre and seam share for the collapse), the
 * tensor-core route's offset limit, and the launches on the caller's stream: the one
 * small-T kernel, or the tensor-core projection pass followed by the gates epilogue,
 * preceded by the fn split (fn's hi / lo rows into the workspace) unless the call passes
 * fn_split.
 */
#include <stdint.h>

#include "common/call_tag.h"
#include "common/error.h"
#include "mhc/gates_config.h"
#include "mhc/mhc_host.h"

dsv4_status_t mhc_pipe_args(mhc_args_check_t *c, const mhc_pipe_t *p, const char *post_name, const char *comb_name,
                            const char *pre_name) {
    const int64_t T = p->T, K = MHC_FN_K(p->prod == MHC_PROD_BCAST, p->H);
    DSV4_TRY(mhc_arg(c, "fn", p->fn, 1, 16, (size_t)(24 * K) * sizeof(float), 0));
    DSV4_TRY(mhc_arg(c, "scale", p->scale, 1, 4, 3 * sizeof(float), 0));
    DSV4_TRY(mhc_arg(c, "base", p->base, 1, 4, 24 * sizeof(float), 0));
    DSV4_TRY(mhc_arg(c, "fn_split", p->fn_hl, 0, 16, MHC_WS_FN_HL_BYTES(K), 0));
    DSV4_TRY(mhc_arg(c, "sqrsum", p->sqrsum_in, 0, 4, (size_t)T * sizeof(float), 0));
    DSV4_TRY(mhc_arg(c, post_name, p->post_out, 1, 4, (size_t)T * 4 * sizeof(float), 1));
    DSV4_TRY(mhc_arg(c, comb_name, p->comb_out, 1, 4, (size_t)T * 16 * sizeof(float), 1));
    DSV4_TRY(mhc_arg(c, pre_name, p->pre_out, 1, 4, (size_t)T * 4 * sizeof(float), 1));
    return mhc_arg(c, "mix", p->mix_out, 0, 4, (size_t)T * 24 * sizeof(float), 1);
}

dsv4_status_t mhc_collapse_args(mhc_args_check_t *c, const mhc_pipe_t *p, int residual_out_required) {
    const int64_t T = p->T, H = p->H;
    DSV4_TRY(mhc_arg(c, "pre_mix", p->pre_mix, 0, 16, (size_t)T * 4 * sizeof(float), 0));
    DSV4_TRY(mhc_arg(c, "norm_weight", p->norm_w, 0, 16, (size_t)H * 2, 0));
    DSV4_TRY(mhc_arg_rows(c, "residual_out", p->res_out, residual_out_required, T, p->res_out_stride, 4 * H, 1));
    DSV4_TRY(mhc_arg_rows(c, "layer_input", p->li, 1, T, p->li_stride, H, 1));
    return mhc_arg_rows(c, "aux", p->aux, 0, T, p->aux_stride, H, 1);
}

dsv4_status_t mhc_check_tc_offsets(const char *op, const mhc_pipe_t *p) {
    const int64_t T = p->T, H = p->H, rl = p->prod == MHC_PROD_BCAST ? H : 4 * H;
    const struct {
        const char *what;
        const void *ptr;
        int64_t stride, row;
    } span[] = {{"x", p->prod == MHC_PROD_POST ? p->x : NULL, p->x_stride, H},
                {"residual", p->res, p->res_stride, rl},
                {"residual_out", p->res_out, p->res_out_stride, 4 * H},
                {"layer_input", p->li, p->li_stride, H},
                {"aux", p->aux, p->aux_stride, H}};
    for (size_t i = 0; i < sizeof span / sizeof span[0]; ++i) {
        const int64_t last = (T - 1) * span[i].stride + span[i].row;
        if (span[i].ptr && last > (int64_t)UINT32_MAX)
            return dsv4_fail(DSV4_STATUS_UNSUPPORTED, op,
                             "%s spans %lld elements (T = %lld, stride %lld); the tensor-core route addresses at most "
                             "2^32 - 1 elements per tensor: split the call into fewer tokens",
                             span[i].what, (long long)last, (long long)T, (long long)span[i].stride);
    }
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t mhc_pipe_launch(const char *op, mhc_pipe_t *p, void *ws, size_t ws_bytes, dsv4_stream_t stream) {
    DSV4_TRY(dsv4_check_workspace(op, p->plan.workspace_bytes, ws, ws_bytes));
    if (p->plan.workspace_bytes) DSV4_TRY(dsv4_check_align(op, "workspace", ws, 16));
    DSV4_TRY(dsv4_check_stream(op, stream));
    if (p->T == 0) return DSV4_STATUS_SUCCESS;
    p->ws = (float *)ws;
    if (p->plan.route == DSV4_MHC_ROUTE_SMALL_T) {
        p->tag = dsv4_call_tag(p->post_out, ws, p->T, p->H);
        return mhc_launch_small(p, stream);
    }
    DSV4_TRY(mhc_check_tc_offsets(op, p));
    /* the projection pass's B operand: the caller's pre-split fn, or fn split into the workspace now */
    if (!p->fn_hl) {
        uint16_t *hl = (uint16_t *)((char *)ws + mhc_fn_hl_offset(&p->plan, p->T));
        DSV4_TRY(mhc_launch_fn_split(p->fn, hl, MHC_FN_K(p->prod == MHC_PROD_BCAST, p->H), stream));
        p->fn_hl = hl;
    }
    DSV4_TRY(mhc_launch_proj_tc(p, stream));
    return mhc_launch_epilogue(p, stream);
}
