/*
 * Benchmark cases of the mhc family (H = 5120, V4.1-Flash).
 *
 *   seam_v41   the V4.1 delayed seam, auto route, T = 1 .. 8192. Bytes counted as the
 *              seam's minimum traffic: residual read + written once, x read once, layer
 *              input written once = 20 H per token. T >= 512 against the copy bandwidth;
 *              smaller T against the empty-kernel launch time (both measured in the same
 *              run). The warm-l2 rows skip the flush (bench_time_warm): a decode step's x
 *              comes straight from the sublayer, so the flushed rows are the pessimistic
 *              bound of a latency that the warm rows bound from below.
 *   seam_route the small-T and tensor-core routes forced at T = 6 .. 64, on both sides of
 *              the AUTO boundary (T < 16) and of the measured crossover (T = 24 .. 32).
 *   post_sqrsum, collapse_norm, gates: the standalone ops at T = 8192 (copy ceiling).
 *
 * The seam and gates cases split fn once at setup (dsv4_mhc_fn_split) and pass fn_split,
 * as a model does after loading, so their tensor-core rows time the projection pass and the
 * gates epilogue only. One row, "T=512 H=5120 split-per-call", passes fn_split = NULL: the
 * per-call fn split stays visible.
 *
 * With --check each case first compares one run with the CPU reference: every token up
 * to T = 64, else 16 sampled tokens (the config says which). Without a GPU each case runs
 * the CPU reference on a small model-shaped input (H = 5120, T <= 4) and checks it.
 *
 * Case names read "T=<tokens> H=<hidden> ..."; T and H must be a model shape of
 * tests/harness/model_cases.h (the seam and op rows: mc_mhc_seam_T; the route rows:
 * mc_mhc_route_T; H: MC_MHC_HIDDEN).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "dsv4/numerics.h"
#include "model_cases.h"

/* ---- inputs -------------------------------------------------------------------------------- */
static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}
static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1p-53; }
static void fill_bf16(uint64_t *s, uint16_t *d, size_t n) { /* +-[1/64, 16) */
    for (size_t i = 0; i < n; ++i) {
        const uint64_t u = rng_next(s);
        d[i] = (uint16_t)(((u >> 63) << 15) | ((uint16_t)(121 + (u >> 8) % 10) << 7) | (u & 0x7F));
    }
}
static void fill_f32(uint64_t *s, float *d, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; ++i) d[i] = (float)(lo + (hi - lo) * rng_unit(s));
}

typedef struct {
    int64_t T, H;
    uint16_t *x, *R, *w;
    float *post, *comb, *fn, *pre_mix, scale[3], base[24];
} host_in_t;

static void host_in_make(host_in_t *h, int64_t T, int64_t H, uint64_t seed) {
    uint64_t s = seed | 1;
    h->T = T, h->H = H;
    h->x = malloc((size_t)(T * H) * 2);
    h->R = malloc((size_t)(T * 4 * H) * 2);
    h->w = malloc((size_t)H * 2);
    h->post = malloc((size_t)(4 * T) * 4);
    h->comb = malloc((size_t)(16 * T) * 4);
    h->pre_mix = malloc((size_t)(4 * T) * 4);
    h->fn = malloc((size_t)(96 * H) * 4);
    fill_bf16(&s, h->x, (size_t)(T * H));
    fill_bf16(&s, h->R, (size_t)(T * 4 * H));
    for (int64_t i = 0; i < H; ++i) h->w[i] = dsv4_f32_to_bf16((float)(0.5 + rng_unit(&s)));
    fill_f32(&s, h->post, (size_t)(4 * T), 0.0, 2.0);
    fill_f32(&s, h->comb, (size_t)(16 * T), 0.0, 1.0);
    fill_f32(&s, h->pre_mix, (size_t)(4 * T), 0.0, 1.0);
    fill_f32(&s, h->fn, (size_t)(96 * H), -1.7 / sqrt(4.0 * H), 1.7 / sqrt(4.0 * H));
    fill_f32(&s, h->scale, 3, 0.5, 1.5);
    fill_f32(&s, h->base, 24, -0.5, 0.5);
}

