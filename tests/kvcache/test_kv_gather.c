/*
 * CPU tests of dsv4_kv_gather_ref (known answers, random requests against the model of
 * kv_test_util.c, unwritten rows kept) and of the host plans of the three operators.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "kv_test_util.h"
#include "kvcache/kv_common.h"
#include "kvcache/kv_gather_config.h"
#include "kvcache/kv_insert_config.h"
#include "kvcache/kv_swa_write_config.h"
#include "test_kvcache.h"

#define POISON 0x5A5A

void test_kv_gather_known_answers(th_ctx_t *t) {
    /* Two pages of P = 2 (stride 1728); the block table maps logical page 0 -> 1 and
     * logical page 1 -> page 7 (out of range). seq_len 5, gather_len 4, offset 2, 8 rows:
     * positions 1, 2, 3, 4 -> rows 2..5: slot (1, p1), page 7 (zeros), zeros (pos 3 is
     * logical page 1, also page 7), and logical page 2 >= width 2 (zeros). */
    uint8_t *cache = th_aligned_alloc(64, 2 * 1728);
    uint16_t *out = th_aligned_alloc(64, 8 * 1024);
    memset(cache, 0, 2 * 1728);
    uint8_t *data = cache + 1728 + 576, *sc = cache + 1728 + 1152 + 8; /* page 1, slot 1 */
    static const uint8_t enc[7] = {127, 127, 128, 255, 0, 105, 254};
    memcpy(sc, enc, 7);
    sc[7] = 0xCC; /* the pad byte is never read */
    data[0] = 0x38, data[1] = 0x01, data[2] = 0x7F, data[3] = 0xFF, data[4] = 0x80, data[5] = 0xB8;
    data[64] = 0x7E, data[65] = 0x08;
    data[128] = 0x7E;
    data[192] = 0x00, data[193] = 0x38, data[194] = 0xB8;
    data[256] = 0x38, data[257] = 0xB8;
    data[320] = 0x62;
    data[384] = 0x38, data[385] = 0x7E;
    for (int i = 0; i < 128; ++i) data[448 + i] = (uint8_t)(i * 37 + 1);
    for (int i = 0; i < 8 * 512; ++i) out[i] = POISON;
    int32_t L = 5, G = 4, table[2] = {1, 7};
    dsv4_kv_gather_desc_t d = {.num_reqs = 1,
                               .block_table_width = 2,
                               .out_rows = 8,
                               .offset = 2,
                               .page_tokens = 2,
                               .page_stride_bytes = 1728,
                               .num_pages = 2,
                               .block_table_stride = 2,
                               .out_stride_req = 8 * 512,
                               .out_stride_row = 512};
    dsv4_kv_gather_args_t a = {cache, &L, &G, table, out};
    TH_OK(t, dsv4_kv_gather_ref(&d, &a));
    const uint16_t *row = out + 2 * 512;
    struct {
        int dim;
        uint16_t want;
    } ka[] = {{0, 0x3F80},
              {1, 0x3B00},
              {2, 0x7FFF},
              {3, 0x7FFF},
              {4, 0x8000},
              {5, 0xBF80},
              {6, 0x0000},
              {64, 0x43E0},
              {65, 0x3C80},
              {128, 0x4460},
              {192, 0x7FFF},
              {193, 0x7F80},
              {194, 0xFF80},
              {256, 0x0000},
              {257, 0x8000},
              {320, dsv4_f32_to_bf16(9.5367431640625e-06f)},
              {384, dsv4_f32_to_bf16(0x1p127f)},
              {385, 0x7F80}};
    /* 1.0; 2^-9; NaN; NaN; -0; -1.0; 0; 448; 2^-6; 896 (enc 128); 0 * inf = NaN; +inf; -inf;
     * enc 0: +0 and -0; a below-floor value; enc 254: 2^127, and 448 * 2^127 -> inf. */
    for (size_t i = 0; i < sizeof ka / sizeof ka[0]; ++i)
        TH_CHECK(t, row[ka[i].dim] == ka[i].want, "dim %d: 0x%04x, expected 0x%04x", ka[i].dim, row[ka[i].dim],
                 ka[i].want);
    for (int i = 0; i < 64; ++i) {
        const uint16_t want = (uint16_t)(data[448 + 2 * i] | (data[449 + 2 * i] << 8));
        TH_CHECK(t, row[448 + i] == want, "RoPE dim %d: 0x%04x, expected 0x%04x", 448 + i, row[448 + i], want);
    }
    for (int r = 3; r < 6; ++r)
        for (int dd = 0; dd < 512; ++dd) TH_CHECK(t, out[r * 512 + dd] == 0, "row %d dim %d should be zero", r, dd);
    for (int r = 0; r < 8; ++r)
        if (r < 2 || r >= 6)
            for (int dd = 0; dd < 512; ++dd) TH_CHECK(t, out[r * 512 + dd] == POISON, "row %d written", r);
    /* G = 0 writes nothing; G > out_rows - offset stops at out_rows. */
    G = 0;
    for (int i = 0; i < 8 * 512; ++i) out[i] = POISON;
    TH_OK(t, dsv4_kv_gather_ref(&d, &a));
    for (int i = 0; i < 8 * 512; ++i) TH_CHECK(t, out[i] == POISON, "G = 0 wrote element %d", i);
    G = 5, d.offset = 6;
    TH_OK(t, dsv4_kv_gather_ref(&d, &a));
    for (int i = 0; i < 6 * 512; ++i) TH_CHECK(t, out[i] == POISON, "rows before offset written at %d", i);
    /* G = L = 5 from offset 6: pos 0 (page 1 slot 0, all-zero bytes) -> row 6, pos 1 -> row 7. */
    TH_CHECK(t, out[6 * 512] == 0 && out[7 * 512] == 0x3F80, "offset 6: rows 6, 7 start with 0x%04x 0x%04x",
             out[6 * 512], out[7 * 512]);
    free(cache);
    free(out);
}

