/*
 * Bad input of dsv4_indexer_topk and dsv4_indexer_logits on the host: every check through
 * every public function it guards, each with the stated status and a message naming the
 * operator, field and value; nothing written (the outputs are compared afterwards).
 */
#include <stdlib.h>
#include <string.h>

#include "bad_input.h"
#include "test_indexer.h"

#define MIS(p, bytes) ((void *)((char *)(p) + (bytes)))

TH_EXPECT_FNS_WS(tk_expect, indexer_topk, dsv4_indexer_topk_desc_t, dsv4_indexer_topk_args_t)
TH_EXPECT_FNS(lg_expect, indexer_logits, dsv4_indexer_logits_desc_t, dsv4_indexer_logits_args_t)

enum { T = 4, H = 32, P = 64, STRIDE = P * 132, PAGES = 2, K = 8, W = 2 };

typedef struct {
    uint8_t *q8, *cache, *valid;
    float *w, *out;
    int64_t *pos;
    int32_t *req, *bt, *topk, *cand;
} bufs_t;

static void bufs(bufs_t *b) {
    b->q8 = th_aligned_alloc(64, T * H * 128 + 64), b->cache = th_aligned_alloc(64, PAGES * STRIDE + 64);
    b->valid = th_aligned_alloc(64, 64), b->w = th_aligned_alloc(64, T * H * 4 + 64);
    b->out = th_aligned_alloc(64, T * 128 * 4 + 64), b->pos = th_aligned_alloc(64, 64);
    b->req = th_aligned_alloc(64, 64), b->bt = th_aligned_alloc(64, 64), b->topk = th_aligned_alloc(64, T * K * 4 + 64);
    b->cand = th_aligned_alloc(64, T * 2048 * 4 + 64);
    memset(b->q8, 0x38, T * H * 128), memset(b->cache, 0x38, PAGES * STRIDE);
    for (int i = 0; i < T * H; ++i) b->w[i] = 1.0f;
    for (int i = 0; i < T; ++i) b->pos[i] = 20 + i, b->req[i] = 0, b->valid[i] = 1;
    b->bt[0] = 0, b->bt[1] = 1;
    memset(b->topk, 0x5A, T * K * 4), memset(b->cand, 0x5A, T * 2048 * 4), memset(b->out, 0x5A, T * 128 * 4);
}

static void bufs_free(bufs_t *b) {
    free(b->q8), free(b->cache), free(b->valid), free(b->w), free(b->out), free(b->pos), free(b->req), free(b->bt);
    free(b->topk), free(b->cand);
}

static int untouched(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; ++i)
        if (b[i] != 0x5A) return 0;
    return 1;
}

