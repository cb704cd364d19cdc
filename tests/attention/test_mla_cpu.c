/*
 * CPU tests of sparse MLA: the fp64 references on known answers and invariants, decode
 * reference == prefill reference on the same rows, host planning (config, split count,
 * workspace), and bad input on every public function. All small: CI has 2 cores.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/mla_host.h"
#include "common/kv_format.h"
#include "dsv4/numerics.h"
#include "mla_case.h"
#include "test_mla.h"

/* ---- known answers on the prefill reference -------------------------------------- */

typedef struct {
    uint16_t kv[4 * 512];
    uint16_t q[16 * 512];
    uint16_t out[16 * 512];
    double ref[16 * 512];
    int32_t ids[8], lens[1];
    float sink[16];
} tiny_t;

/* One token, 16 heads, q = 0 so every valid key scores 0 (equal weights). Row k of kv
 * holds the value 2^k in every dim. */
static void tiny_run(th_ctx_t *t, tiny_t *x, int nids, const int32_t *ids, int len, const float *sink) {
    dsv4_sparse_mla_prefill_desc_t d;
    memset(&d, 0, sizeof d);
    d.num_tokens = 1;
    d.num_heads = 16;
    MLA_DENSE_QO(&d);
    d.kv_rows = 4;
    d.kv_stride = 512;
    d.width = nids;
    d.ids_stride = nids;
    memset(x->q, 0, sizeof x->q);
    for (int k = 0; k < 4; ++k)
        for (int i = 0; i < 512; ++i) x->kv[k * 512 + i] = dsv4_f32_to_bf16((float)(1 << k));
    memcpy(x->ids, ids, (size_t)nids * sizeof(int32_t));
    x->lens[0] = len;
    dsv4_sparse_mla_prefill_args_t a;
    memset(&a, 0, sizeof a);
    a.q = x->q;
    a.kv = x->kv;
    a.ids = x->ids;
    a.lens = x->lens;
    a.sink = sink;
    a.out = x->out;
    a.ref_out = x->ref;
    TH_OK(t, dsv4_sparse_mla_prefill_ref(&d, &a));
}

static void expect_all(th_ctx_t *t, const tiny_t *x, double want, const char *what) {
    for (int i = 0; i < 16 * 512; ++i)
        if (fabs(x->ref[i] - want) > 1e-12 || x->out[i] != dsv4_f32_to_bf16((float)want)) {
            th_fail(t, __FILE__, __LINE__, "%s: element %d (head %d dim %d) is %.17g (bf16 %g), expected %g", what, i,
                    i / 512, i % 512, x->ref[i], dsv4_bf16_to_f32(x->out[i]), want);
            return;
        }
}

static void test_ref_known_answers(th_ctx_t *t) {
    tiny_t *x = calloc(1, sizeof *x);
    float sink[16];
    const int32_t one[1] = {2};
    tiny_run(t, x, 1, one, 1, NULL);
    expect_all(t, x, 4.0, "one key -> its row");
    const int32_t dup[3] = {0, 0, 3}; /* a list, not a set: row 0 counts twice */
    tiny_run(t, x, 3, dup, 3, NULL);
    expect_all(t, x, (1.0 + 1.0 + 8.0) / 3.0, "duplicates counted twice");
    const int32_t mixed[6] = {-1, 1, 4, 99, INT32_MIN, 1}; /* invalid ids skipped */
    tiny_run(t, x, 6, mixed, 6, NULL);
    expect_all(t, x, 2.0, "invalid and out-of-range ids skipped");
    const int32_t pad[4] = {1, 3, 0, 0}; /* only the first lens entries count */
    tiny_run(t, x, 4, pad, 2, NULL);
    expect_all(t, x, 5.0, "entries past lens ignored");
    tiny_run(t, x, 4, pad, 100, NULL); /* lens beyond width clamps to width */
    expect_all(t, x, (2.0 + 8.0 + 1.0 + 1.0) / 4.0, "lens clamped to width");
    for (int h = 0; h < 16; ++h) sink[h] = 0.0f; /* e^0 = one extra unit of weight */
    tiny_run(t, x, 1, one, 1, sink);
    expect_all(t, x, 2.0, "sink 0 halves a single key");
    for (int h = 0; h < 16; ++h) sink[h] = (float)log(3.0);
    tiny_run(t, x, 1, one, 1, sink);
    for (int i = 0; i < 16 * 512; ++i)
        if (fabs(x->ref[i] - 4.0 / (1.0 + exp((double)(float)log(3.0)))) > 1e-12) {
            th_fail(t, __FILE__, __LINE__, "sink ln 3: element %d is %.17g", i, x->ref[i]);
            break;
        }
    for (int h = 0; h < 16; ++h) sink[h] = -INFINITY;
    tiny_run(t, x, 1, one, 1, sink);
    expect_all(t, x, 4.0, "sink -inf removes the term");
    for (int h = 0; h < 16; ++h) sink[h] = 1.5f;
    const int32_t none[2] = {-1, 7};
    tiny_run(t, x, 2, none, 2, sink);
    expect_all(t, x, 0.0, "all-invalid list with a finite sink gives zeros");
    tiny_run(t, x, 2, none, 0, NULL);
    expect_all(t, x, 0.0, "empty list gives zeros");
    tiny_run(t, x, 2, pad, -3, sink);
    expect_all(t, x, 0.0, "negative lens gives zeros");
    free(x);
}