/* The expected slab contents by the model: poison everywhere, model rows where written. */
static void model_gather(const dsv4_kv_gather_desc_t *d, const dsv4_kv_gather_args_t *a, int64_t bts, int64_t sreq,
                         int64_t srow, uint16_t *want) {
    const int64_t P = d->page_tokens;
    for (int64_t b = 0; b < d->num_reqs; ++b) {
        const int64_t L = a->seq_lens[b], G = a->gather_lens ? a->gather_lens[b] : L;
        for (int64_t i = 0; i < G && d->offset + i < d->out_rows; ++i) {
            uint16_t *row = want + b * sreq + (d->offset + i) * srow;
            const int64_t pos = L - G + i;
            int64_t page = -1;
            if (pos >= 0 && pos / P < d->block_table_width) page = a->block_table[b * bts + pos / P];
            for (int dd = 0; dd < 512; ++dd) row[dd] = 0;
            if (page < 0 || page >= d->num_pages) continue;
            const uint8_t *base = a->cache + page * d->page_stride_bytes;
            const uint8_t *data = base + (pos % P) * 576, *sc = base + P * 576 + (pos % P) * 8;
            for (int dd = 0; dd < 448; ++dd) row[dd] = kvt_model_dequant(data[dd], sc[dd / 64]);
            for (int j = 0; j < 64; ++j) row[448 + j] = (uint16_t)(data[448 + 2 * j] | (data[449 + 2 * j] << 8));
        }
    }
}

