/*
 * dsv4_mhc_fn_split and the fn_split input of gates / pre / seam.
 *
 * CPU: the reference against known answers and against an independent derivation of the
 * split written here (the two bf16 neighbours of a value compared in fp64, ties to the even
 * pattern; no numerics.h), on special values (zeros, subnormals, bf16 ties and carries,
 * the overflow threshold, inf, NaN) and random values from the printed seed; hi + lo
 * reproduces fn within max(2^-17 |fn|, 2^-134) wherever hi is finite.
 * GPU: the kernel bit-equal to the reference (H = 4096 / 5120 / 7168, with and without
 * broadcast, special values included), and a seam / gates call run with and without
 * fn_split giving the same bits in every output (outputs and workspace poisoned before
 * each run, so a kernel that read the workspace's split instead of fn_split would show; the
 * workspace's split region must stay poisoned when fn_split is given, and equal the op's
 * output when it is not).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "mhc_gpu.h"
#include "mhc_test.h"
#include "test_mhc.h"

/* ---- an independent split ----------------------------------------------------------------- */
static double bf16_bits_to_double(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
}

/* Nearest bf16 of f by comparing its two neighbours (toward and away from zero) in fp64;
 * ties to the even pattern; the neighbour past the largest finite bf16 is 2^128 (IEEE
 * rounds as if the exponent were unbounded, then overflows to inf); NaN -> 0x7FFF. */
static uint16_t indep_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (f != f) return 0x7FFF;
    if (isinf(f)) return (uint16_t)(u >> 16);
    const uint16_t down = (uint16_t)(u >> 16), up = (uint16_t)(down + 1);
    const double a = fabs((double)f), vd = fabs(bf16_bits_to_double(down));
    const double vu = (up & 0x7FFF) == 0x7F80 ? ldexp(1.0, 128) : fabs(bf16_bits_to_double(up));
    if (a - vd < vu - a) return down;
    if (a - vd > vu - a) return up;
    return (down & 1) ? up : down;
}

/* lo: the difference f - hi in fp64 (exact for finite f and hi; inf / NaN arithmetic
 * otherwise), to fp32 (exact where finite), then its nearest bf16. */
static uint16_t indep_lo(float f, uint16_t hi) { return indep_bf16((float)((double)f - bf16_bits_to_double(hi))); }

/* Fills fn [24, K]: row 0 starts with the special values, the rest cycles through random
 * bit patterns (every class, NaN and inf included), model-like N(0, 1/K) values, exact bf16
 * ties and near-ties around them. */
static const uint32_t kSpecials[] = {
    0x00000000u, 0x80000000u,                           /* +0, -0                                 */
    0x00000001u, 0x80000001u, 0x00018000u, 0x00008000u, /* subnormals: smallest, a tie, exact     */
    0x007FFFFFu, 0x00800000u, 0x807FFF7Fu,              /* largest subnormal, smallest normal      */
    0x3F808000u, 0x3F818000u, 0x3F80C000u, 0x3F807FFFu, /* ties to even (down, up), above, below   */
    0x3FFFFFFFu, 0xBF7FFFFFu,                           /* rounding up carries into the exponent   */
    0x7F7F7FFFu, 0x7F7F8000u, 0x7F7FFFFFu, 0xFF7FFFFFu, /* below / at the overflow threshold, max  */
    0x7E967699u, 0xF1000000u,                           /* large: 1e38, -2^99                     */
    0x7F800000u, 0xFF800000u,                           /* +-inf                                  */
    0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7FBFFFFFu, /* NaNs: quiet, negative, signalling       */
};
#define N_SPECIALS ((int64_t)(sizeof kSpecials / sizeof kSpecials[0]))