static void host_in_free(host_in_t *h) {
    free(h->x), free(h->R), free(h->w), free(h->post), free(h->comb), free(h->pre_mix), free(h->fn);
}

/* ---- the seam on the device -------------------------------------------------------------- */
typedef struct {
    dsv4_mhc_seam_desc_t d;
    dsv4_mhc_seam_args_t a;
    void *bufs[16];
    uint16_t *split; /* fn's split (dsv4_mhc_fn_split) when made at setup, else NULL */
    int nbufs;
    void *ws;
    size_t ws_bytes;
} seam_state_t;

static void *dev_copy(seam_state_t *s, const void *src, size_t bytes) {
    void *p = bench_dev_alloc(bytes);
    if (p && src && bench_upload(p, src, bytes)) p = NULL;
    s->bufs[s->nbufs++] = p;
    return p;
}

static void seam_free(seam_state_t *s) {
    for (int i = 0; i < s->nbufs; ++i) bench_dev_free(s->bufs[i]);
    if (s->ws) bench_dev_free(s->ws);
}

static dsv4_status_t split_launch(bench_ctx_t *ctx, void *state) {
    seam_state_t *s = state;
    const dsv4_mhc_fn_split_desc_t d = {s->d.hidden, 0};
    const dsv4_mhc_fn_split_args_t a = {s->a.fn, s->split};
    return dsv4_mhc_fn_split(&d, &a, NULL, 0, DSV4_STREAM(ctx->stream));
}

/* presplit = 1: fn's split is made here, once (what a model does after loading), and
 * every run passes it as fn_split; 0: fn_split = NULL, each tensor-core run splits fn. */
static int seam_setup(bench_ctx_t *ctx, seam_state_t *s, const host_in_t *h, int route, int presplit) {
    const int64_t T = h->T, H = h->H;
    memset(s, 0, sizeof *s);
    const dsv4_mhc_seam_desc_t d = {T, H, DSV4_MHC_V41, route, DSV4_MHC_GATE_PARAMS_V41, 1e-20f, H, 4 * H, 4 * H, H, H};
    s->d = d;
    dsv4_mhc_seam_args_t a = {dev_copy(s, h->x, (size_t)(T * H) * 2),
                              dev_copy(s, h->R, (size_t)(T * 4 * H) * 2),
                              dev_copy(s, h->post, (size_t)(4 * T) * 4),
                              dev_copy(s, h->comb, (size_t)(16 * T) * 4),
                              dev_copy(s, h->fn, (size_t)(96 * H) * 4),
                              dev_copy(s, h->scale, 12),
                              dev_copy(s, h->base, 96),
                              dev_copy(s, h->pre_mix, (size_t)(4 * T) * 4),
                              dev_copy(s, h->w, (size_t)H * 2),
                              dev_copy(s, NULL, (size_t)(T * 4 * H) * 2),
                              dev_copy(s, NULL, (size_t)(4 * T) * 4),
                              dev_copy(s, NULL, (size_t)(16 * T) * 4),
                              dev_copy(s, NULL, (size_t)(4 * T) * 4),
                              dev_copy(s, NULL, (size_t)(T * H) * 2),
                              NULL,
                              NULL,
                              NULL};
    s->a = a;
    if (presplit) s->split = dev_copy(s, NULL, (size_t)(48 * 4 * H) * 2);
    for (int i = 0; i < s->nbufs; ++i)
        if (!s->bufs[i]) return 1;
    if (presplit) {
        if (bench_run_once(ctx, split_launch, s)) return 1;
        s->a.fn_split = s->split;
    }
    if (dsv4_mhc_seam_workspace_size(&s->d, &s->ws_bytes)) return 1;
    s->ws = bench_dev_alloc(s->ws_bytes);
    return s->ws ? 0 : 1;
}

