/*
 * Benchmark cases of the indexer family, timed through the public API.
 *
 *   indexer_q        T=N H=h    N tokens at positions 0..N-1, h heads of model-like bf16
 *                               rows, a rotary table with theta 10000; bytes = N * h *
 *                               (256 + 2 read, 128 + 4 written) + N * (256 + 8) (the
 *                               token's table row and position); ceiling: copy
 *                               (N = 8,192) or the empty launch (N = 24)
 *   indexer_k_store  T=N r=r    N key rows at positions 0..N-1, every slot valid, so
 *                               N / r rows close a group and are stored (P = 128 at r = 1,
 *                               64 at r = 2, vLLM's padded page strides); bytes = N * 16
 *                               (position and slot) + per stored row 256 (k_pre) + 256
 *                               (table row) read and 132 written; ceiling: copy (N = 8,192)
 *                               or the empty launch (N = 24)
 *
 * With --check each case first compares one run with the CPU reference, every byte of
 * q8 and w, or of the whole cache. Without a GPU each case runs its reference on a smaller
 * input of the same kind and checks invariants that hold by construction: every row's
 * largest code magnitude lies in [224, 448] (the scale is the tightest power of two), the
 * NoPE codes times the scale are within e4m3 rounding of the inputs (q), the weights
 * equal w_raw * 2^e * scales, and the cache's unstored bytes keep their poison (k_store).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "dsv4/indexer.h"
#include "dsv4/numerics.h"

static const char *verdict(int checked, int ok) { return !checked ? "skipped" : (ok ? "pass" : "fail"); }

/* Model-like bf16: random sign and mantissa, magnitude 2^-4 .. 2^4. */
static uint16_t rand_bf16(uint64_t *s) {
    const uint64_t v = bench_rng_next(s);
    return (uint16_t)(((v & 1) << 15) | ((123 + (v >> 1) % 8) << 7) | ((v >> 8) & 0x7F));
}

static float *rotary_table(int64_t rows) {
    float *cs = malloc((size_t)rows * 256);
    for (int64_t n = 0; n < rows; ++n)
        for (int i = 0; i < 32; ++i) {
            const double ang = (double)n * pow(10000.0, -(double)i / 32.0);
            cs[n * 64 + i] = (float)cos(ang), cs[n * 64 + 32 + i] = (float)sin(ang);
        }
    return cs;
}

/* The largest code magnitude of a 128-code row, decoded. */
static double row_code_max(const uint8_t *c) {
    double m = 0;
    for (int d = 0; d < 128; ++d) m = fmax(m, fabs(dsv4_e4m3_to_f32(c[d])));
    return m;
}

/* ---- indexer_q ------------------------------------------------------------------------------ */
typedef struct {
    dsv4_indexer_q_desc_t d;
    dsv4_indexer_q_args_t a;
} q_state_t;
static dsv4_status_t q_launch(bench_ctx_t *ctx, void *st) {
    q_state_t *g = st;
    return dsv4_indexer_q(&g->d, &g->a, NULL, 0, DSV4_STREAM(ctx->stream));
}
static void q_cpu(void *st) {
    q_state_t *g = st;
    dsv4_indexer_q_ref(&g->d, &g->a);
}

static void q_problem(int64_t T, int64_t H, uint64_t *s, q_state_t *h) {
    h->d = (dsv4_indexer_q_desc_t){.num_tokens = T,
                                   .num_heads = H,
                                   .max_position = T,
                                   .q_stride_token = H * 128,
                                   .q_stride_head = 128,
                                   .w_stride_token = H};
    uint16_t *q = malloc((size_t)(T * H) * 256), *wr = malloc((size_t)(T * H) * 2);
    int64_t *pos = malloc((size_t)T * 8);
    for (int64_t i = 0; i < T * H * 128; ++i) q[i] = rand_bf16(s);
    for (int64_t i = 0; i < T * H; ++i) wr[i] = rand_bf16(s);
    for (int64_t n = 0; n < T; ++n) pos[n] = n;
    h->a = (dsv4_indexer_q_args_t){
        q, wr, pos, rotary_table(T), malloc((size_t)(T * H) * 128), malloc((size_t)(T * H) * 4)};
}
static void q_free(q_state_t *h) {
    free((void *)h->a.q), free((void *)h->a.w_raw), free((void *)h->a.positions), free((void *)h->a.cos_sin);
    free(h->a.q8), free(h->a.w);
}

