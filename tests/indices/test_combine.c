/*
 * Top-k + SWA combine on the GPU against the CPU reference: the whole [T, C] matrix
 * (including the -1 fill and any row padding) and the lens, bit-exact, in both modes.
 *
 * Requests get mixed prefixes (0, inside the window, a few windows, long), so tokens at
 * positions below W, partial top-k rows and full rows all occur. Optional perturbations:
 * batch-global qsl (offset first entry), rows no request covers, requests cut off by T,
 * gather_lens below the standard value, invalid region-A values (-1 inside the prefix,
 * values >= N, INT32_MIN/MAX), NULL top-k for SWA-only layers, padded strides and
 * misaligned pointers (element path).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idx_test.h"
#include "indices/index_check.h" /* dsv4_idx_grid_cap: the grid-stride test hook */

enum {
    CMB_QSL_OFFSET = 1, /* qsl[0] != 0: the op must rebase                       */
    CMB_EXTRA_ROWS = 2, /* T beyond qsl[R] - qsl[0]: uncovered rows              */
    CMB_FEWER_ROWS = 4, /* T below qsl[R] - qsl[0]: the last tokens not written  */
    CMB_SHORT_GATHER = 8,
    CMB_DIRTY = 16,     /* invalid region-A values                               */
    CMB_NULL_TOPK = 32, /* topk_indices = NULL when it is not read               */
    CMB_PAD = 64,       /* padded strides                                        */
    CMB_EMPTY_REQS = 128
};

typedef struct {
    dsv4_combine_topk_swa_desc_t d;
    int32_t *topk, *qsl, *seq, *gather;
    char name[300];
} cmb_case_t;

int cmb_gpu(th_ctx_t *t, const char *name, const dsv4_combine_topk_swa_desc_t *d, const dsv4_combine_topk_swa_args_t *h,
            size_t in_off, size_t out_off) {
    const int64_t T = d->num_tokens, R = d->num_reqs, C = dsv4_combine_topk_swa_cols(d->topk, d->window);
    const int64_t ts = d->topk_stride ? d->topk_stride : d->topk_cols, os = d->out_stride ? d->out_stride : C;
    const int has_topk = h->topk_indices != NULL;
    idx_dev_t topk = idx_dev_in(has_topk ? (const void *)h->topk_indices : (const void *)"",
                                has_topk ? (size_t)(T * ts) * 4 : 0, in_off, "topk_indices");
    idx_dev_t qsl = idx_dev_in(h->query_start_loc, (size_t)(R + 1) * 4, 0, "query_start_loc");
    idx_dev_t seq = idx_dev_in(h->seq_lens, (size_t)R * 4, 0, "seq_lens");
    idx_dev_t gat = idx_dev_in(h->gather_lens, (size_t)R * 4, 0, "gather_lens");
    idx_dev_t out = idx_dev_out((size_t)(T * os) * 4, out_off, "combined");
    idx_dev_t lens = idx_dev_out((size_t)T * 4, 0, "combined_lens");
    dsv4_combine_topk_swa_args_t a = {has_topk ? idx_dev_ptr(&topk) : NULL,
                                      idx_dev_ptr(&qsl),
                                      idx_dev_ptr(&seq),
                                      idx_dev_ptr(&gat),
                                      idx_dev_ptr(&out),
                                      idx_dev_ptr(&lens)};
    void *s = th_stream_create(t);
    const int ok = idx_sync_status(t, name, dsv4_combine_topk_swa(d, &a, NULL, 0, DSV4_STREAM(s)), s);
    idx_dev_get(t, &out, h->combined);
    idx_dev_get(t, &lens, h->combined_lens);
    idx_dev_t *const ins[] = {&topk, &qsl, &seq, &gat}, *const outs[] = {&out, &lens};
    idx_dev_finish(t, ins, 4, outs, 2);
    return ok;
}

static void cmb_case_free(cmb_case_t *c) {
    free(c->topk);
    free(c->qsl);
    free(c->seq);
    free(c->gather);
    memset(c, 0, sizeof *c);
}

static int64_t draw_prefix(th_rng_t *r, int64_t W, int64_t long_max) {
    switch (th_rng_range(r, 0, 3)) {
    case 0: return 0;
    case 1: return th_rng_range(r, 1, W - 1 > 1 ? W - 1 : 1); /* positions below the window */
    case 2: return th_rng_range(r, W, 4 * W);
    default: return th_rng_range(r, 4 * W, long_max);
    }
}

static int32_t dirty_value(th_rng_t *r, int64_t N) {
    switch (th_rng_range(r, 0, 6)) {
    case 0: return -1;
    case 1: return -7;
    case 2: return (int32_t)N;
    case 3: return (int32_t)th_rng_range(r, N, N + 100000 < INT32_MAX ? N + 100000 : INT32_MAX);
    case 4: return INT32_MAX;
    case 5: return INT32_MIN;
    default: return (int32_t)th_rng_range(r, 0, N > 0 ? N - 1 : 0);
    }
}

/* Requests of mixed prefix and query lengths summing to T_target, and their top-k rows. */
static void cmb_case_make(th_rng_t *r, cmb_case_t *c, int64_t R, int64_t T_target, int64_t ratio, int64_t TOP_K,
                          int64_t W, int64_t mode, int flags, int64_t long_prefix) {
    memset(c, 0, sizeof *c);
    c->qsl = malloc((size_t)(R + 1) * 4);
    c->seq = malloc((size_t)R * 4);
    c->gather = malloc((size_t)R * 4);
    int64_t *cuts = malloc((size_t)(R + 1) * sizeof *cuts), *prefix = malloc((size_t)R * sizeof *prefix);
    /* Query lengths: R-1 sorted cut points in [0, T_target] (empty requests happen). */
    cuts[0] = 0;
    cuts[R] = T_target;
    for (int64_t b = 1; b < R; ++b) cuts[b] = th_rng_range(r, 0, T_target);
    for (int64_t i = 1; i < R; ++i)
        for (int64_t j = i; j > 1 && cuts[j - 1] > cuts[j]; --j) {
            int64_t x = cuts[j];
            cuts[j] = cuts[j - 1];
            cuts[j - 1] = x;
        }
    if (flags & CMB_EMPTY_REQS)
        for (int64_t b = 1; b < R; ++b)
            if (th_rng_range(r, 0, 2) == 0) cuts[b] = cuts[b - 1];
    const int64_t q_base = (flags & CMB_QSL_OFFSET) ? th_rng_range(r, 1, 5000) : 0;
    int64_t max_seq = 1;
    for (int64_t b = 0; b < R; ++b) {
        const int64_t qlen = cuts[b + 1] - cuts[b];
        prefix[b] = draw_prefix(r, W, long_prefix);
        c->qsl[b] = (int32_t)(q_base + cuts[b]);
        c->seq[b] = (int32_t)(prefix[b] + qlen);
        int64_t g = qlen + (prefix[b] < W - 1 ? prefix[b] : W - 1);
        if ((flags & CMB_SHORT_GATHER) && th_rng_range(r, 0, 1)) g = th_rng_range(r, 0, g);
        c->gather[b] = (int32_t)g;
        if (c->seq[b] > max_seq) max_seq = c->seq[b];
    }
    c->qsl[R] = (int32_t)(q_base + T_target);
    int64_t T = T_target;
    if (flags & CMB_EXTRA_ROWS) T += th_rng_range(r, 1, 40);
    if (flags & CMB_FEWER_ROWS) T -= th_rng_range(r, 0, T < 40 ? T : 40);

    dsv4_combine_topk_swa_desc_t *d = &c->d;
    const int64_t max_model_len = max_seq + th_rng_range(r, 0, 1000);
    d->num_tokens = T;
    d->num_reqs = R;
    d->topk = TOP_K;
    d->topk_cols = TOP_K + ((flags & CMB_PAD) ? th_rng_range(r, 0, 5) : 0);
    d->topk_stride = d->topk_cols + ((flags & CMB_PAD) ? th_rng_range(r, 1, 3) : 0);
    d->window = W;
    d->ratio = ratio;
    d->swa_row0 = ratio ? (max_model_len + ratio - 1) / ratio : 0;
    d->slab_rows = d->swa_row0 + W + T_target + 64;
    d->out_stride = dsv4_combine_topk_swa_cols(TOP_K, W) + ((flags & CMB_PAD) ? 4 * th_rng_range(r, 1, 3) : 0);
    d->mode = mode;

    const int64_t ts = d->topk_stride ? d->topk_stride : d->topk_cols;
    c->topk = malloc((size_t)(T * ts + 1) * 4);
    /* Rows past the requests hold junk; request rows are written below (junk in padding). */
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = t < T_target ? d->topk_cols : 0; j < ts; ++j)
            c->topk[t * ts + j] = dirty_value(r, d->swa_row0);
    for (int64_t b = 0; b < R; ++b) {
        for (int64_t t = cuts[b]; t < cuts[b + 1] && t < T; ++t) {
            const int64_t pos = c->seq[b] - (cuts[b + 1] - cuts[b]) + (t - cuts[b]);
            const int64_t n = ratio ? (pos + 1) / ratio : 0, len = n < TOP_K ? n : TOP_K;
            int32_t *row = c->topk + t * ts;
            for (int64_t j = 0; j < d->topk_cols; ++j)
                row[j] = j < len ? (int32_t)(n <= TOP_K ? j : th_rng_range(r, 0, n - 1)) : -1;
            if ((flags & CMB_DIRTY) && th_rng_range(r, 0, 2) == 0 && d->topk_cols > 0)
                for (int k = 0; k < 4; ++k) row[th_rng_range(r, 0, d->topk_cols - 1)] = dirty_value(r, d->swa_row0);
        }
    }
    if ((flags & CMB_NULL_TOPK) && (TOP_K == 0 || ratio == 0)) {
        free(c->topk);
        c->topk = NULL;
    }
    snprintf(c->name, sizeof c->name,
             "%s R=%lld T=%lld(target %lld) r=%lld TOP_K=%lld K_w=%lld W=%lld M=%lld N=%lld qsl0=%d flags=0x%x",
             mode == DSV4_COMBINE_V4 ? "V4" : "V4.1", (long long)R, (long long)T, (long long)T_target, (long long)ratio,
             (long long)TOP_K, (long long)d->topk_cols, (long long)W, (long long)d->slab_rows, (long long)d->swa_row0,
             c->qsl[0], flags);
    free(cuts);
    free(prefix);
}

