/*
 * GPU tests: each kernel against its CPU reference on the same random inputs, bit for
 * bit over the whole output (q8 and w; every byte of the cache, whose unstored bytes keep
 * their poison), guard bands checked, inputs checked unmodified. Also: failing calls
 * write nothing on the device, and both operators replay from a captured CUDA graph.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "test_indexer.h"

static th_buf_t dev_from(const void *host, size_t n) {
    th_buf_t b = th_buf_device(n);
    th_buf_upload(&b, host);
    return b;
}

/* A device buffer still holds `host`, byte for byte, inside intact guards. */
static void expect_unchanged(th_ctx_t *t, const char *what, const th_buf_t *b, const void *host) {
    uint8_t *now = malloc(b->bytes);
    th_buf_download(b, now);
    th_cmp_bytes(t, what, now, host, b->bytes);
    th_buf_guards_ok(t, b, what);
    free(now);
}

/* ---- device copies of a case ------------------------------------------------------------ */
typedef struct {
    th_buf_t q, w_raw, pos, cs, q8, w;
    dsv4_indexer_q_args_t a;
} q_dev_t;

static void q_dev(const it_q_case_t *c, q_dev_t *g) {
    const int64_t T = c->d.num_tokens, rows = T * c->d.num_heads;
    g->q = dev_from(c->q, c->q_elems * 2), g->w_raw = dev_from(c->w_raw, c->w_elems * 2);
    g->pos = dev_from(c->pos, (size_t)(T ? T : 1) * 8), g->cs = dev_from(c->cs, (size_t)c->d.max_position * 256);
    g->q8 = th_buf_device((size_t)rows * 128 + 16), g->w = th_buf_device((size_t)rows * 4 + 4);
    th_buf_poison(&g->q8, 0xA5), th_buf_poison(&g->w, 0xA5);
    g->a = (dsv4_indexer_q_args_t){th_ptr(&g->q),  th_ptr(&g->w_raw), th_ptr(&g->pos),
                                   th_ptr(&g->cs), th_ptr(&g->q8),    th_ptr(&g->w)};
}
static void q_dev_free(q_dev_t *g) {
    th_buf_free(&g->q), th_buf_free(&g->w_raw), th_buf_free(&g->pos), th_buf_free(&g->cs);
    th_buf_free(&g->q8), th_buf_free(&g->w);
}

/* The device outputs against the reference on the host copies (poisoned alike). */
static void q_compare(th_ctx_t *t, const char *what, const it_q_case_t *c, q_dev_t *g) {
    const size_t nq = g->q8.bytes, nw = g->w.bytes;
    uint8_t *want = malloc(nq), *got = malloc(nq), *want_w = malloc(nw), *got_w = malloc(nw);
    memset(want, 0xA5, nq), memset(want_w, 0xA5, nw);
    const dsv4_indexer_q_args_t ha = {c->q, c->w_raw, c->pos, c->cs, want, (float *)want_w};
    TH_OK(t, dsv4_indexer_q_ref(&c->d, &ha));
    th_buf_download(&g->q8, got), th_buf_download(&g->w, got_w);
    th_cmp_bytes(t, what, got, want, nq);
    th_cmp_bytes(t, "w", got_w, want_w, nw);
    th_buf_guards_ok(t, &g->q8, "q8"), th_buf_guards_ok(t, &g->w, "w");
    expect_unchanged(t, "q", &g->q, c->q);
    expect_unchanged(t, "positions", &g->pos, c->pos);
    free(want), free(got), free(want_w), free(got_w);
}

static void gpu_q_case(th_ctx_t *t, dsv4_indexer_q_desc_t shape) {
    it_q_case_t c;
    q_dev_t g;
    it_q_case(th_rng(t), &shape, &c);
    q_dev(&c, &g);
    void *s = th_stream_create(t);
    TH_OK(t, dsv4_indexer_q(&c.d, &g.a, NULL, 0, DSV4_STREAM(s)));
    th_stream_sync_destroy(t, s);
    char what[128];
    snprintf(what, sizeof what, "indexer_q T=%lld H=%lld strides %lld/%lld", (long long)shape.num_tokens,
             (long long)shape.num_heads, (long long)shape.q_stride_token, (long long)shape.q_stride_head);
    q_compare(t, what, &c, &g);
    q_dev_free(&g);
    it_q_case_free(&c);
}

