/*
 * dsv4_compress_v4 on the CPU: the library's exp against libm over its whole range,
 * hand-computed records (equal scores pool to a mean; a window with no readable row
 * gives the zero record), the reference against the independent model on random
 * multi-request cases, and bad input (each check, its status and message, nothing
 * written).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kv_format.h"
#include "compress/v4_math.h"
#include "dsv4/numerics.h"
#include "test_v4.h"

enum { D = DSV4_COMPRESS_DIM };

/* Distance of v from the exact e^x in units of the float spacing at e^x. */
static double exp_ulps(float v, double x) {
    const double e = exp(x);
    int k;
    frexp(e, &k);
    const double ulp = e < 0x1p-126 ? 0x1p-149 : ldexp(1.0, k - 24);
    return fabs((double)v - e) / ulp;
}

void test_compress_v4_exp(th_ctx_t *t) {
    TH_CHECK(t, v4_exp(0.0f) == 1.0f && v4_exp(-0.0f) == 1.0f, "exp(+-0) = %a, %a", v4_exp(0.0f), v4_exp(-0.0f));
    TH_CHECK(t, v4_exp(-INFINITY) == 0.0f && v4_exp(-104.5f) == 0.0f, "exp(-inf) = %a", v4_exp(-INFINITY));
    TH_CHECK(t, isnan(v4_exp(NAN)), "exp(NaN) = %a", v4_exp(NAN));
    double worst = 0, at = 0;
    th_rng_t *r = th_rng(t);
    for (int i = 0; i < 4000000; ++i) { /* a grid over [-104, 88], then random points */
        const float x =
            i < 2000000 ? -104.0f + 192.0f * (float)i / 2000000.0f : (float)(-104.0 + 192.0 * th_rng_unit(r));
        const double u = exp_ulps(v4_exp(x), x);
        if (u > worst) worst = u, at = x;
    }
    for (int i = 0; i < 1 << 16; ++i) { /* small arguments, where k = 0 */
        const float x = -0x1p-8f * (float)i / (float)(1 << 16);
        const double u = exp_ulps(v4_exp(x), x);
        if (u > worst) worst = u, at = x;
    }
    th_note(t, "v4_exp: worst %.3f ulp at x = %a", worst, at);
    TH_CHECK(t, worst <= 2.0, "v4_exp off by %.3f ulp at x = %a (contract: 2)", worst, at);
}

/* ---- known answers ------------------------------------------------------------------- */
/* A table of `rows` positions with cos 0.5, sin 0.75 in every pair. */
static float *kat_table(int64_t rows) {
    float *cs = th_aligned_alloc(64, (size_t)rows * 64 * 4);
    for (int64_t i = 0; i < rows * 64; ++i) cs[i] = i % 64 < 32 ? 0.5f : 0.75f;
    return cs;
}

/* The record of the latent 1.0 in every dim rotated by (0.5, 0.75): NoPE codes 0x78 at
 * enc 119, RoPE pairs (-0.25, 1.25) = 0xBE80, 0x3FA0; zero: the zero latent (codes 0,
 * RoPE 0, enc 105 of the 1e-4 floor). */
static void expect_record(th_ctx_t *t, const char *what, const uint8_t *data, const uint8_t *scales, int zero) {
    uint8_t want[DSV4_KV_DATA_BYTES], wsc[DSV4_KV_SCALE_BYTES];
    memset(want, zero ? 0x00 : 0x78, DSV4_KV_NOPE_DIM);
    for (int i = 0; i < DSV4_KV_ROPE_DIM / 2; ++i) {
        uint8_t *p = want + DSV4_KV_NOPE_DIM + 4 * i;
        p[0] = zero ? 0 : 0x80, p[1] = zero ? 0 : 0xBE, p[2] = zero ? 0 : 0xA0, p[3] = zero ? 0 : 0x3F;
    }
    memset(wsc, zero ? 105 : 0x77, 7), wsc[7] = 0;
    char w[96];
    snprintf(w, sizeof w, "%s data", what);
    th_cmp_bytes(t, w, data, want, sizeof want);
    snprintf(w, sizeof w, "%s scales", what);
    th_cmp_bytes(t, w, scales, wsc, sizeof wsc);
}

/* Ratio 4: one request at positions 0..7 in blocks {1, 0} of 4 rows; kv halves of
 * alternating 1, 3 and 3, 1 (so only the right half of each row pools to 2), scores 0
 * plus ape 0.5 (equal: weights 1/8). Position 7 writes the 1.0 record (at table row 4),
 * position 3 has no slot, a padding row at position -1 writes the zero record; the
 * state holds each row with its score + 0.5. */
