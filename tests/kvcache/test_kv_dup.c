/*
 * Duplicate slots (include/dsv4/kvcache.h): rows naming one slot leave a record that is
 * exactly one of those rows' 584 bytes, never a mix. The CPU references keep the last
 * row; the kernels keep one of them. Candidates: each row's own record, written by the
 * reference into a scratch cache where every row has a slot of its own.
 */
#include <stdlib.h>
#include <string.h>

#include "kv_test_util.h"
#include "test_kvcache.h"

#define DUP_P 16
#define DUP_STRIDE 9344 /* 16 * 584 */

typedef struct {
    int64_t n, pages, slots; /* rows; pages and slots of the duplicated cache           */
    int64_t *slot, *unique;  /* the rows' slots (duplicates, skips); row i -> slot i    */
    uint8_t *cand;           /* scratch cache: candidate record of row i at slot i      */
} dup_case_t;

static uint8_t *rec_data(uint8_t *c, int64_t s) { return c + s / DUP_P * DUP_STRIDE + s % DUP_P * 576; }
static uint8_t *rec_scales(uint8_t *c, int64_t s) { return c + s / DUP_P * DUP_STRIDE + DUP_P * 576 + s % DUP_P * 8; }

/* n rows over `slots` slots (so most share one), about 1 in 8 skipped. */
static void dup_make(th_rng_t *r, dup_case_t *c, int64_t n, int64_t slots) {
    c->n = n, c->slots = slots, c->pages = (slots + DUP_P - 1) / DUP_P;
    c->slot = malloc((size_t)n * 8), c->unique = malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; ++i) {
        c->slot[i] = th_rng_range(r, 0, 7) ? th_rng_range(r, 0, slots - 1) : -1;
        c->unique[i] = i;
    }
    c->cand = calloc((size_t)((n + DUP_P - 1) / DUP_P * DUP_STRIDE), 1);
}
static void dup_free(dup_case_t *c) { free(c->slot), free(c->unique), free(c->cand); }

/* Every record of `got` is one candidate's (rows naming its slot); last_wins: the last
 * such row's. Records no row names keep `before`'s bytes. */
static void dup_check(th_ctx_t *t, const char *what, dup_case_t *c, uint8_t *got, uint8_t *before, int last_wins) {
    for (int64_t s = 0; s < c->slots; ++s) {
        int64_t last = -1;
        int match = 0;
        for (int64_t i = 0; i < c->n; ++i) {
            if (c->slot[i] != s) continue;
            last = i;
            const int same = !memcmp(rec_data(got, s), rec_data(c->cand, i), 576) &&
                             !memcmp(rec_scales(got, s), rec_scales(c->cand, i), 8);
            match = last_wins ? same : match || same;
        }
        if (last < 0)
            match = !memcmp(rec_data(got, s), rec_data(before, s), 576) &&
                    !memcmp(rec_scales(got, s), rec_scales(before, s), 8);
        TH_CHECK(t, match, "%s: slot %lld (last row %lld) holds %s", what, (long long)s, (long long)last,
                 last < 0 ? "bytes though no row names it" : "no single row's record");
        if (!match) return;
    }
}

void test_kv_duplicate_slots_ref(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    dup_case_t c;
    dup_make(r, &c, 200, 24);
    uint16_t *k = malloc((size_t)c.n * 1024);
    th_fill_bf16_normal(r, k, (size_t)c.n * 512, 3.0);
    const size_t bytes = (size_t)(c.pages * DUP_STRIDE);
    uint8_t *cache = malloc(bytes), *before = malloc(bytes);
    for (size_t i = 0; i < bytes; ++i) before[i] = (uint8_t)th_rng_u32(r);
    memcpy(cache, before, bytes);
    const int64_t cpages = (c.n + DUP_P - 1) / DUP_P;
    const dsv4_kv_insert_desc_t u = {c.n, 512, DUP_P, DUP_STRIDE, cpages}, d = {c.n, 512, DUP_P, DUP_STRIDE, c.pages};
    const dsv4_kv_insert_args_t ua = {k, c.unique, c.cand}, da = {k, c.slot, cache};
    TH_OK(t, dsv4_kv_insert_ref(&u, &ua));
    TH_OK(t, dsv4_kv_insert_ref(&d, &da));
    dup_check(t, "kv_insert_ref", &c, cache, before, 1);
    free(k), free(cache), free(before);
    dup_free(&c);
}

