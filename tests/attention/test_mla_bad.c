/*
 * Bad input on every public sparse MLA function: a non-success status and a message
 * naming the op and the field, before anything runs. The same table of mutations runs
 * on the CPU (host pointers that are never dereferenced, a fake stream) and on the GPU
 * (device buffers, poisoned output that must stay poisoned).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "mla_case.h"
#include "test_mla.h"

typedef struct {
    dsv4_sparse_mla_decode_desc_t d;
    dsv4_sparse_mla_decode_args_t a;
    void *ws;
    size_t ws_bytes;
    dsv4_stream_t stream;
} dec_call_t;

typedef struct {
    dsv4_sparse_mla_prefill_desc_t d;
    dsv4_sparse_mla_prefill_args_t a;
    dsv4_stream_t stream;
} pre_call_t;

#define MIS(p) ((const void *)((const char *)(p) + 2)) /* misaligned by 2 bytes */
/* In the mutate functions: a forced configuration whose heads per CTA do not divide
 * `heads`, or that the op does not have. */
#define UNSUPPORTED_CONFIG(heads, cfg)                                                                                 \
    (c->d.num_heads = (heads), c->d.config = (cfg), *want = DSV4_STATUS_UNSUPPORTED, *field = "config")

/* Apply mutation i to a valid call; returns 0 past the last one. */
static int dec_mutate(int i, dec_call_t *c, dsv4_status_t *want, const char **field) {
    *want = DSV4_STATUS_INVALID_VALUE;
    switch (i) {
    case 0: c->d.num_tokens = -1, *field = "num_tokens"; return 1;
    case 1: c->d.num_heads = 24, *field = "num_heads"; return 1;
    case 2: c->d.num_heads = 256, *field = "num_heads"; return 1;
    case 3: c->d.num_heads = -16, *field = "num_heads"; return 1;
    case 4: c->d.q_stride_head = 256, *field = "q_stride_head"; return 1;
    case 5: c->d.q_stride_token = 4100, *want = DSV4_STATUS_MISALIGNED, *field = "q_stride_token"; return 1;
    case 6: c->d.out_stride_token = 512, *field = "out_stride_token"; return 1; /* rows overlap */
    case 7: c->d.main.width = 0, *field = "main.width"; return 1;
    case 8: c->d.main.stride = 3, *field = "main.stride"; return 1;
    case 9: c->d.main.cache.page_tokens = 0, *field = "main.cache.page_tokens"; return 1;
    case 10: c->d.main.cache.page_stride_bytes = 32 * 584 - 16, *field = "main.cache.page_stride_bytes"; return 1;
    case 11:
        c->d.main.cache.page_stride_bytes = 32 * 584 + 8, *want = DSV4_STATUS_MISALIGNED;
        *field = "main.cache.page_stride_bytes";
        return 1;
    case 12: c->d.extra.cache.num_pages = -1, *field = "extra.cache.num_pages"; return 1;
    case 13: c->d.extra.width = -5, *field = "extra.width"; return 1;
    case 14: c->d.has_extra = 2, *field = "has_extra"; return 1;
    case 15: c->d.num_splits = 33, *field = "num_splits"; return 1;
    case 16: c->d.num_splits = -1, *field = "num_splits"; return 1;
    case 17: c->d.config = DSV4_MLA_NUM_CONFIGS + 1, *field = "config"; return 1;
    case 18: UNSUPPORTED_CONFIG(48, DSV4_MLA_CONFIG_H32W4); return 1;
    case 19: c->d.scale = 1.0f / 0.0f, *field = "scale"; return 1;
    case 20: c->d.force_merge = -1, *field = "force_merge"; return 1;
    case 21: c->a.q = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "q"; return 1;
    case 22: c->a.out = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "out"; return 1;
    case 23: c->a.main_cache = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "main_cache"; return 1;
    case 24: c->a.main_ids = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "main_ids"; return 1;
    case 25: c->a.main_lens = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "main_lens"; return 1;
    case 26: c->a.extra_cache = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "extra_cache"; return 1;
    case 27: c->a.extra_ids = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "extra_ids"; return 1;
    case 28: c->a.extra_lens = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "extra_lens"; return 1;
    case 29: c->a.q = MIS(c->a.q), *want = DSV4_STATUS_MISALIGNED, *field = "q"; return 1;
    case 30: c->a.out = (void *)MIS(c->a.out), *want = DSV4_STATUS_MISALIGNED, *field = "out"; return 1;
    case 31: c->a.main_cache = MIS(c->a.main_cache), *want = DSV4_STATUS_MISALIGNED, *field = "main_cache"; return 1;
    case 32: c->a.main_ids = MIS(c->a.main_ids), *want = DSV4_STATUS_MISALIGNED, *field = "main_ids"; return 1;
    case 33: c->a.sink = MIS(c->a.sink), *want = DSV4_STATUS_MISALIGNED, *field = "sink"; return 1;
    case 34: c->ws_bytes -= 1, *want = DSV4_STATUS_WORKSPACE_TOO_SMALL, *field = "workspace_bytes"; return 1;
    case 35: c->ws = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "workspace"; return 1;
    case 36: c->stream = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "stream"; return 1;
    case 37: c->d.main.cache.page_tokens = -32, *field = "main.cache.page_tokens"; return 1;
    case 38: UNSUPPORTED_CONFIG(16, DSV4_MLA_CONFIG_WS32); return 1;
    case 39: UNSUPPORTED_CONFIG(32, DSV4_MLA_CONFIG_WS64); return 1;
    case 40: c->d.num_tokens = INT64_C(1) << 28, c->d.num_splits = 32, *field = "num_tokens"; return 1; /* 2^33 CTAs */
    default: return 0;
    }
}

