/*
 * GPU tests of dsv4_mhc_pre (V4, V4.1, first-layer broadcast) and dsv4_mhc_gates (both
 * routes, broadcast, precomputed sqrsum), and the GPU half of the bad-input test: on
 * real, poisoned buffers, a rejected call writes nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "dsv4/numerics.h"
#include "mhc_gpu.h"
#include "mhc_test.h"
#include "test_mhc.h"

static void run_on_stream(th_ctx_t *t, dsv4_status_t *st, int which, const void *d, const void *a, void *ws,
                          size_t wsb) {
    void *s = th_stream_create(t);
    if (which == 0)
        *st = dsv4_mhc_pre((const dsv4_mhc_pre_desc_t *)d, (const dsv4_mhc_pre_args_t *)a, ws, wsb, DSV4_STREAM(s));
    else
        *st =
            dsv4_mhc_gates((const dsv4_mhc_gates_desc_t *)d, (const dsv4_mhc_gates_args_t *)a, ws, wsb, DSV4_STREAM(s));
    th_stream_sync_destroy(t, s);
}

/* The sampled tokens' projection inputs: rows of e (K = H) or R (K = 4H) as doubles. */
static double *rows_f64(const uint16_t *src, int64_t K, const int64_t *ids, int64_t n) {
    double *X = malloc((size_t)(n * K) * sizeof(double));
    for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < K; ++k) X[i * K + k] = dsv4_bf16_to_f32(src[ids[i] * K + k]);
    return X;
}

static void check_sampled_gates(th_ctx_t *t, const char *name, const uint16_t *src, int64_t T, int64_t K,
                                const float *fn, const float *scale, const float *base, const dsv4_mhc_gate_params_t *g,
                                const float *mix, const float *post, const float *comb, const float *pre) {
    int64_t ids[64];
    const int64_t n = mt_sample_tokens(th_rng(t), T, ids);
    double *X = rows_f64(src, K, ids, n);
    float gm[64 * 24], gp[64 * 4], gc[64 * 16], gr[64 * 4];
    mt_gather_f32(mix, 24, ids, n, gm);
    mt_gather_f32(post, 4, ids, n, gp);
    mt_gather_f32(comb, 16, ids, n, gc);
    mt_gather_f32(pre, 4, ids, n, gr);
    mt_check_gates(t, name, n, ids, X, NULL, K, (double)K, fn, scale, base, g, MT_TOL_MIX, gm, gp, gc, gr);
    free(X);
}

