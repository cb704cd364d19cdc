/*
 * Benchmark cases of the compress family's V4.0 compressor (dsv4_compress_v4), timed
 * through the public API; the rows sit in bench/compress.c's case table.
 *
 *   compress_v4  T=n r=R [N=128]
 *                          n rows in requests of 2048 rows (4 requests of 6 rows, a decode
 *                          step with speculative tokens, at n = 24); request b at positions
 *                          1000 + 7b onward, so that its first windows reach into state rows
 *                          of earlier steps (the whole state starts random). N = head_dim:
 *                          512 without the suffix (the attention compressor writing 584-byte
 *                          records: F = 584) or 128 with it (the lightning indexer's own
 *                          compressor writing 132-byte indexer states: F = 132; ratio 4
 *                          only, where the indexer lives). With c = 2, W = 8, B = 4, P = 64
 *                          at R = 4 and c = 1, W = 128, B = 8, P = 2 at R = 128: state
 *                          blocks of B rows, distinct and shuffled, cover each request's
 *                          windows and chunk; every row has its group's slot in a cache of
 *                          shuffled pages of P slots (stride P * F rounded up to 16 bytes);
 *                          a rotary table with theta 10000 up to the last position; random
 *                          ape and gamma (bf16 in [0.5, 2)); eps 1e-6. bytes = n * (c * 8N
 *                          read (the kv_score row) + c * 8N written (its state row) + 28
 *                          (positions, both slot mappings, req_idx)) + K * (W * 8N read (the
 *                          N-dim slices of both halves of the window rows) + 256 (the rotary
 *                          row) + F written) + R * c * 4N (ape, read once: it stays in L2) +
 *                          2N (gamma) + the block table, with K the closing rows (positions
 *                          p with r | p + 1). N = 512: c * 4096 + c * 4096 + 28 per row,
 *                          W * 4096 + 256 + 584 per closing row, R * c * 2048 + 1024; N = 128:
 *                          c * 1024 + c * 1024 + 28 per row, W * 1024 + 256 + 132 per closing
 *                          row, R * c * 512 + 256. Ceiling: copy (n >= 8,192) or the empty
 *                          launch (n = 24)
 *
 * With --check each case first compares one run with the CPU reference on host copies of
 * the inputs: every byte of the cache and every float of the state, bit for bit (the
 * contract makes records and indexer states bit-exact and the state exact). Timing then
 * re-saves the same rows and rewrites the same records, so the state needs no reset
 * between runs. Without a GPU each case runs its reference on at most 256 rows (requests
 * of 128 rows for the prefill cases), gamma 1, and checks invariants that hold by
 * construction: every state row is the initial one except the saved rows, which hold kv
 * bit for bit and score + ape as one fp32 add; every closing row's output keeps the unit
 * mean square of its normalized row (the rotation keeps pair norms, so the whole row,
 * RoPE dims included, keeps it): at N = 512 a record with finite codes and RoPE values,
 * scales of a finite amax, a zero pad byte, and a dequantized row whose mean square is 1
 * within 5% (fp8 rounding of 448 dims moves it by far less); at N = 128 an indexer state
 * whose fp32 scale is a power of two from 2^-8 to 2^-5 (a unit-rms row's amax in
 * [1, sqrt(128)] over 448, rounded up), finite codes, and a dequantized row whose mean
 * square is 1 within 5% (fp8 rounding of all 128 dims moves it by a few percent, under
 * 3% on these inputs); every other cache byte keeps its poison.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "compress_bench.h"
#include "dsv4/compress.h"
#include "dsv4/indexer.h"
#include "dsv4/kvcache.h"
#include "dsv4/numerics.h"
#include "model_cases.h"

enum {
    V4_D = DSV4_COMPRESS_DIM,
    V4_IDX = DSV4_INDEXER_HEAD_DIM,
    V4_POISON = 0xA7,
    V4_FIRST_POS = 1000,
    V4_CPU_T = 256,
    V4_BUFS = 11
};

typedef struct {
    dsv4_compress_v4_desc_t d;
    dsv4_compress_v4_args_t a;
    size_t bytes[V4_BUFS]; /* each buffer of a, in the order of v4_buffers */
    int64_t closing;       /* rows that write a record */
} v4_state_t;
static dsv4_status_t cv4_launch(bench_ctx_t *ctx, void *st) {
    v4_state_t *g = st;
    return dsv4_compress_v4(&g->d, &g->a, NULL, 0, DSV4_STREAM(ctx->stream));
}
static dsv4_status_t cv4_cpu(void *st) {
    v4_state_t *g = st;
    return dsv4_compress_v4_ref(&g->d, &g->a);
}