static int pre_mutate(int i, pre_call_t *c, dsv4_status_t *want, const char **field) {
    *want = DSV4_STATUS_INVALID_VALUE;
    switch (i) {
    case 0: c->d.num_tokens = -3, *field = "num_tokens"; return 1;
    case 1: c->d.num_heads = 8, *field = "num_heads"; return 1;
    case 2: c->d.kv_rows = -1, *field = "kv_rows"; return 1;
    case 3: c->d.kv_stride = 500, *field = "kv_stride"; return 1;
    case 4: c->d.kv_stride = 516, *want = DSV4_STATUS_MISALIGNED, *field = "kv_stride"; return 1;
    case 5: c->d.width = 0, *field = "width"; return 1;
    case 6: c->d.width = -640, *field = "width"; return 1;
    case 7: c->d.ids_stride = 100, *field = "ids_stride"; return 1;
    case 8: c->d.q_stride_head = 8, *field = "q_stride_head"; return 1;
    case 9: c->d.config = -1, *field = "config"; return 1;
    case 10: UNSUPPORTED_CONFIG(16, DSV4_MLA_CONFIG_H32W8); return 1;
    case 11: c->a.q = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "q"; return 1;
    case 12: c->a.kv = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "kv"; return 1;
    case 13: c->a.ids = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "ids"; return 1;
    case 14: c->a.lens = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "lens"; return 1;
    case 15: c->a.out = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "out"; return 1;
    case 16: c->a.kv = MIS(c->a.kv), *want = DSV4_STATUS_MISALIGNED, *field = "kv"; return 1;
    case 17: c->a.lens = MIS(c->a.lens), *want = DSV4_STATUS_MISALIGNED, *field = "lens"; return 1;
    case 18: c->a.out = (void *)MIS(c->a.out), *want = DSV4_STATUS_MISALIGNED, *field = "out"; return 1;
    case 19: c->stream = NULL, *want = DSV4_STATUS_NULL_POINTER, *field = "stream"; return 1;
    case 20: c->d.scale = 0.0f / 0.0f, *field = "scale"; return 1;
    case 21: c->d.config = DSV4_MLA_NUM_CONFIGS + 1, *field = "config"; return 1;
    case 22: UNSUPPORTED_CONFIG(16, DSV4_MLA_CONFIG_WS32); return 1;
    case 23: UNSUPPORTED_CONFIG(64, DSV4_MLA_CONFIG_WS64); return 1;
    case 24: UNSUPPORTED_CONFIG(64, DSV4_MLA_CONFIG_H16W8); return 1;
    case 25: /* 8 head groups of 2^31 - 1 tokens: more CTAs than a launch takes */
        c->d.num_tokens = INT32_MAX, c->d.num_heads = 128, MLA_DENSE_QO(&c->d), c->d.config = DSV4_MLA_CONFIG_H16W4;
        *field = "num_tokens";
        return 1;
    default: return 0;
    }
}

