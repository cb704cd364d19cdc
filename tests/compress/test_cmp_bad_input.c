/*
 * Bad input on the host: every check of both operators, each through every public
 * function it guards (check, workspace_size, the run call, the reference). Each must
 * return the stated status with a message naming the operator, the field and the value,
 * and write nothing: the reference runs on host buffers compared afterwards, and the run
 * call gets a NULL stream, so a check missing before the stream check shows in the
 * message. The GPU twin (test_cmp_gpu.c) checks device buffers stay untouched. Also the
 * plans: defaults resolved as the header says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_common.h"
#include "bad_input.h"
#include "test_compress.h"

#define MIS(p, bytes) ((void *)((char *)(p) + (bytes)))

TH_EXPECT_FNS(ir_expect, inv_rope, dsv4_inv_rope_desc_t, dsv4_inv_rope_args_t)
TH_EXPECT_FNS(eg_expect, engram_lookup, dsv4_engram_lookup_desc_t, dsv4_engram_lookup_args_t)

/* ---- inv_rope ------------------------------------------------------------------------ */
void test_cmp_bad_input_inv_rope(th_ctx_t *t) {
    enum { N = 4 * 3 * 512 };
    uint16_t *o = aligned_alloc(64, N * 2 + 64), *keep = malloc(N * 2);
    int64_t *pos = aligned_alloc(64, 64);
    float *cs = aligned_alloc(64, 8 * 256);
    for (int i = 0; i < N; ++i) o[i] = (uint16_t)(0x3F00 + i % 97);
    for (int i = 0; i < 4; ++i) pos[i] = i;
    for (int i = 0; i < 8 * 64; ++i) cs[i] = 0.5f;
    memcpy(keep, o, N * 2);
    const dsv4_inv_rope_desc_t good = {.num_tokens = 4,
                                       .num_heads = 2,
                                       .num_heads_padded = 3,
                                       .max_position = 8,
                                       .o_stride_token = 3 * 512,
                                       .o_stride_head = 512};
    const dsv4_inv_rope_args_t ga = {o, pos, cs};
    ir_expect_null(t, &good, &ga);
    dsv4_inv_rope_desc_t d;
#define DCASE(assign, st, field, value) (d = good, assign, ir_expect(t, &d, &ga, 1, st, field, value))
    DCASE(d.num_tokens = -1, DSV4_STATUS_INVALID_VALUE, "num_tokens", "-1");
    DCASE(d.num_tokens = (int64_t)INT32_MAX + 1, DSV4_STATUS_INVALID_VALUE, "num_tokens", "2147483648");
    DCASE(d.num_heads = 0, DSV4_STATUS_INVALID_VALUE, "num_heads", "0");
    DCASE(d.num_heads = 1025, DSV4_STATUS_INVALID_VALUE, "num_heads", "1025");
    DCASE(d.num_heads_padded = 1, DSV4_STATUS_INVALID_VALUE, "num_heads_padded", "1");
    DCASE(d.num_heads_padded = 1025, DSV4_STATUS_INVALID_VALUE, "num_heads_padded", "1025");
    DCASE(d.max_position = 0, DSV4_STATUS_INVALID_VALUE, "max_position", "0");
    DCASE(d.max_position = -5, DSV4_STATUS_INVALID_VALUE, "max_position", "-5");
    DCASE(d.o_stride_head = 504, DSV4_STATUS_INVALID_VALUE, "o_stride_head", "504");
    DCASE(d.o_stride_head = 516, DSV4_STATUS_MISALIGNED, "o_stride_head", "516");
    DCASE(d.o_stride_head = INT64_MAX / 4, DSV4_STATUS_INVALID_VALUE, "o_stride_head", "overflows");
    DCASE(d.o_stride_token = 1000, DSV4_STATUS_INVALID_VALUE, "o_stride_token", "1536");
    DCASE(d.o_stride_token = 1540, DSV4_STATUS_MISALIGNED, "o_stride_token", "1540");
    DCASE(d.o_stride_token = INT64_MAX / 4, DSV4_STATUS_INVALID_VALUE, "o_stride_token", "overflows");
#undef DCASE
    dsv4_inv_rope_args_t a;
#define ACASE(assign, st, field) (a = ga, assign, ir_expect(t, &good, &a, 0, st, field, NULL))
    ACASE(a.o = NULL, DSV4_STATUS_NULL_POINTER, "o");
    ACASE(a.position_ids = NULL, DSV4_STATUS_NULL_POINTER, "position_ids");
    ACASE(a.cos_sin_cache = NULL, DSV4_STATUS_NULL_POINTER, "cos_sin_cache");
    ACASE(a.o = MIS(o, 2), DSV4_STATUS_MISALIGNED, "o");
    ACASE(a.position_ids = MIS(pos, 4), DSV4_STATUS_MISALIGNED, "position_ids");
    ACASE(a.cos_sin_cache = MIS(cs, 8), DSV4_STATUS_MISALIGNED, "cos_sin_cache");
#undef ACASE
    TH_CHECK(t, memcmp(o, keep, N * 2) == 0, "a failing call wrote into o");
    free(o), free(keep), free(pos), free(cs);
}

