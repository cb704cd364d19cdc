/*
 * dsv4_compress on the CPU: hand-computed known answers (ratio 1 rows of constants,
 * ratio 2 equal scores, -inf scores, zero rows), the reference against the independent
 * fp64 model on random multi-request cases, and the ring's rules one by one (a chunk at
 * an odd position reads the ring, a chunk of >= cap rows overwrites the row it read only
 * after the read, -1 slots are skipped, rows without a latent keep their poison).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "test_latent.h"

enum { D = DSV4_COMPRESS_DIM, W2 = 2 * D };

/* A latent buffer of T rows in guard bands, poisoned. */
static th_buf_t latent_buf(int64_t T) {
    th_buf_t b = th_buf_host((size_t)(T ? T : 1) * D * 2);
    th_buf_poison(&b, (uint8_t)LT_POISON);
    return b;
}

/* Every dim of latent row t is `want` (poison rows: LT_POISON). */
static void expect_row(th_ctx_t *t, const char *what, const uint16_t *latent, int64_t row, uint16_t want) {
    for (int i = 0; i < D; ++i) {
        const uint16_t y = latent[row * D + i];
        const int ok = want == 0x7FFF ? dsv4_bf16_to_f32(y) != dsv4_bf16_to_f32(y) : y == want;
        if (!ok) {
            th_fail(t, __FILE__, __LINE__, "%s: row %lld dim %d: 0x%04x, expected 0x%04x", what, (long long)row, i, y,
                    want);
            return;
        }
    }
}

static void set_row(float *row, float kv, float score, int width) {
    for (int i = 0; i < width; ++i) row[i] = i < D ? kv : score;
}

void test_compress_known_answers(th_ctx_t *t) {
    uint16_t gamma[D];
    /* ratio 1: ones -> ssq 512, rr 1; twos -> ssq 2048, rr 0.5; gamma 1 (2 in dim 7) */
    for (int i = 0; i < D; ++i) gamma[i] = i == 7 ? 0x4000 : 0x3F80;
    {
        float *kv = th_aligned_alloc(64, 4 * D * 4);
        const int64_t slot[4] = {0, -1, 5, 9};
        set_row(kv, 1.0f, 0, D), set_row(kv + D, 7.0f, 0, D), set_row(kv + 2 * D, 2.0f, 0, D);
        set_row(kv + 3 * D, 0.0f, 0, D);
        th_buf_t lb = latent_buf(4);
        uint16_t *lat = th_ptr(&lb);
        const dsv4_compress_desc_t d = {
            .num_tokens = 4, .ratio = 1, .eps = 1e-20f, .kv_stride = 512 * 1, .ring_stride = 1024};
        const dsv4_compress_args_t a = {.kv_score = kv, .gamma = gamma, .slot = slot, .latent = lat};
        TH_OK(t, dsv4_compress_ref(&d, &a));
        TH_CHECK(t, lat[7] == 0x4000 && lat[2 * D + 7] == 0x4000, "gamma 2: 0x%04x 0x%04x", lat[7], lat[2 * D + 7]);
        lat[7] = lat[2 * D + 7] = 0x3F80; /* checked: the rest of the rows is 1.0 */
        expect_row(t, "r=1 ones", lat, 0, 0x3F80);
        expect_row(t, "r=1 slot -1", lat, 1, LT_POISON);
        expect_row(t, "r=1 twos", lat, 2, 0x3F80);
        expect_row(t, "r=1 zeros", lat, 3, 0x0000);
        th_buf_guards_ok(t, &lb, "latent");
        th_buf_free(&lb);
        free(kv);
    }
    /* ratio 2, one request at positions 2..7: rows (P kv 1, Q kv 3, equal scores) pool to
     * 2 -> ssq 2048, rr 0.5, latent 1.0; scores both -inf -> NaN; zero kv -> zeros */
    for (int i = 0; i < D; ++i) gamma[i] = 0x3F80;
    {
        enum { T = 6, CAP = 8 };
        float *kv = th_aligned_alloc(64, T * W2 * 4), *ring = th_aligned_alloc(64, 2 * CAP * W2 * 4);
        int64_t pos[T], rs[T];
        const int32_t qsl[2] = {0, T};
        for (int i = 0; i < T; ++i) pos[i] = 2 + i, rs[i] = CAP + (2 + i) % CAP;
        set_row(kv, 1.0f, 0.0f, W2), set_row(kv + W2, 3.0f, 0.0f, W2);              /* positions 2, 3 */
        set_row(kv + 2 * W2, 1.0f, 5.5f, W2), set_row(kv + 3 * W2, 3.0f, 5.5f, W2); /* 4, 5 */
        set_row(kv + 4 * W2, 1.0f, -INFINITY, W2), set_row(kv + 5 * W2, 3.0f, -INFINITY, W2);
        memset(ring, 0, 2 * CAP * W2 * 4);
        th_buf_t lb = latent_buf(T);
        uint16_t *lat = th_ptr(&lb);
        const dsv4_compress_desc_t d = {.num_tokens = T,
                                        .ratio = 2,
                                        .num_reqs = 1,
                                        .ring_cap = CAP,
                                        .ring_rows = 2 * CAP,
                                        .eps = 1e-20f,
                                        .kv_stride = 512 * 2,
                                        .ring_stride = 1024};
        const dsv4_compress_args_t a = {kv, pos, gamma, NULL, rs, qsl, ring, lat};
        TH_OK(t, dsv4_compress_ref(&d, &a));
        expect_row(t, "r=2 even position", lat, 0, LT_POISON);
        expect_row(t, "r=2 scores 0", lat, 1, 0x3F80);
        expect_row(t, "r=2 even position", lat, 2, LT_POISON);
        expect_row(t, "r=2 equal scores", lat, 3, 0x3F80);
        expect_row(t, "r=2 -inf scores", lat, 5, 0x7FFF);
        for (int i = 0; i < W2; ++i) kv[5 * W2 + i] = kv[4 * W2 + i] = i < D ? 0.0f : 1.0f; /* zero pooled row */
        TH_OK(t, dsv4_compress_ref(&d, &a));
        expect_row(t, "r=2 zero row", lat, 5, 0x0000);
        th_buf_free(&lb);
        free(kv), free(ring);
    }
}

