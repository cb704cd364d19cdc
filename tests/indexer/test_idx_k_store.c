/*
 * dsv4_indexer_k_store on the CPU: the hand-computed known answer (k_pre all 2.0, the
 * synthetic rotary row cos = 0.5, sin = 0.75), and the reference against the independent
 * model of idx_test_util.c on random rows of both ratios, P in {64, 128}, page strides at
 * and above the minimum, rows with slot -1, slots beyond the cache and positions that do
 * not close a group. Every byte of every page is compared: bytes of states that are not
 * stored, the padding and the scales of other states keep their poison.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "test_indexer.h"

#define POISON 0xC3

void test_idx_k_known_answers(th_ctx_t *t) {
    enum { P = 64, STRIDE = 8640 };
    uint16_t k[2 * 128], gamma[128];
    float cs[8 * 64];
    const int64_t pos[2] = {5, 4}, slot[2] = {3, 7}; /* 5 closes the group {4, 5}; 4 does not */
    for (int i = 0; i < 2 * 128; ++i) k[i] = 0x4000; /* 2.0 */
    for (int i = 0; i < 128; ++i) gamma[i] = 0x3F80;
    for (int i = 0; i < 8 * 64; ++i) cs[i] = i / 64 == 4 ? (i % 64 < 32 ? 0.5f : 0.75f) : 0.25f; /* row 4 */
    th_buf_t cb = th_buf_host(STRIDE);
    uint8_t *cache = th_ptr(&cb), want[STRIDE];
    th_buf_poison(&cb, POISON);
    memset(want, POISON, sizeof want);
    /* ssq 512, rr 0.5, y 1.0; pairs (1, 1) -> (-0.25, 1.25); amax 1.25 -> e = -8 */
    for (int d = 0; d < 128; ++d) want[3 * 128 + d] = d < 64 ? 0x78 : (d % 2 == 0 ? 0xE8 : 0x7A);
    const uint8_t scale[4] = {0x00, 0x00, 0x80, 0x3B}; /* 2^-8 as little-endian fp32 */
    memcpy(want + P * 128 + 3 * 4, scale, 4);
    const dsv4_indexer_k_store_desc_t d = {.num_tokens = 2,
                                           .ratio = 2,
                                           .max_position = 8,
                                           .page_tokens = P,
                                           .page_stride_bytes = STRIDE,
                                           .num_pages = 1,
                                           .eps = 1e-20f,
                                           .k_stride_row = 128};
    const dsv4_indexer_k_store_args_t a = {k, gamma, pos, slot, cs, cache};
    TH_OK(t, dsv4_indexer_k_store_ref(&d, &a));
    th_cmp_bytes(t, "KAT-K1 page", cache, want, STRIDE);
    th_buf_guards_ok(t, &cb, "cache");
    uint8_t mc[128];
    uint32_t ms;
    it_model_k_row(k, gamma, 1e-20f, 4, 8, cs, mc, &ms);
    th_cmp_bytes(t, "model codes", mc, want + 3 * 128, 128);
    TH_CHECK(t, ms == 0x3B800000u, "model scale 0x%08x", ms);
    /* An all-zero key: huge rr, y = 0, codes 0, e = -22. */
    memset(k, 0, sizeof k);
    TH_OK(t, dsv4_indexer_k_store_ref(&d, &a));
    for (int i = 0; i < 128; ++i) TH_CHECK(t, cache[3 * 128 + i] == 0, "zero key dim %d: 0x%02x", i, cache[384 + i]);
    uint32_t sb;
    memcpy(&sb, cache + P * 128 + 12, 4);
    TH_CHECK(t, sb == (uint32_t)(-22 + 127) << 23, "zero key scale 0x%08x", sb);
    th_buf_free(&cb);
}

/* One random case: the reference against the model over the whole cache. */
static void ref_case(th_ctx_t *t, int64_t T, int64_t r, int64_t P, int64_t stride, int64_t k_stride) {
    it_k_case_t c;
    it_k_case(th_rng(t), T, r, P, stride, k_stride, &c);
    const int64_t ks = k_stride ? k_stride : 128, slots = c.d.num_pages * P;
    th_buf_t cb = th_buf_host(c.cache_bytes);
    th_buf_poison(&cb, POISON);
    uint8_t *want = malloc(c.cache_bytes);
    uint16_t *keep = malloc(c.k_elems * 2);
    memcpy(keep, c.k, c.k_elems * 2);
    memset(want, POISON, c.cache_bytes);
    int64_t stored = 0;
    for (int64_t tk = 0; tk < T; ++tk) {
        const int64_t s = c.slot[tk], p = c.pos[tk];
        if (s < 0 || s >= slots || (p + 1) % r != 0) continue;
        uint8_t *page = want + s / P * stride;
        uint32_t sb;
        it_model_k_row(c.k + tk * ks, c.gamma, c.d.eps, p < 0 ? -1 : p / r * r, c.d.max_position, c.cs,
                       page + s % P * 128, &sb);
        memcpy(page + P * 128 + s % P * 4, &sb, 4);
        ++stored;
    }
    const dsv4_indexer_k_store_args_t a = {c.k, c.gamma, c.pos, c.slot, c.cs, th_ptr(&cb)};
    TH_OK(t, dsv4_indexer_k_store_ref(&c.d, &a));
    char what[128];
    snprintf(what, sizeof what, "k_store T=%lld r=%lld P=%lld stride %lld k_stride %lld (%lld stored)", (long long)T,
             (long long)r, (long long)P, (long long)stride, (long long)ks, (long long)stored);
    th_cmp_bytes(t, what, th_ptr(&cb), want, c.cache_bytes);
    th_buf_guards_ok(t, &cb, "cache");
    TH_CHECK(t, !memcmp(keep, c.k, c.k_elems * 2), "k_pre modified");
    TH_CHECK(t, stored > 0 || T < 4, "%s: nothing stored", what);
    th_buf_free(&cb);
    free(want), free(keep);
    it_k_case_free(&c);
}

void test_idx_k_vs_model(th_ctx_t *t) {
    ref_case(t, 300, 1, 128, 17280, 0); /* V4.1 layer 20 */
    ref_case(t, 300, 2, 64, 8640, 0);   /* V4.1 layers 2, 8, 14 */
    ref_case(t, 1, 1, 1, 144, 0);
}

void test_idx_k_pages(th_ctx_t *t) {
    ref_case(t, 200, 1, 64, 64 * 132, 136);     /* minimum stride, strided k_pre */
    ref_case(t, 200, 2, 128, 17280 + 576, 256); /* stride above vLLM's padding */
    ref_case(t, 77, 2, 3, 400, 128);            /* odd P */
}
