/*
 * dsv4_engram_lookup on the CPU: hand-computed known answers (codes at enc 127, 120,
 * 100, 130, the scale bytes 0, 1, 254 and 255, NaN codes, the dead id -1, ids outside the
 * shard, columns past n_cols), every (code, enc) pair against the independent model, and
 * random cases (dense, strided, transposed ids, several D) against the model. Every
 * output element is compared; guard bands frame out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_compress.h"

enum { KD = 64 }; /* two scale blocks */

/* Table row k of the known answers: scale bytes, the codes of its first dims, the code of
 * every other dim, and the bf16 expected for each. */
typedef struct {
    uint8_t enc[2], fill;
    uint16_t fill_want[2]; /* per block */
    int n;
    uint8_t code[8];
    uint16_t want[8];
} kat_row_t;

static const kat_row_t kat_rows[] = {
    {{127, 127},
     0x00,
     {0x0000, 0x0000},
     8,
     {0x38, 0x7E, 0xB8, 0x01, 0x7F, 0xFF, 0x80, 0x00},
     {0x3F80, 0x43E0, 0xBF80, 0x3B00, 0x7FFF, 0x7FFF, 0x8000, 0x0000}}, /* 1, 448, -1, 2^-9, NaN, NaN, -0, 0 */
    {{120, 120}, 0x00, {0x0000, 0x0000}, 1, {0x7E}, {0x4060}},          /* 448 * 2^-7 = 3.5 */
    {{100, 100}, 0x00, {0x0000, 0x0000}, 1, {0x01}, {0x2D80}},          /* 2^-36 */
    {{130, 130}, 0x00, {0x0000, 0x0000}, 1, {0x5A}, {0x4320}},          /* 20 * 8 = 160 */
    {{0, 0}, 0x50, {0x0000, 0x0000}, 3, {0x38, 0xB8, 0x7E}, {0x0000, 0x8000, 0x0000}}, /* scale +0 */
    {{255, 255},
     0x38,
     {0x7F80, 0x7F80},
     4,
     {0x38, 0xB8, 0x00, 0x80},
     {0x7F80, 0xFF80, 0x7FFF, 0x7FFF}}, /* scale +inf: inf, -inf, 0 * inf = NaN */
    {{1, 1},
     0x00,
     {0x0000, 0x0000},
     3,
     {0x38, 0x30, 0x07},
     {0x0080, 0x0040, 0x0002}}, /* 2^-126, 2^-127 (subnormal kept), 7 * 2^-135 -> 2 * 2^-133 */
    {{254, 254}, 0x00, {0x0000, 0x0000}, 2, {0x38, 0x7E}, {0x7F00, 0x7F80}}, /* 2^127; 448 * 2^127 overflows */
    {{127, 128}, 0x38, {0x3F80, 0x4000}, 0, {0}, {0}},                       /* the second block's scale */
};
enum { KROWS = sizeof kat_rows / sizeof kat_rows[0], VSTART = 10, VEND = VSTART + KROWS + 1 };

