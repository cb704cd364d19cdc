/*
 * The 64-bit offset case on the GPU: a 4.49 GB cache (120,000 pages of 37,440 bytes), so
 * page byte offsets pass both 2^31 (page 57,359) and 2^32 (page 114,717). Insert, the
 * SWA writer and the gather touch pages 3, 57,400, 70,000, 119,990 and the last slots of
 * the last page 119,999; the expected bytes come from the CPU references run on a compact
 * 5-page image with the pages renumbered. Then every byte of the whole cache is
 * downloaded and compared: the five pages against the image, every other page against
 * the poison, so a 32-bit wrap-around write anywhere would be found.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "test_kvcache.h"

#define BIG_P 64
#define BIG_STRIDE 37440
#define BIG_PAGES 120000
#define NW 5
#define POISON_BYTE 0x6B

static const int64_t wpages[NW] = {3, 57400, 119990, 119999, 70000};

static int64_t window_of(int64_t page) {
    for (int i = 0; i < NW; ++i)
        if (wpages[i] == page) return i;
    return -1;
}
/* slot in the big cache -> slot in the compact image (same position, renumbered page) */
static int64_t compact_slot(int64_t slot) { return slot < 0 ? slot : window_of(slot / BIG_P) * BIG_P + slot % BIG_P; }

static void verify_whole_cache(th_ctx_t *t, const th_buf_t *dc, const uint8_t *image) {
    const int64_t chunk_pages = 7000;
    uint8_t *buf = malloc((size_t)(chunk_pages * BIG_STRIDE)), *poison = malloc(BIG_STRIDE);
    memset(poison, POISON_BYTE, BIG_STRIDE);
    const kvt_geom_t one = {BIG_P, BIG_STRIDE, 1};
    int64_t bad_pages = 0;
    for (int64_t p0 = 0; p0 < BIG_PAGES; p0 += chunk_pages) {
        const int64_t n = p0 + chunk_pages <= BIG_PAGES ? chunk_pages : BIG_PAGES - p0;
        if (!TH_CUDA(t, cudaMemcpy(buf, (const uint8_t *)th_ptr(dc) + p0 * BIG_STRIDE, (size_t)(n * BIG_STRIDE),
                                   cudaMemcpyDeviceToHost)))
            break;
        for (int64_t i = 0; i < n; ++i) {
            const int64_t w = window_of(p0 + i);
            const uint8_t *want = w >= 0 ? image + w * BIG_STRIDE : poison;
            if (memcmp(buf + i * BIG_STRIDE, want, BIG_STRIDE) == 0) continue;
            if (bad_pages++ < 3) {
                char what[96];
                snprintf(what, sizeof what, "big cache page %lld (labelled page 0 below; %s)", (long long)(p0 + i),
                         w >= 0 ? "a touched page" : "must be untouched");
                kvt_cmp_cache(t, what, one, buf + i * BIG_STRIDE, want);
            }
        }
    }
    if (bad_pages) th_fail(t, __FILE__, __LINE__, "%lld pages of the big cache differ", (long long)bad_pages);
    free(buf), free(poison);
}

