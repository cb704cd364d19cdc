/* dsv4_mhc_fn_bcast: host side (validate, launch). */
#include "common/error.h"
#include "mhc/mhc_host.h"

static const char *op = "mhc_fn_bcast";

dsv4_status_t dsv4_mhc_fn_bcast_check(const dsv4_mhc_fn_bcast_desc_t *d) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    return mhc_check_shape(op, 0, d->hidden);
}

dsv4_status_t dsv4_mhc_fn_bcast_workspace_size(const dsv4_mhc_fn_bcast_desc_t *d, size_t *bytes) {
    DSV4_TRY(dsv4_mhc_fn_bcast_check(d));
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t mhc_fn_bcast_setup(const dsv4_mhc_fn_bcast_desc_t *d, const dsv4_mhc_fn_bcast_args_t *a, int run) {
    DSV4_TRY(dsv4_mhc_fn_bcast_check(d));
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    mhc_args_check_t c = {op, run, 0, {{0}}};
    DSV4_TRY(mhc_arg(&c, "fn", a->fn, 1, 16, (size_t)(24 * 4 * d->hidden) * sizeof(float), 0));
    DSV4_TRY(mhc_arg(&c, "fn_bcast", a->fn_bcast, 1, 16, (size_t)(24 * d->hidden) * sizeof(float), 1));
    return mhc_check_overlaps(&c);
}

dsv4_status_t dsv4_mhc_fn_bcast(const dsv4_mhc_fn_bcast_desc_t *desc, const dsv4_mhc_fn_bcast_args_t *args,
                                void *workspace, size_t workspace_bytes, dsv4_stream_t stream) {
    DSV4_TRY(mhc_fn_bcast_setup(desc, args, 1));
    (void)workspace;
    (void)workspace_bytes;
    DSV4_TRY(dsv4_check_stream(op, stream));
    return mhc_launch_fn_bcast(args->fn, args->fn_bcast, desc->hidden, stream);
}