/* One random case: the reference against the model. */
static void ref_case(th_ctx_t *t, lt_shape_t s) {
    lt_case_t c;
    lt_model_t m;
    lt_case(th_rng(t), &s, &c);
    s.num_tokens = c.d.num_tokens;
    lt_model(&c, &m);
    th_buf_t lb = latent_buf(c.d.num_tokens);
    float *ring = c.ring_elems ? malloc(c.ring_elems * 4) : NULL;
    if (ring) memcpy(ring, c.ring, c.ring_elems * 4);
    const dsv4_compress_args_t a = lt_args(&c, ring, th_ptr(&lb));
    TH_OK(t, dsv4_compress_ref(&c.d, &a));
    char what[160];
    lt_name(what, sizeof what, "ref", &s);
    lt_check(t, what, &c, &m, th_ptr(&lb), ring);
    th_buf_guards_ok(t, &lb, "latent");
    th_buf_free(&lb);
    free(ring);
    lt_model_free(&m);
    lt_case_free(&c);
}

void test_compress_vs_model(th_ctx_t *t) {
    ref_case(t, (lt_shape_t){.ratio = 1, .num_tokens = 300});
    ref_case(t, (lt_shape_t){.ratio = 1, .num_tokens = 37, .kv_stride = 528});
    ref_case(t, (lt_shape_t){.ratio = 1, .num_tokens = 1});
    ref_case(t, (lt_shape_t){.ratio = 2, .num_reqs = 12, .ring_cap = 8});
    ref_case(t, (lt_shape_t){.ratio = 2, .num_reqs = 9, .ring_cap = 16, .kv_stride = 1040, .ring_stride = 1056});
    ref_case(t, (lt_shape_t){.ratio = 2, .num_reqs = 1, .ring_cap = 8});
    ref_case(t, (lt_shape_t){.ratio = 2, .num_reqs = 0, .ring_cap = 8}); /* padding rows only */
}

/* The ring rules on one request of n rows from position p0 in block 1 of cap 8: its
 * latents and the ring afterwards, each row of the ring compared whole. */
