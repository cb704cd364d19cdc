/*
 * GPU tests of the element-wise operators against their CPU references: post (+ sqrsum),
 * collapse (+ norm, aux), fn_bcast. Outputs are poisoned (NaN) before each run and
 * framed by guard bands; inputs are checked unmodified. Failure lines name the case and
 * decode the first mismatches into token / stream / channel.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "mhc_test.h"
#include "test_mhc.h"

static const int64_t kTs[9] = {1, 5, 6, 12, 15, 16, 17, 64, 512};

/* ---- post ------------------------------------------------------------------------------------- */
static void gpu_post_case(th_ctx_t *t, int64_t T, int64_t H, int sq, int strided) {
    th_rng_t *r = th_rng(t);
    mt_seam_in_t in;
    mt_seam_in_make(r, &in, T, H, strided, 0, 0, T > 1);
    char name[128];
    snprintf(name, sizeof name, "post T=%lld H=%lld sqrsum=%d strided=%d", (long long)T, (long long)H, sq, strided);
    th_buf_t x = mt_dev(in.x, (size_t)(T * in.xs) * 2), R = mt_dev(in.R, (size_t)(T * in.rs) * 2);
    th_buf_t post = mt_dev(in.post, (size_t)(4 * T) * 4), comb = mt_dev(in.comb, (size_t)(16 * T) * 4);
    th_buf_t out = mt_dev(NULL, (size_t)(T * in.ros) * 2), sqb = mt_dev(NULL, (size_t)T * 4);
    dsv4_mhc_post_desc_t d = {T, H, in.xs, in.rs, in.ros};
    dsv4_mhc_post_args_t a = {th_ptr(&x),    th_ptr(&R),   th_ptr(&post),
                              th_ptr(&comb), th_ptr(&out), sq ? th_ptr(&sqb) : NULL};
    void *s = th_stream_create(t);
    dsv4_status_t st = dsv4_mhc_post(&d, &a, NULL, 0, DSV4_STREAM(s));
    th_stream_sync_destroy(t, s);
    TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "%s: %s (%s)", name, dsv4_status_string(st), dsv4_last_error());
    uint16_t *got = mt_download(t, &out, "residual_out");
    float *got_sq = mt_download(t, &sqb, "sqrsum");
    mt_dev_unchanged(t, "x", &x, in.x);
    mt_dev_unchanged(t, "residual", &R, in.R);
    mt_dev_unchanged(t, "post", &post, in.post);
    mt_dev_unchanged(t, "comb", &comb, in.comb);
    uint16_t *want = malloc((size_t)(T * in.ros) * 2);
    float *want_sq = malloc((size_t)T * 4);
    dsv4_mhc_post_args_t ha = {in.x, in.R, in.post, in.comb, want, want_sq};
    TH_OK(t, dsv4_mhc_post_ref(&d, &ha));
    if (mt_cmp_bf16(t, name, got, in.ros, want, in.ros, T, NULL, 4, H, 0)) th_note(t, "FAILED case: %s", name);
    if (sq) {
        double worst = 0.0;
        for (int64_t i = 0; i < T; ++i) {
            const double rel = fabs((double)got_sq[i] - want_sq[i]) / (want_sq[i] > 0 ? want_sq[i] : 1.0);
            if (rel > worst) worst = rel;
            if (!(rel <= MT_TOL_SQRSUM))
                TH_CHECK(t, 0, "%s: token %lld sqrsum %.9g, fp64 %.9g (rel %.2e)", name, (long long)i, got_sq[i],
                         want_sq[i], rel);
        }
        if (T >= 512) th_note(t, "%s: sqrsum max relative error %.2e (tol %.0e)", name, worst, MT_TOL_SQRSUM);
    } else {
        for (int64_t i = 0; i < T; ++i)
            TH_CHECK(t, dsv4_f32_bits(got_sq[i]) == 0xFFFFFFFFu, "%s: sqrsum[%lld] written without a pointer", name,
                     (long long)i);
    }
    free(got);
    free(got_sq);
    free(want);
    free(want_sq);
    th_buf_free(&x), th_buf_free(&R), th_buf_free(&post), th_buf_free(&comb), th_buf_free(&out), th_buf_free(&sqb);
    mt_seam_in_free(&in);
}

void test_post_gpu(th_ctx_t *t) {
    int i = 0;
    for (int hi = 0; hi < 3; ++hi)
        for (int ti = 0; ti < 9; ++ti, ++i) gpu_post_case(t, kTs[ti], mc_mhc_hiddens[hi], i % 2, i % 5 == 3);
}

void test_post_gpu_large(th_ctx_t *t) {
    for (int hi = 0; hi < 3; ++hi) {
        gpu_post_case(t, 2048, mc_mhc_hiddens[hi], 1, 0);
        gpu_post_case(t, 8192, mc_mhc_hiddens[hi], hi != 1, 0);
    }
}

