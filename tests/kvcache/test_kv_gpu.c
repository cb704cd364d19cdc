/*
 * GPU tests: each kernel against its CPU reference on the same inputs, every byte of the
 * cache and every element of q / out compared (untouched ones must keep their poison),
 * guard bands checked, inputs checked unmodified. On failure the log names the case
 * (sizes, strides, P), the first mismatches with their position in the record, and the
 * token or request behind them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "dsv4/numerics.h"
#include "test_kvcache.h"

static void expect_unchanged(th_ctx_t *t, const char *what, const th_buf_t *b, const void *host) {
    void *now = malloc(b->bytes);
    th_buf_download(b, now);
    TH_CHECK(t, memcmp(now, host, b->bytes) == 0, "input %s was modified", what);
    th_buf_guards_ok(t, b, what);
    free(now);
}

/* kv_warp.cuh's bf16-pair e4m3 step against numerics.h for every pair a block can
 * produce: the kernels' quantizer is not the reference's scalar form, so it gets its
 * own exhaustive check (kvcache.quant_elem_all_bf16_x_enc covers the scalar form). */
void test_kv_gpu_quant_all(th_ctx_t *t) {
    th_buf_t d = th_buf_device(256 * 65536);
    uint8_t *got = malloc(256 * 65536);
    TH_CHECK(t, kvt_gpu_quant_all(th_ptr(&d)) == 0, "launch failed");
    th_buf_download(&d, got);
    size_t bad = 0, pairs = 0;
    for (uint32_t enc = 0; enc < 256; ++enc) {
        const float inv = dsv4_ue8m0_inv_scale((uint8_t)enc);
        for (uint32_t h = 0; h < 65536; ++h) {
            if (!kvt_quant_pair_reachable((uint16_t)h, enc)) continue;
            ++pairs;
            const uint8_t want = dsv4_e4m3_quantize(dsv4_bf16_to_f32((uint16_t)h), inv);
            if (got[enc * 65536 + h] != want && bad++ < 8)
                th_fail(t, __FILE__, __LINE__, "bf16 0x%04x enc %u: 0x%02x, dsv4_e4m3_quantize gives 0x%02x", h, enc,
                        got[enc * 65536 + h], want);
        }
    }
    th_note(t, "%zu differences over %zu reachable (x, enc) pairs", bad, pairs);
    TH_CHECK(t, bad == 0, "the kernels' e4m3 step differs from dsv4_e4m3_quantize");
    th_buf_guards_ok(t, &d, "codes");
    th_buf_free(&d);
    free(got);
}

static void gpu_insert_case(th_ctx_t *t, kvt_geom_t g, int64_t T, int64_t kst, int64_t pad_rows) {
    th_rng_t *r = th_rng(t);
    const size_t kbytes = (size_t)((T + pad_rows) * kst * 2 + 16), cbytes = kvt_cache_bytes(g);
    uint16_t *k = th_aligned_alloc(64, (kbytes + 63) / 64 * 64);
    int64_t *slots = malloc((size_t)(T ? T : 1) * 8);
    int *kinds = malloc((size_t)(T + pad_rows + 1) * sizeof(int));
    uint8_t *want = th_aligned_alloc(64, cbytes), *got = malloc(cbytes);
    kvt_fill_rows(r, k, T + pad_rows, kst, KVT_ROW_KINDS, kinds);
    kvt_make_slots(r, g, T, 1, slots);
    for (size_t i = 0; i < cbytes; ++i) want[i] = (uint8_t)th_rng_u32(r); /* poison: a random image */
    th_buf_t dk = kvt_dev_from(k, kbytes), ds = kvt_dev_from(slots, (size_t)(T ? T : 1) * 8);
    th_buf_t dc = kvt_dev_from(want, cbytes);
    dsv4_kv_insert_desc_t d = {.num_tokens = T,
                               .k_stride_row = kst,
                               .page_tokens = g.P,
                               .page_stride_bytes = g.stride,
                               .num_pages = g.num_pages};
    dsv4_kv_insert_args_t ha = {k, slots, want}, da = {th_ptr(&dk), th_ptr(&ds), th_ptr(&dc)};
    TH_OK(t, dsv4_kv_insert_ref(&d, &ha));
    void *s = th_stream_create(t);
    TH_OK(t, dsv4_kv_insert(&d, &da, NULL, 0, DSV4_STREAM(s)));
    th_stream_sync_destroy(t, s);
    th_buf_download(&dc, got);
    char what[128];
    snprintf(what, sizeof what, "kv_insert T=%lld k_stride=%lld pad_rows=%lld P=%lld stride=%lld pages=%lld",
             (long long)T, (long long)kst, (long long)pad_rows, (long long)g.P, (long long)g.stride,
             (long long)g.num_pages);
    if (kvt_cmp_cache(t, what, g, got, want)) kvt_explain_insert(t, g, got, want, slots, T, kinds, k, kst);
    th_buf_guards_ok(t, &dc, "cache");
    expect_unchanged(t, "k", &dk, k);
    expect_unchanged(t, "slot_mapping", &ds, slots);
    th_buf_free(&dk), th_buf_free(&ds), th_buf_free(&dc);
    free(k), free(slots), free(kinds), free(want), free(got);
}