/* c * N: floats in each half of a kv_score or state row. */
static int64_t v4_width(int64_t r, int64_t N) { return r == 4 ? 2 * N : N; }

/* F: cache bytes one closing row writes (a record or an indexer state). */
static int64_t v4_out_bytes(int64_t N) { return N == V4_IDX ? DSV4_INDEXER_STATE_BYTES : DSV4_KV_RECORD_BYTES; }

/* The buffers of a, in the order of dsv4_compress_v4_args_t's fields. */
static void v4_buffers(const dsv4_compress_v4_args_t *a, void *p[V4_BUFS]) {
    const void *q[V4_BUFS] = {a->kv_score, a->ape,           a->positions,    a->state_slot, a->req_idx, a->block_table,
                              a->gamma,    a->cos_sin_cache, a->slot_mapping, a->state,      a->cache};
    for (int i = 0; i < V4_BUFS; ++i) p[i] = (void *)q[i];
}
static dsv4_compress_v4_args_t v4_args(void *const p[V4_BUFS]) {
    return (dsv4_compress_v4_args_t){p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10]};
}

/* T rows at ratio r and head_dim N in requests of L rows, request b from position
 * 1000 + 7b; gamma 1 (unit_gamma) or random in [0.5, 2). */
static void v4_problem(int64_t T, int64_t r, int64_t N, int64_t L, int unit_gamma, uint64_t *s, v4_state_t *h) {
    memset(h, 0, sizeof *h);
    const int64_t width = v4_width(r, N), row = 2 * width, W = (r == 4 ? 2 : 1) * r, B = r == 4 ? 4 : 8;
    const int64_t P = r == 4 ? MC_V4_PAGE_TOKENS : MC_C128_PAGE_TOKENS, R = (T + L - 1) / L;
    int64_t blocks = 0, pages = 1, end = 0; /* page 0 stays unnamed, as vLLM's null page */
    for (int64_t b = 0; b < R; ++b) {
        const int64_t p0 = V4_FIRST_POS + 7 * b, last = p0 + (T - b * L < L ? T - b * L : L) - 1;
        blocks += last / B - (p0 - W + 1) / B + 1;
        pages += last / r / P - p0 / r / P + 1;
        end = last + 1 > end ? last + 1 : end;
    }
    const int64_t max_blocks = (end + B - 1) / B;
    h->d = (dsv4_compress_v4_desc_t){.num_tokens = T,
                                     .ratio = r,
                                     .head_dim = N,
                                     .kv_stride = row,
                                     .state_block_rows = B,
                                     .state_blocks = blocks,
                                     .state_stride_block = B * row,
                                     .state_stride_row = row,
                                     .num_reqs = R,
                                     .max_blocks = max_blocks,
                                     .block_table_stride = max_blocks,
                                     .page_tokens = P,
                                     .page_stride_bytes = (P * v4_out_bytes(N) + 15) / 16 * 16,
                                     .num_pages = pages,
                                     .max_position = end,
                                     .eps = 1e-6f};
    const size_t bytes[V4_BUFS] = {(size_t)(T * row) * 4,
                                   (size_t)(r * width) * 4,
                                   (size_t)T * 8,
                                   (size_t)T * 8,
                                   (size_t)T * 4,
                                   (size_t)(R * max_blocks) * 4,
                                   (size_t)N * 2,
                                   (size_t)end * 256,
                                   (size_t)T * 8,
                                   (size_t)(blocks * B * row) * 4,
                                   (size_t)(pages * h->d.page_stride_bytes)};
    memcpy(h->bytes, bytes, sizeof bytes);
    float *kv = malloc(bytes[0]), *ape = malloc(bytes[1]), *state = malloc(bytes[9]);
    int64_t *pos = malloc(bytes[2]), *sslot = malloc(bytes[3]), *smap = malloc(bytes[8]);
    int32_t *req = malloc(bytes[4]), *bt = malloc(bytes[5]);
    uint16_t *gamma = malloc(bytes[6]);
    uint8_t *cache = malloc(bytes[10]);
    for (int64_t i = 0; i < T * row; ++i) kv[i] = bench_uniform(s, i % row < width ? 2.0f : 4.0f);
    for (int64_t i = 0; i < r * width; ++i) ape[i] = bench_uniform(s, 1.0f);
    for (int64_t i = 0; i < blocks * B * row; ++i) state[i] = bench_uniform(s, i % row < width ? 2.0f : 5.0f);
    for (int64_t i = 0; i < N; ++i) gamma[i] = unit_gamma ? 0x3F80 : (uint16_t)(0x3F00 | (bench_rng_next(s) & 0xFF));
    for (int64_t i = 0; i < R * max_blocks; ++i) bt[i] = -1;
    memset(cache, V4_POISON, bytes[10]);
    int64_t *block_ids = bench_shuffled(s, 0, blocks), *page_ids = bench_shuffled(s, 1, pages - 1);
    int64_t nb = 0, np = 0;
    for (int64_t b = 0; b < R; ++b) {
        const int64_t q0 = b * L, q1 = q0 + L < T ? q0 + L : T, p0 = V4_FIRST_POS + 7 * b, last = p0 + q1 - q0 - 1;
        for (int64_t k = (p0 - W + 1) / B; k <= last / B; ++k) bt[b * max_blocks + k] = (int32_t)block_ids[nb++];
        for (int64_t t = q0; t < q1; ++t) {
            const int64_t p = p0 + t - q0, v = p / r; /* v: the compressed position of p's group */
            pos[t] = p, req[t] = (int32_t)b;
            sslot[t] = bt[b * max_blocks + p / B] * B + p % B;
            smap[t] = page_ids[np + v / P - p0 / r / P] * P + v % P;
            h->closing += (p + 1) % r == 0;
        }
        np += last / r / P - p0 / r / P + 1;
    }
    free(block_ids), free(page_ids);
    h->a = (dsv4_compress_v4_args_t){kv, ape, pos, sslot, req, bt, gamma, bench_rotary_table(end), smap, state, cache};
}
static void v4_free(v4_state_t *h) {
    void *p[V4_BUFS];
    v4_buffers(&h->a, p);
    for (int i = 0; i < V4_BUFS; ++i) free(p[i]);
}

