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
 *   indexer_topk     R=b next_n=m ctx=N r=r decode   b requests, m rows each at the last m
 *                               positions of an N-token context (n = N / r keys, H = 32,
 *                               topk 512, P = 128 at r = 1, 64 at r = 2, vLLM's page strides,
 *                               every request on its own pages, filled with a random
 *                               pattern of 2,048 pages); bytes = b * n * 132 (each
 *                               request's keys read once), FLOPs = rows * n * 8,192;
 *                               ceiling: copy. "candidates" adds candidate mode 1 (the V4.1
 *                               source layer: block scores and 2,048 kept blocks per row);
 *                               "restrict" is candidate mode 2 (a consumer layer: 2,048
 *                               listed blocks spread over each row, only their keys read;
 *                               bytes and FLOPs count the listed columns per row), to set
 *                               against the dense row of the same shape (at 16K
 *                               context every row's list holds all of its blocks)
 *                    T=t ctx=N r=r prefill          one request, a chunk of t rows at the last
 *                               t positions of N tokens (causal bounds); FLOPs = 8,192 *
 *                               sum of n_t; ceiling: mma.sync
 *                    Every row's config names the workspace bytes and the floor in us
 *                    (bytes at the measured copy bandwidth, or FLOPs at the measured mma.sync
 *                    rate). --check verifies each row's selection against the materialized
 *                    dsv4_indexer_logits of the same inputs: ascending distinct indices and
 *                    no unselected column ranking above a selected one (order key, then
 *                    index), and the same result for one split and the automatic count.
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

/* Model-like bf16: random sign and mantissa, magnitude 2^-4 .. 2^4. */
static uint16_t rand_bf16(uint64_t *s) {
    const uint64_t v = bench_rng_next(s);
    return (uint16_t)(((v & 1) << 15) | ((123 + (v >> 1) % 8) << 7) | ((v >> 8) & 0x7F));
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
static dsv4_status_t q_cpu(void *st) {
    q_state_t *g = st;
    return dsv4_indexer_q_ref(&g->d, &g->a);
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
        q, wr, pos, bench_rotary_table(T), malloc((size_t)(T * H) * 128), malloc((size_t)(T * H) * 4)};
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
    int ok = bench_time_cpu(q_cpu, &h, 5, &tm) == DSV4_STATUS_SUCCESS;
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
    bench_report_cpu(ctx, op, name, ran, &tm, bench_verdict(1, ok));
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
            ok = ok && dsv4_indexer_q_ref(&h.d, &h.a) == DSV4_STATUS_SUCCESS;
            ok = ok && !memcmp(got, h.a.q8, qb / 2) && !memcmp(got_w, h.a.w, wb * 2);
            free(got), free(got_w);
        }
        if (bench_time(ctx, q_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("indexer bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            bench_report(ctx, op, name, "positions 0..T-1, theta 10000; check: every byte of q8 and w", &tm,
                         (double)T * (double)H * (258 + 132) + (double)T * 264, 0,
                         T >= 8192 ? BENCH_CEIL_COPY : BENCH_CEIL_LAUNCH, bench_verdict(ctx->check, ok));
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
static dsv4_status_t k_cpu(void *st) {
    k_state_t *g = st;
    return dsv4_indexer_k_store_ref(&g->d, &g->a);
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
    h->a = (dsv4_indexer_k_store_args_t){k, g, pos, slot, bench_rotary_table(T), cache};
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
    int ok = bench_time_cpu(k_cpu, &h, 5, &tm) == DSV4_STATUS_SUCCESS;
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
    bench_report_cpu(ctx, op, name, ran, &tm, bench_verdict(1, ok));
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
            ok = ok && dsv4_indexer_k_store_ref(&h.d, &h.a) == DSV4_STATUS_SUCCESS;
            ok = ok && !memcmp(got, h.a.cache, h.cache_bytes);
            free(got);
        }
        if (bench_time(ctx, k_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("indexer bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            bench_report(ctx, op, name, "positions 0..T-1, slot t/r, vLLM page strides; check: every byte of the cache",
                         &tm, (double)T * 16 + (double)(T / r) * (256 + 256 + 132), 0,
                         T >= 8192 ? BENCH_CEIL_COPY : BENCH_CEIL_LAUNCH, bench_verdict(ctx->check, ok));
            rc = !ok;
        }
    }
    bench_dev_free(dk), bench_dev_free(dg), bench_dev_free(dpos), bench_dev_free(dslot), bench_dev_free(dcs);
    bench_dev_free(dcache);
    k_free(&h);
    return rc;
}

/* ---- indexer_topk ----------------------------------------------------------------------------- */
typedef struct {
    int64_t reqs, next_n, ctx, r, T; /* decode: reqs x next_n rows; prefill: T rows of one request */
    int prefill, mode;
} tk_shape_t;

static int tk_parse(const char *name, tk_shape_t *s) {
    memset(s, 0, sizeof *s);
    long long a = 0, b = 0, c = 0, d = 0;
    if (sscanf(name, "R=%lld next_n=%lld ctx=%lld r=%lld", &a, &b, &c, &d) == 4)
        s->reqs = a, s->next_n = b, s->ctx = c, s->r = d, s->T = a * b;
    else if (sscanf(name, "T=%lld ctx=%lld r=%lld", &a, &c, &d) == 3)
        s->reqs = 1, s->next_n = a, s->ctx = c, s->r = d, s->T = a, s->prefill = 1;
    else return 1;
    s->mode = strstr(name, "candidates") ? 1 : (strstr(name, "restrict") ? 2 : 0);
    return 0;
}

typedef struct {
    dsv4_indexer_topk_desc_t d;
    dsv4_indexer_topk_args_t a;
    void *ws;
    size_t ws_bytes, cache_bytes;
} tk_state_t;
static dsv4_status_t tk_launch(bench_ctx_t *ctx, void *st) {
    tk_state_t *g = st;
    return dsv4_indexer_topk(&g->d, &g->a, g->ws, g->ws_bytes, DSV4_STREAM(ctx->stream));
}

/* Host inputs of a shape (cache pattern of at most `pattern` pages, repeated on the device). */
static void tk_problem(const tk_shape_t *s, int64_t pattern, uint64_t *rs, tk_state_t *h, uint8_t **pat,
                       int64_t *pat_pages) {
    const int64_t P = s->r == 1 ? 128 : 64, stride = s->r == 1 ? 17280 : 8640, n = s->ctx / s->r;
    const int64_t width = (n + P - 1) / P, pages = s->reqs * width, H = 32, T = s->T;
    h->d = (dsv4_indexer_topk_desc_t){.num_rows = T,
                                      .num_heads = H,
                                      .topk = 512,
                                      .ratio = s->r,
                                      .num_reqs = s->reqs,
                                      .block_table_width = width,
                                      .block_table_stride = width,
                                      .page_tokens = P,
                                      .page_stride_bytes = stride,
                                      .num_pages = pages,
                                      .topk_stride = 512,
                                      .max_keys = n,
                                      .candidate_mode = s->mode,
                                      .candidate_count = 2048,
                                      .candidate_stride = 2048};
    *pat_pages = pages < pattern ? pages : pattern;
    *pat = malloc((size_t)(*pat_pages * stride));
    for (int64_t i = 0; i < *pat_pages * stride; ++i) {
        const uint8_t b = (uint8_t)bench_rng_next(rs);
        (*pat)[i] = (b & 0x7F) == 0x7F ? 0x3F : b;
    }
    for (int64_t p = 0; p < *pat_pages; ++p) /* scales 2^-6 .. 2^-3 */
        for (int64_t q = 0; q < P; ++q) {
            const uint32_t bits = (uint32_t)(121 + bench_rng_next(rs) % 4) << 23;
            memcpy(*pat + p * stride + P * 128 + q * 4, &bits, 4);
        }
    uint8_t *q8 = malloc((size_t)(T * H * 128));
    float *w = malloc((size_t)(T * H) * 4);
    int64_t *pos = malloc((size_t)T * 8);
    int32_t *req = malloc((size_t)T * 4), *bt = malloc((size_t)pages * 4);
    for (int64_t i = 0; i < T * H * 128; ++i) {
        const uint8_t b = (uint8_t)bench_rng_next(rs);
        q8[i] = (b & 0x7F) == 0x7F ? 0x3F : b;
    }
    for (int64_t i = 0; i < T * H; ++i) w[i] = (float)((int64_t)(bench_rng_next(rs) % 2001) - 1000) * 1e-5f;
    for (int64_t b = 0; b < s->reqs; ++b)
        for (int64_t i = 0; i < s->next_n; ++i)
            pos[b * s->next_n + i] = s->ctx - s->next_n + i, req[b * s->next_n + i] = (int32_t)b;
    for (int64_t i = 0; i < pages; ++i) bt[i] = (int32_t)i;
    int32_t *lists = NULL;
    if (s->mode == 2) { /* 2,048 blocks spread over each row's columns (duplicates when fewer exist) */
        lists = malloc((size_t)T * 2048 * 4);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t i = 0; i < 2048; ++i)
                lists[t * 2048 + i] = (int32_t)(i * (((pos[t] + 1) / s->r + 7) / 8) / 2048);
    }
    h->a = (dsv4_indexer_topk_args_t){q8, w, pos, req, NULL, bt, NULL, NULL, lists};
    h->cache_bytes = (size_t)(pages * stride);
}

static void tk_free_host(tk_state_t *h, uint8_t *pat) {
    free((void *)h->a.q8), free((void *)h->a.w), free((void *)h->a.positions), free((void *)h->a.row_req);
    free((void *)h->a.block_table), free(pat), free(h->a.cand);
}

static uint32_t order_key(float x) {
    uint32_t u;
    if (x != x) return 0xFFFFFFFFu;
    if (x == 0.0f) x = 0.0f;
    memcpy(&u, &x, 4);
    return (u >> 31) ? ~u : (u | 0x80000000u);
}

/* The selection of a row against its logits v[0 .. n) (eligible: every column, or with a
 * candidate list the listed blocks' columns): K distinct ascending eligible indices (or the
 * eligible columns, then -1, for a short row) and no unselected eligible column ranking
 * above a selected one. */
static int tk_check_row(const float *v, int64_t n, const int32_t *sel, int64_t K, const int32_t *list) {
    char *in = calloc((size_t)(n > 0 ? n : 1), 1), *el = malloc((size_t)(n > 0 ? n : 1));
    int64_t size = 0;
    for (int64_t j = 0; j < n; ++j) el[j] = list == NULL;
    for (int64_t i = 0; list && i < 2048; ++i)
        for (int64_t j = 8 * (int64_t)list[i]; list[i] >= 0 && j < n && j < 8 * (int64_t)list[i] + 8; ++j) el[j] = 1;
    for (int64_t j = 0; j < n; ++j) size += el[j];
    if (size <= K) {
        int64_t o = 0, ok = 1;
        for (int64_t j = 0; j < n; ++j)
            if (el[j]) ok &= sel[o++] == j;
        for (; o < K; ++o) ok &= sel[o] == -1;
        free(in), free(el);
        return (int)ok;
    }
    uint32_t theta = 0xFFFFFFFFu;
    int64_t last_tie = -1;
    int ok = 1;
    for (int64_t i = 0; i < K && ok; ++i) {
        ok = sel[i] >= 0 && sel[i] < n && el[sel[i]] && (i == 0 || sel[i] > sel[i - 1]);
        if (ok) in[sel[i]] = 1, theta = order_key(v[sel[i]]) < theta ? order_key(v[sel[i]]) : theta;
    }
    for (int64_t i = 0; i < K && ok; ++i)
        if (order_key(v[sel[i]]) == theta) last_tie = sel[i];
    for (int64_t j = 0; j < n && ok; ++j)
        if (!in[j] && el[j]) ok = order_key(v[j]) < theta || (order_key(v[j]) == theta && j > last_tie);
    free(in), free(el);
    return ok;
}

static dsv4_status_t tk_cpu(void *st) {
    tk_state_t *g = st;
    return dsv4_indexer_topk_ref(&g->d, &g->a);
}

static int tk_cpu_case(bench_ctx_t *ctx, const char *op, const char *name, tk_shape_t s) {
    uint64_t rs = 0x1D3;
    s.ctx = s.prefill ? 2048 : 2048 * s.r, s.reqs = s.prefill ? 1 : 2, s.next_n = s.prefill ? 16 : 3;
    s.T = s.reqs * s.next_n;
    tk_state_t h;
    uint8_t *pat;
    int64_t pp;
    tk_problem(&s, 1 << 20, &rs, &h, &pat, &pp);
    h.d.topk = 256, h.d.topk_stride = 256;
    h.a.cache = pat;
    const int64_t T = s.T, n = h.d.max_keys, K = h.d.topk;
    int32_t *topk = malloc((size_t)(T * K) * 4), *cand = malloc((size_t)T * 2048 * 4);
    float *lg = malloc((size_t)(T * n) * 4);
    int32_t *lists = h.a.cand;
    h.a.topk = topk, h.a.cand = s.mode == 2 ? lists : cand;
    bench_timing_t tm;
    int ok = 1;
    const dsv4_indexer_logits_desc_t ld = {T,
                                           32,
                                           s.r,
                                           s.reqs,
                                           h.d.block_table_width,
                                           h.d.block_table_width,
                                           h.d.page_tokens,
                                           h.d.page_stride_bytes,
                                           h.d.num_pages,
                                           n,
                                           n,
                                           n};
    const dsv4_indexer_logits_args_t la = {h.a.q8, h.a.w, h.a.positions, h.a.row_req, NULL, h.a.block_table, pat, lg};
    ok &= dsv4_indexer_logits_ref(&ld, &la) == DSV4_STATUS_SUCCESS;
    ok &= bench_time_cpu(tk_cpu, &h, 3, &tm) == DSV4_STATUS_SUCCESS;
    for (int64_t t = 0; t < T; ++t) {
        const int64_t nt = (h.a.positions[t] + 1) / s.r;
        ok &= tk_check_row(lg + t * n, nt < n ? nt : n, topk + t * K, K, lists ? lists + t * 2048 : NULL);
    }
    char ran[96];
    snprintf(ran, sizeof ran, "R=%lld next_n=%lld ctx=%lld r=%lld topk=%lld", (long long)s.reqs, (long long)s.next_n,
             (long long)s.ctx, (long long)s.r, (long long)K);
    bench_report_cpu(ctx, op, name, ran, &tm, bench_verdict(1, ok));
    free(topk), free(cand), free(lg);
    h.a.cand = lists;
    tk_free_host(&h, pat);
    return !ok;
}

/* Upload helpers of the top-k case: NULL on a failed allocation or copy. */
static void *tk_up(const void *src, size_t bytes) {
    void *d = bench_dev_alloc(bytes ? bytes : 4);
    if (d && bytes && bench_upload(d, src, bytes)) bench_dev_free(d), d = NULL;
    return d;
}

/* --check on the GPU: the materialized logits, each row's selection against them, and the
 * same bits with the fewest splits the descriptor allows. */
static int tk_gpu_check(bench_ctx_t *ctx, const tk_shape_t *s, tk_state_t *dv, const int32_t *lists) {
    const int64_t T = s->T, n = dv->d.max_keys, K = dv->d.topk;
    const dsv4_indexer_logits_desc_t ld = {T,
                                           32,
                                           s->r,
                                           s->reqs,
                                           dv->d.block_table_width,
                                           dv->d.block_table_width,
                                           dv->d.page_tokens,
                                           dv->d.page_stride_bytes,
                                           dv->d.num_pages,
                                           n,
                                           n,
                                           (n + 3) / 4 * 4};
    const size_t lb = (size_t)(T * ld.out_stride) * 4, tb = (size_t)(T * K) * 4;
    float *dl = bench_dev_alloc(lb), *lg = malloc(lb);
    int32_t *got = malloc(tb), *again = malloc(tb);
    int ok = dl && lg && got && again && !bench_run_once(ctx, tk_launch, dv) && !bench_download(got, dv->a.topk, tb);
    if (ok) {
        const dsv4_indexer_logits_args_t la = {dv->a.q8, dv->a.w,           dv->a.positions, dv->a.row_req,
                                               NULL,     dv->a.block_table, dv->a.cache,     dl};
        ok = dsv4_indexer_logits(&ld, &la, NULL, 0, DSV4_STREAM(ctx->stream)) == DSV4_STATUS_SUCCESS &&
             !bench_download(lg, dl, lb);
        for (int64_t t = 0; ok && t < T; ++t) {
            const int64_t nt = (s->ctx - s->next_n + t % s->next_n + 1) / s->r;
            ok = tk_check_row(lg + t * ld.out_stride, nt < n ? nt : n, got + t * K, K, lists ? lists + t * 2048 : NULL);
        }
        tk_state_t one = *dv;
        const int64_t listed = 8 * (int64_t)dv->d.candidate_count; /* mode 2 splits the listed columns */
        one.d.num_splits = ((dv->d.candidate_mode == 2 && listed < n ? listed : n) + 65535) / 65536;
        ok = ok && !bench_run_once(ctx, tk_launch, &one) && !bench_download(again, dv->a.topk, tb) &&
             !memcmp(got, again, tb);
    }
    bench_dev_free(dl), free(lg), free(got), free(again);
    return ok;
}

static int run_tk(bench_ctx_t *ctx, const char *op, const char *name) {
    tk_shape_t s;
    if (tk_parse(name, &s)) return 1;
    if (!ctx->have_gpu) return tk_cpu_case(ctx, op, name, s);
    uint64_t rs = 0x1D3;
    tk_state_t h, dv;
    uint8_t *pat;
    int64_t pp;
    tk_problem(&s, 2048, &rs, &h, &pat, &pp);
    const int64_t T = s.T, H = 32, n = h.d.max_keys, pages = h.d.num_pages, stride = h.d.page_stride_bytes;
    size_t ws = 0;
    int rc = 1;
    dv = h;
    dv.ws = NULL;
    if (dsv4_indexer_topk_workspace_size(&h.d, &ws) != DSV4_STATUS_SUCCESS) {
        printf("indexer bench: %s: %s\n", name, dsv4_last_error());
        tk_free_host(&h, pat);
        return 1;
    }
    uint8_t *cache = bench_dev_alloc(h.cache_bytes);
    for (int64_t p0 = 0; cache && p0 < pages; p0 += pp) /* the random pattern, repeated */
        if (bench_upload(cache + p0 * stride, pat, (size_t)((pages - p0 < pp ? pages - p0 : pp) * stride)))
            bench_dev_free(cache), cache = NULL;
    dv.a = (dsv4_indexer_topk_args_t){tk_up(h.a.q8, (size_t)(T * H * 128)),
                                      tk_up(h.a.w, (size_t)(T * H) * 4),
                                      tk_up(h.a.positions, (size_t)T * 8),
                                      tk_up(h.a.row_req, (size_t)T * 4),
                                      NULL,
                                      tk_up(h.a.block_table, (size_t)pages * 4),
                                      cache,
                                      bench_dev_alloc((size_t)(T * 512) * 4),
                                      s.mode == 2 ? tk_up(h.a.cand, (size_t)T * 2048 * 4)
                                                  : bench_dev_alloc((size_t)T * 2048 * 4)};
    dv.ws = bench_dev_alloc(ws), dv.ws_bytes = ws;
    if (dv.a.q8 && dv.a.w && dv.a.positions && dv.a.row_req && dv.a.block_table && cache && dv.a.topk && dv.a.cand &&
        dv.ws) {
        const int ok = !ctx->check || tk_gpu_check(ctx, &s, &dv, h.a.cand);
        bench_timing_t tm;
        if (bench_time(ctx, tk_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("indexer bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            double pairs = 0.0; /* sum of n_t */
            for (int64_t t = 0; t < T; ++t) {
                const int64_t nt = (h.a.positions[t] + 1) / s.r;
                pairs += (double)(nt < n ? nt : n);
            }
            if (s.mode == 2) { /* the listed blocks' columns of each row */
                pairs = 0.0;
                for (int64_t t = 0; t < T; ++t) {
                    int64_t e = 0, nt = (h.a.positions[t] + 1) / s.r;
                    for (int64_t i = 0; i < 2048; ++i)
                        if (i == 0 || h.a.cand[t * 2048 + i] != h.a.cand[t * 2048 + i - 1])
                            e += 8 * ((int64_t)h.a.cand[t * 2048 + i] + 1) <= nt
                                     ? 8
                                     : nt - 8 * (int64_t)h.a.cand[t * 2048 + i];
                    pairs += (double)e;
                }
            }
            const double bytes = s.mode == 2 ? pairs * 132.0 : (double)s.reqs * (double)n * 132.0;
            const double flops = pairs * 2.0 * H * 128;
            const double floor_us = s.prefill ? flops / (ctx->mma_tflops * 1e6) : bytes / (ctx->copy_gbps * 1e3);
            char cfg[192];
            snprintf(cfg, sizeof cfg,
                     "H=32 topk=512 P=%lld workspace_bytes=%zu floor_us=%.2f floor=%s; check: selection vs the "
                     "materialized logits, split-count invariance",
                     (long long)h.d.page_tokens, ws, floor_us,
                     s.prefill ? "mma" : (s.mode == 2 ? "listed-keys-copy" : "keys-once-copy"));
            bench_report(ctx, op, name, cfg, &tm, bytes, flops, s.prefill ? BENCH_CEIL_MMA : BENCH_CEIL_COPY,
                         bench_verdict(ctx->check, ok));
            rc = !ok;
        }
    } else {
        printf("indexer bench: %s: device allocation or upload failed (cache %zu bytes, workspace %zu)\n", name,
               h.cache_bytes, ws);
    }
    bench_dev_free((void *)dv.a.q8), bench_dev_free((void *)dv.a.w), bench_dev_free((void *)dv.a.positions);
    bench_dev_free((void *)dv.a.row_req), bench_dev_free((void *)dv.a.block_table), bench_dev_free(cache);
    bench_dev_free(dv.a.topk), bench_dev_free(dv.a.cand), bench_dev_free(dv.ws);
    tk_free_host(&h, pat);
    return rc;
}

const bench_case_t bench_indexer_cases[] = {
    {"indexer_q", "T=8192 H=32", run_q},
    {"indexer_q", "T=24 H=32", run_q},
    {"indexer_k_store", "T=8192 r=1", run_k},
    {"indexer_k_store", "T=8192 r=2", run_k},
    {"indexer_k_store", "T=24 r=1", run_k},
    {"indexer_topk", "R=4 next_n=6 ctx=65536 r=1 decode", run_tk},
    {"indexer_topk", "R=4 next_n=6 ctx=65536 r=2 decode", run_tk},
    {"indexer_topk", "R=4 next_n=6 ctx=262144 r=1 decode", run_tk},
    {"indexer_topk", "R=4 next_n=6 ctx=262144 r=2 decode", run_tk},
    {"indexer_topk", "R=4 next_n=6 ctx=1048576 r=1 decode", run_tk},
    {"indexer_topk", "R=4 next_n=6 ctx=1048576 r=2 decode", run_tk},
    {"indexer_topk", "R=64 next_n=1 ctx=65536 r=1 decode", run_tk},
    {"indexer_topk", "R=64 next_n=1 ctx=1048576 r=1 decode", run_tk},
    {"indexer_topk", "R=4 next_n=6 ctx=1048576 r=1 decode candidates", run_tk},
    {"indexer_topk", "R=4 next_n=6 ctx=1048576 r=1 decode restrict", run_tk},
    {"indexer_topk", "T=4096 ctx=16384 r=1 prefill", run_tk},
    {"indexer_topk", "T=4096 ctx=16384 r=1 prefill restrict", run_tk},
    {"indexer_topk", "T=4096 ctx=16384 r=2 prefill", run_tk},
    {"indexer_topk", "T=4096 ctx=65536 r=1 prefill", run_tk},
    {"indexer_topk", "T=4096 ctx=65536 r=2 prefill", run_tk},
};
const int bench_indexer_count = (int)(sizeof bench_indexer_cases / sizeof bench_indexer_cases[0]);
