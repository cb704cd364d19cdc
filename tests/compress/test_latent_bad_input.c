/*
 * dsv4_compress bad input on the host: every check through every public function it
 * guards (check, workspace_size, the run call with a NULL stream, the reference), each
 * returning the stated status with a message naming the operator, field and value, and
 * writing nothing (latent and ring compared afterwards). Also the plan's defaults.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/latent_plan.h"
#include "test_compress.h"
#include "test_latent.h"

#define MIS(p, bytes) ((void *)((char *)(p) + (bytes)))

/* desc_case: the descriptor is bad, so check and workspace_size fail too. */
static void expect_fail(th_ctx_t *t, const dsv4_compress_desc_t *d, const dsv4_compress_args_t *a, int desc_case,
                        dsv4_status_t st, const char *field, const char *value) {
    char call[96];
    if (desc_case) {
        size_t ws = 99;
        snprintf(call, sizeof call, "compress_check [%s]", field);
        TH_EXPECT_STATUS(t, dsv4_compress_check(d), st);
        th_expect_error(t, call, "compress", field, value);
        TH_EXPECT_STATUS(t, dsv4_compress_workspace_size(d, &ws), st);
        TH_CHECK(t, ws == 99, "compress_workspace_size wrote %zu on failure", ws);
    }
    snprintf(call, sizeof call, "compress [%s]", field);
    TH_EXPECT_STATUS(t, dsv4_compress(d, a, NULL, 0, NULL), st);
    th_expect_error(t, call, "compress", field, value);
    snprintf(call, sizeof call, "compress_ref [%s]", field);
    TH_EXPECT_STATUS(t, dsv4_compress_ref(d, a), st);
    th_expect_error(t, call, "compress", field, value);
}

