/*
 * Benchmark cases of the compress family, timed through the public API.
 *
 *   inv_rope       T=N H=h        N tokens at positions 0..N-1, h live heads of 512 dims,
 *                                 a rotary table with theta 10000; bytes = N * h * 256
 *                                 (the 128 RoPE bytes of a head row read and written) +
 *                                 N * (256 + 8) (the token's table row and position);
 *                                 ceiling: copy (N = 8,192) or the empty launch (N = 24)
 *   engram_lookup  T=N H=h D=d    N tokens, h columns of d dims, every id owned (the
 *                                 floor's case), tables in device memory; bytes =
 *                                 N * h * (d + d/32 + 4 read, 2d written); ceiling: copy
 *                                 (N = 8,192) or the empty launch (N = 24). With the word
 *                                 `host` the tables live in pinned host memory mapped
 *                                 into the device: bytes = N * h * (d + d/32), the rows
 *                                 read over the host link; ceiling: the host link's copy
 *                                 rate, measured in the same run
 *
 *   compress       T=N r=1        N rows of kv_score, every slot >= 0; bytes = N * (2048 + 8
 *                                 read, 1024 written); ceiling: copy
 *                  T=N r=2        N rows in requests of 2048 rows (6 rows, a decode step with
 *                                 speculative tokens, when N < 2048), starting at odd and even
 *                                 positions, ring_cap 8; bytes = N * (4096 + 16) read, 1024
 *                                 per closing row written, 4096 per ring row read and 8192
 *                                 per ring row stored; ceiling: copy (N >= 8,192) or the
 *                                 empty launch (N = 24)
 *   compress_v4    T=N r=4|128    the V4.0 compressor fused with the compressed-cache writer
 *                                 (head_dim 512); with the suffix "N=128" (ratio 4 only),
 *                                 head_dim 128: the lightning indexer's own compressor
 *                                 writing indexer states. Cases, byte counts and checks:
 *                                 bench/compress_v4.c
 *
 * With --check each case first compares one run with the CPU reference, every element.
 * Without a GPU each case runs its reference on a smaller input of the same kind and
 * checks invariants that hold by construction: inv_rope leaves dims below 448 and the
 * position-0 rows (cos 1, sin 0) bit for bit and keeps each pair's norm within bf16
 * rounding; engram_lookup's every element equals code * 2^(enc - 127) exactly; compress
 * (gamma 1) gives latent rows whose mean square is 1 within bf16 rounding, leaves the
 * other rows' poison and stores each request's last 8 rows into the ring bit for bit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "compress_bench.h"
#include "dsv4/compress.h"
#include "dsv4/numerics.h"

/* Model-like bf16: random sign and mantissa, magnitude 2^-4 .. 2^4. */
static uint16_t rand_bf16(uint64_t *s) {
    const uint64_t v = bench_rng_next(s);
    return (uint16_t)(((v & 1) << 15) | ((123 + (v >> 1) % 8) << 7) | ((v >> 8) & 0x7F));
}

/* ---- inv_rope ------------------------------------------------------------------------------ */
typedef struct {
    dsv4_inv_rope_desc_t d;
    dsv4_inv_rope_args_t a;
} ir_state_t;
static dsv4_status_t ir_launch(bench_ctx_t *ctx, void *st) {
    ir_state_t *g = st;
    return dsv4_inv_rope(&g->d, &g->a, NULL, 0, DSV4_STREAM(ctx->stream));
}
static dsv4_status_t ir_cpu(void *st) {
    ir_state_t *g = st;
    return dsv4_inv_rope_ref(&g->d, &g->a);
}