/* ---- collapse ---------------------------------------------------------------------------------- */
static void gpu_collapse_case(th_ctx_t *t, int64_t T, int64_t H, int variant, int premix, int norm, int aux,
                              int strided) {
    th_rng_t *r = th_rng(t);
    mt_seam_in_t in;
    mt_seam_in_make(r, &in, T, H, strided, premix, norm, T > 1);
    char name[160];
    snprintf(name, sizeof name, "collapse T=%lld H=%lld %s premix=%d norm=%d aux=%d strided=%d", (long long)T,
             (long long)H, variant ? "V4" : "V4.1", premix, norm, aux, strided);
    const float eps = variant ? 1e-6f : 1e-20f;
    th_buf_t R = mt_dev(in.R, (size_t)(T * in.rs) * 2), pm = mt_dev(in.premix, (size_t)(4 * T) * 4);
    th_buf_t w = mt_dev(in.w, (size_t)H * 2);
    th_buf_t out = mt_dev(NULL, (size_t)(T * in.lis) * 2), ax = mt_dev(NULL, (size_t)(T * in.auxs) * 2);
    dsv4_mhc_collapse_desc_t d = {T, H, variant, eps, in.rs, in.lis, in.auxs};
    dsv4_mhc_collapse_args_t a = {th_ptr(&R), premix ? th_ptr(&pm) : NULL, norm ? th_ptr(&w) : NULL, th_ptr(&out),
                                  aux ? th_ptr(&ax) : NULL};
    void *s = th_stream_create(t);
    dsv4_status_t st = dsv4_mhc_collapse(&d, &a, NULL, 0, DSV4_STREAM(s));
    th_stream_sync_destroy(t, s);
    TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "%s: %s (%s)", name, dsv4_status_string(st), dsv4_last_error());
    uint16_t *got = mt_download(t, &out, "out"), *got_aux = mt_download(t, &ax, "aux");
    mt_dev_unchanged(t, "residual", &R, in.R);
    if (premix) mt_dev_unchanged(t, "pre_mix", &pm, in.premix);
    uint16_t *want = malloc((size_t)(T * in.lis) * 2), *want_aux = malloc((size_t)(T * in.auxs) * 2);
    dsv4_mhc_collapse_args_t ha = {in.R, in.premix, in.w, want, want_aux};
    TH_OK(t, dsv4_mhc_collapse_ref(&d, &ha));
    size_t bad = mt_cmp_bf16(t, name, got, in.lis, want, in.lis, T, NULL, 1, H, norm ? MT_ULP_NORM : 0);
    if (aux) bad += mt_cmp_bf16(t, "aux", got_aux, in.auxs, want_aux, in.auxs, T, NULL, 1, H, 0);
    if (!aux)
        for (int64_t e = 0; e < T * in.auxs; ++e)
            if (got_aux[e] != 0xFFFF) {
                TH_CHECK(t, 0, "%s: aux written without a pointer at %lld", name, (long long)e);
                break;
            }
    if (bad) th_note(t, "FAILED case: %s", name);
    free(got), free(got_aux), free(want), free(want_aux);
    th_buf_free(&R), th_buf_free(&pm), th_buf_free(&w), th_buf_free(&out), th_buf_free(&ax);
    mt_seam_in_free(&in);
}

void test_collapse_gpu(th_ctx_t *t) {
    static const int64_t Ts[6] = {1, 6, 15, 16, 17, 512};
    int i = 0;
    for (int hi = 0; hi < 3; ++hi)
        for (int ti = 0; ti < 6; ++ti, ++i)
            gpu_collapse_case(t, Ts[ti], mc_mhc_hiddens[hi], i % 3 == 2, i % 2, i % 4 != 3, i % 3 != 1, i % 5 == 1);
    gpu_collapse_case(t, 2048, MC_MHC_HIDDEN, DSV4_MHC_V41, 1, 1, 1, 0); /* the final collapse at prefill size */
}

/* ---- fn_bcast ----------------------------------------------------------------------------------- */
void test_fn_bcast_gpu(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    for (int hi = 0; hi < 3; ++hi) {
        const int64_t H = mc_mhc_hiddens[hi];
        float *fn = malloc((size_t)(96 * H) * 4), *want = malloc((size_t)(24 * H) * 4);
        mt_fill_fn(r, fn, 4 * H);
        th_buf_t dfn = mt_dev(fn, (size_t)(96 * H) * 4), dout = mt_dev(NULL, (size_t)(24 * H) * 4);
        dsv4_mhc_fn_bcast_desc_t d = {H};
        dsv4_mhc_fn_bcast_args_t a = {th_ptr(&dfn), th_ptr(&dout)}, ha = {fn, want};
        void *s = th_stream_create(t);
        TH_OK(t, dsv4_mhc_fn_bcast(&d, &a, NULL, 0, DSV4_STREAM(s)));
        th_stream_sync_destroy(t, s);
        float *got = mt_download(t, &dout, "fn_bcast");
        mt_dev_unchanged(t, "fn", &dfn, fn);
        TH_OK(t, dsv4_mhc_fn_bcast_ref(&d, &ha));
        char name[32];
        snprintf(name, sizeof name, "fn_bcast H=%lld", (long long)H);
        mt_cmp_f32_exact(t, name, got, want, 24, (int)H);
        free(fn), free(want), free(got);
        th_buf_free(&dfn), th_buf_free(&dout);
    }
}
