/*
 * Benchmark cases of the kvcache family, timed through the public API.
 *
 *   kv_gather    rows=N R=Q P=p  N rows in total (N/Q per request) from a cache whose
 *                                pages are shuffled over the block tables; bytes =
 *                                N * (584 read + 1024 written); ceiling: copy
 *   kv_insert    T=N P=64        N rows into consecutive slots of shuffled pages; bytes =
 *                                N * (1024 read + 584 written); ceiling: copy (N = 65,536)
 *                                or the empty launch (N = 8,192, a latency case)
 *   kv_rope_insert T=N r=R      compressed-cache writer: positions 0..N-1 of one request,
 *                                every R-th token writes its state (P = 128 at r = 1, 64 at
 *                                r = 2, shuffled pages); bytes = N/R * (1024 read + 584
 *                                written) + N * 16 (positions, slots); ceiling: copy (the
 *                                empty launch at N = 24, a decode case)
 *   kv_swa_write T=N H=h         V4.1 SWA page (P = 32); bytes =
 *                                N * (h * 1024 * 2 (q read + written) + 1024 (kv) + 584)
 *   kv_swa_write T=N H=h skip-q-norm  the same without the q RMS norm (skip_q_norm = 1):
 *                                only q's RoPE dims move, bytes = N * (h * 256 + 1024 + 584)
 * A `rotated` row repeats a case back to back over three input sets (no flush).
 *
 * Page strides follow vLLM: P * 584 rounded up to a multiple of 576. With --check each
 * case first compares one run with the CPU reference: every cache byte and every gathered
 * element; for the SWA writer q is checked on every 16th token (the q reference over all
 * 8,192 x 64 heads would take seconds) and the cache in full. Without a GPU each case runs
 * its reference on a small model-shaped input with a known-answer or invariant check.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "bench.h"
#include "dsv4/numerics.h"
#include "model_cases.h"

/* ---- small helpers ---------------------------------------------------------------------- */
/* Model-like bf16: random sign and mantissa, magnitude 2^-4 .. 2^4. */
static uint16_t rng_bf16(uint64_t *s) {
    const uint64_t v = bench_rng_next(s);
    return (uint16_t)(((v & 1) << 15) | ((123 + (v >> 1) % 8) << 7) | ((v >> 8) & 0x7F));
}

/* Times `fn` back to back over three copies of `state` (bench_time_rotated): the device
 * buffers whose pointers sit at byte offsets off[0] and off[1] of the state struct (sizes
 * bytes[0], bytes[1]) are duplicated, so consecutive runs read cold inputs (3 sets exceed
 * L2 for the cases that use this) with no flush in between. */
enum { ROT_SETS = 3, ROT_PER_REP = 6, ROT_MAX_STATE = 256 };
static int time_rotated(bench_ctx_t *ctx, bench_launch_fn fn, const void *state, size_t state_size, const size_t off[2],
                        const size_t bytes[2], bench_timing_t *tm) {
    unsigned char sets[ROT_SETS][ROT_MAX_STATE];
    void *st[ROT_SETS], *copies[ROT_SETS][2] = {{0}};
    int ok = state_size <= ROT_MAX_STATE;
    for (int k = 0; k < ROT_SETS && ok; ++k) {
        memcpy(sets[k], state, state_size);
        st[k] = sets[k];
        for (int j = 0; j < 2 && k > 0 && ok; ++j) {
            void *src;
            memcpy(&src, (const unsigned char *)state + off[j], sizeof src);
            copies[k][j] = bench_dev_alloc(bytes[j]);
            ok = copies[k][j] && cudaMemcpy(copies[k][j], src, bytes[j], cudaMemcpyDeviceToDevice) == cudaSuccess;
            memcpy(sets[k] + off[j], &copies[k][j], sizeof(void *));
        }
    }
    ok = ok && bench_time_rotated(ctx, fn, st, ROT_SETS, ROT_PER_REP, tm) == DSV4_STATUS_SUCCESS;
    for (int k = 1; k < ROT_SETS; ++k) bench_dev_free(copies[k][0]), bench_dev_free(copies[k][1]);
    return ok;
}

/* ---- gather ------------------------------------------------------------------------------ */
typedef struct {
    const char *name;
    int64_t rows, reqs, P;
} gather_cfg_t;
static const gather_cfg_t gather_cfgs[] = {
    {"rows=16384 R=1 P=64", 16384, 1, 64},     {"rows=16384 R=4 P=64", 16384, 4, 64},
    {"rows=16384 R=1 P=256", 16384, 1, 256},   {"rows=16384 R=4 P=256", 16384, 4, 256},
    {"rows=49152 R=1 P=64", 49152, 1, 64},     {"rows=49152 R=4 P=64", 49152, 4, 64},
    {"rows=49152 R=1 P=256", 49152, 1, 256},   {"rows=49152 R=4 P=256", 49152, 4, 256},
    {"rows=131072 R=1 P=64", 131072, 1, 64},   {"rows=131072 R=4 P=64", 131072, 4, 64},
    {"rows=131072 R=1 P=256", 131072, 1, 256}, {"rows=131072 R=4 P=256", 131072, 4, 256},
};