/* ---- engram_lookup ------------------------------------------------------------------- */
void test_cmp_bad_input_engram(th_ctx_t *t) {
    enum { T = 4, COLS = 4, D = 256, ROWS = 16, OUT = T * 2 * D };
    uint8_t *values = aligned_alloc(64, ROWS * D + 64), *scales = aligned_alloc(64, ROWS * 8 + 64);
    int32_t *ids = aligned_alloc(64, T * COLS * 4 + 64);
    uint16_t *out = aligned_alloc(64, OUT * 2 + 64), *keep = malloc(OUT * 2);
    memset(values, 0x38, ROWS * D), memset(scales, 127, ROWS * 8);
    for (int i = 0; i < T * COLS; ++i) ids[i] = i % ROWS;
    memset(out, 0x5C, OUT * 2);
    memcpy(keep, out, OUT * 2);
    const dsv4_engram_lookup_desc_t good = {.num_tokens = T,
                                            .n_cols = COLS,
                                            .head_start = 2,
                                            .local_heads = 2,
                                            .head_dim = D,
                                            .vocab_end = ROWS,
                                            .ids_stride_token = COLS,
                                            .ids_stride_head = 1,
                                            .values_stride_bytes = D,
                                            .scales_stride_bytes = D / 32};
    const dsv4_engram_lookup_args_t ga = {values, scales, ids, out};
    eg_expect_null(t, &good, &ga);
    dsv4_engram_lookup_desc_t d;
#define DCASE(assign, st, field, value) (d = good, assign, eg_expect(t, &d, &ga, 1, st, field, value))
    DCASE(d.num_tokens = -1, DSV4_STATUS_INVALID_VALUE, "num_tokens", "-1");
    DCASE(d.n_cols = 0, DSV4_STATUS_INVALID_VALUE, "n_cols", "0");
    DCASE(d.n_cols = 65537, DSV4_STATUS_INVALID_VALUE, "n_cols", "65537");
    DCASE(d.head_start = -1, DSV4_STATUS_INVALID_VALUE, "head_start", "-1");
    DCASE(d.local_heads = 0, DSV4_STATUS_INVALID_VALUE, "local_heads", "0");
    DCASE(d.local_heads = 65537, DSV4_STATUS_INVALID_VALUE, "local_heads", "65537");
    DCASE(d.head_dim = 16, DSV4_STATUS_INVALID_VALUE, "head_dim", "16");
    DCASE(d.head_dim = 4128, DSV4_STATUS_INVALID_VALUE, "head_dim", "4128");
    DCASE(d.head_dim = 48, DSV4_STATUS_INVALID_VALUE, "head_dim", "48");
    DCASE(d.vocab_start = -1, DSV4_STATUS_INVALID_VALUE, "vocab_start", "-1");
    DCASE((d.vocab_start = 5, d.vocab_end = 4), DSV4_STATUS_INVALID_VALUE, "vocab_end", "4");
    DCASE(d.vocab_end = (int64_t)INT32_MAX + 2, DSV4_STATUS_INVALID_VALUE, "vocab_end", "2147483649");
    DCASE(d.ids_stride_head = -1, DSV4_STATUS_INVALID_VALUE, "ids_stride_head", "-1");
    DCASE(d.ids_stride_head = INT64_MAX / 8, DSV4_STATUS_INVALID_VALUE, "ids_stride_head", "1152921504606846975");
    DCASE(d.ids_stride_token = -3, DSV4_STATUS_INVALID_VALUE, "ids_stride_token", "-3");
    DCASE(d.ids_stride_token = INT64_MAX / 8, DSV4_STATUS_INVALID_VALUE, "ids_stride_token", "1152921504606846975");
    DCASE(d.values_stride_bytes = 128, DSV4_STATUS_INVALID_VALUE, "values_stride_bytes", "128");
    DCASE(d.values_stride_bytes = 264, DSV4_STATUS_MISALIGNED, "values_stride_bytes", "264");
    DCASE(d.values_stride_bytes = INT64_MAX / 4, DSV4_STATUS_INVALID_VALUE, "values_stride_bytes",
          "2305843009213693951");
    DCASE(d.scales_stride_bytes = 4, DSV4_STATUS_INVALID_VALUE, "scales_stride_bytes", "4");
    DCASE(d.scales_stride_bytes = INT64_MAX / 4, DSV4_STATUS_INVALID_VALUE, "scales_stride_bytes",
          "2305843009213693951");
#undef DCASE
    dsv4_engram_lookup_args_t a;
#define ACASE(assign, st, field) (a = ga, assign, eg_expect(t, &good, &a, 0, st, field, NULL))
    ACASE(a.values = NULL, DSV4_STATUS_NULL_POINTER, "values");
    ACASE(a.scales = NULL, DSV4_STATUS_NULL_POINTER, "scales");
    ACASE(a.ids = NULL, DSV4_STATUS_NULL_POINTER, "ids");
    ACASE(a.out = NULL, DSV4_STATUS_NULL_POINTER, "out");
    ACASE(a.values = MIS(values, 8), DSV4_STATUS_MISALIGNED, "values");
    ACASE(a.ids = MIS(ids, 2), DSV4_STATUS_MISALIGNED, "ids");
    ACASE(a.out = MIS(out, 8), DSV4_STATUS_MISALIGNED, "out");
#undef ACASE
    TH_CHECK(t, memcmp(out, keep, OUT * 2) == 0, "a failing call wrote into out");
    /* scales have no alignment rule */
    a = ga, a.scales = MIS(scales, 3);
    TH_OK(t, dsv4_engram_lookup_ref(&good, &a));
    free(values), free(scales), free(ids), free(out), free(keep);
}

