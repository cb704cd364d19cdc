/*
 * CPU tests of the planner and of the element-wise references (post, collapse,
 * fn_bcast) and the gates reference, against known answers and fp64 models. They run
 * in CI without a GPU; every case is small.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "mhc_test.h"
#include "test_mhc.h"

/* ---- the routing table and split geometry --------------------------------------------------- */
/* The batch-invariant route: the tensor-core route with the same split count for every
 * batch size (the auto route and split count change with T). */
void test_plan_batch_invariant(th_ctx_t *t) {
    static const int64_t Ts[] = {1, 5, 15, 16, 17, 64, 512, 2048, 8192};
    static const int64_t Hs[] = {4096, 5120, 7168};
    for (int hi = 0; hi < 3; ++hi)
        for (int bc = 0; bc < 2; ++bc) {
            dsv4_mhc_plan_t alone, pl;
            TH_OK(t, dsv4_mhc_plan(1, Hs[hi], bc, DSV4_MHC_ROUTE_BATCH_INVARIANT, &alone));
            int differs = 0;
            for (int ti = 0; ti < (int)(sizeof Ts / sizeof Ts[0]); ++ti) {
                TH_OK(t, dsv4_mhc_plan(Ts[ti], Hs[hi], bc, DSV4_MHC_ROUTE_AUTO, &pl));
                differs |= pl.route != alone.route || pl.splits != alone.splits;
                TH_OK(t, dsv4_mhc_plan(Ts[ti], Hs[hi], bc, DSV4_MHC_ROUTE_BATCH_INVARIANT, &pl));
                TH_CHECK(t, pl.route == DSV4_MHC_ROUTE_TENSOR_CORE && pl.splits == alone.splits,
                         "T=%lld H=%lld bc=%d: route %d S %d, alone S %d", (long long)Ts[ti], (long long)Hs[hi], bc,
                         pl.route, pl.splits, alone.splits);
            }
            TH_CHECK(t, differs, "H=%lld bc=%d: the auto plan never depends on T here", (long long)Hs[hi], bc);
        }
    dsv4_mhc_plan_t pl;
    TH_EXPECT_STATUS(t, dsv4_mhc_plan(4, 4096, 0, 4, &pl), DSV4_STATUS_INVALID_VALUE);
}