static dsv4_status_t seam_launch(bench_ctx_t *ctx, void *state) {
    seam_state_t *s = state;
    return dsv4_mhc_seam(&s->d, &s->a, s->ws, s->ws_bytes, DSV4_STREAM(ctx->stream));
}

/* Tokens to check: all up to 64, else 16 spread over T (first and last included). */
static int64_t check_tokens(int64_t T, int64_t *ids) {
    if (T <= 64) {
        for (int64_t i = 0; i < T; ++i) ids[i] = i;
        return T;
    }
    for (int64_t i = 0; i < 16; ++i) ids[i] = i * (T - 1) / 15;
    return 16;
}

static int max_bf16_ulps(const uint16_t *a, const uint16_t *b, int64_t n) {
    int worst = 0;
    for (int64_t i = 0; i < n; ++i) {
        const int32_t oa = (a[i] & 0x8000) ? -(int32_t)(a[i] & 0x7FFF) : (int32_t)(a[i] & 0x7FFF);
        const int32_t ob = (b[i] & 0x8000) ? -(int32_t)(b[i] & 0x7FFF) : (int32_t)(b[i] & 0x7FFF);
        const int d = abs(oa - ob);
        if (d > worst) worst = d;
    }
    return worst;
}

static double max_abs_diff(const float *a, const float *b, int64_t n) {
    double worst = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double d = fabs((double)a[i] - b[i]);
        if (d > worst || d != d) worst = d;
    }
    return worst;
}

/* The seam of the sampled tokens on the CPU (route forced to the one the GPU ran) against
 * the GPU's outputs at those tokens: R_out bit-exact, layer input within 1 bf16 ulp,
 * gates within 1e-5. */
static int seam_check(const host_in_t *h, const seam_state_t *s, char *note, size_t note_len) {
    const int64_t T = h->T, H = h->H;
    int64_t ids[64];
    const int64_t n = check_tokens(T, ids);
    dsv4_mhc_plan_t pl;
    dsv4_mhc_plan(T, H, 0, s->d.route, &pl);
    host_in_t sub = {n,
                     H,
                     malloc((size_t)(n * H) * 2),
                     malloc((size_t)(n * 4 * H) * 2),
                     h->w,
                     malloc((size_t)(4 * n) * 4),
                     malloc((size_t)(16 * n) * 4),
                     h->fn,
                     malloc((size_t)(4 * n) * 4),
                     {0},
                     {0}};
    memcpy(sub.scale, h->scale, sizeof sub.scale);
    memcpy(sub.base, h->base, sizeof sub.base);
    uint16_t *ref_R = malloc((size_t)(n * 4 * H) * 2), *ref_li = malloc((size_t)(n * H) * 2);
    uint16_t *got_R = malloc((size_t)(n * 4 * H) * 2), *got_li = malloc((size_t)(n * H) * 2);
    float ref_g[64 * 24], got_g[64 * 24];
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t t = ids[i];
        memcpy(sub.x + i * H, h->x + t * H, (size_t)H * 2);
        memcpy(sub.R + i * 4 * H, h->R + t * 4 * H, (size_t)(4 * H) * 2);
        memcpy(sub.post + 4 * i, h->post + 4 * t, 16);
        memcpy(sub.comb + 16 * i, h->comb + 16 * t, 64);
        memcpy(sub.pre_mix + 4 * i, h->pre_mix + 4 * t, 16);
        bad |= bench_download(got_R + i * 4 * H, (const uint16_t *)s->a.residual_out + t * 4 * H, (size_t)(4 * H) * 2);
        bad |= bench_download(got_li + i * H, s->a.layer_input + t * H, (size_t)H * 2);
        bad |= bench_download(got_g + 24 * i, s->a.post_out + 4 * t, 16);
        bad |= bench_download(got_g + 24 * i + 4, s->a.comb_out + 16 * t, 64);
        bad |= bench_download(got_g + 24 * i + 20, s->a.pre_out + 4 * t, 16);
    }
    dsv4_mhc_seam_desc_t d = s->d;
    d.tokens = n;
    d.route = pl.route;
    float *rp = ref_g, post[256], comb[1024], pre[256];
    dsv4_mhc_seam_args_t a = {sub.x, sub.R, sub.post, sub.comb, h->fn,  h->scale, h->base, sub.pre_mix, h->w,
                              ref_R, post,  comb,     pre,      ref_li, NULL,     NULL,    NULL};
    if (!bad && dsv4_mhc_seam_ref(&d, &a) == DSV4_STATUS_SUCCESS) {
        for (int64_t i = 0; i < n; ++i) {
            memcpy(rp + 24 * i, post + 4 * i, 16);
            memcpy(rp + 24 * i + 4, comb + 16 * i, 64);
            memcpy(rp + 24 * i + 20, pre + 4 * i, 16);
        }
        const int r_ulps = max_bf16_ulps(got_R, ref_R, n * 4 * H), li_ulps = max_bf16_ulps(got_li, ref_li, n * H);
        const double g = max_abs_diff(got_g, ref_g, 24 * n);
        bad = r_ulps != 0 || li_ulps > 1 || !(g <= 1e-5);
        snprintf(note, note_len, "checked %s%lld tokens: R_out %d ulp, layer_input %d ulp, gates %.1e",
                 T > 64 ? "sampled " : "", (long long)n, r_ulps, li_ulps, g);
    } else {
        bad = 1;
        snprintf(note, note_len, "check could not run: %s", dsv4_last_error());
    }
    free(sub.x), free(sub.R), free(sub.post), free(sub.comb), free(sub.pre_mix);
    free(ref_R), free(ref_li), free(got_R), free(got_li);
    return bad;
}