void test_idx_gpu_q(th_ctx_t *t) {
    gpu_q_case(t, (dsv4_indexer_q_desc_t){.num_tokens = 1000,
                                          .num_heads = 32,
                                          .max_position = 4096,
                                          .q_stride_token = 32 * 128,
                                          .q_stride_head = 128,
                                          .w_stride_token = 32});
    gpu_q_case(t, (dsv4_indexer_q_desc_t){.num_tokens = 77,
                                          .num_heads = 64,
                                          .max_position = 128,
                                          .q_stride_token = 64 * 128,
                                          .q_stride_head = 128,
                                          .w_stride_token = 64});
    gpu_q_case(t, (dsv4_indexer_q_desc_t){.num_tokens = 33,
                                          .num_heads = 3,
                                          .max_position = 64,
                                          .q_stride_token = 3 * 128,
                                          .q_stride_head = 128,
                                          .w_stride_token = 3}); /* odd rows */
    gpu_q_case(t, (dsv4_indexer_q_desc_t){.num_tokens = 50,
                                          .num_heads = 32,
                                          .q_stride_head = 136,
                                          .q_stride_token = 32 * 136 + 64,
                                          .w_stride_token = 40,
                                          .max_position = 256}); /* strided */
    gpu_q_case(t, (dsv4_indexer_q_desc_t){.num_tokens = 0,
                                          .num_heads = 32,
                                          .max_position = 8,
                                          .q_stride_token = 32 * 128,
                                          .q_stride_head = 128,
                                          .w_stride_token = 32}); /* no-op */
}

typedef struct {
    th_buf_t k, gamma, pos, slot, cs, cache;
    dsv4_indexer_k_store_args_t a;
} k_dev_t;

static void k_dev(const it_k_case_t *c, k_dev_t *g) {
    const size_t T = (size_t)(c->d.num_tokens ? c->d.num_tokens : 1);
    g->k = dev_from(c->k, c->k_elems * 2), g->gamma = dev_from(c->gamma, 256);
    g->pos = dev_from(c->pos, T * 8), g->slot = dev_from(c->slot, T * 8);
    g->cs = dev_from(c->cs, (size_t)c->d.max_position * 256), g->cache = th_buf_device(c->cache_bytes);
    th_buf_poison(&g->cache, 0xC3);
    g->a = (dsv4_indexer_k_store_args_t){th_ptr(&g->k),    th_ptr(&g->gamma), th_ptr(&g->pos),
                                         th_ptr(&g->slot), th_ptr(&g->cs),    th_ptr(&g->cache)};
}
static void k_dev_free(k_dev_t *g) {
    th_buf_free(&g->k), th_buf_free(&g->gamma), th_buf_free(&g->pos), th_buf_free(&g->slot);
    th_buf_free(&g->cs), th_buf_free(&g->cache);
}

static void k_compare(th_ctx_t *t, const char *what, const it_k_case_t *c, k_dev_t *g) {
    uint8_t *want = malloc(c->cache_bytes), *got = malloc(c->cache_bytes);
    memset(want, 0xC3, c->cache_bytes);
    const dsv4_indexer_k_store_args_t ha = {c->k, c->gamma, c->pos, c->slot, c->cs, want};
    TH_OK(t, dsv4_indexer_k_store_ref(&c->d, &ha));
    th_buf_download(&g->cache, got);
    th_cmp_bytes(t, what, got, want, c->cache_bytes);
    th_buf_guards_ok(t, &g->cache, "cache");
    expect_unchanged(t, "k_pre", &g->k, c->k);
    expect_unchanged(t, "slot_mapping", &g->slot, c->slot);
    free(want), free(got);
}

static void gpu_k_case(th_ctx_t *t, int64_t T, int64_t r, int64_t P, int64_t stride, int64_t k_stride) {
    it_k_case_t c;
    k_dev_t g;
    it_k_case(th_rng(t), T, r, P, stride, k_stride, &c);
    k_dev(&c, &g);
    void *s = th_stream_create(t);
    TH_OK(t, dsv4_indexer_k_store(&c.d, &g.a, NULL, 0, DSV4_STREAM(s)));
    th_stream_sync_destroy(t, s);
    char what[128];
    snprintf(what, sizeof what, "k_store T=%lld r=%lld P=%lld stride %lld", (long long)T, (long long)r, (long long)P,
             (long long)stride);
    k_compare(t, what, &c, &g);
    k_dev_free(&g);
    it_k_case_free(&c);
}

void test_idx_gpu_k(th_ctx_t *t) {
    gpu_k_case(t, 3000, 1, 128, 17280, 0);
    gpu_k_case(t, 3000, 2, 64, 8640, 0);
    gpu_k_case(t, 200, 2, 128, 17280 + 576, 256); /* strided k_pre, wide pages */
    gpu_k_case(t, 77, 1, 3, 400, 136);            /* odd P */
    gpu_k_case(t, 0, 1, 64, 8448, 0);             /* no-op */
}