/* ---- decode reference == prefill reference on the dequantized rows ---------------- */

/* Rows of the workspace: main slots at [0, Sm), extra slots at [Sm, Sm + Se). */
static void decode_vs_prefill(th_ctx_t *t, const mla_decode_case_t *c) {
    mla_decode_data_t d;
    mla_decode_make(th_rng(t), c, &d);
    const int T = c->T, H = c->H;
    const int64_t Sm = (int64_t)c->main_P * c->main_pages, Se = (int64_t)c->extra_P * c->extra_pages;
    const int C = c->main_width + c->extra_width;
    uint16_t *kv = calloc((size_t)(Sm + Se) * 512, sizeof(uint16_t));
    double row[512];
    for (int64_t s = 0; s < Sm + Se; ++s) {
        if (s < Sm) mla_decode_row(d.main_cache, c->main_P, d.desc.main.cache.page_stride_bytes, s, row);
        else mla_decode_row(d.extra_cache, c->extra_P, d.desc.extra.cache.page_stride_bytes, s - Sm, row);
        for (int i = 0; i < 512; ++i) kv[s * 512 + i] = dsv4_f32_to_bf16((float)row[i]); /* exact */
    }
    int32_t *ids = calloc((size_t)T * C, sizeof(int32_t)), *lens = calloc((size_t)T, sizeof(int32_t));
    for (int tk = 0; tk < T; ++tk) {
        int n = 0;
        for (int li = 0; li < 2; ++li) {
            const int w = li ? c->extra_width : c->main_width;
            if (!w) continue;
            const int32_t *src = (li ? d.extra_ids : d.main_ids) + (int64_t)tk * w;
            int len = (li ? d.extra_lens : d.main_lens)[tk];
            len = len < 0 ? 0 : (len > w ? w : len);
            const int64_t valid = li ? Se : Sm;
            for (int j = 0; j < len; ++j)
                ids[(int64_t)tk * C + n++] = (src[j] >= 0 && src[j] < valid) ? (int32_t)(src[j] + (li ? Sm : 0)) : -1;
        }
        lens[tk] = n;
        for (int j = n; j < C; ++j) ids[(int64_t)tk * C + j] = -1;
    }
    const size_t n_out = (size_t)T * H * 512;
    double *ref_d = calloc(n_out, sizeof(double)), *ref_p = calloc(n_out, sizeof(double));
    double *lse_d = calloc((size_t)T * H, sizeof(double)), *lse_p = calloc((size_t)T * H, sizeof(double));
    uint16_t *out_d = calloc(n_out, 2), *out_p = calloc(n_out, 2);
    dsv4_sparse_mla_decode_args_t da = mla_decode_host_args(&d);
    da.out = out_d;
    da.ref_out = ref_d;
    da.ref_lse = lse_d;
    TH_OK(t, dsv4_sparse_mla_decode_ref(&d.desc, &da));
    dsv4_sparse_mla_prefill_desc_t pd;
    memset(&pd, 0, sizeof pd);
    pd.num_tokens = T;
    pd.num_heads = H;
    MLA_DENSE_QO(&pd);
    pd.kv_rows = Sm + Se;
    pd.kv_stride = 512;
    pd.width = C;
    pd.ids_stride = C;
    dsv4_sparse_mla_prefill_args_t pa = {d.q, kv, ids, lens, d.sink, out_p, ref_p, lse_p};
    TH_OK(t, dsv4_sparse_mla_prefill_ref(&pd, &pa));
    /* Same rows, same order, same fp64 arithmetic: identical bits. */
    TH_CHECK(t, memcmp(ref_d, ref_p, n_out * sizeof(double)) == 0, "decode and prefill references differ");
    TH_CHECK(t, memcmp(lse_d, lse_p, (size_t)T * H * sizeof(double)) == 0, "lse differs");
    TH_CHECK(t, memcmp(out_d, out_p, n_out * 2) == 0, "bf16 outputs differ");
    /* Convex combination: every output lies within [min, max] of 0 and the list's rows. */
    int bad = 0;
    for (size_t i = 0; i < n_out && bad < 4; ++i)
        if (fabs(ref_d[i]) > d.max_abs_k * (1 + 1e-12)) {
            th_fail(t, __FILE__, __LINE__, "output %zu = %g exceeds max|K| = %g", i, ref_d[i], d.max_abs_k);
            ++bad;
        }
    free(kv);
    free(ids);
    free(lens);
    free(ref_d);
    free(ref_p);
    free(lse_d);
    free(lse_p);
    free(out_d);
    free(out_p);
    mla_decode_free(&d);
}