void test_kv_gpu_insert(th_ctx_t *t) {
    gpu_insert_case(t, (kvt_geom_t){MC_V4_PAGE_TOKENS, MC_PAGE_STRIDE(MC_V4_PAGE_TOKENS), 40}, 2000, 512, 0);
    gpu_insert_case(t, (kvt_geom_t){MC_SWA_PAGE_TOKENS, MC_PAGE_STRIDE(MC_SWA_PAGE_TOKENS), 70}, 2000, 520,
                    13); /* V4.1 SWA page, padded k */
    gpu_insert_case(t, (kvt_geom_t){256, 256 * 584 + 48, 9}, 2000, 512, 0);
    gpu_insert_case(t, (kvt_geom_t){MC_C128_PAGE_TOKENS, MC_PAGE_STRIDE(MC_C128_PAGE_TOKENS), 700}, 1000, 1024,
                    1);                                           /* V4 C128A page */
    gpu_insert_case(t, (kvt_geom_t){64, 64 * 584, 3}, 7, 512, 0); /* a partial CTA */
    gpu_insert_case(t, (kvt_geom_t){1, 592, 10}, 1, 512, 0);
    gpu_insert_case(t, (kvt_geom_t){MC_V4_PAGE_TOKENS, MC_PAGE_STRIDE(MC_V4_PAGE_TOKENS), 2}, 0, 512, 0); /* no-op */
}

/* ---- SWA writer --------------------------------------------------------------------------- */
typedef struct {
    int64_t N, Ni, H, Hp, sh, st, kvs;
    int32_t skip_q_norm;
} swa_shape_t;

