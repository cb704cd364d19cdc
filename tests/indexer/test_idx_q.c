/*
 * dsv4_indexer_q on the CPU: the hand-computed known answers (a synthetic rotary row
 * cos = 0.5, sin = 0.75), and the reference against the independent model of
 * idx_test_util.c on random rows (magnitudes 2^-42 .. 2^41, zero heads, amax at 1.75 * 2^k,
 * NaN and inf, positions outside the table), dense and strided. Every byte of q8 and w
 * is compared; guard bands frame them; the inputs stay unmodified.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "test_indexer.h"

static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

void test_idx_q_known_answers(th_ctx_t *t) {
    uint16_t q[128], w_raw[2] = {0x3F80, 0xBEC0}; /* 1.0 and -0.375 */
    float cs[2 * 64];
    const int64_t pos[2] = {1, 1};
    for (int i = 0; i < 128; ++i) cs[i] = i < 64 ? 9.0f : (i % 64 < 32 ? 0.5f : 0.75f); /* row 1 is the KAT row */
    for (int d = 0; d < 64; ++d) q[d] = dsv4_f32_to_bf16((float)(d - 32) / 16.0f);
    for (int i = 0; i < 32; ++i) q[64 + 2 * i] = dsv4_f32_to_bf16(1.0f + (float)i / 64.0f), q[65 + 2 * i] = 0xBF00;
    uint16_t qq[2 * 128];
    memcpy(qq, q, 256), memcpy(qq + 128, q, 256); /* two tokens, one head each */
    th_buf_t q8b = th_buf_host(256), wb = th_buf_host(8);
    uint8_t *q8 = th_ptr(&q8b);
    float *w = th_ptr(&wb);
    /* One head with the 32-head scale (set explicitly); the softmax scale by default. */
    const dsv4_indexer_q_desc_t d = {.num_tokens = 2,
                                     .num_heads = 1,
                                     .max_position = 2,
                                     .head_scale = dsv4_bits_f32(0x3E3504F3u),
                                     .q_stride_token = 1 * 128,
                                     .q_stride_head = 128,
                                     .w_stride_token = 1};
    const dsv4_indexer_q_args_t a = {qq, w_raw, pos, cs, q8, w};
    TH_OK(t, dsv4_indexer_q_ref(&d, &a));
    /* (dim, code): amax 2.0 -> e = -7, s = 2^-7; values times 128 */
    static const uint8_t kat[][2] = {
        {0, 0xF8},   /* -2.0 -> -256 */
        {1, 0xF8},   /* -1.9375 -> -248: tie between 240 and 256, to the even code */
        {16, 0xF0},  /* -1.0 -> -128 */
        {31, 0xD0},  /* -0.0625 -> -8 */
        {32, 0x00},  /* 0.0 */
        {47, 0x6F},  /* 0.9375 -> 120 */
        {63, 0x78},  /* 1.9375 -> 248 ties to 256 */
        {64, 0x6E},  /* y_a = 0.875 -> 112 */
        {65, 0x68},  /* y_b = 0.5 -> 64 */
        {66, 0x6E},  /* 0.8828125 -> 113, rounds to 112 */
        {67, 0x68},  /* 0.51171875 -> 65.5, rounds to 64 */
        {126, 0x71}, /* 1.1171875 -> 143 -> 144 */
        {127, 0x6E}, /* 0.86328125 -> 110.5 -> 112 */
    };
    for (size_t k = 0; k < sizeof kat / sizeof kat[0]; ++k)
        for (int tk = 0; tk < 2; ++tk)
            TH_CHECK(t, q8[tk * 128 + kat[k][0]] == kat[k][1], "token %d dim %d: code 0x%02x, want 0x%02x", tk,
                     kat[k][0], q8[tk * 128 + kat[k][0]], kat[k][1]);
    /* ((1 * 2^-7) * fl32(128^-0.5)) * fl32(32^-0.5): fl32(sqrt 2)^2 rounds below 2 */
    TH_CHECK(t, f32_bits(w[0]) == 0x38FFFFFFu, "w = 0x%08x, want 0x38FFFFFF", f32_bits(w[0]));
    TH_CHECK(t, f32_bits(w[1]) == 0xB83FFFFFu, "w = 0x%08x, want 0xB83FFFFF (w_raw -0.375)", f32_bits(w[1]));
    /* The model agrees on every code and on w. */
    uint8_t mc[128];
    float mw;
    it_model_q_row(q, 1, 2, cs, w_raw[0], dsv4_bits_f32(0x3DB504F3u), dsv4_bits_f32(0x3E3504F3u), mc, &mw);
    th_cmp_bytes(t, "model vs reference codes", mc, q8, 128);
    TH_CHECK(t, f32_bits(mw) == 0x38FFFFFFu, "model w = 0x%08x", f32_bits(mw));
    th_buf_guards_ok(t, &q8b, "q8"), th_buf_guards_ok(t, &wb, "w");
    /* An all-zero head: e = -22, zero codes, w = w_raw * 2^-22 * SS * HS. */
    for (int i = 0; i < 128; ++i) qq[i] = 0;
    TH_OK(t, dsv4_indexer_q_ref(&d, &a));
    for (int i = 0; i < 128; ++i) TH_CHECK(t, q8[i] == 0x00, "zero head dim %d: 0x%02x", i, q8[i]);
    const float want0 = (0x1p-22f * dsv4_bits_f32(0x3DB504F3u)) * dsv4_bits_f32(0x3E3504F3u);
    TH_CHECK(t, w[0] == want0, "zero head: w %a, want %a", (double)w[0], (double)want0);
    /* NaN in a NoPE dim: ignored by amax, code 0x7F; inf: scale +inf, others +-0, w inf. */
    memcpy(qq, q, 256), memcpy(qq + 128, q, 256);
    qq[5] = 0x7FC0, qq[128 + 7] = 0xFF80;
    TH_OK(t, dsv4_indexer_q_ref(&d, &a));
    TH_CHECK(t, q8[5] == 0x7F && q8[0] == 0xF8, "NaN: 0x%02x, dim 0 0x%02x", q8[5], q8[0]);
    TH_CHECK(t, q8[128 + 7] == 0x7F && q8[128] == 0x80 && q8[128 + 40] == 0x00 && f32_bits(w[1]) == 0xFF800000u,
             "inf: 0x%02x 0x%02x 0x%02x w 0x%08x", q8[128 + 7], q8[128], q8[128 + 40], f32_bits(w[1]));
    th_buf_free(&q8b), th_buf_free(&wb);
}