/* The invariants of the N = 512 record at slot (gamma 1); marks its bytes in written. */
static int v4_record_ok(const v4_state_t *h, int64_t slot, uint8_t *written) {
    const int64_t P = h->d.page_tokens, ps = h->d.page_stride_bytes;
    const size_t data_at = (size_t)(slot / P * ps + slot % P * DSV4_KV_DATA_BYTES);
    const size_t scale_at = (size_t)(slot / P * ps + P * DSV4_KV_DATA_BYTES + slot % P * DSV4_KV_SCALE_BYTES);
    const uint8_t *data = h->a.cache + data_at, *sc = h->a.cache + scale_at;
    int ok = 1;
    double ms = 0;
    for (int i = 0; i < DSV4_KV_NOPE_DIM; ++i) {
        const double v = ldexp(dsv4_e4m3_to_f32(data[i]), sc[i / 64] - 127);
        ok &= (data[i] & 0x7F) != 0x7F;
        ms += v * v / V4_D;
    }
    for (int i = 0; i < DSV4_KV_ROPE_DIM; ++i) {
        const double v = dsv4_bf16_to_f32((uint16_t)(data[448 + 2 * i] | data[449 + 2 * i] << 8));
        ok &= isfinite(v);
        ms += v * v / V4_D;
    }
    for (int k = 0; k < 7; ++k) ok &= sc[k] >= 105 && sc[k] <= 247; /* the enc of a finite bf16 amax */
    ok &= sc[7] == 0 && fabs(ms - 1.0) <= 0.05;
    memset(written + data_at, 1, DSV4_KV_DATA_BYTES), memset(written + scale_at, 1, DSV4_KV_SCALE_BYTES);
    return ok;
}