static void ir_problem(int64_t T, int64_t H, uint64_t *s, ir_state_t *h) {
    h->d = (dsv4_inv_rope_desc_t){
        .num_tokens = T, .num_heads = H, .max_position = T, .o_stride_token = H * 512, .o_stride_head = 512};
    uint16_t *o = malloc((size_t)(T * H) * 1024);
    int64_t *pos = malloc((size_t)T * 8);
    float *cs = bench_rotary_table(T);
    for (int64_t i = 0; i < T * H * 512; ++i) o[i] = rand_bf16(s);
    for (int64_t n = 0; n < T; ++n) pos[n] = n;
    h->a = (dsv4_inv_rope_args_t){o, pos, cs};
}
static void ir_free(ir_state_t *h) { free(h->a.o), free((void *)h->a.position_ids), free((void *)h->a.cos_sin_cache); }

static int ir_cpu_case(bench_ctx_t *ctx, const char *op, const char *name, int64_t T, int64_t H) {
    uint64_t s = 0x1A7;
    ir_state_t h;
    bench_timing_t tm;
    ir_problem(T, H, &s, &h);
    uint16_t *in = malloc((size_t)(T * H) * 1024);
    memcpy(in, h.a.o, (size_t)(T * H) * 1024);
    int ok = bench_time_cpu(ir_cpu, &h, 1, &tm) == DSV4_STATUS_SUCCESS; /* once: the operator works in place */
    for (int64_t r = 0; r < T * H; ++r) {
        const uint16_t *x = in + r * 512, *y = h.a.o + r * 512;
        ok &= !memcmp(x, y, r < H ? 1024 : 896); /* token 0 rotates by (1, 0) */
        for (int i = 0; i < 32; ++i) {
            const double a = dsv4_bf16_to_f32(x[448 + 2 * i]), b = dsv4_bf16_to_f32(x[449 + 2 * i]);
            const double ya = dsv4_bf16_to_f32(y[448 + 2 * i]), yb = dsv4_bf16_to_f32(y[449 + 2 * i]);
            ok &= fabs(sqrt(ya * ya + yb * yb) - sqrt(a * a + b * b)) <= 0x1p-7 * sqrt(a * a + b * b);
        }
    }
    char ran[64];
    snprintf(ran, sizeof ran, "T=%lld H=%lld", (long long)T, (long long)H);
    bench_report_cpu(ctx, op, name, ran, &tm, bench_verdict(1, ok));
    free(in);
    ir_free(&h);
    return !ok;
}