/* A valid decode call over the given buffers: T = 4, H = 64, forced S = 2 (workspace). */
static dec_call_t dec_valid(void *q, void *out, void *cache, void *ids, void *lens, void *sink, void *ws,
                            size_t ws_bytes, dsv4_stream_t s) {
    dec_call_t c;
    memset(&c, 0, sizeof c);
    c.d.num_tokens = 4;
    c.d.num_heads = 64;
    MLA_DENSE_QO(&c.d);
    c.d.main.width = 128;
    c.d.main.stride = 128;
    c.d.main.cache.page_tokens = 32;
    c.d.main.cache.page_stride_bytes = 19008;
    c.d.main.cache.num_pages = 2;
    c.d.has_extra = 1;
    c.d.extra.width = 128;
    c.d.extra.stride = 128;
    c.d.extra.cache = c.d.main.cache;
    c.d.num_splits = 2;
    c.d.sm_count = 132;
    c.a.q = q;
    c.a.out = out;
    c.a.main_cache = c.a.extra_cache = cache;
    c.a.main_ids = c.a.extra_ids = ids;
    c.a.main_lens = c.a.extra_lens = lens;
    c.a.sink = sink;
    c.ws = ws;
    c.ws_bytes = ws_bytes;
    c.stream = s;
    return c;
}

static pre_call_t pre_valid(void *q, void *out, void *kv, void *ids, void *lens, void *sink, dsv4_stream_t s) {
    pre_call_t c;
    memset(&c, 0, sizeof c);
    c.d.num_tokens = 4;
    c.d.num_heads = 64;
    MLA_DENSE_QO(&c.d);
    c.d.kv_rows = 64;
    c.d.kv_stride = 512;
    c.d.width = 128;
    c.d.ids_stride = 128;
    c.a.q = q;
    c.a.kv = kv;
    c.a.ids = ids;
    c.a.lens = lens;
    c.a.sink = sink;
    c.a.out = out;
    c.stream = s;
    return c;
}

static void expect(th_ctx_t *t, const char *op, const char *call, int i, dsv4_status_t got, dsv4_status_t want,
                   const char *field) {
    const char *msg = dsv4_last_error();
    TH_CHECK(t, got == want, "%s mutation %d (%s): %s returned %s, expected %s (%s)", op, i, field, call,
             dsv4_status_string(got), dsv4_status_string(want), msg);
    if (got != DSV4_STATUS_SUCCESS)
        TH_CHECK(t, strstr(msg, op) && strstr(msg, field), "%s mutation %d: message should name '%s': %s", op, i, field,
                 msg);
}

/* Buffers big enough for the valid calls above (host or device). */
typedef struct {
    void *q, *out, *cache, *ids, *lens, *sink, *ws;
    size_t out_bytes, ws_bytes;
} bufs_t;

static void run_decode_table(th_ctx_t *t, const bufs_t *b, dsv4_stream_t s, int run_only) {
    dec_call_t base = dec_valid(b->q, b->out, b->cache, b->ids, b->lens, b->sink, b->ws, b->ws_bytes, s);
    size_t need = 0;
    TH_OK(t, dsv4_sparse_mla_decode_workspace_size(&base.d, &need));
    TH_CHECK(t, need == b->ws_bytes, "workspace %zu, buffers sized for %zu", need, b->ws_bytes);
    for (int i = 0;; ++i) {
        dec_call_t c = base;
        dsv4_status_t want;
        const char *field;
        if (!dec_mutate(i, &c, &want, &field)) break;
        const int desc_level = i <= 20 || i == 37 || i == 40;
        expect(t, "sparse_mla_decode", "run", i, dsv4_sparse_mla_decode(&c.d, &c.a, c.ws, c.ws_bytes, c.stream), want,
               field);
        if (run_only) continue;
        if (desc_level) {
            dsv4_sparse_mla_plan_t p;
            size_t bytes;
            expect(t, "sparse_mla_decode", "check", i, dsv4_sparse_mla_decode_check(&c.d), want, field);
            expect(t, "sparse_mla_decode", "plan", i, dsv4_sparse_mla_decode_plan(&c.d, &p), want, field);
            expect(t, "sparse_mla_decode", "workspace_size", i, dsv4_sparse_mla_decode_workspace_size(&c.d, &bytes),
                   want, field);
        }
        if (i <= 28 && i != 6) { /* the reference checks shapes and NULLs, not device alignment */
            dsv4_sparse_mla_decode_args_t a = c.a;
            expect(t, "sparse_mla_decode", "ref", i, dsv4_sparse_mla_decode_ref(&c.d, &a), want, field);
        }
    }
}