void kvt_gather_case(th_rng_t *r, kvt_geom_t g, int64_t R, kvt_gather_case_t *c) {
    memset(c, 0, sizeof *c);
    c->g = g;
    c->cache = th_aligned_alloc(64, kvt_cache_bytes(g));
    for (size_t i = 0; i < kvt_cache_bytes(g); ++i) c->cache[i] = (uint8_t)th_rng_u32(r);
    for (int64_t pg = 0; pg < g.num_pages; ++pg) /* real scales mostly, some 0 / 255 / extreme */
        for (int64_t p = 0; p < g.P; ++p)
            for (int k = 0; k < 8; ++k) {
                uint8_t *s = c->cache + pg * g.stride + g.P * 576 + p * 8 + k;
                const int64_t pick = th_rng_range(r, 0, 40);
                *s = pick == 0   ? 0
                     : pick == 1 ? 255
                     : pick == 2 ? 254
                     : pick == 3 ? 1
                                 : (uint8_t)th_rng_range(r, 105, 247);
            }
    const int64_t maxlen = g.num_pages * g.P + g.P;
    c->width = (maxlen + g.P - 1) / g.P;
    c->desc.num_reqs = R;
    c->desc.block_table_width = c->width - th_rng_range(r, 0, 1); /* sometimes too narrow: zero rows */
    c->desc.block_table_stride = c->width + th_rng_range(r, 0, 3);
    c->desc.offset = th_rng_range(r, 0, 1) ? 0 : th_rng_range(r, 1, 40);
    c->desc.out_rows = c->desc.offset + maxlen - th_rng_range(r, 0, 20); /* sometimes clips the last rows */
    c->desc.out_stride_row = th_rng_range(r, 0, 1) ? 512 : 512 + 8 * th_rng_range(r, 1, 4);
    const int64_t srow = c->desc.out_stride_row;
    c->desc.out_stride_req = c->desc.out_rows * srow + (th_rng_range(r, 0, 1) ? 0 : 8 * th_rng_range(r, 0, 9));
    /* the hint only sizes the grid: unknown, exact, or far too small (one worker per request,
     * so every warp strides over many rows) */
    const int64_t hint = th_rng_range(r, 0, 2);
    c->desc.max_gather_len = hint == 0 ? 0 : hint == 1 ? maxlen : th_rng_range(r, 1, 16);
    c->desc.page_tokens = g.P;
    c->desc.page_stride_bytes = g.stride;
    c->desc.num_pages = g.num_pages;
    c->sreq = c->desc.out_stride_req ? c->desc.out_stride_req : c->desc.out_rows * srow;
    c->srow = srow;
    c->out_elems = (size_t)((R - 1) * c->sreq + c->desc.out_rows * srow);
    c->seq = malloc((size_t)R * 4);
    c->glen = th_rng_range(r, 0, 2) ? malloc((size_t)R * 4) : NULL;
    c->table = malloc((size_t)(R * c->desc.block_table_stride) * 4);
    for (int64_t b = 0; b < R; ++b) {
        c->seq[b] = (int32_t)th_rng_range(r, 0, maxlen);
        if (c->glen) {
            const int64_t pick = th_rng_range(r, 0, 7);
            c->glen[b] = (int32_t)(pick == 0   ? 0
                                   : pick == 1 ? c->seq[b] + th_rng_range(r, 1, 5) /* G > L */
                                               : th_rng_range(r, 0, c->seq[b]));
        }
        for (int64_t j = 0; j < c->desc.block_table_stride; ++j) {
            const int64_t pick = th_rng_range(r, 0, 15);
            c->table[b * c->desc.block_table_stride + j] = (int32_t)(pick == 0   ? -1
                                                                     : pick == 1 ? g.num_pages + th_rng_range(r, 0, 5)
                                                                                 : th_rng_range(r, 0, g.num_pages - 1));
        }
    }
}

void kvt_gather_case_free(kvt_gather_case_t *c) { free(c->cache), free(c->seq), free(c->glen), free(c->table); }

void kvt_gather_expected(const kvt_gather_case_t *c, uint16_t *want) {
    dsv4_kv_gather_args_t a = {c->cache, c->seq, c->glen, c->table, want};
    for (size_t i = 0; i < c->out_elems; ++i) want[i] = POISON;
    model_gather(&c->desc, &a, c->desc.block_table_stride, c->sreq, c->srow, want);
}

size_t kvt_cmp_gather(th_ctx_t *t, const char *what, const kvt_gather_case_t *c, const uint16_t *got,
                      const uint16_t *want) {
    size_t bad = 0;
    for (size_t i = 0; i < c->out_elems; ++i) {
        if (got[i] == want[i]) continue;
        if (bad < 8) {
            const int64_t b = (int64_t)i / c->sreq, row = ((int64_t)i % c->sreq) / c->srow,
                          col = ((int64_t)i % c->sreq) % c->srow;
            const int64_t L = c->seq[b], G = c->glen ? c->glen[b] : L;
            th_fail(t, __FILE__, __LINE__,
                    "%s: request %lld row %lld dim %lld is 0x%04x, expected 0x%04x (L=%lld G=%lld offset=%lld%s)", what,
                    (long long)b, (long long)row, (long long)col, got[i], want[i], (long long)L, (long long)G,
                    (long long)c->desc.offset, want[i] == POISON ? "; must stay unwritten" : "");
        }
        ++bad;
    }
    if (bad) th_fail(t, __FILE__, __LINE__, "%s: %zu of %zu elements differ", what, bad, c->out_elems);
    return bad;
}

