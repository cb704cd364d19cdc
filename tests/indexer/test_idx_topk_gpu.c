/*
 * GPU tests of dsv4_indexer_logits and dsv4_indexer_topk:
 *   - every (q code, k code) pair through the kernel's MMA decode path (two heads with
 *     w = +1 and -1 turn relu into the identity: the logit is the exact product, NaN for
 *     the NaN codes), 65,536 pairs in one 256 x 256 call;
 *   - logits against the fp64 model within 1e-5 of the absolute mass, NaN and inf at the
 *     same places, -inf past each row's columns, guards intact;
 *   - top-k (and mode 1's candidate blocks) bit for bit against the reference selection run
 *     on the kernel's own materialized logits, for several forced split counts and the
 *     automatic one, and as sets with a margin against fp64.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "dsv4/numerics.h"
#include "indexer/indexer_common.h"
#include "test_indexer.h"

static th_buf_t up(const void *host, size_t n) {
    th_buf_t b = th_buf_device(n ? n : 4);
    if (n) th_buf_upload(&b, host);
    return b;
}

typedef struct {
    th_buf_t q8, w, pos, req, valid, bt, cache;
} src_dev_t;

static void src_dev(const it_topk_case_t *c, src_dev_t *g) {
    const size_t T = (size_t)c->d.num_rows;
    g->q8 = up(c->q8, c->q8_bytes), g->w = up(c->w, T * (size_t)c->d.num_heads * 4), g->pos = up(c->pos, T * 8);
    g->req = up(c->req, T * 4), g->valid = up(c->valid, T), g->bt = up(c->bt, c->bt_elems * 4);
    g->cache = up(c->cache, c->cache_bytes);
}
static void src_dev_free(src_dev_t *g) {
    th_buf_free(&g->q8), th_buf_free(&g->w), th_buf_free(&g->pos), th_buf_free(&g->req), th_buf_free(&g->valid);
    th_buf_free(&g->bt), th_buf_free(&g->cache);
}

/* dsv4_indexer_logits on the device for W columns; returns the host copy [T, stride]. */
static float *gpu_logits(th_ctx_t *t, const it_topk_case_t *c, src_dev_t *g, int64_t W, int64_t *stride) {
    const dsv4_indexer_logits_desc_t ld = it_logits_desc(&c->d, W);
    const size_t bytes = (size_t)(c->d.num_rows * ld.out_stride) * 4;
    th_buf_t out = th_buf_device(bytes ? bytes : 4);
    th_buf_poison(&out, 0xA5);
    const dsv4_indexer_logits_args_t a = {th_ptr(&g->q8),    th_ptr(&g->w),  th_ptr(&g->pos),   th_ptr(&g->req),
                                          th_ptr(&g->valid), th_ptr(&g->bt), th_ptr(&g->cache), th_ptr(&out)};
    void *s = th_stream_create(t);
    TH_OK(t, dsv4_indexer_logits(&ld, &a, NULL, 0, DSV4_STREAM(s)));
    th_stream_sync_destroy(t, s);
    float *h = malloc(bytes + 4);
    th_buf_download(&out, h);
    th_buf_guards_ok(t, &out, "logits");
    th_buf_free(&out);
    *stride = ld.out_stride;
    return h;
}