/* The invariants of the N = 128 indexer state at slot (gamma 1); marks its bytes in written. */
static int v4_istate_ok(const v4_state_t *h, int64_t slot, uint8_t *written) {
    const int64_t P = h->d.page_tokens, ps = h->d.page_stride_bytes;
    const size_t codes_at = (size_t)(slot / P * ps + slot % P * V4_IDX);
    const size_t scale_at = (size_t)(slot / P * ps + P * V4_IDX + slot % P * 4);
    const uint8_t *codes = h->a.cache + codes_at, *sc = h->a.cache + scale_at;
    const uint32_t bits = sc[0] | (uint32_t)sc[1] << 8 | (uint32_t)sc[2] << 16 | (uint32_t)sc[3] << 24;
    const int e = (int)(bits >> 23) - 127;
    /* a unit-rms row has amax in [1, sqrt(128)]: amax / 448 rounds up to 2^-8 .. 2^-5 */
    int ok = (bits & 0x807FFFFFu) == 0 && e >= -8 && e <= -5;
    double ms = 0;
    for (int i = 0; i < V4_IDX; ++i) {
        const double v = ldexp(dsv4_e4m3_to_f32(codes[i]), e);
        ok &= (codes[i] & 0x7F) != 0x7F;
        ms += v * v / V4_IDX;
    }
    ok &= fabs(ms - 1.0) <= 0.05;
    memset(written + codes_at, 1, V4_IDX), memset(written + scale_at, 1, 4);
    return ok;
}

/* The invariants of reference runs on h with gamma 1 (state0: the state before them). */
static int v4_invariants(const v4_state_t *h, const float *state0) {
    const dsv4_compress_v4_desc_t *d = &h->d;
    const int64_t width = v4_width(d->ratio, d->head_dim), row = 2 * width, B = d->state_block_rows;
    int ok = h->closing > 0;
    float *want = malloc(h->bytes[9]); /* step 1 again: the initial state with the saved rows */
    memcpy(want, state0, h->bytes[9]);
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        const int64_t ss = h->a.state_slot[t];
        float *y = want + ss / B * d->state_stride_block + ss % B * row;
        const float *x = h->a.kv_score + t * row, *ape = h->a.ape + h->a.positions[t] % d->ratio * width;
        memcpy(y, x, (size_t)width * 4);
        for (int64_t i = 0; i < width; ++i) y[width + i] = x[width + i] + ape[i];
    }
    ok &= !memcmp(want, h->a.state, h->bytes[9]);
    free(want);
    uint8_t *written = calloc(h->bytes[10], 1);
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        if ((h->a.positions[t] + 1) % d->ratio) continue;
        const int64_t slot = h->a.slot_mapping[t];
        ok &= d->head_dim == V4_IDX ? v4_istate_ok(h, slot, written) : v4_record_ok(h, slot, written);
    }
    for (size_t i = 0; i < h->bytes[10]; ++i) ok &= written[i] || h->a.cache[i] == V4_POISON;
    free(written);
    return ok;
}

static int v4_cpu_case(bench_ctx_t *ctx, const char *op, const char *name, int64_t T, int64_t r, int64_t N, int64_t L) {
    uint64_t s = 0xC4 + (uint64_t)r;
    v4_state_t h;
    bench_timing_t tm;
    v4_problem(T, r, N, L, 1, &s, &h);
    float *state0 = malloc(h.bytes[9]);
    memcpy(state0, h.a.state, h.bytes[9]);
    /* several runs: each saves the same rows and writes the same records */
    const int ok = bench_time_cpu(cv4_cpu, &h, 3, &tm) == DSV4_STATUS_SUCCESS && v4_invariants(&h, state0);
    char ran[64];
    snprintf(ran, sizeof ran, "T=%lld r=%lld%s L=%lld", (long long)T, (long long)r, N == V4_IDX ? " N=128" : "",
             (long long)L);
    bench_report_cpu(ctx, op, name, ran, &tm, bench_verdict(1, ok));
    free(state0);
    v4_free(&h);
    return !ok;
}