/* No GPU: the seam reference on T <= 4 tokens, checked for what must hold exactly
 * (R_out equals the post reference, the un-normed layer input equals the collapse
 * reference) and Sinkhorn's column sums. */
typedef struct {
    const host_in_t *h;
    dsv4_mhc_seam_desc_t d;
    dsv4_mhc_seam_args_t a;
} cpu_seam_t;
static dsv4_status_t cpu_seam_run(void *state) {
    cpu_seam_t *c = state;
    return dsv4_mhc_seam_ref(&c->d, &c->a);
}

static int seam_case_cpu(bench_ctx_t *ctx, const char *op, const char *name, int64_t T, int route) {
    const int64_t n = T < 4 ? T : 4, H = MC_MHC_HIDDEN;
    host_in_t h;
    host_in_make(&h, n, H, 0x5EA4 + (uint64_t)T);
    uint16_t *R = malloc((size_t)(n * 4 * H) * 2), *R2 = malloc((size_t)(n * 4 * H) * 2);
    uint16_t *li = malloc((size_t)(n * H) * 2), *li2 = malloc((size_t)(n * H) * 2);
    float post[16], comb[64], pre[16];
    cpu_seam_t c = {&h,
                    {n, H, DSV4_MHC_V41, route, DSV4_MHC_GATE_PARAMS_V41, 1e-20f, H, 4 * H, 4 * H, H, H},
                    {h.x, h.R, h.post, h.comb, h.fn, h.scale, h.base, h.pre_mix, NULL, R, post, comb, pre, li, NULL,
                     NULL, NULL}};
    bench_timing_t tm;
    const dsv4_status_t st = bench_time_cpu(cpu_seam_run, &c, 3, &tm);
    dsv4_mhc_post_desc_t pd = {n, H, H, 4 * H, 4 * H};
    dsv4_mhc_post_args_t pa = {h.x, h.R, h.post, h.comb, R2, NULL};
    dsv4_mhc_collapse_desc_t cd = {n, H, DSV4_MHC_V41, 1e-20f, 4 * H, H, H};
    dsv4_mhc_collapse_args_t ca = {R2, h.pre_mix, NULL, li2, NULL};
    int bad = st != DSV4_STATUS_SUCCESS || dsv4_mhc_post_ref(&pd, &pa) || dsv4_mhc_collapse_ref(&cd, &ca);
    bad |= memcmp(R, R2, (size_t)(n * 4 * H) * 2) != 0 || memcmp(li, li2, (size_t)(n * H) * 2) != 0;
    for (int64_t i = 0; i < n; ++i)
        for (int k = 0; k < 4; ++k) {
            const double s =
                (double)comb[16 * i + k] + comb[16 * i + 4 + k] + comb[16 * i + 8 + k] + comb[16 * i + 12 + k];
            bad |= !(fabs(s - 1.0) <= 1e-5);
        }
    char ran[64];
    snprintf(ran, sizeof ran, "T=%lld H=%lld%s", (long long)n, (long long)H,
             route == DSV4_MHC_ROUTE_SMALL_T ? " route=small-t"
             : route == DSV4_MHC_ROUTE_AUTO  ? ""
                                             : " route=tensor-core");
    bench_report_cpu(ctx, op, name, ran, &tm, bad ? "fail" : "pass");
    free(R), free(R2), free(li), free(li2);
    host_in_free(&h);
    return bad;
}