static void gpu_swa_case(th_ctx_t *t, kvt_geom_t g, swa_shape_t c) {
    th_rng_t *r = th_rng(t);
    const int64_t max_pos = 4096;
    const size_t qn = (size_t)(c.N * c.st), kvn = (size_t)(c.Ni * c.kvs + 8), cbytes = kvt_cache_bytes(g);
    uint16_t *q = th_aligned_alloc(64, (qn * 2 + 63) / 64 * 64), *q_in = malloc(qn * 2), *got_q = malloc(qn * 2);
    uint16_t *kv = th_aligned_alloc(64, (kvn * 2 + 63) / 64 * 64);
    float *cs = th_aligned_alloc(64, (size_t)max_pos * 256);
    int64_t *pos = malloc((size_t)c.N * 8), *slots = malloc((size_t)(c.Ni ? c.Ni : 1) * 8);
    uint8_t *want = th_aligned_alloc(64, cbytes), *got = malloc(cbytes);
    for (size_t i = 0; i < qn; ++i) q[i] = (uint16_t)th_rng_u32(r); /* gaps and padding heads: junk */
    for (int64_t n = 0; n < c.N; ++n)
        for (int64_t h = 0; h < c.H; ++h)
            kvt_fill_row(r, (kvt_row_kind_t)((n + h) % KVT_ROW_KINDS), q + n * c.st + h * c.sh);
    kvt_fill_rows(r, kv, c.Ni, c.kvs, KVT_ROW_KINDS, NULL);
    for (int64_t i = 0; i < max_pos * 64; ++i) cs[i] = (float)(2.0 * th_rng_unit(r) - 1.0);
    for (int64_t n = 0; n < c.N; ++n)
        pos[n] = th_rng_range(r, 0, 15) ? th_rng_range(r, 0, max_pos - 1) : th_rng_range(r, -2, 2 * max_pos);
    kvt_make_slots(r, g, c.Ni, 1, slots);
    for (size_t i = 0; i < cbytes; ++i) want[i] = (uint8_t)th_rng_u32(r);
    memcpy(q_in, q, qn * 2);
    th_buf_t dq = kvt_dev_from(q, qn * 2), dkv = kvt_dev_from(kv, kvn * 2),
             dcs = kvt_dev_from(cs, (size_t)max_pos * 256);
    th_buf_t dpos = kvt_dev_from(pos, (size_t)c.N * 8), dsl = kvt_dev_from(slots, (size_t)(c.Ni ? c.Ni : 1) * 8);
    th_buf_t dc = kvt_dev_from(want, cbytes);
    dsv4_kv_swa_write_desc_t d = {.num_tokens = c.N,
                                  .num_insert = c.Ni,
                                  .num_heads = c.H,
                                  .num_heads_padded = c.Hp,
                                  .q_stride_token = c.st,
                                  .q_stride_head = c.sh,
                                  .kv_stride_row = c.kvs,
                                  .max_position = max_pos,
                                  .page_tokens = g.P,
                                  .page_stride_bytes = g.stride,
                                  .num_pages = g.num_pages,
                                  .eps = 1e-6f,
                                  .skip_q_norm = c.skip_q_norm};
    dsv4_kv_swa_write_args_t ha = {q, kv, pos, slots, cs, want};
    dsv4_kv_swa_write_args_t da = {th_ptr(&dq), th_ptr(&dkv), th_ptr(&dpos), th_ptr(&dsl), th_ptr(&dcs), th_ptr(&dc)};
    TH_OK(t, dsv4_kv_swa_write_ref(&d, &ha));
    void *s = th_stream_create(t);
    TH_OK(t, dsv4_kv_swa_write(&d, &da, NULL, 0, DSV4_STREAM(s)));
    th_stream_sync_destroy(t, s);
    th_buf_download(&dc, got);
    th_buf_download(&dq, got_q);
    char what[160];
    snprintf(what, sizeof what,
             "kv_swa_write N=%lld Ni=%lld H=%lld Hp=%lld strides(head %lld, token %lld, kv %lld) P=%lld%s",
             (long long)c.N, (long long)c.Ni, (long long)c.H, (long long)c.Hp, (long long)c.sh, (long long)c.st,
             (long long)c.kvs, (long long)g.P, c.skip_q_norm ? " skip_q_norm" : "");
    kvt_cmp_cache(t, what, g, got, want);
    /* q: within 1 ulp inside the real heads (the contract); bit-exact is expected, since the
     * kernel and the reference sum in the same order, and reported. Elsewhere exact, and
     * everywhere with skip_q_norm (no sum: the contract is bit-exact). */
    size_t off_1ulp = 0, bad = 0;
    for (int64_t n = 0; n < c.N; ++n)
        for (int64_t e = 0; e < c.st; ++e) {
            const int64_t h = e / c.sh, dd = e % c.sh;
            const size_t i = (size_t)(n * c.st + e);
            const int in_head = h < c.H && dd < 512 && !c.skip_q_norm;
            const uint32_t u = kvt_bf16_ulp_diff(got_q[i], q[i]);
            if (in_head && u == 1) ++off_1ulp;
            if (in_head ? u <= 1 : got_q[i] == q[i]) continue;
            if (bad++ < 8)
                th_fail(t, __FILE__, __LINE__,
                        "%s: q token %lld (position %lld) %s %lld dim %lld is 0x%04x, expected 0x%04x (input 0x%04x)",
                        what, (long long)n, (long long)pos[n], h < c.Hp ? "head" : "token gap after head", (long long)h,
                        (long long)dd, got_q[i], q[i], q_in[i]);
        }
    if (bad) th_fail(t, __FILE__, __LINE__, "%s: %zu q elements out of tolerance", what, bad);
    th_note(t, "%s: %zu q elements 1 ulp off the reference (0 expected)", what, off_1ulp);
    th_buf_guards_ok(t, &dq, "q");
    th_buf_guards_ok(t, &dc, "cache");
    expect_unchanged(t, "kv", &dkv, kv);
    expect_unchanged(t, "position_ids", &dpos, pos);
    expect_unchanged(t, "cos_sin_cache", &dcs, cs);
    th_buf_free(&dq), th_buf_free(&dkv), th_buf_free(&dcs), th_buf_free(&dpos), th_buf_free(&dsl), th_buf_free(&dc);
    free(q), free(q_in), free(got_q), free(kv), free(cs), free(pos), free(slots), free(want), free(got);
}