void test_idx_bad_input_topk(th_ctx_t *t) {
    bufs_t b;
    bufs(&b);
    const dsv4_indexer_topk_desc_t good = {.num_rows = T,
                                           .num_heads = H,
                                           .topk = K,
                                           .ratio = 1,
                                           .num_reqs = 1,
                                           .block_table_width = W,
                                           .block_table_stride = W,
                                           .page_tokens = P,
                                           .page_stride_bytes = STRIDE,
                                           .num_pages = PAGES,
                                           .topk_stride = K,
                                           .max_keys = 100,
                                           .candidate_mode = 1,
                                           .candidate_count = 2048,
                                           .candidate_stride = 2048};
    const dsv4_indexer_topk_args_t ga = {b.q8, b.w, b.pos, b.req, b.valid, b.bt, b.cache, b.topk, b.cand};
    size_t ws = 0;
    TH_OK(t, dsv4_indexer_topk_workspace_size(&good, &ws));
    tk_expect_null_ws(t, &good, &ga, ws);
    dsv4_indexer_topk_desc_t d;
#define DCASE(assign, st, field, value) (d = good, assign, tk_expect(t, &d, &ga, 1, st, field, value))
    DCASE(d.num_rows = -1, DSV4_STATUS_INVALID_VALUE, "num_rows", "-1");
    DCASE(d.num_heads = 16, DSV4_STATUS_INVALID_VALUE, "num_heads", "16");
    DCASE(d.topk = 0, DSV4_STATUS_INVALID_VALUE, "topk", "0");
    DCASE(d.topk = 2049, DSV4_STATUS_INVALID_VALUE, "topk", "2049");
    DCASE(d.ratio = 4, DSV4_STATUS_INVALID_VALUE, "ratio", "4");
    DCASE(d.num_reqs = 0, DSV4_STATUS_INVALID_VALUE, "num_reqs", "0");
    DCASE(d.block_table_width = 0, DSV4_STATUS_INVALID_VALUE, "block_table_width", "0");
    DCASE(d.block_table_stride = 1, DSV4_STATUS_INVALID_VALUE, "block_table_stride", "1");
    DCASE((d.num_reqs = 2, d.block_table_stride = INT64_MAX / 4), DSV4_STATUS_INVALID_VALUE, "block_table_stride",
          "overflows");
    DCASE(d.page_tokens = 96, DSV4_STATUS_INVALID_VALUE, "page_tokens", "96");
    DCASE(d.page_tokens = 0, DSV4_STATUS_INVALID_VALUE, "page_tokens", "0");
    DCASE(d.page_stride_bytes = STRIDE - 16, DSV4_STATUS_INVALID_VALUE, "page_stride_bytes", "8432");
    DCASE(d.page_stride_bytes = STRIDE + 4, DSV4_STATUS_MISALIGNED, "page_stride_bytes", "8452");
    DCASE(d.num_pages = 0, DSV4_STATUS_INVALID_VALUE, "num_pages", "0");
    DCASE(d.num_pages = INT64_MAX / STRIDE + 1, DSV4_STATUS_INVALID_VALUE, "num_pages", "1091781727847393");
    DCASE(d.max_keys = 0, DSV4_STATUS_INVALID_VALUE, "max_keys", "0");
    DCASE(d.max_keys = (1 << 26) + 1, DSV4_STATUS_INVALID_VALUE, "max_keys", "67108865");
    DCASE(d.topk_stride = 7, DSV4_STATUS_INVALID_VALUE, "topk_stride", "7");
    DCASE(d.topk_stride = INT64_MAX / 8, DSV4_STATUS_INVALID_VALUE, "topk_stride", "overflows");
    DCASE(d.candidate_mode = 3, DSV4_STATUS_INVALID_VALUE, "candidate_mode", "3");
    DCASE(d.candidate_block = 16, DSV4_STATUS_INVALID_VALUE, "candidate_block", "16");
    DCASE(d.candidate_count = 2049, DSV4_STATUS_INVALID_VALUE, "candidate_count", "2049");
    DCASE(d.candidate_stride = 100, DSV4_STATUS_INVALID_VALUE, "candidate_stride", "100");
    DCASE(d.num_splits = -1, DSV4_STATUS_INVALID_VALUE, "num_splits", "-1");
    DCASE(d.num_splits = 4097, DSV4_STATUS_INVALID_VALUE, "num_splits", "4097");
    DCASE((d.max_keys = 1 << 20, d.num_splits = 15), DSV4_STATUS_INVALID_VALUE, "num_splits", "15");
#undef DCASE
    dsv4_indexer_topk_args_t a;
#define ACASE(assign, st, field) (a = ga, assign, tk_expect(t, &good, &a, 0, st, field, NULL))
    ACASE(a.q8 = NULL, DSV4_STATUS_NULL_POINTER, "q8");
    ACASE(a.w = NULL, DSV4_STATUS_NULL_POINTER, "w");
    ACASE(a.positions = NULL, DSV4_STATUS_NULL_POINTER, "positions");
    ACASE(a.row_req = NULL, DSV4_STATUS_NULL_POINTER, "row_req");
    ACASE(a.block_table = NULL, DSV4_STATUS_NULL_POINTER, "block_table");
    ACASE(a.cache = NULL, DSV4_STATUS_NULL_POINTER, "cache");
    ACASE(a.topk = NULL, DSV4_STATUS_NULL_POINTER, "topk");
    ACASE(a.cand = NULL, DSV4_STATUS_NULL_POINTER, "cand");
    ACASE(a.q8 = MIS(b.q8, 8), DSV4_STATUS_MISALIGNED, "q8");
    ACASE(a.w = MIS(b.w, 2), DSV4_STATUS_MISALIGNED, "w");
    ACASE(a.positions = MIS(b.pos, 4), DSV4_STATUS_MISALIGNED, "positions");
    ACASE(a.row_req = MIS(b.req, 2), DSV4_STATUS_MISALIGNED, "row_req");
    ACASE(a.block_table = MIS(b.bt, 2), DSV4_STATUS_MISALIGNED, "block_table");
    ACASE(a.cache = MIS(b.cache, 8), DSV4_STATUS_MISALIGNED, "cache");
    ACASE(a.topk = MIS(b.topk, 2), DSV4_STATUS_MISALIGNED, "topk");
    ACASE(a.cand = MIS(b.cand, 2), DSV4_STATUS_MISALIGNED, "cand");
#undef ACASE
    /* the workspace: too small, then NULL, then misaligned (a stream stand-in gets past its check) */
    uint8_t *wsbuf = th_aligned_alloc(256, ws + 512);
    TH_EXPECT_STATUS(t, dsv4_indexer_topk(&good, &ga, wsbuf, ws - 1, DSV4_STREAM(wsbuf)),
                     DSV4_STATUS_WORKSPACE_TOO_SMALL);
    th_expect_error(t, "workspace_bytes", "indexer_topk", "workspace_bytes", NULL);
    TH_EXPECT_STATUS(t, dsv4_indexer_topk(&good, &ga, NULL, ws, DSV4_STREAM(wsbuf)), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_indexer_topk(&good, &ga, wsbuf + 16, ws, DSV4_STREAM(wsbuf)), DSV4_STATUS_MISALIGNED);
    th_expect_error(t, "workspace alignment", "indexer_topk", "workspace", NULL);
    dsv4_indexer_topk_desc_t m0 = good;
    m0.candidate_mode = 0;
    a = ga, a.cand = NULL; /* mode 0 needs no candidate buffer */
    TH_OK(t, dsv4_indexer_topk_check(&m0));
    TH_CHECK(t, untouched(b.topk, T * K * 4), "a failing call wrote into topk");
    TH_CHECK(t, untouched(b.cand, T * 2048 * 4), "a failing call wrote into cand");
    TH_OK(t, dsv4_indexer_topk_ref(&m0, &a)); /* and the good call writes every column */
    for (int i = 0; i < T * K; ++i) TH_CHECK(t, b.topk[i] >= -1 && b.topk[i] < 100, "topk[%d] = %d", i, b.topk[i]);
    free(wsbuf);
    bufs_free(&b);
}

