/* dsv4_mhc_collapse: host side (validate, launch). The formula is in include/dsv4/mhc.h. */
#include "common/error.h"
#include "mhc/mhc_host.h"

static const char *op = "mhc_collapse";

dsv4_status_t dsv4_mhc_collapse_check(const dsv4_mhc_collapse_desc_t *d) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(mhc_check_shape(op, d->tokens, d->hidden));
    DSV4_TRY(mhc_check_variant(op, d->variant));
    DSV4_TRY(mhc_check_eps(op, "norm_eps", d->norm_eps));
    const int64_t H = d->hidden;
    int64_t s;
    DSV4_TRY(mhc_stride(op, "residual_stride", d->residual_stride, d->tokens, 4 * H, &s));
    DSV4_TRY(mhc_stride(op, "out_stride", d->out_stride, d->tokens, H, &s));
    return mhc_stride(op, "aux_stride", d->aux_stride, d->tokens, H, &s);
}

dsv4_status_t dsv4_mhc_collapse_workspace_size(const dsv4_mhc_collapse_desc_t *d, size_t *bytes) {
    DSV4_TRY(dsv4_mhc_collapse_check(d));
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

typedef struct {
    int64_t rs, os, as;
} mhc_collapse_strides_t;

static dsv4_status_t mhc_collapse_setup(const dsv4_mhc_collapse_desc_t *d, const dsv4_mhc_collapse_args_t *a, int run,
                                        mhc_collapse_strides_t *st) {
    DSV4_TRY(dsv4_mhc_collapse_check(d));
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    const int64_t T = d->tokens, H = d->hidden;
    mhc_stride(op, "residual_stride", d->residual_stride, d->tokens, 4 * H, &st->rs);
    mhc_stride(op, "out_stride", d->out_stride, d->tokens, H, &st->os);
    mhc_stride(op, "aux_stride", d->aux_stride, d->tokens, H, &st->as);
    if (T == 0) return DSV4_STATUS_SUCCESS;
    mhc_args_check_t c = {op, run, 0, {{0}}};
    DSV4_TRY(mhc_arg_rows(&c, "residual", a->residual, 1, T, st->rs, 4 * H, 0));
    DSV4_TRY(mhc_arg(&c, "pre_mix", a->pre_mix, 0, 16, (size_t)T * 4 * sizeof(float), 0));
    DSV4_TRY(mhc_arg(&c, "norm_weight", a->norm_weight, 0, 16, (size_t)H * 2, 0));
    DSV4_TRY(mhc_arg_rows(&c, "out", a->out, 1, T, st->os, H, 1));
    DSV4_TRY(mhc_arg_rows(&c, "aux", a->aux, 0, T, st->as, H, 1));
    return mhc_check_overlaps(&c);
}

dsv4_status_t dsv4_mhc_collapse(const dsv4_mhc_collapse_desc_t *desc, const dsv4_mhc_collapse_args_t *args,
                                void *workspace, size_t workspace_bytes, dsv4_stream_t stream) {
    mhc_collapse_strides_t st;
    DSV4_TRY(mhc_collapse_setup(desc, args, 1, &st));
    (void)workspace;
    (void)workspace_bytes;
    DSV4_TRY(dsv4_check_stream(op, stream));
    if (desc->tokens == 0) return DSV4_STATUS_SUCCESS;
    return mhc_launch_collapse(args, desc->tokens, desc->hidden, desc->variant == DSV4_MHC_V41, desc->norm_eps, st.rs,
                               st.os, st.as, stream);
}

dsv4_status_t dsv4_mhc_collapse_ref(const dsv4_mhc_collapse_desc_t *desc, const dsv4_mhc_collapse_args_t *args) {
    mhc_collapse_strides_t st;
    DSV4_TRY(mhc_collapse_setup(desc, args, 0, &st));
    for (int64_t t = 0; t < desc->tokens; ++t)
        mhc_collapse_ref_token(args->residual + t * st.rs, desc->hidden, args->pre_mix ? args->pre_mix + 4 * t : NULL,
                               args->norm_weight, desc->norm_eps, desc->variant == DSV4_MHC_V41, args->out + t * st.os,
                               args->aux ? args->aux + t * st.as : NULL);
    return DSV4_STATUS_SUCCESS;
}
