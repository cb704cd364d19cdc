/* Comparators: bytewise, and tolerance checks with NaN/inf positions, max abs/rel error
 * with the worst index, relative L2 and NMSE. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "harness.h"

size_t th_cmp_bytes(th_ctx_t *t, const char *what, const void *got, const void *want, size_t n) {
    const uint8_t *g = got, *w = want;
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        if (g[i] == w[i]) continue;
        if (bad < 8) th_fail(t, __FILE__, __LINE__, "%s: byte %zu is 0x%02x, expected 0x%02x", what, i, g[i], w[i]);
        ++bad;
    }
    if (bad) th_fail(t, __FILE__, __LINE__, "%s: %zu of %zu bytes differ", what, bad, n);
    return bad;
}

th_err_t th_err_f64(const double *got, const double *ref, size_t n) {
    th_err_t e = {0};
    e.n = n;
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; ++i) {
        double g = got[i], r = ref[i];
        if (isnan(g) != isnan(r)) {
            e.nan_mismatch++;
            continue;
        }
        if (isnan(g)) continue;
        if (isinf(g) || isinf(r)) {
            if (g != r) e.inf_mismatch++;
            continue;
        }
        double d = fabs(g - r);
        if (fabs(r) > e.max_ref) e.max_ref = fabs(r);
        if (d > e.max_abs) {
            e.max_abs = d;
            e.worst_abs = i;
        }
        double rel = d / (fabs(r) > 1e-30 ? fabs(r) : 1e-30);
        if (rel > e.max_rel) {
            e.max_rel = rel;
            e.worst_rel = i;
        }
        num += d * d;
        den += r * r;
    }
    e.nmse = den > 0 ? num / den : (num > 0 ? INFINITY : 0.0);
    e.rel_l2 = sqrt(e.nmse);
    return e;
}

int th_check_err(th_ctx_t *t, const char *what, th_err_t e, double abs_tol, double rel_l2_tol) {
    th_note(t, "%s: n=%zu max_abs=%.3e (at %zu) max_rel=%.3e (at %zu) rel_l2=%.3e nmse=%.3e max|ref|=%.3e", what, e.n,
            e.max_abs, e.worst_abs, e.max_rel, e.worst_rel, e.rel_l2, e.nmse, e.max_ref);
    int ok = 1;
    if (e.nan_mismatch || e.inf_mismatch) {
        th_fail(t, __FILE__, __LINE__, "%s: NaN positions differ at %zu, inf at %zu places", what, e.nan_mismatch,
                e.inf_mismatch);
        ok = 0;
    }
    if (!(e.max_abs <= abs_tol)) {
        th_fail(t, __FILE__, __LINE__, "%s: max abs error %.3e at %zu exceeds %.3e", what, e.max_abs, e.worst_abs,
                abs_tol);
        ok = 0;
    }
    if (!(e.rel_l2 <= rel_l2_tol)) {
        th_fail(t, __FILE__, __LINE__, "%s: relative L2 error %.3e exceeds %.3e", what, e.rel_l2, rel_l2_tol);
        ok = 0;
    }
    return ok;
}

void th_bf16_to_f64(const uint16_t *src, double *dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = (double)dsv4_bf16_to_f32(src[i]);
}

void th_f32_to_f64(const float *src, double *dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = (double)src[i];
}

void th_expect_error(th_ctx_t *t, const char *call, const char *op, const char *field, const char *value) {
    const char *msg = dsv4_last_error();
    const char *want[3] = {op, field, value};
    for (int i = 0; i < 3; ++i)
        TH_CHECK(t, !want[i] || strstr(msg, want[i]), "%s: message '%s' should mention '%s'", call, msg, want[i]);
}

void th_rotary_table(float *cs, int64_t max_position) {
    for (int64_t p = 0; p < max_position; ++p)
        for (int i = 0; i < 32; ++i) {
            const double ang = (double)p * pow(10000.0, -(double)i / 32.0);
            cs[p * 64 + i] = (float)cos(ang);
            cs[p * 64 + 32 + i] = (float)sin(ang);
        }
}