void test_compress_bad_input(th_ctx_t *t) {
    enum { T = 4, D = DSV4_COMPRESS_DIM, CAP = 8, RR = 2 * CAP, LAT = T * D, RING = RR * 2 * D };
    float *kv = th_aligned_alloc(64, T * 2 * D * 4 + 64), *ring = th_aligned_alloc(64, RING * 4 + 64);
    float *ring_keep = malloc(RING * 4);
    uint16_t *lat = th_aligned_alloc(64, LAT * 2 + 64), *lat_keep = malloc(LAT * 2);
    uint16_t *gamma = th_aligned_alloc(64, D * 2 + 64);
    int64_t *pos = th_aligned_alloc(64, 64), *slot = th_aligned_alloc(64, 64);
    int32_t *qsl = th_aligned_alloc(64, 64);
    for (int i = 0; i < T * 2 * D; ++i) kv[i] = (float)(i % 13) - 6.0f;
    for (int i = 0; i < RING; ++i) ring[i] = (float)(i % 7);
    for (int i = 0; i < D; ++i) gamma[i] = 0x3F80;
    for (int i = 0; i < T; ++i) pos[i] = i + 1, slot[i] = CAP + (i + 1) % CAP;
    qsl[0] = 0, qsl[1] = T;
    memset(lat, 0x5C, LAT * 2);
    memcpy(lat_keep, lat, LAT * 2), memcpy(ring_keep, ring, RING * 4);

    const dsv4_compress_desc_t g1 = {
        .num_tokens = T, .ratio = 1, .eps = 1e-6f, .kv_stride = 512 * 1, .ring_stride = 1024};
    const dsv4_compress_args_t a1 = {.kv_score = kv, .gamma = gamma, .slot = slot, .latent = lat};
    const dsv4_compress_desc_t g2 = {.num_tokens = T,
                                     .ratio = 2,
                                     .num_reqs = 1,
                                     .ring_cap = CAP,
                                     .ring_rows = RR,
                                     .eps = 1e-6f,
                                     .kv_stride = 512 * 2,
                                     .ring_stride = 1024};
    const dsv4_compress_args_t a2 = {kv, pos, gamma, NULL, slot, qsl, ring, lat};
    /* NULL descriptor, args, bytes and stream; workspace 0 for a good descriptor */
    expect_fail(t, NULL, &a1, 1, DSV4_STATUS_NULL_POINTER, "desc", NULL);
    expect_fail(t, &g1, NULL, 0, DSV4_STATUS_NULL_POINTER, "args", NULL);
    TH_EXPECT_STATUS(t, dsv4_compress_workspace_size(&g1, NULL), DSV4_STATUS_NULL_POINTER);
    th_expect_error(t, "workspace_size(desc, NULL)", "compress", "bytes", NULL);
    TH_EXPECT_STATUS(t, dsv4_compress(&g2, &a2, NULL, 0, NULL), DSV4_STATUS_NULL_POINTER);
    th_expect_error(t, "NULL stream", "compress", "stream", NULL);
    size_t ws = 1;
    TH_OK(t, dsv4_compress_workspace_size(&g2, &ws));
    TH_CHECK(t, ws == 0, "compress needs no workspace, says %zu", ws);

    dsv4_compress_desc_t d;
#define DCASE(good, ga, assign, st, field, value) (d = good, assign, expect_fail(t, &d, &ga, 1, st, field, value))
    DCASE(g1, a1, d.num_tokens = -1, DSV4_STATUS_INVALID_VALUE, "num_tokens", "-1");
    DCASE(g1, a1, d.num_tokens = (int64_t)INT32_MAX + 1, DSV4_STATUS_INVALID_VALUE, "num_tokens", "2147483648");
    DCASE(g1, a1, d.ratio = 0, DSV4_STATUS_INVALID_VALUE, "ratio", "0");
    DCASE(g1, a1, d.ratio = 4, DSV4_STATUS_INVALID_VALUE, "ratio", "4");
    DCASE(g1, a1, d.eps = -1e-6f, DSV4_STATUS_INVALID_VALUE, "eps", "-1e-06");
    DCASE(g1, a1, d.eps = 1.0f / 0.0f, DSV4_STATUS_INVALID_VALUE, "eps", "inf");
    DCASE(g1, a1, d.kv_stride = 496, DSV4_STATUS_INVALID_VALUE, "kv_stride", "496");
    DCASE(g1, a1, d.kv_stride = 520, DSV4_STATUS_MISALIGNED, "kv_stride", "520");
    DCASE(g1, a1, d.kv_stride = INT64_MAX / 8, DSV4_STATUS_INVALID_VALUE, "kv_stride", "overflows");
    DCASE(g2, a2, d.kv_stride = 1008, DSV4_STATUS_INVALID_VALUE, "kv_stride", "1024");
    DCASE(g2, a2, d.num_reqs = -1, DSV4_STATUS_INVALID_VALUE, "num_reqs", "-1");
    DCASE(g2, a2, d.num_reqs = INT32_MAX, DSV4_STATUS_INVALID_VALUE, "num_reqs", "2147483647");
    DCASE(g2, a2, d.ring_cap = 4, DSV4_STATUS_INVALID_VALUE, "ring_cap", "4");
    DCASE(g2, a2, d.ring_cap = 8192, DSV4_STATUS_INVALID_VALUE, "ring_cap", "8192");
    DCASE(g2, a2, d.ring_cap = 12, DSV4_STATUS_INVALID_VALUE, "ring_cap", "12");
    DCASE(g2, a2, d.ring_rows = 4, DSV4_STATUS_INVALID_VALUE, "ring_rows", "4");
    DCASE(g2, a2, d.ring_rows = 20, DSV4_STATUS_INVALID_VALUE, "ring_rows", "20");
    DCASE(g2, a2, d.ring_stride = 1000, DSV4_STATUS_INVALID_VALUE, "ring_stride", "1000");
    DCASE(g2, a2, d.ring_stride = 1032, DSV4_STATUS_MISALIGNED, "ring_stride", "1032");
    DCASE(g2, a2, (d.ring_rows = (int64_t)1 << 40, d.ring_stride = 1 << 30), DSV4_STATUS_INVALID_VALUE, "ring_stride",
          "overflows");
#undef DCASE
    dsv4_compress_args_t a;
#define ACASE(good, ga, assign, st, field) (a = ga, assign, expect_fail(t, &good, &a, 0, st, field, NULL))
    ACASE(g1, a1, a.kv_score = NULL, DSV4_STATUS_NULL_POINTER, "kv_score");
    ACASE(g1, a1, a.gamma = NULL, DSV4_STATUS_NULL_POINTER, "gamma");
    ACASE(g1, a1, a.latent = NULL, DSV4_STATUS_NULL_POINTER, "latent");
    ACASE(g1, a1, a.slot = NULL, DSV4_STATUS_NULL_POINTER, "slot");
    ACASE(g2, a2, a.positions = NULL, DSV4_STATUS_NULL_POINTER, "positions");
    ACASE(g2, a2, a.ring_slot = NULL, DSV4_STATUS_NULL_POINTER, "ring_slot");
    ACASE(g2, a2, a.query_start_loc = NULL, DSV4_STATUS_NULL_POINTER, "query_start_loc");
    ACASE(g2, a2, a.ring = NULL, DSV4_STATUS_NULL_POINTER, "ring");
    ACASE(g1, a1, a.kv_score = MIS(kv, 8), DSV4_STATUS_MISALIGNED, "kv_score");
    ACASE(g1, a1, a.gamma = MIS(gamma, 2), DSV4_STATUS_MISALIGNED, "gamma");
    ACASE(g1, a1, a.latent = MIS(lat, 4), DSV4_STATUS_MISALIGNED, "latent");
    ACASE(g1, a1, a.slot = MIS(slot, 4), DSV4_STATUS_MISALIGNED, "slot");
    ACASE(g2, a2, a.positions = MIS(pos, 4), DSV4_STATUS_MISALIGNED, "positions");
    ACASE(g2, a2, a.ring_slot = MIS(slot, 4), DSV4_STATUS_MISALIGNED, "ring_slot");
    ACASE(g2, a2, a.query_start_loc = MIS(qsl, 2), DSV4_STATUS_MISALIGNED, "query_start_loc");
    ACASE(g2, a2, a.ring = MIS(ring, 8), DSV4_STATUS_MISALIGNED, "ring");
#undef ACASE
    TH_CHECK(t, memcmp(lat, lat_keep, LAT * 2) == 0, "a failing call wrote into latent");
    TH_CHECK(t, memcmp(ring, ring_keep, RING * 4) == 0, "a failing call wrote into the ring");
    /* ratio 1 needs none of the ratio-2 pointers */
    TH_OK(t, dsv4_compress_ref(&g1, &a1));
    free(kv), free(ring), free(ring_keep), free(lat), free(lat_keep), free(gamma), free(pos), free(slot), free(qsl);
}

