/*
 * GPU tests of sparse MLA decode and prefill against the fp64 reference (the DSV4_MLA_TOL_*
 * bounds of include/dsv4/attention.h), plus the bitwise properties: S = 1 direct == partial +
 * merge, and run-to-run determinism. Every failure prints the case, the config and the
 * worst (token, head, dim).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "attention/sparse_mla_config.h"
#include "dsv4/numerics.h"
#include "mla_case.h"
#include "test_mla.h"

typedef struct {
    int config; /* dsv4_mla_config_t */
    int splits; /* 0 = auto */
    int force_merge;
} run_opts_t;

/* Under compute-sanitizer racecheck (scripts/gpu_check.sh sets DSV4_RACECHECK) the
 * warp-specialised kernels (ws32 and ws64; ws32 is an auto choice) are left out: racecheck
 * reports every bar.arrive -> bar.sync handoff as a hazard, correctly ordered ones too
 * (tools/racecheck_arrive_repro.cu: a two-warp handoff, 7 hazards, none with bar.sync on
 * both sides). memcheck and synccheck run it. */
static int racecheck_skips(int planned_config) {
    static int said;
    if (!MLA_CFG_IS_WS(planned_config) || !getenv("DSV4_RACECHECK")) return 0;
    if (!said++) printf("  note: racecheck run: ws32 and ws64 left out (bar.arrive handoffs, see test_mla_gpu.c)\n");
    return 1;
}

/* Set by test_gpu_nan_inf: the cases get a NaN in q and a +inf key (mla_decode_poison). */
static int poison_inputs;

/* One decode case under each option set, all checked against one reference. */
static void decode_case(th_ctx_t *t, const mla_decode_case_t *c, const run_opts_t *opts, int nopts, int sample) {
    char cs[320], what[400];
    mla_decode_case_str(c, cs, sizeof cs);
    mla_decode_data_t d;
    mla_decode_make(th_rng(t), c, &d);
    if (poison_inputs) mla_decode_poison(&d, 0, 1, c->T - 1);
    const size_t n = (size_t)c->T * c->H * 512;
    double *ref = calloc(n, sizeof(double));
    int *tok = malloc(sizeof(int) * (size_t)c->T), ntok = c->T;
    if (sample) ntok = mla_sample_tokens(th_rng(t), c->T, sample, tok);
    mla_decode_ref_tokens(t, &d, sample ? tok : NULL, ntok, ref, NULL);
    mla_decode_dev_t g;
    mla_decode_upload(&d, &g);
    uint16_t *out = malloc(n * 2);
    for (int i = 0; i < nopts; ++i) {
        const int H = c->H;
        if (opts[i].config != DSV4_MLA_CONFIG_AUTO && H % MLA_CFG_HC(opts[i].config)) continue;
        dsv4_sparse_mla_decode_desc_t desc = d.desc;
        desc.config = opts[i].config;
        desc.num_splits = opts[i].splits;
        desc.force_merge = opts[i].force_merge;
        dsv4_sparse_mla_plan_t p;
        TH_OK(t, dsv4_sparse_mla_decode_plan(&desc, &p));
        if (racecheck_skips((int)p.config)) continue;
        snprintf(what, sizeof what, "decode %s | config %s (%lld heads/CTA, %lld warps) S=%lld merge=%d", cs,
                 dsv4_mla_config_name(p.config), (long long)p.heads_per_cta, (long long)p.warps,
                 (long long)p.num_splits, p.merge);
        if (!mla_decode_gpu(t, &d, &g, &desc, out, NULL, NULL)) continue;
        const int before = th_failed(t);
        mla_check_out(t, what, out, ref, c->T, H, sample ? tok : NULL, ntok, d.max_abs_k);
        if (th_failed(t) > before) th_note(t, "FAILED: %s", what);
    }
    free(out);
    free(ref);
    free(tok);
    mla_decode_dev_free(&g);
    mla_decode_free(&d);
}

static const run_opts_t all_configs[] = {{DSV4_MLA_CONFIG_AUTO, 0, 0},  {DSV4_MLA_CONFIG_H16W4, 0, 0},
                                         {DSV4_MLA_CONFIG_H32W4, 0, 0}, {DSV4_MLA_CONFIG_H32W8, 0, 0},
                                         {DSV4_MLA_CONFIG_WS32, 0, 0},  {DSV4_MLA_CONFIG_WS64, 0, 0},
                                         {DSV4_MLA_CONFIG_H16W8, 0, 0}};

void test_gpu_decode_random(th_ctx_t *t) {
    /* T, H, main(width, P, pages), extra(width, P, pages), lens, sink, q_scale, dups, nan, pad */
    const mla_decode_case_t cases[] = {
        {5, 16, 128, 32, 24, 512, 64, 80, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 1, 0, 0},
        {3, 32, 128, 32, 24, 1024, 64, 80, MLA_LENS_RANDOM, MLA_SINK_MIXED, 1.5, 0, 0, 0},
        {2, 64, 128, 32, 24, 2048, 64, 80, MLA_LENS_RANDOM, MLA_SINK_NEG_INF, 1.0, 1, 0, 0},
        {2, 128, 128, 32, 24, 512, 64, 80, MLA_LENS_FULL, MLA_SINK_NONE, 1.0, 0, 0, 0},
        {7, 64, 128, 32, 24, 0, 0, 0, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 0, 0, 0},     /* SWA only */
        {4, 48, 128, 5, 40, 300, 2, 700, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 1, 0, 48}, /* odd P, padded pages */
        {3, 64, 100, 32, 8, 517, 64, 40, MLA_LENS_FULL, MLA_SINK_MIXED, 2.0, 0, 0, 16},    /* no tile multiples */
    };
    for (int i = 0; i < TH_COUNT(cases); ++i) decode_case(t, &cases[i], all_configs, TH_COUNT(all_configs), 0);
}

