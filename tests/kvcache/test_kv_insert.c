/*
 * CPU tests of the insert rule and of dsv4_kv_insert_ref: the record's cheap rules on every
 * input a block can produce, known answers at their byte positions, and random pages
 * against the independent record model of kv_test_util.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "kv_test_util.h"
#include "kvcache/kv_record.h"
#include "test_kvcache.h"

/* Is (x, enc) a pair a block can produce? enc comes from the block's amax >= |x| (NaN
 * leaves amax alone), so enc >= kv_enc_from_amax(|x|); enc 255 holds any x. */
int kvt_quant_pair_reachable(uint16_t h, uint32_t enc) {
    const float x = dsv4_bf16_to_f32(h);
    return enc == 255 || (enc >= 105 && enc <= 247 && (x != x || kv_enc_from_amax(fabsf(x)) <= enc));
}

/* The record's cheap rules (kv_record.h) against numerics.h on every input a block can
 * produce: enc and inv for amax = 0, every positive bf16, +inf and NaN (the kernels' NaN
 * block maximum); the code for every bf16 x with every enc of a block that can hold x. */
void test_kv_quant_elem_all(th_ctx_t *t) {
    size_t bad = 0, pairs = 0;
    for (uint32_t h = 0; h <= 0x7F81; ++h) {
        const float amax = dsv4_bf16_to_f32((uint16_t)h);
        const uint32_t enc = kv_enc_from_amax(amax);
        const uint8_t want = dsv4_ue8m0_from_amax(amax); /* NaN -> the floor, as an amax of 0 */
        const float inv = kv_inv_scale(enc), want_inv = dsv4_ue8m0_inv_scale(want);
        if ((enc != want || memcmp(&inv, &want_inv, 4) != 0) && bad++ < 8)
            th_fail(t, __FILE__, __LINE__, "amax 0x%04x: enc %u inv %a, numerics.h %u %a", h, enc, inv, want, want_inv);
    }
    for (uint32_t enc = 0; enc < 256; ++enc) {
        const float inv = kv_inv_scale(enc);
        for (uint32_t h = 0; h < 65536; ++h) {
            if (!kvt_quant_pair_reachable((uint16_t)h, enc)) continue;
            ++pairs;
            const uint8_t want = dsv4_e4m3_quantize(dsv4_bf16_to_f32((uint16_t)h), inv);
            const uint32_t got = kv_quant_elem((uint16_t)h, inv);
            if (got != want && bad++ < 8)
                th_fail(t, __FILE__, __LINE__, "bf16 0x%04x enc %u: 0x%02x, dsv4_e4m3_quantize gives 0x%02x", h, enc,
                        got, want);
        }
    }
    th_note(t, "%zu differences over %zu reachable (x, enc) pairs and 32,642 amax values", bad, pairs);
    TH_CHECK(t, bad == 0, "kv_record.h's rules differ from numerics.h");
}

/* One token into a P = 2 page of 1,728 bytes (a V4 C128A page), slot id 1. */
static void insert_one(th_ctx_t *t, const uint16_t *row, uint8_t *page) {
    const int64_t slot = 1;
    dsv4_kv_insert_desc_t d = {
        .num_tokens = 1, .page_tokens = 2, .page_stride_bytes = 1728, .num_pages = 1, .k_stride_row = 512};
    dsv4_kv_insert_args_t a = {.k = row, .slot_mapping = &slot, .cache = page};
    memset(page, 0xA5, 1728);
    TH_OK(t, dsv4_kv_insert_ref(&d, &a));
}