static void kat_ratio4(th_ctx_t *t) {
    enum { T = 9, W2 = 2048, P = 4 };
    float *kv = th_aligned_alloc(64, T * W2 * 4), *state = th_aligned_alloc(64, 2 * 4 * W2 * 4);
    float *ape = th_aligned_alloc(64, 4 * 1024 * 4), *cs = kat_table(8);
    int64_t pos[T], ss[T], slot[T];
    int32_t req[T], bt[2] = {1, 0};
    uint16_t gamma[D];
    uint8_t *cache = th_aligned_alloc(64, P * DSV4_KV_RECORD_BYTES);
    for (int i = 0; i < D; ++i) gamma[i] = 0x3F80;
    for (int i = 0; i < 4 * 1024; ++i) ape[i] = 0.5f;
    for (int64_t q = 0; q < T; ++q) {
        for (int i = 0; i < 1024; ++i) kv[q * W2 + i] = (i < 512) == (i % 2 == 0) ? 1.0f : 3.0f;
        for (int i = 1024; i < W2; ++i) kv[q * W2 + i] = 0.0f;
        pos[q] = q < 8 ? q : -1, req[q] = q < 8 ? 0 : -1, slot[q] = q == 7 ? 2 : q == 8 ? 0 : -1;
        ss[q] = q < 8 ? bt[q / 4] * 4 + q % 4 : -1;
    }
    for (int i = 0; i < 2 * 4 * W2; ++i) state[i] = NAN;
    memset(cache, V4T_POISON, P * DSV4_KV_RECORD_BYTES);
    const dsv4_compress_v4_desc_t d = {.num_tokens = T,
                                       .ratio = 4,
                                       .kv_stride = W2,
                                       .state_block_rows = 4,
                                       .state_blocks = 2,
                                       .state_stride_block = 4 * W2,
                                       .state_stride_row = W2,
                                       .num_reqs = 1,
                                       .max_blocks = 2,
                                       .block_table_stride = 2,
                                       .page_tokens = P,
                                       .page_stride_bytes = P * DSV4_KV_RECORD_BYTES,
                                       .num_pages = 1,
                                       .max_position = 8,
                                       .eps = 1e-20f};
    const dsv4_compress_v4_args_t a = {kv, ape, pos, ss, req, bt, gamma, cs, slot, state, cache};
    TH_OK(t, dsv4_compress_v4_ref(&d, &a));
    for (int64_t q = 0; q < 8; ++q) {
        const float *row = state + (bt[q / 4] * 4 + q % 4) * W2;
        int ok = !memcmp(row, kv + q * W2, 1024 * 4);
        for (int i = 1024; i < W2; ++i) ok &= row[i] == 0.5f;
        TH_CHECK(t, ok, "ratio 4: state row of position %lld", (long long)q);
    }
    expect_record(t, "ratio 4 position 7", cache + 2 * DSV4_KV_DATA_BYTES, cache + P * DSV4_KV_DATA_BYTES + 2 * 8, 0);
    expect_record(t, "ratio 4 position -1", cache, cache + P * DSV4_KV_DATA_BYTES, 1);
    size_t touched = 0; /* slots 1 and 3: untouched */
    for (int s = 1; s < 4; s += 2)
        for (int i = 0; i < DSV4_KV_DATA_BYTES; ++i) touched += cache[s * DSV4_KV_DATA_BYTES + i] != V4T_POISON;
    TH_CHECK(t, touched == 0, "ratio 4: %zu bytes of unwritten records changed", touched);
    free(kv), free(state), free(ape), free(cs), free(cache);
}

/* Ratio 128: positions 0..127 in 16 blocks of 8 rows (block j at table column 15 - j),
 * kv rows of 1 (even positions) and 3 (odd) in every dim, scores 0: position 127 pools
 * to 2 everywhere and writes the 1.0 record (table row 0). */
static void kat_ratio128(th_ctx_t *t) {
    enum { T = 128, W2 = 1024, P = 2 };
    float *kv = th_aligned_alloc(64, T * W2 * 4), *state = th_aligned_alloc(64, T * W2 * 4);
    float *ape = th_aligned_alloc(64, 128 * 512 * 4), *cs = kat_table(1);
    int64_t pos[T], ss[T], slot[T];
    int32_t req[T], bt[16];
    uint16_t gamma[D];
    uint8_t *cache = th_aligned_alloc(64, P * DSV4_KV_RECORD_BYTES);
    for (int i = 0; i < D; ++i) gamma[i] = 0x3F80;
    memset(ape, 0, 128 * 512 * 4);
    for (int j = 0; j < 16; ++j) bt[j] = 15 - j;
    for (int64_t q = 0; q < T; ++q) {
        for (int i = 0; i < W2; ++i) kv[q * W2 + i] = i < 512 ? (q & 1 ? 3.0f : 1.0f) : 0.0f;
        pos[q] = q, req[q] = 0, slot[q] = q == 127 ? 1 : -1, ss[q] = bt[q / 8] * 8 + q % 8;
    }
    memset(cache, V4T_POISON, P * DSV4_KV_RECORD_BYTES);
    const dsv4_compress_v4_desc_t d = {.num_tokens = T,
                                       .ratio = 128,
                                       .kv_stride = W2,
                                       .state_block_rows = 8,
                                       .state_blocks = 16,
                                       .state_stride_block = 8 * W2,
                                       .state_stride_row = W2,
                                       .num_reqs = 1,
                                       .max_blocks = 16,
                                       .block_table_stride = 16,
                                       .page_tokens = P,
                                       .page_stride_bytes = P * DSV4_KV_RECORD_BYTES,
                                       .num_pages = 1,
                                       .max_position = 1,
                                       .eps = 1e-20f};
    const dsv4_compress_v4_args_t a = {kv, ape, pos, ss, req, bt, gamma, cs, slot, state, cache};
    TH_OK(t, dsv4_compress_v4_ref(&d, &a));
    expect_record(t, "ratio 128 position 127", cache + DSV4_KV_DATA_BYTES, cache + P * DSV4_KV_DATA_BYTES + 8, 0);
    size_t touched = 0;
    for (int i = 0; i < DSV4_KV_DATA_BYTES; ++i) touched += cache[i] != V4T_POISON;
    TH_CHECK(t, touched == 0, "ratio 128: %zu bytes of slot 0 changed", touched);
    free(kv), free(state), free(ape), free(cs), free(cache);
}