void test_kv_gpu_swa(th_ctx_t *t) {
    const kvt_geom_t v41 = {MC_SWA_PAGE_TOKENS, MC_PAGE_STRIDE(MC_SWA_PAGE_TOKENS), 40},
                     v4 = {MC_V4_PAGE_TOKENS, MC_PAGE_STRIDE(MC_V4_PAGE_TOKENS), 20};
    gpu_swa_case(t, v41, (swa_shape_t){300, 300, 64, 64, 512, 64 * 512, 512, 0});
    gpu_swa_case(t, v41, (swa_shape_t){257, 200, 32, 32, 520, 32 * 520 + 8, 528, 0}); /* gaps everywhere */
    gpu_swa_case(t, v4, (swa_shape_t){100, 100, 16, 64, 512, 64 * 512, 512, 0});      /* head padding 16 -> 64 */
    gpu_swa_case(t, v4, (swa_shape_t){33, 0, 1, 1, 512, 512, 512, 0});                /* nothing to insert */
    gpu_swa_case(t, v41, (swa_shape_t){1, 1, 128, 128, 512, 128 * 512, 512, 0});      /* decode-like, one token */
    /* skip_q_norm: the same shapes, q rotated only */
    gpu_swa_case(t, v41, (swa_shape_t){300, 300, 64, 64, 512, 64 * 512, 512, 1});
    gpu_swa_case(t, v41, (swa_shape_t){257, 200, 32, 32, 520, 32 * 520 + 8, 528, 1});
    gpu_swa_case(t, v4, (swa_shape_t){100, 100, 16, 64, 512, 64 * 512, 512, 1});
    gpu_swa_case(t, v41, (swa_shape_t){1, 1, 128, 128, 512, 128 * 512, 512, 1});
}

/* ---- gather ------------------------------------------------------------------------------- */
void test_kv_gpu_gather(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    static const kvt_geom_t geoms[] = {{MC_SWA_PAGE_TOKENS, MC_PAGE_STRIDE(MC_SWA_PAGE_TOKENS), 60},
                                       {MC_V4_PAGE_TOKENS, MC_PAGE_STRIDE(MC_V4_PAGE_TOKENS), 30},
                                       {256, 256 * 584 + 16, 8},
                                       {3, 3 * 584 + 40, 300}};
    for (int it = 0; it < 16; ++it) {
        kvt_gather_case_t c;
        kvt_gather_case(r, geoms[it % 4], 1 + it % 8, &c);
        uint16_t *want = th_aligned_alloc(64, (c.out_elems * 2 + 63) / 64 * 64), *got = malloc(c.out_elems * 2);
        kvt_gather_expected(&c, want);
        uint16_t *poison = malloc(c.out_elems * 2);
        for (size_t i = 0; i < c.out_elems; ++i) poison[i] = 0x5A5A;
        const int64_t R = c.desc.num_reqs;
        th_buf_t dc = kvt_dev_from(c.cache, kvt_cache_bytes(c.g)), dseq = kvt_dev_from(c.seq, (size_t)R * 4);
        th_buf_t dgl = c.glen ? kvt_dev_from(c.glen, (size_t)R * 4) : (th_buf_t){0};
        th_buf_t dtab = kvt_dev_from(c.table, (size_t)(R * c.desc.block_table_stride) * 4);
        th_buf_t dout = kvt_dev_from(poison, c.out_elems * 2);
        dsv4_kv_gather_args_t da = {th_ptr(&dc), th_ptr(&dseq), c.glen ? th_ptr(&dgl) : NULL, th_ptr(&dtab),
                                    th_ptr(&dout)};
        void *s = th_stream_create(t);
        TH_OK(t, dsv4_kv_gather(&c.desc, &da, NULL, 0, DSV4_STREAM(s)));
        th_stream_sync_destroy(t, s);
        th_buf_download(&dout, got);
        char what[200];
        snprintf(what, sizeof what,
                 "kv_gather case %d: R=%lld P=%lld stride=%lld offset=%lld out_rows=%lld strides(req %lld, row %lld) "
                 "width=%lld hint=%lld gather_lens=%s",
                 it, (long long)R, (long long)c.g.P, (long long)c.g.stride, (long long)c.desc.offset,
                 (long long)c.desc.out_rows, (long long)c.sreq, (long long)c.srow, (long long)c.desc.block_table_width,
                 (long long)c.desc.max_gather_len, c.glen ? "yes" : "no");
        kvt_cmp_gather(t, what, &c, got, want);
        th_buf_guards_ok(t, &dout, "out");
        expect_unchanged(t, "cache", &dc, c.cache);
        expect_unchanged(t, "block_table", &dtab, c.table);
        th_buf_free(&dc), th_buf_free(&dseq), th_buf_free(&dtab), th_buf_free(&dout);
        if (c.glen) th_buf_free(&dgl);
        free(want), free(got), free(poison);
        kvt_gather_case_free(&c);
        if (th_failed(t)) break;
    }
}