void test_kv_insert_known_answers(th_ctx_t *t) {
    uint16_t *row = th_aligned_alloc(64, 1024);
    uint8_t *page = th_aligned_alloc(64, 1728);
    /* Block 0: the ramp (d-32)/8 (enc 121); block 1: [300, -0.7, 5, 0...] (enc 127);
     * block 2: zeros with a -0.0 (enc 105); block 3: bf16(1e-5) below the floor (enc 105);
     * block 4: amax 1.7578125 (enc 120); block 5: amax 450 (enc 128); block 6: bf16 max
     * (enc 247); RoPE dims: counting bf16 patterns and a NaN/inf that must be copied. */
    memset(row, 0, 1024);
    for (int d = 0; d < 64; ++d) row[d] = dsv4_f32_to_bf16((float)(d - 32) / 8.0f);
    row[64] = dsv4_f32_to_bf16(300.0f), row[65] = dsv4_f32_to_bf16(-0.7f), row[66] = dsv4_f32_to_bf16(5.0f);
    row[128 + 5] = 0x8000;
    for (int d = 192; d < 256; ++d) row[d] = 0x3728;
    row[256 + 9] = dsv4_f32_to_bf16(1.7578125f), row[256 + 10] = dsv4_f32_to_bf16(1.0f);
    row[320] = dsv4_f32_to_bf16(450.0f); /* 449 is not a bf16 value */
    row[384 + 63] = 0x7F7F;
    for (int i = 0; i < 64; ++i) row[448 + i] = (uint16_t)(0x3F00 + 3 * i);
    row[448 + 7] = 0x7FC1, row[448 + 8] = 0xFF80;
    insert_one(t, row, page);

    /* Slot 1 of a P = 2 page: data at 576, scales at 2*576 + 8 = 1160 (the
     * scale region is [1152, 1168)). */
    const uint8_t *data = page + 576, *sc = page + 1160;
    static const uint8_t want_enc[7] = {121, 127, 105, 105, 120, 128, 247};
    for (int k = 0; k < 7; ++k)
        TH_CHECK(t, sc[k] == want_enc[k], "block %d enc %d, expected %d", k, sc[k], want_enc[k]);
    TH_CHECK(t, sc[7] == 0, "pad byte 0x%02x", sc[7]);
    TH_CHECK(t,
             data[0] == 0xF8 && data[33] == 0x50 && data[35] == 0x5C && data[49] == 0x70 && data[51] == 0x72 &&
                 data[63] == 0x78,
             "ramp codes %02x %02x %02x %02x %02x %02x", data[0], data[33], data[35], data[49], data[51], data[63]);
    TH_CHECK(t, data[64] == 0x79 && data[65] == 0xB3 && data[66] == 0x4A && data[67] == 0x00,
             "[300,-0.7,5] codes %02x %02x %02x %02x", data[64], data[65], data[66], data[67]);
    TH_CHECK(t, data[128] == 0x00 && data[133] == 0x80, "zero block codes %02x %02x", data[128], data[133]);
    TH_CHECK(t, data[192] == 0x62, "below-floor code 0x%02x", data[192]);
    for (int i = 0; i < 64; ++i) {
        const uint16_t h = (uint16_t)(data[448 + 2 * i] | (data[449 + 2 * i] << 8));
        TH_CHECK(t, h == row[448 + i], "RoPE dim %d stored 0x%04x, expected 0x%04x", 448 + i, h, row[448 + i]);
    }
    /* Slot 0's data, the other scale word and the page padding stay untouched. */
    for (int b = 0; b < 1728; ++b) {
        const int touched = (b >= 576 && b < 1152) || (b >= 1160 && b < 1168);
        if (!touched) TH_CHECK(t, page[b] == 0xA5, "byte %d changed to 0x%02x", b, page[b]);
    }

    /* NaN / inf in NoPE: NaN codes 0x7E, inf sets enc 255. */
    for (int d = 0; d < 448; ++d) row[d] = 0x3F80; /* 1.0 */
    row[7] = 0x7FC0;                               /* NaN: ignored by amax, code 0x7E */
    row[64 + 3] = 0xFF80, row[64 + 4] = 0xC000;    /* -inf: enc 255; finite -> -0 (0x80); inf -> 0x7E */
    insert_one(t, row, page);
    TH_CHECK(t, sc[0] == 119 && data[7] == 0x7E && data[0] == 0x78, "NaN block: enc %d codes %02x %02x", sc[0], data[7],
             data[0]);
    TH_CHECK(t, sc[1] == 255 && data[64 + 3] == 0x7E && data[64] == 0x00 && data[64 + 4] == 0x80,
             "inf block: enc %d codes %02x %02x %02x", sc[1], data[67], data[64], data[68]);
    free(row);
    free(page);
}