static void fill_split_input(th_rng_t *r, float *fn, int64_t K) {
    for (int64_t i = 0; i < 24 * K; ++i) {
        uint32_t u;
        switch (i % 5) {
        case 0: u = th_rng_u32(r); break;
        case 1: {
            const float v = (float)(th_rng_normal(r) / sqrt((double)K));
            memcpy(&u, &v, sizeof u);
            break;
        }
        case 2: u = (th_rng_u32(r) & 0xFFFF0000u) | 0x8000u; break;                                  /* a tie         */
        case 3: u = (th_rng_u32(r) & 0xFFFF0000u) | (0x7FFFu + (i / 5) % 3); break;                  /* near a tie */
        default: u = (th_rng_u32(r) & 0x807FFFFFu) | ((uint32_t)th_rng_range(r, 0, 3) << 23); break; /* tiny */
        }
        if (i < N_SPECIALS) u = kSpecials[i];
        memcpy(&fn[i], &u, sizeof u);
    }
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Checks a split [48, K] of fn against the independent formulas; returns mismatches. */
static int64_t check_split(th_ctx_t *t, const char *what, const float *fn, const uint16_t *hl, int64_t K) {
    int64_t bad = 0;
    for (int64_t i = 0; i < 24 * K; ++i) {
        const uint16_t hi = indep_bf16(fn[i]), lo = indep_lo(fn[i], hi);
        if (hl[i] == hi && hl[24 * K + i] == lo) continue;
        if (bad++ < 8)
            TH_CHECK(t, 0, "%s: fn[%lld][%lld] = %.9g (0x%08X): hi 0x%04X lo 0x%04X, want 0x%04X 0x%04X", what,
                     (long long)(i / K), (long long)(i % K), (double)fn[i], (unsigned)f32_bits(fn[i]), (unsigned)hl[i],
                     (unsigned)hl[24 * K + i], (unsigned)hi, (unsigned)lo);
    }
    if (bad) TH_CHECK(t, 0, "%s: %lld of %lld values split differently", what, (long long)bad, (long long)(24 * K));
    return bad;
}

void test_fn_split_ref(th_ctx_t *t) {
    /* known answers */
    static const uint32_t ka[][3] = {
        {0x3F808000u, 0x3F80, 0x3B80}, /* 1 + 2^-8: tie, even down; lo = 2^-8                   */
        {0x3F818000u, 0x3F82, 0xBB80}, /* tie, odd: up; lo = -2^-8                              */
        {0x3F80C000u, 0x3F81, 0xBB00}, /* above the tie: up; lo = -2^-9                         */
        {0x3FFFFFFFu, 0x4000, 0xB400}, /* 2 - 2^-23: carries into the exponent; lo = -2^-23     */
        {0x7F7F7FFFu, 0x7F7F, 0x7B00}, /* just below the overflow threshold: finite            */
        {0x7F7F8000u, 0x7F80, 0xFF80}, /* at it (tie, odd): inf; lo = -inf                      */
        {0x7F7FFFFFu, 0x7F80, 0xFF80}, /* FLT_MAX                                               */
        {0x7F800000u, 0x7F80, 0x7FFF}, /* inf: lo = bf16(inf - inf) = NaN                       */
        {0xFF800000u, 0xFF80, 0x7FFF}, /* -inf                                                  */
        {0xFFC00001u, 0x7FFF, 0x7FFF}, /* NaN: canonical                                        */
        {0x80000000u, 0x8000, 0x0000}, /* -0: lo = -0 - -0 = +0                                 */
        {0x00018000u, 0x0002, 0x8000}, /* subnormal tie, odd: up; lo = -2^-134 -> -0 (tie, even) */
        {0x007FFFFFu, 0x0080, 0x8000}, /* largest subnormal rounds to FLT_MIN; lo = -2^-149 -> -0 */
    };
    const int64_t H = 128, K = 4 * H;
    float *fn = calloc((size_t)(24 * K), sizeof(float));
    uint16_t *hl = malloc((size_t)(48 * K) * 2);
    for (size_t i = 0; i < sizeof ka / sizeof ka[0]; ++i) memcpy(&fn[i], &ka[i][0], 4);
    dsv4_mhc_fn_split_desc_t d = {H, 0};
    dsv4_mhc_fn_split_args_t a = {fn, hl};
    TH_OK(t, dsv4_mhc_fn_split_ref(&d, &a));
    for (size_t i = 0; i < sizeof ka / sizeof ka[0]; ++i)
        TH_CHECK(t, hl[i] == ka[i][1] && hl[24 * K + i] == ka[i][2], "0x%08X: hi 0x%04X lo 0x%04X, want 0x%04X 0x%04X",
                 (unsigned)ka[i][0], (unsigned)hl[i], (unsigned)hl[24 * K + i], (unsigned)ka[i][1], (unsigned)ka[i][2]);
    free(fn);
    free(hl);

    /* random and special values, both K: bits against the independent split, hi + lo ~ fn */
    th_rng_t *r = th_rng(t);
    for (int bc = 0; bc < 2; ++bc) {
        const int64_t Hc = bc ? 256 : 128, Kc = bc ? Hc : 4 * Hc;
        fn = malloc((size_t)(24 * Kc) * sizeof(float));
        hl = malloc((size_t)(48 * Kc) * 2);
        fill_split_input(r, fn, Kc);
        memset(hl, 0xA5, (size_t)(48 * Kc) * 2);
        dsv4_mhc_fn_split_desc_t dc = {Hc, bc};
        dsv4_mhc_fn_split_args_t ac = {fn, hl};
        TH_OK(t, dsv4_mhc_fn_split_ref(&dc, &ac));
        check_split(t, bc ? "fn_split ref broadcast" : "fn_split ref", fn, hl, Kc);
        double worst_rel = 0.0;
        int64_t n_rel = 0, bad = 0;
        for (int64_t i = 0; i < 24 * Kc; ++i) {
            const double f = fn[i], h = dsv4_bf16_to_f32(hl[i]), l = dsv4_bf16_to_f32(hl[24 * Kc + i]);
            if (!isfinite(f) || !isfinite(h)) continue;
            const double err = fabs(h + l - f), tol = fmax(ldexp(fabs(f), -17), ldexp(1.0, -134));
            if (!(err <= tol) && bad++ < 8)
                TH_CHECK(t, 0, "fn = %.9g (0x%08X): hi + lo = %.17g, error %.3g > %.3g", f, (unsigned)f32_bits(fn[i]),
                         h + l, err, tol);
            if (fabs(f) >= ldexp(1.0, -117)) { /* normal, and lo's rounding cannot be subnormal */
                worst_rel = fmax(worst_rel, err / fabs(f));
                ++n_rel;
            }
        }
        TH_CHECK(t, worst_rel <= ldexp(1.0, -16), "hi + lo relative error %.3g > 2^-16", worst_rel);
        th_note(t, "K=%lld: hi + lo vs fn max relative error %.3g (2^%.2f) over %lld values >= 2^-117", (long long)Kc,
                worst_rel, worst_rel > 0 ? log2(worst_rel) : -999.0, (long long)n_rel);
        free(fn);
        free(hl);
    }
}

/* ---- GPU: the kernel against the reference -------------------------------------------------- */
void test_fn_split_gpu(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    for (int hi = 0; hi < 3; ++hi)
        for (int bc = 0; bc < 2; ++bc) {
            const int64_t H = mc_mhc_hiddens[hi], K = bc ? H : 4 * H;
            char name[64];
            snprintf(name, sizeof name, "fn_split H=%lld broadcast=%d", (long long)H, bc);
            float *fn = malloc((size_t)(24 * K) * 4);
            uint16_t *want = malloc((size_t)(48 * K) * 2);
            fill_split_input(r, fn, K);
            th_buf_t dfn = mt_dev(fn, (size_t)(24 * K) * 4), dout = mt_dev(NULL, (size_t)(48 * K) * 2);
            dsv4_mhc_fn_split_desc_t d = {H, bc};
            dsv4_mhc_fn_split_args_t a = {th_ptr(&dfn), th_ptr(&dout)}, ha = {fn, want};
            void *s = th_stream_create(t);
            TH_OK(t, dsv4_mhc_fn_split(&d, &a, NULL, 0, DSV4_STREAM(s)));
            th_stream_sync_destroy(t, s);
            uint16_t *got = mt_download(t, &dout, name);
            mt_dev_unchanged(t, "fn", &dfn, fn);
            TH_OK(t, dsv4_mhc_fn_split_ref(&d, &ha));
            if (th_cmp_bytes(t, name, got, want, (size_t)(48 * K) * 2)) {
                check_split(t, name, fn, got, K); /* decodes the mismatches */
                th_note(t, "FAILED case: %s", name);
            }
            free(fn), free(want), free(got);
            th_buf_free(&dfn), th_buf_free(&dout);
        }
}

/* ---- GPU: calls with and without fn_split ---------------------------------------------------- */
/* fn [24, K] on the device -> its split on the device (the op under test), checked against
 * the reference; *host receives the split (malloc'd) to check it unchanged later. */
static th_buf_t make_split(th_ctx_t *t, const th_buf_t *dfn, const float *fn, int64_t H, int bc, uint16_t **host) {
    const int64_t K = bc ? H : 4 * H;
    th_buf_t out = mt_dev(NULL, (size_t)(48 * K) * 2);
    dsv4_mhc_fn_split_desc_t d = {H, bc};
    dsv4_mhc_fn_split_args_t a = {th_ptr(dfn), th_ptr(&out)};
    void *s = th_stream_create(t);
    TH_OK(t, dsv4_mhc_fn_split(&d, &a, NULL, 0, DSV4_STREAM(s)));
    th_stream_sync_destroy(t, s);
    uint16_t *want = malloc((size_t)(48 * K) * 2);
    *host = mt_download(t, &out, "fn_split");
    dsv4_mhc_fn_split_args_t ha = {fn, want};
    TH_OK(t, dsv4_mhc_fn_split_ref(&d, &ha));
    if (*host) th_cmp_bytes(t, "fn_split vs reference", *host, want, (size_t)(48 * K) * 2);
    free(want);
    return out;
}

/* On the tensor-core route the workspace ends with the per-call fn split's rows
 * (dsv4_mhc_plan_t): after a call without fn_split they must equal the op's; after a call
 * with fn_split they must still hold their 0xFF poison (no per-call split). */
static void ws_split_check(th_ctx_t *t, const th_buf_t *ws, const uint16_t *split, int64_t K, int given) {
    const size_t n = (size_t)(48 * K) * 2;
    uint8_t *w = mt_download(t, ws, "workspace");
    TH_CHECK(t, ws->bytes >= n, "workspace %zu bytes < the split's %zu", ws->bytes, n);
    if (w && split && ws->bytes >= n && !given)
        th_cmp_bytes(t, "workspace split (per call) vs dsv4_mhc_fn_split", w + ws->bytes - n, split, n);
    if (w && ws->bytes >= n && given) {
        size_t written = 0;
        for (size_t i = ws->bytes - n; i < ws->bytes; ++i) written += w[i] != 0xFF;
        TH_CHECK(t, written == 0,
                 "with fn_split, %zu bytes of the workspace's split region were written (the per-call split ran)",
                 written);
    }
    free(w);
}

static void seam_with_split(th_ctx_t *t, int64_t T, int route) {
    const int64_t H = MC_MHC_HIDDEN;
    mt_seam_in_t in;
    mt_seam_in_make(th_rng(t), &in, T, H, 0, 1, 1, 1);
    const dsv4_mhc_seam_desc_t desc = {T, H, DSV4_MHC_V41, route, mt_gate_params(0), 1e-20f, H, 4 * H, 4 * H, H, H};
    dsv4_mhc_plan_t pl;
    TH_OK(t, dsv4_mhc_plan(T, H, 0, route, &pl));
    char name[128];
    snprintf(name, sizeof name, "seam V4.1 T=%lld H=%lld route=%s%s with / without fn_split", (long long)T,
             (long long)H, pl.route == DSV4_MHC_ROUTE_SMALL_T ? "small-T" : "tensor-core", route ? " (forced)" : "");
    const int before = th_failed(t);
    dseam_t d;
    dseam_make(&d, &in, &desc, 1);
    uint16_t *hsplit = NULL;
    th_buf_t split = make_split(t, &d.fn, in.fn, H, 0, &hsplit);
    seam_host_t o[2];
    memset(o, 0, sizeof o);
    th_buf_t *poison[] = {&d.R_out, &d.post_out, &d.comb_out, &d.pre_out, &d.li, &d.aux, &d.mix, &d.ws};
    for (int k = 0; k < 2; ++k) {
        for (size_t i = 0; i < sizeof poison / sizeof poison[0]; ++i) th_buf_poison(poison[i], 0xFF);
        d.args.fn_split = k ? (const uint16_t *)th_ptr(&split) : NULL;
        const dsv4_status_t st = dseam_run(t, &d, &desc);
        TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "%s (%s): %s (%s)", name, k ? "with" : "without", dsv4_status_string(st),
                 dsv4_last_error());
        dseam_download(t, &d, &o[k]);
        dseam_inputs_unchanged(t, &d, &in);
        if (pl.route == DSV4_MHC_ROUTE_TENSOR_CORE) ws_split_check(t, &d.ws, hsplit, 4 * H, k);
    }
    if (hsplit) mt_dev_unchanged(t, "fn_split", &split, hsplit);
    if (o[0].R_out && o[1].R_out) {
        mt_cmp_bf16(t, "residual_out with fn_split", o[1].R_out, 4 * H, o[0].R_out, 4 * H, T, NULL, 4, H, 0);
        mt_cmp_bf16(t, "layer_input with fn_split", o[1].li, H, o[0].li, H, T, NULL, 1, H, 0);
        mt_cmp_bf16(t, "aux with fn_split", o[1].aux, H, o[0].aux, H, T, NULL, 1, H, 0);
        mt_cmp_f32_exact(t, "post_out with fn_split", o[1].post, o[0].post, T, 4);
        mt_cmp_f32_exact(t, "comb_out with fn_split", o[1].comb, o[0].comb, T, 16);
        mt_cmp_f32_exact(t, "pre_out with fn_split", o[1].pre, o[0].pre, T, 4);
        mt_cmp_f32_exact(t, "mix with fn_split", o[1].mix, o[0].mix, T, 24);
    }
    if (th_failed(t) != before) th_note(t, "FAILED case: %s", name);
    seam_host_free(&o[0]);
    seam_host_free(&o[1]);
    free(hsplit);
    th_buf_free(&split);
    dseam_free(&d);
    mt_seam_in_free(&in);
}