/* ---- pre --------------------------------------------------------------------------------------- */
static void gpu_pre_case(th_ctx_t *t, int64_t T, int64_t H, int variant, int bc, int premix, int route) {
    const int before = th_failed(t);
    mt_seam_in_t in;
    premix = premix && !bc && variant == DSV4_MHC_V41;
    mt_seam_in_make(th_rng(t), &in, T, H, 0, premix, 1, T > 2);
    const int64_t K = bc ? H : 4 * H;
    const uint16_t *e = bc ? in.x : in.R;
    float *fnb = mt_fn_bcast_of(t, &in, H);
    const float *fn = bc ? fnb : in.fn;
    char name[160];
    dsv4_mhc_plan_t pl;
    TH_OK(t, dsv4_mhc_plan(T, H, bc, route, &pl));
    snprintf(name, sizeof name, "pre %s T=%lld H=%lld broadcast=%d premix=%d route=%s", variant ? "V4" : "V4.1",
             (long long)T, (long long)H, bc, premix, pl.route == DSV4_MHC_ROUTE_SMALL_T ? "small-T" : "tensor-core");
    const float eps = variant ? 1e-6f : 1e-20f;
    dsv4_mhc_pre_desc_t d = {T, H, variant, bc, route, mt_gate_params(variant), eps, (bc ? H : 4 * H), 4 * H, H, H};
    size_t wsb = 0;
    TH_OK(t, dsv4_mhc_pre_workspace_size(&d, &wsb));
    th_buf_t res = mt_dev(e, (size_t)(T * K) * 2), dfn = mt_dev(fn, (size_t)(24 * K) * 4);
    th_buf_t sc = mt_dev(in.scale, 12), ba = mt_dev(in.base, 96), pm = mt_dev(in.premix, (size_t)(16 * T));
    th_buf_t w = mt_dev(in.w, (size_t)H * 2), post = mt_dev(NULL, (size_t)(16 * T)),
             comb = mt_dev(NULL, (size_t)(64 * T));
    th_buf_t pre = mt_dev(NULL, (size_t)(16 * T)), li = mt_dev(NULL, (size_t)(T * H) * 2);
    th_buf_t rout = mt_dev(NULL, (size_t)(T * 4 * H) * 2), aux = mt_dev(NULL, (size_t)(T * H) * 2);
    th_buf_t mix = mt_dev(NULL, (size_t)(96 * T)), ws = mt_dev(NULL, wsb);
    dsv4_mhc_pre_args_t a = {
        th_ptr(&res),  th_ptr(&dfn),  th_ptr(&sc),  th_ptr(&ba), premix ? th_ptr(&pm) : NULL, th_ptr(&w),
        th_ptr(&post), th_ptr(&comb), th_ptr(&pre), th_ptr(&li), bc ? th_ptr(&rout) : NULL,   th_ptr(&aux),
        th_ptr(&mix),  NULL};
    dsv4_status_t st;
    run_on_stream(t, &st, 0, &d, &a, th_ptr(&ws), wsb);
    TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "%s: %s (%s)", name, dsv4_status_string(st), dsv4_last_error());
    if (st == DSV4_STATUS_SUCCESS) {
        float *gpost = mt_download(t, &post, "post"), *gcomb = mt_download(t, &comb, "comb");
        float *gpre = mt_download(t, &pre, "pre"), *gmix = mt_download(t, &mix, "mix");
        uint16_t *gli = mt_download(t, &li, "layer_input"), *gaux = mt_download(t, &aux, "aux");
        uint16_t *grout = mt_download(t, &rout, "residual_out");
        mt_dev_unchanged(t, "residual", &res, e);
        mt_dev_unchanged(t, "fn", &dfn, fn);
        th_buf_guards_ok(t, &ws, "workspace");
        if (bc)
            for (int s = 0; s < 4; ++s)
                mt_cmp_bf16(t, "broadcast copy vs e", grout + s * H, 4 * H, e, H, T, NULL, 1, H, 0);
        uint16_t *li2 = malloc((size_t)(T * H) * 2), *aux2 = malloc((size_t)(T * H) * 2);
        dsv4_mhc_collapse_desc_t cd = {T, H, variant, eps, 4 * H, H, H};
        dsv4_mhc_collapse_args_t ca = {bc ? grout : in.R, variant == DSV4_MHC_V4 ? gpre : in.premix, in.w, li2, aux2};
        TH_OK(t, dsv4_mhc_collapse_ref(&cd, &ca));
        mt_cmp_bf16(t, "layer_input vs collapse+norm reference (1 ulp)", gli, H, li2, H, T, NULL, 1, H, MT_ULP_NORM);
        mt_cmp_bf16(t, "aux vs reference", gaux, H, aux2, H, T, NULL, 1, H, 0);
        check_sampled_gates(t, name, e, T, K, fn, in.scale, in.base, &d.gate, gmix, gpost, gcomb, gpre);
        free(gpost), free(gcomb), free(gpre), free(gmix), free(gli), free(gaux), free(grout), free(li2), free(aux2);
    }
    if (th_failed(t) != before) th_note(t, "FAILED case: %s", name);
    th_buf_t *bufs[] = {&res, &dfn, &sc, &ba, &pm, &w, &post, &comb, &pre, &li, &rout, &aux, &mix, &ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) th_buf_free(bufs[i]);
    free(fnb);
    mt_seam_in_free(&in);
}