/* ---- the exhaustive MMA pair test ------------------------------------------------------- */
void test_idx_gpu_mma_pairs(th_ctx_t *t) {
    it_topk_case_t c;
    memset(&c, 0, sizeof c);
    enum { N = 256, H = 32, P = 64 };
    c.d = (dsv4_indexer_topk_desc_t){.num_rows = N,
                                     .num_heads = H,
                                     .topk = 1,
                                     .ratio = 1,
                                     .num_reqs = 1,
                                     .block_table_width = N / P,
                                     .block_table_stride = N / P,
                                     .page_tokens = P,
                                     .page_stride_bytes = P * 132,
                                     .num_pages = N / P,
                                     .topk_stride = 1,
                                     .max_keys = N};
    c.q8_bytes = (size_t)N * H * 128;
    c.q8 = calloc(c.q8_bytes, 1), c.w = calloc((size_t)N * H, 4), c.pos = malloc(N * 8), c.req = calloc(N, 4);
    c.valid = malloc(N), c.bt = malloc((N / P) * 4), c.bt_elems = N / P;
    c.cache_bytes = (size_t)(N / P) * P * 132, c.cache = calloc(c.cache_bytes, 1);
    for (int i = 0; i < N / P; ++i) c.bt[i] = i;
    for (int a = 0; a < N; ++a) { /* row a: code a at dim d (head 0), its negation in head 1 */
        const int d = (a * 37) % 128;
        c.q8[((size_t)a * H + 0) * 128 + d] = (uint8_t)a;
        c.q8[((size_t)a * H + 1) * 128 + d] = (uint8_t)(a ^ 0x80);
        c.w[a * H] = 1.0f, c.w[a * H + 1] = -1.0f;
        c.pos[a] = N - 1, c.valid[a] = 1;
    }
    for (int b = 0; b < N; ++b) { /* key b: code b at every dim, scale 1 */
        uint8_t *page = c.cache + (size_t)(b / P) * P * 132;
        memset(page + (b % P) * 128, b, 128);
        const uint32_t one = 0x3F800000u;
        memcpy(page + P * 128 + (b % P) * 4, &one, 4);
    }
    src_dev_t g;
    src_dev(&c, &g);
    int64_t stride;
    float *lg = gpu_logits(t, &c, &g, N, &stride);
    int64_t bad = 0;
    for (int a = 0; a < N; ++a)
        for (int b = 0; b < N; ++b) {
            const float want = dsv4_e4m3_to_f32((uint8_t)a) * dsv4_e4m3_to_f32((uint8_t)b), got = lg[a * stride + b];
            const int ok = isnan(want) ? isnan(got) : dsv4_f32_bits(got) == dsv4_f32_bits(want + 0.0f);
            if (!ok && bad++ < 8)
                TH_CHECK(t, 0, "pair q 0x%02x k 0x%02x: %.9g, exact %.9g", a, b, (double)got, (double)want);
        }
    th_note(t, "65536 pairs, %lld wrong", (long long)bad);
    free(lg);
    src_dev_free(&g);
    it_topk_case_free(&c);
}

/* ---- logits against the fp64 model --------------------------------------------------------- */
static void logits_case(th_ctx_t *t, const it_topk_shape_t *sh, int64_t extra) {
    it_topk_case_t c;
    it_topk_case(th_rng(t), sh, &c);
    src_dev_t g;
    src_dev(&c, &g);
    const int64_t W = c.d.max_keys + extra;
    int64_t stride;
    float *lg = gpu_logits(t, &c, &g, W, &stride);
    it_check_logits(t, "kernel logits", &c, lg, stride, W);
    free(lg);
    src_dev_free(&g);
    it_topk_case_free(&c);
}

void test_idx_gpu_logits(th_ctx_t *t) {
    logits_case(t,
                &(it_topk_shape_t){.heads = 32,
                                   .topk = 8,
                                   .ratio = 1,
                                   .page_tokens = 64,
                                   .reqs = 3,
                                   .ctx_max = 700,
                                   .next_n = 6,
                                   .prefill_rows = 3,
                                   .pad_rows = 3,
                                   .bad_page = 1,
                                   .specials = 1},
                100);
    logits_case(t,
                &(it_topk_shape_t){.heads = 64,
                                   .topk = 8,
                                   .ratio = 2,
                                   .page_tokens = 128,
                                   .page_stride = 128 * 132 + 576,
                                   .reqs = 2,
                                   .ctx_min = 100,
                                   .ctx_max = 5000,
                                   .next_n = 2,
                                   .prefill_rows = 2,
                                   .pad_rows = 1,
                                   .bt_pad = 5},
                0);
}

/* ---- top-k and candidates against the selection on the kernel's own logits ------------------ */
static float arr_logit(const void *ctx, int64_t j) { return ((const float *)ctx)[j]; }