/* ---- bad input on the device: nothing written, with a real stream ----------------------- */
void test_kv_gpu_bad_input_writes_nothing(th_ctx_t *t) {
    const size_t cbytes = 4 * 37440, qbytes = 2 * 4 * 1024, obytes = 16 * 1024;
    uint8_t *host = malloc(cbytes + qbytes + obytes), *back = malloc(cbytes + qbytes + obytes);
    memset(host, 0x6B, cbytes + qbytes + obytes);
    th_buf_t dc = kvt_dev_from(host, cbytes), dq = kvt_dev_from(host, qbytes), dout = kvt_dev_from(host, obytes);
    th_buf_t dk = kvt_dev_from(host, 8 * 1024), dmeta = kvt_dev_from(host, 4096);
    void *s = th_stream_create(t);
    dsv4_stream_t st = DSV4_STREAM(s);
    int64_t *slots = th_ptr(&dmeta); /* contents irrelevant: nothing may launch */
    dsv4_kv_insert_desc_t di = {4, 512, 64, 37440, 4};
    dsv4_kv_insert_args_t ai = {th_ptr(&dk), slots, th_ptr(&dc)};
    ai.k = (const uint16_t *)((const char *)th_ptr(&dk) + 2);
    TH_EXPECT_STATUS(t, dsv4_kv_insert(&di, &ai, NULL, 0, st), DSV4_STATUS_MISALIGNED);
    ai.k = th_ptr(&dk), di.page_stride_bytes = 37376 + 8;
    TH_EXPECT_STATUS(t, dsv4_kv_insert(&di, &ai, NULL, 0, st), DSV4_STATUS_MISALIGNED);
    di.page_stride_bytes = 37440;
    ai.cache = (uint8_t *)th_ptr(&dc) + 8;
    TH_EXPECT_STATUS(t, dsv4_kv_insert(&di, &ai, NULL, 0, st), DSV4_STATUS_MISALIGNED);
    ai.cache = th_ptr(&dc);
    TH_EXPECT_STATUS(t, dsv4_kv_insert(&di, &ai, NULL, 0, NULL), DSV4_STATUS_NULL_POINTER);

    dsv4_kv_swa_write_desc_t ds = {.num_tokens = 4,
                                   .num_insert = 4,
                                   .num_heads = 2,
                                   .max_position = 4,
                                   .page_tokens = 64,
                                   .page_stride_bytes = 37440,
                                   .num_pages = 4,
                                   .eps = -1.0f,
                                   .q_stride_token = 2 * 512,
                                   .q_stride_head = 512,
                                   .kv_stride_row = 512};
    dsv4_kv_swa_write_args_t as = {th_ptr(&dq), th_ptr(&dk), slots, slots, th_ptr(&dk), th_ptr(&dc)};
    TH_EXPECT_STATUS(t, dsv4_kv_swa_write(&ds, &as, NULL, 0, st), DSV4_STATUS_INVALID_VALUE);
    ds.eps = 1e-6f, as.cos_sin_cache = (const float *)((const char *)th_ptr(&dk) + 4);
    TH_EXPECT_STATUS(t, dsv4_kv_swa_write(&ds, &as, NULL, 0, st), DSV4_STATUS_MISALIGNED);

    int32_t *i32 = th_ptr(&dmeta);
    dsv4_kv_gather_desc_t dg = {.num_reqs = 2,
                                .block_table_width = 1,
                                .out_rows = 8,
                                .out_stride_row = 516,
                                .page_tokens = 64,
                                .page_stride_bytes = 37440,
                                .num_pages = 4,
                                .block_table_stride = 1,
                                .out_stride_req = 8 * 516};
    dsv4_kv_gather_args_t ag = {th_ptr(&dc), i32, NULL, i32, th_ptr(&dout)};
    TH_EXPECT_STATUS(t, dsv4_kv_gather(&dg, &ag, NULL, 0, st), DSV4_STATUS_MISALIGNED);
    dg.out_stride_row = 0, dg.offset = 9;
    TH_EXPECT_STATUS(t, dsv4_kv_gather(&dg, &ag, NULL, 0, st), DSV4_STATUS_INVALID_VALUE);
    th_stream_sync_destroy(t, s);

    th_buf_download(&dc, back);
    th_buf_download(&dq, back + cbytes);
    th_buf_download(&dout, back + cbytes + qbytes);
    TH_CHECK(t, memcmp(back, host, cbytes + qbytes + obytes) == 0, "a rejected call wrote to device memory");
    th_buf_guards_ok(t, &dc, "cache"), th_buf_guards_ok(t, &dq, "q"), th_buf_guards_ok(t, &dout, "out");
    th_buf_free(&dc), th_buf_free(&dq), th_buf_free(&dout), th_buf_free(&dk), th_buf_free(&dmeta);
    free(host), free(back);
}

