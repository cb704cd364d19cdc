/*
 * Benchmark cases of the indices family.
 *
 * These operators are write-bound or launch-bound. Each GPU case reports, besides the usual
 * row, two yardsticks in its config string (and one extra stdout line):
 *   write_floor_us = (output bytes written, lens included) / measured copy bandwidth,
 *   ratio_to_floor = median / write_floor_us,
 *   launch_us      = the event-timed empty kernel, over_launch_us = median - launch_us.
 * The main shapes are timed three ways (indices_bench.h, IDXB_*): cold (L2 flushed before
 * each rep: every input byte from DRAM), "warm-inputs" (no flush: inputs and the previous
 * rep's output lines in L2) and "warm-in-cold-out" (inputs L2-resident as right after their
 * producer, outputs rotated over buffers past the L2 size, so they are not). The write
 * floor assumes hot inputs; the cold rows must also read them (docs/indices.md: floors
 * under each assumption).
 * "bytes" (GB/s, %ceil) counts everything the kernel moves: reads of top-k entries and
 * block-table pages as well as the writes.
 *
 * Inputs are model-shaped: the prefill combine over 4 requests of a chunk with prefixes
 * 0 / 3K / 20K / 100K tokens (max_model_len 128K, W = 128), the decode translation at one
 * token per request with contexts of 1K-64K tokens (ratio 4, 64-token blocks: P = 16).
 * With --check each case is compared with the CPU reference before it is timed. Without a
 * GPU each case runs its reference on a small input of the same shape and checks invariants
 * of the result.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "indices_bench.h"

/* ---- shared helpers ---------------------------------------------------------------------- */
int64_t idxb_range(uint64_t *s, int64_t lo, int64_t hi) {
    return lo + (int64_t)(bench_rng_next(s) % (uint64_t)(hi - lo + 1));
}

void *idxb_upload(const void *host, size_t bytes) {
    void *d = bench_dev_alloc(bytes);
    if (d && bytes && bench_upload(d, host, bytes)) {
        bench_dev_free(d);
        return NULL;
    }
    return d;
}

void idxb_free_all(const void *const host[], int n_host, const void *const dev[], int n_dev) {
    for (int i = 0; i < n_host; ++i) free((void *)host[i]);
    for (int i = 0; i < n_dev; ++i) bench_dev_free((void *)dev[i]);
}

int idxb_same(const char *what, const int32_t *got, const int32_t *want, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (got[i] != want[i]) {
            printf("  check failed: %s[%zu] = %d, reference %d\n", what, i, got[i], want[i]);
            return 0;
        }
    return 1;
}

void idxb_report(bench_ctx_t *ctx, const char *op, const char *name, const char *shape, const bench_timing_t *tm,
                 double bytes, double write_bytes, bench_ceiling_t ceiling, const char *check) {
    const double floor_us = write_bytes / (ctx->copy_gbps * 1e3);
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s write_floor_us=%.2f ratio_to_floor=%.2f launch_us=%.2f over_launch_us=%.2f", shape,
             floor_us, tm->median_us / floor_us, ctx->empty_us, tm->median_us - ctx->empty_us);
    bench_report(ctx, op, name, cfg, tm, bytes, 0, ceiling, check);
    printf("  %s: write floor %.2f us -> ratio %.2f; launch %.2f us -> +%.2f us\n", name, floor_us,
           tm->median_us / floor_us, ctx->empty_us, tm->median_us - ctx->empty_us);
}

int idxb_timing_mode(const char *n) {
    return strstr(n, "warm-in-cold-out") ? IDXB_WARM_IN : strstr(n, "warm-inputs") ? IDXB_WARM : IDXB_COLD;
}
const char *idxb_timing_name(int mode) {
    return mode == IDXB_WARM_IN ? "timing=warm-in-cold-out(inputs L2-resident, outputs rotated past L2)"
           : mode == IDXB_WARM  ? "timing=warm-inputs(inputs and last rep's outputs in L2)"
                                : "timing=cold-L2";
}
int idxb_rotations(const bench_ctx_t *ctx, double out_bytes) {
    const double l2 = ctx->dev.l2_bytes > 0 ? (double)ctx->dev.l2_bytes : 64e6;
    const int n = (int)(2.0 * l2 / out_bytes) + 1;
    return n < 2 ? 2 : n > 64 ? 64 : n;
}
/* The output pointer fields are typed (int32_t *): read and written as bytes (memcpy). */
static void *idxb_get(const char *rot, size_t size, int i, size_t off) {
    void *p;
    memcpy(&p, rot + size * i + off, sizeof p);
    return p;
}
void idxb_rot_free(void *rot, size_t size, int nrot, const size_t off[2]) {
    for (int i = 1; rot && i < nrot; ++i)
        for (int k = 0; k < 2; ++k) bench_dev_free(idxb_get(rot, size, i, off[k]));
    free(rot);
}
void *idxb_rot_alloc(const void *state, size_t size, int nrot, const size_t off[2], const size_t bytes[2],
                     void **states) {
    char *rot = calloc((size_t)nrot, size);
    if (!rot) return NULL;
    int ok = 1;
    for (int i = 0; i < nrot; ++i) {
        memcpy(rot + size * i, state, size);
        states[i] = rot + size * i;
        for (int k = 0; i > 0 && k < 2; ++k) {
            void *p = ok ? bench_dev_alloc(bytes[k]) : NULL;
            memcpy(rot + size * i + off[k], &p, sizeof p);
            ok = ok && p;
        }
    }
    if (!ok) {
        idxb_rot_free(rot, size, nrot, off);
        return NULL;
    }
    return rot;
}