void test_pre_gpu(th_ctx_t *t) {
    gpu_pre_case(t, 1, MC_MHC_HIDDEN, DSV4_MHC_V41, 0, 1, 0);
    gpu_pre_case(t, 12, MC_MHC_HIDDEN, DSV4_MHC_V41, 0, 0, 0);
    gpu_pre_case(t, 16, MC_MHC_HIDDEN_V4, DSV4_MHC_V41, 0, 1, 0);
    gpu_pre_case(t, 200, MC_MHC_HIDDEN_PRO, DSV4_MHC_V41, 0, 1, 0);
    gpu_pre_case(t, 6, MC_MHC_HIDDEN_PRO, DSV4_MHC_V4, 0, 0, 0);
    gpu_pre_case(t, 64, MC_MHC_HIDDEN, DSV4_MHC_V4, 0, 0, 0);
    gpu_pre_case(t, 1, MC_MHC_HIDDEN, DSV4_MHC_V41, 1, 0, 0);
    gpu_pre_case(t, 12, MC_MHC_HIDDEN_V4, DSV4_MHC_V41, 1, 0, 0);
    gpu_pre_case(t, 17, MC_MHC_HIDDEN_PRO, DSV4_MHC_V41, 1, 0, 0);
    gpu_pre_case(t, 300, MC_MHC_HIDDEN, DSV4_MHC_V41, 1, 0, 0);
    gpu_pre_case(t, 5, MC_MHC_HIDDEN_V4, DSV4_MHC_V4, 1, 0, 0);
    gpu_pre_case(t, 100, MC_MHC_HIDDEN, DSV4_MHC_V4, 1, 0, DSV4_MHC_ROUTE_SMALL_T);
    gpu_pre_case(t, 6, MC_MHC_HIDDEN, DSV4_MHC_V41, 1, 0, DSV4_MHC_ROUTE_TENSOR_CORE);
}

/* ---- gates ------------------------------------------------------------------------------------- */
static void gpu_gates_case(th_ctx_t *t, int64_t T, int64_t H, int bc, int route, int given_sq, int mix_null_check) {
    const int before = th_failed(t);
    mt_seam_in_t in;
    mt_seam_in_make(th_rng(t), &in, T, H, 0, 0, 0, T > 3);
    const int64_t K = bc ? H : 4 * H;
    const uint16_t *e = bc ? in.x : in.R;
    float *fnb = mt_fn_bcast_of(t, &in, H), *sq = malloc((size_t)T * 4);
    const float *fn = bc ? fnb : in.fn;
    for (int64_t i = 0; i < T; ++i) {
        double s = 0.0;
        for (int64_t k = 0; k < K; ++k) s += (double)dsv4_bf16_to_f32(e[i * K + k]) * dsv4_bf16_to_f32(e[i * K + k]);
        sq[i] = (float)s;
    }
    dsv4_mhc_plan_t pl;
    TH_OK(t, dsv4_mhc_plan(T, H, bc, route, &pl));
    char name[160];
    snprintf(name, sizeof name, "gates T=%lld H=%lld broadcast=%d route=%s%s sqrsum_given=%d", (long long)T,
             (long long)H, bc, pl.route == DSV4_MHC_ROUTE_SMALL_T ? "small-T" : "tensor-core", route ? " (forced)" : "",
             given_sq);
    dsv4_mhc_gates_desc_t d = {T, H, bc, route, mt_gate_params((int)(T % 2)), (bc ? H : 4 * H)};
    size_t wsb = 0;
    TH_OK(t, dsv4_mhc_gates_workspace_size(&d, &wsb));
    th_buf_t res = mt_dev(e, (size_t)(T * K) * 2), dfn = mt_dev(fn, (size_t)(24 * K) * 4);
    th_buf_t sc = mt_dev(in.scale, 12), ba = mt_dev(in.base, 96), dsq = mt_dev(sq, (size_t)T * 4);
    th_buf_t post = mt_dev(NULL, (size_t)(16 * T)), comb = mt_dev(NULL, (size_t)(64 * T));
    th_buf_t pre = mt_dev(NULL, (size_t)(16 * T)), mix = mt_dev(NULL, (size_t)(96 * T)), ws = mt_dev(NULL, wsb);
    dsv4_mhc_gates_args_t a = {th_ptr(&res),  th_ptr(&dfn),  th_ptr(&sc),  th_ptr(&ba),  given_sq ? th_ptr(&dsq) : NULL,
                               th_ptr(&post), th_ptr(&comb), th_ptr(&pre), th_ptr(&mix), NULL};
    dsv4_status_t st;
    run_on_stream(t, &st, 1, &d, &a, th_ptr(&ws), wsb);
    TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "%s: %s (%s)", name, dsv4_status_string(st), dsv4_last_error());
    if (st == DSV4_STATUS_SUCCESS) {
        float *gpost = mt_download(t, &post, "post"), *gcomb = mt_download(t, &comb, "comb");
        float *gpre = mt_download(t, &pre, "pre"), *gmix = mt_download(t, &mix, "mix");
        mt_dev_unchanged(t, "residual", &res, e);
        mt_dev_unchanged(t, "fn", &dfn, fn);
        if (given_sq) mt_dev_unchanged(t, "sqrsum", &dsq, sq);
        check_sampled_gates(t, name, e, T, K, fn, in.scale, in.base, &d.gate, gmix, gpost, gcomb, gpre);
        if (mix_null_check) {
            /* without the mix output the gates are the same bits */
            th_buf_poison(&post, 0xFF), th_buf_poison(&comb, 0xFF), th_buf_poison(&pre, 0xFF);
            th_buf_poison(&mix, 0xFF);
            a.mix = NULL;
            run_on_stream(t, &st, 1, &d, &a, th_ptr(&ws), wsb);
            TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "%s, mix = NULL: %s", name, dsv4_status_string(st));
            float *p2 = mt_download(t, &post, "post"), *c2 = mt_download(t, &comb, "comb");
            float *r2 = mt_download(t, &pre, "pre");
            uint32_t *m2 = mt_download(t, &mix, "mix");
            mt_cmp_f32_exact(t, "post with mix = NULL", p2, gpost, T, 4);
            mt_cmp_f32_exact(t, "comb with mix = NULL", c2, gcomb, T, 16);
            mt_cmp_f32_exact(t, "pre with mix = NULL", r2, gpre, T, 4);
            for (int64_t i = 0; i < 24 * T; ++i)
                if (m2[i] != 0xFFFFFFFFu) {
                    TH_CHECK(t, 0, "%s: mix written without a pointer", name);
                    break;
                }
            free(p2), free(c2), free(r2), free(m2);
        }
        free(gpost), free(gcomb), free(gpre), free(gmix);
    }
    if (th_failed(t) != before) th_note(t, "FAILED case: %s", name);
    th_buf_t *bufs[] = {&res, &dfn, &sc, &ba, &dsq, &post, &comb, &pre, &mix, &ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) th_buf_free(bufs[i]);
    free(fnb), free(sq);
    mt_seam_in_free(&in);
}