void test_gpu_decode_edges(th_ctx_t *t) {
    const mla_decode_case_t cases[] = {
        {6, 16, 128, 32, 8, 512, 64, 16, MLA_LENS_EMPTY, MLA_SINK_FINITE, 1.0, 0, 0, 0},
        {6, 32, 128, 32, 8, 512, 64, 16, MLA_LENS_EMPTY, MLA_SINK_NEG_INF, 1.0, 0, 0, 0},
        {6, 32, 128, 32, 8, 512, 64, 16, MLA_LENS_EMPTY, MLA_SINK_NONE, 1.0, 0, 0, 0},
        {4, 64, 128, 32, 8, 512, 64, 16, MLA_LENS_INVALID_ONLY, MLA_SINK_FINITE, 1.0, 0, 0, 0},
        {4, 16, 128, 32, 8, 512, 64, 16, MLA_LENS_INVALID_ONLY, MLA_SINK_NONE, 1.0, 0, 0, 0},
        /* Huge and tiny scores: one key dominates, others underflow to p = 0. */
        {4, 32, 128, 32, 8, 512, 64, 16, MLA_LENS_RANDOM, MLA_SINK_MIXED, 40.0, 1, 0, 0},
        /* NaN codes and NaN RoPE lanes read as 0. */
        {4, 64, 128, 32, 8, 512, 64, 16, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 0, 1, 0},
        /* Everything duplicated a lot, window shorter than W. */
        {4, 16, 37, 32, 2, 100, 64, 2, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 1, 0, 0},
    };
    const run_opts_t opts[] = {{DSV4_MLA_CONFIG_AUTO, 1, 0},  {DSV4_MLA_CONFIG_AUTO, 4, 0},
                               {DSV4_MLA_CONFIG_H16W4, 3, 0}, {DSV4_MLA_CONFIG_H32W4, 1, 1},
                               {DSV4_MLA_CONFIG_WS32, 3, 0},  {DSV4_MLA_CONFIG_WS32, 1, 1},
                               {DSV4_MLA_CONFIG_WS64, 3, 0},  {DSV4_MLA_CONFIG_WS64, 1, 1},
                               {DSV4_MLA_CONFIG_H16W8, 3, 0}, {DSV4_MLA_CONFIG_H16W8, 1, 1}};
    for (int i = 0; i < TH_COUNT(cases); ++i) decode_case(t, &cases[i], opts, TH_COUNT(opts), 0);
}

void test_gpu_decode_splits(th_ctx_t *t) {
    const mla_decode_case_t c = {3, 64, 128, 32, 24, 512, 64, 80, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 1, 0, 0};
    const run_opts_t opts[] = {{DSV4_MLA_CONFIG_AUTO, 1, 0},  {DSV4_MLA_CONFIG_AUTO, 2, 0},
                               {DSV4_MLA_CONFIG_AUTO, 4, 0},  {DSV4_MLA_CONFIG_AUTO, 16, 0},
                               {DSV4_MLA_CONFIG_AUTO, 32, 0}, {DSV4_MLA_CONFIG_H16W4, 16, 0},
                               {DSV4_MLA_CONFIG_H32W8, 2, 0}, {DSV4_MLA_CONFIG_H32W4, 16, 0},
                               {DSV4_MLA_CONFIG_H16W4, 1, 1}, {DSV4_MLA_CONFIG_WS32, 2, 0},
                               {DSV4_MLA_CONFIG_WS32, 16, 0}, {DSV4_MLA_CONFIG_WS64, 2, 0},
                               {DSV4_MLA_CONFIG_WS64, 16, 0}, {DSV4_MLA_CONFIG_H16W8, 2, 0},
                               {DSV4_MLA_CONFIG_H16W8, 16, 0}};
    decode_case(t, &c, opts, TH_COUNT(opts), 0);
}

/* Raw partials of S = 4 against the reference on each split's sub-lists: o = acc / l and
 * lse = m + ln l (the normalised form), split geometry c = ceil(len / S); for the
 * engine (h32w4) and the warp-specialised kernels (ws32, ws64). */