/* ---- combine ----------------------------------------------------------------------------- */
typedef struct {
    dsv4_combine_topk_swa_desc_t d;
    dsv4_combine_topk_swa_args_t h, dev; /* host inputs (outputs: NULL) and device buffers */
    double read_bytes;
} cmb_state_t;

static void cmb_make(cmb_state_t *s, int64_t T, int64_t topk, int64_t ratio) {
    const int64_t *prefix = mc_chunk_prefixes;
    const int64_t R = MC_CHUNK_REQS, W = MC_WINDOW, max_model_len = MC_MAX_MODEL_LEN;
    uint64_t seed = 0x1D1CE5u + (uint64_t)(T * 31 + topk * 7 + ratio);
    memset(s, 0, sizeof *s);
    dsv4_combine_topk_swa_desc_t d = {
        T, R, topk, topk, topk, W, ratio, 0, 0, dsv4_combine_topk_swa_cols(topk, W), DSV4_COMBINE_V4_1};
    d.swa_row0 = ratio ? (max_model_len + ratio - 1) / ratio : 0;
    d.slab_rows = d.swa_row0 + W + T;
    s->d = d;
    int32_t *qsl = malloc((size_t)(R + 1) * 4), *seq = malloc((size_t)R * 4), *gat = malloc((size_t)R * 4);
    int32_t *topk_h = malloc((size_t)(T * topk + 1) * 4);
    for (int64_t b = 0; b <= R; ++b) qsl[b] = (int32_t)(b * T / R);
    for (int64_t b = 0; b < R; ++b) {
        const int64_t q = qsl[b + 1] - qsl[b];
        seq[b] = (int32_t)(prefix[b] + q);
        gat[b] = (int32_t)(q + (prefix[b] < W - 1 ? prefix[b] : W - 1));
        for (int64_t t = qsl[b]; t < qsl[b + 1]; ++t) {
            const int64_t pos = prefix[b] + (t - qsl[b]), n = ratio ? (pos + 1) / ratio : 0;
            const int64_t len = n < topk ? n : topk;
            for (int64_t j = 0; j < topk; ++j)
                topk_h[t * topk + j] = j < len ? (int32_t)(n <= topk ? j : idxb_range(&seed, 0, n - 1)) : -1;
            /* Bytes the kernel reads: the 4-column chunks below topk_len and, up to T = 4096
             * (DSV4_CMB_SPEC_MAX_TOKENS), the first min(topk, 512) columns of a warp's first
             * row (every row at these sizes: the resident grid has a warp per row). */
            const int64_t pre = T > 4096 ? 0 : topk < 512 ? topk : 512, need = (len + 3) / 4 * 4;
            const int64_t rd = ratio ? (need > pre ? need : pre) : 0;
            s->read_bytes += 4.0 * (double)rd;
        }
    }
    dsv4_combine_topk_swa_args_t h = {topk_h, qsl, seq, gat, NULL, NULL};
    s->h = h;
}

static void cmb_free(cmb_state_t *s) {
    const void *host[] = {s->h.topk_indices, s->h.query_start_loc, s->h.seq_lens, s->h.gather_lens};
    const void *dev[] = {s->dev.topk_indices, s->dev.query_start_loc, s->dev.seq_lens,
                         s->dev.gather_lens,  s->dev.combined,        s->dev.combined_lens};
    idxb_free_all(host, 4, dev, 6);
}

/* Invariants of a reference result for the no-GPU path: every row ends its list with the
 * token's own workspace row, the window part is consecutive, region A names rows of the
 * token's own slab (or -1), and everything past lens is -1. */