/* The same on the GPU for kv_insert and the kv side of kv_swa_write: 512 rows over 8
 * slots, each record one whole row. */
void test_kv_gpu_duplicate_slots(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    for (int op = 0; op < 2; ++op) {
        dup_case_t c;
        dup_make(r, &c, 512, 8);
        uint16_t *k = malloc((size_t)c.n * 1024), *q = malloc((size_t)c.n * 1024);
        int64_t *pos = malloc((size_t)c.n * 8);
        float *cs = malloc(16 * 64 * 4);
        th_fill_bf16_normal(r, k, (size_t)c.n * 512, 3.0);
        th_fill_bf16_normal(r, q, (size_t)c.n * 512, 1.0);
        th_rotary_table(cs, 16);
        for (int64_t i = 0; i < c.n; ++i) pos[i] = th_rng_range(r, 0, 15);
        const size_t bytes = (size_t)(c.pages * DUP_STRIDE);
        uint8_t *before = malloc(bytes), *got = malloc(bytes);
        for (size_t i = 0; i < bytes; ++i) before[i] = (uint8_t)th_rng_u32(r);
        th_buf_t dk = kvt_dev_from(k, (size_t)c.n * 1024), dq = kvt_dev_from(q, (size_t)c.n * 1024);
        th_buf_t ds = kvt_dev_from(c.slot, (size_t)c.n * 8), dp = kvt_dev_from(pos, (size_t)c.n * 8);
        th_buf_t dcs = kvt_dev_from(cs, 16 * 64 * 4), dc = kvt_dev_from(before, bytes);
        const int64_t cpages = (c.n + DUP_P - 1) / DUP_P;
        void *s = th_stream_create(t);
        if (op == 0) {
            const dsv4_kv_insert_desc_t u = {c.n, 512, DUP_P, DUP_STRIDE, cpages};
            const dsv4_kv_insert_desc_t d = {c.n, 512, DUP_P, DUP_STRIDE, c.pages};
            const dsv4_kv_insert_args_t ua = {k, c.unique, c.cand}, da = {th_ptr(&dk), th_ptr(&ds), th_ptr(&dc)};
            TH_OK(t, dsv4_kv_insert_ref(&u, &ua));
            TH_OK(t, dsv4_kv_insert(&d, &da, NULL, 0, DSV4_STREAM(s)));
        } else {
            dsv4_kv_swa_write_desc_t d = {.num_tokens = c.n,
                                          .num_insert = c.n,
                                          .num_heads = 1,
                                          .num_heads_padded = 1,
                                          .q_stride_token = 512,
                                          .q_stride_head = 512,
                                          .kv_stride_row = 512,
                                          .max_position = 16,
                                          .page_tokens = DUP_P,
                                          .page_stride_bytes = DUP_STRIDE,
                                          .num_pages = cpages,
                                          .eps = 1e-6f};
            uint16_t *qh = malloc((size_t)c.n * 1024);
            memcpy(qh, q, (size_t)c.n * 1024);
            const dsv4_kv_swa_write_args_t ua = {qh, k, pos, c.unique, cs, c.cand};
            TH_OK(t, dsv4_kv_swa_write_ref(&d, &ua));
            free(qh);
            d.num_pages = c.pages;
            const dsv4_kv_swa_write_args_t da = {th_ptr(&dq), th_ptr(&dk),  th_ptr(&dp),
                                                 th_ptr(&ds), th_ptr(&dcs), th_ptr(&dc)};
            TH_OK(t, dsv4_kv_swa_write(&d, &da, NULL, 0, DSV4_STREAM(s)));
        }
        th_stream_sync_destroy(t, s);
        th_buf_download(&dc, got);
        th_buf_guards_ok(t, &dc, "cache");
        dup_check(t, op ? "kv_swa_write" : "kv_insert", &c, got, before, 0);
        th_buf_t *bufs[] = {&dk, &dq, &ds, &dp, &dcs, &dc};
        for (int i = 0; i < 6; ++i) th_buf_free(bufs[i]);
        free(k), free(q), free(pos), free(cs), free(before), free(got);
        dup_free(&c);
    }
}