static void test_ref_decode_equals_prefill(th_ctx_t *t) {
    const mla_decode_case_t cases[] = {
        {3, 16, 24, 32, 2, 40, 2, 37, MLA_LENS_RANDOM, MLA_SINK_MIXED, 1.0, 1, 1, 0},
        {2, 16, 24, 5, 9, 0, 0, 0, MLA_LENS_FULL, MLA_SINK_FINITE, 3.0, 0, 0, 32},
        {2, 32, 8, 4, 3, 16, 8, 4, MLA_LENS_EMPTY, MLA_SINK_FINITE, 1.0, 0, 0, 0},
        {2, 16, 8, 4, 3, 16, 8, 4, MLA_LENS_INVALID_ONLY, MLA_SINK_NONE, 1.0, 0, 0, 0},
    };
    for (int i = 0; i < TH_COUNT(cases); ++i) decode_vs_prefill(t, &cases[i]);
}

/* A token's result does not depend on the other tokens, and the scale is honoured:
 * scale s with q equals the default scale with q * s / default (exactly for powers of 2). */
static void test_ref_scale(th_ctx_t *t) {
    const mla_prefill_case_t c = {2, 16, 40, 64, MLA_LENS_FULL, MLA_SINK_FINITE, 1.0, 1.0, 0, 0};
    mla_prefill_data_t d;
    mla_prefill_make(th_rng(t), &c, &d);
    const size_t n = (size_t)2 * 16 * 512;
    double *r1 = calloc(n, sizeof(double)), *r2 = calloc(n, sizeof(double));
    uint16_t *out = calloc(n, 2);
    dsv4_sparse_mla_prefill_args_t a = mla_prefill_host_args(&d);
    a.out = out;
    a.ref_out = r1;
    d.desc.scale = 2.0f * DSV4_MLA_DEFAULT_SCALE;
    TH_OK(t, dsv4_sparse_mla_prefill_ref(&d.desc, &a));
    for (size_t i = 0; i < n; ++i) d.q[i] = dsv4_f32_to_bf16(2.0f * dsv4_bf16_to_f32(d.q[i]));
    d.desc.scale = 0.0f; /* default */
    a.ref_out = r2;
    TH_OK(t, dsv4_sparse_mla_prefill_ref(&d.desc, &a));
    double worst = 0;
    for (size_t i = 0; i < n; ++i) worst = fmax(worst, fabs(r1[i] - r2[i]));
    TH_CHECK(t, worst < 1e-12, "scale 2x default vs q*2: max difference %g", worst);
    free(r1);
    free(r2);
    free(out);
    mla_prefill_free(&d);
}

