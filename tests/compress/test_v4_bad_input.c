/*
 * dsv4_compress_v4 bad input on the host: every check through every public function it
 * guards (check, workspace_size, the run call with a NULL stream, the reference), each
 * returning the stated status with a message naming the operator, field and value, and
 * writing nothing (state and cache compared afterwards).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_v4.h"

#define MIS(p, bytes) ((void *)((char *)(p) + (bytes)))

static void expect_fail(th_ctx_t *t, const dsv4_compress_v4_desc_t *d, const dsv4_compress_v4_args_t *a, int desc_case,
                        dsv4_status_t st, const char *field, const char *value) {
    char call[96];
    if (desc_case) {
        size_t ws = 99;
        snprintf(call, sizeof call, "compress_v4_check [%s]", field);
        TH_EXPECT_STATUS(t, dsv4_compress_v4_check(d), st);
        th_expect_error(t, call, "compress_v4", field, value);
        TH_EXPECT_STATUS(t, dsv4_compress_v4_workspace_size(d, &ws), st);
        TH_CHECK(t, ws == 99, "compress_v4_workspace_size wrote %zu on failure", ws);
    }
    snprintf(call, sizeof call, "compress_v4 [%s]", field);
    TH_EXPECT_STATUS(t, dsv4_compress_v4(d, a, NULL, 0, NULL), st);
    th_expect_error(t, call, "compress_v4", field, value);
    snprintf(call, sizeof call, "compress_v4_ref [%s]", field);
    TH_EXPECT_STATUS(t, dsv4_compress_v4_ref(d, a), st);
    th_expect_error(t, call, "compress_v4", field, value);
}

void test_compress_v4_bad_input(th_ctx_t *t) {
    v4t_case_t c;
    v4t_case(th_rng(t), &v4t_shapes[0], &c);
    float *state_keep = malloc(c.state_elems * 4);
    uint8_t *cache_keep = malloc(c.cache_bytes);
    memcpy(state_keep, c.state, c.state_elems * 4), memcpy(cache_keep, c.cache, c.cache_bytes);
    const dsv4_compress_v4_desc_t g = c.d;
    const dsv4_compress_v4_args_t ga = v4t_args(&c, c.state, c.cache);

    expect_fail(t, NULL, &ga, 1, DSV4_STATUS_NULL_POINTER, "desc", NULL);
    expect_fail(t, &g, NULL, 0, DSV4_STATUS_NULL_POINTER, "args", NULL);
    TH_EXPECT_STATUS(t, dsv4_compress_v4_workspace_size(&g, NULL), DSV4_STATUS_NULL_POINTER);
    th_expect_error(t, "workspace_size(desc, NULL)", "compress_v4", "bytes", NULL);
    TH_EXPECT_STATUS(t, dsv4_compress_v4(&g, &ga, NULL, 0, NULL), DSV4_STATUS_NULL_POINTER);
    th_expect_error(t, "NULL stream", "compress_v4", "stream", NULL);
    size_t ws = 1;
    TH_OK(t, dsv4_compress_v4_workspace_size(&g, &ws));
    TH_CHECK(t, ws == 0, "compress_v4 needs no workspace, says %zu", ws);

    dsv4_compress_v4_desc_t d;
    const dsv4_status_t IV = DSV4_STATUS_INVALID_VALUE, MA = DSV4_STATUS_MISALIGNED;
#define DCASE(assign, st, field, value) (d = g, assign, expect_fail(t, &d, &ga, 1, st, field, value))
    DCASE(d.num_tokens = -1, IV, "num_tokens", "-1");
    DCASE(d.ratio = 2, IV, "ratio", "2");
    DCASE(d.ratio = 64, IV, "ratio", "64");
    DCASE(d.head_dim = 64, IV, "head_dim", "64");
    DCASE((d.head_dim = 128, d.page_stride_bytes = 64 * 132 - 16), IV, "page_stride_bytes", "8432");
    DCASE(d.eps = -1.0f, IV, "eps", "-1");
    DCASE(d.kv_stride = 2044, IV, "kv_stride", "2044");
    DCASE(d.kv_stride = 2050, MA, "kv_stride", "2050");
    DCASE(d.state_block_rows = 0, IV, "state_block_rows", "0");
    DCASE(d.state_block_rows = (1 << 20) + 1, IV, "state_block_rows", "1048577");
    DCASE(d.state_blocks = 0, IV, "state_blocks", "0");
    DCASE(d.state_stride_row = 2040, IV, "state_stride_row", "2040");
    DCASE(d.state_stride_row = 2050, MA, "state_stride_row", "2050");
    DCASE(d.state_stride_block = 2048, IV, "state_stride_block", "2048");
    DCASE(d.state_stride_block = 4 * 2048 + 2, MA, "state_stride_block", "8194");
    DCASE((d.state_blocks = (int64_t)1 << 50), IV, "state_stride_block", "overflows");
    DCASE(d.num_reqs = -1, IV, "num_reqs", "-1");
    DCASE(d.max_blocks = 0, IV, "max_blocks", "0");
    DCASE(d.block_table_stride = d.max_blocks - 1, IV, "block_table_stride", NULL);
    DCASE(d.page_tokens = 0, IV, "page_tokens", "0");
    DCASE(d.page_stride_bytes = 64 * 584 - 16, IV, "page_stride_bytes", NULL);
    DCASE(d.num_pages = 0, IV, "num_pages", "0");
    DCASE(d.max_position = 0, IV, "max_position", "0");
#undef DCASE
    dsv4_compress_v4_args_t a;
#define ACASE(assign, st, field) (a = ga, assign, expect_fail(t, &g, &a, 0, st, field, NULL))
    ACASE(a.kv_score = NULL, DSV4_STATUS_NULL_POINTER, "kv_score");
    ACASE(a.ape = NULL, DSV4_STATUS_NULL_POINTER, "ape");
    ACASE(a.positions = NULL, DSV4_STATUS_NULL_POINTER, "positions");
    ACASE(a.state_slot = NULL, DSV4_STATUS_NULL_POINTER, "state_slot");
    ACASE(a.req_idx = NULL, DSV4_STATUS_NULL_POINTER, "req_idx");
    ACASE(a.block_table = NULL, DSV4_STATUS_NULL_POINTER, "block_table");
    ACASE(a.gamma = NULL, DSV4_STATUS_NULL_POINTER, "gamma");
    ACASE(a.cos_sin_cache = NULL, DSV4_STATUS_NULL_POINTER, "cos_sin_cache");
    ACASE(a.slot_mapping = NULL, DSV4_STATUS_NULL_POINTER, "slot_mapping");
    ACASE(a.state = NULL, DSV4_STATUS_NULL_POINTER, "state");
    ACASE(a.cache = NULL, DSV4_STATUS_NULL_POINTER, "cache");
    ACASE(a.kv_score = MIS(c.kv, 8), MA, "kv_score");
    ACASE(a.ape = MIS(c.ape, 4), MA, "ape");
    ACASE(a.positions = MIS(c.pos, 4), MA, "positions");
    ACASE(a.state_slot = MIS(c.state_slot, 4), MA, "state_slot");
    ACASE(a.req_idx = MIS(c.req, 2), MA, "req_idx");
    ACASE(a.block_table = MIS(c.block_table, 2), MA, "block_table");
    ACASE(a.gamma = MIS(c.gamma, 2), MA, "gamma");
    ACASE(a.cos_sin_cache = MIS(c.cos_sin, 8), MA, "cos_sin_cache");
    ACASE(a.slot_mapping = MIS(c.slot, 4), MA, "slot_mapping");
    ACASE(a.state = MIS(c.state, 8), MA, "state");
    ACASE(a.cache = MIS(c.cache, 8), MA, "cache");
#undef ACASE
    TH_CHECK(t, memcmp(c.state, state_keep, c.state_elems * 4) == 0, "a failing call wrote into the state");
    TH_CHECK(t, memcmp(c.cache, cache_keep, c.cache_bytes) == 0, "a failing call wrote into the cache");
    free(state_keep), free(cache_keep);
    v4t_case_free(&c);
}