static void ring_case(th_ctx_t *t, int64_t n, int64_t p0, int64_t minus_one_row) {
    enum { CAP = 8, RR = 3 * CAP };
    th_rng_t *r = th_rng(t);
    float *kv = th_aligned_alloc(64, (size_t)(n ? n : 1) * W2 * 4), *ring = th_aligned_alloc(64, RR * W2 * 4);
    float *before = malloc(RR * W2 * 4);
    int64_t *pos = malloc((size_t)(n ? n : 1) * 8), *rs = malloc((size_t)(n ? n : 1) * 8);
    uint16_t gamma[D];
    for (int i = 0; i < D; ++i) gamma[i] = 0x3F80;
    for (int64_t i = 0; i < RR * W2; ++i) ring[i] = (float)(th_rng_unit(r) + 0.5);
    for (int64_t i = 0; i < n; ++i) {
        pos[i] = p0 + i, rs[i] = i == minus_one_row ? -1 : CAP + (p0 + i) % CAP;
        set_row(kv + i * W2, (float)(i + 2), 0.0f, W2); /* distinct per row, equal scores */
    }
    const int64_t prev = CAP + (p0 - 1) % CAP; /* the ring row the first row reads */
    set_row(ring + prev * W2, 4.0f, 0.0f, W2);
    memcpy(before, ring, RR * W2 * 4);
    const int32_t qsl[2] = {0, (int32_t)n};
    th_buf_t lb = latent_buf(n);
    uint16_t *lat = th_ptr(&lb);
    const dsv4_compress_desc_t d = {.num_tokens = n,
                                    .ratio = 2,
                                    .num_reqs = 1,
                                    .ring_cap = CAP,
                                    .ring_rows = RR,
                                    .eps = 1e-20f,
                                    .kv_stride = 512 * 2,
                                    .ring_stride = 1024};
    const dsv4_compress_args_t a = {kv, pos, gamma, NULL, rs, qsl, ring, lat};
    TH_OK(t, dsv4_compress_ref(&d, &a));
    char what[96];
    snprintf(what, sizeof what, "ring n=%lld p0=%lld skip=%lld", (long long)n, (long long)p0, (long long)minus_one_row);
    for (int64_t i = 0; i < n; ++i) {
        /* pooled = (P + Q) / 2 with P = 4 (ring) or i + 1, Q = i + 2: every dim equal, so
         * the latent is sign(pooled) = 1.0 whatever its size */
        const int closes = (p0 + i) % 2 == 1 && i != minus_one_row;
        expect_row(t, what, lat, i, closes ? 0x3F80 : LT_POISON);
    }
    for (int64_t row = 0; row < RR; ++row) {
        const float *want = before + row * W2;
        for (int64_t i = n - CAP > 0 ? n - CAP : 0; i < n; ++i)
            if (rs[i] == row) want = kv + i * W2;
        if (memcmp(ring + row * W2, want, W2 * 4))
            th_fail(t, __FILE__, __LINE__, "%s: ring row %lld is not the expected copy", what, (long long)row);
    }
    th_buf_guards_ok(t, &lb, "latent");
    th_buf_free(&lb);
    free(kv), free(ring), free(before), free(pos), free(rs);
}

void test_compress_ring(th_ctx_t *t) {
    ring_case(t, 4, 5, -1);  /* odd start: reads ring row 4 of the block */
    ring_case(t, 9, 9, -1);  /* 9 >= cap rows: pos 16 overwrites row 0 (read by pos 9) after the read */
    ring_case(t, 20, 3, -1); /* only the last 8 rows stored */
    ring_case(t, 5, 6, 1);   /* even start; pos 7 has slot -1: no latent, not stored */
    ring_case(t, 3, 1, 0);   /* the first row has slot -1: no ring read */
    /* A request whose rows all have slot -1 (the null block): no latent, ring untouched. */
    enum { CAP = 8 };
    float *kv = th_aligned_alloc(64, 3 * W2 * 4), *ring = th_aligned_alloc(64, CAP * W2 * 4);
    for (int i = 0; i < 3 * W2; ++i) kv[i] = 1.0f;
    for (int i = 0; i < CAP * W2; ++i) ring[i] = 2.0f;
    const int64_t pos[3] = {1, 2, 3}, rs[3] = {-1, -1, -1};
    const int32_t qsl[2] = {0, 3};
    uint16_t gamma[D] = {0};
    th_buf_t lb = latent_buf(3);
    const dsv4_compress_desc_t d = {.num_tokens = 3,
                                    .ratio = 2,
                                    .num_reqs = 1,
                                    .ring_cap = CAP,
                                    .ring_rows = CAP,
                                    .kv_stride = 512 * 2,
                                    .ring_stride = 1024};
    const dsv4_compress_args_t a = {kv, pos, gamma, NULL, rs, qsl, ring, th_ptr(&lb)};
    TH_OK(t, dsv4_compress_ref(&d, &a));
    for (int i = 0; i < 3; ++i) expect_row(t, "null block", th_ptr(&lb), i, LT_POISON);
    int same = 1;
    for (int i = 0; i < CAP * W2; ++i) same &= ring[i] == 2.0f;
    TH_CHECK(t, same, "null block: the ring was written");
    th_buf_free(&lb);
    free(kv), free(ring);
}