static int seam_case(bench_ctx_t *ctx, const char *op, const char *name, int64_t T, int route, int warm, int presplit) {
    if (!ctx->have_gpu) return seam_case_cpu(ctx, op, name, T, route);
    const int64_t H = MC_MHC_HIDDEN;
    host_in_t h;
    host_in_make(&h, T, H, 0x5EA4 + (uint64_t)T);
    seam_state_t s;
    int bad = seam_setup(ctx, &s, &h, route, presplit);
    char config[256] = "", note[160] = "not checked";
    const char *check = "skipped";
    if (!bad && ctx->check) {
        bad = seam_launch(ctx, &s) != DSV4_STATUS_SUCCESS || seam_check(&h, &s, note, sizeof note);
        check = bad ? "fail" : "pass";
    }
    bench_timing_t tm;
    if (!bad && (warm ? bench_time_warm : bench_time)(ctx, seam_launch, &s, &tm) == DSV4_STATUS_SUCCESS) {
        dsv4_mhc_plan_t pl;
        dsv4_mhc_plan(T, H, 0, route, &pl);
        snprintf(config, sizeof config, "H=%lld route=%s S=%d tokens_per_cta=%d ctas=%lld ws=%zuB fn=%s; %s",
                 (long long)H, pl.route == DSV4_MHC_ROUTE_SMALL_T ? "small-T" : "tensor-core", (int)pl.splits,
                 (int)pl.tokens_per_cta, (long long)pl.ctas, pl.workspace_bytes,
                 presplit ? "pre-split" : "split per call", note);
        const double bytes = 20.0 * H * T, flops = 2.0 * 24 * 4 * H * T;
        bench_report(ctx, op, name, config, &tm, bytes, flops, T >= 512 ? BENCH_CEIL_COPY : BENCH_CEIL_LAUNCH, check);
    } else {
        printf("%-16s %-34s FAILED: %s (%s)\n", op, name, dsv4_last_error(), note);
        bad = 1;
    }
    seam_free(&s);
    host_in_free(&h);
    return bad;
}

/* A row's T from its name ("T=<tokens> H=<hidden> ..."), which must be a model shape: H the
 * V4.1 hidden size and T one of `list` (model_cases.h). 0 when it is. */
static int model_shape(const char *op, const char *name, const int64_t *list, int n, int64_t *T) {
    long long t = 0, h = 0;
    if (sscanf(name, "T=%lld H=%lld", &t, &h) == 2 && h == MC_MHC_HIDDEN && mc_listed(t, list, n)) {
        *T = t;
        return 0;
    }
    printf("%s %s: not a model shape (model_cases.h)\n", op, name);
    return 1;
}