static void decode_partials(th_ctx_t *t, int config, int heads) {
    th_note(t, "decode partials, config %s, %d heads (failures below are this config's)", dsv4_mla_config_name(config),
            heads);
    const mla_decode_case_t c = {3, heads, 128, 32, 24, 512, 64, 80, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 1, 0, 0};
    const int S = 4, T = c.T, H = c.H;
    mla_decode_data_t d;
    mla_decode_make(th_rng(t), &c, &d);
    mla_decode_dev_t g;
    mla_decode_upload(&d, &g);
    dsv4_sparse_mla_decode_desc_t desc = d.desc;
    desc.num_splits = S;
    desc.config = config;
    uint16_t *out = malloc((size_t)T * H * 512 * 2);
    float *ws = NULL;
    size_t ws_bytes = 0;
    if (!mla_decode_gpu(t, &d, &g, &desc, out, &ws, &ws_bytes)) return;
    const size_t rows = (size_t)T * S * H;
    const float *acc = ws, *pm = ws + rows * 512, *pl = pm + rows;
    for (int s = 0; s < S; ++s) {
        /* This split's slices as lists of their own. */
        mla_decode_data_t ds = d;
        int32_t *ids[2] = {malloc((size_t)T * c.main_width * 4), malloc((size_t)T * c.extra_width * 4)};
        int32_t *lens[2] = {malloc((size_t)T * 4), malloc((size_t)T * 4)};
        for (int li = 0; li < 2; ++li) {
            const int w = li ? c.extra_width : c.main_width;
            const int32_t *src = li ? d.extra_ids : d.main_ids, *sl = li ? d.extra_lens : d.main_lens;
            for (int tk = 0; tk < T; ++tk) {
                int len = sl[tk] < 0 ? 0 : (sl[tk] > w ? w : sl[tk]);
                const int cc = (len + S - 1) / S, b = s * cc < len ? s * cc : len;
                const int e = b + cc < len ? b + cc : len;
                lens[li][tk] = e - b;
                for (int j = 0; j < w; ++j) ids[li][tk * w + j] = j < e - b ? src[tk * w + b + j] : -1;
            }
        }
        ds.main_ids = ids[0], ds.main_lens = lens[0], ds.extra_ids = ids[1], ds.extra_lens = lens[1];
        ds.sink = NULL; /* partials carry no sink */
        double *ref = calloc((size_t)T * H * 512, sizeof(double)), *lse = calloc((size_t)T * H, sizeof(double));
        mla_decode_ref_tokens(t, &ds, NULL, T, ref, lse);
        double worst_o = 0, worst_lse = 0;
        int bad = 0;
        for (int tk = 0; tk < T; ++tk)
            for (int h = 0; h < H; ++h) {
                const size_t r = ((size_t)tk * S + s) * H + h;
                const double l = pl[r], m = pm[r];
                const double want_lse = lse[(size_t)tk * H + h];
                if (want_lse == -INFINITY) {
                    if (!(l == 0.0 && m == -3.4028234663852886e38) && bad++ < 4)
                        th_fail(t, __FILE__, __LINE__, "split %d token %d head %d: empty split has m=%g l=%g", s, tk, h,
                                m, l);
                    for (int dd = 0; dd < 512; ++dd)
                        if (acc[r * 512 + dd] != 0.0f && bad++ < 4)
                            th_fail(t, __FILE__, __LINE__, "split %d token %d head %d: empty split acc[%d]=%g", s, tk,
                                    h, dd, acc[r * 512 + dd]);
                    continue;
                }
                const double e_lse = fabs(m + log(l) - want_lse);
                if (!(e_lse <= DSV4_MLA_TOL_PARTIAL_LSE * fmax(1.0, fabs(want_lse))) && bad++ < 4)
                    th_fail(t, __FILE__, __LINE__, "split %d token %d head %d: lse %.6g, ref %.6g (m %g l %g)", s, tk,
                            h, m + log(l), want_lse, m, l);
                worst_lse = fmax(worst_lse, e_lse);
                for (int dd = 0; dd < 512; ++dd) {
                    const double e = fabs(acc[r * 512 + dd] / l - ref[((size_t)tk * H + h) * 512 + dd]);
                    if (!(e <= DSV4_MLA_TOL_MAX_ABS * d.max_abs_k) && bad++ < 4)
                        th_fail(t, __FILE__, __LINE__, "split %d token %d head %d dim %d: acc/l %.6g ref %.6g", s, tk,
                                h, dd, acc[r * 512 + dd] / l, ref[((size_t)tk * H + h) * 512 + dd]);
                    worst_o = fmax(worst_o, e);
                }
            }
        th_note(t, "config %s, split %d of %d: max |acc/l - ref| %.3e, max |lse - ref| %.3e",
                dsv4_mla_config_name(config), s, S, worst_o, worst_lse);
        free(ref), free(lse), free(ids[0]), free(ids[1]), free(lens[0]), free(lens[1]);
    }
    free(ws);
    free(out);
    mla_decode_dev_free(&g);
    mla_decode_free(&d);
}

void test_gpu_decode_partials(th_ctx_t *t) {
    decode_partials(t, DSV4_MLA_CONFIG_H32W4, 32);
    if (!racecheck_skips(DSV4_MLA_CONFIG_WS32)) {
        decode_partials(t, DSV4_MLA_CONFIG_WS32, 32);
        decode_partials(t, DSV4_MLA_CONFIG_WS64, 64);
    }
}

/* S = 1: the direct bf16 write and partial + merge give identical bits, per config,
 * with and without sinks (attention.h's finalisation), for both merge routes: merge
 * CTAs in the attention launch (plan.merge 2) and the second launch (1), which the
 * plan picks from sm_count (the kernels do not read it). */