/* The indexer's compressor (N = 128), ratio 4, the layout of kat_ratio4 at half the width:
 * position 7 pools to 2, y = 1.0 with RoPE pairs (-0.25, 1.25); max |y| = 1.25 gives e = -8:
 * codes 0x78 (256), 0xE8 (-64), 0x7A (320) and the scale 2^-8 = 0x3B800000 as fp32. */
static void kat_indexer(th_ctx_t *t) {
    enum { T = 8, W2 = 512, P = 2, STRIDE = 272 };
    float *kv = th_aligned_alloc(64, T * W2 * 4), *state = th_aligned_alloc(64, 2 * 4 * W2 * 4);
    float *ape = th_aligned_alloc(64, 4 * 256 * 4), *cs = kat_table(8);
    int64_t pos[T], ss[T], slot[T];
    int32_t req[T], bt[2] = {1, 0};
    uint16_t gamma[128];
    uint8_t *cache = th_aligned_alloc(64, STRIDE);
    for (int i = 0; i < 128; ++i) gamma[i] = 0x3F80;
    for (int i = 0; i < 4 * 256; ++i) ape[i] = 0.5f;
    for (int64_t q = 0; q < T; ++q) {
        for (int i = 0; i < 256; ++i) kv[q * W2 + i] = (i < 128) == (i % 2 == 0) ? 1.0f : 3.0f;
        for (int i = 256; i < W2; ++i) kv[q * W2 + i] = 0.0f;
        pos[q] = q, req[q] = 0, slot[q] = q == 7 ? 1 : -1, ss[q] = bt[q / 4] * 4 + q % 4;
    }
    memset(cache, V4T_POISON, STRIDE);
    const dsv4_compress_v4_desc_t d = {.num_tokens = T,
                                       .ratio = 4,
                                       .head_dim = 128,
                                       .kv_stride = W2,
                                       .state_block_rows = 4,
                                       .state_blocks = 2,
                                       .state_stride_block = 4 * W2,
                                       .state_stride_row = W2,
                                       .num_reqs = 1,
                                       .max_blocks = 2,
                                       .block_table_stride = 2,
                                       .page_tokens = P,
                                       .page_stride_bytes = STRIDE,
                                       .num_pages = 1,
                                       .max_position = 8,
                                       .eps = 1e-20f};
    const dsv4_compress_v4_args_t a = {kv, ape, pos, ss, req, bt, gamma, cs, slot, state, cache};
    TH_OK(t, dsv4_compress_v4_ref(&d, &a));
    uint8_t want[STRIDE];
    memset(want, V4T_POISON, STRIDE);
    memset(want + 128, 0x78, 64);
    for (int i = 0; i < 32; ++i) want[128 + 64 + 2 * i] = 0xE8, want[128 + 65 + 2 * i] = 0x7A;
    want[260] = 0x00, want[261] = 0x00, want[262] = 0x80, want[263] = 0x3B;
    th_cmp_bytes(t, "indexer state of position 7 (the page)", cache, want, STRIDE);
    free(kv), free(state), free(ape), free(cs), free(cache);
}

void test_compress_v4_known_answers(th_ctx_t *t) {
    kat_ratio4(t);
    kat_ratio128(t);
    kat_indexer(t);
}

void test_compress_v4_vs_model(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    for (int rep = 0; rep < 3; ++rep)
        for (int k = 0; k < V4T_SHAPES; ++k) {
            v4t_case_t c;
            char name[200];
            v4t_case(r, &v4t_shapes[k], &c);
            v4t_name(name, sizeof name, "ref", &v4t_shapes[k]);
            const dsv4_compress_v4_args_t a = v4t_args(&c, c.state, c.cache);
            float *state0 = malloc(c.state_elems * 4);
            memcpy(state0, c.state, c.state_elems * 4);
            TH_OK(t, dsv4_compress_v4_ref(&c.d, &a));
            float *after = c.state;
            c.state = state0; /* the model starts from the state before the call */
            v4t_check(t, name, &c, after, c.cache);
            c.state = after;
            free(state0);
            v4t_case_free(&c);
        }
}
