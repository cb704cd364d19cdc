/*
 * dsv4_inv_rope on the CPU: hand-computed known answers (the synthetic rotary row
 * cos = 0.5, sin = 0.75; positions outside the table; NaN, inf and signed zeros), and the
 * reference against the independent model of cmp_test_util.c on random inputs, dense and
 * strided. Every element of o is compared: dims below 448, padding heads and the gaps
 * between rows must keep their input bits; guard bands frame o.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_compress.h"

/* o as the model says: a copy of the input with the live heads' pairs rotated. */
static void model_o(const dsv4_inv_rope_desc_t *d, int64_t st, int64_t sh, const int64_t *pos, const float *cs,
                    uint16_t *o) {
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        const int in = pos[t] >= 0 && pos[t] < d->max_position;
        for (int64_t h = 0; h < d->num_heads; ++h)
            for (int i = 0; i < 32; ++i) {
                uint16_t *x = o + t * st + h * sh + 448 + 2 * i;
                ct_model_inv_rope_pair(x[0], x[1], in ? cs[pos[t] * 64 + i] : 1.0f,
                                       in ? cs[pos[t] * 64 + 32 + i] : 0.0f, &x[0], &x[1]);
            }
    }
}

void test_inv_rope_known_answers(th_ctx_t *t) {
    enum { T = 4, HP = 3, N = T * HP * 512 };
    th_rng_t *r = th_rng(t);
    th_buf_t ob = th_buf_host(N * 2);
    uint16_t *o = th_ptr(&ob), want[N];
    float cs[4 * 64];
    const int64_t pos[T] = {1, -1, 4, 2}; /* 4 = max_position: outside */
    for (int i = 0; i < 4 * 64; ++i) cs[i] = i % 64 < 32 ? 0.5f : 0.75f;
    for (int i = 0; i < N; ++i) o[i] = (uint16_t)th_rng_u32(r); /* NoPE dims, padding head: junk */
    for (int tk = 0; tk < T; ++tk)
        for (int h = 0; h < 2; ++h) memset(o + (tk * HP + h) * 512 + 448, 0, 128); /* +0 pairs stay +0 */
    /* (token, head, pair, a, b) -> (y_a, y_b) */
    static const uint16_t kat[][7] = {
        {0, 0, 0, 0x3F80, 0x3F80, 0x3FA0, 0xBE80},  /* 1, 1 -> 1.25, -0.25 */
        {0, 0, 1, 0x7FC0, 0x3F80, 0x7FFF, 0x7FFF},  /* NaN a: NaN on both sides */
        {0, 0, 2, 0x7F80, 0x0000, 0x7F80, 0xFF80},  /* +inf, 0 -> +inf, -inf */
        {0, 1, 3, 0x4000, 0xC080, 0xC000, 0xC060},  /* 2, -4 -> -2, -3.5 */
        {3, 1, 31, 0x3F81, 0x3F81, 0x3FA1, 0xBE81}, /* 1.0078125: 1.259765625 rounds to 1.2578125 */
        {1, 0, 0, 0x3FC0, 0xC000, 0x3FC0, 0xC000},  /* position -1: unchanged */
        {1, 1, 5, 0x8000, 0x3F80, 0x0000, 0x3F80},  /* -0 + (1 * 0) = +0 */
        {1, 1, 6, 0x3F80, 0x7F80, 0x7FFF, 0x7F80},  /* inf * 0 = NaN in y_a */
        {2, 0, 9, 0x3FC0, 0xC000, 0x3FC0, 0xC000},  /* position = max_position: unchanged */
    };
    memcpy(want, o, sizeof want);
    for (size_t k = 0; k < sizeof kat / sizeof kat[0]; ++k) {
        const int at = (kat[k][0] * HP + kat[k][1]) * 512 + 448 + 2 * kat[k][2];
        o[at] = kat[k][3], o[at + 1] = kat[k][4];
        want[at] = kat[k][5], want[at + 1] = kat[k][6];
    }
    const dsv4_inv_rope_desc_t d = {.num_tokens = T,
                                    .num_heads = 2,
                                    .num_heads_padded = HP,
                                    .max_position = 4,
                                    .o_stride_token = HP * 512,
                                    .o_stride_head = 512};
    const dsv4_inv_rope_args_t a = {o, pos, cs};
    TH_OK(t, dsv4_inv_rope_ref(&d, &a));
    ct_cmp_bf16(t, "inv_rope known answers", o, want, N, 512);
    th_buf_guards_ok(t, &ob, "o");
    /* The independent model agrees on the same inputs. */
    for (size_t k = 0; k < sizeof kat / sizeof kat[0]; ++k) {
        uint16_t ya, yb;
        const int in = pos[kat[k][0]] >= 0 && pos[kat[k][0]] < 4;
        ct_model_inv_rope_pair(kat[k][3], kat[k][4], in ? 0.5f : 1.0f, in ? 0.75f : 0.0f, &ya, &yb);
        TH_CHECK(t, ya == kat[k][5] && yb == kat[k][6], "model: case %zu gives 0x%04x 0x%04x", k, ya, yb);
    }
    th_buf_free(&ob);
}