/* The seam rows: T and H, then route=small-t or route=tensor-core (forced; else auto),
 * warm-l2 (inputs left in L2 by the previous rep, bench_time_warm, as in a decode step where
 * x comes straight from the sublayer; the other rows flush L2 first) and split-per-call
 * (fn_split = NULL: the per-call fn split on the tensor-core route). */
static int seam_named(bench_ctx_t *ctx, const char *op, const char *name) {
    const int sweep = !strcmp(op, "mhc_seam_route");
    int64_t T = 0;
    if (model_shape(op, name, sweep ? mc_mhc_route_T : mc_mhc_seam_T,
                    sweep ? MC_COUNT(mc_mhc_route_T) : MC_COUNT(mc_mhc_seam_T), &T))
        return 1;
    const int route = strstr(name, "route=small-t")       ? DSV4_MHC_ROUTE_SMALL_T
                      : strstr(name, "route=tensor-core") ? DSV4_MHC_ROUTE_TENSOR_CORE
                                                          : DSV4_MHC_ROUTE_AUTO;
    return seam_case(ctx, op, name, T, route, strstr(name, "warm-l2") != NULL, strstr(name, "split-per-call") == NULL);
}

/* ---- standalone ops at T = 8192 ------------------------------------------------------------- */
typedef struct {
    int which; /* 0 post+sqrsum, 1 collapse+norm, 2 gates */
    dsv4_mhc_post_desc_t pd;
    dsv4_mhc_post_args_t pa;
    dsv4_mhc_collapse_desc_t cd;
    dsv4_mhc_collapse_args_t ca;
    dsv4_mhc_gates_desc_t gd;
    dsv4_mhc_gates_args_t ga;
    void *ws;
    size_t ws_bytes;
} op_state_t;

static dsv4_status_t op_launch(bench_ctx_t *ctx, void *state) {
    op_state_t *o = state;
    dsv4_stream_t s = DSV4_STREAM(ctx->stream);
    if (o->which == 0) return dsv4_mhc_post(&o->pd, &o->pa, NULL, 0, s);
    if (o->which == 1) return dsv4_mhc_collapse(&o->cd, &o->ca, NULL, 0, s);
    return dsv4_mhc_gates(&o->gd, &o->ga, o->ws, o->ws_bytes, s);
}

static dsv4_status_t op_cpu_run(void *state) {
    op_state_t *o = state;
    if (o->which == 0) return dsv4_mhc_post_ref(&o->pd, &o->pa);
    if (o->which == 1) return dsv4_mhc_collapse_ref(&o->cd, &o->ca);
    return dsv4_mhc_gates_ref(&o->gd, &o->ga);
}