void test_gpu_decode_direct_equals_merge(th_ctx_t *t) {
    const mla_decode_case_t cases[] = {
        {5, 64, 128, 32, 24, 512, 64, 80, MLA_LENS_RANDOM, MLA_SINK_MIXED, 1.0, 1, 1, 0},
        {5, 32, 128, 32, 24, 512, 64, 80, MLA_LENS_EMPTY, MLA_SINK_FINITE, 1.0, 0, 0, 0},
        {5, 16, 128, 32, 24, 1024, 64, 80, MLA_LENS_RANDOM, MLA_SINK_NONE, 30.0, 0, 0, 0},
    };
    for (int i = 0; i < TH_COUNT(cases); ++i) {
        const mla_decode_case_t *c = &cases[i];
        mla_decode_data_t d;
        mla_decode_make(th_rng(t), c, &d);
        mla_decode_dev_t g;
        mla_decode_upload(&d, &g);
        const size_t n = (size_t)c->T * c->H * 512;
        uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
        for (int cfg = DSV4_MLA_CONFIG_H16W4; cfg <= DSV4_MLA_NUM_CONFIGS; ++cfg) {
            if (c->H % MLA_CFG_HC(cfg) || racecheck_skips(cfg)) continue;
            dsv4_sparse_mla_decode_desc_t desc = d.desc;
            desc.config = cfg;
            desc.num_splits = 1;
            mla_decode_gpu(t, &d, &g, &desc, a, NULL, NULL);
            desc.force_merge = 1;
            for (int route = 1; route <= (MLA_CFG_IS_WS(cfg) ? 1 : 2); ++route) { /* ws32, ws64: no merge CTAs */
                desc.sm_count = route == 2 ? 1 << 16 : 1;
                dsv4_sparse_mla_plan_t p;
                TH_OK(t, dsv4_sparse_mla_decode_plan(&desc, &p));
                TH_CHECK(t, p.merge == route, "config %s: sm_count %lld plans merge %d, want %d",
                         dsv4_mla_config_name(cfg), (long long)desc.sm_count, p.merge, route);
                mla_decode_gpu(t, &d, &g, &desc, b, NULL, NULL);
                size_t diff = 0, first = 0;
                for (size_t k = 0; k < n; ++k)
                    if (a[k] != b[k] && diff++ == 0) first = k;
                char cs[320];
                TH_CHECK(t, diff == 0,
                         "config %s merge %d: direct and merged S=1 differ in %zu of %zu values, first at token %zu "
                         "head %zu dim %zu (0x%04x vs 0x%04x); case %s",
                         dsv4_mla_config_name(cfg), route, diff, n, first / (512 * (size_t)c->H), (first / 512) % c->H,
                         first % 512, a[first], b[first], mla_decode_case_str(c, cs, sizeof cs));
            }
        }
        free(a), free(b);
        mla_decode_dev_free(&g);
        mla_decode_free(&d);
    }
}

/* T = 1 (latency shape) and T = 384 (64 requests x 6 with speculative tokens), sampled. */
void test_gpu_decode_large_t(th_ctx_t *t) {
    const mla_decode_case_t c1 = mla_decode_model_case(1, MC_HEADS_TP1, 64, 512, MLA_LENS_FULL, MLA_SINK_FINITE, 0);
    const run_opts_t auto_opts[] = {{DSV4_MLA_CONFIG_AUTO, 0, 0}};
    decode_case(t, &c1, auto_opts, 1, 0);
    const mla_decode_case_t c2 =
        mla_decode_model_case(MC_DECODE_T_MAX, MC_HEADS_TP1, 64, 512, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1);
    const run_opts_t opts[] = {{DSV4_MLA_CONFIG_AUTO, 0, 0},
                               {DSV4_MLA_CONFIG_H16W4, 0, 0},
                               {DSV4_MLA_CONFIG_AUTO, 2, 0},
                               {DSV4_MLA_CONFIG_WS32, 0, 0},
                               {DSV4_MLA_CONFIG_WS64, 0, 0}};
    decode_case(t, &c2, opts, TH_COUNT(opts), 12);
}

/* Max abs errors against fp64 over all outputs and over those with |ref| < 1. */
typedef struct {
    double all, below1;
} mla_abs_err_t;

static void prefill_case(th_ctx_t *t, const mla_prefill_case_t *c, const int *configs, int ncfg, int sample,
                         mla_abs_err_t *max_err) {
    char cs[256], what[320];
    mla_prefill_case_str(c, cs, sizeof cs);
    mla_prefill_data_t d;
    mla_prefill_make(th_rng(t), c, &d);
    if (poison_inputs) mla_prefill_poison(&d, 0, 1, c->T - 1);
    const size_t n = (size_t)c->T * c->H * 512;
    double *ref = calloc(n, sizeof(double));
    int *tok = malloc(sizeof(int) * (size_t)c->T), ntok = c->T;
    if (sample) ntok = mla_sample_tokens(th_rng(t), c->T, sample, tok);
    mla_prefill_ref_tokens(t, &d, sample ? tok : NULL, ntok, ref);
    mla_prefill_dev_t g;
    mla_prefill_upload(&d, &g);
    uint16_t *out = malloc(n * 2);
    for (int i = 0; i < ncfg; ++i) {
        if (configs[i] != DSV4_MLA_CONFIG_AUTO && c->H % MLA_CFG_HC(configs[i])) continue;
        dsv4_sparse_mla_prefill_desc_t desc = d.desc;
        desc.config = configs[i];
        dsv4_sparse_mla_plan_t p;
        TH_OK(t, dsv4_sparse_mla_prefill_plan(&desc, &p));
        if (racecheck_skips((int)p.config)) continue;
        snprintf(what, sizeof what, "prefill %s | config %s (%lld heads/CTA, %lld warps)", cs,
                 dsv4_mla_config_name(p.config), (long long)p.heads_per_cta, (long long)p.warps);
        if (!mla_prefill_gpu(t, &d, &g, &desc, out)) continue;
        const int before = th_failed(t);
        mla_check_out(t, what, out, ref, c->T, c->H, sample ? tok : NULL, ntok, d.max_abs_k);
        if (max_err) { /* the reported maxima, and where each config has its largest */
            size_t worst = 0;
            double we = -1, below1 = 0;
            for (int k = 0; k < ntok; ++k)
                for (size_t j = 0; j < (size_t)c->H * 512; ++j) {
                    const size_t x = (size_t)(sample ? tok[k] : k) * c->H * 512 + j;
                    const double ej = fabs(dsv4_bf16_to_f32(out[x]) - ref[x]);
                    if (ej > we) we = ej, worst = x;
                    if (fabs(ref[x]) < 1.0 && ej > below1) below1 = ej;
                }
            max_err->all = fmax(max_err->all, we);
            max_err->below1 = fmax(max_err->below1, below1);
            th_note(t,
                    "%s: max abs error %.3e (|ref| < 1: %.3e), largest at token %zu head %zu dim %zu (got %.6g, ref "
                    "%.6g)",
                    what, we, below1, worst / ((size_t)c->H * 512), worst / 512 % c->H, worst % 512,
                    dsv4_bf16_to_f32(out[worst]), ref[worst]);
        }
        if (th_failed(t) > before) th_note(t, "FAILED: %s", what);
    }
    free(out);
    free(ref);
    free(tok);
    mla_prefill_dev_free(&g);
    mla_prefill_free(&d);
}