/* One random case: the reference against the model over every byte of q8 and w. */
static void ref_case(th_ctx_t *t, dsv4_indexer_q_desc_t shape) {
    it_q_case_t c;
    it_q_case(th_rng(t), &shape, &c);
    const int64_t T = shape.num_tokens, H = shape.num_heads;
    const int64_t sh = shape.q_stride_head ? shape.q_stride_head : 128;
    const int64_t st = shape.q_stride_token ? shape.q_stride_token : H * sh;
    const int64_t sw = shape.w_stride_token ? shape.w_stride_token : H;
    const float ss = shape.softmax_scale != 0.0f ? shape.softmax_scale : dsv4_bits_f32(0x3DB504F3u);
    const float hs = shape.head_scale != 0.0f ? shape.head_scale : (float)(1.0 / sqrt((double)H));
    th_buf_t q8b = th_buf_host((size_t)(T * H * 128) + 1), wb = th_buf_host((size_t)(T * H) * 4 + 4);
    th_buf_poison(&q8b, 0xA5), th_buf_poison(&wb, 0xA5);
    uint8_t *want = malloc((size_t)(T * H * 128) + 1), *keep_q = malloc(c.q_elems * 2);
    float *want_w = malloc((size_t)(T * H) * 4 + 4);
    memcpy(keep_q, c.q, c.q_elems * 2);
    for (int64_t tk = 0; tk < T; ++tk)
        for (int64_t h = 0; h < H; ++h)
            it_model_q_row(c.q + tk * st + h * sh, c.pos[tk], shape.max_position, c.cs, c.w_raw[tk * sw + h], ss, hs,
                           want + (tk * H + h) * 128, want_w + tk * H + h);
    const dsv4_indexer_q_args_t a = {c.q, c.w_raw, c.pos, c.cs, th_ptr(&q8b), th_ptr(&wb)};
    TH_OK(t, dsv4_indexer_q_ref(&c.d, &a));
    char what[128];
    snprintf(what, sizeof what, "indexer_q T=%lld H=%lld strides %lld/%lld/%lld", (long long)T, (long long)H,
             (long long)st, (long long)sh, (long long)sw);
    th_cmp_bytes(t, what, th_ptr(&q8b), want, (size_t)(T * H * 128));
    th_cmp_bytes(t, "w", th_ptr(&wb), want_w, (size_t)(T * H) * 4);
    th_buf_guards_ok(t, &q8b, "q8"), th_buf_guards_ok(t, &wb, "w");
    TH_CHECK(t, !memcmp(keep_q, c.q, c.q_elems * 2), "q modified");
    th_buf_free(&q8b), th_buf_free(&wb);
    free(want), free(want_w), free(keep_q);
    it_q_case_free(&c);
}

void test_idx_q_vs_model(th_ctx_t *t) {
    ref_case(t, (dsv4_indexer_q_desc_t){.num_tokens = 40,
                                        .num_heads = 32,
                                        .max_position = 256,
                                        .q_stride_token = 32 * 128,
                                        .q_stride_head = 128,
                                        .w_stride_token = 32});
    ref_case(t, (dsv4_indexer_q_desc_t){.num_tokens = 9,
                                        .num_heads = 64,
                                        .max_position = 64,
                                        .q_stride_token = 64 * 128,
                                        .q_stride_head = 128,
                                        .w_stride_token = 64}); /* V4 */
    ref_case(t, (dsv4_indexer_q_desc_t){.num_tokens = 5,
                                        .num_heads = 3,
                                        .max_position = 16,
                                        .softmax_scale = 0.3f,
                                        .head_scale = 2.0f,
                                        .q_stride_token = 3 * 128,
                                        .q_stride_head = 128,
                                        .w_stride_token = 3});
    ref_case(t, (dsv4_indexer_q_desc_t){.num_tokens = 1,
                                        .num_heads = 1,
                                        .max_position = 1,
                                        .q_stride_token = 1 * 128,
                                        .q_stride_head = 128,
                                        .w_stride_token = 1});
}

void test_idx_q_strided(th_ctx_t *t) {
    ref_case(t, (dsv4_indexer_q_desc_t){.num_tokens = 17,
                                        .num_heads = 32,
                                        .q_stride_head = 136,
                                        .q_stride_token = 32 * 136 + 64,
                                        .w_stride_token = 37,
                                        .max_position = 128});
    ref_case(t, (dsv4_indexer_q_desc_t){.num_tokens = 6,
                                        .num_heads = 4,
                                        .q_stride_token = 8192,
                                        .w_stride_token = 9,
                                        .max_position = 32,
                                        .q_stride_head = 128});
    ref_case(t, (dsv4_indexer_q_desc_t){.num_tokens = 1,
                                        .num_heads = 2,
                                        .q_stride_token = 8,
                                        .max_position = 4,
                                        .q_stride_head = 128,
                                        .w_stride_token = 2});
}
