/*
 * Host planning, without a GPU: the cache format's multiply-high division the kernels use
 * (common/kv_format.h; its host form emulates __umulhi), against / on
 * every divisor up to 4096 and on random divisors up to 2^31-1, at the boundaries that break
 * a wrong multiplier: multiples of d and their neighbours, 2^31-1), the packed variant's
 * row groups and workspace, and the combine's column count.
 */
#include <stdint.h>

#include "idx_test.h"
#include "common/kv_format.h"
#include "indices/topk_translate_config.h"

static int check_div(th_ctx_t *t, uint32_t d, uint32_t n) {
    const kv_page_div_t f = kv_page_div_make(d);
    const uint32_t got = kv_page_div(n, f.magic, f.shift), want = n / d;
    if (got == want) return 1;
    th_fail(t, __FILE__, __LINE__, "page division: %u / %u = %u, want %u (magic %u shift %d)", n, d, got, want, f.magic,
            f.shift);
    return 0;
}

void test_idx_page_division(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    const uint32_t top = 0x7FFFFFFFu;
    for (uint32_t d = 1; d <= 4096 && !th_failed(t); ++d) {
        const uint32_t last_mult = top / d * d;
        const uint32_t ns[] = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, last_mult - 1, last_mult, top, top - 1};
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; ++i) check_div(t, d, ns[i] & top);
        for (int k = 0; k < 16; ++k) {
            const uint32_t m = (uint32_t)th_rng_range(r, 1, top / d) * d;
            check_div(t, d, m);
            check_div(t, d, m - 1);
            check_div(t, d, (uint32_t)th_rng_range(r, 0, top));
        }
    }
    const uint32_t special[] = {top, top - 1, 1u << 30, (1u << 30) + 1, (1u << 30) - 1, 3u << 29, 46341, 65537};
    for (int i = 0; i < 8 + 2000 && !th_failed(t); ++i) {
        const uint32_t d = i < 8 ? special[i] : (uint32_t)th_rng_range(r, 1, top);
        const uint32_t last_mult = top / d * d;
        check_div(t, d, last_mult);
        check_div(t, d, last_mult - 1);
        check_div(t, d, top);
        check_div(t, d, d - 1);
        check_div(t, d, d);
        for (int k = 0; k < 32; ++k) check_div(t, d, (uint32_t)th_rng_range(r, 0, top));
    }
}

void test_idx_planning(th_ctx_t *t) {
    static const int64_t Ts[] = {0, 1, 3, 4, 5, 8191, 8192, 8193, 9000, 1 << 20, INT32_MAX};
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; ++i) {
        int32_t rows = 0, groups = 0;
        dsv4_tt_packed_groups(Ts[i], &rows, &groups);
        TH_CHECK(t, rows >= DSV4_TT_WARPS && rows % DSV4_TT_WARPS == 0, "T=%lld: group rows %d", (long long)Ts[i],
                 rows);
        TH_CHECK(t, groups <= DSV4_TT_MAX_GROUPS, "T=%lld: %d groups", (long long)Ts[i], groups);
        TH_CHECK(t,
                 (int64_t)groups * rows >= Ts[i] && (Ts[i] == 0 ? groups == 0 : (int64_t)(groups - 1) * rows < Ts[i]),
                 "T=%lld: %d groups of %d rows", (long long)Ts[i], groups, rows);
        if (Ts[i] <= 8192) TH_CHECK(t, rows == 4, "T=%lld: %d rows per group, want 4", (long long)Ts[i], rows);
        dsv4_topk_translate_desc_t d = {Ts[i], 0, 1, 1, 1, 0, 1, 0};
        size_t bytes = 1;
        TH_OK(t, dsv4_topk_translate_packed_workspace_size(&d, &bytes));
        TH_CHECK(t, bytes == (size_t)groups * 4, "T=%lld: workspace %zu bytes, want %d * 4", (long long)Ts[i], bytes,
                 groups);
        TH_OK(t, dsv4_topk_translate_workspace_size(&d, &bytes));
        TH_CHECK(t, bytes == 0, "dense workspace %zu", bytes);
    }
    static const int64_t cols[][3] = {{512, 128, 640},   {1024, 128, 1152}, {0, 128, 128}, {8192, 128, 8320},
                                      {2048, 128, 2176}, {4, 4, 128},       {124, 4, 128}, {125, 4, 256},
                                      {-1, 4, -1},       {4, -1, -1}};
    for (int i = 0; i < 10; ++i)
        TH_CHECK(t, dsv4_combine_topk_swa_cols(cols[i][0], cols[i][1]) == cols[i][2],
                 "cols(%lld, %lld) = %lld, want %lld", (long long)cols[i][0], (long long)cols[i][1],
                 (long long)dsv4_combine_topk_swa_cols(cols[i][0], cols[i][1]), (long long)cols[i][2]);
    dsv4_combine_topk_swa_desc_t cd = {8192, 4, 512,    512,   512,
                                       128,  4, 100000, 50000, dsv4_combine_topk_swa_cols(512, 128),
                                       0};
    size_t bytes = 1;
    TH_OK(t, dsv4_combine_topk_swa_check(&cd));
    TH_OK(t, dsv4_combine_topk_swa_workspace_size(&cd, &bytes));
    TH_CHECK(t, bytes == 0, "combine workspace %zu", bytes);
    dsv4_decode_swa_indices_desc_t dd = {512, 256, 128, 64, 2048, 2048, 128};
    TH_OK(t, dsv4_decode_swa_indices_check(&dd));
    TH_OK(t, dsv4_decode_swa_indices_workspace_size(&dd, &bytes));
    TH_CHECK(t, bytes == 0, "decode SWA workspace %zu", bytes);
}
