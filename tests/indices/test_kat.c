/*
 * Known answers, computed by hand from the formulas of include/dsv4/indices.h: small
 * translation, decode SWA and combine cases (both combine modes where they differ), and
 * the library's own choices (indices past the table, unknown requests, rows no request
 * covers, the gather-start clamp, negative positions). The CPU tests check the references;
 * the GPU test runs the same cases through the kernels, with aligned and misaligned
 * pointers.
 */
#include <stdlib.h>
#include <string.h>

#include "idx_test.h"

#define NV(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

/* Writes `n` values then -1 up to `cols`. */
static void set_row(int32_t *row, int64_t cols, const int32_t *vals, int64_t n) {
    for (int64_t j = 0; j < cols; ++j) row[j] = j < n ? vals[j] : -1;
}

/* ---- translation (two requests, dense and packed; library choices) -------------------- */
typedef struct {
    const char *name;
    dsv4_topk_translate_desc_t d;
    const int32_t *topk, *t2r, *table;
    const uint8_t *valid;
    const int32_t *want_global, *want_lens, *want_indptr, *want_packed;
    int64_t n_packed;
} kat_tt_t;

static const int32_t k1_topk[] = {0, 5, 11, -1, 2, 3, -1, -1, 7, 1, 0, 4};
static const int32_t k1_t2r[] = {0, 0, 1};
static const int32_t k1_table[] = {7, 3, 9, 0, 4, 6, 0, 0};
static const uint8_t k1_valid[] = {1, 0, 1};
static const int32_t k1_global[] = {28, 13, 39, -1, 30, 31, -1, -1, 27, 17, 16, 24};
static const int32_t k1_lens[] = {3, 0, 4};
static const int32_t k2_indptr[] = {0, 3, 3, 7};
static const int32_t k2_packed[] = {28, 13, 39, 27, 17, 16, 24};

/* Library choices: v / P >= block_table_width is -1 and not counted; an unknown request
 * gives a -1 row and lens 0; any nonzero is_valid byte is valid. P = 4, width 2, table
 * [5, 6]. */
static const int32_t lc_topk[] = {0, 7, 8, 100, -1, 3, 4, 5, -1, -1, 1, INT32_MAX, INT32_MIN, 6, -1};
static const int32_t lc_t2r[] = {0, 1, 0};
static const int32_t lc_table[] = {5, 6};
static const uint8_t lc_valid[] = {2, 1, 255};
static const int32_t lc_global[] = {20, 27, -1, -1, -1, -1, -1, -1, -1, -1, 21, -1, -1, 26, -1};
static const int32_t lc_lens[] = {2, 0, 2};
static const int32_t lc_indptr[] = {0, 2, 2, 4};
static const int32_t lc_packed[] = {20, 27, 21, -1};

static const kat_tt_t kat_tt[] = {
    {"translate two requests",
     {3, 4, 2, 4, 4, 4, 4, 4},
     k1_topk,
     k1_t2r,
     k1_table,
     k1_valid,
     k1_global,
     k1_lens,
     k2_indptr,
     k2_packed,
     NV(k2_packed)},
    {"translate library choices",
     {3, 5, 1, 2, 4, 5, 2, 5},
     lc_topk,
     lc_t2r,
     lc_table,
     lc_valid,
     lc_global,
     lc_lens,
     lc_indptr,
     lc_packed,
     NV(lc_packed)},
};