void test_plan_routing(th_ctx_t *t) {
    static const int64_t Ts[] = {0, 1, 5, 6, 12, 15, 16, 17, 64, 512, 2048, 8192};
    /* the models' hidden sizes, and 1152 (no small-T tiling) */
    static const int64_t Hs[] = {MC_MHC_HIDDEN_V4, MC_MHC_HIDDEN, MC_MHC_HIDDEN_PRO, 1152};
    for (size_t hi = 0; hi < 4; ++hi)
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ++ti)
            for (int bc = 0; bc < 2; ++bc) {
                const int64_t T = Ts[ti], H = Hs[hi];
                dsv4_mhc_plan_t pl;
                TH_OK(t, dsv4_mhc_plan(T, H, bc, DSV4_MHC_ROUTE_AUTO, &pl));
                const int tiles = H % 256 == 0;
                const int want_small = tiles && T < 16;
                TH_CHECK(t, pl.route == (want_small ? DSV4_MHC_ROUTE_SMALL_T : DSV4_MHC_ROUTE_TENSOR_CORE),
                         "T=%lld H=%lld bcast=%d: route %d", (long long)T, (long long)H, bc, (int)pl.route);
                size_t flags = 0;
                if (pl.route == DSV4_MHC_ROUTE_SMALL_T) {
                    TH_CHECK(t, pl.splits == H / 256 && pl.tile_n == 6 && pl.threads == 256,
                             "T=%lld H=%lld: geometry (%d, %d, %d), want (6, H/256, 256)", (long long)T, (long long)H,
                             (int)pl.tile_n, (int)pl.splits, (int)pl.threads);
                    const int64_t tpc = pl.tokens_per_cta;
                    TH_CHECK(t, (tpc == 1 || tpc == 2 || tpc == 4 || tpc == 5) && (T + tpc - 1) / tpc <= 3,
                             "tokens_per_cta %lld", (long long)tpc);
                    TH_CHECK(t, pl.ctas == (T + tpc - 1) / tpc * 4 * pl.splits, "ctas %lld", (long long)pl.ctas);
                    flags = (size_t)T * 4 * (size_t)pl.splits * 8 * 8; /* records of 8 tagged words */
                } else {
                    const int64_t nchunks = H / (bc ? 128 : 64), nblk = (T + 31) / 32;
                    TH_CHECK(t, pl.splits >= 1 && pl.splits <= 64 && nchunks % pl.splits == 0,
                             "T=%lld H=%lld bcast=%d: %d splits for %lld chunks", (long long)T, (long long)H, bc,
                             (int)pl.splits, (long long)nchunks);
                    TH_CHECK(t, pl.ctas == nblk * pl.splits && pl.tokens_per_cta == 32 && pl.threads == 256,
                             "ctas %lld", (long long)pl.ctas);
                    /* the mma chain cap (gates_config.h): every tested H has a divisor that meets it */
                    TH_CHECK(t, nchunks / pl.splits <= 40, "T=%lld H=%lld bcast=%d: %lld chunks per CTA", (long long)T,
                             (long long)H, bc, (long long)(nchunks / pl.splits));
                    /* enough CTAs when a split count allows it */
                    if (nblk * 64 >= 256 && nchunks % 64 == 0)
                        TH_CHECK(t, nblk * pl.splits >= 256, "T=%lld H=%lld: only %lld CTAs", (long long)T,
                                 (long long)H, (long long)(nblk * pl.splits));
                }
                size_t ws = flags ? flags : (size_t)pl.splits * (size_t)T * 26 * 4; /* TC: partials */
                size_t hl = 0; /* tensor-core route: fn's bf16 hi / lo rows, [48][K], after the partials */
                if (pl.route == DSV4_MHC_ROUTE_TENSOR_CORE) {
                    hl = (size_t)48 * (size_t)(bc ? H : 4 * H) * 2;
                    ws = (ws + 255) / 256 * 256 + hl;
                }
                TH_CHECK(t, pl.workspace_bytes >= ws && pl.workspace_bytes < ws + 256, "workspace %zu for %zu",
                         pl.workspace_bytes, ws);
            }
    /* spot values documented in docs/mhc.md */
    dsv4_mhc_plan_t pl;
    TH_OK(t, dsv4_mhc_plan(8192, 5120, 0, 0, &pl));
    /* 80 chunks: S = 1 would give 256 CTAs of 80 chunks, above MHC_TC_MAX_CHUNKS_PER_CTA */
    TH_CHECK(t, pl.splits == 2 && pl.ctas == 512, "T=8192 H=5120: S=%d ctas=%lld", (int)pl.splits, (long long)pl.ctas);
    TH_OK(t, dsv4_mhc_plan(2048, 5120, 0, 0, &pl));
    TH_CHECK(t, pl.splits == 4 && pl.ctas == 256, "T=2048 H=5120: S=%d", (int)pl.splits);
    TH_OK(t, dsv4_mhc_plan(512, 5120, 0, 0, &pl));
    TH_CHECK(t, pl.splits == 16 && pl.ctas == 256, "T=512 H=5120: S=%d", (int)pl.splits);
    TH_OK(t, dsv4_mhc_plan(12, 5120, 0, 0, &pl));
    TH_CHECK(t, pl.splits == 20 && pl.tokens_per_cta == 4 && pl.ctas == 240, "T=12: S=%d tpc %d ctas %lld",
             (int)pl.splits, (int)pl.tokens_per_cta, (long long)pl.ctas);
    /* forced routes */
    TH_OK(t, dsv4_mhc_plan(8192, 5120, 0, DSV4_MHC_ROUTE_SMALL_T, &pl));
    TH_CHECK(t, pl.route == DSV4_MHC_ROUTE_SMALL_T, "forced small-T at T=8192");
    TH_OK(t, dsv4_mhc_plan(1, 5120, 0, DSV4_MHC_ROUTE_TENSOR_CORE, &pl));
    TH_CHECK(t, pl.route == DSV4_MHC_ROUTE_TENSOR_CORE, "forced tensor-core at T=1");
    TH_EXPECT_STATUS(t, dsv4_mhc_plan(6, 1152, 0, DSV4_MHC_ROUTE_SMALL_T, &pl), DSV4_STATUS_UNSUPPORTED);
    TH_CHECK(t, strstr(dsv4_last_error(), "1152") != NULL, "message: %s", dsv4_last_error());
}