/* Insert then gather, captured in a CUDA graph and replayed: the calls are capture-safe. */
void test_kv_gpu_graph_capture(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    const kvt_geom_t g = {MC_V4_PAGE_TOKENS, MC_PAGE_STRIDE(MC_V4_PAGE_TOKENS), 4};
    const int64_t T = 256;
    uint16_t *k = th_aligned_alloc(64, (size_t)T * 1024), *want = th_aligned_alloc(64, (size_t)T * 1024);
    uint16_t *got = malloc((size_t)T * 1024);
    int64_t *slots = malloc((size_t)T * 8);
    int32_t table[4] = {3, 1, 0, 2}, L = (int32_t)T;
    uint8_t *cache = th_aligned_alloc(64, kvt_cache_bytes(g));
    kvt_fill_rows(r, k, T, 512, KVT_ROW_NORMAL + 1, NULL);
    for (int64_t i = 0; i < T; ++i) slots[i] = table[i / 64] * 64 + i % 64;
    memset(cache, 0, kvt_cache_bytes(g));
    th_buf_t dk = kvt_dev_from(k, (size_t)T * 1024), ds = kvt_dev_from(slots, (size_t)T * 8);
    th_buf_t dc = kvt_dev_from(cache, kvt_cache_bytes(g)), dt = kvt_dev_from(table, 16), dl = kvt_dev_from(&L, 4);
    th_buf_t dout = th_buf_device((size_t)T * 1024);
    th_buf_poison(&dout, 0x5A);
    dsv4_kv_insert_desc_t di;
    dsv4_kv_gather_desc_t dg;
    kvt_roundtrip_descs(g, T, &di, &dg);
    dsv4_kv_insert_args_t hi = {k, slots, cache}, ai = {th_ptr(&dk), th_ptr(&ds), th_ptr(&dc)};
    dsv4_kv_gather_args_t hg = {cache, &L, NULL, table, want},
                          ag = {th_ptr(&dc), th_ptr(&dl), NULL, th_ptr(&dt), th_ptr(&dout)};
    TH_OK(t, dsv4_kv_insert_ref(&di, &hi));
    TH_OK(t, dsv4_kv_gather_ref(&dg, &hg));
    cudaStream_t s = (cudaStream_t)th_stream_create(t);
    /* Warm up outside the capture (the first call loads the kernels, as a serving engine's
     * warm-up does), then poison the output so that only the graph can fill it. */
    TH_OK(t, dsv4_kv_insert(&di, &ai, NULL, 0, DSV4_STREAM(s)));
    TH_OK(t, dsv4_kv_gather(&dg, &ag, NULL, 0, DSV4_STREAM(s)));
    TH_CUDA(t, cudaStreamSynchronize(s));
    th_buf_poison(&dout, 0x5A);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    TH_CUDA(t, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    TH_OK(t, dsv4_kv_insert(&di, &ai, NULL, 0, DSV4_STREAM(s)));
    TH_OK(t, dsv4_kv_gather(&dg, &ag, NULL, 0, DSV4_STREAM(s)));
    TH_CUDA(t, cudaStreamEndCapture(s, &graph));
    if (TH_CUDA(t, cudaGraphInstantiate(&exec, graph, 0))) {
        TH_CUDA(t, cudaGraphLaunch(exec, s));
        TH_CUDA(t, cudaGraphLaunch(exec, s)); /* replay: same result */
    }
    th_stream_sync_destroy(t, s);
    th_buf_download(&dout, got);
    kvt_cmp_bf16_exact(t, "graph-captured insert + gather", got, want, T, 512);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    th_buf_free(&dk), th_buf_free(&ds), th_buf_free(&dc), th_buf_free(&dt), th_buf_free(&dl), th_buf_free(&dout);
    free(k), free(want), free(got), free(slots), free(cache);
}