/* ---- plans ---------------------------------------------------------------------------- */
void test_cmp_plans(th_ctx_t *t) {
    inv_rope_plan_t ip;
    const dsv4_inv_rope_desc_t id = {
        .num_tokens = 10, .num_heads = 3, .max_position = 4, .o_stride_token = 3 * 512, .o_stride_head = 512};
    TH_OK(t, inv_rope_plan(&id, &ip));
    TH_CHECK(t, ip.heads_padded == 3 && ip.o_stride_head == 512 && ip.o_stride_token == 1536 && ip.units == 240,
             "inv_rope defaults: %lld %lld %lld %lld", (long long)ip.heads_padded, (long long)ip.o_stride_head,
             (long long)ip.o_stride_token, (long long)ip.units);
    const dsv4_inv_rope_desc_t id1 = {.num_tokens = 1,
                                      .num_heads = 2,
                                      .num_heads_padded = 4,
                                      .o_stride_head = 520,
                                      .max_position = 4,
                                      .o_stride_token = 4 * 520};
    TH_OK(t, inv_rope_plan(&id1, &ip));
    TH_CHECK(t, ip.o_stride_token == 2080 && ip.units == 16, "inv_rope padded: %lld %lld", (long long)ip.o_stride_token,
             (long long)ip.units);
    engram_plan_t ep;
    const dsv4_engram_lookup_desc_t ed = {.num_tokens = 5,
                                          .n_cols = 12,
                                          .local_heads = 4,
                                          .head_dim = 96,
                                          .vocab_end = 9,
                                          .ids_stride_token = 12,
                                          .ids_stride_head = 1,
                                          .values_stride_bytes = 96,
                                          .scales_stride_bytes = 96 / 32};
    TH_OK(t, engram_plan(&ed, &ep));
    TH_CHECK(t,
             ep.ids_stride_head == 1 && ep.ids_stride_token == 12 && ep.values_stride_bytes == 96 &&
                 ep.scales_stride_bytes == 3 && ep.rows == 20 && ep.units == 120,
             "engram defaults: %lld %lld %lld %lld %lld %lld", (long long)ep.ids_stride_head,
             (long long)ep.ids_stride_token, (long long)ep.values_stride_bytes, (long long)ep.scales_stride_bytes,
             (long long)ep.rows, (long long)ep.units);
    const dsv4_engram_lookup_desc_t ed2 = {.num_tokens = 5,
                                           .n_cols = 12,
                                           .local_heads = 4,
                                           .head_dim = 96,
                                           .ids_stride_head = 5,
                                           .vocab_end = 9,
                                           .ids_stride_token = 0,
                                           .values_stride_bytes = 96,
                                           .scales_stride_bytes = 96 / 32};
    TH_CHECK(t, engram_plan(&ed2, &ep) == DSV4_STATUS_INVALID_VALUE && strstr(dsv4_last_error(), "ids_stride_token"),
             "engram ids_stride_token = 0 over 5 tokens: %s", dsv4_last_error());
}