static void run_prefill_table(th_ctx_t *t, const bufs_t *b, dsv4_stream_t s, int run_only) {
    pre_call_t base = pre_valid(b->q, b->out, b->cache, b->ids, b->lens, b->sink, s);
    for (int i = 0;; ++i) {
        pre_call_t c = base;
        dsv4_status_t want;
        const char *field;
        if (!pre_mutate(i, &c, &want, &field)) break;
        expect(t, "sparse_mla_prefill", "run", i, dsv4_sparse_mla_prefill(&c.d, &c.a, NULL, 0, c.stream), want, field);
        if (run_only) continue;
        if (i <= 10 || i == 20 || i == 25) {
            dsv4_sparse_mla_plan_t p;
            size_t bytes;
            expect(t, "sparse_mla_prefill", "check", i, dsv4_sparse_mla_prefill_check(&c.d), want, field);
            expect(t, "sparse_mla_prefill", "plan", i, dsv4_sparse_mla_prefill_plan(&c.d, &p), want, field);
            expect(t, "sparse_mla_prefill", "workspace_size", i, dsv4_sparse_mla_prefill_workspace_size(&c.d, &bytes),
                   want, field);
        }
        if (i <= 15) expect(t, "sparse_mla_prefill", "ref", i, dsv4_sparse_mla_prefill_ref(&c.d, &c.a), want, field);
    }
}

static void null_structs(th_ctx_t *t, const bufs_t *b, dsv4_stream_t s) {
    dec_call_t c = dec_valid(b->q, b->out, b->cache, b->ids, b->lens, b->sink, b->ws, b->ws_bytes, s);
    dsv4_sparse_mla_plan_t p;
    size_t bytes;
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_decode_check(NULL), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_decode_plan(NULL, &p), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_decode_plan(&c.d, NULL), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_decode_workspace_size(NULL, &bytes), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_decode_workspace_size(&c.d, NULL), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_decode(NULL, &c.a, c.ws, c.ws_bytes, s), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_decode(&c.d, NULL, c.ws, c.ws_bytes, s), DSV4_STATUS_NULL_POINTER);
    TH_CHECK(t, strstr(dsv4_last_error(), "args") != NULL, "message: %s", dsv4_last_error());
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_decode_ref(NULL, &c.a), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_decode_ref(&c.d, NULL), DSV4_STATUS_NULL_POINTER);
    pre_call_t pc = pre_valid(b->q, b->out, b->cache, b->ids, b->lens, b->sink, s);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_prefill_check(NULL), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_prefill_plan(NULL, &p), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_prefill_plan(&pc.d, NULL), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_prefill_workspace_size(NULL, &bytes), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_prefill_workspace_size(&pc.d, NULL), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_prefill(NULL, &pc.a, NULL, 0, s), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_prefill(&pc.d, NULL, NULL, 0, s), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_prefill_ref(NULL, &pc.a), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_sparse_mla_prefill_ref(&pc.d, NULL), DSV4_STATUS_NULL_POINTER);
}

/* Sizes: q/out 4 x 64 x 512 bf16; cache 2 pages of 19008 B; ids 4 x 128; lens 4; sink 64. */
enum { Q_BYTES = 4 * 64 * 512 * 2, CACHE_BYTES = 2 * 19008, KV_BYTES = 64 * 512 * 2 };
#define WS_BYTES ((size_t)4 * 2 * 64 * 515 * 4)