static void topk_case(th_ctx_t *t, const it_topk_shape_t *sh, const int64_t *splits, int nsplits) {
    it_topk_case_t c;
    it_topk_case(th_rng(t), sh, &c);
    src_dev_t g;
    src_dev(&c, &g);
    const int64_t T = c.d.num_rows, K = c.d.topk, W = c.d.max_keys;
    int64_t stride;
    float *lg = gpu_logits(t, &c, &g, W, &stride);
    idx_topk_plan_t plan;
    TH_OK(t, idx_topk_plan(&c.d, &plan));
    const int64_t C = plan.cand_count;
    int32_t *want = malloc((size_t)(T * K) * 4 + 4), *cw = malloc((size_t)(T * C) * 4 + 4);
    th_rng_t *rng = th_rng(t);
    for (int64_t i = 0; i < T * C; ++i) /* mode 2's lists: valid blocks, -1, out of range, duplicates */
        cw[i] = sh->full_lists && i / C % 2 == 0
                    ? (int32_t)(C - 1 - i % C)
                    : (int32_t)(th_rng_range(rng, 0, 3) ? th_rng_range(rng, 0, W / 8 + 2) : th_rng_range(rng, -2, -1));
    int32_t *lists = malloc((size_t)(T * C) * 4 + 4);
    memcpy(lists, cw, (size_t)(T * C) * 4);
    for (int64_t r = 0; r < T; ++r)
        idx_ref_select_row(&plan, it_model_cols(&c, r), arr_logit, lg + r * stride, want + r * K,
                           plan.mode ? cw + r * C : NULL);
    int32_t *got = malloc((size_t)(T * K) * 4 + 4), *cg = malloc((size_t)(T * C) * 4 + 4);
    for (int si = 0; si < nsplits; ++si) {
        dsv4_indexer_topk_desc_t d = c.d;
        d.num_splits = splits[si];
        size_t ws = 0;
        TH_OK(t, dsv4_indexer_topk_workspace_size(&d, &ws));
        th_buf_t out = th_buf_device((size_t)(T * K) * 4 + 4), cand = th_buf_device((size_t)(T * C) * 4 + 4);
        th_buf_t wsb = th_buf_device(ws + 256);
        th_buf_poison(&out, 0xA5), th_buf_poison(&cand, 0xA5), th_buf_poison(&wsb, 0x3C);
        if (plan.mode == 2) th_buf_upload(&cand, lists);
        const dsv4_indexer_topk_args_t a = {th_ptr(&g.q8),    th_ptr(&g.w),     th_ptr(&g.pos),
                                            th_ptr(&g.req),   th_ptr(&g.valid), th_ptr(&g.bt),
                                            th_ptr(&g.cache), th_ptr(&out),     th_ptr(&cand)};
        void *s = th_stream_create(t);
        TH_OK(t, dsv4_indexer_topk(&d, &a, th_ptr(&wsb), ws, DSV4_STREAM(s)));
        th_stream_sync_destroy(t, s);
        th_buf_download(&out, got), th_buf_download(&cand, cg);
        char what[96];
        snprintf(what, sizeof what, "topk K=%lld splits %lld (plan %lld)", (long long)K, (long long)splits[si],
                 (long long)plan.splits);
        th_cmp_bytes(t, what, got, want, (size_t)(T * K) * 4);
        if (plan.mode)
            th_cmp_bytes(t, plan.mode == 1 ? "candidate blocks" : "candidate lists (read only)", cg, cw,
                         (size_t)(T * C) * 4);
        th_buf_guards_ok(t, &out, "topk"), th_buf_guards_ok(t, &cand, "cand"), th_buf_guards_ok(t, &wsb, "workspace");
        th_buf_free(&out), th_buf_free(&cand), th_buf_free(&wsb);
    }
    int64_t margin = 0;
    for (int64_t r = 0; r < T && margin < 6 && plan.mode != 2 && W <= 100000; ++r) /* fp64 is slow past that */
        margin += it_check_margin(t, &c, r, got + r * K);
    th_note(t, "topk: %lld rows, K %lld, %lld rows checked against fp64 by margin", (long long)T, (long long)K,
            (long long)margin);
    free(lg), free(want), free(cw), free(got), free(cg), free(lists);
    src_dev_free(&g);
    it_topk_case_free(&c);
}