/* NaN in, NaN out (attention.h, NaN and Inf): a NaN in q turns its (token, head) row into
 * NaN, out and ref_out alike, and a +inf at dim 448 of a key row listed by a token decides
 * each head of that token by the sign of q[448]: positive or zero (a +inf or NaN score) makes
 * all 512 dims NaN, negative (a -inf score, weight 0) only dim 448 (0 * inf). The poisoned
 * row is the first valid one of its list, so a reference whose running max starts at -inf
 * cannot hide a -inf score there. Other rows stay finite. Both references. */
static int row_nans(const uint16_t *o, const double *ref, size_t row) {
    int n = 0;
    for (int d = 0; d < 512; ++d) {
        const int a = isnan(dsv4_bf16_to_f32(o[row * 512 + d])), b = isnan(ref[row * 512 + d]);
        if (a != b) return -1;
        n += a;
    }
    return n;
}
static void check_nan_rows(th_ctx_t *t, const char *what, const uint16_t *out, const double *ref, const double *lse,
                           const uint16_t *q, int T, int H, int t0, int h0, const int *lists_inf) {
    for (int tk = 0; tk < T; ++tk)
        for (int h = 0; h < H; ++h) {
            const size_t row = (size_t)tk * H + h;
            const int n = row_nans(out, ref, row);
            TH_CHECK(t, n >= 0, "%s: token %d head %d: out and ref_out disagree on NaN positions", what, tk, h);
            if (tk == t0 && h == h0) {
                TH_CHECK(t, n == 512 && isnan(lse[row]), "%s: NaN q at token %d head %d: %d NaN of 512, lse %g", what,
                         tk, h, n, lse[row]);
            } else if (lists_inf[tk]) {
                const int whole = !(dsv4_bf16_to_f32(q[row * 512 + 448]) < 0.0f);
                TH_CHECK(t, n == (whole ? 512 : 1) && whole == isnan(lse[row]),
                         "%s: +inf key of token %d, head %d, q[448] %s: %d NaN (expected %d), lse %g", what, tk, h,
                         whole ? ">= 0" : "< 0", n, whole ? 512 : 1, lse[row]);
            } else {
                TH_CHECK(t, n == 0 && !isnan(lse[row]), "%s: token %d head %d has %d NaN", what, tk, h, n);
            }
        }
}

static void test_ref_nan_inf(th_ctx_t *t) {
    const int T = 3, H = 16, t0 = 0, h0 = 5, t1 = 2;
    const size_t n = (size_t)T * H * 512;
    uint16_t *out = malloc(n * 2);
    double *ref = malloc(n * sizeof(double)), *lse = malloc((size_t)T * H * sizeof(double));
    int bad[3];
    mla_decode_case_t dc = mla_decode_model_case(T, H, 4, 8, MLA_LENS_FULL, MLA_SINK_FINITE, 0);
    mla_decode_data_t d;
    mla_decode_make(th_rng(t), &dc, &d);
    int id = mla_decode_poison(&d, t0, h0, t1);
    TH_CHECK(t, id >= 0, "decode: token %d lists no valid row", t1);
    for (int k = 0; k < T; ++k)
        bad[k] = mla_lists_id(d.main_ids, d.main_lens, dc.main_width, k, (int64_t)dc.main_P * dc.main_pages, id);
    dsv4_sparse_mla_decode_args_t da = mla_decode_host_args(&d);
    da.out = out, da.ref_out = ref, da.ref_lse = lse;
    TH_OK(t, dsv4_sparse_mla_decode_ref(&d.desc, &da));
    check_nan_rows(t, "decode", out, ref, lse, d.q, T, H, t0, h0, bad);
    mla_decode_free(&d);

    const mla_prefill_case_t pc = {T, H, 64, 200, MLA_LENS_FULL, MLA_SINK_FINITE, 1.0, 1.0, 0, 0};
    mla_prefill_data_t p;
    mla_prefill_make(th_rng(t), &pc, &p);
    id = mla_prefill_poison(&p, t0, h0, t1);
    TH_CHECK(t, id >= 0, "prefill: token %d lists no valid row", t1);
    for (int k = 0; k < T; ++k) bad[k] = mla_lists_id(p.ids, p.lens, pc.width, k, pc.kv_rows, id);
    dsv4_sparse_mla_prefill_args_t pa = mla_prefill_host_args(&p);
    pa.out = out, pa.ref_out = ref, pa.ref_lse = lse;
    TH_OK(t, dsv4_sparse_mla_prefill_ref(&p.desc, &pa));
    check_nan_rows(t, "prefill", out, ref, lse, p.q, T, H, t0, h0, bad);
    mla_prefill_free(&p);
    free(out), free(ref), free(lse);
}