static void run_kat_tt(th_ctx_t *t, const kat_tt_t *k, int gpu, size_t off, int packed) {
    const int64_t T = k->d.num_tokens, K = k->d.topk;
    int32_t *lens = idx_poisoned_i32((size_t)T);
    if (!packed) {
        int32_t *out = idx_poisoned_i32((size_t)(T * K));
        dsv4_topk_translate_args_t a = {k->topk, k->t2r, k->table, k->valid, out, lens};
        int ran = gpu ? tt_gpu_dense(t, k->name, &k->d, &a, off, off) : dsv4_topk_translate_ref(&k->d, &a) == 0;
        TH_CHECK(t, ran, "%s did not run: %s", k->name, dsv4_last_error());
        idx_cmp_i32(t, k->name, "global", out, k->want_global, (size_t)(T * K), K);
        free(out);
    } else {
        int32_t *indptr = idx_poisoned_i32((size_t)T + 1), *pk = idx_poisoned_i32((size_t)(T * K));
        int32_t *want_pk = idx_poisoned_i32((size_t)(T * K)); /* the tail past indptr[T] stays poisoned */
        memcpy(want_pk, k->want_packed, (size_t)k->n_packed * 4);
        dsv4_topk_translate_packed_args_t a = {k->topk, k->t2r, k->table, k->valid, lens, indptr, pk};
        int ran = gpu ? tt_gpu_packed(t, k->name, &k->d, &a, off, off) : dsv4_topk_translate_packed_ref(&k->d, &a) == 0;
        TH_CHECK(t, ran, "%s did not run: %s", k->name, dsv4_last_error());
        idx_cmp_i32(t, k->name, "indptr", indptr, k->want_indptr, (size_t)T + 1, 0);
        idx_cmp_i32(t, k->name, "packed", pk, want_pk, (size_t)(T * K), 0);
        free(indptr);
        free(pk);
        free(want_pk);
    }
    idx_cmp_i32(t, k->name, "lens", lens, k->want_lens, (size_t)T, 0);
    free(lens);
}

void test_kat_translate(th_ctx_t *t) {
    for (int i = 0; i < NV(kat_tt); ++i) run_kat_tt(t, &kat_tt[i], 0, 0, 0);
}
void test_kat_translate_packed(th_ctx_t *t) {
    for (int i = 0; i < NV(kat_tt); ++i) run_kat_tt(t, &kat_tt[i], 0, 0, 1);
}

/* ---- decode SWA lists (two requests; library choices) ---------------------------------- */
typedef struct {
    const char *name;
    dsv4_decode_swa_indices_desc_t d;
    const int32_t *t2r, *pos, *table;
    const uint8_t *valid;
    const int32_t *want, *want_lens;
} kat_dsw_t;

/* Two requests in one call (P = 4, W = 4): request 0 has table [5, 2] (padded), request 1
 * [5, 2, 8]. */
static const int32_t k3_t2r[] = {0, 0, 1}, k3_pos[] = {5, 1, 9}, k3_table[] = {5, 2, 0, 5, 2, 8};
static const uint8_t k3_valid[] = {1, 1, 1};
static const int32_t k3_want[] = {22, 23, 8, 9, 20, 21, -1, -1, 10, 11, 32, 33};
static const int32_t k3_lens[] = {4, 2, 4};
/* Library choices (P = 4, W = 4, width 1, table [3]): pages past the width are -1 but
 * counted; negative position and unknown request: -1 row, length 0; an invalid token keeps
 * its row, length 0. */
static const int32_t dc_t2r[] = {0, 0, 7, 0}, dc_pos[] = {5, -3, 2, 2}, dc_table[] = {3};
static const uint8_t dc_valid[] = {1, 1, 1, 0};
static const int32_t dc_want[] = {14, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 12, 13, 14, -1};
static const int32_t dc_lens[] = {4, 0, 0, 0};

static const kat_dsw_t kat_dsw[] = {
    {"decode SWA two requests", {3, 2, 4, 4, 3, 3, 4}, k3_t2r, k3_pos, k3_table, k3_valid, k3_want, k3_lens},
    {"decode SWA library choices", {4, 1, 4, 4, 1, 1, 4}, dc_t2r, dc_pos, dc_table, dc_valid, dc_want, dc_lens},
};