static int q_cpu_case(bench_ctx_t *ctx, const char *op, const char *name, int64_t T, int64_t H) {
    uint64_t s = 0x1D1;
    q_state_t h;
    bench_timing_t tm;
    q_problem(T, H, &s, &h);
    bench_time_cpu(q_cpu, &h, 5, &tm);
    int ok = 1;
    const float ss = dsv4_bits_f32(0x3DB504F3u), hs = (float)(1.0 / sqrt((double)H));
    for (int64_t r = 0; r < T * H; ++r) {
        const uint8_t *c = h.a.q8 + r * 128;
        const double m = row_code_max(c);
        ok &= m >= 224.0 && m <= 448.0;
        /* the row's scale from the weight: w = ((w_raw * s) * ss) * hs, s a power of two */
        int e = -22;
        while (e < 120 && ((dsv4_bf16_to_f32(h.a.w_raw[r]) * ldexpf(1.0f, e)) * ss) * hs != h.a.w[r]) ++e;
        ok &= e < 120;
        for (int d = 0; d < 64; ++d) {
            const double x = dsv4_bf16_to_f32(h.a.q[r * 128 + d]), y = ldexp(dsv4_e4m3_to_f32(c[d]), e);
            ok &= fabs(y - x) <= 0x1p-4 * fabs(x) + ldexp(1.0, e - 10);
        }
    }
    char ran[64];
    snprintf(ran, sizeof ran, "T=%lld H=%lld", (long long)T, (long long)H);
    bench_report_cpu(ctx, op, name, ran, &tm, verdict(1, ok));
    q_free(&h);
    return !ok;
}

