/*
 * Benchmark cases of the indices family, decode side: the top-k translation (dense and
 * packed) and the decode SWA lists. Decode-shaped inputs (model_cases.h): one token per
 * request, contexts of 1K-64K tokens, max_model_len 128K; compressed cache at ratio 4 with
 * 64-token blocks (P = 16, 2048 pages per table row); SWA cache with 64-slot pages.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "indices_bench.h"

enum {
    TT_P = MC_BLOCK_TOKENS / MC_RATIO,
    TT_WIDTH = MC_MAX_MODEL_LEN / MC_RATIO / TT_P,
    DSW_P = MC_V4_PAGE_TOKENS,
    DSW_WIDTH = MC_MAX_MODEL_LEN / DSW_P,
    DSW_W = MC_WINDOW
};

typedef struct {
    dsv4_topk_translate_desc_t d;
    int32_t *topk, *t2r, *table;
    uint8_t *valid;
    dsv4_topk_translate_args_t dev;         /* dense run                        */
    dsv4_topk_translate_packed_args_t pdev; /* packed run (shares the inputs)   */
    void *ws;
    size_t ws_bytes;
    double table_bytes; /* block-table bytes a row's lookups span, summed        */
    int64_t valid_total;
} tt_state_t;

static void tt_make(tt_state_t *s, int64_t T, int64_t K) {
    uint64_t seed = 0x7A3B1Eu + (uint64_t)(T * 13 + K);
    memset(s, 0, sizeof *s);
    dsv4_topk_translate_desc_t d = {T, K, T, TT_WIDTH, TT_P, K, TT_WIDTH, K};
    s->d = d;
    s->topk = malloc((size_t)(T * K) * 4);
    s->t2r = malloc((size_t)T * 4);
    s->valid = malloc((size_t)T);
    s->table = malloc((size_t)(T * TT_WIDTH) * 4);
    for (int64_t i = 0; i < T * TT_WIDTH; ++i) s->table[i] = (int32_t)idxb_range(&seed, 0, (1 << 20) - 1);
    for (int64_t t = 0; t < T; ++t) {
        const int64_t n = idxb_range(&seed, MC_DECODE_CTX_MIN, MC_DECODE_CTX_MAX) / MC_RATIO, len = n < K ? n : K;
        int64_t lo = INT64_MAX, hi = -1;
        s->t2r[t] = (int32_t)t;
        s->valid[t] = 1;
        for (int64_t j = 0; j < K; ++j) {
            const int64_t v = j < len ? (n <= K ? j : idxb_range(&seed, 0, n - 1)) : -1;
            s->topk[t * K + j] = (int32_t)v;
            if (v >= 0) {
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
        }
        if (hi >= 0) s->table_bytes += 4.0 * (double)(hi / TT_P - lo / TT_P + 1);
        s->valid_total += len;
    }
}

static void tt_free(tt_state_t *s) {
    const void *host[] = {s->topk, s->t2r, s->valid, s->table};
    const void *dev[] = {s->dev.topk_indices,   s->dev.token_to_req,   s->dev.block_table,
                         s->dev.is_valid_token, s->dev.global_indices, s->dev.lens,
                         s->pdev.indptr,        s->pdev.packed,        s->ws};
    idxb_free_all(host, 4, dev, 9);
}

static int tt_upload(tt_state_t *s, int packed) {
    const int64_t T = s->d.num_tokens, K = s->d.topk;
    s->dev.topk_indices = idxb_upload(s->topk, (size_t)(T * K) * 4);
    s->dev.token_to_req = idxb_upload(s->t2r, (size_t)T * 4);
    s->dev.block_table = idxb_upload(s->table, (size_t)(T * TT_WIDTH) * 4);
    s->dev.is_valid_token = idxb_upload(s->valid, (size_t)T);
    s->dev.lens = bench_dev_alloc((size_t)T * 4);
    if (!packed) {
        s->dev.global_indices = bench_dev_alloc((size_t)(T * K) * 4);
    } else {
        dsv4_topk_translate_packed_workspace_size(&s->d, &s->ws_bytes);
        s->ws = bench_dev_alloc(s->ws_bytes);
        dsv4_topk_translate_packed_args_t p = {s->dev.topk_indices,
                                               s->dev.token_to_req,
                                               s->dev.block_table,
                                               s->dev.is_valid_token,
                                               s->dev.lens,
                                               bench_dev_alloc((size_t)(T + 1) * 4),
                                               bench_dev_alloc((size_t)(T * K) * 4)};
        s->pdev = p;
    }
    return s->dev.topk_indices && s->dev.block_table && s->dev.lens && (packed ? s->pdev.packed != NULL : 1);
}

static dsv4_status_t tt_launch(bench_ctx_t *ctx, void *state) {
    tt_state_t *s = state;
    return dsv4_topk_translate(&s->d, &s->dev, NULL, 0, DSV4_STREAM(ctx->stream));
}
static dsv4_status_t tt_launch_packed(bench_ctx_t *ctx, void *state) {
    tt_state_t *s = state;
    return dsv4_topk_translate_packed(&s->d, &s->pdev, s->ws, s->ws_bytes, DSV4_STREAM(ctx->stream));
}

/* Every translated entry must map back through the table: slot / P is the request's page
 * of v / P and slot % P = v % P; -1 exactly where v < 0; lens counts the entries. */
static int tt_roundtrip(const tt_state_t *s, int64_t t, int64_t j, int32_t g) {
    const int32_t v = s->topk[t * s->d.topk + j];
    if (v < 0) return g == -1;
    return g >= 0 && g % TT_P == v % TT_P && g / TT_P == s->table[t * TT_WIDTH + v / TT_P];
}

static dsv4_status_t tt_cpu_dense(void *state) {
    tt_state_t *s = state;
    dsv4_topk_translate_args_t a = {s->topk, s->t2r, s->table, s->valid, s->dev.global_indices, s->dev.lens};
    return dsv4_topk_translate_ref(&s->d, &a);
}
static dsv4_status_t tt_cpu_packed(void *state) {
    tt_state_t *s = state;
    dsv4_topk_translate_packed_args_t a = {s->topk,      s->t2r,         s->table,      s->valid,
                                           s->pdev.lens, s->pdev.indptr, s->pdev.packed};
    return dsv4_topk_translate_packed_ref(&s->d, &a);
}

/* No GPU: the reference on 256 tokens, checked by round trip. */
static int tt_run_cpu(bench_ctx_t *ctx, const char *op, const char *name, int64_t K, int packed) {
    tt_state_t s;
    tt_make(&s, 256, K);
    const int64_t T = 256;
    int32_t *out = malloc((size_t)(T * K) * 4), *lens = malloc((size_t)T * 4), *ip = malloc((size_t)(T + 1) * 4);
    s.dev.global_indices = out; /* host buffers in the device slots: the reference's outputs */
    s.dev.lens = lens;
    s.pdev.lens = lens;
    s.pdev.indptr = ip;
    s.pdev.packed = out;
    bench_timing_t tm;
    int ok = bench_time_cpu(packed ? tt_cpu_packed : tt_cpu_dense, &s, 5, &tm) == DSV4_STATUS_SUCCESS;
    for (int64_t t = 0; t < T && ok; ++t) {
        const int64_t base = packed ? ip[t] : t * K, n = packed ? lens[t] : K;
        int64_t count = 0;
        for (int64_t j = 0; j < n && ok; ++j) {
            ok = tt_roundtrip(&s, t, j, out[base + j]);
            count += out[base + j] >= 0;
        }
        ok = ok && count == lens[t] && (!packed || ip[t + 1] == ip[t] + lens[t]);
    }
    char ran[64];
    snprintf(ran, sizeof ran, "T=%lld K=%lld P=%d decode", (long long)T, (long long)K, TT_P);
    bench_report_cpu(ctx, op, name, ran, &tm, ok ? "pass" : "fail");
    free(out);
    free(lens);
    free(ip);
    memset(&s.dev, 0, sizeof s.dev);
    memset(&s.pdev, 0, sizeof s.pdev);
    tt_free(&s);
    return !ok;
}

static int tt_run(bench_ctx_t *ctx, const char *op, const char *name, int64_t T, int64_t K, int packed, int warm) {
    if (!ctx->have_gpu) return tt_run_cpu(ctx, op, name, K, packed);
    tt_state_t s;
    tt_make(&s, T, K);
    int ok = tt_upload(&s, packed);
    const char *check = "skipped";
    if (ok && ctx->check) {
        int32_t *want = malloc((size_t)(T * K) * 4), *got = malloc((size_t)(T * K) * 4);
        int32_t *wl = malloc((size_t)T * 4), *gl = malloc((size_t)T * 4);
        int32_t *wi = malloc((size_t)(T + 1) * 4), *gi = malloc((size_t)(T + 1) * 4);
        if (!packed) {
            dsv4_topk_translate_args_t a = {s.topk, s.t2r, s.table, s.valid, want, wl};
            ok = dsv4_topk_translate_ref(&s.d, &a) == DSV4_STATUS_SUCCESS && !bench_run_once(ctx, tt_launch, &s) &&
                 !bench_download(got, s.dev.global_indices, (size_t)(T * K) * 4) &&
                 !bench_download(gl, s.dev.lens, (size_t)T * 4) && idxb_same("global", got, want, (size_t)(T * K)) &&
                 idxb_same("lens", gl, wl, (size_t)T);
        } else {
            dsv4_topk_translate_packed_args_t a = {s.topk, s.t2r, s.table, s.valid, wl, wi, want};
            ok = dsv4_topk_translate_packed_ref(&s.d, &a) == DSV4_STATUS_SUCCESS &&
                 !bench_run_once(ctx, tt_launch_packed, &s) &&
                 !bench_download(got, s.pdev.packed, (size_t)s.valid_total * 4) &&
                 !bench_download(gl, s.pdev.lens, (size_t)T * 4) &&
                 !bench_download(gi, s.pdev.indptr, (size_t)(T + 1) * 4) &&
                 idxb_same("packed", got, want, (size_t)s.valid_total) && idxb_same("lens", gl, wl, (size_t)T) &&
                 idxb_same("indptr", gi, wi, (size_t)T + 1);
        }
        check = ok ? "pass" : "fail";
        free(want);
        free(got);
        free(wl);
        free(gl);
        free(wi);
        free(gi);
    }
    /* IDXB_WARM_IN (dense only): copies of the case with their own outputs, inputs shared. */
    const int nrot = warm == IDXB_WARM_IN && !packed ? idxb_rotations(ctx, 4.0 * (double)(T * K + T)) : 1;
    const size_t off[2] = {offsetof(tt_state_t, dev.global_indices), offsetof(tt_state_t, dev.lens)};
    const size_t outb[2] = {(size_t)(T * K) * 4, (size_t)T * 4};
    void *states[64];
    void *rot = idxb_rot_alloc(&s, sizeof s, nrot, off, outb, states);
    const int alloc_ok = rot != NULL;
    bench_launch_fn fn = packed ? tt_launch_packed : tt_launch;
    bench_timing_t tm;
    const dsv4_status_t st = !ok || !alloc_ok    ? DSV4_STATUS_CUDA_ERROR
                             : nrot > 1          ? bench_time_rotated(ctx, fn, states, nrot, 1, &tm)
                             : warm == IDXB_COLD ? bench_time(ctx, fn, &s, &tm)
                                                 : bench_time_warm(ctx, fn, &s, &tm);
    idxb_rot_free(rot, sizeof s, nrot, off);
    if (st == DSV4_STATUS_SUCCESS) {
        char shape[240];
        snprintf(shape, sizeof shape,
                 "K=%lld P=%d block_table_width=%d ctx=1K-64K r=%d one token per request %s rotations=%d", (long long)K,
                 TT_P, TT_WIDTH, MC_RATIO, idxb_timing_name(packed ? IDXB_COLD : warm), nrot);
        /* Dense: K int32 per row out; packed: the valid entries, lens and indptr. Reads:
         * the top-k rows (twice for packed: count, then pack) and the table pages spanned. */
        const double out_b = packed ? 4.0 * (double)(s.valid_total + 2 * T + 1) : 4.0 * (double)(T * K + T);
        const double in_b = 4.0 * (double)(T * K) * (packed ? 2 : 1) + s.table_bytes + 5.0 * (double)T;
        idxb_report(ctx, op, name, shape, &tm, out_b + in_b, out_b, BENCH_CEIL_COPY, check);
    } else {
        if (ok) printf("%s %s: %s\n", op, name, dsv4_last_error());
        ok = 0;
    }
    tt_free(&s);
    return !ok;
}

int idxb_translate_case(bench_ctx_t *c, const char *op, const char *n) {
    long long T = 0, K = 0;
    if (sscanf(n, "T=%lld K=%lld", &T, &K) < 2) return 1;
    return tt_run(c, op, n, T, K, !strcmp(op, "topk_translate_packed"), idxb_timing_mode(n));
}

/* ---- decode SWA lists ---------------------------------------------------------------------- */
typedef struct {
    dsv4_decode_swa_indices_desc_t d;
    dsv4_decode_swa_indices_args_t h, dev;
} dsw_state_t;

static void dsw_make(dsw_state_t *s, int64_t T) {
    uint64_t seed = 0x5A1DEu + (uint64_t)T;
    memset(s, 0, sizeof *s);
    dsv4_decode_swa_indices_desc_t d = {T, T, DSW_W, DSW_P, DSW_WIDTH, DSW_WIDTH, DSW_W};
    s->d = d;
    int32_t *t2r = malloc((size_t)T * 4), *pos = malloc((size_t)T * 4), *tab = malloc((size_t)(T * DSW_WIDTH) * 4);
    uint8_t *valid = malloc((size_t)T);
    for (int64_t i = 0; i < T * DSW_WIDTH; ++i) tab[i] = (int32_t)idxb_range(&seed, 0, (1 << 20) - 1);
    for (int64_t t = 0; t < T; ++t) {
        t2r[t] = (int32_t)t;
        pos[t] = (int32_t)(idxb_range(&seed, 0, 9) == 0 ? idxb_range(&seed, 0, DSW_W - 1)
                                                        : idxb_range(&seed, DSW_W, MC_MAX_MODEL_LEN - 1));
        valid[t] = 1;
    }
    dsv4_decode_swa_indices_args_t h = {t2r, pos, valid, tab, malloc((size_t)(T * DSW_W) * 4), malloc((size_t)T * 4)};
    s->h = h;
}

static void dsw_free(dsw_state_t *s) {
    const void *host[] = {s->h.token_to_req, s->h.positions,   s->h.is_valid_token,
                          s->h.block_table,  s->h.swa_indices, s->h.swa_lens};
    const void *dev[] = {s->dev.token_to_req, s->dev.positions,   s->dev.is_valid_token,
                         s->dev.block_table,  s->dev.swa_indices, s->dev.swa_lens};
    idxb_free_all(host, 6, dev, 6);
}

static dsv4_status_t dsw_launch(bench_ctx_t *ctx, void *state) {
    dsw_state_t *s = state;
    return dsv4_decode_swa_indices(&s->d, &s->dev, NULL, 0, DSV4_STREAM(ctx->stream));
}
static dsv4_status_t dsw_cpu(void *state) {
    dsw_state_t *s = state;
    return dsv4_decode_swa_indices_ref(&s->d, &s->h);
}

/* The window's entries must map back to consecutive positions ending at pos. */
static int dsw_invariants(const dsw_state_t *s) {
    const int64_t W = DSW_W;
    for (int64_t t = 0; t < s->d.num_tokens; ++t) {
        const int64_t pos = s->h.positions[t], len = pos + 1 < W ? pos + 1 : W;
        const int32_t *row = s->h.swa_indices + t * W;
        if (s->h.swa_lens[t] != len) return 0;
        for (int64_t j = 0; j < W; ++j) {
            const int64_t q = pos - len + 1 + j;
            if (j >= len
                    ? row[j] != -1
                    : (row[j] % DSW_P != q % DSW_P || row[j] / DSW_P != s->h.block_table[t * DSW_WIDTH + q / DSW_P]))
                return 0;
        }
    }
    return 1;
}

int idxb_decode_swa_case(bench_ctx_t *ctx, const char *op, const char *name) {
    long long T_gpu = 0, W = 0, P = 0;
    if (sscanf(name, "T=%lld W=%lld P=%lld", &T_gpu, &W, &P) < 3 || T_gpu < 1 || W != DSW_W || P != DSW_P) {
        printf("%s %s: the case name must read \"T=<tokens> W=%d P=%d\" (model_cases.h)\n", op, name, DSW_W, DSW_P);
        return 1;
    }
    const int64_t T = ctx->have_gpu ? T_gpu : 256;
    dsw_state_t s;
    dsw_make(&s, T);
    int ok = dsv4_decode_swa_indices_ref(&s.d, &s.h) == DSV4_STATUS_SUCCESS;
    bench_timing_t tm;
    if (!ctx->have_gpu) {
        ok = ok && dsw_invariants(&s);
        ok = ok && bench_time_cpu(dsw_cpu, &s, 5, &tm) == DSV4_STATUS_SUCCESS;
        char ran[64];
        snprintf(ran, sizeof ran, "T=%lld W=%d P=%d", (long long)T, DSW_W, DSW_P);
        bench_report_cpu(ctx, op, name, ran, &tm, ok ? "pass" : "fail");
        dsw_free(&s);
        return !ok;
    }
    dsv4_decode_swa_indices_args_t dev = {idxb_upload(s.h.token_to_req, (size_t)T * 4),
                                          idxb_upload(s.h.positions, (size_t)T * 4),
                                          idxb_upload(s.h.is_valid_token, (size_t)T),
                                          idxb_upload(s.h.block_table, (size_t)(T * DSW_WIDTH) * 4),
                                          bench_dev_alloc((size_t)(T * DSW_W) * 4),
                                          bench_dev_alloc((size_t)T * 4)};
    s.dev = dev;
    const char *check = "skipped";
    if (ctx->check) {
        int32_t *got = malloc((size_t)(T * DSW_W) * 4), *gl = malloc((size_t)T * 4);
        ok = ok && !bench_run_once(ctx, dsw_launch, &s) &&
             !bench_download(got, dev.swa_indices, (size_t)(T * DSW_W) * 4) &&
             !bench_download(gl, dev.swa_lens, (size_t)T * 4) &&
             idxb_same("swa_indices", got, s.h.swa_indices, (size_t)(T * DSW_W)) &&
             idxb_same("swa_lens", gl, s.h.swa_lens, (size_t)T);
        check = ok ? "pass" : "fail";
        free(got);
        free(gl);
    }
    if (bench_time(ctx, dsw_launch, &s, &tm) == DSV4_STATUS_SUCCESS) {
        const double writes = 4.0 * (double)(T * DSW_W + T);
        char shape[96];
        snprintf(shape, sizeof shape, "W=%d P=%d block_table_width=%d one token per request", DSW_W, DSW_P, DSW_WIDTH);
        idxb_report(ctx, op, name, shape, &tm, writes + 12.0 * (double)T + 4.0 * 3 * (double)T, writes,
                    BENCH_CEIL_LAUNCH, check);
    } else {
        printf("%s %s: %s\n", op, name, dsv4_last_error());
        ok = 0;
    }
    dsw_free(&s);
    return !ok;
}