/* ---- failing calls and graph capture ------------------------------------------------------ */
void test_idx_gpu_bad_input_writes_nothing(th_ctx_t *t) {
    it_q_case_t c;
    q_dev_t g;
    it_q_case(th_rng(t),
              &(dsv4_indexer_q_desc_t){.num_tokens = 64,
                                       .num_heads = 32,
                                       .max_position = 128,
                                       .q_stride_token = 32 * 128,
                                       .q_stride_head = 128,
                                       .w_stride_token = 32},
              &c);
    q_dev(&c, &g);
    uint8_t *poison = malloc(g.q8.bytes);
    memset(poison, 0xA5, g.q8.bytes);
    void *s = th_stream_create(t);
    dsv4_indexer_q_desc_t d = c.d;
    d.q_stride_head = 132;
    TH_EXPECT_STATUS(t, dsv4_indexer_q(&d, &g.a, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_MISALIGNED);
    d = c.d, d.num_heads = 0;
    TH_EXPECT_STATUS(t, dsv4_indexer_q(&d, &g.a, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_INVALID_VALUE);
    dsv4_indexer_q_args_t a = g.a;
    a.q8 += 8;
    TH_EXPECT_STATUS(t, dsv4_indexer_q(&c.d, &a, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_MISALIGNED);
    th_stream_sync_destroy(t, s);
    expect_unchanged(t, "q8 after failing calls", &g.q8, poison);
    free(poison);
    q_dev_free(&g);
    it_q_case_free(&c);

    it_k_case_t kc;
    k_dev_t kg;
    it_k_case(th_rng(t), 64, 1, 64, 8640, 0, &kc);
    k_dev(&kc, &kg);
    poison = malloc(kc.cache_bytes);
    memset(poison, 0xC3, kc.cache_bytes);
    s = th_stream_create(t);
    dsv4_indexer_k_store_desc_t kd = kc.d;
    kd.page_stride_bytes = 8644;
    TH_EXPECT_STATUS(t, dsv4_indexer_k_store(&kd, &kg.a, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_MISALIGNED);
    kd = kc.d, kd.ratio = 3;
    TH_EXPECT_STATUS(t, dsv4_indexer_k_store(&kd, &kg.a, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_INVALID_VALUE);
    dsv4_indexer_k_store_args_t ka = kg.a;
    ka.gamma += 4;
    TH_EXPECT_STATUS(t, dsv4_indexer_k_store(&kc.d, &ka, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_MISALIGNED);
    th_stream_sync_destroy(t, s);
    expect_unchanged(t, "cache after failing calls", &kg.cache, poison);
    free(poison);
    k_dev_free(&kg);
    it_k_case_free(&kc);
}

void test_idx_gpu_graph_capture(th_ctx_t *t) {
    it_q_case_t c;
    q_dev_t g;
    it_q_case(th_rng(t),
              &(dsv4_indexer_q_desc_t){.num_tokens = 24,
                                       .num_heads = 32,
                                       .max_position = 256,
                                       .q_stride_token = 32 * 128,
                                       .q_stride_head = 128,
                                       .w_stride_token = 32},
              &c);
    q_dev(&c, &g);
    it_k_case_t kc;
    k_dev_t kg;
    it_k_case(th_rng(t), 24, 2, 64, 8640, 0, &kc);
    k_dev(&kc, &kg);
    cudaStream_t s = (cudaStream_t)th_stream_create(t);
    cudaGraph_t gr = NULL;
    cudaGraphExec_t ge = NULL;
    if (TH_CUDA(t, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal))) {
        TH_OK(t, dsv4_indexer_q(&c.d, &g.a, NULL, 0, DSV4_STREAM(s)));
        TH_OK(t, dsv4_indexer_k_store(&kc.d, &kg.a, NULL, 0, DSV4_STREAM(s)));
        if (TH_CUDA(t, cudaStreamEndCapture(s, &gr)) && TH_CUDA(t, cudaGraphInstantiate(&ge, gr, 0)))
            TH_CUDA(t, cudaGraphLaunch(ge, s)), TH_CUDA(t, cudaGraphLaunch(ge, s)); /* replays are idempotent */
    }
    th_stream_sync_destroy(t, s);
    q_compare(t, "indexer_q from a graph", &c, &g);
    k_compare(t, "indexer_k_store from a graph", &kc, &kg);
    if (ge) cudaGraphExecDestroy(ge);
    if (gr) cudaGraphDestroy(gr);
    q_dev_free(&g), k_dev_free(&kg);
    it_q_case_free(&c), it_k_case_free(&kc);
}