static const int prefill_configs[] = {DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_H16W4, DSV4_MLA_CONFIG_H32W4,
                                      DSV4_MLA_CONFIG_H32W8, DSV4_MLA_CONFIG_WS32};

void test_gpu_prefill_random(th_ctx_t *t) {
    /* T, H, width, kv_rows, lens, sink, q_scale, kv_scale, dups, kv_stride */
    const mla_prefill_case_t cases[] = {
        {6, 16, 640, 3000, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 1.0, 1, 0},
        {4, 32, 1152, 3000, MLA_LENS_RANDOM, MLA_SINK_MIXED, 1.0, 0.5, 0, 520},
        {3, 64, 640, 5000, MLA_LENS_FULL, MLA_SINK_NEG_INF, 2.0, 1.0, 1, 0},
        {2, 128, 2176, 5000, MLA_LENS_RANDOM, MLA_SINK_NONE, 1.0, 1.0, 0, 0},
        {5, 64, 128, 200, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 1.0, 1, 1024}, /* SWA-only widths */
        {5, 32, 77, 50, MLA_LENS_EMPTY, MLA_SINK_FINITE, 1.0, 1.0, 0, 0},
        {5, 32, 77, 50, MLA_LENS_INVALID_ONLY, MLA_SINK_NONE, 1.0, 1.0, 0, 0},
        {4, 16, 300, 1000, MLA_LENS_RANDOM, MLA_SINK_MIXED, 40.0, 1.0, 1, 0}, /* huge / tiny scores */
        {3, 64, 640, 0, MLA_LENS_FULL, MLA_SINK_FINITE, 1.0, 1.0, 0, 0},      /* kv_rows = 0 */
    };
    for (int i = 0; i < TH_COUNT(cases); ++i)
        prefill_case(t, &cases[i], prefill_configs, TH_COUNT(prefill_configs), 0, NULL);
}

/* Unit-scale inputs (q, kv ~ N(0, 1)): report the max abs error against fp64. The
 * upstream Triton kernel stays under DSV4_MLA_TOL_UNIT_PREFILL on its prefill shapes;
 * this one must too at the model's prefill widths (top-k + window: 640 and 1152), on
 * every output with |out| < 1.
 *
 * Outputs with |out| >= 1 (the SWA-only width 128 often has them, the wide cases rarely)
 * are reported and held to the accuracy contract only: there, rounding the exact fp64
 * value to bf16 alone is off by up to 2^-9 * 2 = 3.9e-3, and the bf16 p adds up to
 * ~2^-9 relative when a few keys dominate, so no kernel that rounds p and the output to
 * bf16 can promise that bound there (docs/attention.md, "Numerics"). */
void test_gpu_prefill_unit_scale(th_ctx_t *t) {
    const mla_prefill_case_t wide[] = {
        {32, MC_HEADS_TP1, MC_MLA_WIDTH, 4096, MLA_LENS_FULL, MLA_SINK_FINITE, 1.0, 1.0, 0, 0},
        {16, MC_HEADS_TP2, MC_MLA_WIDTH_PRO, 4096, MLA_LENS_FULL, MLA_SINK_NONE, 1.0, 1.0, 0, 0},
    };
    const mla_prefill_case_t swa_only = {16, MC_HEADS_TP4, MC_WINDOW, 256, MLA_LENS_FULL, MLA_SINK_FINITE, 1, 1, 0, 0};
    mla_abs_err_t worst = {0, 0}, worst_swa = {0, 0};
    for (int i = 0; i < TH_COUNT(wide); ++i)
        prefill_case(t, &wide[i], prefill_configs, TH_COUNT(prefill_configs), 0, &worst);
    prefill_case(t, &swa_only, prefill_configs, TH_COUNT(prefill_configs), 0, &worst_swa);
    th_note(t,
            "unit-scale prefill: max abs error %.3e at widths 640 and 1152 (%.3e where |out| < 1; Triton baseline "
            "<= %.1e); %.3e at the SWA-only width 128 (%.3e where |out| < 1; contract only)",
            worst.all, worst.below1, DSV4_MLA_TOL_UNIT_PREFILL, worst_swa.all, worst_swa.below1);
    TH_CHECK(t, worst.below1 <= DSV4_MLA_TOL_UNIT_PREFILL,
             "unit-scale max abs error %.3e (|out| < 1) is above the %.1e of the upstream Triton kernel", worst.below1,
             DSV4_MLA_TOL_UNIT_PREFILL);
}

/* Output rows at padded strides (whole 16-byte chunks, as the API requires): the
 * epilogue stages rows through shared memory and writes 16-byte chunks at the strides.
 * Each row must carry the bits of the contiguous run and the padding between rows must
 * keep its poison. */