static void gates_with_split(th_ctx_t *t, int64_t T, int64_t H, int bc, int route) {
    mt_seam_in_t in;
    mt_seam_in_make(th_rng(t), &in, T, H, 0, 0, 0, 1);
    const int64_t K = bc ? H : 4 * H;
    const uint16_t *e = bc ? in.x : in.R;
    float *fnb = mt_fn_bcast_of(t, &in, H);
    const float *fn = bc ? fnb : in.fn;
    dsv4_mhc_plan_t pl;
    TH_OK(t, dsv4_mhc_plan(T, H, bc, route, &pl));
    char name[128];
    snprintf(name, sizeof name, "gates T=%lld H=%lld broadcast=%d route=%s%s with / without fn_split", (long long)T,
             (long long)H, bc, pl.route == DSV4_MHC_ROUTE_SMALL_T ? "small-T" : "tensor-core",
             route ? " (forced)" : "");
    const int before = th_failed(t);
    const dsv4_mhc_gates_desc_t d = {T, H, bc, route, mt_gate_params(1), (bc ? H : 4 * H)};
    size_t wsb = 0;
    TH_OK(t, dsv4_mhc_gates_workspace_size(&d, &wsb));
    th_buf_t res = mt_dev(e, (size_t)(T * K) * 2), dfn = mt_dev(fn, (size_t)(24 * K) * 4);
    th_buf_t sc = mt_dev(in.scale, 12), ba = mt_dev(in.base, 96);
    th_buf_t post = mt_dev(NULL, (size_t)(16 * T)), comb = mt_dev(NULL, (size_t)(64 * T));
    th_buf_t pre = mt_dev(NULL, (size_t)(16 * T)), mix = mt_dev(NULL, (size_t)(96 * T)), ws = mt_dev(NULL, wsb);
    uint16_t *hsplit = NULL;
    th_buf_t split = make_split(t, &dfn, fn, H, bc, &hsplit);
    float *got[2][4];
    memset(got, 0, sizeof got);
    th_buf_t *outs[] = {&post, &comb, &pre, &mix};
    for (int k = 0; k < 2; ++k) {
        for (int i = 0; i < 4; ++i) th_buf_poison(outs[i], 0xFF);
        th_buf_poison(&ws, 0xFF);
        dsv4_mhc_gates_args_t a = {th_ptr(&res),  th_ptr(&dfn),
                                   th_ptr(&sc),   th_ptr(&ba),
                                   NULL,          th_ptr(&post),
                                   th_ptr(&comb), th_ptr(&pre),
                                   th_ptr(&mix),  k ? (const uint16_t *)th_ptr(&split) : NULL};
        void *s = th_stream_create(t);
        const dsv4_status_t st = dsv4_mhc_gates(&d, &a, th_ptr(&ws), wsb, DSV4_STREAM(s));
        th_stream_sync_destroy(t, s);
        TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "%s (%s): %s (%s)", name, k ? "with" : "without", dsv4_status_string(st),
                 dsv4_last_error());
        for (int i = 0; i < 4; ++i) got[k][i] = mt_download(t, outs[i], "gates output");
        mt_dev_unchanged(t, "residual", &res, e);
        mt_dev_unchanged(t, "fn", &dfn, fn);
        th_buf_guards_ok(t, &ws, "workspace");
        if (pl.route == DSV4_MHC_ROUTE_TENSOR_CORE) ws_split_check(t, &ws, hsplit, K, k);
    }
    if (hsplit) mt_dev_unchanged(t, "fn_split", &split, hsplit);
    static const char *names[4] = {"post with fn_split", "comb with fn_split", "pre with fn_split",
                                   "mix with fn_split"};
    static const int widths[4] = {4, 16, 4, 24};
    for (int i = 0; i < 4; ++i)
        if (got[0][i] && got[1][i]) mt_cmp_f32_exact(t, names[i], got[1][i], got[0][i], T, widths[i]);
    /* and the gates are real numbers, not a NaN-for-NaN match of two broken runs */
    if (got[1][1]) {
        int64_t nonfinite = 0;
        for (int64_t i = 0; i < 16 * T; ++i) nonfinite += !isfinite(got[1][1][i]);
        TH_CHECK(t, nonfinite == 0, "%s: %lld non-finite comb values", name, (long long)nonfinite);
    }
    if (th_failed(t) != before) th_note(t, "FAILED case: %s", name);
    for (int k = 0; k < 2; ++k)
        for (int i = 0; i < 4; ++i) free(got[k][i]);
    th_buf_t *bufs[] = {&res, &dfn, &sc, &ba, &post, &comb, &pre, &mix, &ws, &split};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) th_buf_free(bufs[i]);
    free(hsplit), free(fnb);
    mt_seam_in_free(&in);
}

void test_fn_split_calls_gpu(th_ctx_t *t) {
    seam_with_split(t, 64, DSV4_MHC_ROUTE_TENSOR_CORE);
    seam_with_split(t, 512, DSV4_MHC_ROUTE_TENSOR_CORE);
    seam_with_split(t, 6, DSV4_MHC_ROUTE_AUTO); /* small-T: fn_split is ignored */
    gates_with_split(t, 64, MC_MHC_HIDDEN, 0, DSV4_MHC_ROUTE_TENSOR_CORE);
    gates_with_split(t, 40, MC_MHC_HIDDEN_PRO, 1, DSV4_MHC_ROUTE_AUTO); /* broadcast: K = H */
}