/* ---- post ------------------------------------------------------------------------------------ */
static void post_ref_call(th_ctx_t *t, int64_t T, int64_t H, const uint16_t *x, const uint16_t *R, const float *post,
                          const float *comb, uint16_t *out, float *sq) {
    dsv4_mhc_post_desc_t d = {T, H, H, 4 * H, 4 * H};
    dsv4_mhc_post_args_t a = {x, R, post, comb, out, sq};
    TH_OK(t, dsv4_mhc_post_ref(&d, &a));
}

void test_post_ref_known(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    const int64_t T = 3, H = 128, n = T * 4 * H;
    uint16_t *x = malloc((size_t)(T * H) * 2), *R = malloc((size_t)n * 2), *out = malloc((size_t)n * 2);
    float post[12], comb[48];
    mt_fill_bf16(r, x, (size_t)(T * H), -6, 3, 0); /* no zeros: exact copies keep their sign */
    mt_fill_bf16(r, R, (size_t)n, -6, 3, 0);
    /* identity comb, zero post: R_new = R */
    memset(post, 0, sizeof post);
    memset(comb, 0, sizeof comb);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) comb[16 * i + 5 * j] = 1.0f;
    post_ref_call(t, T, H, x, R, post, comb, out, NULL);
    mt_cmp_bf16(t, "identity comb, post 0: R_new == R", out, 4 * H, R, 4 * H, T, NULL, 4, H, 0);
    /* zero comb, unit post: every stream is x */
    memset(comb, 0, sizeof comb);
    for (int i = 0; i < 12; ++i) post[i] = 1.0f;
    post_ref_call(t, T, H, x, R, post, comb, out, NULL);
    for (int64_t i = 0; i < T; ++i)
        for (int s = 0; s < 4; ++s)
            mt_cmp_bf16(t, "zero comb, post 1: R_new[s] == x", out + i * 4 * H + s * H, 0, x + i * H, 0, 1, NULL, 1, H,
                        0);
    /* exact small numbers: R_j = j + 1, x = 1, post = k / 2, comb = 0.25: R_new[k] = k/2 + 2.5 */
    for (int64_t e = 0; e < T * H; ++e) x[e] = dsv4_f32_to_bf16(1.0f);
    for (int64_t i = 0; i < T; ++i)
        for (int s = 0; s < 4; ++s)
            for (int64_t h = 0; h < H; ++h) R[i * 4 * H + s * H + h] = dsv4_f32_to_bf16((float)(s + 1));
    for (int i = 0; i < 12; ++i) post[i] = 0.5f * (float)(i % 4);
    for (int i = 0; i < 48; ++i) comb[i] = 0.25f;
    float sq[3];
    post_ref_call(t, T, H, x, R, post, comb, out, sq);
    for (int64_t e = 0; e < n; ++e) {
        const float want = 0.5f * (float)((e / H) % 4) + 2.5f;
        if (dsv4_bf16_to_f32(out[e]) != want) {
            TH_CHECK(t, 0, "exact case: element %lld is %g, want %g", (long long)e, dsv4_bf16_to_f32(out[e]), want);
            break;
        }
    }
    const float want_sq = (float)H * (2.5f * 2.5f + 3.0f * 3.0f + 3.5f * 3.5f + 4.0f * 4.0f);
    for (int i = 0; i < 3; ++i)
        TH_CHECK(t, sq[i] == want_sq, "exact case: sqrsum[%d] = %g, want %g", i, sq[i], want_sq);
    free(x);
    free(R);
    free(out);
}