void test_gates_gpu(th_ctx_t *t) {
    gpu_gates_case(t, 1, MC_MHC_HIDDEN_V4, 0, 0, 0, 0);
    gpu_gates_case(t, 6, MC_MHC_HIDDEN, 0, 0, 1, 1);
    gpu_gates_case(t, 15, MC_MHC_HIDDEN_PRO, 0, 0, 0, 0);
    gpu_gates_case(t, 16, MC_MHC_HIDDEN, 0, 0, 1, 0);
    gpu_gates_case(t, 17, MC_MHC_HIDDEN_V4, 0, 0, 0, 0);
    gpu_gates_case(t, 100, MC_MHC_HIDDEN_PRO, 0, 0, 0, 1);
    gpu_gates_case(t, 512, MC_MHC_HIDDEN, 0, 0, 1, 0);
    gpu_gates_case(t, 6, MC_MHC_HIDDEN, 0, DSV4_MHC_ROUTE_TENSOR_CORE, 0, 0);
    gpu_gates_case(t, 20, MC_MHC_HIDDEN, 0, DSV4_MHC_ROUTE_SMALL_T, 0, 0);
    gpu_gates_case(t, 12, 1152, 0, 0, 0, 0); /* no small-T tiling: tensor-core */
    gpu_gates_case(t, 3, MC_MHC_HIDDEN, 1, 0, 0, 0);
    gpu_gates_case(t, 40, MC_MHC_HIDDEN_PRO, 1, 0, 0, 0);
    gpu_gates_case(t, 7, 1152, 1, 0, 1, 0);
}

/* ---- bad input on real buffers: nothing is written ------------------------------------------- */
static void untouched(th_ctx_t *t, const char *what, const th_buf_t *b) {
    uint8_t *h = mt_download(t, b, what);
    for (size_t i = 0; i < b->bytes; ++i)
        if (h[i] != 0xFF) {
            TH_CHECK(t, 0, "%s: byte %zu written (0x%02x) by a rejected call", what, i, h[i]);
            break;
        }
    free(h);
}