/* ---- host planning ------------------------------------------------------------------ */

/* Batch-invariant mode: config and split count of a batch of any size on any SM count
 * equal those of the request alone; the auto policy without the mode does depend on the
 * batch (so the mode is needed). An explicit num_splits is kept. */
static dsv4_sparse_mla_decode_desc_t plan_desc(int T, int H, int main_w, int extra_w);
static void test_plan_batch_invariant(th_ctx_t *t) {
    static const int Ts[] = {1, 2, 5, 8, 9, 16, 64, 300, 4096};
    static const int64_t sms[] = {20, 108, 132};
    static const int Hs[] = {16, 64, 128};
    for (int hi = 0; hi < TH_COUNT(Hs); ++hi) {
        dsv4_sparse_mla_decode_desc_t d = plan_desc(1, Hs[hi], 128, 512);
        d.batch_invariant = 1, d.sm_count = 108;
        dsv4_sparse_mla_plan_t alone, p;
        TH_OK(t, dsv4_sparse_mla_decode_plan(&d, &alone));
        int differs = 0;
        for (int ti = 0; ti < TH_COUNT(Ts); ++ti)
            for (int si = 0; si < TH_COUNT(sms); ++si) {
                d = plan_desc(Ts[ti], Hs[hi], 128, 512);
                d.sm_count = sms[si];
                TH_OK(t, dsv4_sparse_mla_decode_plan(&d, &p));
                differs |= p.config != alone.config || p.num_splits != alone.num_splits;
                d.batch_invariant = 1;
                TH_OK(t, dsv4_sparse_mla_decode_plan(&d, &p));
                TH_CHECK(t, p.config == alone.config && p.num_splits == alone.num_splits && p.num_splits == 1,
                         "H=%d T=%d sm=%lld: config %lld S %lld, alone config %lld S %lld", Hs[hi], Ts[ti],
                         (long long)sms[si], (long long)p.config, (long long)p.num_splits, (long long)alone.config,
                         (long long)alone.num_splits);
                d.num_splits = 3;
                TH_OK(t, dsv4_sparse_mla_decode_plan(&d, &p));
                TH_CHECK(t, p.num_splits == 3 && p.config == alone.config, "explicit S=3: S %lld config %lld",
                         (long long)p.num_splits, (long long)p.config);
            }
        TH_CHECK(t, differs, "H=%d: the auto plan never depends on the batch here; the test cannot fail", Hs[hi]);
    }
    dsv4_sparse_mla_decode_desc_t d = plan_desc(4, 64, 128, 512);
    d.batch_invariant = 2;
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_decode_check(&d), DSV4_STATUS_INVALID_VALUE);
}

static dsv4_sparse_mla_decode_desc_t plan_desc(int T, int H, int main_w, int extra_w) {
    dsv4_sparse_mla_decode_desc_t d;
    memset(&d, 0, sizeof d);
    d.num_tokens = T;
    d.num_heads = H;
    MLA_DENSE_QO(&d);
    d.main.width = main_w;
    d.main.stride = main_w;
    d.main.cache.page_tokens = MC_SWA_PAGE_TOKENS;
    d.main.cache.page_stride_bytes = MC_PAGE_STRIDE(MC_SWA_PAGE_TOKENS);
    d.main.cache.num_pages = 100;
    if (extra_w) {
        d.has_extra = 1;
        d.extra.width = extra_w;
        d.extra.stride = extra_w;
        d.extra.cache.page_tokens = MC_V4_PAGE_TOKENS;
        d.extra.cache.page_stride_bytes = MC_PAGE_STRIDE(MC_V4_PAGE_TOKENS);
        d.extra.cache.num_pages = 2048;
    }
    d.sm_count = 132;
    return d;
}