void test_idx_bad_input_logits(th_ctx_t *t) {
    bufs_t b;
    bufs(&b);
    const dsv4_indexer_logits_desc_t good = {.num_rows = T,
                                             .num_heads = H,
                                             .ratio = 2,
                                             .num_reqs = 1,
                                             .block_table_width = W,
                                             .block_table_stride = W,
                                             .page_tokens = P,
                                             .page_stride_bytes = STRIDE,
                                             .num_pages = PAGES,
                                             .max_keys = 100,
                                             .out_cols = 120,
                                             .out_stride = 128};
    const dsv4_indexer_logits_args_t ga = {b.q8, b.w, b.pos, b.req, b.valid, b.bt, b.cache, b.out};
    lg_expect_null(t, &good, &ga);
    dsv4_indexer_logits_desc_t d;
#define DCASE(assign, st, field, value) (d = good, assign, lg_expect(t, &d, &ga, 1, st, field, value))
    DCASE(d.num_heads = 0, DSV4_STATUS_INVALID_VALUE, "num_heads", "0");
    DCASE(d.ratio = 0, DSV4_STATUS_INVALID_VALUE, "ratio", "0");
    DCASE(d.out_cols = -1, DSV4_STATUS_INVALID_VALUE, "out_cols", "-1");
    DCASE(d.out_stride = 100, DSV4_STATUS_INVALID_VALUE, "out_stride", "100");
    DCASE(d.out_stride = 122, DSV4_STATUS_MISALIGNED, "out_stride", "122");
    DCASE(d.out_stride = INT64_MAX / 8, DSV4_STATUS_INVALID_VALUE, "out_stride", "overflows");
    DCASE(d.page_tokens = 32, DSV4_STATUS_INVALID_VALUE, "page_tokens", "32");
#undef DCASE
    dsv4_indexer_logits_args_t a;
#define ACASE(assign, st, field) (a = ga, assign, lg_expect(t, &good, &a, 0, st, field, NULL))
    ACASE(a.out = NULL, DSV4_STATUS_NULL_POINTER, "out");
    ACASE(a.out = MIS(b.out, 4), DSV4_STATUS_MISALIGNED, "out");
    ACASE(a.cache = MIS(b.cache, 4), DSV4_STATUS_MISALIGNED, "cache");
    ACASE(a.row_req = NULL, DSV4_STATUS_NULL_POINTER, "row_req");
#undef ACASE
    TH_CHECK(t, untouched(b.out, T * 128 * 4), "a failing call wrote into out");
    bufs_free(&b);
}