static void run_kat_dsw(th_ctx_t *t, const kat_dsw_t *k, int gpu, size_t off) {
    const int64_t T = k->d.num_tokens, W = k->d.window;
    int32_t *out = idx_poisoned_i32((size_t)(T * W)), *lens = idx_poisoned_i32((size_t)T);
    dsv4_decode_swa_indices_args_t a = {k->t2r, k->pos, k->valid, k->table, out, lens};
    int ran = gpu ? dsw_gpu(t, k->name, &k->d, &a, off) : dsv4_decode_swa_indices_ref(&k->d, &a) == 0;
    TH_CHECK(t, ran, "%s did not run: %s", k->name, dsv4_last_error());
    idx_cmp_i32(t, k->name, "swa_indices", out, k->want, (size_t)(T * W), W);
    idx_cmp_i32(t, k->name, "swa_lens", lens, k->want_lens, (size_t)T, 0);
    free(out);
    free(lens);
}

void test_kat_decode_swa(th_ctx_t *t) {
    for (int i = 0; i < NV(kat_dsw); ++i) run_kat_dsw(t, &kat_dsw[i], 0, 0);
}

/* ---- combine (known answers, library choices) ------------------------------------------ */
#define KC_MAX_T 8
typedef struct {
    char name[64];
    dsv4_combine_topk_swa_desc_t d;
    int32_t topk[KC_MAX_T * 4], qsl[4], seq[3], gather[3];
    int has_topk;
    int32_t want[KC_MAX_T * 128], want_lens[KC_MAX_T];
} kat_cmb_t;

/* Common fields: W, r, TOP_K (= K_w), M, N, T, R; rows of expected values. */
static void kc_init(kat_cmb_t *k, const char *name, int64_t mode, int64_t T, int64_t R, int64_t W, int64_t r,
                    int64_t TOP_K, int64_t M, int64_t N) {
    memset(k, 0, sizeof *k);
    strncpy(k->name, name, sizeof k->name - 1);
    dsv4_combine_topk_swa_desc_t d = {T,   R, TOP_K, TOP_K, TOP_K, W, r, M, N, dsv4_combine_topk_swa_cols(TOP_K, W),
                                      mode};
    k->d = d;
    k->has_topk = TOP_K > 0;
}
static void kc_row(kat_cmb_t *k, int64_t t, const int32_t *vals, int64_t n) {
    set_row(k->want + t * 128, 128, vals, n);
    k->want_lens[t] = (int32_t)n;
}

