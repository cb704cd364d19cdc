/* Host-side checks shared by every mhc operator: shapes, scalars, strides, pointers,
 * alignment, and overlap between outputs and the other tensors of a call. */
#include <math.h>

#include "common/error.h"
#include "mhc/gates_config.h"
#include "mhc/mhc_host.h"

dsv4_status_t mhc_check_shape(const char *op, int64_t tokens, int64_t hidden) {
    DSV4_TRY(dsv4_check_range(op, "tokens", tokens, 0, (int64_t)1 << 24));
    DSV4_TRY(dsv4_check_range(op, "hidden", hidden, 128, MHC_MAX_HIDDEN));
    if (hidden % 128 != 0)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "hidden = %lld is not a multiple of 128 (the projection tiles 128 channels)",
                         (long long)hidden);
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t mhc_check_variant(const char *op, int32_t variant) {
    if (variant == DSV4_MHC_V41 || variant == DSV4_MHC_V4) return DSV4_STATUS_SUCCESS;
    return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "variant = %d is neither DSV4_MHC_V41 (0) nor DSV4_MHC_V4 (1)",
                     (int)variant);
}

dsv4_status_t mhc_check_route(const char *op, int32_t route) {
    if (route >= DSV4_MHC_ROUTE_AUTO && route <= DSV4_MHC_ROUTE_BATCH_INVARIANT) return DSV4_STATUS_SUCCESS;
    return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "route = %d is not a dsv4_mhc_route_t (0 .. 3)", (int)route);
}

dsv4_status_t mhc_check_flag(const char *op, const char *what, int32_t v) {
    return dsv4_check_range(op, what, v, 0, 1);
}

dsv4_status_t mhc_check_eps(const char *op, const char *what, float v) {
    if (isfinite(v) && v >= 0.0f) return DSV4_STATUS_SUCCESS;
    return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "%s = %g must be finite and >= 0", what, (double)v);
}

dsv4_status_t mhc_check_gate_params(const char *op, const dsv4_mhc_gate_params_t *g) {
    DSV4_TRY(mhc_check_eps(op, "gate.rms_eps", g->rms_eps));
    DSV4_TRY(mhc_check_eps(op, "gate.pre_eps", g->pre_eps));
    DSV4_TRY(mhc_check_eps(op, "gate.sinkhorn_eps", g->sinkhorn_eps));
    if (!isfinite(g->post_mult))
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "gate.post_mult = %g is not finite", (double)g->post_mult);
    return dsv4_check_range(op, "gate.sinkhorn_iters", g->sinkhorn_iters, 1, 100);
}

dsv4_status_t mhc_stride(const char *op, const char *what, int64_t stride, int64_t tokens, int64_t row, int64_t *out) {
    DSV4_TRY(dsv4_given_stride(op, what, stride, tokens, row, &stride));
    if (stride < row || stride > ((int64_t)1 << 40))
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "%s = %lld is outside [%lld (the row), 2^40]", what,
                         (long long)stride, (long long)row);
    if (stride % 8 != 0)
        return dsv4_fail(DSV4_STATUS_MISALIGNED, op, "%s = %lld is not a multiple of 8 elements (16-byte rows)", what,
                         (long long)stride);
    *out = stride;
    return DSV4_STATUS_SUCCESS;
}

size_t mhc_rows_bytes(int64_t T, int64_t stride, int64_t row, size_t elem) {
    return T > 0 ? (size_t)((T - 1) * stride + row) * elem : 0;
}

dsv4_status_t mhc_arg(mhc_args_check_t *c, const char *what, const void *p, int required, int64_t align, size_t bytes,
                      int is_output) {
    if (!p) {
        if (required) return dsv4_check_ptr(c->op, what, p);
        return DSV4_STATUS_SUCCESS;
    }
    if (c->run && align > 1) DSV4_TRY(dsv4_check_align(c->op, what, p, align));
    if (c->n >= (int)(sizeof c->span / sizeof c->span[0]))
        return dsv4_fail(DSV4_STATUS_INTERNAL, c->op, "too many tensors to check (%d)", c->n);
    mhc_span_t *s = &c->span[c->n++];
    s->what = what;
    s->p = p;
    s->bytes = bytes;
    s->is_output = is_output;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t mhc_check_overlaps(const mhc_args_check_t *c) {
    const mhc_span_t *s = c->span;
    for (int i = 0; i < c->n; ++i) {
        if (!s[i].is_output || !s[i].bytes) continue;
        uintptr_t a0 = (uintptr_t)s[i].p, a1 = a0 + s[i].bytes;
        for (int j = 0; j < c->n; ++j) {
            /* each pair of outputs is reported once, from the earlier one */
            if (j == i || !s[j].bytes || (s[j].is_output && j < i)) continue;
            uintptr_t b0 = (uintptr_t)s[j].p, b1 = b0 + s[j].bytes;
            if (a0 < b1 && b0 < a1)
                return dsv4_fail(DSV4_STATUS_INVALID_VALUE, c->op,
                                 "output %s overlaps %s %s; outputs must be disjoint from every other tensor "
                                 "(no in-place update)",
                                 s[i].what, s[j].is_output ? "output" : "input", s[j].what);
        }
    }
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t mhc_arg_rows(mhc_args_check_t *c, const char *what, const void *p, int required, int64_t T,
                           int64_t stride, int64_t row, int is_output) {
    return mhc_arg(c, what, p, required, 16, mhc_rows_bytes(T, stride, row, 2), is_output);
}