void test_bad_input_gpu(th_ctx_t *t) {
    mt_seam_in_t in;
    mt_seam_in_make(th_rng(t), &in, 12, 1024, 0, 1, 1, 0);
    dsv4_mhc_seam_desc_t d = {12,       1024,     DSV4_MHC_V41, 0,   DSV4_MHC_GATE_PARAMS_V41, 1e-20f, 1024,
                              4 * 1024, 4 * 1024, 1024,         1024};
    dseam_t s;
    dseam_make(&s, &in, &d, 1);
    void *st = th_stream_create(t);
    dsv4_mhc_seam_args_t a = s.args;
    a.x = (const uint16_t *)((const char *)a.x + 2);
    TH_EXPECT_STATUS(t, dsv4_mhc_seam(&d, &a, th_ptr(&s.ws), s.ws_bytes, DSV4_STREAM(st)), DSV4_STATUS_MISALIGNED);
    a = s.args;
    a.residual_out = (uint16_t *)a.residual;
    TH_EXPECT_STATUS(t, dsv4_mhc_seam(&d, &a, th_ptr(&s.ws), s.ws_bytes, DSV4_STREAM(st)), DSV4_STATUS_INVALID_VALUE);
    TH_EXPECT_STATUS(t, dsv4_mhc_seam(&d, &s.args, th_ptr(&s.ws), s.ws_bytes - 4, DSV4_STREAM(st)),
                     DSV4_STATUS_WORKSPACE_TOO_SMALL);
    TH_EXPECT_STATUS(t, dsv4_mhc_seam(&d, &s.args, th_ptr(&s.ws), s.ws_bytes, NULL), DSV4_STATUS_NULL_POINTER);
    dsv4_mhc_seam_desc_t e = d;
    e.hidden = 1000;
    TH_EXPECT_STATUS(t, dsv4_mhc_seam(&e, &s.args, th_ptr(&s.ws), s.ws_bytes, DSV4_STREAM(st)),
                     DSV4_STATUS_INVALID_VALUE);
    e = d;
    e.tokens = -12;
    TH_EXPECT_STATUS(t, dsv4_mhc_seam(&e, &s.args, th_ptr(&s.ws), s.ws_bytes, DSV4_STREAM(st)),
                     DSV4_STATUS_INVALID_VALUE);

    /* post, collapse, gates, pre, fn_bcast on the same buffers */
    dsv4_mhc_post_desc_t pd = {12, 1024, 1024, 4 * 1024, 4 * 1024};
    dsv4_mhc_post_args_t pa = {
        th_ptr(&s.x),  th_ptr(&s.R), th_ptr(&s.post), th_ptr(&s.comb), (uint16_t *)((char *)th_ptr(&s.R_out) + 2),
        th_ptr(&s.mix)};
    TH_EXPECT_STATUS(t, dsv4_mhc_post(&pd, &pa, NULL, 0, DSV4_STREAM(st)), DSV4_STATUS_MISALIGNED);
    dsv4_mhc_collapse_desc_t cd = {12, 1024, DSV4_MHC_V41, 1e-20f, 4 * 1024, 1024, 1024};
    dsv4_mhc_collapse_args_t ca = {th_ptr(&s.R), th_ptr(&s.premix), th_ptr(&s.w), th_ptr(&s.li), th_ptr(&s.li)};
    TH_EXPECT_STATUS(t, dsv4_mhc_collapse(&cd, &ca, NULL, 0, DSV4_STREAM(st)), DSV4_STATUS_INVALID_VALUE);
    dsv4_mhc_gates_desc_t gd = {12, 1024, 0, 0, DSV4_MHC_GATE_PARAMS_V41, 4 * 1024};
    dsv4_mhc_gates_args_t ga = {th_ptr(&s.R),        th_ptr(&s.fn),       th_ptr(&s.scale),   th_ptr(&s.base), NULL,
                                th_ptr(&s.post_out), th_ptr(&s.comb_out), th_ptr(&s.pre_out), th_ptr(&s.mix),  NULL};
    TH_EXPECT_STATUS(t, dsv4_mhc_gates(&gd, &ga, th_ptr(&s.ws), 16, DSV4_STREAM(st)), DSV4_STATUS_WORKSPACE_TOO_SMALL);
    ga.fn_split = (const uint16_t *)((const char *)th_ptr(&s.x) + 8); /* a misaligned fn_split */
    TH_EXPECT_STATUS(t, dsv4_mhc_gates(&gd, &ga, th_ptr(&s.ws), s.ws_bytes, DSV4_STREAM(st)), DSV4_STATUS_MISALIGNED);
    ga.fn_split = NULL;
    dsv4_mhc_pre_desc_t prd = {12,     1024, DSV4_MHC_V41, 1,    0,   DSV4_MHC_GATE_PARAMS_V41,
                               1e-20f, 1024, 4 * 1024,     1024, 1024};
    dsv4_mhc_pre_args_t pra = {th_ptr(&s.x),
                               th_ptr(&s.fn),
                               th_ptr(&s.scale),
                               th_ptr(&s.base),
                               NULL,
                               th_ptr(&s.w),
                               th_ptr(&s.post_out),
                               th_ptr(&s.comb_out),
                               th_ptr(&s.pre_out),
                               th_ptr(&s.li),
                               NULL,
                               th_ptr(&s.aux),
                               th_ptr(&s.mix),
                               NULL};
    TH_EXPECT_STATUS(t, dsv4_mhc_pre(&prd, &pra, th_ptr(&s.ws), s.ws_bytes, DSV4_STREAM(st)), DSV4_STATUS_NULL_POINTER);
    dsv4_mhc_fn_bcast_desc_t fd = {1024};
    dsv4_mhc_fn_bcast_args_t fa = {th_ptr(&s.fn), (float *)((char *)th_ptr(&s.mix) + 4)};
    TH_EXPECT_STATUS(t, dsv4_mhc_fn_bcast(&fd, &fa, NULL, 0, DSV4_STREAM(st)), DSV4_STATUS_MISALIGNED);

    th_stream_sync_destroy(t, st);
    TH_CUDA(t, cudaDeviceSynchronize());
    untouched(t, "residual_out", &s.R_out);
    untouched(t, "post_out", &s.post_out);
    untouched(t, "comb_out", &s.comb_out);
    untouched(t, "pre_out", &s.pre_out);
    untouched(t, "layer_input", &s.li);
    untouched(t, "aux", &s.aux);
    untouched(t, "mix", &s.mix);
    untouched(t, "workspace", &s.ws);
    dseam_inputs_unchanged(t, &s, &in);
    dseam_free(&s);
    mt_seam_in_free(&in);
}