static int run_q(bench_ctx_t *ctx, const char *op, const char *name) {
    long long T = 0, H = 0;
    if (sscanf(name, "T=%lld H=%lld", &T, &H) != 2) return 1;
    if (!ctx->have_gpu) return q_cpu_case(ctx, op, name, T < 64 ? T : 64, H);
    uint64_t s = 0x1D1;
    q_state_t h, dv;
    bench_timing_t tm;
    q_problem(T, H, &s, &h);
    const size_t qb = (size_t)(T * H) * 256, wb = (size_t)(T * H) * 2, cb = (size_t)T * 256;
    void *dq = bench_dev_alloc(qb), *dwr = bench_dev_alloc(wb), *dpos = bench_dev_alloc((size_t)T * 8);
    void *dcs = bench_dev_alloc(cb), *dq8 = bench_dev_alloc(qb / 2), *dw = bench_dev_alloc(wb * 2);
    int rc = 1;
    if (dq && dwr && dpos && dcs && dq8 && dw && !bench_upload(dq, h.a.q, qb) && !bench_upload(dwr, h.a.w_raw, wb) &&
        !bench_upload(dpos, h.a.positions, (size_t)T * 8) && !bench_upload(dcs, h.a.cos_sin, cb)) {
        dv = h;
        dv.a = (dsv4_indexer_q_args_t){dq, dwr, dpos, dcs, dq8, dw};
        int ok = 1;
        if (ctx->check) {
            uint8_t *got = malloc(qb / 2), *got_w = malloc(wb * 2);
            ok = !bench_run_once(ctx, q_launch, &dv) && !bench_download(got, dq8, qb / 2) &&
                 !bench_download(got_w, dw, wb * 2);
            dsv4_indexer_q_ref(&h.d, &h.a);
            ok = ok && !memcmp(got, h.a.q8, qb / 2) && !memcmp(got_w, h.a.w, wb * 2);
            free(got), free(got_w);
        }
        if (bench_time(ctx, q_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("indexer bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            bench_report(ctx, op, name, "positions 0..T-1, theta 10000; check: every byte of q8 and w", &tm,
                         (double)T * (double)H * (258 + 132) + (double)T * 264, 0,
                         T >= 8192 ? BENCH_CEIL_COPY : BENCH_CEIL_LAUNCH, verdict(ctx->check, ok));
            rc = !ok;
        }
    }
    bench_dev_free(dq), bench_dev_free(dwr), bench_dev_free(dpos), bench_dev_free(dcs), bench_dev_free(dq8);
    bench_dev_free(dw);
    q_free(&h);
    return rc;
}

/* ---- indexer_k_store ---------------------------------------------------------------------- */
enum { K_POISON = 0xC3 };
typedef struct {
    dsv4_indexer_k_store_desc_t d;
    dsv4_indexer_k_store_args_t a;
    size_t cache_bytes;
} k_state_t;
static dsv4_status_t k_launch(bench_ctx_t *ctx, void *st) {
    k_state_t *g = st;
    return dsv4_indexer_k_store(&g->d, &g->a, NULL, 0, DSV4_STREAM(ctx->stream));
}
static void k_cpu(void *st) {
    k_state_t *g = st;
    dsv4_indexer_k_store_ref(&g->d, &g->a);
}

/* T rows at positions 0..T-1; row t's slot is t / r (every row names a valid slot; the
 * operator stores the group-closing ones). */
static void k_problem(int64_t T, int64_t r, uint64_t *s, k_state_t *h) {
    const int64_t P = r == 1 ? 128 : 64, stride = r == 1 ? 17280 : 8640, pages = (T / r + P - 1) / P + 1;
    h->d = (dsv4_indexer_k_store_desc_t){.num_tokens = T,
                                         .ratio = r,
                                         .max_position = T,
                                         .page_tokens = P,
                                         .page_stride_bytes = stride,
                                         .num_pages = pages,
                                         .eps = 1e-6f,
                                         .k_stride_row = 128};
    h->cache_bytes = (size_t)(pages * stride);
    uint16_t *k = malloc((size_t)T * 256), *g = malloc(256);
    int64_t *pos = malloc((size_t)T * 8), *slot = malloc((size_t)T * 8);
    for (int64_t i = 0; i < T * 128; ++i) k[i] = rand_bf16(s);
    for (int i = 0; i < 128; ++i) g[i] = (uint16_t)(0x3F80 + bench_rng_next(s) % 64);
    for (int64_t n = 0; n < T; ++n) pos[n] = n, slot[n] = n / r;
    uint8_t *cache = malloc(h->cache_bytes);
    memset(cache, K_POISON, h->cache_bytes);
    h->a = (dsv4_indexer_k_store_args_t){k, g, pos, slot, rotary_table(T), cache};
}
static void k_free(k_state_t *h) {
    free((void *)h->a.k_pre), free((void *)h->a.gamma), free((void *)h->a.positions);
    free((void *)h->a.slot_mapping), free((void *)h->a.cos_sin), free(h->a.cache);
}

static int k_cpu_case(bench_ctx_t *ctx, const char *op, const char *name, int64_t T, int64_t r) {
    uint64_t s = 0x1D2;
    k_state_t h;
    bench_timing_t tm;
    k_problem(T, r, &s, &h);
    bench_time_cpu(k_cpu, &h, 5, &tm);
    int ok = 1;
    const int64_t P = h.d.page_tokens;
    for (int64_t v = 0; v < h.d.num_pages * P; ++v) {
        const uint8_t *page = h.a.cache + v / P * h.d.page_stride_bytes, *c = page + v % P * 128;
        uint32_t sb;
        memcpy(&sb, page + P * 128 + v % P * 4, 4);
        if (v < T / r) { /* stored: a tight power-of-two scale */
            const double m = row_code_max(c);
            ok &= m >= 224.0 && m <= 448.0 && (sb & 0x807FFFFFu) == 0;
        } else {
            for (int d = 0; d < 128; ++d) ok &= c[d] == K_POISON;
            ok &= sb == 0xC3C3C3C3u;
        }
    }
    for (int64_t p = 0; p < h.d.num_pages; ++p) /* page padding */
        for (int64_t b = P * 132; b < h.d.page_stride_bytes; ++b)
            ok &= h.a.cache[p * h.d.page_stride_bytes + b] == K_POISON;
    char ran[64];
    snprintf(ran, sizeof ran, "T=%lld r=%lld", (long long)T, (long long)r);
    bench_report_cpu(ctx, op, name, ran, &tm, verdict(1, ok));
    k_free(&h);
    return !ok;
}

static int run_k(bench_ctx_t *ctx, const char *op, const char *name) {
    long long T = 0, r = 0;
    if (sscanf(name, "T=%lld r=%lld", &T, &r) != 2) return 1;
    if (!ctx->have_gpu) return k_cpu_case(ctx, op, name, T < 256 ? T : 256, r);
    uint64_t s = 0x1D2;
    k_state_t h, dv;
    bench_timing_t tm;
    k_problem(T, r, &s, &h);
    const size_t kb = (size_t)T * 256, ib = (size_t)T * 8, cb = (size_t)T * 256;
    void *dk = bench_dev_alloc(kb), *dg = bench_dev_alloc(256), *dpos = bench_dev_alloc(ib);
    void *dslot = bench_dev_alloc(ib), *dcs = bench_dev_alloc(cb), *dcache = bench_dev_alloc(h.cache_bytes);
    int rc = 1;
    if (dk && dg && dpos && dslot && dcs && dcache && !bench_upload(dk, h.a.k_pre, kb) &&
        !bench_upload(dg, h.a.gamma, 256) && !bench_upload(dpos, h.a.positions, ib) &&
        !bench_upload(dslot, h.a.slot_mapping, ib) && !bench_upload(dcs, h.a.cos_sin, cb) &&
        !bench_upload(dcache, h.a.cache, h.cache_bytes)) {
        dv = h;
        dv.a = (dsv4_indexer_k_store_args_t){dk, dg, dpos, dslot, dcs, dcache};
        int ok = 1;
        if (ctx->check) {
            uint8_t *got = malloc(h.cache_bytes);
            ok = !bench_run_once(ctx, k_launch, &dv) && !bench_download(got, dcache, h.cache_bytes);
            dsv4_indexer_k_store_ref(&h.d, &h.a);
            ok = ok && !memcmp(got, h.a.cache, h.cache_bytes);
            free(got);
        }
        if (bench_time(ctx, k_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("indexer bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            bench_report(ctx, op, name, "positions 0..T-1, slot t/r, vLLM page strides; check: every byte of the cache",
                         &tm, (double)T * 16 + (double)(T / r) * (256 + 256 + 132), 0,
                         T >= 8192 ? BENCH_CEIL_COPY : BENCH_CEIL_LAUNCH, verdict(ctx->check, ok));
            rc = !ok;
        }
    }
    bench_dev_free(dk), bench_dev_free(dg), bench_dev_free(dpos), bench_dev_free(dslot), bench_dev_free(dcs);
    bench_dev_free(dcache);
    k_free(&h);
    return rc;
}

const bench_case_t bench_indexer_cases[] = {
    {"indexer_q", "T=8192 H=32", run_q},      {"indexer_q", "T=24 H=32", run_q},
    {"indexer_k_store", "T=8192 r=1", run_k}, {"indexer_k_store", "T=8192 r=2", run_k},
    {"indexer_k_store", "T=24 r=1", run_k},
};
const int bench_indexer_count = (int)(sizeof bench_indexer_cases / sizeof bench_indexer_cases[0]);