static int op_case(bench_ctx_t *ctx, const char *op, const char *name, int which) {
    int64_t T_gpu = 0;
    if (model_shape(op, name, mc_mhc_seam_T, MC_COUNT(mc_mhc_seam_T), &T_gpu)) return 1;
    const int64_t H = MC_MHC_HIDDEN, T = ctx->have_gpu ? T_gpu : 4;
    host_in_t h;
    host_in_make(&h, T, H, 0x0B5 + (uint64_t)which);
    seam_state_t bufs; /* reuse the seam's device buffers: same tensors */
    op_state_t o;
    memset(&o, 0, sizeof o);
    int bad = 0;
    const uint16_t *R = h.R, *w = h.w;
    const float *post = h.post, *comb = h.comb, *fn = h.fn, *scale = h.scale, *base = h.base, *pm = h.pre_mix;
    const uint16_t *x = h.x;
    uint16_t *R_out = NULL, *out = NULL;
    float *sq = NULL, *gpost = NULL, *gcomb = NULL, *gpre = NULL;
    const uint16_t *split = NULL;
    if (ctx->have_gpu) {
        bad = seam_setup(ctx, &bufs, &h, 0, which == 2); /* gates: fn split once, as a model does */
        x = bufs.a.x, R = bufs.a.residual, post = bufs.a.post, comb = bufs.a.comb, fn = bufs.a.fn;
        scale = bufs.a.scale, base = bufs.a.base, pm = bufs.a.pre_mix, w = bufs.a.norm_weight;
        R_out = bufs.a.residual_out, out = bufs.a.layer_input;
        sq = bufs.a.pre_out, gpost = bufs.a.post_out, gcomb = bufs.a.comb_out, gpre = bufs.a.pre_out;
        o.ws = bufs.ws, o.ws_bytes = bufs.ws_bytes;
        split = bufs.split;
    } else {
        R_out = malloc((size_t)(T * 4 * H) * 2), out = malloc((size_t)(T * H) * 2);
        sq = malloc((size_t)T * 4), gpost = malloc((size_t)T * 16), gcomb = malloc((size_t)T * 64);
        gpre = malloc((size_t)T * 16);
    }
    o.which = which;
    const dsv4_mhc_post_desc_t pd = {T, H, H, 4 * H, 4 * H};
    const dsv4_mhc_post_args_t pa = {x, R, post, comb, R_out, sq};
    const dsv4_mhc_collapse_desc_t cd = {T, H, DSV4_MHC_V41, 1e-20f, 4 * H, H, H};
    const dsv4_mhc_collapse_args_t ca = {R, pm, w, out, NULL};
    const dsv4_mhc_gates_desc_t gd = {T, H, 0, 0, DSV4_MHC_GATE_PARAMS_V41, 4 * H};
    const dsv4_mhc_gates_args_t ga = {R, fn, scale, base, NULL, gpost, gcomb, gpre, NULL, split};
    o.pd = pd, o.pa = pa, o.cd = cd, o.ca = ca, o.gd = gd, o.ga = ga;
    /* post+sqrsum reads x and R, writes R_new (18H) + sqrsum; collapse+norm reads R, writes
     * the layer input (10H); gates reads R (8H) */
    const double bytes = which == 0 ? 18.0 * H * T + 4.0 * T : (which == 1 ? 10.0 * H * T : 8.0 * H * T);
    const double flops = which == 2 ? 2.0 * 24 * 4 * H * T : 0.0;
    bench_timing_t tm;
    if (!ctx->have_gpu) {
        int ok = bench_time_cpu(op_cpu_run, &o, 3, &tm) == DSV4_STATUS_SUCCESS;
        if (which == 0) /* sqrsum equals the sum of squares of the stored outputs */
            for (int64_t i = 0; i < T; ++i) {
                double s = 0.0;
                for (int64_t e = 0; e < 4 * H; ++e) s += pow(dsv4_bf16_to_f32(R_out[i * 4 * H + e]), 2);
                ok &= fabs(s - sq[i]) <= 1e-5 * s;
            }
        else if (which == 1) { /* out = bf16((yb * rn) * w) with rn from the un-normed collapse, in fp64 */
            dsv4_mhc_collapse_args_t raw = ca;
            uint16_t *yb = malloc((size_t)(T * H) * 2);
            raw.norm_weight = NULL, raw.out = yb;
            ok &= dsv4_mhc_collapse_ref(&cd, &raw) == DSV4_STATUS_SUCCESS;
            for (int64_t i = 0; i < T; ++i) {
                double ss = 0.0;
                for (int64_t e = 0; e < H; ++e) ss += pow(dsv4_bf16_to_f32(yb[i * H + e]), 2);
                const double rn = 1.0 / sqrt(ss / H + 1e-20);
                for (int64_t e = 0; e < H; ++e) {
                    const double want = dsv4_bf16_to_f32(yb[i * H + e]) * rn * dsv4_bf16_to_f32(w[e]);
                    ok &= fabs(dsv4_bf16_to_f32(out[i * H + e]) - want) <= fabs(want) * 0x1p-7;
                }
            }
            free(yb);
        } else if (which == 2)
            for (int64_t i = 0; i < T; ++i)
                for (int k = 0; k < 4; ++k)
                    ok &= fabs((double)gcomb[16 * i + k] + gcomb[16 * i + 4 + k] + gcomb[16 * i + 8 + k] +
                               gcomb[16 * i + 12 + k] - 1.0) <= 1e-5;
        char ran[64];
        snprintf(ran, sizeof ran, "T=%lld H=%lld", (long long)T, (long long)H);
        bench_report_cpu(ctx, op, name, ran, &tm, ok ? "pass" : "fail");
        bad = !ok;
        free(R_out), free(out), free(sq), free(gpost), free(gcomb), free(gpre);
    } else {
        if (!bad && bench_time(ctx, op_launch, &o, &tm) == DSV4_STATUS_SUCCESS) {
            char config[128];
            snprintf(config, sizeof config, "H=%lld T=%lld%s (timing only; the tests check these ops)", (long long)H,
                     (long long)T, which == 2 ? " fn=pre-split" : "");
            bench_report(ctx, op, name, config, &tm, bytes, flops, BENCH_CEIL_COPY, "skipped");
        } else {
            printf("%-16s %-34s FAILED: %s\n", op, name, dsv4_last_error());
            bad = 1;
        }
        seam_free(&bufs);
    }
    host_in_free(&h);
    return bad;
}