/* The batch-invariant route: token r of a 40-token batch and the same token alone give
 * identical gate bits (post, comb, pre), for the residual and the broadcast projection. */
void test_gates_batch_invariant_gpu(th_ctx_t *t) {
    const int64_t T = 40, H = MC_MHC_HIDDEN, r = 23;
    for (int bc = 0; bc < 2; ++bc) {
        mt_seam_in_t in;
        mt_seam_in_make(th_rng(t), &in, T, H, 0, 0, 0, 0);
        const int64_t K = bc ? H : 4 * H, stride = bc ? in.xs : in.rs;
        const uint16_t *e = bc ? in.x : in.R;
        float *fnb = mt_fn_bcast_of(t, &in, H);
        const float *fn = bc ? fnb : in.fn;
        th_buf_t res = mt_dev(e, (size_t)(T * stride) * 2), dfn = mt_dev(fn, (size_t)(24 * K) * 4);
        th_buf_t sc = mt_dev(in.scale, 12), ba = mt_dev(in.base, 96);
        float *got[2][3];
        for (int alone = 0; alone < 2; ++alone) {
            const int64_t n = alone ? 1 : T;
            const dsv4_mhc_gates_desc_t d = {n, H, bc, DSV4_MHC_ROUTE_BATCH_INVARIANT, mt_gate_params(0), stride};
            size_t wsb = 0;
            TH_OK(t, dsv4_mhc_gates_workspace_size(&d, &wsb));
            th_buf_t post = mt_dev(NULL, (size_t)(16 * n)), comb = mt_dev(NULL, (size_t)(64 * n));
            th_buf_t pre = mt_dev(NULL, (size_t)(16 * n)), ws = mt_dev(NULL, wsb ? wsb : 16);
            const uint16_t *src = (const uint16_t *)th_ptr(&res) + (alone ? r * stride : 0);
            dsv4_mhc_gates_args_t a = {src,           th_ptr(&dfn),  th_ptr(&sc),  th_ptr(&ba), NULL,
                                       th_ptr(&post), th_ptr(&comb), th_ptr(&pre), NULL,        NULL};
            dsv4_status_t st;
            run_on_stream(t, &st, 1, &d, &a, th_ptr(&ws), wsb);
            TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "gates T=%lld: %s", (long long)n, dsv4_last_error());
            got[alone][0] = mt_download(t, &post, "post");
            got[alone][1] = mt_download(t, &comb, "comb");
            got[alone][2] = mt_download(t, &pre, "pre");
            th_buf_free(&post), th_buf_free(&comb), th_buf_free(&pre), th_buf_free(&ws);
        }
        static const int width[3] = {4, 16, 4};
        static const char *const name[3] = {"post", "comb", "pre"};
        for (int k = 0; k < 3; ++k) {
            TH_CHECK(t, memcmp(got[1][k], got[0][k] + r * width[k], (size_t)width[k] * 4) == 0,
                     "broadcast=%d: %s of token %lld alone differs from the batch's", bc, name[k], (long long)r);
            free(got[0][k]), free(got[1][k]);
        }
        th_buf_free(&res), th_buf_free(&dfn), th_buf_free(&sc), th_buf_free(&ba);
        free(fnb);
        mt_seam_in_free(&in);
    }
}