void test_gpu_prefill_out_strides(th_ctx_t *t) {
    const mla_prefill_case_t c = {37, 64, 640, 3000, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 1.0, 1, 0};
    mla_prefill_data_t d;
    mla_prefill_dev_t g;
    mla_prefill_make_upload(th_rng(t), &c, &d, &g);
    const size_t n = (size_t)c.T * c.H * 512;
    uint16_t *want = malloc(n * 2);
    const int64_t head_strides[] = {520, 1032};
    for (int ci = 0; ci < TH_COUNT(prefill_configs); ++ci) {
        dsv4_sparse_mla_prefill_desc_t desc = d.desc;
        desc.config = prefill_configs[ci];
        dsv4_sparse_mla_plan_t p;
        TH_OK(t, dsv4_sparse_mla_prefill_plan(&desc, &p));
        if (racecheck_skips((int)p.config)) continue;
        if (!mla_prefill_gpu(t, &d, &g, &desc, want)) continue;
        for (int si = 0; si < TH_COUNT(head_strides); ++si) {
            const int64_t sh = head_strides[si], st = c.H * sh + 8 * (si + 1);
            const size_t elems = (size_t)(c.T - 1) * st + (size_t)(c.H - 1) * sh + 512;
            th_buf_t ob = th_buf_device(elems * 2);
            th_buf_poison(&ob, 0xA5);
            dsv4_sparse_mla_prefill_args_t a = g.args;
            a.out = th_ptr(&ob);
            desc.out_stride_head = sh, desc.out_stride_token = st;
            void *s = th_stream_create(t);
            TH_OK(t, dsv4_sparse_mla_prefill(&desc, &a, NULL, 0, DSV4_STREAM(s)));
            th_stream_sync_destroy(t, s);
            uint16_t *got = malloc(elems * 2);
            th_buf_download(&ob, got);
            th_buf_guards_ok(t, &ob, "strided out");
            size_t bad_rows = 0, bad_pad = 0;
            for (size_t e = 0; e < elems; ++e) {
                const size_t tok = e / (size_t)st, r = e % (size_t)st, h = r / (size_t)sh, dim = r % (size_t)sh;
                if (h < (size_t)c.H && dim < 512) {
                    if (got[e] != want[(tok * c.H + h) * 512 + dim]) ++bad_rows;
                } else if (got[e] != 0xA5A5) {
                    ++bad_pad;
                }
            }
            TH_CHECK(t, bad_rows == 0 && bad_pad == 0,
                     "prefill config %s, out strides (%lld, %lld): %zu row elements differ from the contiguous run, "
                     "%zu padding elements written",
                     dsv4_mla_config_name(p.config), (long long)st, (long long)sh, bad_rows, bad_pad);
            free(got);
            th_buf_free(&ob);
        }
    }
    free(want);
    mla_prefill_dev_free(&g);
    mla_prefill_free(&d);
}

void test_gpu_prefill_large_t(th_ctx_t *t) {
    const mla_prefill_case_t c[2] = {
        {MC_CHUNK_T_MAX, MC_HEADS_TP2, MC_MLA_WIDTH, 9000, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 1.0, 1, 0},
        {MC_CHUNK_T, MC_HEADS_TP1, MC_MLA_WIDTH_PRO, 6000, MLA_LENS_FULL, MLA_SINK_MIXED, 1.0, 1.0, 0, 0},
    };
    const int cfg_auto[] = {DSV4_MLA_CONFIG_AUTO, DSV4_MLA_CONFIG_H32W8};
    prefill_case(t, &c[0], cfg_auto, 2, 16, NULL);
    prefill_case(t, &c[1], cfg_auto, 1, 12, NULL);
}

/* The benchmark's model shapes (model_cases.h), which the random cases above do not
 * reach: a prefill chunk of 4 requests whose tokens share window rows, at H = 64 and 32 with
 * widths 640 and 1152 (every config), and decode at T = 64, H = 64 over a 32K-slot
 * compressed cache with one split (the direct write of h16w4 and h32w4) and with the
 * auto split. Sampled tokens keep the fp64 reference short. */
void test_gpu_model_shapes(th_ctx_t *t) {
    const mla_prefill_case_t pc[] = {
        {MC_CHUNK_T, MC_HEADS_TP1, MC_MLA_WIDTH, MC_CHUNK_REQS * 2048, MLA_LENS_CHUNK, MLA_SINK_FINITE, 1.0, 1.0, 0, 0},
        {1024, MC_HEADS_TP2, MC_MLA_WIDTH_PRO, MC_CHUNK_REQS * 2048, MLA_LENS_CHUNK, MLA_SINK_MIXED, 1.0, 1.0, 0, 0},
    };
    for (int i = 0; i < TH_COUNT(pc); ++i) prefill_case(t, &pc[i], prefill_configs, TH_COUNT(prefill_configs), 8, NULL);
    const mla_decode_case_t dc = mla_decode_model_case(64, MC_HEADS_TP1, 320, 512, MLA_LENS_FULL, MLA_SINK_FINITE, 0);
    const run_opts_t opts[] = {{DSV4_MLA_CONFIG_AUTO, 0, 0},  {DSV4_MLA_CONFIG_H16W4, 1, 0},
                               {DSV4_MLA_CONFIG_H32W4, 1, 0}, {DSV4_MLA_CONFIG_H32W4, 2, 0},
                               {DSV4_MLA_CONFIG_H32W8, 1, 0}, {DSV4_MLA_CONFIG_WS32, 1, 0},
                               {DSV4_MLA_CONFIG_WS32, 2, 0},  {DSV4_MLA_CONFIG_WS64, 1, 0},
                               {DSV4_MLA_CONFIG_WS64, 2, 0}};
    decode_case(t, &dc, opts, TH_COUNT(opts), 8);
}