/* got against the reference's buffer, naming the first byte that differs. */
static int v4_same(const char *name, const char *what, const void *got, const void *want, size_t n) {
    const uint8_t *g = got, *w = want;
    for (size_t i = 0; i < n; ++i)
        if (g[i] != w[i]) {
            printf("compress bench: %s: %s byte %zu is 0x%02x, the reference's 0x%02x\n", name, what, i, g[i], w[i]);
            return 0;
        }
    return 1;
}

int bench_run_compress_v4(bench_ctx_t *ctx, const char *op, const char *name) {
    long long T = 0, r = 0, N = V4_D;
    int at = 0, end = 0;
    if (sscanf(name, "T=%lld r=%lld%n", &T, &r, &at) != 2 || (r != 4 && r != 128) || T < 1) return 1;
    /* an optional " N=128": the indexer's compressor, on ratio-4 layers only */
    if (name[at] && (sscanf(name + at, " N=%lld%n", &N, &end) != 1 || name[at + end] || N != V4_IDX || r != 4))
        return 1;
    if (!ctx->have_gpu) return v4_cpu_case(ctx, op, name, T < V4_CPU_T ? T : V4_CPU_T, r, N, T >= 2048 ? 128 : 6);
    uint64_t s = 0xC4 + (uint64_t)r;
    v4_state_t h, dv;
    bench_timing_t tm;
    v4_problem(T, r, N, T >= 2048 ? 2048 : 6, 0, &s, &h);
    void *hp[V4_BUFS], *dp[V4_BUFS] = {NULL};
    v4_buffers(&h.a, hp);
    int up = 1;
    for (int i = 0; i < V4_BUFS && up; ++i)
        up = (dp[i] = bench_dev_alloc(h.bytes[i])) && !bench_upload(dp[i], hp[i], h.bytes[i]);
    int rc = 1;
    if (up) {
        dv = h;
        dv.a = v4_args(dp);
        int ok = 1;
        if (ctx->check) { /* the host state is still the uploaded one: the reference runs after the kernel */
            uint8_t *cache = malloc(h.bytes[10]);
            float *state = malloc(h.bytes[9]);
            ok = !bench_run_once(ctx, cv4_launch, &dv) && !bench_download(cache, dp[10], h.bytes[10]) &&
                 !bench_download(state, dp[9], h.bytes[9]);
            if (ok && dsv4_compress_v4_ref(&h.d, &h.a) != DSV4_STATUS_SUCCESS) {
                printf("compress bench: %s: the reference refused the case: %s\n", name, dsv4_last_error());
                ok = 0;
            }
            ok = ok && v4_same(name, "cache", cache, h.a.cache, h.bytes[10]) &&
                 v4_same(name, "state", state, h.a.state, h.bytes[9]);
            free(cache), free(state);
        }
        if (bench_time(ctx, cv4_launch, &dv, &tm) != DSV4_STATUS_SUCCESS) {
            printf("compress bench: %s: timing failed: %s\n", name, dsv4_last_error());
        } else {
            const int64_t width = v4_width(r, N), W = (r == 4 ? 2 : 1) * r;
            const double bytes = (double)T * (double)(2 * width * 4 * 2 + 28) +
                                 (double)h.closing * (double)(W * 2 * N * 4 + 256 + v4_out_bytes(N)) +
                                 (double)(r * width * 4 + N * 2) + (double)h.bytes[5];
            char cfg[200];
            snprintf(cfg, sizeof cfg,
                     "requests of %s rows from positions 1000 + 7b, B=%lld, P=%lld stride=%lld, random state, ape "
                     "and gamma; check: every cache byte and state float bit for bit",
                     T >= 2048 ? "2048" : "6", (long long)h.d.state_block_rows, (long long)h.d.page_tokens,
                     (long long)h.d.page_stride_bytes);
            bench_report(ctx, op, name, cfg, &tm, bytes, 0, T >= 8192 ? BENCH_CEIL_COPY : BENCH_CEIL_LAUNCH,
                         bench_verdict(ctx->check, ok));
            rc = !ok;
        }
    }
    for (int i = 0; i < V4_BUFS; ++i) bench_dev_free(dp[i]);
    v4_free(&h);
    return rc;
}
