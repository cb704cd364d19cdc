/*
 * Benchmark cases of the attention family: sparse MLA prefill and decode, timed through
 * the public API. Case names carry the shape as space-separated key=value tokens: T
 * (tokens), H (heads), w (keys per token: prefill width, or decode main+extra), optional
 * config (a forced kernel configuration by its dsv4_mla_config_name), S (a forced split
 * count) and merge (1: second launch, 2: merge CTAs in the attention launch, forced
 * through the plan's SM count); names with a config or S are the sweep the auto choices
 * come from. T, H and w must be a model shape of tests/harness/model_cases.h, whose shapes
 * the tests run too.
 *
 * Prefill: a 4-request chunk over a 4 x 48K-row bf16 workspace (192 MB, far above L2,
 * flushed before each rep); token t of request b picks width-128 distinct compressed
 * rows of its slab and the 128 window rows before its position. FLOPs = 2*T*H*width*1024
 * (QK + PV over every listed key); bytes = q + out + T*width*1024 (rows as read per token).
 * Ceiling: mma.sync.
 *
 * Decode: a compressed cache of 131,072 slots (P = 64, 2,048 pages of 37,440 B = 76.7 MB)
 * and an SWA cache (P = 32) of 64 requests; each token reads its request's 128 window
 * slots then 512 random compressed slots. FLOPs = 2048*H*n per token; bytes = 584*n per
 * token (+ q, out, ids), n = 640. Ceiling: whichever binds (mma if FLOPs/mma > bytes/copy),
 * and T = 1 against the empty-kernel launch.
 *
 * --check compares a sample of tokens (say which in the config string) with the fp64
 * reference, held to the accuracy contract of include/dsv4/attention.h (DSV4_MLA_TOL_*).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "dsv4/numerics.h"
#include "model_cases.h"

/* ---- small helpers ------------------------------------------------------------------ */