static int run_inv_rope(bench_ctx_t *ctx, const char *op, const char *name) {
    long long T = 0, H = 0;
    if (sscanf(name, "T=%lld H=%lld", &T, &H) != 2) return 1;
    if (!ctx->have_gpu) return ir_cpu_case(ctx, op, name, T < 64 ? T : 64, H);
    uint64_t s = 0x1A7;
    ir_state_t h, dv;
    bench_timing_t tm;
    ir_problem(T, H, &s, &h);
    const size_t ob = (size_t)(T * H) * 1024;
    void *dox = bench_dev_alloc(ob), *dpos = bench_dev_alloc((size_t)T * 8), *dcs = bench_dev_alloc((size_t)T * 256);
    int rc = 1;
    if (dox && dpos && dcs && !bench_upload(dox, h.a.o, ob) && !bench_upload(dpos, h.a.position_ids, (size_t)T * 8) &&
        !bench_upload(dcs, h.a.cos_sin_cache, (size_t)T * 256)) {
        dv = h;
        dv.a = (dsv4_inv_rope_args_t){dox, dpos, dcs};
        int ok = 1;
        if (ctx->check) {
            uint16_t *got = malloc(ob);
            ok = !bench_run_once(ctx, ir_launch, &dv) && !bench_download(got, dox, ob);
            ok = ok && dsv4_inv_rope_ref(&h.d, &h.a) == DSV4_STATUS_SUCCESS;
            ok = ok && !memcmp(got, h.a.o, ob);
            free(got);
        }
        if (bench_time(ctx, ir_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("compress bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            bench_report(ctx, op, name, "in place, positions 0..T-1, theta 10000; check: every element of o", &tm,
                         (double)T * (double)H * 256 + (double)T * 264, 0,
                         T >= 8192 ? BENCH_CEIL_COPY : BENCH_CEIL_LAUNCH, bench_verdict(ctx->check, ok));
            rc = !ok;
        }
    }
    bench_dev_free(dox), bench_dev_free(dpos), bench_dev_free(dcs);
    ir_free(&h);
    return rc;
}

/* ---- engram_lookup -------------------------------------------------------------------------- */
typedef struct {
    dsv4_engram_lookup_desc_t d;
    dsv4_engram_lookup_args_t a;
} eg_state_t;
static dsv4_status_t eg_launch(bench_ctx_t *ctx, void *st) {
    eg_state_t *g = st;
    return dsv4_engram_lookup(&g->d, &g->a, NULL, 0, DSV4_STREAM(ctx->stream));
}
static dsv4_status_t eg_cpu(void *st) {
    eg_state_t *g = st;
    return dsv4_engram_lookup_ref(&g->d, &g->a);
}

enum { EG_TABLE_ROWS = 1 << 16 };

/* T tokens, H columns of D dims all owned, ids uniform over a 64K-row table whose codes are
 * finite and whose scales are 115..135. */
static void eg_problem(int64_t T, int64_t H, int64_t D, uint64_t *s, eg_state_t *h) {
    h->d = (dsv4_engram_lookup_desc_t){.num_tokens = T,
                                       .n_cols = H,
                                       .local_heads = H,
                                       .head_dim = D,
                                       .vocab_end = EG_TABLE_ROWS,
                                       .ids_stride_token = H,
                                       .ids_stride_head = 1,
                                       .values_stride_bytes = D,
                                       .scales_stride_bytes = D / 32};
    uint8_t *values = malloc((size_t)(EG_TABLE_ROWS * D)), *scales = malloc((size_t)(EG_TABLE_ROWS * D / 32));
    int32_t *ids = malloc((size_t)(T * H) * 4);
    for (int64_t i = 0; i < EG_TABLE_ROWS * D; ++i) {
        const uint8_t b = (uint8_t)bench_rng_next(s);
        values[i] = (b & 0x7F) == 0x7F ? b ^ 1 : b; /* no NaN codes */
    }
    for (int64_t i = 0; i < EG_TABLE_ROWS * D / 32; ++i) scales[i] = (uint8_t)(115 + bench_rng_next(s) % 21);
    for (int64_t i = 0; i < T * H; ++i) ids[i] = (int32_t)(bench_rng_next(s) % EG_TABLE_ROWS);
    h->a = (dsv4_engram_lookup_args_t){values, scales, ids, malloc((size_t)(T * H * D) * 2)};
}
static void eg_free(eg_state_t *h) {
    free((void *)h->a.values), free((void *)h->a.scales), free((void *)h->a.ids), free(h->a.out);
}

static int eg_cpu_case(bench_ctx_t *ctx, const char *op, const char *name, int64_t T, int64_t H, int64_t D) {
    uint64_t s = 0xE6;
    eg_state_t h;
    bench_timing_t tm;
    eg_problem(T, H, D, &s, &h);
    int ok = bench_time_cpu(eg_cpu, &h, 5, &tm) == DSV4_STATUS_SUCCESS;
    for (int64_t r = 0; r < T * H; ++r) {
        const uint8_t *v = h.a.values + h.a.ids[r] * D, *sc = h.a.scales + h.a.ids[r] * (D / 32);
        for (int64_t e = 0; e < D; ++e)
            ok &= (double)dsv4_bf16_to_f32(h.a.out[r * D + e]) == ldexp(dsv4_e4m3_to_f32(v[e]), sc[e / 32] - 127);
    }
    char ran[64];
    snprintf(ran, sizeof ran, "T=%lld H=%lld D=%lld", (long long)T, (long long)H, (long long)D);
    bench_report_cpu(ctx, op, name, ran, &tm, bench_verdict(1, ok));
    eg_free(&h);
    return !ok;
}

/* The table in device memory, or (`host`) in pinned host memory mapped into the device,
 * read over the host link: `*dev` is the address the kernel reads, NULL on failure. */
static void *eg_table(int host, const void *data, size_t bytes, void **dev) {
    *dev = NULL;
    if (!host) {
        void *d = bench_dev_alloc(bytes);
        if (d && bench_upload(d, data, bytes)) bench_dev_free(d), d = NULL;
        return *dev = d;
    }
    void *h = bench_host_mapped_alloc(bytes, dev);
    if (h) memcpy(h, data, bytes);
    return h;
}
static void eg_table_free(int host, void *p) {
    if (!p) return;
    if (host) bench_host_free(p);
    else bench_dev_free(p);
}

static int run_engram(bench_ctx_t *ctx, const char *op, const char *name) {
    long long T = 0, H = 0, D = 0;
    if (sscanf(name, "T=%lld H=%lld D=%lld", &T, &H, &D) != 3) return 1;
    const int host = strstr(name, " host") != NULL;
    if (!ctx->have_gpu) return eg_cpu_case(ctx, op, name, T < 64 ? T : 64, H, D);
    if (host && bench_measure_host_link(ctx)) return 1;
    uint64_t s = 0xE6;
    eg_state_t h, dv;
    bench_timing_t tm;
    eg_problem(T, H, D, &s, &h);
    const size_t vb = (size_t)(EG_TABLE_ROWS * D), sb = vb / 32, ib = (size_t)(T * H) * 4, ob = (size_t)(T * H * D) * 2;
    void *dval, *dsc;
    void *tval = eg_table(host, h.a.values, vb, &dval), *tsc = eg_table(host, h.a.scales, sb, &dsc);
    void *dids = bench_dev_alloc(ib), *dout = bench_dev_alloc(ob);
    int rc = 1;
    if (dval && dsc && dids && dout && !bench_upload(dids, h.a.ids, ib)) {
        dv = h;
        dv.a = (dsv4_engram_lookup_args_t){dval, dsc, dids, dout};
        int ok = 1;
        if (ctx->check) {
            uint16_t *got = malloc(ob);
            ok = !bench_run_once(ctx, eg_launch, &dv) && !bench_download(got, dout, ob);
            dsv4_engram_lookup_ref(&h.d, &h.a);
            ok = ok && !memcmp(got, h.a.out, ob);
            free(got);
        }
        if (bench_time(ctx, eg_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("compress bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            /* host tables: the rows and scales crossing the host link against its measured copy rate */
            const double table_bytes = (double)T * (double)H * (double)(D + D / 32);
            bench_report(ctx, op, name,
                         host ? "host-mapped tables of 65536 rows, every id owned; bytes: the table rows read over "
                                "the host link; check: every element"
                              : "device tables of 65536 rows, every id owned; check: every element",
                         &tm, host ? table_bytes : table_bytes + (double)T * (double)H * (4.0 + 2.0 * (double)D), 0,
                         host        ? BENCH_CEIL_HOST_LINK
                         : T >= 8192 ? BENCH_CEIL_COPY
                                     : BENCH_CEIL_LAUNCH,
                         bench_verdict(ctx->check, ok));
            rc = !ok;
        }
    }
    eg_table_free(host, tval), eg_table_free(host, tsc), bench_dev_free(dids), bench_dev_free(dout);
    eg_free(&h);
    return rc;
}

/* ---- compress ------------------------------------------------------------------------------ */
enum { CP_D = DSV4_COMPRESS_DIM, CP_CAP = 8, CP_POISON = 0xA7 };

typedef struct {
    dsv4_compress_desc_t d;
    dsv4_compress_args_t a;
    size_t kv_bytes, ring_bytes, qsl_bytes;
    int64_t closing, ring_reads, ring_stores; /* rows, for the byte count */
} cp_state_t;
static dsv4_status_t cp_launch(bench_ctx_t *ctx, void *st) {
    cp_state_t *g = st;
    return dsv4_compress(&g->d, &g->a, NULL, 0, DSV4_STREAM(ctx->stream));
}
static dsv4_status_t cp_cpu(void *st) {
    cp_state_t *g = st;
    return dsv4_compress_ref(&g->d, &g->a);
}

/* T rows at ratio r, gamma 1. Ratio 2: requests of L rows (2048, or 6 below 2048 rows),
 * request b from position 1000 + 7b (odd and even starts), in ring block b + 1. */
static void cp_problem(int64_t T, int64_t r, uint64_t *s, cp_state_t *h) {
    memset(h, 0, sizeof *h);
    const int64_t W = CP_D * r, L = T >= 2048 ? 2048 : 6, R = r == 2 ? (T + L - 1) / L : 0;
    h->d = (dsv4_compress_desc_t){.num_tokens = T, .ratio = r, .eps = 1e-6f, .kv_stride = 512 * r, .ring_stride = 1024};
    h->kv_bytes = (size_t)(T * W) * 4;
    float *kv = malloc(h->kv_bytes);
    for (int64_t i = 0; i < T * W; ++i) kv[i] = bench_uniform(s, i % W < CP_D ? 2.0f : 4.0f);
    uint16_t *gamma = malloc(CP_D * 2), *latent = malloc((size_t)T * CP_D * 2);
    for (int i = 0; i < CP_D; ++i) gamma[i] = 0x3F80;
    memset(latent, CP_POISON, (size_t)T * CP_D * 2);
    int64_t *pos = malloc((size_t)T * 8), *slot = malloc((size_t)T * 8);
    h->a = (dsv4_compress_args_t){.kv_score = kv, .gamma = gamma, .latent = latent};
    if (r == 1) {
        for (int64_t t = 0; t < T; ++t) pos[t] = t, slot[t] = t;
        h->a.slot = slot, h->closing = T;
        free(pos);
        return;
    }
    h->d.num_reqs = R, h->d.ring_cap = CP_CAP, h->d.ring_rows = (R + 1) * CP_CAP;
    h->qsl_bytes = (size_t)(R + 1) * 4;
    h->ring_bytes = (size_t)(h->d.ring_rows * 2 * CP_D) * 4;
    int32_t *qsl = malloc(h->qsl_bytes);
    float *ring = malloc(h->ring_bytes);
    for (int64_t i = 0; i < h->d.ring_rows * 2 * CP_D; ++i) ring[i] = bench_uniform(s, 2.0f);
    for (int64_t b = 0; b <= R; ++b) qsl[b] = (int32_t)(b * L < T ? b * L : T);
    for (int64_t b = 0; b < R; ++b) {
        const int64_t p0 = 1000 + 7 * b;
        for (int64_t t = qsl[b]; t < qsl[b + 1]; ++t) {
            pos[t] = p0 + t - qsl[b], slot[t] = (b + 1) * CP_CAP + pos[t] % CP_CAP;
            h->closing += pos[t] & 1;
        }
        h->ring_reads += p0 & 1;
        h->ring_stores += qsl[b + 1] - qsl[b] < CP_CAP ? qsl[b + 1] - qsl[b] : CP_CAP;
    }
    h->a.positions = pos, h->a.ring_slot = slot, h->a.query_start_loc = qsl, h->a.ring = ring;
}
static void cp_free(cp_state_t *h) {
    free((void *)h->a.kv_score), free((void *)h->a.gamma), free(h->a.latent), free((void *)h->a.slot);
    free((void *)h->a.positions), free((void *)h->a.ring_slot), free((void *)h->a.query_start_loc), free(h->a.ring);
}

/* The invariants of a reference run on h (ring0: the ring before it). */
static int cp_invariants(const cp_state_t *h, const float *ring0) {
    const dsv4_compress_desc_t *d = &h->d;
    int ok = 1;
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        const uint16_t *y = h->a.latent + t * CP_D;
        const int has = d->ratio == 1 || (h->a.positions[t] & 1);
        double ms = 0;
        for (int i = 0; i < CP_D; ++i) {
            const double v = dsv4_bf16_to_f32(y[i]);
            ms += v * v / CP_D;
            ok &= has || y[i] == (CP_POISON << 8 | CP_POISON);
        }
        ok &= !has || fabs(ms - 1.0) <= 0x1p-6;
    }
    if (d->ratio == 1) return ok;
    float *want = malloc(h->ring_bytes);
    memcpy(want, ring0, h->ring_bytes);
    for (int64_t b = 0; b < d->num_reqs; ++b) {
        const int64_t q0 = h->a.query_start_loc[b], q1 = h->a.query_start_loc[b + 1];
        for (int64_t t = q1 - CP_CAP > q0 ? q1 - CP_CAP : q0; t < q1; ++t)
            memcpy(want + h->a.ring_slot[t] * 2 * CP_D, h->a.kv_score + t * 2 * CP_D, 2 * CP_D * 4);
    }
    ok &= !memcmp(want, h->a.ring, h->ring_bytes);
    free(want);
    return ok;
}

static int cp_cpu_case(bench_ctx_t *ctx, const char *op, const char *name, int64_t T, int64_t r) {
    uint64_t s = 0xC0;
    cp_state_t h;
    bench_timing_t tm;
    cp_problem(T, r, &s, &h);
    float *ring0 = r == 2 ? malloc(h.ring_bytes) : NULL;
    if (ring0) memcpy(ring0, h.a.ring, h.ring_bytes);
    const dsv4_status_t st = bench_time_cpu(cp_cpu, &h, 1, &tm); /* once: the ring is updated in place */
    const int ok = st == DSV4_STATUS_SUCCESS && cp_invariants(&h, ring0);
    char ran[64];
    snprintf(ran, sizeof ran, "T=%lld r=%lld", (long long)T, (long long)r);
    bench_report_cpu(ctx, op, name, ran, &tm, bench_verdict(1, ok));
    free(ring0);
    cp_free(&h);
    return !ok;
}

/* GPU latent against the reference's: ratio 1 bit for bit; ratio 2 within 2^-7 relative
 * plus 2^-12 (a sanity bound: tests/compress holds the contract's). */
static int cp_latent_close(const uint16_t *got, const uint16_t *want, size_t n, int64_t r) {
    if (r == 1) return !memcmp(got, want, n * 2);
    for (size_t i = 0; i < n; ++i) {
        const double g = dsv4_bf16_to_f32(got[i]), w = dsv4_bf16_to_f32(want[i]);
        if (got[i] != want[i] && !(fabs(g - w) <= 0x1p-7 * fabs(w) + 0x1p-12)) return 0;
    }
    return 1;
}

static int run_compress(bench_ctx_t *ctx, const char *op, const char *name) {
    long long T = 0, r = 0;
    if (sscanf(name, "T=%lld r=%lld", &T, &r) != 2) return 1;
    if (!ctx->have_gpu) return cp_cpu_case(ctx, op, name, T < 256 ? T : 256, r);
    uint64_t s = 0xC0;
    cp_state_t h, dv;
    bench_timing_t tm;
    cp_problem(T, r, &s, &h);
    const size_t lb = (size_t)T * CP_D * 2, ib = (size_t)T * 8;
    void *dkv = bench_dev_alloc(h.kv_bytes), *dg = bench_dev_alloc(CP_D * 2), *dl = bench_dev_alloc(lb);
    void *dpos = bench_dev_alloc(ib), *dslot = bench_dev_alloc(ib);
    void *dqsl = r == 2 ? bench_dev_alloc(h.qsl_bytes) : NULL, *dring = r == 2 ? bench_dev_alloc(h.ring_bytes) : NULL;
    int rc = 1;
    const int64_t *slots = r == 1 ? h.a.slot : h.a.ring_slot;
    if (dkv && dg && dl && dpos && dslot && (r == 1 || (dqsl && dring)) &&
        !bench_upload(dkv, h.a.kv_score, h.kv_bytes) && !bench_upload(dg, h.a.gamma, CP_D * 2) &&
        !bench_upload(dl, h.a.latent, lb) && !bench_upload(dslot, slots, ib) &&
        (r == 1 || (!bench_upload(dpos, h.a.positions, ib) && !bench_upload(dqsl, h.a.query_start_loc, h.qsl_bytes) &&
                    !bench_upload(dring, h.a.ring, h.ring_bytes)))) {
        dv = h;
        dv.a = (dsv4_compress_args_t){.kv_score = dkv, .gamma = dg, .latent = dl};
        if (r == 1) dv.a.slot = dslot;
        else dv.a.positions = dpos, dv.a.ring_slot = dslot, dv.a.query_start_loc = dqsl, dv.a.ring = dring;
        int ok = 1;
        if (ctx->check) {
            uint16_t *got = malloc(lb);
            float *ring_got = r == 2 ? malloc(h.ring_bytes) : NULL;
            ok = !bench_run_once(ctx, cp_launch, &dv) && !bench_download(got, dl, lb) &&
                 (r == 1 || !bench_download(ring_got, dring, h.ring_bytes));
            ok = ok && dsv4_compress_ref(&h.d, &h.a) == DSV4_STATUS_SUCCESS;
            ok = ok && cp_latent_close(got, h.a.latent, (size_t)T * CP_D, r) &&
                 (r == 1 || !memcmp(ring_got, h.a.ring, h.ring_bytes));
            free(got), free(ring_got);
        }
        if (bench_time(ctx, cp_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("compress bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            const double bytes = r == 1 ? (double)T * (2048 + 8 + 1024)
                                        : (double)T * (4096 + 16) + (double)h.closing * 1024 +
                                              (double)h.ring_reads * 4096 + (double)h.ring_stores * 8192;
            bench_report(ctx, op, name,
                         r == 1 ? "every slot >= 0, gamma 1; check: every element bit for bit"
                                : "requests of 2048 rows (6 below 2048), ring_cap 8, gamma 1; check: ring bit for "
                                  "bit, latent against the reference",
                         &tm, bytes, 0, T >= 8192 ? BENCH_CEIL_COPY : BENCH_CEIL_LAUNCH, bench_verdict(ctx->check, ok));
            rc = !ok;
        }
    }
    bench_dev_free(dkv), bench_dev_free(dg), bench_dev_free(dl), bench_dev_free(dpos), bench_dev_free(dslot);
    bench_dev_free(dqsl), bench_dev_free(dring);
    cp_free(&h);
    return rc;
}

const bench_case_t bench_compress_cases[] = {
    {"compress", "T=8192 r=1", run_compress},
    {"compress", "T=65536 r=1", run_compress},
    {"compress", "T=8192 r=2", run_compress},
    {"compress", "T=65536 r=2", run_compress},
    {"compress", "T=24 r=2", run_compress},
    {"inv_rope", "T=8192 H=64", run_inv_rope},
    {"inv_rope", "T=24 H=64", run_inv_rope},
    {"engram_lookup", "T=8192 H=8 D=256", run_engram},
    {"engram_lookup", "T=24 H=8 D=256", run_engram},
    {"engram_lookup", "T=8192 H=8 D=256 host", run_engram},
    {"compress_v4", "T=8192 r=4", bench_run_compress_v4},
    {"compress_v4", "T=65536 r=4", bench_run_compress_v4},
    {"compress_v4", "T=8192 r=128", bench_run_compress_v4},
    {"compress_v4", "T=65536 r=128", bench_run_compress_v4},
    {"compress_v4", "T=24 r=4", bench_run_compress_v4},
    {"compress_v4", "T=24 r=128", bench_run_compress_v4},
    {"compress_v4", "T=8192 r=4 N=128", bench_run_compress_v4},
    {"compress_v4", "T=65536 r=4 N=128", bench_run_compress_v4},
    {"compress_v4", "T=24 r=4 N=128", bench_run_compress_v4},
};
const int bench_compress_count = (int)(sizeof bench_compress_cases / sizeof bench_compress_cases[0]);