void test_idx_gpu_topk(th_ctx_t *t) {
    const int64_t few[] = {0, 1, 2, 3, 7}, many[] = {0, 1, 5, 16, 64};
    /* decode: mixed next_n, padding, rows around K */
    topk_case(t,
              &(it_topk_shape_t){.heads = 32,
                                 .topk = 512,
                                 .ratio = 1,
                                 .page_tokens = 128,
                                 .reqs = 4,
                                 .ctx_min = 400,
                                 .ctx_max = 9000,
                                 .next_n = 6,
                                 .pad_rows = 3,
                                 .bad_page = 1},
              many, 5);
    /* prefill-like: rows of one request at many positions; ties (equal keys, zero-w rows) */
    topk_case(t,
              &(it_topk_shape_t){.heads = 32,
                                 .topk = 256,
                                 .ratio = 2,
                                 .page_tokens = 64,
                                 .reqs = 2,
                                 .ctx_min = 300,
                                 .ctx_max = 4000,
                                 .next_n = 1,
                                 .prefill_rows = 12,
                                 .ties = 1},
              few, 5);
    /* V4 shape: 64 heads, K = 1024, NaN codes */
    topk_case(t,
              &(it_topk_shape_t){.heads = 64,
                                 .topk = 1024,
                                 .ratio = 1,
                                 .page_tokens = 64,
                                 .reqs = 3,
                                 .ctx_min = 900,
                                 .ctx_max = 6000,
                                 .next_n = 3,
                                 .prefill_rows = 2,
                                 .specials = 1},
              few, 5);
    /* K = 2048 (one row per CTA) and a tiny K (buffer compactions every tile) */
    topk_case(t,
              &(it_topk_shape_t){.heads = 32,
                                 .topk = 2048,
                                 .ratio = 1,
                                 .page_tokens = 128,
                                 .reqs = 2,
                                 .ctx_min = 1500,
                                 .ctx_max = 9000,
                                 .next_n = 2},
              few, 5);
    topk_case(t,
              &(it_topk_shape_t){.heads = 32,
                                 .topk = 3,
                                 .ratio = 1,
                                 .page_tokens = 64,
                                 .reqs = 3,
                                 .ctx_min = 0,
                                 .ctx_max = 3000,
                                 .next_n = 4,
                                 .pad_rows = 2,
                                 .ties = 1},
              few, 5);
    /* one request at 2^20 keys (1M context, r = 1): splits of 65,536 down to 16,384 columns */
    const int64_t big[] = {0, 16, 64};
    topk_case(t,
              &(it_topk_shape_t){.heads = 32,
                                 .topk = 512,
                                 .ratio = 1,
                                 .page_tokens = 128,
                                 .reqs = 1,
                                 .ctx_min = 1 << 20,
                                 .ctx_max = 1 << 20,
                                 .next_n = 2},
              big, 3);
}

/* Captured in a CUDA graph and replayed twice: the same rows as a direct call. */
static void topk_graph(th_ctx_t *t) {
    it_topk_case_t c;
    it_topk_case(th_rng(t),
                 &(it_topk_shape_t){.heads = 32,
                                    .topk = 64,
                                    .ratio = 1,
                                    .page_tokens = 64,
                                    .reqs = 2,
                                    .ctx_min = 100,
                                    .ctx_max = 2000,
                                    .next_n = 3,
                                    .mode = 1,
                                    .cand_count = 64},
                 &c);
    src_dev_t g;
    src_dev(&c, &g);
    const size_t tb = (size_t)(c.d.num_rows * c.d.topk) * 4, cb = (size_t)c.d.num_rows * 64 * 4;
    size_t ws = 0;
    TH_OK(t, dsv4_indexer_topk_workspace_size(&c.d, &ws));
    th_buf_t out[2] = {th_buf_device(tb), th_buf_device(tb)}, cand[2] = {th_buf_device(cb), th_buf_device(cb)};
    th_buf_t wsb = th_buf_device(ws);
    cudaStream_t s = (cudaStream_t)th_stream_create(t);
    cudaGraph_t gr = NULL;
    cudaGraphExec_t ge = NULL;
    for (int k = 0; k < 2; ++k) {
        const dsv4_indexer_topk_args_t a = {th_ptr(&g.q8),    th_ptr(&g.w),     th_ptr(&g.pos),
                                            th_ptr(&g.req),   th_ptr(&g.valid), th_ptr(&g.bt),
                                            th_ptr(&g.cache), th_ptr(&out[k]),  th_ptr(&cand[k])};
        if (k == 0) {
            TH_OK(t, dsv4_indexer_topk(&c.d, &a, th_ptr(&wsb), ws, DSV4_STREAM(s)));
        } else if (TH_CUDA(t, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal))) {
            TH_OK(t, dsv4_indexer_topk(&c.d, &a, th_ptr(&wsb), ws, DSV4_STREAM(s)));
            if (TH_CUDA(t, cudaStreamEndCapture(s, &gr)) && TH_CUDA(t, cudaGraphInstantiate(&ge, gr, 0)))
                TH_CUDA(t, cudaGraphLaunch(ge, s)), TH_CUDA(t, cudaGraphLaunch(ge, s));
        }
    }
    th_stream_sync_destroy(t, s);
    uint8_t *x = malloc(tb + cb), *y = malloc(tb + cb);
    th_buf_download(&out[0], x), th_buf_download(&out[1], y);
    th_cmp_bytes(t, "topk from a graph", y, x, tb);
    th_buf_download(&cand[0], x), th_buf_download(&cand[1], y);
    th_cmp_bytes(t, "candidates from a graph", y, x, cb);
    if (ge) cudaGraphExecDestroy(ge);
    if (gr) cudaGraphDestroy(gr);
    free(x), free(y);
    for (int k = 0; k < 2; ++k) th_buf_free(&out[k]), th_buf_free(&cand[k]);
    th_buf_free(&wsb);
    src_dev_free(&g);
    it_topk_case_free(&c);
}

