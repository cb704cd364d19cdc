/*
 * Bad input on the host: every public function of the family with a NULL descriptor,
 * NULL args and pointers, negative or zero sizes, small or odd strides, misaligned
 * pointers and a NULL stream. Each must return the stated status with a message naming
 * the operator, the field and the value, and write nothing (the reference calls run on
 * host buffers that are compared afterwards). The run calls get a NULL stream, so a check
 * missing before the stream check could not launch anything; the message tells which
 * check fired. The GPU twin (test_kv_gpu.c) checks that device buffers stay untouched.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_kvcache.h"

typedef struct {
    const char *op;
    dsv4_status_t (*check)(const void *d);
    dsv4_status_t (*wsize)(const void *d, size_t *bytes);
    dsv4_status_t (*run)(const void *d, const void *a);
    dsv4_status_t (*ref)(const void *d, const void *a);
} op_api_t;

static dsv4_status_t ins_check(const void *d) { return dsv4_kv_insert_check(d); }
static dsv4_status_t ins_wsize(const void *d, size_t *b) { return dsv4_kv_insert_workspace_size(d, b); }
static dsv4_status_t ins_run(const void *d, const void *a) { return dsv4_kv_insert(d, a, NULL, 0, NULL); }
static dsv4_status_t ins_ref(const void *d, const void *a) { return dsv4_kv_insert_ref(d, a); }
static const op_api_t insert_api = {"kv_insert", ins_check, ins_wsize, ins_run, ins_ref};

static dsv4_status_t swa_check(const void *d) { return dsv4_kv_swa_write_check(d); }
static dsv4_status_t swa_wsize(const void *d, size_t *b) { return dsv4_kv_swa_write_workspace_size(d, b); }
static dsv4_status_t swa_run(const void *d, const void *a) { return dsv4_kv_swa_write(d, a, NULL, 0, NULL); }
static dsv4_status_t swa_ref(const void *d, const void *a) { return dsv4_kv_swa_write_ref(d, a); }
static const op_api_t swa_api = {"kv_swa_write", swa_check, swa_wsize, swa_run, swa_ref};

static dsv4_status_t gat_check(const void *d) { return dsv4_kv_gather_check(d); }
static dsv4_status_t gat_wsize(const void *d, size_t *b) { return dsv4_kv_gather_workspace_size(d, b); }
static dsv4_status_t gat_run(const void *d, const void *a) { return dsv4_kv_gather(d, a, NULL, 0, NULL); }
static dsv4_status_t gat_ref(const void *d, const void *a) { return dsv4_kv_gather_ref(d, a); }
static const op_api_t gather_api = {"kv_gather", gat_check, gat_wsize, gat_run, gat_ref};

static dsv4_status_t rope_check(const void *d) { return dsv4_kv_rope_insert_check(d); }
static dsv4_status_t rope_wsize(const void *d, size_t *b) { return dsv4_kv_rope_insert_workspace_size(d, b); }
static dsv4_status_t rope_run(const void *d, const void *a) { return dsv4_kv_rope_insert(d, a, NULL, 0, NULL); }
static dsv4_status_t rope_ref(const void *d, const void *a) { return dsv4_kv_rope_insert_ref(d, a); }
static const op_api_t rope_api = {"kv_rope_insert", rope_check, rope_wsize, rope_run, rope_ref};

/* A bad descriptor (desc_case) fails every function; bad args fail run and ref. */
static void expect_bad(th_ctx_t *t, const op_api_t *api, const void *d, const void *a, int desc_case,
                       dsv4_status_t want, const char *field, const char *value) {
    char what[128];
    if (desc_case) {
        size_t ws = 12345;
        snprintf(what, sizeof what, "%s_check [%s]", api->op, field);
        TH_EXPECT_STATUS(t, api->check(d), want);
        kvt_expect_message(t, what, api->op, field, value, NULL);
        TH_EXPECT_STATUS(t, api->wsize(d, &ws), want);
        TH_CHECK(t, ws == 12345, "%s_workspace_size wrote %zu on failure", api->op, ws);
    }
    snprintf(what, sizeof what, "%s [%s]", api->op, field);
    TH_EXPECT_STATUS(t, api->run(d, a), want);
    kvt_expect_message(t, what, api->op, field, value, NULL);
    snprintf(what, sizeof what, "%s_ref [%s]", api->op, field);
    TH_EXPECT_STATUS(t, api->ref(d, a), want);
    kvt_expect_message(t, what, api->op, field, value, NULL);
}