/* Random inputs against fp64: the fp32 FMA chain rounds once per step, so the stored bf16
 * may differ from the correctly rounded fp64 result by one ulp at a rounding boundary. */
void test_post_ref_random(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    mt_seam_in_t in;
    mt_seam_in_make(r, &in, 5, 512, 0, 0, 0, 1);
    const int64_t T = in.T, H = in.H, n = T * 4 * H;
    uint16_t *out = malloc((size_t)n * 2), *want = malloc((size_t)n * 2);
    float sq[5];
    post_ref_call(t, T, H, in.x, in.R, in.post, in.comb, out, sq);
    size_t not_nearest = 0, beyond = 0;
    for (int64_t i = 0; i < T; ++i) {
        double sqd = 0.0;
        for (int k = 0; k < 4; ++k)
            for (int64_t h = 0; h < H; ++h) {
                double acc = (double)in.post[4 * i + k] * dsv4_bf16_to_f32(in.x[i * H + h]), mag = fabs(acc);
                for (int j = 0; j < 4; ++j) {
                    const double term =
                        (double)in.comb[16 * i + 4 * j + k] * dsv4_bf16_to_f32(in.R[i * 4 * H + j * H + h]);
                    acc += term;
                    mag += fabs(term);
                }
                const int64_t e = i * 4 * H + k * H + h;
                want[e] = dsv4_f32_to_bf16((float)acc);
                const double o = dsv4_bf16_to_f32(out[e]);
                sqd += o * o;
                not_nearest += out[e] != want[e];
                /* The fp32 chain of 5 rounded steps may be off by 5 * 2^-24 of the terms'
                 * magnitude before the bf16 rounding (1 ulp of the result covers that one):
                 * under cancellation this is more than an ulp of the small result. */
                const double bound = ldexp(1.0, (acc != 0.0 ? ilogb(acc) : -126) - 7) + 5.0 * 0x1p-24 * mag;
                if (fabs(o - acc) > bound && beyond++ < 8)
                    TH_CHECK(t, 0, "post vs fp64: token %lld stream %d channel %lld: got %.9g, fp64 %.9g (bound %.3g)",
                             (long long)i, k, (long long)h, o, acc, bound);
            }
        TH_CHECK(t, fabs(sq[i] - sqd) <= MT_TOL_SQRSUM_REF * sqd,
                 "token %lld sqrsum %.9g, fp64 over the stored values %.9g", (long long)i, sq[i], sqd);
    }
    TH_CHECK(t, beyond == 0, "post vs fp64: %zu of %lld outputs beyond the fp32-chain bound", beyond, (long long)n);
    th_note(t, "%zu of %lld outputs differ from the correctly rounded fp64 value (fp32 FMA chain)", not_nearest,
            (long long)n);
    TH_CHECK(t, sq[0] == 0.0f, "zero token: sqrsum %g", sq[0]);
    free(out);
    free(want);
    mt_seam_in_free(&in);
}