void test_kv_gather_random_vs_model(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    static const kvt_geom_t geoms[] = {{MC_SWA_PAGE_TOKENS, MC_PAGE_STRIDE(MC_SWA_PAGE_TOKENS), 7},
                                       {MC_V4_PAGE_TOKENS, MC_PAGE_STRIDE(MC_V4_PAGE_TOKENS), 4},
                                       {256, 256 * 584 + 16, 2},
                                       {3, 3 * 584 + 40, 30}};
    for (int it = 0; it < 16; ++it) {
        kvt_gather_case_t c;
        kvt_gather_case(r, geoms[it % 4], 1 + it % 8, &c);
        uint16_t *got = th_aligned_alloc(64, c.out_elems * 2 + 64), *want = malloc(c.out_elems * 2);
        for (size_t i = 0; i < c.out_elems; ++i) got[i] = POISON;
        kvt_gather_expected(&c, want);
        dsv4_kv_gather_args_t a = {c.cache, c.seq, c.glen, c.table, got};
        TH_OK(t, dsv4_kv_gather_ref(&c.desc, &a));
        kvt_cmp_gather(t, "gather_ref vs model", &c, got, want);
        if (th_failed(t)) {
            th_note(t, "case %d: R=%lld P=%lld offset=%lld out_rows=%lld strides=(%lld, %lld) glens=%s", it,
                    (long long)c.desc.num_reqs, (long long)c.g.P, (long long)c.desc.offset, (long long)c.desc.out_rows,
                    (long long)c.sreq, (long long)c.srow, c.glen ? "yes" : "no");
            break;
        }
        free(got), free(want);
        kvt_gather_case_free(&c);
    }
}

void test_kv_plans(th_ctx_t *t) {
    kv_gather_plan_t gp;
    dsv4_kv_gather_desc_t gd = {.num_reqs = 4,
                                .block_table_width = 10,
                                .out_rows = 131072,
                                .page_tokens = 64,
                                .page_stride_bytes = 37440,
                                .num_pages = 10,
                                .block_table_stride = 10,
                                .out_stride_req = 131072 * 512,
                                .out_stride_row = 512};
    TH_OK(t, kv_gather_plan(&gd, &gp));
    TH_CHECK(t, gp.workers == KV_GATHER_MAX_WORKERS, "131072 rows: %lld workers", (long long)gp.workers);
    TH_CHECK(t, gp.out_stride_row == 512 && gp.out_stride_req == 131072 * 512 && gp.block_table_stride == 10,
             "defaults %lld %lld %lld", (long long)gp.out_stride_row, (long long)gp.out_stride_req,
             (long long)gp.block_table_stride);
    gd.max_gather_len = 1000;
    TH_OK(t, kv_gather_plan(&gd, &gp));
    const int64_t per = KV_GATHER_WARPS * KV_GATHER_ROWS;
    TH_CHECK(t, gp.workers == (1000 + per - 1) / per, "hint 1000: %lld workers", (long long)gp.workers);
    gd.offset = gd.out_rows;
    TH_OK(t, kv_gather_plan(&gd, &gp));
    TH_CHECK(t, gp.workers == 1, "no room: %lld workers", (long long)gp.workers);

    kv_insert_plan_t ip;
    dsv4_kv_insert_desc_t id = {
        .num_tokens = 65537, .page_tokens = 64, .page_stride_bytes = 37440, .num_pages = 3, .k_stride_row = 512};
    TH_OK(t, kv_insert_plan(&id, &ip));
    TH_CHECK(t, ip.blocks == (65537 + KV_INSERT_WARPS - 1) / KV_INSERT_WARPS && ip.k_stride_row == 512,
             "insert plan %lld blocks stride %lld", (long long)ip.blocks, (long long)ip.k_stride_row);

    kv_swa_plan_t sp;
    dsv4_kv_swa_write_desc_t sd = {.num_tokens = 8192,
                                   .num_insert = 8192,
                                   .num_heads = 60,
                                   .num_heads_padded = 64,
                                   .max_position = 10,
                                   .page_tokens = 32,
                                   .page_stride_bytes = 19008,
                                   .num_pages = 300,
                                   .eps = 1e-6f,
                                   .q_stride_token = 64 * 512,
                                   .q_stride_head = 512,
                                   .kv_stride_row = 512};
    TH_OK(t, kv_swa_plan(&sd, &sp));
    TH_CHECK(t, sp.tasks_per_token == 65 && sp.blocks == (8192 * 65 + KV_SWA_WARPS - 1) / KV_SWA_WARPS,
             "swa plan: %lld tasks per token, %lld blocks", (long long)sp.tasks_per_token, (long long)sp.blocks);
    TH_CHECK(t, sp.q_stride_head == 512 && sp.q_stride_token == 64 * 512 && sp.kv_stride_row == 512,
             "swa defaults %lld %lld %lld", (long long)sp.q_stride_head, (long long)sp.q_stride_token,
             (long long)sp.kv_stride_row);
    sd.num_heads_padded = 0;
    sd.q_stride_token = 60 * 512;
    TH_OK(t, kv_swa_plan(&sd, &sp));
    TH_CHECK(t, sp.heads_padded == 60 && sp.q_stride_token == 60 * 512, "padded 0 means num_heads");
}