typedef struct {
    dsv4_kv_gather_desc_t d;
    dsv4_kv_gather_args_t a;
} gather_state_t;
static dsv4_status_t gather_launch(bench_ctx_t *ctx, void *st) {
    gather_state_t *g = st;
    return dsv4_kv_gather(&g->d, &g->a, NULL, 0, DSV4_STREAM(ctx->stream));
}
static dsv4_status_t gather_cpu(void *st) {
    gather_state_t *g = st;
    return dsv4_kv_gather_ref(&g->d, &g->a);
}

/* Host problem: a cache of random records (finite codes, scales 115..135) and block tables
 * that spread each request over shuffled pages. */
static void gather_problem(const gather_cfg_t *c, uint64_t *s, gather_state_t *h) {
    const int64_t per = c->rows / c->reqs, width = (per + c->P - 1) / c->P, npages = c->reqs * width + 1;
    memset(h, 0, sizeof *h);
    h->d = (dsv4_kv_gather_desc_t){.num_reqs = c->reqs,
                                   .block_table_width = width,
                                   .out_rows = per,
                                   .max_gather_len = per,
                                   .page_tokens = c->P,
                                   .page_stride_bytes = MC_PAGE_STRIDE(c->P),
                                   .num_pages = npages,
                                   .block_table_stride = width,
                                   .out_stride_req = per * 512,
                                   .out_stride_row = 512};
    const size_t cbytes = (size_t)(npages * h->d.page_stride_bytes);
    uint8_t *cache = malloc(cbytes);
    for (size_t i = 0; i < cbytes; ++i) {
        const int64_t in = (int64_t)(i % (size_t)h->d.page_stride_bytes);
        uint8_t b = (uint8_t)bench_rng_next(s);
        if (in < c->P * 576 && in % 576 < 448 && (b & 0x7F) == 0x7F) b ^= 1; /* no NaN codes */
        if (in >= c->P * 576) b = (uint8_t)(115 + b % 21);                   /* scales */
        cache[i] = b;
    }
    int32_t *seq = malloc((size_t)c->reqs * 4), *table = malloc((size_t)(c->reqs * width) * 4);
    int64_t *pages = bench_shuffled(s, 1, npages - 1); /* pages 1.. : page 0 is vLLM's null page, never used */
    for (int64_t b = 0; b < c->reqs; ++b) {
        seq[b] = (int32_t)per;
        for (int64_t j = 0; j < width; ++j) table[b * width + j] = (int32_t)pages[b * width + j];
    }
    free(pages);
    h->a = (dsv4_kv_gather_args_t){cache, seq, NULL, table, malloc((size_t)(c->rows * 1024))};
}
static void gather_free_host(gather_state_t *h) {
    free((void *)h->a.cache), free((void *)h->a.seq_lens), free((void *)h->a.block_table), free(h->a.out);
}

