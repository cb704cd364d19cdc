/*
 * Bad input for every public mhc function: NULL descriptor / args / pointers, negative
 * and unsupported sizes, bad strides, misaligned pointers (run calls), overlapping
 * outputs, workspace, stream. Each must return a non-success status and a message that
 * names the operator and the field. The pointers here are fake, 16-byte aligned and far
 * apart: validation must reject every case before anything could touch them. (The GPU
 * half, test_bad_input_gpu, checks on real buffers that nothing is written.)
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "mhc_test.h"
#include "test_mhc.h"

#define FAKE(i) ((void *)(uintptr_t)(0x100000000000ull + ((uint64_t)(i) << 36)))
#define SKEW(p, bytes) ((void *)((char *)(p) + (bytes)))
static const dsv4_stream_t fake_stream = DSV4_STREAM((void *)0x1);
static void *const fake_ws = FAKE(60);
static const size_t big_ws = (size_t)1 << 34;

static void expect(th_ctx_t *t, dsv4_status_t got, dsv4_status_t want, const char *op, const char *needle,
                   const char *what) {
    const char *msg = dsv4_last_error();
    TH_CHECK(t, got == want, "%s: returned %s, expected %s (%s)", what, dsv4_status_string(got),
             dsv4_status_string(want), msg);
    TH_CHECK(t, strstr(msg, op) && strstr(msg, needle), "%s: message '%s' should name '%s' and '%s'", what, msg, op,
             needle);
}

/* ---- seam ---------------------------------------------------------------------------------- */
static void seam_valid(dsv4_mhc_seam_desc_t *d, dsv4_mhc_seam_args_t *a) {
    const dsv4_mhc_seam_desc_t d0 = {12,       5120,     DSV4_MHC_V41, 0,   DSV4_MHC_GATE_PARAMS_V41, 1e-20f, 5120,
                                     4 * 5120, 4 * 5120, 5120,         5120};
    const dsv4_mhc_seam_args_t a0 = {FAKE(1),  FAKE(2),  FAKE(3),  FAKE(4),  FAKE(5),  FAKE(6),
                                     FAKE(7),  FAKE(8),  FAKE(9),  FAKE(10), FAKE(11), FAKE(12),
                                     FAKE(13), FAKE(14), FAKE(15), FAKE(16), NULL};
    *d = d0;
    *a = a0;
}

static void seam_case(th_ctx_t *t, const dsv4_mhc_seam_desc_t *d, const dsv4_mhc_seam_args_t *a, dsv4_status_t want,
                      const char *needle, int ref_too, const char *what) {
    expect(t, dsv4_mhc_seam(d, a, fake_ws, big_ws, fake_stream), want, "mhc_seam", needle, what);
    if (ref_too) expect(t, dsv4_mhc_seam_ref(d, a), want, "mhc_seam", needle, what);
}