/* NULL descriptor and NULL bytes, common to every operator. */
static void expect_null_desc(th_ctx_t *t, const op_api_t *api, const void *good_desc, const void *good_args) {
    expect_bad(t, api, NULL, good_args, 1, DSV4_STATUS_NULL_POINTER, "desc", NULL);
    TH_EXPECT_STATUS(t, api->wsize(good_desc, NULL), DSV4_STATUS_NULL_POINTER);
    kvt_expect_message(t, "workspace_size(desc, NULL)", api->op, "bytes", NULL);
    expect_bad(t, api, good_desc, NULL, 0, DSV4_STATUS_NULL_POINTER, "args", NULL);
    TH_EXPECT_STATUS(t, api->run(good_desc, good_args), DSV4_STATUS_NULL_POINTER);
    kvt_expect_message(t, "NULL stream", api->op, "stream", NULL);
    size_t ws = 1;
    TH_OK(t, api->wsize(good_desc, &ws));
    TH_CHECK(t, ws == 0, "%s needs no workspace, says %zu", api->op, ws);
}

#define MIS(p, bytes) ((void *)((char *)(p) + (bytes)))

void test_kv_bad_input_insert(th_ctx_t *t) {
    uint16_t *k = th_aligned_alloc(64, 4 * 1024 + 64);
    int64_t *slots = th_aligned_alloc(64, 64);
    uint8_t *cache = th_aligned_alloc(64, 2 * 37440 + 64), *keep = malloc(2 * 37440 + 64);
    for (int i = 0; i < 4 * 512; ++i) k[i] = 0x3F80;
    for (int i = 0; i < 4; ++i) slots[i] = i;
    memset(cache, 0x77, 2 * 37440 + 64);
    memcpy(keep, cache, 2 * 37440 + 64);
    const dsv4_kv_insert_desc_t good = {4, 512, 64, 37440, 2};
    const dsv4_kv_insert_args_t ga = {k, slots, cache};
    expect_null_desc(t, &insert_api, &good, &ga);
    dsv4_kv_insert_desc_t d;
#define DCASE(field_assign, st, field, value)                                                                          \
    (d = good, field_assign, expect_bad(t, &insert_api, &d, &ga, 1, st, field, value))
    DCASE(d.num_tokens = -1, DSV4_STATUS_INVALID_VALUE, "num_tokens", "-1");
    DCASE(d.page_tokens = 0, DSV4_STATUS_INVALID_VALUE, "page_tokens", "0");
    DCASE(d.page_tokens = -64, DSV4_STATUS_INVALID_VALUE, "page_tokens", "-64");
    DCASE(d.page_stride_bytes = 37375, DSV4_STATUS_INVALID_VALUE, "page_stride_bytes", "37376");
    DCASE(d.page_stride_bytes = 37384, DSV4_STATUS_MISALIGNED, "page_stride_bytes", "16");
    DCASE(d.num_pages = 0, DSV4_STATUS_INVALID_VALUE, "num_pages", "0");
    DCASE(d.num_pages = -3, DSV4_STATUS_INVALID_VALUE, "num_pages", "-3");
    DCASE(d.k_stride_row = 504, DSV4_STATUS_INVALID_VALUE, "k_stride_row", "504");
    DCASE(d.k_stride_row = 516, DSV4_STATUS_MISALIGNED, "k_stride_row", "516");
#undef DCASE
    dsv4_kv_insert_args_t a;
#define ACASE(field_assign, st, field) (a = ga, field_assign, expect_bad(t, &insert_api, &good, &a, 0, st, field, NULL))
    ACASE(a.k = NULL, DSV4_STATUS_NULL_POINTER, "k");
    ACASE(a.slot_mapping = NULL, DSV4_STATUS_NULL_POINTER, "slot_mapping");
    ACASE(a.cache = NULL, DSV4_STATUS_NULL_POINTER, "cache");
    ACASE(a.k = MIS(k, 2), DSV4_STATUS_MISALIGNED, "k");
    ACASE(a.slot_mapping = MIS(slots, 4), DSV4_STATUS_MISALIGNED, "slot_mapping");
    ACASE(a.cache = MIS(cache, 8), DSV4_STATUS_MISALIGNED, "cache");
#undef ACASE
    TH_CHECK(t, memcmp(cache, keep, 2 * 37440 + 64) == 0, "a failing call wrote into the cache");
    free(k), free(slots), free(cache), free(keep);
}