void test_engram_known_answers(th_ctx_t *t) {
    uint8_t *values = aligned_alloc(64, (VEND - VSTART) * KD), scales[(VEND - VSTART) * 2];
    memset(values, 0x38, (VEND - VSTART) * KD);
    memset(scales, 127, sizeof scales);
    for (int k = 0; k < KROWS; ++k) {
        memset(values + k * KD, kat_rows[k].fill, KD);
        memcpy(values + k * KD, kat_rows[k].code, (size_t)kat_rows[k].n);
        scales[2 * k] = kat_rows[k].enc[0], scales[2 * k + 1] = kat_rows[k].enc[1];
    }
    /* 2 tokens, n_cols 8, this rank's columns 2..9 (8 and 9 are padding). Token 0 reads
     * rows 0..5, token 1 rows 6..8, then -1, an id below the shard and one at vocab_end. */
    const int32_t ids[2][8] = {{VSTART + 5, VSTART + 5, VSTART + 0, VSTART + 1, VSTART + 2, VSTART + 3, VSTART + 4,
                                VSTART + 5},
                               {VSTART, VSTART, VSTART + 6, VSTART + 7, VSTART + 8, -1, VSTART - 1, VEND}};
    const int row_of[2][8] = {{0, 1, 2, 3, 4, 5, -1, -1}, {6, 7, 8, -1, -1, -1, -1, -1}};
    th_buf_t ob = th_buf_host(2 * 8 * KD * 2);
    uint16_t *out = th_ptr(&ob), want[2 * 8 * KD];
    th_buf_poison(&ob, 0xA5);
    for (int tk = 0; tk < 2; ++tk)
        for (int j = 0; j < 8; ++j) {
            uint16_t *w = want + (tk * 8 + j) * KD;
            const int k = row_of[tk][j];
            for (int e = 0; e < KD; ++e) w[e] = k < 0 ? 0 : kat_rows[k].fill_want[e / 32];
            for (int e = 0; k >= 0 && e < kat_rows[k].n; ++e) w[e] = kat_rows[k].want[e];
        }
    const dsv4_engram_lookup_desc_t d = {.num_tokens = 2,
                                         .n_cols = 8,
                                         .head_start = 2,
                                         .local_heads = 8,
                                         .head_dim = KD,
                                         .vocab_start = VSTART,
                                         .vocab_end = VEND,
                                         .ids_stride_token = 8,
                                         .ids_stride_head = 1,
                                         .values_stride_bytes = KD,
                                         .scales_stride_bytes = KD / 32};
    const dsv4_engram_lookup_args_t a = {values, scales, &ids[0][0], out};
    TH_OK(t, dsv4_engram_lookup_ref(&d, &a));
    ct_cmp_bf16(t, "engram known answers", out, want, 2 * 8 * KD, KD);
    th_buf_guards_ok(t, &ob, "out");
    for (int k = 0; k < KROWS; ++k) /* the model agrees with the hand values */
        for (int e = 0; e < kat_rows[k].n; ++e)
            TH_CHECK(t, ct_model_engram(kat_rows[k].code[e], kat_rows[k].enc[0]) == kat_rows[k].want[e],
                     "model: code 0x%02x at enc %d gives 0x%04x", kat_rows[k].code[e], kat_rows[k].enc[0],
                     ct_model_engram(kat_rows[k].code[e], kat_rows[k].enc[0]));
    th_buf_free(&ob);
    free(values);
}

/* Table row e holds every code 0..255 at scale e: all 65,536 (code, enc) pairs. */
void test_engram_all_codes_x_enc(th_ctx_t *t) {
    uint8_t *values = aligned_alloc(64, 256 * 256), *scales = malloc(256 * 8);
    int32_t ids[256];
    th_buf_t ob = th_buf_host(256 * 256 * 2);
    uint16_t *out = th_ptr(&ob), *want = malloc(256 * 256 * 2);
    for (int e = 0; e < 256; ++e) {
        ids[e] = 255 - e; /* token e reads row 255 - e */
        for (int c = 0; c < 256; ++c) values[e * 256 + c] = (uint8_t)c;
        memset(scales + e * 8, e, 8);
        for (int c = 0; c < 256; ++c) want[(255 - e) * 256 + c] = ct_model_engram((uint8_t)c, (uint8_t)e);
    }
    const dsv4_engram_lookup_desc_t d = {.num_tokens = 256,
                                         .n_cols = 1,
                                         .local_heads = 1,
                                         .head_dim = 256,
                                         .vocab_end = 256,
                                         .ids_stride_token = 1,
                                         .ids_stride_head = 1,
                                         .values_stride_bytes = 256,
                                         .scales_stride_bytes = 256 / 32};
    const dsv4_engram_lookup_args_t a = {values, scales, ids, out};
    TH_OK(t, dsv4_engram_lookup_ref(&d, &a));
    ct_cmp_bf16(t, "engram (code, enc) pairs", out, want, 256 * 256, 256);
    th_buf_guards_ok(t, &ob, "out");
    th_buf_free(&ob);
    free(values), free(scales), free(want);
}

static void ref_case(th_ctx_t *t, dsv4_engram_lookup_desc_t shape) {
    ct_engram_case_t c;
    ct_engram_case(th_rng(t), &shape, &c);
    th_buf_t ob = th_buf_host(c.out_elems * 2 + 2);
    uint16_t *out = th_ptr(&ob), *want = malloc(c.out_elems * 2 + 2);
    th_buf_poison(&ob, 0xEE);
    ct_engram_model(&c, want);
    const dsv4_engram_lookup_args_t a = {c.values, c.scales, c.ids, out};
    TH_OK(t, dsv4_engram_lookup_ref(&c.d, &a));
    char what[160];
    ct_engram_name(what, sizeof what, "reference", &shape);
    ct_cmp_bf16(t, what, out, want, c.out_elems, (size_t)shape.head_dim);
    th_buf_guards_ok(t, &ob, "out");
    th_buf_free(&ob);
    free(want);
    ct_engram_case_free(&c);
}

void test_engram_vs_model(th_ctx_t *t) {
    for (int i = 0; i < CT_ENGRAM_SHAPES; ++i) ref_case(t, ct_engram_shapes[i]);
}