static int cmb_invariants(const cmb_state_t *s, const int32_t *out, const int32_t *lens) {
    const dsv4_combine_topk_swa_desc_t *d = &s->d;
    const int64_t C = dsv4_combine_topk_swa_cols(d->topk, d->window);
    for (int64_t b = 0; b < d->num_reqs; ++b) {
        const int32_t *qsl = s->h.query_start_loc;
        const int64_t L = s->h.seq_lens[b], gs = L - s->h.gather_lens[b], q = qsl[b + 1] - qsl[b];
        for (int64_t t = qsl[b]; t < qsl[b + 1]; ++t) {
            const int64_t pos = L - q + (t - qsl[b]), swa = pos + 1 < d->window ? pos + 1 : d->window;
            const int32_t *row = out + t * C;
            const int64_t n = lens[t], self = d->slab_rows * b + d->swa_row0 + (pos - gs);
            if (n < swa || n > C || row[n - 1] != self) return 0;
            for (int64_t j = n - swa; j < n; ++j)
                if (row[j] != self - (n - 1 - j)) return 0;
            for (int64_t j = 0; j < n - swa; ++j)
                if (row[j] != -1 && (row[j] < d->slab_rows * b || row[j] >= d->slab_rows * b + d->swa_row0)) return 0;
            for (int64_t j = n; j < C; ++j)
                if (row[j] != -1) return 0;
        }
    }
    return 1;
}

static dsv4_status_t cmb_launch(bench_ctx_t *ctx, void *state) {
    cmb_state_t *s = state;
    return dsv4_combine_topk_swa(&s->d, &s->dev, NULL, 0, DSV4_STREAM(ctx->stream));
}

static dsv4_status_t cmb_cpu_fn(void *state) {
    cmb_state_t *s = state;
    return dsv4_combine_topk_swa_ref(&s->d, &s->h);
}

static int run_combine(bench_ctx_t *ctx, const char *op, const char *name, int64_t T, int64_t topk, int64_t ratio,
                       int warm) {
    cmb_state_t s;
    const int gpu = ctx->have_gpu;
    cmb_make(&s, gpu ? T : 256, topk, ratio);
    const int64_t Tn = s.d.num_tokens, R = s.d.num_reqs, C = dsv4_combine_topk_swa_cols(topk, s.d.window);
    int32_t *ref = malloc((size_t)(Tn * C) * 4), *ref_l = malloc((size_t)Tn * 4);
    s.h.combined = ref;
    s.h.combined_lens = ref_l;
    int ok = dsv4_combine_topk_swa_ref(&s.d, &s.h) == DSV4_STATUS_SUCCESS;
    bench_timing_t tm;
    if (!gpu) {
        ok = ok && cmb_invariants(&s, ref, ref_l);
        ok = ok && bench_time_cpu(cmb_cpu_fn, &s, 5, &tm) == DSV4_STATUS_SUCCESS;
        char ran[64];
        snprintf(ran, sizeof ran, "T=%lld topk=%lld W=%lld R=%lld", (long long)Tn, (long long)topk,
                 (long long)s.d.window, (long long)s.d.num_reqs);
        bench_report_cpu(ctx, op, name, ran, &tm, ok ? "pass" : "fail");
    } else {
        dsv4_combine_topk_swa_args_t dev = {idxb_upload(s.h.topk_indices, (size_t)(Tn * topk) * 4),
                                            idxb_upload(s.h.query_start_loc, (size_t)(R + 1) * 4),
                                            idxb_upload(s.h.seq_lens, (size_t)R * 4),
                                            idxb_upload(s.h.gather_lens, (size_t)R * 4),
                                            bench_dev_alloc((size_t)(Tn * C) * 4),
                                            bench_dev_alloc((size_t)Tn * 4)};
        s.dev = dev;
        const char *check = "skipped";
        if (ctx->check) {
            int32_t *got = malloc((size_t)(Tn * C) * 4), *got_l = malloc((size_t)Tn * 4);
            ok = ok && !bench_run_once(ctx, cmb_launch, &s) &&
                 !bench_download(got, dev.combined, (size_t)(Tn * C) * 4) &&
                 !bench_download(got_l, dev.combined_lens, (size_t)Tn * 4) &&
                 idxb_same("combined", got, ref, (size_t)(Tn * C)) && idxb_same("lens", got_l, ref_l, (size_t)Tn);
            check = ok ? "pass" : "fail";
            free(got);
            free(got_l);
        }
        /* IDXB_WARM_IN: copies of the case with their own outputs (inputs shared). */
        const int nrot = warm == IDXB_WARM_IN ? idxb_rotations(ctx, 4.0 * (double)(Tn * C + Tn)) : 1;
        const size_t off[2] = {offsetof(cmb_state_t, dev.combined), offsetof(cmb_state_t, dev.combined_lens)};
        const size_t outb[2] = {(size_t)(Tn * C) * 4, (size_t)Tn * 4};
        void *states[64];
        void *rot = idxb_rot_alloc(&s, sizeof s, nrot, off, outb, states);
        const int alloc_ok = rot != NULL;
        const dsv4_status_t st = !alloc_ok              ? DSV4_STATUS_CUDA_ERROR
                                 : warm == IDXB_WARM_IN ? bench_time_rotated(ctx, cmb_launch, states, nrot, 1, &tm)
                                 : warm == IDXB_WARM    ? bench_time_warm(ctx, cmb_launch, &s, &tm)
                                                        : bench_time(ctx, cmb_launch, &s, &tm);
        idxb_rot_free(rot, sizeof s, nrot, off);
        if (st != DSV4_STATUS_SUCCESS) {
            printf("%s %s: %s\n", op, name, dsv4_last_error());
            ok = 0;
        } else {
            char shape[200];
            snprintf(shape, sizeof shape,
                     "r=%lld topk=%lld W=%lld C=%lld R=%lld prefixes=0/3K/20K/100K %s rotations=%d", (long long)ratio,
                     (long long)topk, (long long)s.d.window, (long long)C, (long long)R, idxb_timing_name(warm), nrot);
            const double writes = 4.0 * (double)(Tn * C + Tn);
            idxb_report(ctx, op, name, shape, &tm, writes + s.read_bytes, writes,
                        T <= 2048 ? BENCH_CEIL_LAUNCH : BENCH_CEIL_COPY, check);
        }
    }
    free(ref);
    free(ref_l);
    s.h.combined = NULL;
    s.h.combined_lens = NULL;
    cmb_free(&s);
    return !ok;
}

