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

/* A hand-built call: one request at positions 0 .. rows - 1, in blocks of B rows laid out
 * in reverse (column c in block blocks - 1 - c), every row saved; gamma 1, eps 1e-20, the
 * table of kat_table; the position rows - 1 writes into slot `slot`, and with pad >= 0 a
 * padding row at position -1 (no request, no state slot) writes into slot `pad`. kv:
 * `halves` = the two halves of each kv row alternate 1, 3 and 3, 1 by dim (so only the
 * right half of each window row pools to 2); otherwise every dim of a row is 1 (even
 * positions) or 3 (odd). Scores 0, ape `ape`: equal scores, so the pool is a mean. */
typedef struct {
    int64_t ratio, N, rows, B, P, stride, slot, pad;
    int halves;
    float ape;
    float *kv, *state; /* after the call */
    uint8_t *cache;
} kat_t;

static void kat_run(th_ctx_t *t, kat_t *k) {
    const int64_t width = (k->ratio == 4 ? 2 : 1) * k->N, W2 = 2 * width, T = k->rows + (k->pad >= 0);
    const int64_t blocks = (k->rows + k->B - 1) / k->B;
    k->kv = th_aligned_alloc(64, (size_t)(T * W2) * 4),
    k->state = th_aligned_alloc(64, (size_t)(blocks * k->B * W2) * 4);
    k->cache = th_aligned_alloc(64, (size_t)k->stride);
    float *ape = th_aligned_alloc(64, (size_t)(k->ratio * width) * 4), *cs = kat_table(k->rows);
    int64_t *pos = malloc((size_t)T * 8), *ss = malloc((size_t)T * 8), *slot = malloc((size_t)T * 8);
    int32_t *req = malloc((size_t)T * 4), *bt = malloc((size_t)blocks * 4);
    uint16_t *gamma = malloc((size_t)k->N * 2);
    for (int64_t i = 0; i < k->N; ++i) gamma[i] = 0x3F80;
    for (int64_t i = 0; i < k->ratio * width; ++i) ape[i] = k->ape;
    for (int64_t c = 0; c < blocks; ++c) bt[c] = (int32_t)(blocks - 1 - c);
    for (int64_t q = 0; q < T; ++q) {
        for (int64_t i = 0; i < width; ++i)
            k->kv[q * W2 + i] = k->halves ? ((i < k->N) == (i % 2 == 0) ? 1.0f : 3.0f) : (q & 1 ? 3.0f : 1.0f);
        for (int64_t i = width; i < W2; ++i) k->kv[q * W2 + i] = 0.0f;
        const int in = q < k->rows;
        pos[q] = in ? q : -1, req[q] = in ? 0 : -1, ss[q] = in ? bt[q / k->B] * k->B + q % k->B : -1;
        slot[q] = q == k->rows - 1 ? k->slot : in ? -1 : k->pad;
    }
    for (int64_t i = 0; i < blocks * k->B * W2; ++i) k->state[i] = NAN;
    memset(k->cache, V4T_POISON, (size_t)k->stride);
    const dsv4_compress_v4_desc_t d = {.num_tokens = T,
                                       .ratio = k->ratio,
                                       .head_dim = k->N,
                                       .kv_stride = W2,
                                       .state_block_rows = k->B,
                                       .state_blocks = blocks,
                                       .state_stride_block = k->B * W2,
                                       .state_stride_row = W2,
                                       .num_reqs = 1,
                                       .max_blocks = blocks,
                                       .block_table_stride = blocks,
                                       .page_tokens = k->P,
                                       .page_stride_bytes = k->stride,
                                       .num_pages = 1,
                                       .max_position = k->rows,
                                       .eps = 1e-20f};
    const dsv4_compress_v4_args_t a = {k->kv, ape, pos, ss, req, bt, gamma, cs, slot, k->state, k->cache};
    TH_OK(t, dsv4_compress_v4_ref(&d, &a));
    for (int64_t q = 0; q < k->rows; ++q) { /* every row saved: kv bits, score 0 + ape */
        const float *row = k->state + (bt[q / k->B] * k->B + q % k->B) * W2;
        int ok = !memcmp(row, k->kv + q * W2, (size_t)width * 4);
        for (int64_t i = width; i < W2; ++i) ok &= row[i] == k->ape;
        TH_CHECK(t, ok, "ratio %lld N=%lld: state row of position %lld", (long long)k->ratio, (long long)k->N,
                 (long long)q);
    }
    free(ape), free(cs), free(pos), free(ss), free(slot), free(req), free(bt), free(gamma);
}