#define SEAM_DESC(field, value, status, needle)                                                                        \
    do {                                                                                                               \
        seam_valid(&d, &a);                                                                                            \
        d.field = value;                                                                                               \
        seam_case(t, &d, &a, status, needle, 1, #field " = " #value);                                                  \
    } while (0)
#define SEAM_ARG(field, value, status, needle, ref_too)                                                                \
    do {                                                                                                               \
        seam_valid(&d, &a);                                                                                            \
        a.field = value;                                                                                               \
        seam_case(t, &d, &a, status, needle, ref_too, #field " = " #value);                                            \
    } while (0)

static void bad_seam(th_ctx_t *t) {
    dsv4_mhc_seam_desc_t d;
    dsv4_mhc_seam_args_t a;
    seam_valid(&d, &a);
    TH_OK(t, dsv4_mhc_seam_check(&d));
    size_t ws = 0;
    TH_OK(t, dsv4_mhc_seam_workspace_size(&d, &ws));
    TH_CHECK(t, ws >= 8 * 12 * 26 * 4, "workspace %zu", ws);
    expect(t, dsv4_mhc_seam(NULL, &a, fake_ws, big_ws, fake_stream), DSV4_STATUS_NULL_POINTER, "mhc_seam", "desc",
           "NULL desc");
    expect(t, dsv4_mhc_seam(&d, NULL, fake_ws, big_ws, fake_stream), DSV4_STATUS_NULL_POINTER, "mhc_seam", "args",
           "NULL args");
    expect(t, dsv4_mhc_seam_ref(NULL, &a), DSV4_STATUS_NULL_POINTER, "mhc_seam", "desc", "ref NULL desc");
    expect(t, dsv4_mhc_seam_ref(&d, NULL), DSV4_STATUS_NULL_POINTER, "mhc_seam", "args", "ref NULL args");
    expect(t, dsv4_mhc_seam_check(NULL), DSV4_STATUS_NULL_POINTER, "mhc_seam", "desc", "check NULL");
    expect(t, dsv4_mhc_seam_workspace_size(NULL, &ws), DSV4_STATUS_NULL_POINTER, "mhc_seam", "desc", "ws NULL desc");
    expect(t, dsv4_mhc_seam_workspace_size(&d, NULL), DSV4_STATUS_NULL_POINTER, "mhc_seam", "bytes", "ws NULL bytes");

    SEAM_DESC(tokens, -1, DSV4_STATUS_INVALID_VALUE, "tokens");
    SEAM_DESC(tokens, (int64_t)1 << 30, DSV4_STATUS_INVALID_VALUE, "tokens");
    SEAM_DESC(hidden, -128, DSV4_STATUS_INVALID_VALUE, "hidden");
    SEAM_DESC(hidden, 0, DSV4_STATUS_INVALID_VALUE, "hidden");
    SEAM_DESC(hidden, 5000, DSV4_STATUS_INVALID_VALUE, "hidden");
    SEAM_DESC(hidden, 32768, DSV4_STATUS_INVALID_VALUE, "hidden");
    SEAM_DESC(variant, 7, DSV4_STATUS_INVALID_VALUE, "variant");
    SEAM_DESC(route, -1, DSV4_STATUS_INVALID_VALUE, "route");
    SEAM_DESC(gate.sinkhorn_iters, 0, DSV4_STATUS_INVALID_VALUE, "sinkhorn_iters");
    SEAM_DESC(gate.rms_eps, -1.0f, DSV4_STATUS_INVALID_VALUE, "rms_eps");
    SEAM_DESC(gate.pre_eps, NAN, DSV4_STATUS_INVALID_VALUE, "pre_eps");
    SEAM_DESC(gate.sinkhorn_eps, -1e-6f, DSV4_STATUS_INVALID_VALUE, "sinkhorn_eps");
    SEAM_DESC(gate.post_mult, INFINITY, DSV4_STATUS_INVALID_VALUE, "post_mult");
    SEAM_DESC(norm_eps, -1.0f, DSV4_STATUS_INVALID_VALUE, "norm_eps");
    SEAM_DESC(x_stride, 100, DSV4_STATUS_INVALID_VALUE, "x_stride");
    SEAM_DESC(x_stride, -8, DSV4_STATUS_INVALID_VALUE, "x_stride");
    SEAM_DESC(residual_stride, 4 * 5120 + 4, DSV4_STATUS_MISALIGNED, "residual_stride");
    SEAM_DESC(residual_out_stride, 5120, DSV4_STATUS_INVALID_VALUE, "residual_out_stride");
    SEAM_DESC(layer_input_stride, 5124, DSV4_STATUS_MISALIGNED, "layer_input_stride");
    SEAM_DESC(aux_stride, -1, DSV4_STATUS_INVALID_VALUE, "aux_stride");
    seam_valid(&d, &a);
    d.hidden = 1152;
    d.route = DSV4_MHC_ROUTE_SMALL_T;
    seam_case(t, &d, &a, DSV4_STATUS_UNSUPPORTED, "SMALL_T", 1, "forced small-T at H = 1152");
    /* the tensor-core route's 32-bit row offsets: the residual's last element at 15 x 2^29
     * + 4H > 2^32 - 1 is refused by the run call (the fake tensors are 2^36 bytes apart, so
     * the 16 GB span overlaps nothing); the reference has no such limit */
    seam_valid(&d, &a);
    d.tokens = 16;
    d.residual_stride = (int64_t)1 << 29;
    seam_case(t, &d, &a, DSV4_STATUS_UNSUPPORTED, "2^32", 0, "residual spanning more than 2^32 elements");

    SEAM_ARG(x, NULL, DSV4_STATUS_NULL_POINTER, "x", 1);
    SEAM_ARG(residual, NULL, DSV4_STATUS_NULL_POINTER, "residual", 1);
    SEAM_ARG(post, NULL, DSV4_STATUS_NULL_POINTER, "post", 1);
    SEAM_ARG(comb, NULL, DSV4_STATUS_NULL_POINTER, "comb", 1);
    SEAM_ARG(fn, NULL, DSV4_STATUS_NULL_POINTER, "fn", 1);
    SEAM_ARG(scale, NULL, DSV4_STATUS_NULL_POINTER, "scale", 1);
    SEAM_ARG(base, NULL, DSV4_STATUS_NULL_POINTER, "base", 1);
    SEAM_ARG(residual_out, NULL, DSV4_STATUS_NULL_POINTER, "residual_out", 1);
    SEAM_ARG(post_out, NULL, DSV4_STATUS_NULL_POINTER, "post_out", 1);
    SEAM_ARG(comb_out, NULL, DSV4_STATUS_NULL_POINTER, "comb_out", 1);
    SEAM_ARG(pre_out, NULL, DSV4_STATUS_NULL_POINTER, "pre_out", 1);
    SEAM_ARG(layer_input, NULL, DSV4_STATUS_NULL_POINTER, "layer_input", 1);
    SEAM_ARG(x, SKEW(FAKE(1), 2), DSV4_STATUS_MISALIGNED, "x", 0);
    SEAM_ARG(residual, SKEW(FAKE(2), 8), DSV4_STATUS_MISALIGNED, "residual", 0);
    SEAM_ARG(post, SKEW(FAKE(3), 4), DSV4_STATUS_MISALIGNED, "post", 0);
    SEAM_ARG(comb, SKEW(FAKE(4), 4), DSV4_STATUS_MISALIGNED, "comb", 0);
    SEAM_ARG(fn, SKEW(FAKE(5), 4), DSV4_STATUS_MISALIGNED, "fn", 0);
    SEAM_ARG(scale, SKEW(FAKE(6), 2), DSV4_STATUS_MISALIGNED, "scale", 0);
    SEAM_ARG(pre_mix, SKEW(FAKE(8), 4), DSV4_STATUS_MISALIGNED, "pre_mix", 0);
    SEAM_ARG(norm_weight, SKEW(FAKE(9), 2), DSV4_STATUS_MISALIGNED, "norm_weight", 0);
    SEAM_ARG(residual_out, SKEW(FAKE(10), 2), DSV4_STATUS_MISALIGNED, "residual_out", 0);
    SEAM_ARG(post_out, SKEW(FAKE(11), 1), DSV4_STATUS_MISALIGNED, "post_out", 0);
    SEAM_ARG(layer_input, SKEW(FAKE(14), 8), DSV4_STATUS_MISALIGNED, "layer_input", 0);
    SEAM_ARG(aux, SKEW(FAKE(15), 4), DSV4_STATUS_MISALIGNED, "aux", 0);
    SEAM_ARG(mix, SKEW(FAKE(16), 2), DSV4_STATUS_MISALIGNED, "mix", 0);
    /* overlaps: in place, and two outputs on one buffer */
    SEAM_ARG(residual_out, FAKE(2), DSV4_STATUS_INVALID_VALUE, "residual_out overlaps", 1);
    SEAM_ARG(layer_input, SKEW(FAKE(1), 4096), DSV4_STATUS_INVALID_VALUE, "layer_input overlaps", 1);
    SEAM_ARG(post_out, FAKE(3), DSV4_STATUS_INVALID_VALUE, "post_out overlaps", 1);
    SEAM_ARG(aux, FAKE(14), DSV4_STATUS_INVALID_VALUE, "overlaps", 1);
    SEAM_ARG(mix, FAKE(5), DSV4_STATUS_INVALID_VALUE, "mix overlaps", 1);
    /* the optional pre-split fn: 16-byte aligned on run calls, an input no output may overlap */
    SEAM_ARG(fn_split, SKEW(FAKE(17), 8), DSV4_STATUS_MISALIGNED, "fn_split", 0);
    SEAM_ARG(fn_split, SKEW(FAKE(10), 4096), DSV4_STATUS_INVALID_VALUE, "residual_out overlaps input fn_split", 1);
    SEAM_ARG(fn_split, FAKE(16), DSV4_STATUS_INVALID_VALUE, "mix overlaps input fn_split", 1);
    seam_valid(&d, &a);
    d.variant = DSV4_MHC_V4;
    seam_case(t, &d, &a, DSV4_STATUS_INVALID_VALUE, "pre_mix", 1, "pre_mix with V4");

    seam_valid(&d, &a);
    expect(t, dsv4_mhc_seam(&d, &a, fake_ws, ws - 1, fake_stream), DSV4_STATUS_WORKSPACE_TOO_SMALL, "mhc_seam",
           "workspace", "workspace too small");
    expect(t, dsv4_mhc_seam(&d, &a, NULL, big_ws, fake_stream), DSV4_STATUS_NULL_POINTER, "mhc_seam", "workspace",
           "NULL workspace");
    expect(t, dsv4_mhc_seam(&d, &a, SKEW(fake_ws, 8), big_ws, fake_stream), DSV4_STATUS_MISALIGNED, "mhc_seam",
           "workspace", "misaligned workspace");
    expect(t, dsv4_mhc_seam(&d, &a, fake_ws, big_ws, NULL), DSV4_STATUS_NULL_POINTER, "mhc_seam", "stream",
           "NULL stream");
}

/* ---- the other operators: NULL desc/args/pointers, sizes, alignment, overlap, stream ---------- */
static void bad_post(th_ctx_t *t) {
    const char *op = "mhc_post";
    dsv4_mhc_post_desc_t d = {16, 4096, 4096, 4 * 4096, 4 * 4096};
    dsv4_mhc_post_args_t a = {FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6)}, b;
    size_t ws = 1;
    TH_OK(t, dsv4_mhc_post_workspace_size(&d, &ws));
    TH_CHECK(t, ws == 0, "post workspace %zu", ws);
    expect(t, dsv4_mhc_post_check(NULL), DSV4_STATUS_NULL_POINTER, op, "desc", "check NULL");
    expect(t, dsv4_mhc_post_workspace_size(&d, NULL), DSV4_STATUS_NULL_POINTER, op, "bytes", "ws NULL");
    expect(t, dsv4_mhc_post(NULL, &a, NULL, 0, fake_stream), DSV4_STATUS_NULL_POINTER, op, "desc", "NULL desc");
    expect(t, dsv4_mhc_post(&d, NULL, NULL, 0, fake_stream), DSV4_STATUS_NULL_POINTER, op, "args", "NULL args");
    expect(t, dsv4_mhc_post_ref(&d, NULL), DSV4_STATUS_NULL_POINTER, op, "args", "ref NULL args");
    dsv4_mhc_post_desc_t e = d;
    e.tokens = -5;
    expect(t, dsv4_mhc_post(&e, &a, NULL, 0, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "tokens", "negative T");
    expect(t, dsv4_mhc_post_ref(&e, &a), DSV4_STATUS_INVALID_VALUE, op, "tokens", "ref negative T");
    e = d;
    e.hidden = 4100;
    expect(t, dsv4_mhc_post(&e, &a, NULL, 0, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "hidden", "H % 128");
    e = d;
    e.residual_stride = 4096;
    expect(t, dsv4_mhc_post(&e, &a, NULL, 0, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "residual_stride",
           "short stride");
    b = a, b.x = NULL;
    expect(t, dsv4_mhc_post(&d, &b, NULL, 0, fake_stream), DSV4_STATUS_NULL_POINTER, op, "x", "NULL x");
    b = a, b.residual = NULL;
    expect(t, dsv4_mhc_post_ref(&d, &b), DSV4_STATUS_NULL_POINTER, op, "residual", "ref NULL residual");
    b = a, b.post = NULL;
    expect(t, dsv4_mhc_post(&d, &b, NULL, 0, fake_stream), DSV4_STATUS_NULL_POINTER, op, "post", "NULL post");
    b = a, b.comb = NULL;
    expect(t, dsv4_mhc_post(&d, &b, NULL, 0, fake_stream), DSV4_STATUS_NULL_POINTER, op, "comb", "NULL comb");
    b = a, b.residual_out = NULL;
    expect(t, dsv4_mhc_post(&d, &b, NULL, 0, fake_stream), DSV4_STATUS_NULL_POINTER, op, "residual_out", "NULL out");
    b = a, b.residual = SKEW(FAKE(2), 2);
    expect(t, dsv4_mhc_post(&d, &b, NULL, 0, fake_stream), DSV4_STATUS_MISALIGNED, op, "residual", "misaligned R");
    b = a, b.comb = SKEW(FAKE(4), 8);
    expect(t, dsv4_mhc_post(&d, &b, NULL, 0, fake_stream), DSV4_STATUS_MISALIGNED, op, "comb", "misaligned comb");
    b = a, b.sqrsum = SKEW(FAKE(6), 2);
    expect(t, dsv4_mhc_post(&d, &b, NULL, 0, fake_stream), DSV4_STATUS_MISALIGNED, op, "sqrsum", "misaligned sqrsum");
    b = a, b.residual_out = SKEW(FAKE(2), 64);
    expect(t, dsv4_mhc_post(&d, &b, NULL, 0, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "overlaps", "in place");
    b = a, b.sqrsum = FAKE(5);
    expect(t, dsv4_mhc_post_ref(&d, &b), DSV4_STATUS_INVALID_VALUE, op, "overlaps", "sqrsum on residual_out");
    expect(t, dsv4_mhc_post(&d, &a, NULL, 0, NULL), DSV4_STATUS_NULL_POINTER, op, "stream", "NULL stream");
}

static void bad_collapse(th_ctx_t *t) {
    const char *op = "mhc_collapse";
    dsv4_mhc_collapse_desc_t d = {3, 7168, DSV4_MHC_V41, 1e-20f, 4 * 7168, 7168, 7168}, e;
    dsv4_mhc_collapse_args_t a = {FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5)}, b;
    expect(t, dsv4_mhc_collapse_check(NULL), DSV4_STATUS_NULL_POINTER, op, "desc", "check NULL");
    expect(t, dsv4_mhc_collapse(NULL, &a, NULL, 0, fake_stream), DSV4_STATUS_NULL_POINTER, op, "desc", "NULL desc");
    expect(t, dsv4_mhc_collapse(&d, NULL, NULL, 0, fake_stream), DSV4_STATUS_NULL_POINTER, op, "args", "NULL args");
    e = d, e.tokens = -1;
    expect(t, dsv4_mhc_collapse_ref(&e, &a), DSV4_STATUS_INVALID_VALUE, op, "tokens", "negative T");
    e = d, e.variant = 2;
    expect(t, dsv4_mhc_collapse(&e, &a, NULL, 0, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "variant", "variant");
    e = d, e.norm_eps = -1.0f;
    expect(t, dsv4_mhc_collapse(&e, &a, NULL, 0, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "norm_eps", "eps");
    e = d, e.out_stride = 7170;
    expect(t, dsv4_mhc_collapse(&e, &a, NULL, 0, fake_stream), DSV4_STATUS_MISALIGNED, op, "out_stride", "stride");
    b = a, b.residual = NULL;
    expect(t, dsv4_mhc_collapse(&d, &b, NULL, 0, fake_stream), DSV4_STATUS_NULL_POINTER, op, "residual", "NULL R");
    b = a, b.out = NULL;
    expect(t, dsv4_mhc_collapse_ref(&d, &b), DSV4_STATUS_NULL_POINTER, op, "out", "ref NULL out");
    b = a, b.pre_mix = SKEW(FAKE(2), 4);
    expect(t, dsv4_mhc_collapse(&d, &b, NULL, 0, fake_stream), DSV4_STATUS_MISALIGNED, op, "pre_mix", "misaligned");
    b = a, b.norm_weight = SKEW(FAKE(3), 2);
    expect(t, dsv4_mhc_collapse(&d, &b, NULL, 0, fake_stream), DSV4_STATUS_MISALIGNED, op, "norm_weight", "w");
    b = a, b.aux = FAKE(4);
    expect(t, dsv4_mhc_collapse(&d, &b, NULL, 0, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "overlaps", "aux=out");
    expect(t, dsv4_mhc_collapse(&d, &a, NULL, 0, NULL), DSV4_STATUS_NULL_POINTER, op, "stream", "NULL stream");
}

static void bad_gates_pre(th_ctx_t *t) {
    const char *op = "mhc_gates";
    dsv4_mhc_gates_desc_t d = {20, 4096, 0, 0, DSV4_MHC_GATE_PARAMS_V4, 4 * 4096}, e;
    dsv4_mhc_gates_args_t a = {FAKE(1), FAKE(2), FAKE(3), FAKE(4), NULL, FAKE(6), FAKE(7), FAKE(8), NULL, NULL}, b;
    size_t ws = 0;
    TH_OK(t, dsv4_mhc_gates_workspace_size(&d, &ws));
    expect(t, dsv4_mhc_gates_check(NULL), DSV4_STATUS_NULL_POINTER, op, "desc", "check NULL");
    expect(t, dsv4_mhc_gates(&d, NULL, fake_ws, big_ws, fake_stream), DSV4_STATUS_NULL_POINTER, op, "args", "args");
    e = d, e.broadcast = 2;
    expect(t, dsv4_mhc_gates(&e, &a, fake_ws, big_ws, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "broadcast", "bc");
    e = d, e.gate.sinkhorn_iters = 101;
    expect(t, dsv4_mhc_gates_ref(&e, &a), DSV4_STATUS_INVALID_VALUE, op, "sinkhorn_iters", "iters");
    b = a, b.fn = NULL;
    expect(t, dsv4_mhc_gates(&d, &b, fake_ws, big_ws, fake_stream), DSV4_STATUS_NULL_POINTER, op, "fn", "NULL fn");
    b = a, b.pre = NULL;
    expect(t, dsv4_mhc_gates_ref(&d, &b), DSV4_STATUS_NULL_POINTER, op, "pre", "NULL pre");
    b = a, b.residual = SKEW(FAKE(1), 2);
    expect(t, dsv4_mhc_gates(&d, &b, fake_ws, big_ws, fake_stream), DSV4_STATUS_MISALIGNED, op, "residual", "R+2");
    b = a, b.sqrsum = FAKE(6);
    expect(t, dsv4_mhc_gates(&d, &b, fake_ws, big_ws, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "overlaps", "sq");
    b = a, b.fn_split = SKEW(FAKE(9), 4);
    expect(t, dsv4_mhc_gates(&d, &b, fake_ws, big_ws, fake_stream), DSV4_STATUS_MISALIGNED, op, "fn_split",
           "fn_split+4");
    b = a, b.fn_split = SKEW(FAKE(7), 64);
    expect(t, dsv4_mhc_gates(&d, &b, fake_ws, big_ws, fake_stream), DSV4_STATUS_INVALID_VALUE, op,
           "comb overlaps input fn_split", "fn_split on comb");
    expect(t, dsv4_mhc_gates_ref(&d, &b), DSV4_STATUS_INVALID_VALUE, op, "comb overlaps input fn_split",
           "ref fn_split on comb");
    expect(t, dsv4_mhc_gates(&d, &a, fake_ws, ws / 2, fake_stream), DSV4_STATUS_WORKSPACE_TOO_SMALL, op, "workspace",
           "small workspace");
    expect(t, dsv4_mhc_gates(&d, &a, fake_ws, big_ws, NULL), DSV4_STATUS_NULL_POINTER, op, "stream", "NULL stream");

    op = "mhc_pre";
    dsv4_mhc_pre_desc_t pd = {6,      5120,     DSV4_MHC_V41, 0,    0,   DSV4_MHC_GATE_PARAMS_V41,
                              1e-20f, 4 * 5120, 4 * 5120,     5120, 5120},
                        pe;
    dsv4_mhc_pre_args_t pa = {FAKE(1), FAKE(2), FAKE(3),  FAKE(4), FAKE(5),  FAKE(6),  FAKE(7),
                              FAKE(8), FAKE(9), FAKE(10), NULL,    FAKE(12), FAKE(13), NULL},
                        pb;
    TH_OK(t, dsv4_mhc_pre_check(&pd));
    expect(t, dsv4_mhc_pre(NULL, &pa, fake_ws, big_ws, fake_stream), DSV4_STATUS_NULL_POINTER, op, "desc", "desc");
    expect(t, dsv4_mhc_pre_ref(&pd, NULL), DSV4_STATUS_NULL_POINTER, op, "args", "args");
    pe = pd, pe.hidden = 100;
    expect(t, dsv4_mhc_pre(&pe, &pa, fake_ws, big_ws, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "hidden", "H");
    pb = pa, pb.layer_input = NULL;
    expect(t, dsv4_mhc_pre(&pd, &pb, fake_ws, big_ws, fake_stream), DSV4_STATUS_NULL_POINTER, op, "layer_input",
           "NULL layer_input");
    pb = pa, pb.residual_out = FAKE(11);
    expect(t, dsv4_mhc_pre_ref(&pd, &pb), DSV4_STATUS_INVALID_VALUE, op, "residual_out", "copy without broadcast");
    pe = pd, pe.broadcast = 1, pb = pa, pb.pre_mix = NULL;
    expect(t, dsv4_mhc_pre(&pe, &pb, fake_ws, big_ws, fake_stream), DSV4_STATUS_NULL_POINTER, op, "residual_out",
           "broadcast without the copy");
    pb.residual_out = FAKE(11), pb.pre_mix = FAKE(5);
    expect(t, dsv4_mhc_pre(&pe, &pb, fake_ws, big_ws, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "pre_mix",
           "broadcast with pre_mix");
    pe = pd, pe.variant = DSV4_MHC_V4;
    expect(t, dsv4_mhc_pre_ref(&pe, &pa), DSV4_STATUS_INVALID_VALUE, op, "pre_mix", "V4 with pre_mix");
    pb = pa, pb.aux = SKEW(FAKE(12), 2);
    expect(t, dsv4_mhc_pre(&pd, &pb, fake_ws, big_ws, fake_stream), DSV4_STATUS_MISALIGNED, op, "aux", "aux+2");
    pb = pa, pb.layer_input = SKEW(FAKE(1), 256);
    expect(t, dsv4_mhc_pre(&pd, &pb, fake_ws, big_ws, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "overlaps", "li");
    pb = pa, pb.fn_split = SKEW(FAKE(14), 2);
    expect(t, dsv4_mhc_pre(&pd, &pb, fake_ws, big_ws, fake_stream), DSV4_STATUS_MISALIGNED, op, "fn_split",
           "fn_split+2");
    expect(t, dsv4_mhc_pre(&pd, &pa, fake_ws, big_ws, NULL), DSV4_STATUS_NULL_POINTER, op, "stream", "stream");

    op = "mhc_fn_bcast";
    dsv4_mhc_fn_bcast_desc_t fd = {5120}, fe = {130};
    dsv4_mhc_fn_bcast_args_t fa = {FAKE(1), FAKE(2)}, fb = {FAKE(1), SKEW(FAKE(2), 4)};
    expect(t, dsv4_mhc_fn_bcast_check(&fe), DSV4_STATUS_INVALID_VALUE, op, "hidden", "H = 130");
    expect(t, dsv4_mhc_fn_bcast(&fd, NULL, NULL, 0, fake_stream), DSV4_STATUS_NULL_POINTER, op, "args", "args");
    expect(t, dsv4_mhc_fn_bcast(&fd, &fb, NULL, 0, fake_stream), DSV4_STATUS_MISALIGNED, op, "fn_bcast", "align");
    fb = fa, fb.fn = NULL;
    expect(t, dsv4_mhc_fn_bcast_ref(&fd, &fb), DSV4_STATUS_NULL_POINTER, op, "fn", "NULL fn");
    expect(t, dsv4_mhc_fn_bcast(&fd, &fa, NULL, 0, NULL), DSV4_STATUS_NULL_POINTER, op, "stream", "stream");

    op = "mhc_fn_split";
    dsv4_mhc_fn_split_desc_t sd = {5120, 0}, se = {130, 0}, sb2 = {5120, 2}, sneg = {-4096, 1};
    dsv4_mhc_fn_split_args_t sa = {FAKE(1), FAKE(2)}, sb = {FAKE(1), SKEW(FAKE(2), 8)};
    ws = 1;
    TH_OK(t, dsv4_mhc_fn_split_check(&sd));
    TH_OK(t, dsv4_mhc_fn_split_workspace_size(&sd, &ws));
    TH_CHECK(t, ws == 0, "fn_split workspace %zu", ws);
    expect(t, dsv4_mhc_fn_split_check(&se), DSV4_STATUS_INVALID_VALUE, op, "hidden", "H = 130");
    expect(t, dsv4_mhc_fn_split_check(&sneg), DSV4_STATUS_INVALID_VALUE, op, "hidden", "H = -4096");
    expect(t, dsv4_mhc_fn_split(&sb2, &sa, NULL, 0, fake_stream), DSV4_STATUS_INVALID_VALUE, op, "broadcast",
           "broadcast = 2");
    expect(t, dsv4_mhc_fn_split_ref(&se, &sa), DSV4_STATUS_INVALID_VALUE, op, "hidden", "ref H = 130");
    expect(t, dsv4_mhc_fn_split(&sd, NULL, NULL, 0, fake_stream), DSV4_STATUS_NULL_POINTER, op, "args", "args");
    expect(t, dsv4_mhc_fn_split(&sd, &sb, NULL, 0, fake_stream), DSV4_STATUS_MISALIGNED, op, "fn_split", "align");
    sb = sa, sb.fn = SKEW(FAKE(1), 4);
    expect(t, dsv4_mhc_fn_split(&sd, &sb, NULL, 0, fake_stream), DSV4_STATUS_MISALIGNED, op, "fn", "fn+4");
    sb = sa, sb.fn = NULL;
    expect(t, dsv4_mhc_fn_split_ref(&sd, &sb), DSV4_STATUS_NULL_POINTER, op, "fn", "NULL fn");
    sb = sa, sb.fn_split = NULL;
    expect(t, dsv4_mhc_fn_split(&sd, &sb, NULL, 0, fake_stream), DSV4_STATUS_NULL_POINTER, op, "fn_split",
           "NULL fn_split");
    sb = sa, sb.fn_split = SKEW(FAKE(1), 24 * 4 * 5120 * 4 - 16); /* its first row on fn's last 16 bytes */
    expect(t, dsv4_mhc_fn_split(&sd, &sb, NULL, 0, fake_stream), DSV4_STATUS_INVALID_VALUE, op,
           "fn_split overlaps input fn", "in place");
    expect(t, dsv4_mhc_fn_split_ref(&sd, &sb), DSV4_STATUS_INVALID_VALUE, op, "fn_split overlaps input fn",
           "ref in place");
    sd.broadcast = 1; /* K = H: fn is fn_bcast [24, H] */
    sb.fn_split = SKEW(FAKE(1), 24 * 5120 * 4 - 16);
    expect(t, dsv4_mhc_fn_split(&sd, &sb, NULL, 0, fake_stream), DSV4_STATUS_INVALID_VALUE, op,
           "fn_split overlaps input fn", "broadcast in place");
    sd.broadcast = 0;
    expect(t, dsv4_mhc_fn_split(&sd, &sa, NULL, 0, NULL), DSV4_STATUS_NULL_POINTER, op, "stream", "stream");

    dsv4_mhc_plan_t pl;
    expect(t, dsv4_mhc_plan(1, 5120, 0, 0, NULL), DSV4_STATUS_NULL_POINTER, "mhc_plan", "plan", "NULL plan");
    expect(t, dsv4_mhc_plan(1, 5120, 3, 0, &pl), DSV4_STATUS_INVALID_VALUE, "mhc_plan", "broadcast", "bcast 3");
    expect(t, dsv4_mhc_plan(-1, 5120, 0, 0, &pl), DSV4_STATUS_INVALID_VALUE, "mhc_plan", "tokens", "T -1");
}

/* Every public function of every op: NULL descriptor, NULL args, NULL size output. */
#define NULL_CASES(op, name, desc, args)                                                                               \
    do {                                                                                                               \
        size_t b_ = 0;                                                                                                 \
        expect(t, dsv4_mhc_##op##_check(NULL), DSV4_STATUS_NULL_POINTER, name, "desc", #op "_check(NULL)");            \
        expect(t, dsv4_mhc_##op##_workspace_size(NULL, &b_), DSV4_STATUS_NULL_POINTER, name, "desc",                   \
               #op "_workspace_size(NULL)");                                                                           \
        expect(t, dsv4_mhc_##op##_workspace_size(desc, NULL), DSV4_STATUS_NULL_POINTER, name, "bytes",                 \
               #op "_workspace_size(desc, NULL)");                                                                     \
        expect(t, dsv4_mhc_##op(NULL, args, fake_ws, big_ws, fake_stream), DSV4_STATUS_NULL_POINTER, name, "desc",     \
               #op "(NULL desc)");                                                                                     \
        expect(t, dsv4_mhc_##op(desc, NULL, fake_ws, big_ws, fake_stream), DSV4_STATUS_NULL_POINTER, name, "args",     \
               #op "(NULL args)");                                                                                     \
        expect(t, dsv4_mhc_##op##_ref(NULL, args), DSV4_STATUS_NULL_POINTER, name, "desc", #op "_ref(NULL desc)");     \
        expect(t, dsv4_mhc_##op##_ref(desc, NULL), DSV4_STATUS_NULL_POINTER, name, "args", #op "_ref(NULL args)");     \
    } while (0)

static void null_everywhere(th_ctx_t *t) {
    dsv4_mhc_post_desc_t pd = {4, 4096, 4096, 4 * 4096, 4 * 4096};
    dsv4_mhc_post_args_t pa = {FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), NULL};
    NULL_CASES(post, "mhc_post", &pd, &pa);
    dsv4_mhc_collapse_desc_t cd = {4, 4096, 0, 1e-6f, 4 * 4096, 4096, 4096};
    dsv4_mhc_collapse_args_t ca = {FAKE(1), NULL, NULL, FAKE(2), NULL};
    NULL_CASES(collapse, "mhc_collapse", &cd, &ca);
    dsv4_mhc_gates_desc_t gd = {4, 4096, 0, 0, DSV4_MHC_GATE_PARAMS_V4, 4 * 4096};
    dsv4_mhc_gates_args_t ga = {FAKE(1), FAKE(2), FAKE(3), FAKE(4), NULL, FAKE(5), FAKE(6), FAKE(7), NULL, NULL};
    NULL_CASES(gates, "mhc_gates", &gd, &ga);
    dsv4_mhc_pre_desc_t prd = {4,      4096,     DSV4_MHC_V41, 0,    0,   DSV4_MHC_GATE_PARAMS_V41,
                               1e-20f, 4 * 4096, 4 * 4096,     4096, 4096};
    dsv4_mhc_pre_args_t pra = {FAKE(1), FAKE(2), FAKE(3), FAKE(4), NULL, NULL, FAKE(5),
                               FAKE(6), FAKE(7), FAKE(8), NULL,    NULL, NULL, NULL};
    NULL_CASES(pre, "mhc_pre", &prd, &pra);
    dsv4_mhc_seam_desc_t sd = {4,        4096,     DSV4_MHC_V41, 0,   DSV4_MHC_GATE_PARAMS_V41, 1e-20f, 4096,
                               4 * 4096, 4 * 4096, 4096,         4096};
    dsv4_mhc_seam_args_t sa = {FAKE(1),  FAKE(2),  FAKE(3),  FAKE(4),  FAKE(5),  FAKE(6), FAKE(7), NULL, NULL,
                               FAKE(10), FAKE(11), FAKE(12), FAKE(13), FAKE(14), NULL,    NULL,    NULL};
    NULL_CASES(seam, "mhc_seam", &sd, &sa);
    dsv4_mhc_fn_bcast_desc_t fd = {4096};
    dsv4_mhc_fn_bcast_args_t fa = {FAKE(1), FAKE(2)};
    NULL_CASES(fn_bcast, "mhc_fn_bcast", &fd, &fa);
    dsv4_mhc_fn_split_desc_t sd2 = {4096, 1};
    dsv4_mhc_fn_split_args_t sa2 = {FAKE(1), FAKE(2)};
    NULL_CASES(fn_split, "mhc_fn_split", &sd2, &sa2);
}

void test_bad_input(th_ctx_t *t) {
    null_everywhere(t);
    bad_seam(t);
    bad_post(t);
    bad_collapse(t);
    bad_gates_pre(t);
}

/* T = 0: every run call checks the descriptor, args and stream, then does nothing, even
 * with NULL tensors; the references likewise. */
void test_zero_tokens(th_ctx_t *t) {
    dsv4_mhc_seam_desc_t sd = {0,        5120,     DSV4_MHC_V41, 0,   DSV4_MHC_GATE_PARAMS_V41, 1e-20f, 5120,
                               4 * 5120, 4 * 5120, 5120,         5120};
    dsv4_mhc_seam_args_t sa;
    memset(&sa, 0, sizeof sa);
    size_t ws = 1;
    TH_OK(t, dsv4_mhc_seam_workspace_size(&sd, &ws));
    TH_CHECK(t, ws == 0, "T = 0 workspace %zu", ws);
    TH_OK(t, dsv4_mhc_seam(&sd, &sa, NULL, 0, fake_stream));
    TH_OK(t, dsv4_mhc_seam_ref(&sd, &sa));
    expect(t, dsv4_mhc_seam(&sd, &sa, NULL, 0, NULL), DSV4_STATUS_NULL_POINTER, "mhc_seam", "stream", "T=0 stream");
    dsv4_mhc_post_desc_t pd = {0, 4096, 4096, 4 * 4096, 4 * 4096};
    dsv4_mhc_post_args_t pa;
    memset(&pa, 0, sizeof pa);
    TH_OK(t, dsv4_mhc_post(&pd, &pa, NULL, 0, fake_stream));
    TH_OK(t, dsv4_mhc_post_ref(&pd, &pa));
    dsv4_mhc_collapse_desc_t cd = {0, 4096, 0, 1e-6f, 4 * 4096, 4096, 4096};
    dsv4_mhc_collapse_args_t ca;
    memset(&ca, 0, sizeof ca);
    TH_OK(t, dsv4_mhc_collapse(&cd, &ca, NULL, 0, fake_stream));
    dsv4_mhc_gates_desc_t gd = {0, 4096, 1, 0, DSV4_MHC_GATE_PARAMS_V4, 4096};
    dsv4_mhc_gates_args_t ga;
    memset(&ga, 0, sizeof ga);
    TH_OK(t, dsv4_mhc_gates(&gd, &ga, NULL, 0, fake_stream));
    dsv4_mhc_pre_desc_t prd = {0, 7168, DSV4_MHC_V4, 1, 0, DSV4_MHC_GATE_PARAMS_V4, 1e-6f, 7168, 4 * 7168, 7168, 7168};
    dsv4_mhc_pre_args_t pra;
    memset(&pra, 0, sizeof pra);
    TH_OK(t, dsv4_mhc_pre(&prd, &pra, NULL, 0, fake_stream));
    TH_OK(t, dsv4_mhc_pre_ref(&prd, &pra));
}