static void test_plan(th_ctx_t *t) {
    struct {
        int T, H, mw, ew, sm, splits, force, config;
        int64_t want_config, want_S;
        int want_merge;
    } cases[] = {
        /* T = 64, 64 heads: ws64 (T >= 8, 64 | H), 64 units of one CTA per SM < 132
         * -> S = floor(132/64) = 2; ws32 and ws64 always merge in a second launch */
        {64, 64, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_WS64, 2, 1},
        /* the same with h32w4: 4096 merge rows are more than one wave (264) of merge
         * CTAs, a second launch too */
        {64, 64, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_H32W4, DSV4_MLA_CONFIG_H32W4, 2, 1},
        /* T = 64, 96 heads: 64 does not divide H -> ws32; 192 units fill the SMs */
        {64, 96, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_WS32, 1, 0},
        /* T = 1: h16w8 (T <= 8), 16-head CTAs (4 groups), S <= 32: 2 tiles from S = 21
         * (7 + 25 keys) on; S = 20 would leave a third tile of one key (7 + 26); 32 merge
         * CTAs (two rows each: 8 warps) appended */
        {1, 64, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_H16W8, 21, 2},
        /* the same with h16w4: 64 merge CTAs of one row */
        {1, 64, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_H16W4, DSV4_MLA_CONFIG_H16W4, 21, 2},
        /* T = 8, 32 heads, h16w8: 2 groups of 16 -> units 16, S <= 264 / 16 = 16: 3
         * tiles from S = 14 (10 + 37 keys) on; 128 merge CTAs appended */
        {8, 32, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_H16W8, 14, 2},
        /* h32w4 there: 1 group of 32 -> units 8, S <= min(33, 32): again 21; 256 merge
         * CTAs <= 264: appended */
        {8, 32, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_H32W4, DSV4_MLA_CONFIG_H32W4, 21, 2},
        /* 64 | H: ws64 from T = 8 (8 units of one CTA per SM, S <= 16: 3 tiles from
         * S = 14), h16w8 below; 32 | H: h16w8 up to T = 8, then h32w4 (288 merge rows:
         * a second launch), from T = 16 ws32; else h16w8, then h16w4 */
        {7, 64, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_H16W8, 8, 2},
        {8, 64, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_WS64, 14, 1},
        {9, 32, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_H32W4, 21, 1},
        {16, 96, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_WS32, 5, 1},
        {8, 48, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_H16W8, 11, 2},
        {9, 48, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_H16W4, 8, 1},
        {16, 64, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_WS64, 8, 1},
        /* h32w8 (8 warps): two merge rows per CTA, 4 x 64 / 2 = 128 appended */
        {4, 64, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_H32W8, DSV4_MLA_CONFIG_H32W8, 21, 2},
        /* T = 384, 64 heads: 768 units fill 132 SMs -> direct write */
        {384, 64, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_WS64, 1, 0},
        /* ws64 at T = 1, 128 heads: 2 units of one CTA per SM, S <= 32 -> 21 */
        {1, 128, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_WS64, DSV4_MLA_CONFIG_WS64, 21, 1},
        /* SWA-only, 128 keys: S <= min(floor(216/2), 32); one tile from S = 8 (16 keys) */
        {2, 16, 128, 0, 108, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_H16W8, 8, 2},
        /* H = 48 cannot use 32-head CTAs; 100 x 3 groups of 16 fill 132 SMs -> S = 1 */
        {100, 48, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_H16W4, 1, 0},
        /* forced */
        {64, 64, 128, 512, 132, 1, 0, DSV4_MLA_CONFIG_H32W8, DSV4_MLA_CONFIG_H32W8, 1, 0},
        {64, 64, 128, 512, 132, 1, 1, DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_WS64, 1, 1},
        {64, 64, 128, 512, 132, 16, 0, DSV4_MLA_CONFIG_H16W4, DSV4_MLA_CONFIG_H16W4, 16, 1},
        /* ws32 has no merge CTAs: a second launch even where they would fit (T = 8) */
        {64, 64, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_WS32, DSV4_MLA_CONFIG_WS32, 2, 1},
        {8, 32, 128, 512, 132, 0, 0, DSV4_MLA_CONFIG_WS32, DSV4_MLA_CONFIG_WS32, 21, 1},
        {64, 64, 128, 512, 132, 1, 1, DSV4_MLA_CONFIG_WS32, DSV4_MLA_CONFIG_WS32, 1, 1},
    };
    for (int i = 0; i < TH_COUNT(cases); ++i) {
        dsv4_sparse_mla_decode_desc_t d = plan_desc(cases[i].T, cases[i].H, cases[i].mw, cases[i].ew);
        d.sm_count = cases[i].sm;
        d.num_splits = cases[i].splits;
        d.force_merge = cases[i].force;
        d.config = cases[i].config;
        dsv4_sparse_mla_plan_t p;
        TH_OK(t, dsv4_sparse_mla_decode_plan(&d, &p));
        size_t ws = 0;
        TH_OK(t, dsv4_sparse_mla_decode_workspace_size(&d, &ws));
        const size_t want_ws = cases[i].want_merge ? (size_t)cases[i].T * cases[i].want_S * cases[i].H * 515 * 4 : 0;
        TH_CHECK(t,
                 p.config == cases[i].want_config && p.num_splits == cases[i].want_S &&
                     p.merge == cases[i].want_merge && ws == want_ws && p.workspace_bytes == ws,
                 "case %d: config %lld S %lld merge %d ws %zu; want config %lld S %lld merge %d ws %zu", i,
                 (long long)p.config, (long long)p.num_splits, p.merge, ws, (long long)cases[i].want_config,
                 (long long)cases[i].want_S, cases[i].want_merge, want_ws);
        TH_CHECK(t, p.ctas == (int64_t)cases[i].T * p.num_splits * (cases[i].H / p.heads_per_cta), "case %d: ctas %lld",
                 i, (long long)p.ctas);
    }
    /* The partials of two model shapes: T = 64, S = 4, H = 32 -> 16.8 MB; T = 384,
     * S = 4, H = 64 -> 201 MB; plus one flag word per partial row (attention.h). */
    dsv4_sparse_mla_decode_desc_t d = plan_desc(64, 32, 128, 512);
    d.num_splits = 4;
    size_t ws = 0;
    TH_OK(t, dsv4_sparse_mla_decode_workspace_size(&d, &ws));
    TH_CHECK(t, ws == 16842752 + 64 * 4 * 32 * 4, "T=64 S=4 H=32: %zu bytes", ws);
    d = plan_desc(384, 64, 128, 512);
    d.num_splits = 4;
    TH_OK(t, dsv4_sparse_mla_decode_workspace_size(&d, &ws));
    TH_CHECK(t, ws == 202113024 + 384 * 4 * 64 * 4, "T=384 S=4 H=64: %zu bytes", ws);

    dsv4_sparse_mla_prefill_desc_t pd;
    memset(&pd, 0, sizeof pd);
    pd.num_tokens = 4096;
    pd.num_heads = 64;
    MLA_DENSE_QO(&pd);
    pd.kv_rows = 1000;
    pd.kv_stride = 512;
    pd.width = 640;
    pd.ids_stride = 640;
    dsv4_sparse_mla_plan_t p;
    TH_OK(t, dsv4_sparse_mla_prefill_plan(&pd, &p));
    TH_CHECK(t,
             p.config == DSV4_MLA_CONFIG_WS32 && p.heads_per_cta == 32 && p.warps == 6 && p.num_splits == 1 &&
                 p.ctas == 8192,
             "prefill plan: config %lld hpc %lld warps %lld ctas %lld", (long long)p.config, (long long)p.heads_per_cta,
             (long long)p.warps, (long long)p.ctas);
    pd.num_heads = 16;
    MLA_DENSE_QO(&pd);
    TH_OK(t, dsv4_sparse_mla_prefill_plan(&pd, &p));
    TH_CHECK(t, p.config == DSV4_MLA_CONFIG_H16W4 && p.heads_per_cta == 16, "prefill H=16: config %lld",
             (long long)p.config);
    TH_OK(t, dsv4_sparse_mla_prefill_workspace_size(&pd, &ws));
    TH_CHECK(t, ws == 0, "prefill workspace %zu", ws);
}

