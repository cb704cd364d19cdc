/* dsv4_mhc_fn_split: host side (validate, launch the tensor-core route's fn split, proj_tc_kernel.cu). */
#include "common/error.h"
#include "mhc/gates_config.h"
#include "mhc/mhc_host.h"

static const char *op = "mhc_fn_split";

dsv4_status_t dsv4_mhc_fn_split_check(const dsv4_mhc_fn_split_desc_t *d) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(mhc_check_shape(op, 0, d->hidden));
    return mhc_check_flag(op, "broadcast", d->broadcast);
}

dsv4_status_t dsv4_mhc_fn_split_workspace_size(const dsv4_mhc_fn_split_desc_t *d, size_t *bytes) {
    DSV4_TRY(dsv4_mhc_fn_split_check(d));
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t mhc_fn_split_setup(const dsv4_mhc_fn_split_desc_t *d, const dsv4_mhc_fn_split_args_t *a, int run,
                                 int64_t *K) {
    DSV4_TRY(dsv4_mhc_fn_split_check(d));
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    *K = MHC_FN_K(d->broadcast != 0, d->hidden);
    mhc_args_check_t c = {op, run, 0, {{0}}};
    DSV4_TRY(mhc_arg(&c, "fn", a->fn, 1, 16, (size_t)(24 * *K) * sizeof(float), 0));
    DSV4_TRY(mhc_arg(&c, "fn_split", a->fn_split, 1, 16, MHC_WS_FN_HL_BYTES(*K), 1));
    return mhc_check_overlaps(&c);
}

dsv4_status_t dsv4_mhc_fn_split(const dsv4_mhc_fn_split_desc_t *desc, const dsv4_mhc_fn_split_args_t *args,
                                void *workspace, size_t workspace_bytes, dsv4_stream_t stream) {
    int64_t K = 0;
    DSV4_TRY(mhc_fn_split_setup(desc, args, 1, &K));
    (void)workspace;
    (void)workspace_bytes;
    DSV4_TRY(dsv4_check_stream(op, stream));
    return mhc_launch_fn_split(args->fn, args->fn_split, K, stream);
}