/* Two runs, identical bits: decode with splits (merge order fixed; and the same bits
 * from either merge route, picked through sm_count), prefill. */
void test_gpu_determinism(th_ctx_t *t) {
    const mla_decode_case_t c = {8, 64, 128, 32, 24, 1024, 64, 80, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 1, 0, 0};
    mla_decode_data_t d;
    mla_decode_make(th_rng(t), &c, &d);
    mla_decode_dev_t g;
    mla_decode_upload(&d, &g);
    const size_t n = (size_t)c.T * c.H * 512;
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
    dsv4_sparse_mla_decode_desc_t desc = d.desc;
    desc.num_splits = 7;
    dsv4_sparse_mla_plan_t plan; /* H = 64 plans ws64, which racecheck leaves out */
    TH_OK(t, dsv4_sparse_mla_decode_plan(&desc, &plan));
    if (racecheck_skips((int)plan.config)) desc.config = DSV4_MLA_CONFIG_H32W4;
    for (int route = 1; route <= 2; ++route) {
        desc.sm_count = route == 2 ? 1 << 16 : 1;
        mla_decode_gpu(t, &d, &g, &desc, route == 1 ? a : b, NULL, NULL);
        mla_decode_gpu(t, &d, &g, &desc, b, NULL, NULL);
        TH_CHECK(t, memcmp(a, b, n * 2) == 0, "decode S=7, merge route %d: two runs differ", route);
    }
    /* warp-specialised, second-launch merge */
    for (int cfg = DSV4_MLA_CONFIG_WS32; cfg <= DSV4_MLA_CONFIG_WS64 && !racecheck_skips(cfg); ++cfg) {
        desc.config = cfg;
        mla_decode_gpu(t, &d, &g, &desc, a, NULL, NULL);
        mla_decode_gpu(t, &d, &g, &desc, b, NULL, NULL);
        TH_CHECK(t, memcmp(a, b, n * 2) == 0, "decode config %s S=7: two runs differ", dsv4_mla_config_name(cfg));
    }
    mla_decode_dev_free(&g);
    mla_decode_free(&d);
    free(a), free(b);

    const mla_prefill_case_t pc = {64, 64, 640, 3000, MLA_LENS_RANDOM, MLA_SINK_FINITE, 1.0, 1.0, 1, 0};
    mla_prefill_data_t pd;
    mla_prefill_dev_t pg;
    mla_prefill_make_upload(th_rng(t), &pc, &pd, &pg);
    const size_t pn = (size_t)pc.T * pc.H * 512;
    a = malloc(pn * 2), b = malloc(pn * 2);
    dsv4_sparse_mla_prefill_desc_t pdesc = pd.desc; /* auto: ws32, except under racecheck */
    if (racecheck_skips(DSV4_MLA_CONFIG_WS32)) pdesc.config = DSV4_MLA_CONFIG_H32W4;
    mla_prefill_gpu(t, &pd, &pg, &pdesc, a);
    mla_prefill_gpu(t, &pd, &pg, &pdesc, b);
    TH_CHECK(t, memcmp(a, b, pn * 2) == 0, "prefill: two runs differ");
    mla_prefill_dev_free(&pg);
    mla_prefill_free(&pd);
    free(a), free(b);
}

/* NaN in, NaN out (attention.h, NaN and Inf): a NaN in q and a +inf key row, through every
 * config, split count and merge route, NaN positions equal to the reference's. */
void test_gpu_nan_inf(th_ctx_t *t) {
    static const run_opts_t opts[] = {{DSV4_MLA_CONFIG_AUTO, 0, 0},  {DSV4_MLA_CONFIG_AUTO, 4, 0},
                                      {DSV4_MLA_CONFIG_AUTO, 4, 1},  {DSV4_MLA_CONFIG_H16W4, 1, 0},
                                      {DSV4_MLA_CONFIG_H32W8, 8, 1}, {DSV4_MLA_CONFIG_WS64, 2, 0}};
    poison_inputs = 1;
    const mla_decode_case_t dc = mla_decode_model_case(9, 64, 40, 80, MLA_LENS_FULL, MLA_SINK_FINITE, 0);
    decode_case(t, &dc, opts, TH_COUNT(opts), 0);
    const mla_prefill_case_t pc = {7, 64, 640, 3000, MLA_LENS_FULL, MLA_SINK_FINITE, 1.0, 1.0, 0, 0};
    prefill_case(t, &pc, prefill_configs, TH_COUNT(prefill_configs), 0, NULL);
    poison_inputs = 0;
}

/* Batch-invariant mode: row r of a 37-token batch and the same request alone (its q, id
 * lists and lens as a one-token call) give identical output bits. */