/* The decode kernel divides slot ids by P with common/kv_format.h's multiply-high (whose
 * host form emulates __umulhi); it must equal the division for every P the API accepts
 * (1 .. 2^20) and every non-negative int32 id: edges (0, multiples of P and their
 * neighbours, 2^31 - 1) for P near powers of two and odd P, plus random pairs. */
static int magic_div_ok(int64_t P, uint32_t n, uint32_t magic, int32_t shift) {
    return kv_page_div(n, magic, shift) == n / (uint32_t)P;
}
static void test_page_magic(th_ctx_t *t) {
    int64_t Ps[64];
    int np = 0;
    for (int l = 0; l <= 20; ++l) {
        const int64_t b = INT64_C(1) << l;
        Ps[np++] = b;
        if (b > 2) Ps[np++] = b - 1;
        if (b < (1 << 20)) Ps[np++] = b + 1;
    }
    Ps[np++] = 5, Ps[np++] = 100, Ps[np++] = 576, Ps[np++] = 1000003;
    th_rng_t *r = th_rng(t);
    int bad = 0;
    for (int i = 0; i < np + 400; ++i) {
        const int64_t P = i < np ? Ps[i] : 1 + (int64_t)(th_rng_u32(r) % (1u << 20));
        const kv_page_div_t pd = kv_page_div_make(P);
        const uint32_t magic = pd.magic;
        const int32_t shift = pd.shift;
        const uint32_t edges[] = {0,
                                  1,
                                  (uint32_t)P - 1,
                                  (uint32_t)P,
                                  (uint32_t)P + 1,
                                  0x7FFFFFFFu,
                                  (uint32_t)(0x7FFFFFFFu / P * P),
                                  (uint32_t)(0x7FFFFFFFu / P * P - 1)};
        for (int e = 0; e < 8; ++e) bad += !magic_div_ok(P, edges[e], magic, shift);
        for (int k = 0; k < 2000; ++k) {
            const uint32_t n = th_rng_u32(r) & 0x7FFFFFFFu;
            if (!magic_div_ok(P, n, magic, shift)) {
                if (!bad) th_note(t, "P %lld n %u: magic %u shift %d", (long long)P, n, magic, shift);
                ++bad;
            }
        }
    }
    TH_CHECK(t, bad == 0, "%d wrong quotients", bad);
}