void test_idx_gpu_topk_candidates(th_ctx_t *t) {
    topk_graph(t);
    const int64_t sp[] = {0, 1, 4};
    topk_case(t,
              &(it_topk_shape_t){.heads = 32,
                                 .topk = 512,
                                 .ratio = 1,
                                 .page_tokens = 128,
                                 .reqs = 3,
                                 .ctx_min = 0,
                                 .ctx_max = 30000,
                                 .next_n = 4,
                                 .prefill_rows = 2,
                                 .pad_rows = 2,
                                 .mode = 1,
                                 .cand_count = 2048},
              sp, 3);
    topk_case(t,
              &(it_topk_shape_t){.heads = 32,
                                 .topk = 64,
                                 .ratio = 1,
                                 .page_tokens = 64,
                                 .reqs = 2,
                                 .ctx_min = 10,
                                 .ctx_max = 3000,
                                 .next_n = 3,
                                 .mode = 1,
                                 .cand_count = 37,
                                 .ties = 1,
                                 .specials = 1},
              sp, 3);
    /* mode 2: the restriction, long lists (many tiles of 8 blocks) and short ones */
    topk_case(t,
              &(it_topk_shape_t){.heads = 32,
                                 .topk = 512,
                                 .ratio = 1,
                                 .page_tokens = 128,
                                 .reqs = 3,
                                 .ctx_min = 0,
                                 .ctx_max = 40000,
                                 .next_n = 4,
                                 .prefill_rows = 2,
                                 .pad_rows = 2,
                                 .mode = 2,
                                 .cand_count = 2048,
                                 .bad_page = 1},
              sp, 3);
    topk_case(t,
              &(it_topk_shape_t){.heads = 64,
                                 .topk = 100,
                                 .ratio = 2,
                                 .page_tokens = 64,
                                 .reqs = 2,
                                 .ctx_min = 10,
                                 .ctx_max = 3000,
                                 .next_n = 3,
                                 .mode = 2,
                                 .cand_count = 50,
                                 .ties = 1,
                                 .specials = 1},
              sp, 3);
    /* mode 2 with lists holding every block of the shorter rows (the dense pass A scores
     * those) beside random lists, one request's rows straddling both */
    topk_case(t,
              &(it_topk_shape_t){.heads = 32,
                                 .topk = 100,
                                 .ratio = 1,
                                 .page_tokens = 64,
                                 .reqs = 3,
                                 .ctx_min = 200,
                                 .ctx_max = 3000,
                                 .next_n = 4,
                                 .prefill_rows = 3,
                                 .mode = 2,
                                 .cand_count = 256,
                                 .ties = 1,
                                 .full_lists = 1},
              sp, 3);
}