/* ---- collapse -------------------------------------------------------------------------------- */
void test_collapse_ref(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    mt_seam_in_t in;
    mt_seam_in_make(r, &in, 4, 256, 0, 1, 1, 0);
    const int64_t T = in.T, H = in.H;
    uint16_t *out = malloc((size_t)(T * H) * 2), *aux = malloc((size_t)(T * H) * 2),
             *want = malloc((size_t)(T * H) * 2);
    dsv4_mhc_collapse_desc_t d = {T, H, DSV4_MHC_V41, 1e-20f, 4 * H, H, H};
    dsv4_mhc_collapse_args_t a = {in.R, NULL, NULL, out, aux};
    /* identity: stream 0 copied exactly (signed zeros included) */
    TH_OK(t, dsv4_mhc_collapse_ref(&d, &a));
    mt_cmp_bf16(t, "identity collapse == stream 0", out, H, in.R, 4 * H, T, NULL, 1, H, 0);
    size_t aux_bad = 0;
    for (int64_t i = 0; i < T; ++i)
        for (int64_t h = 0; h < H; ++h) {
            double s = 0.0;
            for (int j = 0; j < 4; ++j) s += dsv4_bf16_to_f32(in.R[i * 4 * H + j * H + h]);
            const uint16_t w = dsv4_f32_to_bf16((float)(s / 4)); /* the fp32 sum of 4 bf16 of close range */
            const int32_t d16 = (int32_t)(aux[i * H + h] & 0x7FFF) - (int32_t)(w & 0x7FFF);
            aux_bad += s != 0.0 && (abs(d16) > 1 || ((aux[i * H + h] ^ w) & 0x8000));
        }
    TH_CHECK(t, aux_bad == 0, "aux: %zu values further than 1 ulp from the fp64 stream mean", aux_bad);
    /* pre-mix and norm, V4.1 and V4, against fp64 within MT_ULP_NORM_FP64 */
    for (int variant = 0; variant < 2; ++variant) {
        d.variant = variant;
        d.norm_eps = variant ? 1e-6f : 1e-20f;
        a.pre_mix = in.premix;
        a.norm_weight = in.w;
        a.aux = NULL;
        TH_OK(t, dsv4_mhc_collapse_ref(&d, &a));
        for (int64_t i = 0; i < T; ++i) {
            double ss = 0.0;
            uint16_t yb[256];
            for (int64_t h = 0; h < H; ++h) {
                double v = 0.0;
                for (int j = 0; j < 4; ++j)
                    v += (double)in.premix[4 * i + j] * dsv4_bf16_to_f32(in.R[i * 4 * H + j * H + h]);
                yb[h] = dsv4_f32_to_bf16((float)v);
                const double q = variant ? v : dsv4_bf16_to_f32(yb[h]);
                ss += q * q;
            }
            const double rn = 1.0 / sqrt(ss / H + (double)d.norm_eps);
            for (int64_t h = 0; h < H; ++h)
                want[i * H + h] = dsv4_f32_to_bf16((float)(dsv4_bf16_to_f32(yb[h]) * rn * dsv4_bf16_to_f32(in.w[h])));
        }
        mt_cmp_bf16(t, variant ? "V4 collapse+norm vs fp64" : "V4.1 collapse+norm vs fp64", out, H, want, H, T, NULL, 1,
                    H, MT_ULP_NORM_FP64);
    }
    free(out);
    free(aux);
    free(want);
    mt_seam_in_free(&in);
}

/* ---- fn_bcast ---------------------------------------------------------------------------------- */
void test_fn_bcast_ref(th_ctx_t *t) {
    const int64_t H = 256;
    float *fn = malloc((size_t)(24 * 4 * H) * sizeof(float)), *fb = malloc((size_t)(24 * H) * sizeof(float));
    for (int64_t m = 0; m < 24; ++m)
        for (int s = 0; s < 4; ++s)
            for (int64_t h = 0; h < H; ++h) fn[m * 4 * H + s * H + h] = (float)(1 << s) * (float)(m + 1);
    dsv4_mhc_fn_bcast_desc_t d = {H};
    dsv4_mhc_fn_bcast_args_t a = {fn, fb};
    TH_OK(t, dsv4_mhc_fn_bcast_ref(&d, &a));
    for (int64_t m = 0; m < 24; ++m)
        TH_CHECK(t, fb[m * H + 7] == 15.0f * (float)(m + 1) && fb[m * H + H - 1] == 15.0f * (float)(m + 1),
                 "fn_bcast[%lld] = %g", (long long)m, fb[m * H + 7]);
    /* order: (a + b) + c + d in fp32 */
    fn[0] = 1.0f, fn[H] = 1e-8f, fn[2 * H] = -1.0f, fn[3 * H] = 1e-8f;
    TH_OK(t, dsv4_mhc_fn_bcast_ref(&d, &a));
    TH_CHECK(t, fb[0] == ((1.0f + 1e-8f) + -1.0f) + 1e-8f, "stream order: %g", fb[0]);
    free(fn);
    free(fb);
}