static const th_test_t tests[] = {
    {"attention.ref_known_answers", test_ref_known_answers, TH_CPU},
    {"attention.ref_decode_equals_prefill", test_ref_decode_equals_prefill, TH_CPU},
    {"attention.ref_scale", test_ref_scale, TH_CPU},
    {"attention.ref_nan_inf", test_ref_nan_inf, TH_CPU},
    {"attention.gpu_nan_inf", test_gpu_nan_inf, TH_GPU},
    {"attention.plan", test_plan, TH_CPU},
    {"attention.plan_batch_invariant", test_plan_batch_invariant, TH_CPU},
    {"attention.gpu_batch_invariant", test_gpu_batch_invariant, TH_GPU},
    {"attention.gpu_workspace_flags", test_gpu_workspace_flags, TH_GPU},
    {"attention.page_magic", test_page_magic, TH_CPU},
    {"attention.bad_input_decode", test_bad_input_decode, TH_CPU},
    {"attention.bad_input_prefill", test_bad_input_prefill, TH_CPU},
    {"attention.gpu_decode_random", test_gpu_decode_random, TH_GPU},
    {"attention.gpu_decode_edges", test_gpu_decode_edges, TH_GPU},
    {"attention.gpu_decode_splits", test_gpu_decode_splits, TH_GPU},
    {"attention.gpu_decode_partials", test_gpu_decode_partials, TH_GPU},
    {"attention.gpu_decode_direct_equals_merge", test_gpu_decode_direct_equals_merge, TH_GPU},
    {"attention.gpu_decode_large_t", test_gpu_decode_large_t, TH_GPU},
    {"attention.gpu_prefill_random", test_gpu_prefill_random, TH_GPU},
    {"attention.gpu_prefill_unit_scale_error", test_gpu_prefill_unit_scale, TH_GPU},
    {"attention.gpu_prefill_large_t", test_gpu_prefill_large_t, TH_GPU},
    {"attention.gpu_prefill_out_strides", test_gpu_prefill_out_strides, TH_GPU},
    {"attention.gpu_model_shapes", test_gpu_model_shapes, TH_GPU},
    {"attention.gpu_determinism", test_gpu_determinism, TH_GPU},
    {"attention.gpu_bad_input_writes_nothing", test_gpu_bad_input, TH_GPU},
};

int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }
