/*
 * CPU tests of the logits and top-k references: the known answers of the selection and
 * candidate rules, the selection against a full-sort model on rows built for ties, signed
 * zeros, NaN and infinities, the logits against the fp64 model within 1e-5 of the absolute
 * mass, and whole problems (mixed next_n, prefill runs, padding rows) against the models.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "indexer/indexer_common.h"
#include "test_indexer.h"

static idx_topk_plan_t plan_for(th_ctx_t *t, int64_t K, int64_t mode, int64_t C) {
    const dsv4_indexer_topk_desc_t d = {.num_rows = 1,
                                        .num_heads = 32,
                                        .topk = K,
                                        .ratio = 1,
                                        .num_reqs = 1,
                                        .block_table_width = 1,
                                        .page_tokens = 64,
                                        .page_stride_bytes = 64 * 132,
                                        .num_pages = 1,
                                        .max_keys = 64,
                                        .candidate_mode = mode,
                                        .candidate_count = C};
    idx_topk_plan_t p;
    memset(&p, 0, sizeof p);
    TH_OK(t, idx_topk_plan(&d, &p));
    return p;
}

static float arr_logit(const void *ctx, int64_t j) { return ((const float *)ctx)[j]; }

static void expect_row(th_ctx_t *t, const char *what, const int32_t *got, const int32_t *want, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        if (got[i] != want[i]) {
            TH_CHECK(t, 0, "%s: column %lld is %d, expected %d", what, (long long)i, got[i], want[i]);
            return;
        }
}

void test_idx_topk_known_answers(th_ctx_t *t) {
    const float nan = NAN, inf = INFINITY;
    int32_t out[8], cand[8];
    idx_topk_plan_t p = plan_for(t, 4, 0, 1);
    const float s1[] = {1, 3, 3, nan, -inf, 2, 3, 0};
    idx_ref_select_row(&p, 8, arr_logit, s1, out, NULL);
    expect_row(t, "S1", out, (const int32_t[]){1, 2, 3, 6}, 4);
    p = plan_for(t, 2, 0, 1);
    const float s2[] = {0.0f, -0.0f, -1, -0.0f};
    idx_ref_select_row(&p, 4, arr_logit, s2, out, NULL);
    expect_row(t, "S2", out, (const int32_t[]){0, 1}, 2);
    p = plan_for(t, 4, 0, 1);
    idx_ref_select_row(&p, 3, arr_logit, s1, out, NULL);
    expect_row(t, "S3", out, (const int32_t[]){0, 1, 2, -1}, 4);
    idx_ref_select_row(&p, 0, arr_logit, s1, out, NULL);
    expect_row(t, "n = 0", out, (const int32_t[]){-1, -1, -1, -1}, 4);
    /* C1: C = 2, blocks of 8; maxima 5, 7, 1 (pinned) -> [1, 2] */
    float c1[24];
    for (int j = 0; j < 24; ++j) c1[j] = -1.0f;
    c1[3] = 5, c1[9] = 7, c1[17] = 1;
    p = plan_for(t, 4, 1, 2);
    idx_ref_select_row(&p, 20, arr_logit, c1, out, cand);
    expect_row(t, "C1", cand, (const int32_t[]){1, 2}, 2);
    c1[9] = 5; /* n = 24, maxima 5, 5, x -> [0, 2] */
    idx_ref_select_row(&p, 24, arr_logit, c1, out, cand);
    expect_row(t, "C1 tie", cand, (const int32_t[]){0, 2}, 2);
    c1[9] = 7, c1[5] = nan; /* NaN ranks above +inf */
    idx_ref_select_row(&p, 24, arr_logit, c1, out, cand);
    expect_row(t, "C1 NaN", cand, (const int32_t[]){0, 2}, 2);
    /* C2: consumer, K = 4, n = 20 */
    const float c2[] = {9, 9, 9, 9, 9, 9, 9, 9, 1, 2, 3, 4, 5, 6, 7, 8, 8, 0, -1, nan};
    int32_t list[4] = {1, 2, -1, -1};
    p = plan_for(t, 4, 2, 4);
    idx_ref_select_row(&p, 20, arr_logit, c2, out, list);
    expect_row(t, "C2", out, (const int32_t[]){14, 15, 16, 19}, 4);
    memcpy(list, (const int32_t[]){2, 0, -1, 7}, sizeof list);
    idx_ref_select_row(&p, 20, arr_logit, c2, out, list);
    expect_row(t, "C2 ignored ids", out, (const int32_t[]){0, 1, 2, 19}, 4);
}

/* A logit drawn for ties and specials. */
static float tie_value(th_rng_t *r) {
    static const float pool[] = {0.0f, -0.0f, 1.0f, 2.0f, -1.0f, 3.5f};
    switch (th_rng_range(r, 0, 9)) {
    case 0: return dsv4_bits_f32(th_rng_range(r, 0, 1) ? 0x7FC00000u : 0xFFC12345u);
    case 1: return th_rng_range(r, 0, 1) ? INFINITY : -INFINITY;
    case 2:
    case 3:
    case 4: return pool[th_rng_range(r, 0, 5)];
    default: return (float)th_rng_logmag(r, -8, 8);
    }
}

void test_idx_topk_select_vs_model(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    static const int64_t Ks[] = {1, 5, 64, 512};
    for (int ki = 0; ki < 4; ++ki)
        for (int mode = 0; mode < 3; ++mode) {
            const int64_t K = Ks[ki], C = mode ? (int64_t)th_rng_range(r, 1, 40) : 1;
            const idx_topk_plan_t p = plan_for(t, K, mode, C);
            const int64_t ns[] = {0, 1, K - 1, K, K + 1, 8 * C, 8 * C + 1, th_rng_range(r, 1, 3000)};
            for (int ni = 0; ni < 8; ++ni) {
                const int64_t n = ns[ni];
                float *v = malloc((size_t)(n + 1) * 4);
                int32_t *got = malloc((size_t)K * 4), *want = malloc((size_t)K * 4);
                int32_t *cg = malloc((size_t)C * 4), *cw = malloc((size_t)C * 4);
                const int dense = th_rng_range(r, 0, 1); /* a tie-heavy row or a mostly distinct one */
                for (int64_t j = 0; j < n; ++j) v[j] = dense ? tie_value(r) : (float)th_rng_normal(r);
                for (int64_t i = 0; i < C; ++i) /* mode 2's list: valid, -1, out of range, duplicates */
                    cg[i] = cw[i] = (int32_t)(th_rng_range(r, 0, 4) ? th_rng_range(r, 0, (n + 7) / 8 + 2)
                                                                    : th_rng_range(r, -3, -1));
                idx_ref_select_row(&p, n, arr_logit, v, got, cg);
                it_model_select(v, n, K, mode, C, cw, want);
                char what[96];
                snprintf(what, sizeof what, "select K=%lld n=%lld mode %d C=%lld", (long long)K, (long long)n, mode,
                         (long long)C);
                expect_row(t, what, got, want, K);
                if (mode == 1) expect_row(t, "candidates", cg, cw, C);
                free(v), free(got), free(want), free(cg), free(cw);
            }
        }
}

static void logits_case(th_ctx_t *t, const it_topk_shape_t *sh, int64_t extra_cols) {
    it_topk_case_t c;
    it_topk_case(th_rng(t), sh, &c);
    const dsv4_indexer_logits_desc_t ld = it_logits_desc(&c.d, c.d.max_keys + extra_cols);
    const int64_t T = c.d.num_rows, W = ld.out_cols, LS = ld.out_stride;
    float *out = th_aligned_alloc(64, (size_t)(T * LS) * 4 + 64);
    const dsv4_indexer_logits_args_t la = {c.q8, c.w, c.pos, c.req, c.valid, c.bt, c.cache, out};
    TH_OK(t, dsv4_indexer_logits_ref(&ld, &la));
    it_check_logits(t, "reference logits", &c, out, LS, W);
    free(out);
    it_topk_case_free(&c);
}

void test_idx_logits_vs_model(th_ctx_t *t) {
    logits_case(t,
                &(it_topk_shape_t){.heads = 32,
                                   .topk = 8,
                                   .ratio = 1,
                                   .page_tokens = 64,
                                   .reqs = 3,
                                   .ctx_min = 0,
                                   .ctx_max = 200,
                                   .next_n = 3,
                                   .prefill_rows = 2,
                                   .pad_rows = 3,
                                   .bad_page = 1},
                40);
    logits_case(t,
                &(it_topk_shape_t){.heads = 64,
                                   .topk = 8,
                                   .ratio = 2,
                                   .page_tokens = 128,
                                   .page_stride = 128 * 132 + 64,
                                   .reqs = 2,
                                   .ctx_min = 100,
                                   .ctx_max = 300,
                                   .next_n = 2,
                                   .prefill_rows = 1,
                                   .pad_rows = 1,
                                   .bt_pad = 3,
                                   .specials = 1},
                0);
}

/* dsv4_indexer_topk_ref against the model's selection on the reference's own logits (bit
 * for bit), and against the fp64 logits as sets with the margin 1e-5 * mass. */
static void topk_case(th_ctx_t *t, const it_topk_shape_t *sh) {
    it_topk_case_t c;
    it_topk_case(th_rng(t), sh, &c);
    const int64_t T = c.d.num_rows, K = c.d.topk, C = c.d.candidate_count ? c.d.candidate_count : 2048;
    const int64_t W = c.d.max_keys, LS = (W + 3) / 4 * 4;
    int32_t *got = malloc((size_t)(T * K) * 4 + 4), *want = malloc((size_t)K * 4), *cw = malloc((size_t)C * 4);
    float *lg = th_aligned_alloc(64, (size_t)(T * LS) * 4 + 64);
    th_rng_t *rng = th_rng(t);
    if (sh->mode == 2) /* candidate lists: valid blocks, -1, out of range, duplicates */
        for (size_t i = 0; i < c.cand_elems; ++i)
            c.cand[i] = (int32_t)(th_rng_range(rng, 0, 3) ? th_rng_range(rng, 0, W / 8 + 2) : -1);
    int32_t *cand_in = malloc(c.cand_elems * 4 + 4);
    memcpy(cand_in, c.cand, c.cand_elems * 4);
    const dsv4_indexer_topk_args_t a = it_topk_args(&c, got, c.cand);
    TH_OK(t, dsv4_indexer_topk_ref(&c.d, &a));
    const dsv4_indexer_logits_desc_t ld = it_logits_desc(&c.d, W);
    const dsv4_indexer_logits_args_t la = {c.q8, c.w, c.pos, c.req, c.valid, c.bt, c.cache, lg};
    TH_OK(t, dsv4_indexer_logits_ref(&ld, &la));
    int64_t margin_checked = 0;
    for (int64_t r = 0; r < T; ++r) {
        const int64_t n = it_model_cols(&c, r);
        memcpy(cw, cand_in + r * C, (size_t)C * 4);
        it_model_select(lg + r * LS, n, K, (int)sh->mode, C, cw, want);
        char what[64];
        snprintf(what, sizeof what, "topk_ref row %lld (n %lld)", (long long)r, (long long)n);
        expect_row(t, what, got + r * K, want, K);
        if (sh->mode == 1) expect_row(t, "candidates", c.cand + r * C, cw, C);
        if (sh->mode != 2) margin_checked += it_check_margin(t, &c, r, got + r * K);
    }
    th_note(t, "topk_ref: %lld rows, %lld compared with fp64 by margin", (long long)T, (long long)margin_checked);
    free(got), free(want), free(cw), free(lg), free(cand_in);
    it_topk_case_free(&c);
}

void test_idx_topk_ref_vs_model(th_ctx_t *t) {
    /* decode-like: rows around K, mixed next_n, padding */
    topk_case(t, &(it_topk_shape_t){.heads = 32,
                                    .topk = 50,
                                    .ratio = 1,
                                    .page_tokens = 64,
                                    .reqs = 2,
                                    .ctx_min = 40,
                                    .ctx_max = 300,
                                    .next_n = 3,
                                    .prefill_rows = 2,
                                    .pad_rows = 1,
                                    .ties = 1});
    topk_case(t, &(it_topk_shape_t){.heads = 32,
                                    .topk = 64,
                                    .ratio = 1,
                                    .page_tokens = 64,
                                    .reqs = 4,
                                    .ctx_min = 0,
                                    .ctx_max = 400,
                                    .next_n = 4,
                                    .prefill_rows = 2,
                                    .pad_rows = 4});
    topk_case(t, &(it_topk_shape_t){.heads = 64,
                                    .topk = 100,
                                    .ratio = 2,
                                    .page_tokens = 128,
                                    .reqs = 2,
                                    .ctx_min = 90,
                                    .ctx_max = 300,
                                    .next_n = 3,
                                    .prefill_rows = 3,
                                    .pad_rows = 1,
                                    .specials = 1,
                                    .bad_page = 1});
    topk_case(t, &(it_topk_shape_t){.heads = 32,
                                    .topk = 32,
                                    .ratio = 1,
                                    .page_tokens = 64,
                                    .reqs = 3,
                                    .ctx_min = 10,
                                    .ctx_max = 500,
                                    .next_n = 2,
                                    .prefill_rows = 2,
                                    .pad_rows = 2,
                                    .mode = 1,
                                    .cand_count = 16});
    topk_case(t, &(it_topk_shape_t){.heads = 32,
                                    .topk = 40,
                                    .ratio = 1,
                                    .page_tokens = 64,
                                    .reqs = 3,
                                    .ctx_min = 10,
                                    .ctx_max = 500,
                                    .next_n = 2,
                                    .prefill_rows = 2,
                                    .pad_rows = 2,
                                    .mode = 2,
                                    .cand_count = 12});
}