static int run_gather(bench_ctx_t *ctx, const char *op, const char *name) {
    const gather_cfg_t *c = NULL;
    for (size_t i = 0; i < sizeof gather_cfgs / sizeof gather_cfgs[0]; ++i)
        if (!strcmp(gather_cfgs[i].name, name)) c = &gather_cfgs[i];
    uint64_t s = 0x6A7E;
    gather_state_t h;
    bench_timing_t tm;
    if (!ctx->have_gpu) { /* 1,024 rows of a V4 page; invariant: a second gather is identical,
                             and every NoPE value is code * 2^(enc - 127) bit for bit */
        const gather_cfg_t small = {name, 1024, c->reqs, c->P};
        gather_problem(&small, &s, &h);
        int ok = bench_time_cpu(gather_cpu, &h, 5, &tm) == DSV4_STATUS_SUCCESS;
        const int64_t P = c->P, per = 1024 / c->reqs;
        for (int64_t b = 0; b < c->reqs && ok; ++b)
            for (int64_t i = 0; i < per && ok; ++i) {
                const int64_t page = h.a.block_table[b * h.d.block_table_width + i / P];
                const uint8_t *rec = h.a.cache + page * h.d.page_stride_bytes + (i % P) * DSV4_KV_DATA_BYTES;
                const uint8_t *sc =
                    h.a.cache + page * h.d.page_stride_bytes + P * DSV4_KV_DATA_BYTES + (i % P) * DSV4_KV_SCALE_BYTES;
                const uint16_t *row = h.a.out + (b * per + i) * 512;
                for (int d = 0; d < 448; ++d)
                    ok &= (double)dsv4_bf16_to_f32(row[d]) == ldexp(dsv4_e4m3_to_f32(rec[d]), sc[d / 64] - 127);
                ok &= memcmp(row + 448, rec + 448, 128) == 0;
            }
        char ran[64];
        snprintf(ran, sizeof ran, "rows=1024 R=%lld P=%lld", (long long)c->reqs, (long long)P);
        bench_report_cpu(ctx, op, name, ran, &tm, bench_verdict(1, ok));
        gather_free_host(&h);
        return !ok;
    }
    gather_problem(c, &s, &h);
    const size_t cbytes = (size_t)(h.d.num_pages * h.d.page_stride_bytes), obytes = (size_t)(c->rows * 1024);
    gather_state_t dv = h;
    void *dc = bench_dev_alloc(cbytes), *dseq = bench_dev_alloc((size_t)c->reqs * 4);
    void *dtab = bench_dev_alloc((size_t)(c->reqs * h.d.block_table_width) * 4), *dout = bench_dev_alloc(obytes);
    int rc = 1;
    if (dc && dseq && dtab && dout && !bench_upload(dc, h.a.cache, cbytes) &&
        !bench_upload(dseq, h.a.seq_lens, (size_t)c->reqs * 4) &&
        !bench_upload(dtab, h.a.block_table, (size_t)(c->reqs * h.d.block_table_width) * 4)) {
        dv.a = (dsv4_kv_gather_args_t){dc, dseq, NULL, dtab, dout};
        int ok = 1;
        if (ctx->check) {
            uint16_t *got = malloc(obytes);
            ok = !bench_run_once(ctx, gather_launch, &dv) && !bench_download(got, dout, obytes);
            ok = ok && dsv4_kv_gather_ref(&h.d, &h.a) == DSV4_STATUS_SUCCESS;
            ok = ok && !memcmp(got, h.a.out, obytes);
            free(got);
        }
        if (bench_time(ctx, gather_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("kvcache bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            char cfg[160];
            snprintf(cfg, sizeof cfg, "P=%lld stride=%lld rows/req=%lld pages shuffled; check: every element",
                     (long long)c->P, (long long)h.d.page_stride_bytes, (long long)(c->rows / c->reqs));
            bench_report(ctx, op, name, cfg, &tm, (double)c->rows * (584 + 1024), 0, BENCH_CEIL_COPY,
                         bench_verdict(ctx->check, ok));
            rc = !ok;
            const size_t off[2] = {offsetof(gather_state_t, a.cache), offsetof(gather_state_t, a.out)},
                         sz[2] = {cbytes, obytes};
            if (c->rows >= 49152 && time_rotated(ctx, gather_launch, &dv, sizeof dv, off, sz, &tm)) {
                char rname[96];
                snprintf(rname, sizeof rname, "%s rotated", name);
                snprintf(cfg, sizeof cfg,
                         "as '%s', timed back to back over 3 cache/out sets (%d runs per event "
                         "pair, no flush)",
                         name, ROT_PER_REP);
                bench_report(ctx, op, rname, cfg, &tm, (double)c->rows * (584 + 1024), 0, BENCH_CEIL_COPY,
                             bench_verdict(ctx->check, ok));
            }
        }
    }
    bench_dev_free(dc), bench_dev_free(dseq), bench_dev_free(dtab), bench_dev_free(dout);
    gather_free_host(&h);
    return rc;
}

/* ---- insert ------------------------------------------------------------------------------ */
typedef struct {
    dsv4_kv_insert_desc_t d;
    dsv4_kv_insert_args_t a;
} insert_state_t;
static dsv4_status_t insert_launch(bench_ctx_t *ctx, void *st) {
    insert_state_t *g = st;
    return dsv4_kv_insert(&g->d, &g->a, NULL, 0, DSV4_STREAM(ctx->stream));
}
static dsv4_status_t insert_cpu(void *st) {
    insert_state_t *g = st;
    return dsv4_kv_insert_ref(&g->d, &g->a);
}

/* T rows into consecutive slots of shuffled pages of a P = 64 cache (V4 SWA / C4A page). */
static void insert_problem(int64_t T, uint64_t *s, insert_state_t *h) {
    const int64_t P = MC_V4_PAGE_TOKENS, npages = (T + P - 1) / P + 1;
    h->d = (dsv4_kv_insert_desc_t){T, 512, P, MC_PAGE_STRIDE(P), npages};
    uint16_t *k = malloc((size_t)T * 1024);
    int64_t *slots = malloc((size_t)T * 8), *pages = bench_shuffled(s, 1, npages - 1);
    for (int64_t i = 0; i < T * 512; ++i) k[i] = rng_bf16(s);
    for (int64_t i = 0; i < T; ++i) slots[i] = pages[i / P] * P + i % P;
    free(pages);
    uint8_t *cache = malloc((size_t)(npages * h->d.page_stride_bytes));
    memset(cache, 0, (size_t)(npages * h->d.page_stride_bytes));
    h->a = (dsv4_kv_insert_args_t){k, slots, cache};
}

static int run_insert(bench_ctx_t *ctx, const char *op, const char *name) {
    const int64_t T = strstr(name, "65536") ? 65536 : 8192;
    uint64_t s = 0x1A5E;
    insert_state_t h;
    bench_timing_t tm;
    if (!ctx->have_gpu) { /* 256 tokens of the ramp block (x_d = (d - 32)/8 in every
                             block): enc 121 and its known codes in every record */
        insert_problem(256, &s, &h);
        for (int64_t i = 0; i < 256 * 512; ++i) ((uint16_t *)h.a.k)[i] = dsv4_f32_to_bf16((float)(i % 64 - 32) / 8.0f);
        int ok = bench_time_cpu(insert_cpu, &h, 5, &tm) == DSV4_STATUS_SUCCESS;
        for (int64_t i = 0; i < 256; ++i) {
            const int64_t page = h.a.slot_mapping[i] / h.d.page_tokens, p = h.a.slot_mapping[i] % h.d.page_tokens;
            const uint8_t *rec = h.a.cache + page * h.d.page_stride_bytes + p * DSV4_KV_DATA_BYTES;
            const uint8_t *sc = h.a.cache + page * h.d.page_stride_bytes + h.d.page_tokens * DSV4_KV_DATA_BYTES +
                                p * DSV4_KV_SCALE_BYTES;
            for (int k = 0; k < 7; ++k)
                ok &= sc[k] == 121 && rec[64 * k] == 0xF8 && rec[64 * k + 33] == 0x50 && rec[64 * k + 49] == 0x70 &&
                      rec[64 * k + 63] == 0x78;
            ok &= sc[7] == 0;
        }
        bench_report_cpu(ctx, op, name, "T=256 P=64", &tm, bench_verdict(1, ok));
        free((void *)h.a.k), free((void *)h.a.slot_mapping), free(h.a.cache);
        return !ok;
    }
    insert_problem(T, &s, &h);
    const size_t cbytes = (size_t)(h.d.num_pages * h.d.page_stride_bytes);
    void *dk = bench_dev_alloc((size_t)T * 1024), *ds = bench_dev_alloc((size_t)T * 8), *dc = bench_dev_alloc(cbytes);
    insert_state_t dv = h;
    int rc = 1;
    if (dk && ds && dc && !bench_upload(dk, h.a.k, (size_t)T * 1024) &&
        !bench_upload(ds, h.a.slot_mapping, (size_t)T * 8) && !bench_upload(dc, h.a.cache, cbytes)) {
        dv.a = (dsv4_kv_insert_args_t){dk, ds, dc};
        int ok = 1;
        if (ctx->check) {
            uint8_t *got = malloc(cbytes);
            ok = !bench_run_once(ctx, insert_launch, &dv) && !bench_download(got, dc, cbytes);
            ok = ok && dsv4_kv_insert_ref(&h.d, &h.a) == DSV4_STATUS_SUCCESS;
            ok = ok && !memcmp(got, h.a.cache, cbytes);
            free(got);
        }
        if (bench_time(ctx, insert_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("kvcache bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            bench_report(ctx, op, name,
                         "P=64 stride=37440 consecutive slots of shuffled pages; check: every cache byte", &tm,
                         (double)T * (1024 + 584), 0, T == 65536 ? BENCH_CEIL_COPY : BENCH_CEIL_LAUNCH,
                         bench_verdict(ctx->check, ok));
            rc = !ok;
            const size_t off[2] = {offsetof(insert_state_t, a.k), offsetof(insert_state_t, a.cache)},
                         sz[2] = {(size_t)T * 1024, cbytes};
            if (T == 65536 && time_rotated(ctx, insert_launch, &dv, sizeof dv, off, sz, &tm)) {
                char rname[96], cfg[160];
                snprintf(rname, sizeof rname, "%s rotated", name);
                snprintf(cfg, sizeof cfg,
                         "as '%s', timed back to back over 3 k/cache sets (%d runs per event pair, "
                         "no flush)",
                         name, ROT_PER_REP);
                bench_report(ctx, op, rname, cfg, &tm, (double)T * (1024 + 584), 0, BENCH_CEIL_COPY,
                             bench_verdict(ctx->check, ok));
            }
        }
    }
    bench_dev_free(dk), bench_dev_free(ds), bench_dev_free(dc);
    free((void *)h.a.k), free((void *)h.a.slot_mapping), free(h.a.cache);
    return rc;
}

/* ---- compressed-cache writer ------------------------------------------------------------- */
typedef struct {
    dsv4_kv_rope_insert_desc_t d;
    dsv4_kv_rope_insert_args_t a;
} rope_state_t;
static dsv4_status_t rope_launch(bench_ctx_t *ctx, void *st) {
    rope_state_t *g = st;
    return dsv4_kv_rope_insert(&g->d, &g->a, NULL, 0, DSV4_STREAM(ctx->stream));
}
static dsv4_status_t rope_cpu(void *st) {
    rope_state_t *g = st;
    return dsv4_kv_rope_insert_ref(&g->d, &g->a);
}

/* Positions 0..T-1; the token closing group v writes state v at slot page(v / P) * P + v % P
 * of shuffled pages, the others have slot -1 (upstream's compressed slot mapping). */
static void rope_problem(int64_t T, int64_t r, uint64_t *s, rope_state_t *h) {
    const int64_t P = r == 1 ? 128 : 64, states = T / r, npages = (states + P - 1) / P + 1, max_pos = T;
    h->d = (dsv4_kv_rope_insert_desc_t){T, 512, P, MC_PAGE_STRIDE(P), npages, r, max_pos};
    uint16_t *x = malloc((size_t)T * 1024);
    int64_t *pos = malloc((size_t)T * 8), *slots = malloc((size_t)T * 8), *pages = bench_shuffled(s, 1, npages - 1);
    float *cs = malloc((size_t)max_pos * 256);
    for (int64_t i = 0; i < T * 512; ++i) x[i] = rng_bf16(s);
    for (int64_t i = 0; i < max_pos * 64; ++i) cs[i] = (float)((double)bench_rng_next(s) / 18446744073709551616.0);
    for (int64_t i = 0; i < T; ++i) {
        const int64_t v = i / r;
        pos[i] = i;
        slots[i] = (i + 1) % r == 0 ? pages[v / P] * P + v % P : -1;
    }
    free(pages);
    uint8_t *cache = calloc((size_t)(npages * h->d.page_stride_bytes), 1);
    h->a = (dsv4_kv_rope_insert_args_t){x, pos, slots, cs, cache};
}
static void rope_free(rope_state_t *h) {
    free((void *)h->a.latent), free((void *)h->a.positions), free((void *)h->a.slot_mapping);
    free((void *)h->a.cos_sin_cache), free(h->a.cache);
}

static int run_rope_insert(bench_ctx_t *ctx, const char *op, const char *name) {
    const int64_t T = strstr(name, "65536") ? 65536 : strstr(name, "8192") ? 8192 : 24;
    const int64_t r = strstr(name, "r=2") ? 2 : 1;
    uint64_t s = 0x20BE;
    rope_state_t h;
    bench_timing_t tm;
    if (!ctx->have_gpu) { /* 256 tokens of all-1.0 latents, table cos 0.5, sin 0.75: every
                             written record has codes 0x78, enc 0x77, pairs (-0.25, 1.25) */
        rope_problem(256, r, &s, &h);
        for (int64_t i = 0; i < 256 * 512; ++i) ((uint16_t *)h.a.latent)[i] = 0x3F80;
        for (int64_t i = 0; i < h.d.max_position * 64; ++i)
            ((float *)h.a.cos_sin_cache)[i] = i % 64 < 32 ? 0.5f : 0.75f;
        int ok = bench_time_cpu(rope_cpu, &h, 5, &tm) == DSV4_STATUS_SUCCESS;
        for (int64_t i = 0; i < 256; ++i) {
            if (h.a.slot_mapping[i] < 0) continue;
            const int64_t page = h.a.slot_mapping[i] / h.d.page_tokens, p = h.a.slot_mapping[i] % h.d.page_tokens;
            const uint8_t *rec = h.a.cache + page * h.d.page_stride_bytes + p * DSV4_KV_DATA_BYTES;
            const uint8_t *sc = h.a.cache + page * h.d.page_stride_bytes + h.d.page_tokens * DSV4_KV_DATA_BYTES +
                                p * DSV4_KV_SCALE_BYTES;
            for (int k = 0; k < 7; ++k) ok &= sc[k] == 0x77 && rec[64 * k] == 0x78 && rec[64 * k + 63] == 0x78;
            for (int j = 0; j < 32; ++j)
                ok &= rec[448 + 4 * j] == 0x80 && rec[449 + 4 * j] == 0xBE && rec[450 + 4 * j] == 0xA0 &&
                      rec[451 + 4 * j] == 0x3F;
            ok &= sc[7] == 0;
        }
        char ran[48];
        snprintf(ran, sizeof ran, "T=256 r=%lld P=%lld", (long long)r, (long long)h.d.page_tokens);
        bench_report_cpu(ctx, op, name, ran, &tm, bench_verdict(1, ok));
        rope_free(&h);
        return !ok;
    }
    rope_problem(T, r, &s, &h);
    const size_t cbytes = (size_t)(h.d.num_pages * h.d.page_stride_bytes), tb = (size_t)T * 8;
    const size_t csb = (size_t)h.d.max_position * 256;
    void *dx = bench_dev_alloc((size_t)T * 1024), *dp = bench_dev_alloc(tb), *ds = bench_dev_alloc(tb);
    void *dcs = bench_dev_alloc(csb), *dc = bench_dev_alloc(cbytes);
    rope_state_t dv = h;
    int rc = 1;
    if (dx && dp && ds && dcs && dc && !bench_upload(dx, h.a.latent, (size_t)T * 1024) &&
        !bench_upload(dp, h.a.positions, tb) && !bench_upload(ds, h.a.slot_mapping, tb) &&
        !bench_upload(dcs, h.a.cos_sin_cache, csb) && !bench_upload(dc, h.a.cache, cbytes)) {
        dv.a = (dsv4_kv_rope_insert_args_t){dx, dp, ds, dcs, dc};
        int ok = 1;
        if (ctx->check) {
            uint8_t *got = malloc(cbytes);
            ok = !bench_run_once(ctx, rope_launch, &dv) && !bench_download(got, dc, cbytes);
            ok = ok && dsv4_kv_rope_insert_ref(&h.d, &h.a) == DSV4_STATUS_SUCCESS;
            ok = ok && !memcmp(got, h.a.cache, cbytes);
            free(got);
        }
        if (bench_time(ctx, rope_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("kvcache bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            char cfg[160];
            snprintf(cfg, sizeof cfg,
                     "P=%lld stride=%lld positions 0..T-1, every r-th token writes (shuffled pages); check: every "
                     "cache byte",
                     (long long)h.d.page_tokens, (long long)h.d.page_stride_bytes);
            bench_report(ctx, op, name, cfg, &tm, (double)(T / r) * (1024 + 584) + (double)T * 16, 0,
                         T == 24 ? BENCH_CEIL_LAUNCH : BENCH_CEIL_COPY, bench_verdict(ctx->check, ok));
            rc = !ok;
        }
    }
    bench_dev_free(dx), bench_dev_free(dp), bench_dev_free(ds), bench_dev_free(dcs), bench_dev_free(dc);
    rope_free(&h);
    return rc;
}

/* ---- fused SWA writer ------------------------------------------------------------------- */
typedef struct {
    dsv4_kv_swa_write_desc_t d;
    dsv4_kv_swa_write_args_t a;
} swa_state_t;
static dsv4_status_t swa_launch(bench_ctx_t *ctx, void *st) {
    swa_state_t *g = st;
    return dsv4_kv_swa_write(&g->d, &g->a, NULL, 0, DSV4_STREAM(ctx->stream));
}
static dsv4_status_t swa_cpu(void *st) {
    swa_state_t *g = st;
    return dsv4_kv_swa_write_ref(&g->d, &g->a);
}

/* N prefill tokens at positions 0..N-1 of one request, H heads, the V4.1 SWA page (P = 32),
 * a rotary table with theta = 10000 (unit cos^2 + sin^2). */
static void swa_problem(int64_t N, int64_t H, int skip_q_norm, uint64_t *s, swa_state_t *h) {
    const int64_t P = MC_SWA_PAGE_TOKENS, npages = (N + P - 1) / P + 1;
    h->d = (dsv4_kv_swa_write_desc_t){.num_tokens = N,
                                      .num_insert = N,
                                      .num_heads = H,
                                      .max_position = N,
                                      .page_tokens = P,
                                      .page_stride_bytes = MC_PAGE_STRIDE(P),
                                      .num_pages = npages,
                                      .eps = 1e-6f,
                                      .skip_q_norm = skip_q_norm,
                                      .q_stride_token = H * 512,
                                      .q_stride_head = 512,
                                      .kv_stride_row = 512};
    uint16_t *q = malloc((size_t)(N * H) * 1024), *kv = malloc((size_t)N * 1024);
    int64_t *pos = malloc((size_t)N * 8), *slots = malloc((size_t)N * 8), *pages = bench_shuffled(s, 1, npages - 1);
    float *cs = bench_rotary_table(N);
    for (int64_t i = 0; i < N * H * 512; ++i) q[i] = rng_bf16(s);
    for (int64_t i = 0; i < N * 512; ++i) kv[i] = rng_bf16(s);
    for (int64_t n = 0; n < N; ++n) {
        pos[n] = n;
        slots[n] = pages[n / P] * P + n % P;
    }
    free(pages);
    uint8_t *cache = malloc((size_t)(npages * h->d.page_stride_bytes));
    memset(cache, 0, (size_t)(npages * h->d.page_stride_bytes));
    h->a = (dsv4_kv_swa_write_args_t){q, kv, pos, slots, cs, cache};
}
static void swa_free_host(swa_state_t *h) {
    free(h->a.q), free((void *)h->a.kv), free((void *)h->a.position_ids), free((void *)h->a.slot_mapping);
    free((void *)h->a.cos_sin_cache), free(h->a.cache);
}

/* The cache bytes of the kv side alone, by the reference run with one dummy q head; 0 when
 * the reference refuses the call. */
static int swa_ref_cache(const swa_state_t *h, uint8_t *cache) {
    swa_state_t k = *h;
    k.d.num_heads = 1, k.d.num_heads_padded = 0, k.d.q_stride_token = 512, k.d.q_stride_head = 512;
    k.a.q = calloc((size_t)h->d.num_tokens, 1024);
    k.a.cache = cache;
    if (!k.a.q) return 0;
    const dsv4_status_t st = dsv4_kv_swa_write_ref(&k.d, &k.a);
    if (st != DSV4_STATUS_SUCCESS) printf("kvcache bench: SWA reference: %s\n", dsv4_last_error());
    free(k.a.q);
    return st == DSV4_STATUS_SUCCESS;
}

/* q of every 16th token by the reference, against `got` (1 bf16 ulp: kvcache.h's q contract;
 * bit-exact with skip_q_norm). */
static int swa_check_q(const swa_state_t *h, const uint16_t *q_in, const uint16_t *got) {
    const int64_t H = h->d.num_heads, row = H * 512;
    int ok = 1;
    for (int64_t n = 0; n < h->d.num_tokens && ok; n += 16) {
        swa_state_t one = *h;
        one.d.num_tokens = 1, one.d.num_insert = 0;
        one.a.q = malloc((size_t)row * 2);
        memcpy(one.a.q, q_in + n * row, (size_t)row * 2);
        one.a.position_ids = h->a.position_ids + n;
        ok &= dsv4_kv_swa_write_ref(&one.d, &one.a) == DSV4_STATUS_SUCCESS;
        for (int64_t i = 0; i < row; ++i) {
            const uint16_t ha = one.a.q[i], hb = got[n * row + i];
            /* ordered-integer distance of two finite bf16 values: their distance in ulps */
            const int32_t oa = (ha & 0x8000) ? 0x8000 - (ha & 0x7FFF) : 0x8000 + ha;
            const int32_t ob = (hb & 0x8000) ? 0x8000 - (hb & 0x7FFF) : 0x8000 + hb;
            const int32_t tol = h->d.skip_q_norm ? 0 : 1;
            const int within = oa - ob <= tol && ob - oa <= tol;
            if (!within && ok)
                printf("  q token %lld element %lld: 0x%04x, reference 0x%04x\n", (long long)n, (long long)i, hb, ha);
            ok &= within;
        }
        free(one.a.q);
    }
    return ok;
}

/* Rows [rows, 512] at position n for row n * per + k: bf16(RoPE) in the header's fmaf form on
 * dims 448..511, the other dims copied. */
static void rope_rows_fmaf(const uint16_t *in, int64_t rows, int64_t per, const float *cs, uint16_t *out) {
    memcpy(out, in, (size_t)rows * 1024);
    for (int64_t r = 0; r < rows; ++r)
        for (int i = 0; i < 32; ++i) {
            const float c = cs[r / per * 64 + i], sn = cs[r / per * 64 + 32 + i];
            const float xa = dsv4_bf16_to_f32(in[r * 512 + 448 + 2 * i]);
            const float xb = dsv4_bf16_to_f32(in[r * 512 + 449 + 2 * i]);
            const float xbs = xb * sn, xbc = xb * c;
            out[r * 512 + 448 + 2 * i] = dsv4_f32_to_bf16(fmaf(xa, c, -xbs));
            out[r * 512 + 449 + 2 * i] = dsv4_f32_to_bf16(fmaf(xa, sn, xbc));
        }
}

static int swa_cpu_case(bench_ctx_t *ctx, const char *op, const char *name, int64_t H, int skip) {
    /* 64 tokens: q rows come out with mean square 1 (a unit rotation keeps it), or with
     * skip-q-norm as bf16(RoPE(q)) evaluated here in the header's fmaf form (one run on the
     * saved input: the timed runs rotate q again each time); the cache equals
     * dsv4_kv_insert_ref of bf16(RoPE(kv)) in the same form. */
    uint64_t s = 0x5A7;
    swa_state_t h;
    bench_timing_t tm;
    swa_problem(64, H, skip, &s, &h);
    uint16_t *q_in = malloc((size_t)(64 * H) * 1024), *rot = malloc((size_t)(64 * H) * 1024);
    memcpy(q_in, h.a.q, (size_t)(64 * H) * 1024);
    int ok = bench_time_cpu(swa_cpu, &h, 3, &tm) == DSV4_STATUS_SUCCESS;
    if (skip) {
        memcpy(h.a.q, q_in, (size_t)(64 * H) * 1024);
        ok &= swa_cpu(&h) == DSV4_STATUS_SUCCESS;
        rope_rows_fmaf(q_in, 64 * H, H, h.a.cos_sin_cache, rot);
        ok &= !memcmp(rot, h.a.q, (size_t)(64 * H) * 1024);
    }
    for (int64_t r = 0; r < 64 * H && !skip; ++r) {
        double ms = 0;
        for (int d = 0; d < 512; ++d) ms += pow(dsv4_bf16_to_f32(h.a.q[r * 512 + d]), 2) / 512.0;
        ok &= fabs(ms - 1.0) < 0.02;
    }
    uint8_t *want = calloc((size_t)(h.d.num_pages * h.d.page_stride_bytes), 1);
    rope_rows_fmaf(h.a.kv, 64, 1, h.a.cos_sin_cache, rot);
    dsv4_kv_insert_desc_t di = {64, 512, h.d.page_tokens, h.d.page_stride_bytes, h.d.num_pages};
    dsv4_kv_insert_args_t ai = {rot, h.a.slot_mapping, want};
    ok &= dsv4_kv_insert_ref(&di, &ai) == DSV4_STATUS_SUCCESS;
    ok &= !memcmp(want, h.a.cache, (size_t)(h.d.num_pages * h.d.page_stride_bytes));
    char ran[64];
    snprintf(ran, sizeof ran, "T=64 H=%lld P=%d%s", (long long)H, MC_SWA_PAGE_TOKENS, skip ? " skip-q-norm" : "");
    bench_report_cpu(ctx, op, name, ran, &tm, bench_verdict(1, ok));
    free(q_in), free(rot), free(want);
    swa_free_host(&h);
    return !ok;
}

static int run_swa(bench_ctx_t *ctx, const char *op, const char *name) {
    const int64_t H = strstr(name, "H=64") ? 64 : 32, N = 8192;
    const int skip = strstr(name, "skip-q-norm") != NULL;
    if (!ctx->have_gpu) return swa_cpu_case(ctx, op, name, H, skip);
    uint64_t s = 0x5A7;
    swa_state_t h;
    bench_timing_t tm;
    swa_problem(N, H, skip, &s, &h);
    const size_t qb = (size_t)(N * H) * 1024, cb = (size_t)(h.d.num_pages * h.d.page_stride_bytes);
    void *dq = bench_dev_alloc(qb), *dkv = bench_dev_alloc((size_t)N * 1024), *dpos = bench_dev_alloc((size_t)N * 8);
    void *dsl = bench_dev_alloc((size_t)N * 8), *dcs = bench_dev_alloc((size_t)N * 256), *dc = bench_dev_alloc(cb);
    swa_state_t dv = h;
    int rc = 1;
    if (dq && dkv && dpos && dsl && dcs && dc && !bench_upload(dq, h.a.q, qb) &&
        !bench_upload(dkv, h.a.kv, (size_t)N * 1024) && !bench_upload(dpos, h.a.position_ids, (size_t)N * 8) &&
        !bench_upload(dsl, h.a.slot_mapping, (size_t)N * 8) && !bench_upload(dcs, h.a.cos_sin_cache, (size_t)N * 256) &&
        !bench_upload(dc, h.a.cache, cb)) {
        dv.a = (dsv4_kv_swa_write_args_t){dq, dkv, dpos, dsl, dcs, dc};
        int ok = 1;
        if (ctx->check) {
            uint16_t *got_q = malloc(qb);
            uint8_t *got_c = malloc(cb);
            ok = !bench_run_once(ctx, swa_launch, &dv) && !bench_download(got_q, dq, qb) &&
                 !bench_download(got_c, dc, cb);
            ok = ok && swa_check_q(&h, h.a.q, got_q);
            ok = ok && swa_ref_cache(&h, h.a.cache) && !memcmp(got_c, h.a.cache, cb);
            free(got_q), free(got_c);
        }
        if (bench_time(ctx, swa_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("kvcache bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            bench_report(ctx, op, name,
                         skip ? "V4.1 SWA page P=32 stride=19008, positions 0..8191, q RoPE only; check: cache every "
                                "byte, q every 16th token"
                              : "V4.1 SWA page P=32 stride=19008, positions 0..8191; check: cache every byte, q every "
                                "16th token",
                         &tm, (double)N * ((double)H * (skip ? 256 : 2048) + 1024 + 584), 0, BENCH_CEIL_COPY,
                         bench_verdict(ctx->check, ok));
            rc = !ok;
        }
    }
    bench_dev_free(dq), bench_dev_free(dkv), bench_dev_free(dpos), bench_dev_free(dsl), bench_dev_free(dcs);
    bench_dev_free(dc);
    swa_free_host(&h);
    return rc;
}

const bench_case_t bench_kvcache_cases[] = {
    {"kv_gather", "rows=16384 R=1 P=64", run_gather},   {"kv_gather", "rows=16384 R=4 P=64", run_gather},
    {"kv_gather", "rows=16384 R=1 P=256", run_gather},  {"kv_gather", "rows=16384 R=4 P=256", run_gather},
    {"kv_gather", "rows=49152 R=1 P=64", run_gather},   {"kv_gather", "rows=49152 R=4 P=64", run_gather},
    {"kv_gather", "rows=49152 R=1 P=256", run_gather},  {"kv_gather", "rows=49152 R=4 P=256", run_gather},
    {"kv_gather", "rows=131072 R=1 P=64", run_gather},  {"kv_gather", "rows=131072 R=4 P=64", run_gather},
    {"kv_gather", "rows=131072 R=1 P=256", run_gather}, {"kv_gather", "rows=131072 R=4 P=256", run_gather},
    {"kv_insert", "T=65536 P=64", run_insert},          {"kv_insert", "T=8192 P=64", run_insert},
    {"kv_rope_insert", "T=8192 r=1", run_rope_insert},  {"kv_rope_insert", "T=65536 r=1", run_rope_insert},
    {"kv_rope_insert", "T=8192 r=2", run_rope_insert},  {"kv_rope_insert", "T=65536 r=2", run_rope_insert},
    {"kv_rope_insert", "T=24 r=2", run_rope_insert},    {"kv_swa_write", "T=8192 H=64", run_swa},
    {"kv_swa_write", "T=8192 H=32", run_swa},           {"kv_swa_write", "T=8192 H=64 skip-q-norm", run_swa},
};
const int bench_kvcache_count = (int)(sizeof bench_kvcache_cases / sizeof bench_kvcache_cases[0]);