void test_kv_gpu_big_offset(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    const size_t big = (size_t)BIG_PAGES * BIG_STRIDE;
    uint8_t *image = th_aligned_alloc(64, (size_t)NW * BIG_STRIDE);
    memset(image, POISON_BYTE, (size_t)NW * BIG_STRIDE);
    th_buf_t dc = th_buf_device(big);
    th_buf_poison(&dc, POISON_BYTE);

    /* insert: 64 tokens into each of pages 3, 57400, 119990; every 16th skipped */
    const int64_t T = 192;
    uint16_t *k = th_aligned_alloc(64, (size_t)T * 1024);
    int64_t *slots = malloc((size_t)T * 8), *cslots = malloc((size_t)T * 8);
    kvt_fill_rows(r, k, T, 512, KVT_ROW_KINDS, NULL);
    for (int64_t i = 0; i < T; ++i) {
        slots[i] = i % 16 == 5 ? -1 : wpages[i / 64] * BIG_P + (i * 37) % 64;
        cslots[i] = compact_slot(slots[i]);
    }
    dsv4_kv_insert_desc_t di = {T, 512, BIG_P, BIG_STRIDE, BIG_PAGES}, ci = {T, 512, BIG_P, BIG_STRIDE, NW};
    th_buf_t dk = kvt_dev_from(k, (size_t)T * 1024), ds = kvt_dev_from(slots, (size_t)T * 8);
    dsv4_kv_insert_args_t ai = {th_ptr(&dk), th_ptr(&ds), th_ptr(&dc)}, hi = {k, cslots, image};
    TH_OK(t, dsv4_kv_insert_ref(&ci, &hi));
    void *s = th_stream_create(t);
    TH_OK(t, dsv4_kv_insert(&di, &ai, NULL, 0, DSV4_STREAM(s)));

    /* SWA writer: 16 tokens of 4 heads; kv rows into the last 8 slots of the last page and
     * into page 70000 */
    const int64_t N = 16, H = 4, max_pos = 64;
    uint16_t *q = th_aligned_alloc(64, (size_t)(N * H) * 1024), *qgot = malloc((size_t)(N * H) * 1024);
    uint16_t *kv = th_aligned_alloc(64, (size_t)N * 1024);
    float *cs = th_aligned_alloc(64, (size_t)max_pos * 256);
    int64_t pos[16], sslots[16], csslots[16];
    th_fill_bf16_normal(r, q, (size_t)(N * H * 512), 1.0);
    kvt_fill_rows(r, kv, N, 512, KVT_ROW_KINDS, NULL);
    for (int i = 0; i < max_pos * 64; ++i) cs[i] = (float)(2.0 * th_rng_unit(r) - 1.0);
    for (int64_t i = 0; i < N; ++i) {
        pos[i] = th_rng_range(r, 0, max_pos - 1);
        sslots[i] = i < 8 ? 119999 * BIG_P + 56 + i : 70000 * BIG_P + i;
        csslots[i] = compact_slot(sslots[i]);
    }
    th_buf_t dq = kvt_dev_from(q, (size_t)(N * H) * 1024), dkv = kvt_dev_from(kv, (size_t)N * 1024);
    th_buf_t dcs = kvt_dev_from(cs, (size_t)max_pos * 256), dpos = kvt_dev_from(pos, sizeof pos);
    th_buf_t dss = kvt_dev_from(sslots, sizeof sslots);
    dsv4_kv_swa_write_desc_t dsw = {.num_tokens = N,
                                    .num_insert = N,
                                    .num_heads = H,
                                    .max_position = max_pos,
                                    .page_tokens = BIG_P,
                                    .page_stride_bytes = BIG_STRIDE,
                                    .num_pages = BIG_PAGES,
                                    .eps = 1e-6f,
                                    .q_stride_token = H * 512,
                                    .q_stride_head = 512,
                                    .kv_stride_row = 512};
    dsv4_kv_swa_write_desc_t csw = dsw;
    csw.num_pages = NW;
    dsv4_kv_swa_write_args_t asw = {th_ptr(&dq), th_ptr(&dkv), th_ptr(&dpos), th_ptr(&dss), th_ptr(&dcs), th_ptr(&dc)};
    dsv4_kv_swa_write_args_t hsw = {q, kv, pos, csslots, cs, image};
    TH_OK(t, dsv4_kv_swa_write_ref(&csw, &hsw));
    TH_OK(t, dsv4_kv_swa_write(&dsw, &asw, NULL, 0, DSV4_STREAM(s)));

    /* gather the five pages back, one request */
    int32_t table[NW] = {3, 57400, 119990, 119999, 70000}, ctable[NW] = {0, 1, 2, 3, 4}, L = NW * BIG_P;
    uint16_t *want = th_aligned_alloc(64, (size_t)L * 1024), *got = malloc((size_t)L * 1024);
    th_buf_t dt = kvt_dev_from(table, sizeof table), dl = kvt_dev_from(&L, 4), dout = th_buf_device((size_t)L * 1024);
    th_buf_poison(&dout, 0x5A);
    dsv4_kv_gather_desc_t dg = {.num_reqs = 1,
                                .block_table_width = NW,
                                .out_rows = L,
                                .page_tokens = BIG_P,
                                .page_stride_bytes = BIG_STRIDE,
                                .num_pages = BIG_PAGES,
                                .block_table_stride = NW,
                                .out_stride_req = L * 512,
                                .out_stride_row = 512};
    dsv4_kv_gather_desc_t cgd = dg;
    cgd.num_pages = NW;
    dsv4_kv_gather_args_t ag = {th_ptr(&dc), th_ptr(&dl), NULL, th_ptr(&dt), th_ptr(&dout)};
    dsv4_kv_gather_args_t hg = {image, &L, NULL, ctable, want};
    TH_OK(t, dsv4_kv_gather(&dg, &ag, NULL, 0, DSV4_STREAM(s)));
    th_stream_sync_destroy(t, s);
    TH_OK(t, dsv4_kv_gather_ref(&cgd, &hg));

    th_buf_download(&dout, got);
    kvt_cmp_bf16_exact(t, "gather from pages past 2^31 and 2^32 bytes (row = position)", got, want, L, 512);
    th_buf_download(&dq, qgot);
    size_t qbad = 0;
    for (int64_t i = 0; i < N * H * 512; ++i) qbad += kvt_bf16_ulp_diff(qgot[i], q[i]) > 1;
    TH_CHECK(t, qbad == 0, "big cache SWA writer: %zu q elements more than 1 ulp off", qbad);
    verify_whole_cache(t, &dc, image);
    th_buf_guards_ok(t, &dc, "big cache");
    th_buf_free(&dc), th_buf_free(&dk), th_buf_free(&ds), th_buf_free(&dq), th_buf_free(&dkv), th_buf_free(&dcs);
    th_buf_free(&dpos), th_buf_free(&dss), th_buf_free(&dt), th_buf_free(&dl), th_buf_free(&dout);
    free(image), free(k), free(slots), free(cslots), free(q), free(qgot), free(kv), free(cs), free(want), free(got);
}