/* A case's parameters are read from its name, so the table below is the one place they
 * are written: "T=<tokens> topk=<TOP_K> W=128 R=4" (ratio 4; topk=0: ratio 0, SWA-only),
 * then "warm-inputs" or "warm-in-cold-out" for the timing mode (idxb_timing_mode). They
 * must be a model shape of model_cases.h: a chunk length, a model's top-k, and the window
 * and request count the inputs are built for (cmb_make). */
static int combine_case(bench_ctx_t *c, const char *op, const char *n) {
    long long T = 0, topk = 0, W = 0, R = 0;
    if (sscanf(n, "T=%lld topk=%lld W=%lld R=%lld", &T, &topk, &W, &R) < 4 || W != MC_WINDOW || R != MC_CHUNK_REQS ||
        !mc_listed(T, mc_chunk_T, MC_COUNT(mc_chunk_T)) || (topk && !mc_listed(topk, mc_topks, MC_COUNT(mc_topks)))) {
        printf(
            "%s %s: the case name must read \"T=<tokens> topk=<TOP_K> W=%d R=%d ...\" with model values "
            "(model_cases.h)\n",
            op, n, MC_WINDOW, MC_CHUNK_REQS);
        return 1;
    }
    return run_combine(c, op, n, T, topk, topk ? MC_RATIO : 0, idxb_timing_mode(n));
}

/* The main shapes have three rows (idxb_timing_mode): cold-L2, "warm-inputs" (inputs and
 * the last rep's outputs in L2) and "warm-in-cold-out" (inputs in L2, outputs not). */
const bench_case_t bench_indices_cases[] = {
    {"combine_topk_swa", "T=8192 topk=512 W=128 R=4", combine_case},
    {"combine_topk_swa", "T=8192 topk=512 W=128 R=4 warm-inputs", combine_case},
    {"combine_topk_swa", "T=8192 topk=512 W=128 R=4 warm-in-cold-out", combine_case},
    {"combine_topk_swa", "T=8192 topk=1024 W=128 R=4", combine_case},
    {"combine_topk_swa", "T=8192 topk=1024 W=128 R=4 warm-inputs", combine_case},
    {"combine_topk_swa", "T=8192 topk=1024 W=128 R=4 warm-in-cold-out", combine_case},
    {"combine_topk_swa", "T=1536 topk=512 W=128 R=4", combine_case},
    {"combine_topk_swa", "T=1536 topk=512 W=128 R=4 warm-inputs", combine_case},
    {"combine_topk_swa", "T=1536 topk=512 W=128 R=4 warm-in-cold-out", combine_case},
    {"combine_topk_swa", "T=8192 topk=0 W=128 R=4", combine_case},
    {"topk_translate", "T=8192 K=512 decode", idxb_translate_case},
    {"topk_translate", "T=8192 K=512 decode warm-inputs", idxb_translate_case},
    {"topk_translate", "T=8192 K=512 decode warm-in-cold-out", idxb_translate_case},
    {"topk_translate", "T=8192 K=2048 decode", idxb_translate_case},
    {"topk_translate", "T=8192 K=2048 decode warm-inputs", idxb_translate_case},
    {"topk_translate", "T=8192 K=2048 decode warm-in-cold-out", idxb_translate_case},
    {"topk_translate_packed", "T=8192 K=512 decode", idxb_translate_case},
    {"decode_swa_indices", "T=2048 W=128 P=64", idxb_decode_swa_case},
};
const int bench_indices_count = (int)(sizeof bench_indices_cases / sizeof bench_indices_cases[0]);
