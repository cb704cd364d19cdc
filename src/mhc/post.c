/* dsv4_mhc_post: host side (validate, launch). The formula is in include/dsv4/mhc.h. */
#include <string.h>

#include "common/error.h"
#include "mhc/mhc_host.h"

static const char *op = "mhc_post";

dsv4_status_t dsv4_mhc_post_check(const dsv4_mhc_post_desc_t *d) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(mhc_check_shape(op, d->tokens, d->hidden));
    const int64_t H = d->hidden;
    int64_t s;
    DSV4_TRY(mhc_stride(op, "x_stride", d->x_stride, d->tokens, H, &s));
    DSV4_TRY(mhc_stride(op, "residual_stride", d->residual_stride, d->tokens, 4 * H, &s));
    return mhc_stride(op, "residual_out_stride", d->residual_out_stride, d->tokens, 4 * H, &s);
}

dsv4_status_t dsv4_mhc_post_workspace_size(const dsv4_mhc_post_desc_t *d, size_t *bytes) {
    DSV4_TRY(dsv4_mhc_post_check(d));
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

typedef struct {
    int64_t xs, rs, ros;
} mhc_post_strides_t;

static dsv4_status_t mhc_post_setup(const dsv4_mhc_post_desc_t *d, const dsv4_mhc_post_args_t *a, int run,
                                    mhc_post_strides_t *st) {
    DSV4_TRY(dsv4_mhc_post_check(d));
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    const int64_t T = d->tokens, H = d->hidden;
    mhc_stride(op, "x_stride", d->x_stride, d->tokens, H, &st->xs);
    mhc_stride(op, "residual_stride", d->residual_stride, d->tokens, 4 * H, &st->rs);
    mhc_stride(op, "residual_out_stride", d->residual_out_stride, d->tokens, 4 * H, &st->ros);
    if (T == 0) return DSV4_STATUS_SUCCESS;
    mhc_args_check_t c = {op, run, 0, {{0}}};
    DSV4_TRY(mhc_arg_rows(&c, "x", a->x, 1, T, st->xs, H, 0));
    DSV4_TRY(mhc_arg_rows(&c, "residual", a->residual, 1, T, st->rs, 4 * H, 0));
    DSV4_TRY(mhc_arg(&c, "post", a->post, 1, 16, (size_t)T * 4 * sizeof(float), 0));
    DSV4_TRY(mhc_arg(&c, "comb", a->comb, 1, 16, (size_t)T * 16 * sizeof(float), 0));
    DSV4_TRY(mhc_arg_rows(&c, "residual_out", a->residual_out, 1, T, st->ros, 4 * H, 1));
    DSV4_TRY(mhc_arg(&c, "sqrsum", a->sqrsum, 0, 4, (size_t)T * sizeof(float), 1));
    return mhc_check_overlaps(&c);
}

dsv4_status_t dsv4_mhc_post(const dsv4_mhc_post_desc_t *desc, const dsv4_mhc_post_args_t *args, void *workspace,
                            size_t workspace_bytes, dsv4_stream_t stream) {
    mhc_post_strides_t st;
    DSV4_TRY(mhc_post_setup(desc, args, 1, &st));
    (void)workspace;
    (void)workspace_bytes;
    DSV4_TRY(dsv4_check_stream(op, stream));
    if (desc->tokens == 0) return DSV4_STATUS_SUCCESS;
    return mhc_launch_post(args, desc->tokens, desc->hidden, st.xs, st.rs, st.ros, stream);
}

dsv4_status_t dsv4_mhc_post_ref(const dsv4_mhc_post_desc_t *desc, const dsv4_mhc_post_args_t *args) {
    mhc_post_strides_t st;
    DSV4_TRY(mhc_post_setup(desc, args, 0, &st));
    mhc_post_ref_run(args, desc->tokens, desc->hidden, st.xs, st.rs, st.ros);
    return DSV4_STATUS_SUCCESS;
}