void test_compress_plan(th_ctx_t *t) {
    latent_plan_t p;
    const dsv4_compress_desc_t d1 = {.num_tokens = 3, .ratio = 1, .kv_stride = 512 * 1, .ring_stride = 1024};
    TH_OK(t, latent_plan(&d1, &p));
    TH_CHECK(t, p.kv_stride == 512 && p.ring_stride == 0, "r=1 defaults: %lld %lld", (long long)p.kv_stride,
             (long long)p.ring_stride);
    const dsv4_compress_desc_t d2 = {
        .num_tokens = 3, .ratio = 2, .ring_cap = 16, .ring_rows = 64, .kv_stride = 512 * 2, .ring_stride = 1024};
    TH_OK(t, latent_plan(&d2, &p));
    TH_CHECK(t, p.kv_stride == 1024 && p.ring_stride == 1024, "r=2 defaults: %lld %lld", (long long)p.kv_stride,
             (long long)p.ring_stride);
    const dsv4_compress_desc_t d0 = {
        .num_tokens = 0, .ratio = 2, .ring_cap = 8, .ring_rows = 8, .kv_stride = 2048, .ring_stride = 1024};
    TH_OK(t, latent_plan(&d0, &p));
    TH_CHECK(t, p.kv_stride == 2048, "r=2 kv_stride kept: %lld", (long long)p.kv_stride);
}