/* Random pages: every byte against the model, for the models' P values and strides. */
void test_kv_insert_random_vs_model(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    static const kvt_geom_t geoms[] = {{MC_V4_PAGE_TOKENS, MC_PAGE_STRIDE(MC_V4_PAGE_TOKENS), 5},
                                       {MC_SWA_PAGE_TOKENS, MC_PAGE_STRIDE(MC_SWA_PAGE_TOKENS), 9},
                                       {256, 256 * 584, 2},
                                       {MC_C128_PAGE_TOKENS, MC_PAGE_STRIDE(MC_C128_PAGE_TOKENS), 40},
                                       {64, 64 * 584 + 48, 4},
                                       {1, 592, 64}};
    for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; ++gi) {
        const kvt_geom_t g = geoms[gi];
        const int64_t T = g.num_pages * g.P < 300 ? g.num_pages * g.P : 300, kst = gi % 2 ? 512 : 520;
        uint16_t *k = th_aligned_alloc(64, (size_t)(T * kst * 2 + 64));
        int64_t *slots = malloc((size_t)T * sizeof *slots);
        uint8_t *got = th_aligned_alloc(64, kvt_cache_bytes(g)), *want = malloc(kvt_cache_bytes(g));
        int *kinds = malloc((size_t)T * sizeof *kinds);
        kvt_fill_rows(r, k, T, kst, KVT_ROW_KINDS, kinds);
        kvt_make_slots(r, g, T, 1, slots);
        for (size_t b = 0; b < kvt_cache_bytes(g); ++b) got[b] = (uint8_t)(0x5A ^ (b * 7));
        memcpy(want, got, kvt_cache_bytes(g));
        for (int64_t i = 0; i < T; ++i)
            if (slots[i] >= 0 && slots[i] < g.num_pages * g.P) kvt_model_insert(g, want, slots[i], k + i * kst);
        dsv4_kv_insert_desc_t d = {.num_tokens = T,
                                   .k_stride_row = kst,
                                   .page_tokens = g.P,
                                   .page_stride_bytes = g.stride,
                                   .num_pages = g.num_pages};
        dsv4_kv_insert_args_t a = {.k = k, .slot_mapping = slots, .cache = got};
        TH_OK(t, dsv4_kv_insert_ref(&d, &a));
        char what[96];
        snprintf(what, sizeof what, "insert_ref P=%lld stride=%lld T=%lld", (long long)g.P, (long long)g.stride,
                 (long long)T);
        if (kvt_cmp_cache(t, what, g, got, want)) kvt_explain_insert(t, g, got, want, slots, T, kinds, k, kst);
        free(kinds);
        free(k);
        free(slots);
        free(got);
        free(want);
    }
}

/* Quantize, then dequantize through the gather reference: the error bound of the format
 * (half an e4m3 step of the block scale) and exact RoPE dims, on model-like rows. */
void test_kv_insert_gather_roundtrip(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    const kvt_geom_t g = {MC_V4_PAGE_TOKENS, MC_PAGE_STRIDE(MC_V4_PAGE_TOKENS), 4};
    const int64_t T = 200;
    uint16_t *k = th_aligned_alloc(64, (size_t)T * 1024), *out = th_aligned_alloc(64, (size_t)T * 1024);
    int32_t table[4] = {2, 0, 3, 1}, L = (int32_t)T;
    uint8_t *cache = th_aligned_alloc(64, kvt_cache_bytes(g));
    int64_t *slots = malloc((size_t)T * sizeof *slots);
    kvt_fill_rows(r, k, T, 512, KVT_ROW_NORMAL + 1, NULL); /* finite kinds */
    for (int64_t i = 0; i < T; ++i) slots[i] = table[i / 64] * 64 + i % 64;
    memset(cache, 0, kvt_cache_bytes(g));
    dsv4_kv_insert_desc_t di;
    dsv4_kv_gather_desc_t dg;
    kvt_roundtrip_descs(g, T, &di, &dg);
    dsv4_kv_insert_args_t ai = {.k = k, .slot_mapping = slots, .cache = cache};
    TH_OK(t, dsv4_kv_insert_ref(&di, &ai));
    dsv4_kv_gather_args_t ag = {.cache = cache, .seq_lens = &L, .block_table = table, .out = out};
    TH_OK(t, dsv4_kv_gather_ref(&dg, &ag));
    for (int64_t i = 0; i < T; ++i) {
        for (int kb = 0; kb < 7; ++kb) {
            const int enc = kvt_model_enc(k + i * 512 + 64 * kb);
            for (int j = 0; j < 64; ++j) {
                const int d = 64 * kb + j;
                const double x = dsv4_bf16_to_f32(k[i * 512 + d]), y = dsv4_bf16_to_f32(out[i * 512 + d]);
                /* e4m3 step at |x|: 2^(floor(log2|x|) - 3), at least the subnormal step 2^-9;
                 * times the block scale 2^(enc-127); RNE is off by at most half a step. */
                double ax = fabs(x / ldexp(1.0, enc - 127));
                int ex = ax > 0 ? (int)floor(log2(ax)) : -9;
                double half_step = 0.5 * ldexp(1.0, (ex - 3 < -9 ? -9 : ex - 3) + enc - 127);
                TH_CHECK(t, fabs(x - y) <= half_step, "row %lld dim %d: %g came back as %g (bound %g)", (long long)i, d,
                         x, y, half_step);
            }
        }
        for (int d = 448; d < 512; ++d)
            TH_CHECK(t, out[i * 512 + d] == k[i * 512 + d], "row %lld RoPE dim %d", (long long)i, d);
    }
    free(k);
    free(out);
    free(cache);
    free(slots);
}
