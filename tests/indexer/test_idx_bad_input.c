/*
 * Bad input on the host: every check of both operators, each through every public
 * function it guards (check, workspace_size, the run call, the reference). Each must
 * return the stated status with a message naming the operator, the field and the value,
 * and write nothing: the reference runs on host buffers compared afterwards, and the run
 * call gets a NULL stream, so a check missing before the stream check shows in the
 * message. Also the plans: defaults resolved as the header says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "indexer/indexer_common.h"
#include "bad_input.h"
#include "test_indexer.h"

#define MIS(p, bytes) ((void *)((char *)(p) + (bytes)))

TH_EXPECT_FNS(q_expect, indexer_q, dsv4_indexer_q_desc_t, dsv4_indexer_q_args_t)
TH_EXPECT_FNS(k_expect, indexer_k_store, dsv4_indexer_k_store_desc_t, dsv4_indexer_k_store_args_t)

void test_idx_bad_input_q(th_ctx_t *t) {
    enum { T = 4, H = 2, N = T * H * 128 };
    uint16_t *q = th_aligned_alloc(64, N * 2 + 64), *wr = th_aligned_alloc(64, 64);
    int64_t *pos = th_aligned_alloc(64, 64);
    float *cs = th_aligned_alloc(64, 8 * 256), *w = th_aligned_alloc(64, 64), wkeep[T * H];
    uint8_t *q8 = th_aligned_alloc(64, N + 64), *keep = malloc(N);
    for (int i = 0; i < N; ++i) q[i] = (uint16_t)(0x3F00 + i % 97);
    for (int i = 0; i < T * H; ++i) wr[i] = 0x3F80, w[i] = 7.0f;
    for (int i = 0; i < T; ++i) pos[i] = i;
    for (int i = 0; i < 8 * 64; ++i) cs[i] = 0.5f;
    memset(q8, 0x5A, N);
    memcpy(keep, q8, N), memcpy(wkeep, w, sizeof wkeep);
    const dsv4_indexer_q_desc_t good = {.num_tokens = T,
                                        .num_heads = H,
                                        .max_position = 8,
                                        .q_stride_token = H * 128,
                                        .q_stride_head = 128,
                                        .w_stride_token = H};
    const dsv4_indexer_q_args_t ga = {q, wr, pos, cs, q8, w};
    q_expect_null(t, &good, &ga);
    dsv4_indexer_q_desc_t d;
#define DCASE(assign, st, field, value) (d = good, assign, q_expect(t, &d, &ga, 1, st, field, value))
    DCASE(d.num_tokens = -1, DSV4_STATUS_INVALID_VALUE, "num_tokens", "-1");
    DCASE(d.num_tokens = (int64_t)INT32_MAX + 1, DSV4_STATUS_INVALID_VALUE, "num_tokens", "2147483648");
    DCASE(d.num_heads = 0, DSV4_STATUS_INVALID_VALUE, "num_heads", "0");
    DCASE(d.num_heads = 129, DSV4_STATUS_INVALID_VALUE, "num_heads", "129");
    DCASE(d.max_position = 0, DSV4_STATUS_INVALID_VALUE, "max_position", "0");
    DCASE(d.q_stride_head = 120, DSV4_STATUS_INVALID_VALUE, "q_stride_head", "120");
    DCASE(d.q_stride_head = 132, DSV4_STATUS_MISALIGNED, "q_stride_head", "132");
    DCASE(d.q_stride_head = INT64_MAX / 16 * 8, DSV4_STATUS_INVALID_VALUE, "q_stride_head", "overflows");
    DCASE(d.q_stride_token = 200, DSV4_STATUS_INVALID_VALUE, "q_stride_token", "256");
    DCASE(d.q_stride_token = 260, DSV4_STATUS_MISALIGNED, "q_stride_token", "260");
    DCASE(d.q_stride_token = INT64_MAX / 4, DSV4_STATUS_INVALID_VALUE, "q_stride_token", "overflows");
    DCASE(d.w_stride_token = 1, DSV4_STATUS_INVALID_VALUE, "w_stride_token", "1");
    DCASE(d.w_stride_token = INT64_MAX / 2, DSV4_STATUS_INVALID_VALUE, "w_stride_token", "overflows");
    DCASE(d.softmax_scale = -1.0f, DSV4_STATUS_INVALID_VALUE, "softmax_scale", "-1");
    DCASE(d.softmax_scale = dsv4_bits_f32(0x7FC00000u), DSV4_STATUS_INVALID_VALUE, "softmax_scale", "nan");
    DCASE(d.head_scale = dsv4_bits_f32(0x7F800000u), DSV4_STATUS_INVALID_VALUE, "head_scale", "inf");
#undef DCASE
    dsv4_indexer_q_args_t a;
#define ACASE(assign, st, field) (a = ga, assign, q_expect(t, &good, &a, 0, st, field, NULL))
    ACASE(a.q = NULL, DSV4_STATUS_NULL_POINTER, "q");
    ACASE(a.w_raw = NULL, DSV4_STATUS_NULL_POINTER, "w_raw");
    ACASE(a.positions = NULL, DSV4_STATUS_NULL_POINTER, "positions");
    ACASE(a.cos_sin = NULL, DSV4_STATUS_NULL_POINTER, "cos_sin");
    ACASE(a.q8 = NULL, DSV4_STATUS_NULL_POINTER, "q8");
    ACASE(a.w = NULL, DSV4_STATUS_NULL_POINTER, "w");
    ACASE(a.q = MIS(q, 8), DSV4_STATUS_MISALIGNED, "q");
    ACASE(a.w_raw = MIS(wr, 1), DSV4_STATUS_MISALIGNED, "w_raw");
    ACASE(a.positions = MIS(pos, 4), DSV4_STATUS_MISALIGNED, "positions");
    ACASE(a.cos_sin = MIS(cs, 8), DSV4_STATUS_MISALIGNED, "cos_sin");
    ACASE(a.q8 = MIS(q8, 8), DSV4_STATUS_MISALIGNED, "q8");
    ACASE(a.w = MIS(w, 2), DSV4_STATUS_MISALIGNED, "w");
#undef ACASE
    TH_CHECK(t, memcmp(q8, keep, N) == 0, "a failing call wrote into q8");
    TH_CHECK(t, memcmp(w, wkeep, sizeof wkeep) == 0, "a failing call wrote into w");
    free(q), free(wr), free(pos), free(cs), free(w), free(q8), free(keep);
}

void test_idx_bad_input_k(th_ctx_t *t) {
    enum { T = 4, P = 16, STRIDE = 16 * 132 + 16, PAGES = 2 };
    uint16_t *k = th_aligned_alloc(64, T * 256 + 64), *gamma = th_aligned_alloc(64, 256 + 64);
    int64_t *pos = th_aligned_alloc(64, 64), *slot = th_aligned_alloc(64, 64);
    float *cs = th_aligned_alloc(64, 8 * 256);
    uint8_t *cache = th_aligned_alloc(64, PAGES * STRIDE + 64), *keep = malloc(PAGES * STRIDE);
    for (int i = 0; i < T * 128; ++i) k[i] = (uint16_t)(0x3F00 + i % 97);
    for (int i = 0; i < 128; ++i) gamma[i] = 0x3F80;
    for (int i = 0; i < T; ++i) pos[i] = i, slot[i] = i;
    for (int i = 0; i < 8 * 64; ++i) cs[i] = 0.5f;
    memset(cache, 0x5A, PAGES * STRIDE);
    memcpy(keep, cache, PAGES * STRIDE);
    const dsv4_indexer_k_store_desc_t good = {.num_tokens = T,
                                              .ratio = 1,
                                              .max_position = 8,
                                              .page_tokens = P,
                                              .page_stride_bytes = STRIDE,
                                              .num_pages = PAGES,
                                              .eps = 1e-6f,
                                              .k_stride_row = 128};
    const dsv4_indexer_k_store_args_t ga = {k, gamma, pos, slot, cs, cache};
    k_expect_null(t, &good, &ga);
    dsv4_indexer_k_store_desc_t d;
#define DCASE(assign, st, field, value) (d = good, assign, k_expect(t, &d, &ga, 1, st, field, value))
    DCASE(d.num_tokens = -1, DSV4_STATUS_INVALID_VALUE, "num_tokens", "-1");
    DCASE(d.num_tokens = (int64_t)INT32_MAX + 1, DSV4_STATUS_INVALID_VALUE, "num_tokens", "2147483648");
    DCASE(d.ratio = 0, DSV4_STATUS_INVALID_VALUE, "ratio", "0");
    DCASE(d.ratio = 4, DSV4_STATUS_INVALID_VALUE, "ratio", "4");
    DCASE(d.eps = -1e-6f, DSV4_STATUS_INVALID_VALUE, "eps", "-1e-06");
    DCASE(d.eps = dsv4_bits_f32(0x7F800000u), DSV4_STATUS_INVALID_VALUE, "eps", "inf");
    DCASE(d.max_position = 0, DSV4_STATUS_INVALID_VALUE, "max_position", "0");
    DCASE(d.page_tokens = 0, DSV4_STATUS_INVALID_VALUE, "page_tokens", "0");
    DCASE(d.page_tokens = (1 << 24) + 1, DSV4_STATUS_INVALID_VALUE, "page_tokens", "16777217");
    DCASE(d.page_stride_bytes = 16 * 132 - 16, DSV4_STATUS_INVALID_VALUE, "page_stride_bytes", "2096");
    DCASE(d.page_stride_bytes = 16 * 132 + 4, DSV4_STATUS_MISALIGNED, "page_stride_bytes", "2116");
    DCASE(d.num_pages = 0, DSV4_STATUS_INVALID_VALUE, "num_pages", "0");
    DCASE(d.num_pages = INT64_MAX / STRIDE + 1, DSV4_STATUS_INVALID_VALUE, "num_pages", "4334291370702433");
    DCASE(d.k_stride_row = 120, DSV4_STATUS_INVALID_VALUE, "k_stride_row", "120");
    DCASE(d.k_stride_row = 132, DSV4_STATUS_MISALIGNED, "k_stride_row", "132");
    DCASE(d.k_stride_row = INT64_MAX / 4, DSV4_STATUS_INVALID_VALUE, "k_stride_row", "overflows");
#undef DCASE
    dsv4_indexer_k_store_args_t a;
#define ACASE(assign, st, field) (a = ga, assign, k_expect(t, &good, &a, 0, st, field, NULL))
    ACASE(a.k_pre = NULL, DSV4_STATUS_NULL_POINTER, "k_pre");
    ACASE(a.gamma = NULL, DSV4_STATUS_NULL_POINTER, "gamma");
    ACASE(a.positions = NULL, DSV4_STATUS_NULL_POINTER, "positions");
    ACASE(a.slot_mapping = NULL, DSV4_STATUS_NULL_POINTER, "slot_mapping");
    ACASE(a.cos_sin = NULL, DSV4_STATUS_NULL_POINTER, "cos_sin");
    ACASE(a.cache = NULL, DSV4_STATUS_NULL_POINTER, "cache");
    ACASE(a.k_pre = MIS(k, 8), DSV4_STATUS_MISALIGNED, "k_pre");
    ACASE(a.gamma = MIS(gamma, 8), DSV4_STATUS_MISALIGNED, "gamma");
    ACASE(a.positions = MIS(pos, 4), DSV4_STATUS_MISALIGNED, "positions");
    ACASE(a.slot_mapping = MIS(slot, 4), DSV4_STATUS_MISALIGNED, "slot_mapping");
    ACASE(a.cos_sin = MIS(cs, 8), DSV4_STATUS_MISALIGNED, "cos_sin");
    ACASE(a.cache = MIS(cache, 8), DSV4_STATUS_MISALIGNED, "cache");
#undef ACASE
    TH_CHECK(t, memcmp(cache, keep, PAGES * STRIDE) == 0, "a failing call wrote into the cache");
    free(k), free(gamma), free(pos), free(slot), free(cs), free(cache), free(keep);
}

void test_idx_plans(th_ctx_t *t) {
    idx_q_plan_t qp;
    const dsv4_indexer_q_desc_t qd = {.num_tokens = 10,
                                      .num_heads = 32,
                                      .max_position = 4,
                                      .q_stride_token = 32 * 128,
                                      .q_stride_head = 128,
                                      .w_stride_token = 32};
    TH_OK(t, idx_q_plan(&qd, &qp));
    TH_CHECK(t,
             qp.q_stride_head == 128 && qp.q_stride_token == 4096 && qp.w_stride_token == 32 && qp.rows == 320 &&
                 qp.blocks == 20,
             "indexer_q defaults: %lld %lld %lld %lld %u", (long long)qp.q_stride_head, (long long)qp.q_stride_token,
             (long long)qp.w_stride_token, (long long)qp.rows, qp.blocks);
    TH_CHECK(t, dsv4_f32_bits(qp.softmax_scale) == 0x3DB504F3u && dsv4_f32_bits(qp.head_scale) == 0x3E3504F3u,
             "scales 0x%08x 0x%08x", dsv4_f32_bits(qp.softmax_scale), dsv4_f32_bits(qp.head_scale));
    const dsv4_indexer_q_desc_t q64 = {.num_tokens = 1,
                                       .num_heads = 64,
                                       .max_position = 4,
                                       .softmax_scale = 0.5f,
                                       .q_stride_token = 64 * 128,
                                       .q_stride_head = 128,
                                       .w_stride_token = 64};
    TH_OK(t, idx_q_plan(&q64, &qp));
    TH_CHECK(t, qp.head_scale == 0.125f && qp.softmax_scale == 0.5f && qp.blocks == 4, "64 heads: %g %g %u",
             (double)qp.head_scale, (double)qp.softmax_scale, qp.blocks);
    idx_k_plan_t kp;
    const dsv4_indexer_k_store_desc_t kd = {.num_tokens = 9,
                                            .ratio = 2,
                                            .max_position = 4,
                                            .page_tokens = 64,
                                            .page_stride_bytes = 8640,
                                            .num_pages = 3,
                                            .k_stride_row = 128};
    TH_OK(t, idx_k_plan(&kd, &kp));
    TH_CHECK(t, kp.k_stride_row == 128 && kp.slots == 192 && kp.blocks == 2, "k_store defaults: %lld %lld %u",
             (long long)kp.k_stride_row, (long long)kp.slots, kp.blocks);
}