void test_bad_input_decode(th_ctx_t *t) {
    /* Host memory that is never dereferenced: every check fails before any use. */
    bufs_t b = {th_aligned_alloc(256, Q_BYTES),
                th_aligned_alloc(256, Q_BYTES),
                th_aligned_alloc(256, CACHE_BYTES),
                th_aligned_alloc(256, 4096),
                th_aligned_alloc(256, 256),
                th_aligned_alloc(256, 256),
                th_aligned_alloc(256, WS_BYTES),
                Q_BYTES,
                WS_BYTES};
    run_decode_table(t, &b, DSV4_STREAM((void *)0x1), 0);
    null_structs(t, &b, DSV4_STREAM((void *)0x1));
    /* Auto splits with sm_count = 0 plan for the current device: where there is none,
     * a clear NO_DEVICE; where there is one, success. */
    dec_call_t c = dec_valid(b.q, b.out, b.cache, b.ids, b.lens, b.sink, b.ws, b.ws_bytes, NULL);
    c.d.num_splits = 0;
    c.d.sm_count = 0;
    size_t bytes;
    dsv4_status_t st = dsv4_sparse_mla_decode_workspace_size(&c.d, &bytes);
    TH_CHECK(t, st == (th_gpu_count() ? DSV4_STATUS_SUCCESS : DSV4_STATUS_NO_DEVICE), "auto split without sm_count: %s",
             dsv4_status_string(st));
    free(b.q), free(b.out), free(b.cache), free(b.ids), free(b.lens), free(b.sink), free(b.ws);
}

void test_bad_input_prefill(th_ctx_t *t) {
    bufs_t b = {th_aligned_alloc(256, Q_BYTES),
                th_aligned_alloc(256, Q_BYTES),
                th_aligned_alloc(256, KV_BYTES),
                th_aligned_alloc(256, 4096),
                th_aligned_alloc(256, 256),
                th_aligned_alloc(256, 256),
                NULL,
                Q_BYTES,
                0};
    run_prefill_table(t, &b, DSV4_STREAM((void *)0x1), 0);
    free(b.q), free(b.out), free(b.cache), free(b.ids), free(b.lens), free(b.sink);
}

/* On the GPU: real buffers, output and workspace poisoned; after every rejected call
 * and a stream sync both must still hold the poison. */
void test_gpu_bad_input(th_ctx_t *t) {
    th_buf_t q = th_buf_device(Q_BYTES), out = th_buf_device(Q_BYTES), cache = th_buf_device(CACHE_BYTES);
    th_buf_t kv = th_buf_device(KV_BYTES), ids = th_buf_device(4096), lens = th_buf_device(256);
    th_buf_t sink = th_buf_device(256), ws = th_buf_device(WS_BYTES);
    th_buf_poison(&q, 0), th_buf_poison(&cache, 0), th_buf_poison(&kv, 0), th_buf_poison(&ids, 0xFF);
    th_buf_poison(&lens, 0), th_buf_poison(&sink, 0);
    th_buf_poison(&out, 0xA5);
    th_buf_poison(&ws, 0x5A);
    void *s = th_stream_create(t);
    bufs_t b = {th_ptr(&q),    th_ptr(&out), th_ptr(&cache), th_ptr(&ids), th_ptr(&lens),
                th_ptr(&sink), th_ptr(&ws),  Q_BYTES,        WS_BYTES};
    run_decode_table(t, &b, DSV4_STREAM(s), 1);
    b.cache = th_ptr(&kv);
    run_prefill_table(t, &b, DSV4_STREAM(s), 1);
    null_structs(t, &b, DSV4_STREAM(s));
    th_stream_sync_destroy(t, s);
    uint8_t *h = malloc(WS_BYTES);
    th_buf_download(&out, h);
    size_t bad = 0;
    for (size_t i = 0; i < Q_BYTES; ++i) bad += h[i] != 0xA5;
    TH_CHECK(t, bad == 0, "%zu output bytes written by rejected calls", bad);
    th_buf_download(&ws, h);
    bad = 0;
    for (size_t i = 0; i < WS_BYTES; ++i) bad += h[i] != 0x5A;
    TH_CHECK(t, bad == 0, "%zu workspace bytes written by rejected calls", bad);
    th_buf_guards_ok(t, &out, "out");
    th_buf_guards_ok(t, &ws, "workspace");
    free(h);
    th_buf_t *all[] = {&q, &out, &cache, &kv, &ids, &lens, &sink, &ws};
    for (int i = 0; i < 8; ++i) th_buf_free(all[i]);
}