/* The small-T route's tagged records (mhc.h, dsv4_mhc_plan_t.workspace_bytes): a
 * workspace whose every word carries the tag of earlier builds (0x7FC04D48) in its high
 * half gives the same gates, bit for bit, as a 0xFF-poisoned one: no gate CTA takes a
 * stale word for a partial of this call. */
void test_gates_stale_tags_gpu(th_ctx_t *t) {
    const int64_t T = 6, H = MC_MHC_HIDDEN;
    mt_seam_in_t in;
    mt_seam_in_make(th_rng(t), &in, T, H, 0, 0, 0, 0);
    const dsv4_mhc_gates_desc_t d = {T, H, 0, DSV4_MHC_ROUTE_SMALL_T, mt_gate_params(0), in.rs};
    size_t wsb = 0;
    TH_OK(t, dsv4_mhc_gates_workspace_size(&d, &wsb));
    th_buf_t res = mt_dev(in.R, (size_t)(T * in.rs) * 2), dfn = mt_dev(in.fn, (size_t)(24 * 4 * H) * 4);
    th_buf_t sc = mt_dev(in.scale, 12), ba = mt_dev(in.base, 96);
    uint32_t *stale = malloc(wsb);
    for (size_t i = 0; i < wsb / 4; ++i) stale[i] = i % 2 ? 0x7FC04D48u : 0x3F800000u; /* tag over 1.0f */
    float *got[2][3];
    for (int k = 0; k < 2; ++k) {
        th_buf_t post = mt_dev(NULL, (size_t)(16 * T)), comb = mt_dev(NULL, (size_t)(64 * T));
        th_buf_t pre = mt_dev(NULL, (size_t)(16 * T)), ws = mt_dev(k ? stale : NULL, wsb);
        dsv4_mhc_gates_args_t a = {th_ptr(&res),  th_ptr(&dfn),  th_ptr(&sc),  th_ptr(&ba), NULL,
                                   th_ptr(&post), th_ptr(&comb), th_ptr(&pre), NULL,        NULL};
        dsv4_status_t st;
        run_on_stream(t, &st, 1, &d, &a, th_ptr(&ws), wsb);
        TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "gates: %s", dsv4_last_error());
        got[k][0] = mt_download(t, &post, "post");
        got[k][1] = mt_download(t, &comb, "comb");
        got[k][2] = mt_download(t, &pre, "pre");
        th_buf_free(&post), th_buf_free(&comb), th_buf_free(&pre), th_buf_free(&ws);
    }
    mt_cmp_f32_exact(t, "post over stale tags", got[1][0], got[0][0], T, 4);
    mt_cmp_f32_exact(t, "comb over stale tags", got[1][1], got[0][1], T, 16);
    mt_cmp_f32_exact(t, "pre over stale tags", got[1][2], got[0][2], T, 4);
    for (int k = 0; k < 2; ++k) free(got[k][0]), free(got[k][1]), free(got[k][2]);
    th_buf_free(&res), th_buf_free(&dfn), th_buf_free(&sc), th_buf_free(&ba);
    free(stale);
    mt_seam_in_free(&in);
}