/* Dense q and out ([T, H, 512] rows): strides have no default. */
#define DENSE_QO(d, H)                                                                                                 \
    ((d)->q_stride_token = (H)*512, (d)->q_stride_head = 512, (d)->out_stride_token = (H)*512,                         \
     (d)->out_stride_head = 512)

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { return bench_rng_next(&rng_state); }
static double rnd_normal(void) {
    double u1 = ((rnd() >> 11) + 1) * 0x1p-53, u2 = (rnd() >> 11) * 0x1p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
static void fill_bf16(uint16_t *p, size_t n, double scale) {
    for (size_t i = 0; i < n; ++i) p[i] = dsv4_f32_to_bf16((float)(scale * rnd_normal()));
}

/* Parse "T=64 H=64 w=128+512 config=h32w4 S=3 merge=1"-style names (missing keys stay 0,
 * the auto choice; an unknown config name gives -1, which the plan rejects). */
typedef struct {
    int T, H, w_main, w_extra, cfg, S, merge;
} shape_t;
static int config_id(const char *name) {
    for (int c = DSV4_MLA_CONFIG_AUTO; c <= DSV4_MLA_NUM_CONFIGS; ++c)
        if (!strcmp(name, dsv4_mla_config_name(c))) return c;
    return -1;
}
static shape_t parse(const char *name) {
    shape_t s = {0, 0, 0, 0, 0, 0, 0};
    for (const char *p = name; *p;) {
        const size_t n = strcspn(p, " ");
        char tok[64];
        snprintf(tok, sizeof tok, "%.*s", (int)n, p);
        char *v = strchr(tok, '=');
        if (v) {
            *v++ = '\0';
            if (!strcmp(tok, "T")) s.T = atoi(v);
            else if (!strcmp(tok, "H")) s.H = atoi(v);
            else if (!strcmp(tok, "w")) {
                s.w_main = atoi(v);
                const char *plus = strchr(v, '+');
                if (plus) s.w_extra = atoi(plus + 1);
            } else if (!strcmp(tok, "config")) s.cfg = config_id(v);
            else if (!strcmp(tok, "S")) s.S = atoi(v);
            else if (!strcmp(tok, "merge")) s.merge = atoi(v);
        }
        p += n;
        while (*p == ' ') ++p;
    }
    return s;
}

/* The rows time model shapes (model_cases.h): prefill at a listed chunk length, head count
 * and width; decode at a listed (T, H) with at most its list widths (fewer: the rows that
 * sweep the tiles per CTA). */
static int model_prefill(shape_t s) {
    return mc_listed(s.T, mc_mla_prefill_T, MC_COUNT(mc_mla_prefill_T)) &&
           mc_listed(s.H, mc_mla_heads, MC_COUNT(mc_mla_heads)) &&
           mc_listed(s.w_main, mc_mla_prefill_widths, MC_COUNT(mc_mla_prefill_widths)) && s.w_extra == 0;
}
static int model_decode(shape_t s) {
    for (int i = 0; i < MC_COUNT(mc_mla_decode_shapes); ++i) {
        const mc_mla_decode_shape_t *m = &mc_mla_decode_shapes[i];
        if (m->T == s.T && m->H == s.H)
            return s.w_main >= 0 && s.w_main <= m->w_main && s.w_extra >= 0 && s.w_extra <= m->w_extra;
    }
    return 0;
}

/* Tolerance check of sampled tokens (bf16 got vs fp64 ref): attention.h's DSV4_MLA_TOL_*. */
static int check_tokens(const uint16_t *got, const double *ref, int ntok, int H, double max_k, double *max_err) {
    double num = 0, den = 0, worst = 0;
    int nan_bad = 0;
    for (size_t i = 0; i < (size_t)ntok * H * 512; ++i) {
        const double g = dsv4_bf16_to_f32(got[i]), r = ref[i];
        if (isnan(g) != isnan(r)) ++nan_bad;
        if (isnan(g) || isnan(r)) continue;
        worst = fmax(worst, fabs(g - r));
        num += (g - r) * (g - r);
        den += r * r;
    }
    *max_err = worst;
    return !nan_bad && worst <= DSV4_MLA_TOL_MAX_ABS * max_k &&
           (den == 0 ? num == 0 : sqrt(num / den) <= DSV4_MLA_TOL_REL_L2);
}

/* ---- prefill ------------------------------------------------------------------------ */

enum {
    PF_REQ = MC_CHUNK_REQS,
    PF_SLAB = 48 * 1024,
    PF_COMPRESSED = 32 * 1024,
    PF_TMAX = MC_MLA_PREFILL_T_MAX,
    PF_HMAX = MC_HEADS_TP1,
    PF_WMAX = MC_MLA_WIDTH_PRO
};

typedef struct {
    uint16_t *kv_h; /* host copy for the reference */
    void *kv, *q, *out, *ids, *lens, *sink;
    int32_t *ids_h, *lens_h;
    uint16_t *q_h;
    float *sink_h;
    double max_k;
    int ready;
} prefill_world_t;
static prefill_world_t pw;

static int prefill_world(void) {
    if (pw.ready) return 0;
    const size_t rows = (size_t)PF_REQ * PF_SLAB, qn = (size_t)PF_TMAX * PF_HMAX * 512;
    pw.kv_h = malloc(rows * 512 * 2);
    pw.q_h = malloc(qn * 2);
    pw.sink_h = malloc(PF_HMAX * 4);
    if (!pw.kv_h || !pw.q_h || !pw.sink_h) return 1;
    fill_bf16(pw.kv_h, rows * 512, 1.0);
    fill_bf16(pw.q_h, qn, 1.0);
    for (size_t i = 0; i < rows * 512; ++i) pw.max_k = fmax(pw.max_k, fabs(dsv4_bf16_to_f32(pw.kv_h[i])));
    for (int h = 0; h < PF_HMAX; ++h) pw.sink_h[h] = (float)rnd_normal();
    pw.kv = bench_dev_alloc(rows * 512 * 2);
    pw.q = bench_dev_alloc(qn * 2);
    pw.out = bench_dev_alloc(qn * 2);
    pw.ids = bench_dev_alloc((size_t)PF_TMAX * PF_WMAX * 4);
    pw.lens = bench_dev_alloc((size_t)PF_TMAX * 4);
    pw.sink = bench_dev_alloc(PF_HMAX * 4);
    pw.ids_h = malloc((size_t)PF_TMAX * PF_WMAX * 4);
    pw.lens_h = malloc((size_t)PF_TMAX * 4);
    if (!pw.kv || !pw.q || !pw.out || !pw.ids || !pw.lens || !pw.sink || !pw.ids_h || !pw.lens_h) return 1;
    if (bench_upload(pw.kv, pw.kv_h, rows * 512 * 2) || bench_upload(pw.q, pw.q_h, qn * 2) ||
        bench_upload(pw.sink, pw.sink_h, PF_HMAX * 4))
        return 1;
    pw.ready = 1;
    return 0;
}

/* Lists of a T-token chunk of 4 requests: width-128 distinct compressed rows of the
 * request's slab (sorted, as top-k sets come), then the window rows of its position. */
static int prefill_lists(int T, int width) {
    const int per_req = (T + PF_REQ - 1) / PF_REQ, topk = width - MC_WINDOW;
    char *seen = calloc(PF_COMPRESSED, 1);
    for (int t = 0; t < T; ++t) {
        const int b = t / per_req, pos = t % per_req;
        int32_t *row = pw.ids_h + (size_t)t * width;
        memset(seen, 0, PF_COMPRESSED);
        int n = 0;
        while (n < topk) {
            const int v = (int)(rnd() % PF_COMPRESSED);
            if (!seen[v]) seen[v] = 1, row[n++] = b * PF_SLAB + v;
        }
        for (int j = 0; j < MC_WINDOW; ++j) row[n++] = b * PF_SLAB + PF_COMPRESSED + pos + j; /* window rows */
        pw.lens_h[t] = width;
    }
    free(seen);
    return bench_upload(pw.ids, pw.ids_h, (size_t)T * width * 4) || bench_upload(pw.lens, pw.lens_h, (size_t)T * 4);
}

typedef struct {
    dsv4_sparse_mla_prefill_desc_t d;
    dsv4_sparse_mla_prefill_args_t a;
} prefill_state_t;

static dsv4_status_t prefill_launch(bench_ctx_t *ctx, void *state) {
    prefill_state_t *s = state;
    return dsv4_sparse_mla_prefill(&s->d, &s->a, NULL, 0, DSV4_STREAM(ctx->stream));
}

/* The CPU path times one reference call. */
typedef struct {
    const dsv4_sparse_mla_prefill_desc_t *pd;
    const dsv4_sparse_mla_prefill_args_t *pa;
    const dsv4_sparse_mla_decode_desc_t *dd;
    const dsv4_sparse_mla_decode_args_t *da;
} ref_call_t;
static dsv4_status_t ref_call(void *state) {
    ref_call_t *r = state;
    return r->pd ? dsv4_sparse_mla_prefill_ref(r->pd, r->pa) : dsv4_sparse_mla_decode_ref(r->dd, r->da);
}

/* CPU path: the reference on 2 tokens of the model shape, checked as convex
 * combinations (|out| <= max|K|) and with an empty list giving zeros. */
static int prefill_cpu(bench_ctx_t *ctx, const char *op, const char *name, shape_t s) {
    enum { T = 2, ROWS = 2048 };
    uint16_t *kv = malloc((size_t)ROWS * 512 * 2), *q = malloc((size_t)T * s.H * 512 * 2);
    uint16_t *out = malloc((size_t)T * s.H * 512 * 2);
    int32_t *ids = malloc((size_t)T * s.w_main * 4), lens[T] = {s.w_main, 0};
    fill_bf16(kv, (size_t)ROWS * 512, 1.0);
    fill_bf16(q, (size_t)T * s.H * 512, 1.0);
    for (int i = 0; i < T * s.w_main; ++i) ids[i] = (int32_t)(rnd() % ROWS);
    dsv4_sparse_mla_prefill_desc_t d = {0};
    d.num_tokens = T, d.num_heads = s.H, d.kv_rows = ROWS, d.width = s.w_main;
    DENSE_QO(&d, s.H), d.kv_stride = 512, d.ids_stride = s.w_main;
    dsv4_sparse_mla_prefill_args_t a = {q, kv, ids, lens, NULL, out, NULL, NULL};
    double max_k = 0;
    for (size_t i = 0; i < (size_t)ROWS * 512; ++i) max_k = fmax(max_k, fabs(dsv4_bf16_to_f32(kv[i])));
    ref_call_t rc = {&d, &a, NULL, NULL};
    bench_timing_t tm;
    int ok = bench_time_cpu(ref_call, &rc, 1, &tm) == DSV4_STATUS_SUCCESS;
    for (size_t i = 0; i < (size_t)s.H * 512; ++i) ok &= fabs(dsv4_bf16_to_f32(out[i])) <= max_k;
    for (size_t i = (size_t)s.H * 512; i < (size_t)T * s.H * 512; ++i) ok &= out[i] == 0;
    char ran[64];
    snprintf(ran, sizeof ran, "T=%d H=%d w=%d rows=%d", T, s.H, s.w_main, ROWS);
    bench_report_cpu(ctx, op, name, ran, &tm, ok ? "pass" : "fail");
    free(kv), free(q), free(out), free(ids);
    return !ok;
}

static int run_prefill(bench_ctx_t *ctx, const char *op, const char *name) {
    const shape_t s = parse(name);
    if (!model_prefill(s)) {
        printf("%s %s: not a model prefill shape (model_cases.h)\n", op, name);
        return 1;
    }
    if (!ctx->have_gpu) return prefill_cpu(ctx, op, name, s);
    if (prefill_world() || prefill_lists(s.T, s.w_main)) {
        printf("%s %s: setup failed\n", op, name);
        return 1;
    }
    prefill_state_t st;
    memset(&st, 0, sizeof st);
    st.d.num_tokens = s.T, st.d.num_heads = s.H, st.d.kv_rows = (int64_t)PF_REQ * PF_SLAB, st.d.width = s.w_main;
    DENSE_QO(&st.d, s.H), st.d.kv_stride = 512, st.d.ids_stride = s.w_main;
    st.d.config = s.cfg;
    st.a.q = pw.q, st.a.kv = pw.kv, st.a.ids = pw.ids, st.a.lens = pw.lens, st.a.sink = pw.sink, st.a.out = pw.out;
    dsv4_sparse_mla_plan_t plan;
    if (dsv4_sparse_mla_prefill_plan(&st.d, &plan) != DSV4_STATUS_SUCCESS) {
        printf("%s %s: %s\n", op, name, dsv4_last_error());
        return 1;
    }
    const char *check = "skipped";
    char config[256];
    enum { NS = 4 };
    if (ctx->check) {
        /* Sampled tokens: first, last, two in between (one per request). */
        const int toks[NS] = {0, s.T / 3, (2 * s.T) / 3, s.T - 1};
        if (prefill_launch(ctx, &st) != DSV4_STATUS_SUCCESS) return 1;
        uint16_t *got = malloc((size_t)NS * s.H * 512 * 2);
        double *ref = malloc((size_t)NS * s.H * 512 * sizeof(double));
        uint16_t *tmp = malloc((size_t)s.H * 512 * 2);
        int ok = 1;
        for (int k = 0; k < NS; ++k) {
            bench_download(got + (size_t)k * s.H * 512, (const uint16_t *)pw.out + (size_t)toks[k] * s.H * 512,
                           (size_t)s.H * 512 * 2);
            dsv4_sparse_mla_prefill_desc_t one = st.d;
            one.num_tokens = 1;
            dsv4_sparse_mla_prefill_args_t a = {pw.q_h + (size_t)toks[k] * s.H * 512,
                                                pw.kv_h,
                                                pw.ids_h + (size_t)toks[k] * s.w_main,
                                                pw.lens_h + toks[k],
                                                pw.sink_h,
                                                tmp,
                                                ref + (size_t)k * s.H * 512,
                                                NULL};
            ok &= dsv4_sparse_mla_prefill_ref(&one, &a) == DSV4_STATUS_SUCCESS;
        }
        double err = 0;
        ok &= check_tokens(got, ref, NS, s.H, pw.max_k, &err);
        check = ok ? "pass" : "fail";
        if (!ok) printf("%s %s: check failed, max abs error %.3e (max|K| %.3g)\n", op, name, err, pw.max_k);
        free(got), free(ref), free(tmp);
    }
    snprintf(config, sizeof config,
             "config=%s heads/CTA=%lld warps=%lld rows/tile=%lld CTAs=%lld; check: tokens 0,T/3,2T/3,T-1",
             dsv4_mla_config_name(plan.config), (long long)plan.heads_per_cta, (long long)plan.warps,
             (long long)plan.rows_per_tile, (long long)plan.ctas);
    bench_timing_t tm;
    if (bench_time(ctx, prefill_launch, &st, &tm) != DSV4_STATUS_SUCCESS) {
        printf("%s %s: %s\n", op, name, dsv4_last_error());
        return 1;
    }
    const double flops = 2.0 * s.T * s.H * s.w_main * 1024.0;
    const double bytes = 2.0 * s.T * s.H * 1024.0 + (double)s.T * s.w_main * 1024.0;
    bench_report(ctx, op, name, config, &tm, bytes, flops, BENCH_CEIL_MMA, check);
    return strcmp(check, "fail") == 0;
}

/* ---- decode ------------------------------------------------------------------------- */

/* The decode world: up to DC_TMAX tokens of DC_HMAX heads, each its own request; a
 * workspace for the partials of up to DC_WS_ROWS (token, split, head) rows (T = 64 at
 * 32 splits of 64 heads; larger T runs with few splits). */
enum {
    DC_P = MC_V4_PAGE_TOKENS,
    DC_PAGES = 2048,
    DC_STRIDE = MC_PAGE_STRIDE(DC_P),
    SW_P = MC_SWA_PAGE_TOKENS,
    SW_STRIDE = MC_PAGE_STRIDE(SW_P),
    DC_TMAX = MC_DECODE_T_MAX,
    DC_HMAX = MC_HEADS_TP1
};
enum { DC_WM = MC_WINDOW, DC_WE = MC_TOPK }; /* every token's list widths: window, compressed top-k */
enum { DC_WS_ROWS = 64 * DSV4_MLA_MAX_SPLITS * DC_HMAX };

typedef struct {
    uint8_t *cc_h, *sw_h; /* host copies for the reference */
    void *cc, *sw, *q, *out, *mids, *mlens, *eids, *elens, *sink, *ws;
    size_t ws_bytes;
    int32_t *mids_h, *mlens_h, *eids_h, *elens_h;
    uint16_t *q_h;
    float *sink_h;
    double max_k;
    int ready;
} decode_world_t;
static decode_world_t dw;

/* Largest |K| any generated record holds: codes up to 448 at scale 2^(120-127), and the
 * largest RoPE value drawn. */
static double fill_max;
static double records_max_k(void) { return fmax(448.0 * ldexp(1.0, 120 - 127), fill_max); }

static void fill_records(uint8_t *c, int64_t pages, int64_t P, int64_t stride) {
    for (int64_t pg = 0; pg < pages; ++pg)
        for (int64_t p = 0; p < P; ++p) {
            uint8_t *data = c + pg * stride + p * 576, *sc = c + pg * stride + P * 576 + p * 8;
            for (int d = 0; d < 448; ++d) {
                uint8_t b = (uint8_t)rnd();
                data[d] = (b & 0x7F) == 0x7F ? b ^ 1 : b;
            }
            for (int k = 0; k < 7; ++k) sc[k] = (uint8_t)(118 + rnd() % 3);
            for (int i = 0; i < 64; ++i) {
                const uint16_t h = dsv4_f32_to_bf16((float)rnd_normal());
                fill_max = fmax(fill_max, fabs(dsv4_bf16_to_f32(h)));
                data[448 + 2 * i] = (uint8_t)h, data[449 + 2 * i] = (uint8_t)(h >> 8);
            }
        }
}

/* Every token's list lengths (host copies and device arrays): the world's DC_WM + DC_WE, or
 * fewer for the rows that sweep the tiles per CTA (the fixed cost of a decode call). */
static int decode_set_lens(int lm, int le) {
    for (int t = 0; t < DC_TMAX; ++t) dw.mlens_h[t] = lm, dw.elens_h[t] = le;
    return bench_upload(dw.mlens, dw.mlens_h, DC_TMAX * 4) || bench_upload(dw.elens, dw.elens_h, DC_TMAX * 4);
}

static int decode_world(void) {
    if (dw.ready) return 0;
    const size_t cc_bytes = (size_t)DC_PAGES * DC_STRIDE, sw_pages = DC_TMAX * 5, sw_bytes = sw_pages * SW_STRIDE;
    const size_t qn = (size_t)DC_TMAX * DC_HMAX * 512;
    dw.cc_h = malloc(cc_bytes), dw.sw_h = malloc(sw_bytes), dw.q_h = malloc(qn * 2), dw.sink_h = malloc(DC_HMAX * 4);
    dw.mids_h = malloc(DC_TMAX * DC_WM * 4), dw.mlens_h = malloc(DC_TMAX * 4);
    dw.eids_h = malloc(DC_TMAX * DC_WE * 4), dw.elens_h = malloc(DC_TMAX * 4);
    if (!dw.cc_h || !dw.sw_h || !dw.q_h || !dw.sink_h || !dw.mids_h || !dw.eids_h) return 1;
    fill_records(dw.cc_h, DC_PAGES, DC_P, DC_STRIDE);
    fill_records(dw.sw_h, (int64_t)sw_pages, SW_P, SW_STRIDE);
    dw.max_k = records_max_k();
    fill_bf16(dw.q_h, qn, 1.0);
    for (int h = 0; h < DC_HMAX; ++h) dw.sink_h[h] = (float)rnd_normal();
    /* Request t (one token each): window = its 5 SWA pages' last 128 positions, compressed
     * top-k = 512 random slots of the whole cache. */
    for (int t = 0; t < DC_TMAX; ++t) {
        const int first = t * 5 * SW_P + 17; /* a window that starts mid-page */
        for (int j = 0; j < DC_WM; ++j) dw.mids_h[t * DC_WM + j] = first + j;
        for (int j = 0; j < DC_WE; ++j) dw.eids_h[t * DC_WE + j] = (int32_t)(rnd() % ((uint64_t)DC_PAGES * DC_P));
    }
    dw.cc = bench_dev_alloc(cc_bytes), dw.sw = bench_dev_alloc(sw_bytes), dw.q = bench_dev_alloc(qn * 2);
    dw.out = bench_dev_alloc(qn * 2), dw.sink = bench_dev_alloc(DC_HMAX * 4);
    dw.mids = bench_dev_alloc(DC_TMAX * DC_WM * 4), dw.mlens = bench_dev_alloc(DC_TMAX * 4);
    dw.eids = bench_dev_alloc(DC_TMAX * DC_WE * 4), dw.elens = bench_dev_alloc(DC_TMAX * 4);
    dw.ws_bytes = (size_t)DC_WS_ROWS * 515 * 4;
    dw.ws = bench_dev_alloc(dw.ws_bytes);
    if (!dw.cc || !dw.sw || !dw.q || !dw.out || !dw.sink || !dw.mids || !dw.eids || !dw.ws) return 1;
    if (bench_upload(dw.cc, dw.cc_h, cc_bytes) || bench_upload(dw.sw, dw.sw_h, sw_bytes) ||
        bench_upload(dw.q, dw.q_h, qn * 2) || bench_upload(dw.sink, dw.sink_h, DC_HMAX * 4) ||
        bench_upload(dw.mids, dw.mids_h, DC_TMAX * DC_WM * 4) ||
        bench_upload(dw.eids, dw.eids_h, DC_TMAX * DC_WE * 4) || decode_set_lens(DC_WM, DC_WE))
        return 1;
    dw.ready = 1;
    return 0;
}

typedef struct {
    dsv4_sparse_mla_decode_desc_t d;
    dsv4_sparse_mla_decode_args_t a;
} decode_state_t;

static dsv4_status_t decode_launch(bench_ctx_t *ctx, void *state) {
    decode_state_t *s = state;
    return dsv4_sparse_mla_decode(&s->d, &s->a, dw.ws, dw.ws_bytes, DSV4_STREAM(ctx->stream));
}

/* merge 1 / 2 picks that merge route through the SM count the plan sees (with an
 * explicit config and S, nothing else reads it). */
static void decode_desc(dsv4_sparse_mla_decode_desc_t *d, int T, int H, int cfg, int S, int merge) {
    memset(d, 0, sizeof *d);
    d->num_tokens = T, d->num_heads = H, d->config = cfg, d->num_splits = S;
    if (merge) d->sm_count = merge == 2 ? 1 << 16 : 1;
    DENSE_QO(d, H);
    d->main.width = DC_WM;
    d->main.stride = DC_WM;
    d->main.cache.page_tokens = SW_P, d->main.cache.page_stride_bytes = SW_STRIDE;
    d->main.cache.num_pages = DC_TMAX * 5;
    d->has_extra = 1;
    d->extra.width = DC_WE;
    d->extra.stride = DC_WE;
    d->extra.cache.page_tokens = DC_P, d->extra.cache.page_stride_bytes = DC_STRIDE;
    d->extra.cache.num_pages = DC_PAGES;
}

/* CPU path: the reference on one model-shaped token over a small cache; checks |out| <=
 * max|K| and that an all-invalid token gives zeros. */
static int decode_cpu(bench_ctx_t *ctx, const char *op, const char *name, shape_t s) {
    enum { PAGES = 8 };
    uint8_t *cache = malloc((size_t)PAGES * DC_STRIDE);
    fill_records(cache, PAGES, DC_P, DC_STRIDE);
    int32_t mids[2 * DC_WM], eids[2 * DC_WE], mlens[2] = {DC_WM, DC_WM}, elens[2] = {DC_WE, DC_WE};
    for (int j = 0; j < DC_WM; ++j) mids[j] = j, mids[DC_WM + j] = -1;
    for (int j = 0; j < DC_WE; ++j) eids[j] = (int32_t)(rnd() % (PAGES * DC_P)), eids[DC_WE + j] = PAGES * DC_P + j;
    uint16_t *q = malloc((size_t)2 * s.H * 512 * 2), *out = malloc((size_t)2 * s.H * 512 * 2);
    fill_bf16(q, (size_t)2 * s.H * 512, 1.0);
    dsv4_sparse_mla_decode_desc_t d;
    decode_desc(&d, 2, s.H, 0, 1, 0);
    d.main.cache.page_tokens = DC_P, d.main.cache.page_stride_bytes = DC_STRIDE, d.main.cache.num_pages = PAGES;
    d.extra.cache.num_pages = PAGES;
    dsv4_sparse_mla_decode_args_t a = {q, cache, mids, mlens, cache, eids, elens, NULL, out, NULL, NULL};
    ref_call_t rc = {NULL, NULL, &d, &a};
    bench_timing_t tm;
    int ok = bench_time_cpu(ref_call, &rc, 1, &tm) == DSV4_STATUS_SUCCESS;
    for (size_t i = 0; i < (size_t)s.H * 512; ++i) ok &= fabs(dsv4_bf16_to_f32(out[i])) <= records_max_k();
    for (size_t i = (size_t)s.H * 512; i < (size_t)2 * s.H * 512; ++i) ok &= out[i] == 0;
    char ran[64];
    snprintf(ran, sizeof ran, "T=2 H=%d w=%d+%d P=%d", s.H, DC_WM, DC_WE, DC_P);
    bench_report_cpu(ctx, op, name, ran, &tm, ok ? "pass" : "fail");
    free(cache), free(q), free(out);
    return !ok;
}

/* One decode row with the lists as they are (parse(name) checked by run_decode). */
static int run_decode_lists(bench_ctx_t *ctx, const char *op, const char *name, shape_t s) {
    if (!ctx->have_gpu) return decode_cpu(ctx, op, name, s);
    if (decode_world()) {
        printf("%s %s: setup failed\n", op, name);
        return 1;
    }
    decode_state_t st;
    decode_desc(&st.d, s.T, s.H, s.cfg, s.S, s.merge);
    memset(&st.a, 0, sizeof st.a);
    st.a.q = dw.q, st.a.out = dw.out, st.a.sink = dw.sink;
    st.a.main_cache = dw.sw, st.a.main_ids = dw.mids, st.a.main_lens = dw.mlens;
    st.a.extra_cache = dw.cc, st.a.extra_ids = dw.eids, st.a.extra_lens = dw.elens;
    dsv4_sparse_mla_plan_t plan;
    if (dsv4_sparse_mla_decode_plan(&st.d, &plan) != DSV4_STATUS_SUCCESS) {
        printf("%s %s: %s\n", op, name, dsv4_last_error());
        return 1;
    }
    if (plan.workspace_bytes > dw.ws_bytes) {
        printf("%s %s: needs %zu workspace bytes, the decode world has %zu\n", op, name, plan.workspace_bytes,
               dw.ws_bytes);
        return 1;
    }
    const char *check = "skipped";
    if (ctx->check) {
        const int ntok = s.T < 4 ? s.T : 4;
        const int toks[4] = {0, s.T / 3, (2 * s.T) / 3, s.T - 1};
        if (decode_launch(ctx, &st) != DSV4_STATUS_SUCCESS) return 1;
        uint16_t *got = malloc((size_t)4 * s.H * 512 * 2), *tmp = malloc((size_t)s.H * 512 * 2);
        double *ref = malloc((size_t)4 * s.H * 512 * sizeof(double));
        int ok = 1;
        for (int k = 0; k < ntok; ++k) {
            const int t = toks[k];
            bench_download(got + (size_t)k * s.H * 512, (const uint16_t *)dw.out + (size_t)t * s.H * 512,
                           (size_t)s.H * 512 * 2);
            dsv4_sparse_mla_decode_desc_t one = st.d;
            one.num_tokens = 1;
            dsv4_sparse_mla_decode_args_t a = {dw.q_h + (size_t)t * s.H * 512,
                                               dw.sw_h,
                                               dw.mids_h + t * DC_WM,
                                               dw.mlens_h + t,
                                               dw.cc_h,
                                               dw.eids_h + t * DC_WE,
                                               dw.elens_h + t,
                                               dw.sink_h,
                                               tmp,
                                               ref + (size_t)k * s.H * 512,
                                               NULL};
            ok &= dsv4_sparse_mla_decode_ref(&one, &a) == DSV4_STATUS_SUCCESS;
        }
        double err = 0;
        ok &= check_tokens(got, ref, ntok, s.H, dw.max_k, &err);
        check = ok ? "pass" : "fail";
        if (!ok) printf("%s %s: check failed, max abs error %.3e\n", op, name, err);
        free(got), free(tmp), free(ref);
    }
    char config[256];
    snprintf(
        config, sizeof config,
        "config=%s heads/CTA=%lld warps=%lld rows/tile=%lld S=%lld merge=%d CTAs=%lld; check: tokens 0,T/3,2T/3,T-1",
        dsv4_mla_config_name(plan.config), (long long)plan.heads_per_cta, (long long)plan.warps,
        (long long)plan.rows_per_tile, (long long)plan.num_splits, plan.merge, (long long)plan.ctas);
    bench_timing_t tm;
    if (bench_time(ctx, decode_launch, &st, &tm) != DSV4_STATUS_SUCCESS) {
        printf("%s %s: %s\n", op, name, dsv4_last_error());
        return 1;
    }
    const double n = s.w_main + s.w_extra;
    const double flops = 2048.0 * s.H * n * s.T;
    const double bytes = (double)s.T * (584.0 * n + 4.0 * n + 2.0 * s.H * 1024.0);
    /* Which ceiling binds: the larger of the two lower bounds on time. */
    const double t_mma = flops / (ctx->mma_tflops * 1e12), t_copy = bytes / (ctx->copy_gbps * 1e9);
    const bench_ceiling_t ceil = s.T == 1 ? BENCH_CEIL_LAUNCH : (t_mma > t_copy ? BENCH_CEIL_MMA : BENCH_CEIL_COPY);
    bench_report(ctx, op, name, config, &tm, bytes, flops, ceil, check);
    return strcmp(check, "fail") == 0;
}

static int run_decode(bench_ctx_t *ctx, const char *op, const char *name) {
    const shape_t s = parse(name);
    if (!model_decode(s)) {
        printf("%s %s: not a model decode shape (model_cases.h)\n", op, name);
        return 1;
    }
    if (s.T < 1 || s.T > DC_TMAX || s.H > DC_HMAX) {
        printf("%s %s: the decode world holds 1 to %d tokens of at most %d heads\n", op, name, DC_TMAX, DC_HMAX);
        return 1;
    }
    if (s.w_main < 0 || s.w_main > DC_WM || s.w_extra < 0 || s.w_extra > DC_WE) {
        printf("%s %s: the decode world's lists hold at most %d + %d ids\n", op, name, DC_WM, DC_WE);
        return 1;
    }
    if (!ctx->have_gpu || (s.w_main == DC_WM && s.w_extra == DC_WE)) return run_decode_lists(ctx, op, name, s);
    if (decode_world() || decode_set_lens(s.w_main, s.w_extra)) {
        printf("%s %s: setup failed\n", op, name);
        return 1;
    }
    const int rc = run_decode_lists(ctx, op, name, s);
    return decode_set_lens(DC_WM, DC_WE) ? 1 : rc;
}

const bench_case_t bench_attention_cases[] = {
    {"sparse_mla_prefill", "T=1536 H=64 w=640", run_prefill},
    {"sparse_mla_prefill", "T=1536 H=64 w=1152", run_prefill},
    {"sparse_mla_prefill", "T=1536 H=32 w=640", run_prefill},
    {"sparse_mla_prefill", "T=1536 H=32 w=1152", run_prefill},
    {"sparse_mla_prefill", "T=4096 H=64 w=640", run_prefill},
    {"sparse_mla_prefill", "T=4096 H=64 w=1152", run_prefill},
    {"sparse_mla_prefill", "T=4096 H=32 w=640", run_prefill},
    {"sparse_mla_prefill", "T=4096 H=32 w=1152", run_prefill},
    {"sparse_mla_prefill", "T=4096 H=64 w=640 config=h16w4", run_prefill},
    {"sparse_mla_prefill", "T=4096 H=64 w=640 config=h32w4", run_prefill},
    {"sparse_mla_prefill", "T=4096 H=64 w=640 config=h32w8", run_prefill},
    {"sparse_mla_decode", "T=64 H=64 w=128+512", run_decode},
    {"sparse_mla_decode", "T=1 H=64 w=128+512", run_decode},
    {"sparse_mla_decode", "T=8 H=32 w=128+512", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=h16w4 S=1", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=h16w4 S=2", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=h32w4 S=1", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=h32w4 S=2", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=h32w4 S=2 merge=2", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=h32w4 S=3", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=h32w4 S=4", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=h32w8 S=3", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=ws32 S=1", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=ws32 S=2", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=ws32 S=3", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=ws32 S=4", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=ws64", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+512 config=ws64 S=4", run_decode},
    /* T = 64's fixed cost: ws64, S = 2, 0 / 4 / 8 / 12 tiles per CTA (20 in the row above) */
    {"sparse_mla_decode", "T=64 H=64 w=0+0 config=ws64 S=2", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+0 config=ws64 S=2", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+128 config=ws64 S=2", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+256 config=ws64 S=2", run_decode},
    /* the same without partials and merge (S = 1: 0 / 8 tiles per CTA, 64 CTAs) */
    {"sparse_mla_decode", "T=64 H=64 w=0+0 config=ws64 S=1", run_decode},
    {"sparse_mla_decode", "T=64 H=64 w=128+0 config=ws64 S=1", run_decode},
    {"sparse_mla_decode", "T=16 H=64 w=128+512 config=h32w4", run_decode},
    {"sparse_mla_decode", "T=16 H=64 w=128+512 config=ws32", run_decode},
    {"sparse_mla_decode", "T=16 H=64 w=128+512 config=ws64", run_decode},
    {"sparse_mla_decode", "T=384 H=64 w=128+512 config=h32w4", run_decode},
    {"sparse_mla_decode", "T=384 H=64 w=128+512 config=ws32", run_decode},
    {"sparse_mla_decode", "T=384 H=64 w=128+512 config=ws64", run_decode},
    {"sparse_mla_decode", "T=1 H=64 w=128+512 config=h16w4 S=8", run_decode},
    {"sparse_mla_decode", "T=1 H=64 w=128+512 config=h16w4 S=16", run_decode},
    {"sparse_mla_decode", "T=1 H=64 w=128+512 config=h16w4 S=21", run_decode},
    {"sparse_mla_decode", "T=1 H=64 w=128+512 config=h16w4 S=21 merge=1", run_decode},
    {"sparse_mla_decode", "T=1 H=64 w=128+512 config=h16w4 S=32", run_decode},
    {"sparse_mla_decode", "T=1 H=64 w=128+512 config=h32w4 S=20", run_decode},
    {"sparse_mla_decode", "T=1 H=64 w=128+512 config=h16w8", run_decode},
    {"sparse_mla_decode", "T=1 H=64 w=128+512 config=h16w8 S=16", run_decode},
    {"sparse_mla_decode", "T=1 H=64 w=128+512 config=h16w8 S=32", run_decode},
    {"sparse_mla_decode", "T=4 H=64 w=128+512 config=h16w4", run_decode},
    {"sparse_mla_decode", "T=4 H=64 w=128+512 config=h16w8", run_decode},
    {"sparse_mla_decode", "T=8 H=32 w=128+512 config=h16w8", run_decode},
    {"sparse_mla_decode", "T=8 H=64 w=128+512 config=h32w4", run_decode},
    {"sparse_mla_decode", "T=8 H=64 w=128+512 config=h16w8", run_decode},
    {"sparse_mla_decode", "T=8 H=64 w=128+512 config=ws64", run_decode},
    {"sparse_mla_decode", "T=12 H=64 w=128+512 config=h32w4", run_decode},
    {"sparse_mla_decode", "T=12 H=64 w=128+512 config=ws64", run_decode},
    {"sparse_mla_decode", "T=12 H=64 w=128+512 config=h16w8", run_decode},
    {"sparse_mla_decode", "T=16 H=64 w=128+512 config=h16w8", run_decode},
    {"sparse_mla_decode", "T=8 H=32 w=128+512 config=h16w4 S=16", run_decode},
    {"sparse_mla_decode", "T=8 H=32 w=128+512 config=h32w4 S=32", run_decode},
    {"sparse_mla_decode", "T=8 H=32 w=128+512 config=h32w4 S=21", run_decode},
    {"sparse_mla_decode", "T=8 H=32 w=128+512 config=h32w4 S=21 merge=1", run_decode},
    {"sparse_mla_decode", "T=8 H=32 w=128+512 config=ws32 S=21", run_decode},
    {"sparse_mla_decode", "T=8 H=32 w=128+512 config=ws32 S=8", run_decode},
};
const int bench_attention_count = (int)(sizeof bench_attention_cases / sizeof bench_attention_cases[0]);