void test_kv_bad_input_swa(th_ctx_t *t) {
    uint16_t *q = th_aligned_alloc(64, 4 * 3 * 1024 + 64), *kv = th_aligned_alloc(64, 4 * 1024 + 64);
    uint16_t *qkeep = malloc(4 * 3 * 1024);
    int64_t *pos = th_aligned_alloc(64, 64), *slots = th_aligned_alloc(64, 64);
    float *cs = th_aligned_alloc(64, 8 * 64 * 4 + 64);
    uint8_t *cache = th_aligned_alloc(64, 19008 + 64), *keep = malloc(19008 + 64);
    for (int i = 0; i < 4 * 3 * 512; ++i) q[i] = (uint16_t)(0x3F00 + i % 100);
    for (int i = 0; i < 4 * 512; ++i) kv[i] = 0x3F80;
    for (int i = 0; i < 4; ++i) pos[i] = i, slots[i] = i;
    for (int i = 0; i < 8 * 64; ++i) cs[i] = 0.5f;
    memset(cache, 0x77, 19008 + 64);
    memcpy(keep, cache, 19008 + 64);
    memcpy(qkeep, q, 4 * 3 * 1024);
    const dsv4_kv_swa_write_desc_t good = {.num_tokens = 4,
                                           .num_insert = 4,
                                           .num_heads = 2,
                                           .num_heads_padded = 3,
                                           .max_position = 8,
                                           .page_tokens = 32,
                                           .page_stride_bytes = 19008,
                                           .num_pages = 1,
                                           .eps = 1e-6f,
                                           .q_stride_token = 3 * 512,
                                           .q_stride_head = 512,
                                           .kv_stride_row = 512};
    const dsv4_kv_swa_write_args_t ga = {q, kv, pos, slots, cs, cache};
    expect_null_desc(t, &swa_api, &good, &ga);
    dsv4_kv_swa_write_desc_t d;
#define DCASE(field_assign, st, field, value)                                                                          \
    (d = good, field_assign, expect_bad(t, &swa_api, &d, &ga, 1, st, field, value))
    DCASE(d.num_tokens = -2, DSV4_STATUS_INVALID_VALUE, "num_tokens", "-2");
    DCASE(d.num_insert = 5, DSV4_STATUS_INVALID_VALUE, "num_insert", "5");
    DCASE(d.num_insert = -1, DSV4_STATUS_INVALID_VALUE, "num_insert", "-1");
    DCASE(d.num_heads = 0, DSV4_STATUS_INVALID_VALUE, "num_heads", "0");
    DCASE(d.num_heads = 1025, DSV4_STATUS_INVALID_VALUE, "num_heads", "1025");
    DCASE(d.num_heads_padded = 1, DSV4_STATUS_INVALID_VALUE, "num_heads_padded", "1");
    DCASE(d.max_position = 0, DSV4_STATUS_INVALID_VALUE, "max_position", "0");
    DCASE(d.eps = -1.0f, DSV4_STATUS_INVALID_VALUE, "eps", "-1");
    DCASE(d.eps = NAN, DSV4_STATUS_INVALID_VALUE, "eps", "nan");
    DCASE(d.eps = INFINITY, DSV4_STATUS_INVALID_VALUE, "eps", "inf");
    DCASE(d.skip_q_norm = 2, DSV4_STATUS_INVALID_VALUE, "skip_q_norm", "2");
    DCASE(d.skip_q_norm = -1, DSV4_STATUS_INVALID_VALUE, "skip_q_norm", "-1");
    DCASE((d.skip_q_norm = 1, d.eps = -1.0f), DSV4_STATUS_INVALID_VALUE, "eps", "-1"); /* still checked */
    DCASE(d.q_stride_head = 256, DSV4_STATUS_INVALID_VALUE, "q_stride_head", "256");
    DCASE(d.q_stride_head = 524, DSV4_STATUS_MISALIGNED, "q_stride_head", "524");
    DCASE(d.q_stride_token = 3 * 512 - 8, DSV4_STATUS_INVALID_VALUE, "q_stride_token", "1528");
    DCASE(d.kv_stride_row = 100, DSV4_STATUS_INVALID_VALUE, "kv_stride_row", "100");
    DCASE(d.page_stride_bytes = 18000, DSV4_STATUS_INVALID_VALUE, "page_stride_bytes", "18688");
#undef DCASE
    dsv4_kv_swa_write_args_t a;
#define ACASE(field_assign, st, field) (a = ga, field_assign, expect_bad(t, &swa_api, &good, &a, 0, st, field, NULL))
    ACASE(a.q = NULL, DSV4_STATUS_NULL_POINTER, "q");
    ACASE(a.kv = NULL, DSV4_STATUS_NULL_POINTER, "kv");
    ACASE(a.position_ids = NULL, DSV4_STATUS_NULL_POINTER, "position_ids");
    ACASE(a.slot_mapping = NULL, DSV4_STATUS_NULL_POINTER, "slot_mapping");
    ACASE(a.cos_sin_cache = NULL, DSV4_STATUS_NULL_POINTER, "cos_sin_cache");
    ACASE(a.cache = NULL, DSV4_STATUS_NULL_POINTER, "cache");
    ACASE(a.q = MIS(q, 2), DSV4_STATUS_MISALIGNED, "q");
    ACASE(a.kv = MIS(kv, 8), DSV4_STATUS_MISALIGNED, "kv");
    ACASE(a.position_ids = MIS(pos, 4), DSV4_STATUS_MISALIGNED, "position_ids");
    ACASE(a.slot_mapping = MIS(slots, 4), DSV4_STATUS_MISALIGNED, "slot_mapping");
    ACASE(a.cos_sin_cache = MIS(cs, 4), DSV4_STATUS_MISALIGNED, "cos_sin_cache");
    ACASE(a.cache = MIS(cache, 8), DSV4_STATUS_MISALIGNED, "cache");
#undef ACASE
    TH_CHECK(t, memcmp(cache, keep, 19008 + 64) == 0, "a failing call wrote into the cache");
    TH_CHECK(t, memcmp(q, qkeep, 4 * 3 * 1024) == 0, "a failing call wrote into q");
    free(q), free(kv), free(qkeep), free(pos), free(slots), free(cs), free(cache), free(keep);
}