static void kat_free(kat_t *k) { free(k->kv), free(k->state), free(k->cache); }

/* Bytes [from, to) of the cache still hold the poison. */
static void expect_poison(th_ctx_t *t, const char *what, const uint8_t *cache, int64_t from, int64_t to) {
    size_t touched = 0;
    for (int64_t i = from; i < to; ++i) touched += cache[i] != V4T_POISON;
    TH_CHECK(t, touched == 0, "%s: %zu bytes changed", what, touched);
}

/* Ratio 4, positions 0..7: position 7 writes the 1.0 record (at table row 4) into slot 2,
 * position 3 has no slot, the padding row writes the zero record into slot 0. */
static void kat_ratio4(th_ctx_t *t) {
    enum { P = 4, DATA = P * DSV4_KV_DATA_BYTES };
    kat_t k = {.ratio = 4,
               .N = 512,
               .rows = 8,
               .B = 4,
               .P = P,
               .stride = P * DSV4_KV_RECORD_BYTES,
               .slot = 2,
               .pad = 0,
               .halves = 1,
               .ape = 0.5f};
    kat_run(t, &k);
    expect_record(t, "ratio 4 position 7", k.cache + 2 * DSV4_KV_DATA_BYTES, k.cache + DATA + 2 * 8, 0);
    expect_record(t, "ratio 4 position -1", k.cache, k.cache + DATA, 1);
    expect_poison(t, "ratio 4 slot 1", k.cache, DSV4_KV_DATA_BYTES, 2 * DSV4_KV_DATA_BYTES);
    expect_poison(t, "ratio 4 slot 3", k.cache, 3 * DSV4_KV_DATA_BYTES, DATA);
    kat_free(&k);
}

/* Ratio 128, positions 0..127 in 16 blocks of 8 rows, kv rows of 1 and 3: position 127
 * pools to 2 everywhere and writes the 1.0 record (table row 0) into slot 1. */
static void kat_ratio128(th_ctx_t *t) {
    enum { P = 2 };
    kat_t k = {.ratio = 128,
               .N = 512,
               .rows = 128,
               .B = 8,
               .P = P,
               .stride = P * DSV4_KV_RECORD_BYTES,
               .slot = 1,
               .pad = -1,
               .halves = 0,
               .ape = 0.0f};
    kat_run(t, &k);
    expect_record(t, "ratio 128 position 127", k.cache + DSV4_KV_DATA_BYTES, k.cache + P * DSV4_KV_DATA_BYTES + 8, 0);
    expect_poison(t, "ratio 128 slot 0", k.cache, 0, DSV4_KV_DATA_BYTES);
    kat_free(&k);
}

/* The indexer's compressor (N = 128), ratio 4, as kat_ratio4 at a quarter of the width:
 * position 7 pools to 2, y = 1.0 with RoPE pairs (-0.25, 1.25); max |y| = 1.25 gives e = -8:
 * codes 0x78 (256), 0xE8 (-64), 0x7A (320) and the scale 2^-8 = 0x3B800000 as fp32, in
 * slot 1 of a page of 2 states (272 bytes: 264 used). */
static void kat_indexer(th_ctx_t *t) {
    enum { STRIDE = 272 };
    kat_t k = {.ratio = 4,
               .N = 128,
               .rows = 8,
               .B = 4,
               .P = 2,
               .stride = STRIDE,
               .slot = 1,
               .pad = -1,
               .halves = 1,
               .ape = 0.5f};
    kat_run(t, &k);
    uint8_t want[STRIDE];
    memset(want, V4T_POISON, STRIDE);
    memset(want + 128, 0x78, 64);
    for (int i = 0; i < 32; ++i) want[128 + 64 + 2 * i] = 0xE8, want[128 + 65 + 2 * i] = 0x7A;
    want[260] = 0x00, want[261] = 0x00, want[262] = 0x80, want[263] = 0x3B;
    th_cmp_bytes(t, "indexer state of position 7 (the page)", k.cache, want, STRIDE);
    kat_free(&k);
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