void test_gpu_batch_invariant(th_ctx_t *t) {
    const int T = 37, H = 64, r = 5;
    const mla_decode_case_t c = mla_decode_model_case(T, H, 40, 80, MLA_LENS_RANDOM, MLA_SINK_FINITE, 0);
    mla_decode_data_t d;
    mla_decode_make(th_rng(t), &c, &d);
    mla_decode_dev_t g;
    mla_decode_upload(&d, &g);
    const size_t row = (size_t)H * 512;
    uint16_t *batch = malloc((size_t)T * row * 2), *alone = malloc(row * 2);
    dsv4_sparse_mla_decode_desc_t desc = d.desc;
    desc.batch_invariant = 1;
    if (mla_decode_gpu(t, &d, &g, &desc, batch, NULL, NULL)) {
        dsv4_sparse_mla_decode_desc_t one = desc;
        one.num_tokens = 1;
        dsv4_sparse_mla_decode_args_t a = g.args;
        a.q = (const uint16_t *)a.q + (size_t)r * row;
        a.main_ids += (size_t)r * c.main_width, a.main_lens += r;
        if (desc.has_extra) a.extra_ids += (size_t)r * c.extra_width, a.extra_lens += r;
        th_buf_t ob = th_buf_device(row * 2);
        th_buf_poison(&ob, 0xFF);
        a.out = th_ptr(&ob);
        size_t need = 0;
        TH_OK(t, dsv4_sparse_mla_decode_workspace_size(&one, &need));
        th_buf_t ws = th_buf_device(need ? need : 16);
        void *s = th_stream_create(t);
        TH_OK(t, dsv4_sparse_mla_decode(&one, &a, need ? th_ptr(&ws) : NULL, need, DSV4_STREAM(s)));
        th_stream_sync_destroy(t, s);
        th_buf_download(&ob, alone);
        size_t bad = 0;
        for (size_t i = 0; i < row; ++i) bad += alone[i] != batch[(size_t)r * row + i];
        TH_CHECK(t, bad == 0, "token %d alone and in a batch of %d: %zu of %zu elements differ", r, T, bad, row);
        th_buf_free(&ob), th_buf_free(&ws);
    }
    free(batch), free(alone);
    mla_decode_dev_free(&g);
    mla_decode_free(&d);
}

/* Workspace flags (attention.h, Merge): merge CTAs in the launch (merge = 2) must take only
 * their own call's flags. (a) A workspace whose every word holds the flag value of earlier
 * builds (0x7FC04D48) gives the same bits as a clean one: no merge reads early. (b) Two
 * calls in flight at once on two streams sharing the workspace (a caller error) both
 * finish: no merge waits for ever. (c) Two streams ordered by an event share it safely. */
static dsv4_status_t decode_on(const dsv4_sparse_mla_decode_desc_t *desc, const dsv4_sparse_mla_decode_args_t *a,
                               th_buf_t *ws, size_t need, void *stream) {
    return dsv4_sparse_mla_decode(desc, a, th_ptr(ws), need, DSV4_STREAM(stream));
}
void test_gpu_workspace_flags(th_ctx_t *t) {
    const int T = 4, H = 64;
    const mla_decode_case_t c = mla_decode_model_case(T, H, 40, 80, MLA_LENS_FULL, MLA_SINK_FINITE, 0);
    mla_decode_data_t d;
    mla_decode_make(th_rng(t), &c, &d);
    mla_decode_dev_t g;
    mla_decode_upload(&d, &g);
    dsv4_sparse_mla_decode_desc_t desc = d.desc;
    desc.config = DSV4_MLA_CONFIG_H16W4, desc.num_splits = 8, desc.sm_count = 1 << 16;
    dsv4_sparse_mla_plan_t p;
    TH_OK(t, dsv4_sparse_mla_decode_plan(&desc, &p));
    TH_CHECK(t, p.merge == 2, "the case plans merge %d, not the in-launch merge", p.merge);
    const size_t n = (size_t)T * H * 512, need = p.workspace_bytes;
    uint16_t *want = malloc(n * 2), *got = malloc(n * 2);
    if (p.merge == 2 && mla_decode_gpu(t, &d, &g, &desc, want, NULL, NULL)) {
        th_buf_t ws = th_buf_device(need), out2 = th_buf_device(n * 2);
        uint32_t *fill = malloc(need);
        for (size_t i = 0; i < need / 4; ++i) fill[i] = 0x7FC04D48u;
        th_buf_upload(&ws, fill); /* (a) */
        void *s1 = th_stream_create(t), *s2 = th_stream_create(t);
        TH_OK(t, decode_on(&desc, &g.args, &ws, need, s1));
        th_stream_sync_destroy(t, s1);
        th_buf_download(&g.b[1], got);
        TH_CHECK(t, memcmp(got, want, n * 2) == 0, "a workspace full of old flag words changed the output");
        dsv4_sparse_mla_decode_args_t b = g.args; /* (b): the second call writes out2 */
        b.out = th_ptr(&out2);
        s1 = th_stream_create(t);
        TH_OK(t, decode_on(&desc, &g.args, &ws, need, s1));
        TH_OK(t, decode_on(&desc, &b, &ws, need, s2));
        th_stream_sync_destroy(t, s1);
        th_stream_sync_destroy(t, s2);
        TH_CUDA(t, cudaGetLastError());
        th_buf_poison(&ws, 0);                              /* a broken call may leave flags set: the rule's remedy */
        s1 = th_stream_create(t), s2 = th_stream_create(t); /* (c) */
        cudaEvent_t ev;
        TH_CUDA(t, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        th_buf_poison(&out2, 0xFF);
        TH_OK(t, decode_on(&desc, &g.args, &ws, need, s1));
        TH_CUDA(t, cudaEventRecord(ev, (cudaStream_t)s1));
        TH_CUDA(t, cudaStreamWaitEvent((cudaStream_t)s2, ev, 0));
        TH_OK(t, decode_on(&desc, &b, &ws, need, s2));
        th_stream_sync_destroy(t, s1);
        th_stream_sync_destroy(t, s2);
        cudaEventDestroy(ev);
        th_buf_download(&out2, got);
        TH_CHECK(t, memcmp(got, want, n * 2) == 0, "ordered calls sharing the workspace: the second output differs");
        th_buf_guards_ok(t, &ws, "workspace");
        th_buf_free(&ws), th_buf_free(&out2);
        free(fill);
    }
    free(want), free(got);
    mla_decode_dev_free(&g);
    mla_decode_free(&d);
}