static int post_sqrsum_case(bench_ctx_t *c, const char *op, const char *n) { return op_case(c, op, n, 0); }
static int collapse_case(bench_ctx_t *c, const char *op, const char *n) { return op_case(c, op, n, 1); }
static int gates_case(bench_ctx_t *c, const char *op, const char *n) { return op_case(c, op, n, 2); }

const bench_case_t bench_mhc_cases[] = {
    {"mhc_seam_v41", "T=1 H=5120", seam_named},
    {"mhc_seam_v41", "T=6 H=5120", seam_named},
    {"mhc_seam_v41", "T=12 H=5120", seam_named},
    {"mhc_seam_v41", "T=16 H=5120", seam_named},
    {"mhc_seam_v41", "T=64 H=5120", seam_named},
    {"mhc_seam_v41", "T=512 H=5120", seam_named},
    {"mhc_seam_v41", "T=512 H=5120 split-per-call", seam_named},
    {"mhc_seam_v41", "T=2048 H=5120", seam_named},
    {"mhc_seam_v41", "T=8192 H=5120", seam_named},
    {"mhc_seam_v41", "T=6 H=5120 warm-l2", seam_named},
    {"mhc_seam_v41", "T=12 H=5120 warm-l2", seam_named},
    {"mhc_seam_route", "T=6 H=5120 route=small-t", seam_named},
    {"mhc_seam_route", "T=6 H=5120 route=tensor-core", seam_named},
    {"mhc_seam_route", "T=12 H=5120 route=small-t", seam_named},
    {"mhc_seam_route", "T=12 H=5120 route=tensor-core", seam_named},
    {"mhc_seam_route", "T=16 H=5120 route=small-t", seam_named},
    {"mhc_seam_route", "T=16 H=5120 route=tensor-core", seam_named},
    {"mhc_seam_route", "T=24 H=5120 route=small-t", seam_named},
    {"mhc_seam_route", "T=24 H=5120 route=tensor-core", seam_named},
    {"mhc_seam_route", "T=32 H=5120 route=small-t", seam_named},
    {"mhc_seam_route", "T=32 H=5120 route=tensor-core", seam_named},
    {"mhc_seam_route", "T=48 H=5120 route=small-t", seam_named},
    {"mhc_seam_route", "T=48 H=5120 route=tensor-core", seam_named},
    {"mhc_seam_route", "T=64 H=5120 route=small-t", seam_named},
    {"mhc_seam_route", "T=64 H=5120 route=tensor-core", seam_named},
    {"mhc_post_sqrsum", "T=8192 H=5120", post_sqrsum_case},
    {"mhc_collapse", "T=8192 H=5120 norm", collapse_case},
    {"mhc_gates", "T=8192 H=5120", gates_case},
};
const int bench_mhc_count = (int)(sizeof bench_mhc_cases / sizeof bench_mhc_cases[0]);