/* Builds case `i` (mode V4.1 or V4); returns 0 when the case has no such mode. */
static int kat_cmb_build(kat_cmb_t *k, int i, int64_t mode) {
    const int v4 = mode == DSV4_COMBINE_V4;
    switch (i) {
    case 0: { /* the shape of FlagGems' combine test; V4 gives the same */
        kc_init(k, "combine basic", mode, 3, 2, 4, 2, 4, 64, 16);
        const int32_t topk[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, qsl[] = {0, 2, 3};
        memcpy(k->topk, topk, sizeof topk);
        memcpy(k->qsl, qsl, sizeof qsl);
        k->seq[0] = k->gather[0] = 8;
        k->seq[1] = k->gather[1] = 10;
        const int32_t r0[] = {1, 2, 3, 19, 20, 21, 22}, r1[] = {5, 6, 7, 8, 20, 21, 22, 23},
                      r2[] = {73, 74, 75, 76, 86, 87, 88, 89};
        kc_row(k, 0, r0, 7);
        kc_row(k, 1, r1, 8);
        kc_row(k, 2, r2, 8);
        return 1;
    }
    case 1: { /* rebasing (qsl[0] = 17) and gather_start 9 */
        kc_init(k, "combine rebased", mode, 8, 1, 4, 4, 4, 64, 8);
        const int32_t topk[] = {0, 1, 2, -1, 0, 1, 2, -1, 0, 1, 2, -1, 3, 0, 1, 2,
                                1, 3, 0, 2,  2, 1, 3, 0,  0, 1, 2, 3,  4, 0, 2, 3};
        memcpy(k->topk, topk, sizeof topk);
        k->qsl[0] = 17;
        k->qsl[1] = 25;
        k->seq[0] = 20;
        k->gather[0] = 11;
        const int32_t rows[8][8] = {{0, 1, 2, 8, 9, 10, 11},      {0, 1, 2, 9, 10, 11, 12},
                                    {0, 1, 2, 10, 11, 12, 13},    {3, 0, 1, 2, 11, 12, 13, 14},
                                    {1, 3, 0, 2, 12, 13, 14, 15}, {2, 1, 3, 0, 13, 14, 15, 16},
                                    {0, 1, 2, 3, 14, 15, 16, 17}, {4, 0, 2, 3, 15, 16, 17, 18}};
        for (int t = 0; t < 8; ++t) kc_row(k, t, rows[t], t < 3 ? 7 : 8);
        return 1;
    }
    case 2: { /* invalid values, V4.1 filter vs V4 */
        kc_init(k, v4 ? "combine invalid values (V4)" : "combine invalid values (V4.1)", mode, 3, 2, 4, 2, 4, 32, 8);
        const int32_t topk[] = {1, 0, -1, -1, 3, -1, 1, 0, 5, 9, -7, 2}, qsl[] = {0, 1, 3};
        memcpy(k->topk, topk, sizeof topk);
        memcpy(k->qsl, qsl, sizeof qsl);
        k->seq[0] = 4;
        k->gather[0] = 4;
        k->seq[1] = 12;
        k->gather[1] = 6;
        const int32_t r0[] = {1, 0, 8, 9, 10, 11};
        const int32_t r1[] = {35, -1, 33, 32, 41, 42, 43, 44}, r1v4[] = {35, 31, 33, 32, 41, 42, 43, 44};
        const int32_t r2[] = {37, -1, -1, 34, 42, 43, 44, 45}, r2v4[] = {37, 41, 25, 34, 42, 43, 44, 45};
        kc_row(k, 0, r0, 6);
        kc_row(k, 1, v4 ? r1v4 : r1, 8);
        kc_row(k, 2, v4 ? r2v4 : r2, 8);
        return 1;
    }
    case 3: { /* ratio 0 (SWA-only); not a V4 case */
        if (v4) return 0;
        kc_init(k, "combine ratio 0", mode, 5, 2, 128, 0, 0, 1000, 0);
        const int32_t qsl[] = {0, 2, 5};
        memcpy(k->qsl, qsl, sizeof qsl);
        k->seq[0] = 2;
        k->gather[0] = 2;
        k->seq[1] = 200;
        k->gather[1] = 130;
        const int32_t r0[] = {0}, r1[] = {0, 1};
        kc_row(k, 0, r0, 1);
        kc_row(k, 1, r1, 2);
        for (int t = 2; t < 5; ++t) {
            int32_t run[128];
            for (int j = 0; j < 128; ++j) run[j] = 1000 + (t - 2) + j; /* 1000 .. 1127, 1001 .. 1128, ... */
            kc_row(k, t, run, 128);
        }
        return 1;
    }
    case 4: { /* ratio 1 */
        kc_init(k, "combine ratio 1", mode, 2, 1, 4, 1, 4, 64, 16);
        const int32_t topk[] = {0, 2, 1, 3, 4, 0, 1, 2}, qsl[] = {0, 2};
        memcpy(k->topk, topk, sizeof topk);
        memcpy(k->qsl, qsl, sizeof qsl);
        k->seq[0] = k->gather[0] = 6;
        const int32_t r0[] = {0, 2, 1, 3, 17, 18, 19, 20}, r1[] = {4, 0, 1, 2, 18, 19, 20, 21};
        kc_row(k, 0, r0, 8);
        kc_row(k, 1, r1, 8);
        return 1;
    }
    case 5: { /* rows no request covers: -1 rows, lens 0 */
        kc_init(k, "uncovered rows", mode, 3, 1, 4, 1, 0, 100, 0);
        k->qsl[1] = 1;
        k->seq[0] = 3;
        k->gather[0] = 3;
        const int32_t r0[] = {0, 1, 2};
        kc_row(k, 0, r0, 3);
        kc_row(k, 1, r0, 0);
        kc_row(k, 2, r0, 0);
        return 1;
    }
    case 6: { /* gather_lens below the standard (out of contract): V4.1 clamps the window at
               * gs = 8 (rows 0, 1); V4 names rows below the gather start (-2, -1). */
        kc_init(k, v4 ? "short gather (V4)" : "short gather (V4.1)", mode, 1, 1, 4, 1, 0, 100, 0);
        k->qsl[1] = 1;
        k->seq[0] = 10;
        k->gather[0] = 2;
        const int32_t clamp[] = {0, 1}, raw[] = {-2, -1, 0, 1};
        kc_row(k, 0, v4 ? raw : clamp, v4 ? 4 : 2);
        return 1;
    }
    case 7: { /* seq_len < query_len: positions -2, -1 give empty rows; position 0 keeps one
               * top-k entry and its own row (gs = -2: N + 2). */
        kc_init(k, "negative positions", mode, 3, 1, 4, 1, 4, 64, 16);
        k->qsl[1] = 3;
        k->seq[0] = 1;
        k->gather[0] = 3;
        for (int j = 0; j < 12; ++j) k->topk[j] = j % 4;
        const int32_t r2[] = {0, 18};
        kc_row(k, 0, r2, 0);
        kc_row(k, 1, r2, 0);
        kc_row(k, 2, r2, 2);
        return 1;
    }
    default: return 0;
    }
}
#define KAT_CMB_CASES 8

static void run_kat_cmb(th_ctx_t *t, const kat_cmb_t *k, int gpu, size_t off) {
    const int64_t T = k->d.num_tokens;
    int32_t *out = idx_poisoned_i32((size_t)(T * 128)), *lens = idx_poisoned_i32((size_t)T);
    dsv4_combine_topk_swa_args_t a = {k->has_topk ? k->topk : NULL, k->qsl, k->seq, k->gather, out, lens};
    int ran = gpu ? cmb_gpu(t, k->name, &k->d, &a, off, off) : dsv4_combine_topk_swa_ref(&k->d, &a) == 0;
    TH_CHECK(t, ran, "%s did not run: %s", k->name, dsv4_last_error());
    idx_cmp_i32(t, k->name, "combined", out, k->want, (size_t)(T * 128), 128);
    idx_cmp_i32(t, k->name, "combined_lens", lens, k->want_lens, (size_t)T, 0);
    free(out);
    free(lens);
}

static void kat_cmb_all(th_ctx_t *t, int gpu, size_t off) {
    kat_cmb_t *k = malloc(sizeof *k);
    for (int i = 0; i < KAT_CMB_CASES; ++i)
        for (int64_t mode = 0; mode < 2; ++mode)
            if (kat_cmb_build(k, i, mode)) run_kat_cmb(t, k, gpu, off);
    free(k);
}

void test_kat_combine(th_ctx_t *t) { kat_cmb_all(t, 0, 0); }

void test_kat_library_choices(th_ctx_t *t) {
    /* The library-choice cases live in the tables above; this test states them by name so a
     * failure reads as "a library choice changed", separate from the formula cases. */
    run_kat_tt(t, &kat_tt[1], 0, 0, 0);
    run_kat_tt(t, &kat_tt[1], 0, 0, 1);
    run_kat_dsw(t, &kat_dsw[1], 0, 0);
}

void test_kat_gpu(th_ctx_t *t) {
    for (size_t off = 0; off <= 4; off += 4) {
        for (int i = 0; i < NV(kat_tt); ++i) {
            run_kat_tt(t, &kat_tt[i], 1, off, 0);
            run_kat_tt(t, &kat_tt[i], 1, off, 1);
        }
        for (int i = 0; i < NV(kat_dsw); ++i) run_kat_dsw(t, &kat_dsw[i], 1, off);
        kat_cmb_all(t, 1, off);
    }
}