void test_kv_bad_input_gather(th_ctx_t *t) {
    uint8_t *cache = th_aligned_alloc(64, 2 * 37440 + 64);
    int32_t *seq = th_aligned_alloc(64, 64), *glen = th_aligned_alloc(64, 64), *table = th_aligned_alloc(64, 64);
    const size_t out_bytes = 2 * 8 * 1024 + 64;
    uint16_t *out = th_aligned_alloc(64, out_bytes), *keep = malloc(out_bytes);
    memset(cache, 0x38, 2 * 37440 + 64);
    for (int i = 0; i < 2; ++i) seq[i] = 8, glen[i] = 8, table[i] = i;
    memset(out, 0x5A, out_bytes);
    memcpy(keep, out, out_bytes);
    const dsv4_kv_gather_desc_t good = {.num_reqs = 2,
                                        .block_table_width = 1,
                                        .out_rows = 8,
                                        .page_tokens = 64,
                                        .page_stride_bytes = 37440,
                                        .num_pages = 2,
                                        .block_table_stride = 1,
                                        .out_stride_req = 8 * 512,
                                        .out_stride_row = 512};
    const dsv4_kv_gather_args_t ga = {cache, seq, glen, table, out};
    expect_null_desc(t, &gather_api, &good, &ga);
    dsv4_kv_gather_desc_t d;
#define DCASE(field_assign, st, field, value)                                                                          \
    (d = good, field_assign, expect_bad(t, &gather_api, &d, &ga, 1, st, field, value))
    DCASE(d.num_reqs = -1, DSV4_STATUS_INVALID_VALUE, "num_reqs", "-1");
    DCASE(d.block_table_width = -1, DSV4_STATUS_INVALID_VALUE, "block_table_width", "-1");
    DCASE((d.block_table_width = 4, d.block_table_stride = 3), DSV4_STATUS_INVALID_VALUE, "block_table_stride", "3");
    DCASE(d.out_rows = -8, DSV4_STATUS_INVALID_VALUE, "out_rows", "-8");
    DCASE(d.offset = -1, DSV4_STATUS_INVALID_VALUE, "offset", "-1");
    DCASE(d.offset = 9, DSV4_STATUS_INVALID_VALUE, "offset", "9");
    DCASE(d.max_gather_len = -5, DSV4_STATUS_INVALID_VALUE, "max_gather_len", "-5");
    DCASE(d.out_stride_row = 504, DSV4_STATUS_INVALID_VALUE, "out_stride_row", "504");
    DCASE(d.out_stride_row = 516, DSV4_STATUS_MISALIGNED, "out_stride_row", "516");
    DCASE(d.out_stride_req = 8 * 512 - 8, DSV4_STATUS_INVALID_VALUE, "out_stride_req", "4088");
    DCASE(d.out_stride_req = 8 * 512 + 4, DSV4_STATUS_MISALIGNED, "out_stride_req", "4100");
    DCASE(d.page_tokens = -1, DSV4_STATUS_INVALID_VALUE, "page_tokens", "-1");
#undef DCASE
    dsv4_kv_gather_args_t a;
#define ACASE(field_assign, st, field) (a = ga, field_assign, expect_bad(t, &gather_api, &good, &a, 0, st, field, NULL))
    ACASE(a.cache = NULL, DSV4_STATUS_NULL_POINTER, "cache");
    ACASE(a.seq_lens = NULL, DSV4_STATUS_NULL_POINTER, "seq_lens");
    ACASE(a.block_table = NULL, DSV4_STATUS_NULL_POINTER, "block_table");
    ACASE(a.out = NULL, DSV4_STATUS_NULL_POINTER, "out");
    ACASE(a.cache = MIS(cache, 8), DSV4_STATUS_MISALIGNED, "cache");
    ACASE(a.seq_lens = MIS(seq, 2), DSV4_STATUS_MISALIGNED, "seq_lens");
    ACASE(a.gather_lens = MIS(glen, 2), DSV4_STATUS_MISALIGNED, "gather_lens");
    ACASE(a.block_table = MIS(table, 2), DSV4_STATUS_MISALIGNED, "block_table");
    ACASE(a.out = MIS(out, 2), DSV4_STATUS_MISALIGNED, "out");
#undef ACASE
    TH_CHECK(t, memcmp(out, keep, out_bytes) == 0, "a failing call wrote into out");
    free(cache), free(seq), free(glen), free(table), free(out), free(keep);
}