static void cmb_check_case(th_ctx_t *t, const cmb_case_t *c, size_t in_off, size_t out_off) {
    const dsv4_combine_topk_swa_desc_t *d = &c->d;
    const int64_t T = d->num_tokens, C = dsv4_combine_topk_swa_cols(d->topk, d->window);
    const int64_t os = d->out_stride ? d->out_stride : C;
    char name[400];
    snprintf(name, sizeof name, "%s in_off=%zu out_off=%zu seed=%llu", c->name, in_off, out_off,
             (unsigned long long)th_seed(t));
    int32_t *want = idx_poisoned_i32((size_t)(T * os)), *got = idx_poisoned_i32((size_t)(T * os));
    int32_t *want_l = idx_poisoned_i32((size_t)T), *got_l = idx_poisoned_i32((size_t)T);
    dsv4_combine_topk_swa_args_t ref = {c->topk, c->qsl, c->seq, c->gather, want, want_l};
    dsv4_combine_topk_swa_args_t gpu = {c->topk, c->qsl, c->seq, c->gather, got, got_l};
    TH_OK(t, dsv4_combine_topk_swa_ref(d, &ref));
    if (cmb_gpu(t, name, d, &gpu, in_off, out_off)) {
        idx_cmp_i32(t, name, "combined", got, want, (size_t)(T * os), os);
        idx_cmp_i32(t, name, "combined_lens", got_l, want_l, (size_t)T, 0);
    }
    free(want);
    free(got);
    free(want_l);
    free(got_l);
}

/* The (r, TOP_K) shapes vLLM warms its JIT kernel with, plus r in {0, 1, 2} at TOP_K 512,
 * at T = 1536 and 8192 over 4 requests with mixed prefixes; V4.1 always, V4 where r >= 1. */
void test_combine_gpu_warmup(th_ctx_t *t) {
    static const int64_t shapes[][2] = {{1, 0}, {4, 512}, {4, 1024}, {128, 8192}, {0, 512}, {1, 512}, {2, 512}};
    th_rng_t *r = th_rng(t);
    for (int i = 0; i < 7; ++i)
        for (int k = 0; k < MC_COUNT(mc_chunk_T); ++k)
            for (int64_t mode = 0; mode < 2 && !th_failed(t); ++mode) {
                if (mode == DSV4_COMBINE_V4 && shapes[i][0] == 0) continue;
                cmb_case_t c;
                cmb_case_make(r, &c, MC_CHUNK_REQS, mc_chunk_T[k], shapes[i][0], shapes[i][1], MC_WINDOW, mode, 0,
                              300000);
                cmb_check_case(t, &c, 0, 0);
                cmb_case_free(&c);
            }
}

/* Random shapes: ratios 0, 1, 2, 4, 128; TOP_K 0, 512, 1024, 2048, 8192; mostly W = 128
 * (and odd windows); 1-8 requests; every perturbation flag; both pointer paths. */