/* One random case: reference against the model over the whole o buffer. */
static void ref_case(th_ctx_t *t, int64_t T, int64_t H, int64_t Hp, int64_t sh, int64_t st, int64_t max_pos) {
    th_rng_t *r = th_rng(t);
    const int64_t rsh = sh ? sh : 512, rst = st ? st : Hp * rsh;
    const size_t n = (size_t)((T - 1) * rst + Hp * rsh);
    th_buf_t ob = th_buf_host(n * 2);
    uint16_t *o = th_ptr(&ob), *want = malloc(n * 2);
    float *cs = malloc((size_t)max_pos * 256);
    int64_t *pos = malloc((size_t)T * 8);
    for (size_t i = 0; i < n; ++i) o[i] = ct_bf16(r, 1);
    for (int64_t i = 0; i < max_pos * 64; ++i) /* random coefficients, some exact values */
        cs[i] = th_rng_range(r, 0, 7) ? (float)(3.0 * th_rng_unit(r) - 1.5) : (float)th_rng_range(r, -2, 2) * 0.5f;
    for (int64_t i = 0; i < T; ++i)
        pos[i] = th_rng_range(r, 0, 9) ? th_rng_range(r, 0, max_pos - 1) : th_rng_range(r, -3, 2 * max_pos);
    memcpy(want, o, n * 2);
    const dsv4_inv_rope_desc_t d = {T, H, Hp, rst, rsh, max_pos};
    model_o(&d, rst, rsh, pos, cs, want);
    const dsv4_inv_rope_args_t a = {o, pos, cs};
    TH_OK(t, dsv4_inv_rope_ref(&d, &a));
    char what[128];
    snprintf(what, sizeof what, "inv_rope T=%lld H=%lld of %lld strides %lld/%lld", (long long)T, (long long)H,
             (long long)Hp, (long long)rst, (long long)rsh);
    ct_cmp_bf16(t, what, o, want, n, 512);
    th_buf_guards_ok(t, &ob, "o");
    th_buf_free(&ob);
    free(want), free(cs), free(pos);
}

void test_inv_rope_vs_model(th_ctx_t *t) {
    ref_case(t, 300, 8, 8, 0, 0, 512);
    ref_case(t, 37, 5, 7, 0, 0, 64); /* padding heads */
    ref_case(t, 1, 1, 1, 0, 0, 1);
}

void test_inv_rope_strided(th_ctx_t *t) {
    ref_case(t, 50, 6, 9, 520, 9 * 520 + 24, 128); /* gaps between heads and tokens */
    ref_case(t, 20, 3, 3, 1024, 8192, 64);
    ref_case(t, 1, 4, 4, 512, 8, 32); /* one token: its stride is never used */
}