void test_kv_bad_input_rope_insert(th_ctx_t *t) {
    uint16_t *x = th_aligned_alloc(64, 4 * 1024 + 64);
    int64_t *pos = th_aligned_alloc(64, 64), *slots = th_aligned_alloc(64, 64);
    float *cs = th_aligned_alloc(64, 4 * 256 + 64);
    uint8_t *cache = th_aligned_alloc(64, 2 * 37440 + 64), *keep = malloc(2 * 37440 + 64);
    for (int i = 0; i < 4 * 512; ++i) x[i] = 0x3F80;
    for (int i = 0; i < 4 * 64; ++i) cs[i] = 0.5f;
    for (int i = 0; i < 4; ++i) slots[i] = i, pos[i] = 2 * i + 1;
    memset(cache, 0x77, 2 * 37440 + 64);
    memcpy(keep, cache, 2 * 37440 + 64);
    const dsv4_kv_rope_insert_desc_t good = {4, 512, 64, 37440, 2, 2, 4};
    const dsv4_kv_rope_insert_args_t ga = {x, pos, slots, cs, cache};
    expect_null_desc(t, &rope_api, &good, &ga);
    dsv4_kv_rope_insert_desc_t d;
#define DCASE(field_assign, st, field, value)                                                                          \
    (d = good, field_assign, expect_bad(t, &rope_api, &d, &ga, 1, st, field, value))
    DCASE(d.num_tokens = -1, DSV4_STATUS_INVALID_VALUE, "num_tokens", "-1");
    DCASE(d.num_tokens = INT64_C(1) << 31, DSV4_STATUS_INVALID_VALUE, "num_tokens", "2147483648");
    DCASE(d.ratio = 0, DSV4_STATUS_INVALID_VALUE, "ratio", "0");
    DCASE(d.ratio = -2, DSV4_STATUS_INVALID_VALUE, "ratio", "-2");
    DCASE(d.max_position = 0, DSV4_STATUS_INVALID_VALUE, "max_position", "0");
    DCASE(d.page_tokens = 0, DSV4_STATUS_INVALID_VALUE, "page_tokens", "0");
    DCASE(d.page_stride_bytes = 37375, DSV4_STATUS_INVALID_VALUE, "page_stride_bytes", "37376");
    DCASE(d.page_stride_bytes = 37384, DSV4_STATUS_MISALIGNED, "page_stride_bytes", "16");
    DCASE(d.num_pages = 0, DSV4_STATUS_INVALID_VALUE, "num_pages", "0");
    DCASE(d.latent_stride_row = 504, DSV4_STATUS_INVALID_VALUE, "latent_stride_row", "504");
    DCASE(d.latent_stride_row = 516, DSV4_STATUS_MISALIGNED, "latent_stride_row", "516");
#undef DCASE
    dsv4_kv_rope_insert_args_t a;
#define ACASE(field_assign, st, field) (a = ga, field_assign, expect_bad(t, &rope_api, &good, &a, 0, st, field, NULL))
    ACASE(a.latent = NULL, DSV4_STATUS_NULL_POINTER, "latent");
    ACASE(a.positions = NULL, DSV4_STATUS_NULL_POINTER, "positions");
    ACASE(a.slot_mapping = NULL, DSV4_STATUS_NULL_POINTER, "slot_mapping");
    ACASE(a.cos_sin_cache = NULL, DSV4_STATUS_NULL_POINTER, "cos_sin_cache");
    ACASE(a.cache = NULL, DSV4_STATUS_NULL_POINTER, "cache");
    ACASE(a.latent = MIS(x, 2), DSV4_STATUS_MISALIGNED, "latent");
    ACASE(a.positions = MIS(pos, 4), DSV4_STATUS_MISALIGNED, "positions");
    ACASE(a.slot_mapping = MIS(slots, 4), DSV4_STATUS_MISALIGNED, "slot_mapping");
    ACASE(a.cos_sin_cache = MIS(cs, 4), DSV4_STATUS_MISALIGNED, "cos_sin_cache");
    ACASE(a.cache = MIS(cache, 8), DSV4_STATUS_MISALIGNED, "cache");
#undef ACASE
    TH_CHECK(t, memcmp(cache, keep, 2 * 37440 + 64) == 0, "a failing call wrote into the cache");
    free(x), free(pos), free(slots), free(cs), free(cache), free(keep);
}