void test_idx_topk_plans(th_ctx_t *t) {
    idx_topk_plan_t p;
    dsv4_indexer_topk_desc_t d = {.num_rows = 24,
                                  .num_heads = 32,
                                  .topk = 512,
                                  .ratio = 1,
                                  .num_reqs = 4,
                                  .block_table_width = 8192,
                                  .block_table_stride = 8192,
                                  .page_tokens = 128,
                                  .page_stride_bytes = 17280,
                                  .num_pages = 40000,
                                  .topk_stride = 512,
                                  .max_keys = 1 << 20,
                                  .candidate_stride = 2048};
    TH_OK(t, idx_topk_plan(&d, &p));
    /* 6 groups of 4 rows; 256 CTAs wanted -> 43 splits of 24,448 columns */
    TH_CHECK(t,
             p.group_rows == 4 && p.groups == 6 && p.splits == 43 && p.split_len == 24448 && p.topk_stride == 512 &&
                 p.cand_count == 2048 && p.src.bt_stride == 8192 && p.src.col_cap == (1 << 20),
             "decode plan: R %lld groups %lld S %lld L %lld", (long long)p.group_rows, (long long)p.groups,
             (long long)p.splits, (long long)p.split_len);
    TH_CHECK(t, p.ws_bytes == (size_t)24 * 43 * 512 * 8, "workspace %zu", p.ws_bytes);
    /* mode 2 splits the 8 * 2048 listed columns, not max_keys: 24 rows, 256 CTAs wanted, at
     * least 4,096 columns a split -> 4 splits of 4,096; one split is enough now */
    d.candidate_mode = 2;
    TH_OK(t, idx_topk_plan(&d, &p));
    TH_CHECK(t, p.splits == 4 && p.split_len == 4096 && p.ws_bytes == (size_t)24 * 4 * 512 * 8 + (size_t)24 * 2050 * 4,
             "restrict plan: S %lld L %lld ws %zu", (long long)p.splits, (long long)p.split_len, p.ws_bytes);
    d.num_splits = 1;
    TH_OK(t, idx_topk_plan(&d, &p));
    TH_CHECK(t, p.splits == 1 && p.split_len == 16384, "restrict plan, S = 1: L %lld", (long long)p.split_len);
    d.candidate_mode = 0, d.num_splits = 0;
    d.num_heads = 64, d.topk = d.topk_stride = 1024, d.num_rows = 4096, d.max_keys = 65536, d.candidate_mode = 1;
    TH_OK(t, idx_topk_plan(&d, &p));
    TH_CHECK(t,
             p.group_rows == 2 && p.splits == 1 && p.split_len == 65536 &&
                 p.ws_bytes == (size_t)4096 * 1024 * 8 + (size_t)4096 * 8192 * 4,
             "prefill plan: R %lld S %lld L %lld ws %zu", (long long)p.group_rows, (long long)p.splits,
             (long long)p.split_len, p.ws_bytes);
    d.topk = d.topk_stride = 2048, d.num_heads = 32, d.num_splits = 7, d.max_keys = 1000;
    TH_OK(t, idx_topk_plan(&d, &p));
    TH_CHECK(t, p.group_rows == 1 && p.splits == 7 && p.split_len == 192, "forced: R %lld S %lld L %lld",
             (long long)p.group_rows, (long long)p.splits, (long long)p.split_len);
}