/* ---- gates reference ------------------------------------------------------------------------------ */
void test_gates_ref(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    mt_seam_in_t in;
    mt_seam_in_make(r, &in, 6, 256, 0, 0, 0, 1);
    const int64_t T = in.T, H = in.H, K = 4 * H;
    float post[24], comb[96], pre[24], mix[144];
    for (int v4_eps = 0; v4_eps < 2; ++v4_eps) {
        dsv4_mhc_gates_desc_t d = {T, H, 0, 0, mt_gate_params(v4_eps), 4 * H};
        dsv4_mhc_gates_args_t a = {in.R, in.fn, in.scale, in.base, NULL, post, comb, pre, mix, NULL};
        TH_OK(t, dsv4_mhc_gates_ref(&d, &a));
        double *X = malloc((size_t)(T * K) * sizeof(double));
        for (int64_t e = 0; e < T * K; ++e) X[e] = dsv4_bf16_to_f32(in.R[e]);
        mt_check_gates(t, v4_eps ? "gates ref (V4 eps)" : "gates ref (V4.1 eps)", T, NULL, X, NULL, K, (double)K, in.fn,
                       in.scale, in.base, &d.gate, MT_TOL_MIX, mix, post, comb, pre);
        for (int m = 0; m < 24; ++m) TH_CHECK(t, mix[m] == 0.0f, "zero token: mix[%d] = %g", m, mix[m]);
        free(X);
    }
    /* known answer: fn = 0, base = 0: pre = 0.5 + eps, post = 1, comb uniform 1/4 */
    memset(in.fn, 0, (size_t)(24 * K) * sizeof(float));
    memset(in.base, 0, sizeof in.base);
    dsv4_mhc_gates_desc_t d = {T, H, 0, 0, mt_gate_params(0), 4 * H};
    dsv4_mhc_gates_args_t a = {in.R, in.fn, in.scale, in.base, NULL, post, comb, pre, NULL, NULL};
    TH_OK(t, dsv4_mhc_gates_ref(&d, &a));
    for (int i = 0; i < 4 * T; ++i) {
        TH_CHECK(t, pre[i] == 0.5f + 1e-6f && post[i] == 1.0f, "fn = 0: pre %.9g post %.9g", pre[i], post[i]);
    }
    for (int i = 0; i < 16 * T; ++i) TH_CHECK(t, fabsf(comb[i] - 0.25f) < 1e-6f, "fn = 0: comb %.9g", comb[i]);
    /* a precomputed sqrsum replaces the projection's own */
    float sq[6], post2[24], comb2[96], pre2[24];
    for (int64_t i = 0; i < T; ++i) sq[i] = 4.0f * (float)(i + 1);
    mt_fill_fn(r, in.fn, K);
    a.post = post, a.comb = comb, a.pre = pre, a.sqrsum = NULL;
    a.mix = mix;
    TH_OK(t, dsv4_mhc_gates_ref(&d, &a));
    a.post = post2, a.comb = comb2, a.pre = pre2, a.sqrsum = sq;
    TH_OK(t, dsv4_mhc_gates_ref(&d, &a));
    int differs = 0;
    for (int i = 0; i < 4 * T; ++i) differs |= pre[i] != pre2[i];
    TH_CHECK(t, differs, "sqrsum input had no effect");
    mt_seam_in_free(&in);
}