void test_combine_gpu_random(th_ctx_t *t) {
    static const int64_t ratios[] = {0, 1, 2, 4, 128}, topks[] = {0, 512, 1024, 2048, 8192};
    static const int64_t windows[] = {128, 128, 128, 4, 7, 100};
    th_rng_t *r = th_rng(t);
    for (int i = 0; i < 40 && !th_failed(t); ++i) {
        const int64_t ratio = ratios[th_rng_range(r, 0, 4)], TOP_K = topks[th_rng_range(r, 0, 4)];
        const int64_t W = windows[th_rng_range(r, 0, 5)];
        const int64_t mode = ratio > 0 && th_rng_range(r, 0, 2) == 0 ? DSV4_COMBINE_V4 : DSV4_COMBINE_V4_1;
        /* Keep T * C around 10M elements so the whole test stays a few seconds. */
        const int64_t C = dsv4_combine_topk_swa_cols(TOP_K, W), T_max = 10000000 / C < 8192 ? 10000000 / C : 8192;
        const int64_t T_target = th_rng_range(r, 1, T_max);
        const int flags = (int)th_rng_range(r, 0, 255);
        const size_t in_off = th_rng_range(r, 0, 3) == 0 ? 4 : 0, out_off = th_rng_range(r, 0, 3) == 0 ? 4 : 0;
        cmb_case_t c;
        cmb_case_make(r, &c, th_rng_range(r, 1, 8), T_target, ratio, TOP_K, W, mode, flags, 200000);
        cmb_check_case(t, &c, in_off, out_off);
        cmb_case_free(&c);
    }
}

/* Many requests: the fast lookup (R <= 31), the 32-ary search at R = 32, 40 (two rounds)
 * and 1500 (three rounds), with empty requests and a batch-global qsl. */
void test_combine_gpu_requests(th_ctx_t *t) {
    static const int64_t Rs[] = {31, 32, 40, 1500};
    th_rng_t *r = th_rng(t);
    for (int i = 0; i < 4 && !th_failed(t); ++i)
        for (int64_t mode = 0; mode < 2; ++mode) {
            cmb_case_t c;
            cmb_case_make(r, &c, Rs[i], 3000, 2, 512, 128, mode,
                          CMB_QSL_OFFSET | CMB_EMPTY_REQS | CMB_EXTRA_ROWS | CMB_DIRTY, 20000);
            cmb_check_case(t, &c, 0, 0);
            cmb_case_free(&c);
        }
}

/* The kernel walks rows grid-stride with the next unit's loads issued early; with the grid
 * capped at 1 and 3 CTAs every warp takes many rows (and so crosses requests, batches and
 * the uncovered rows): random shapes with every perturbation, both modes, both pointer
 * paths, and the 32-ary request search (R = 40). */
void test_combine_gpu_grid_stride(th_ctx_t *t) {
    static const int64_t ratios[] = {0, 1, 2, 4, 128}, topks[] = {0, 512, 1024, 2048, 8192};
    th_rng_t *r = th_rng(t);
    for (int cap = 1; cap <= 3 && !th_failed(t); cap += 2) {
        dsv4_idx_grid_cap = cap;
        for (int i = 0; i < 10 && !th_failed(t); ++i) {
            const int64_t ratio = ratios[th_rng_range(r, 0, 4)], TOP_K = topks[th_rng_range(r, 0, 4)];
            const int64_t W = th_rng_range(r, 0, 2) ? 128 : 7;
            const int64_t mode = ratio > 0 && th_rng_range(r, 0, 1) ? DSV4_COMBINE_V4 : DSV4_COMBINE_V4_1;
            const int64_t C = dsv4_combine_topk_swa_cols(TOP_K, W), T_max = 600000 / C < 600 ? 600000 / C : 600;
            const size_t in_off = th_rng_range(r, 0, 3) == 0 ? 4 : 0, out_off = th_rng_range(r, 0, 3) == 0 ? 4 : 0;
            cmb_case_t c;
            cmb_case_make(r, &c, i == 9 ? 40 : th_rng_range(r, 1, 8), th_rng_range(r, 1, T_max), ratio, TOP_K, W, mode,
                          (int)th_rng_range(r, 0, 255), 20000);
            cmb_check_case(t, &c, in_off, out_off);
            cmb_case_free(&c);
        }
    }
    dsv4_idx_grid_cap = 0;
}
