/*
 * Tests of dsv4_kv_rope_insert: known answers of the reference (a quarter turn, the
 * identity at positions outside the table, tokens that do not close their group, skipped
 * slots, r = 1 and 2), random problems against a model written here (form T rotation with
 * fmaf, then the independent record model kvt_model_insert and dsv4_kv_insert_ref of the
 * rotated rows), and the kernel against the reference on the GPU. Every cache byte is
 * compared; untouched bytes must keep their poison.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "test_kvcache.h"

/* The contract's row y: form T on dims 448.., at the group's first position. */
static void model_rope_row(const uint16_t *x, const float *cs, int64_t p, int64_t max_pos, uint16_t *y) {
    memcpy(y, x, 1024);
    for (int i = 0; i < 32; ++i) {
        const int in = p >= 0 && p < max_pos;
        const float c = in ? cs[p * 64 + i] : 1.0f, s = in ? cs[p * 64 + 32 + i] : 0.0f;
        const float a = dsv4_bf16_to_f32(x[448 + 2 * i]), b = dsv4_bf16_to_f32(x[449 + 2 * i]);
        const float bs = b * s, as = a * s;
        y[448 + 2 * i] = dsv4_f32_to_bf16(fmaf(a, c, -bs));
        y[449 + 2 * i] = dsv4_f32_to_bf16(fmaf(b, c, as));
    }
}

/* Does the token write, and at which position does it rotate (floor division)? */
static int model_writes(kvt_geom_t g, int64_t slot, int64_t pos, int64_t r, int64_t *p) {
    const int64_t q = pos >= 0 ? pos / r : -((-pos + r - 1) / r);
    *p = q * r;
    return slot >= 0 && slot < g.num_pages * g.P && pos - q * r == r - 1;
}

static float *random_table(th_rng_t *r, int64_t max_pos) {
    float *cs = th_aligned_alloc(64, (size_t)(max_pos * 64 * sizeof(float)));
    for (int64_t p = 0; p < max_pos; ++p)
        for (int i = 0; i < 32; ++i) {
            const double ang = (double)p * pow(10000.0, -(double)i / 32.0) + th_rng_unit(r);
            cs[p * 64 + i] = (float)cos(ang);
            cs[p * 64 + 32 + i] = (float)sin(ang);
        }
    return cs;
}

/* The known answers' image: slots 3 and 5 the quarter turn (a, b) -> (-b, a) of rows 0
 * and 2 (no zeros, so fmaf(a, 0, -b) = -b and fmaf(b, 0, a) = a exactly), slot 6 row 3
 * unrotated, and slot 4 row 1 unrotated when with_slot4. */
static void expected_image(kvt_geom_t g, uint8_t *want, const uint16_t *x, int with_slot4) {
    uint16_t y[512];
    for (int n = 0; n <= 2; n += 2) {
        memcpy(y, x + n * 512, 1024);
        for (int i = 0; i < 32; ++i)
            y[448 + 2 * i] = x[n * 512 + 449 + 2 * i] ^ 0x8000, y[449 + 2 * i] = x[n * 512 + 448 + 2 * i];
        kvt_model_insert(g, want, 3 + n, y);
    }
    if (with_slot4) kvt_model_insert(g, want, 4, x + 512);
    kvt_model_insert(g, want, 6, x + 3 * 512);
}

void test_kv_rope_insert_known_answers(th_ctx_t *t) {
    /* Table of 8 positions: identity everywhere except position 6, a quarter turn. */
    const int64_t max_pos = 8, P = 64, stride = MC_PAGE_STRIDE(64);
    const kvt_geom_t g = {P, stride, 1};
    float *cs = th_aligned_alloc(64, 8 * 64 * sizeof(float));
    for (int i = 0; i < 8 * 64; ++i) cs[i] = (i % 64) < 32 ? 1.0f : 0.0f;
    for (int i = 0; i < 32; ++i) cs[6 * 64 + i] = 0.0f, cs[6 * 64 + 32 + i] = 1.0f;
    /* Rows: 0 all 1.0; 1 (d % 7) - 3.5; 2 the same as 1; 3, 4 the same as 1. */
    uint16_t *x = th_aligned_alloc(64, 6 * 1024);
    for (int d = 0; d < 512; ++d) x[d] = 0x3F80;
    for (int n = 1; n < 6; ++n)
        for (int d = 0; d < 512; ++d) x[n * 512 + d] = dsv4_f32_to_bf16((float)(d % 7) - 3.5f);
    /* r = 2: pos 7 -> table row 6 (quarter turn); pos 6 does not close; pos 9 -> row 8,
     * outside the table (identity); slot -1 and slot 64 (past the cache) skipped. */
    int64_t pos[6] = {7, 6, 7, 9, 7, 7}, slots[6] = {3, 4, 5, 6, -1, 64};
    uint8_t *got = th_aligned_alloc(64, (size_t)stride), *want = malloc((size_t)stride);
    memset(got, 0xEE, (size_t)stride);
    memcpy(want, got, (size_t)stride);
    dsv4_kv_rope_insert_desc_t d = {.num_tokens = 6,
                                    .page_tokens = P,
                                    .page_stride_bytes = stride,
                                    .num_pages = 1,
                                    .ratio = 2,
                                    .max_position = max_pos,
                                    .latent_stride_row = 512};
    const dsv4_kv_rope_insert_args_t a = {x, pos, slots, cs, got};
    TH_OK(t, dsv4_kv_rope_insert_ref(&d, &a));
    /* Row 0 at slot 3: all 1.0, quarter turn -> pairs (-1, 1); NoPE codes 0x78 enc 0x77. */
    const uint8_t *d3 = got + 3 * 576, *s3 = got + 64 * 576 + 3 * 8;
    for (int i = 0; i < 448; ++i) TH_CHECK(t, d3[i] == 0x78, "slot 3 code %d = 0x%02x, expected 0x78", i, d3[i]);
    for (int k = 0; k < 7; ++k) TH_CHECK(t, s3[k] == 0x77, "slot 3 enc %d = 0x%02x, expected 0x77", k, s3[k]);
    TH_CHECK(t, s3[7] == 0, "slot 3 pad byte = 0x%02x", s3[7]);
    for (int i = 0; i < 32; ++i) {
        const uint16_t ya = (uint16_t)(d3[448 + 4 * i] | d3[449 + 4 * i] << 8);
        const uint16_t yb = (uint16_t)(d3[450 + 4 * i] | d3[451 + 4 * i] << 8);
        TH_CHECK(t, ya == 0xBF80 && yb == 0x3F80, "slot 3 pair %d = (0x%04x, 0x%04x), expected (-1, 1)", i, ya, yb);
    }
    /* Slot 4 (pos 6) and the skipped rows write nothing. */
    expected_image(g, want, x, 0);
    kvt_cmp_cache(t, "rope_insert known answers r=2", g, got, want);
    /* r = 1: every valid token writes, at its own position: pos 6 -> quarter turn. */
    memset(got, 0xEE, (size_t)stride);
    memcpy(want, got, (size_t)stride);
    d.ratio = 1;
    int64_t pos1[6] = {6, 5, 6, 9, 6, 6};
    const dsv4_kv_rope_insert_args_t a1 = {x, pos1, slots, cs, got};
    TH_OK(t, dsv4_kv_rope_insert_ref(&d, &a1));
    expected_image(g, want, x, 1);
    free(cs), free(x), free(got), free(want);
}

/* Form T differs from the SWA writer's form S on y_b: pairs where the two round apart. */
void test_kv_rope_insert_form_t(th_ctx_t *t) {
    static const struct {
        uint16_t a, b;
        uint32_t c, s;
        uint16_t yb;
    } cases[] = {{0x3FC5, 0xC021, 0xBF05A5F2u, 0xBF5A5818u, 0x3A28},
                 {0x4063, 0xC032, 0xBF497A7Bu, 0xBF1DEE87u, 0x3A4A},
                 {0x405B, 0xC039, 0x3F4360D0u, 0x3F256B35u, 0x3BA3}};
    const kvt_geom_t g = {MC_SWA_PAGE_TOKENS, MC_PAGE_STRIDE(MC_SWA_PAGE_TOKENS), 1};
    uint16_t *x = th_aligned_alloc(64, 1024);
    float *cs = th_aligned_alloc(64, 64 * sizeof(float));
    uint8_t *cache = th_aligned_alloc(64, (size_t)g.stride);
    for (int n = 0; n < MC_COUNT(cases); ++n) {
        for (int d = 0; d < 512; ++d) x[d] = 0x3F80;
        for (int i = 0; i < 32; ++i) {
            x[448 + 2 * i] = cases[n].a, x[449 + 2 * i] = cases[n].b;
            cs[i] = dsv4_bits_f32(cases[n].c), cs[32 + i] = dsv4_bits_f32(cases[n].s);
        }
        int64_t pos = 0, slot = 0;
        const dsv4_kv_rope_insert_desc_t d = {1, 512, g.P, g.stride, 1, 1, 1};
        const dsv4_kv_rope_insert_args_t a = {x, &pos, &slot, cs, cache};
        TH_OK(t, dsv4_kv_rope_insert_ref(&d, &a));
        const uint16_t yb = (uint16_t)(cache[450] | cache[451] << 8);
        TH_CHECK(t, yb == cases[n].yb, "pair %d: y_b = 0x%04x, form T gives 0x%04x", n, yb, cases[n].yb);
    }
    free(x), free(cs), free(cache);
}

/* A random problem: rows of every kind, positions around the table (some negative or
 * past it), slots with skips; expected = the model's image. */
typedef struct {
    kvt_geom_t g;
    int64_t T, stride, r, max_pos;
    uint16_t *x;
    int64_t *pos, *slots;
    float *cs;
    int *kinds;
    dsv4_kv_rope_insert_desc_t d;
} rope_case_t;

static void rope_case(th_rng_t *rng, kvt_geom_t g, int64_t T, int64_t stride, int64_t r, rope_case_t *c) {
    c->g = g, c->T = T, c->stride = stride, c->r = r, c->max_pos = 97;
    c->x = th_aligned_alloc(64, (size_t)((T + 1) * stride * 2 + 64));
    c->kinds = malloc((size_t)(T + 1) * sizeof(int));
    c->pos = th_aligned_alloc(64, (size_t)(T + 1) * 8), c->slots = th_aligned_alloc(64, (size_t)(T + 1) * 8);
    c->cs = random_table(rng, c->max_pos);
    kvt_fill_rows(rng, c->x, T + 1, stride, KVT_ROW_KINDS, c->kinds);
    kvt_make_slots(rng, g, T, 1, c->slots);
    for (int64_t i = 0; i < T; ++i)
        c->pos[i] = th_rng_range(rng, 0, 9) == 0 ? th_rng_range(rng, -5, 2 * c->max_pos) : th_rng_range(rng, 0, 95);
    c->d = (dsv4_kv_rope_insert_desc_t){T, stride, g.P, g.stride, g.num_pages, r, c->max_pos};
}
static void rope_case_free(rope_case_t *c) { free(c->x), free(c->kinds), free(c->pos), free(c->slots), free(c->cs); }

static void rope_case_model(const rope_case_t *c, uint8_t *image, uint16_t *rot, int64_t *slots_kept) {
    for (int64_t i = 0; i < c->T; ++i) {
        int64_t p;
        const int w = model_writes(c->g, c->slots[i], c->pos[i], c->r, &p);
        model_rope_row(c->x + i * c->stride, c->cs, p, c->max_pos, rot + i * 512);
        slots_kept[i] = w ? c->slots[i] : -1;
        if (w) kvt_model_insert(c->g, image, c->slots[i], rot + i * 512);
    }
}

void test_kv_rope_insert_random_vs_model(th_ctx_t *t) {
    th_rng_t *rng = th_rng(t);
    static const struct {
        int64_t P, pages, T, stride, r;
    } shapes[] = {{128, 3, 300, 512, 1}, {64, 4, 400, 520, 2}, {MC_SWA_PAGE_TOKENS, 5, 200, 512, 3}};
    for (int n = 0; n < MC_COUNT(shapes); ++n) {
        const kvt_geom_t g = {shapes[n].P, MC_PAGE_STRIDE(shapes[n].P), shapes[n].pages};
        rope_case_t c;
        rope_case(rng, g, shapes[n].T, shapes[n].stride, shapes[n].r, &c);
        const size_t cb = kvt_cache_bytes(g);
        uint8_t *got = th_aligned_alloc(64, cb), *model = malloc(cb), *via_insert = th_aligned_alloc(64, cb);
        for (size_t b = 0; b < cb; ++b) got[b] = (uint8_t)(b * 13 + 1);
        memcpy(model, got, cb), memcpy(via_insert, got, cb);
        uint16_t *rot = th_aligned_alloc(64, (size_t)c.T * 1024);
        int64_t *kept = th_aligned_alloc(64, (size_t)c.T * 8);
        rope_case_model(&c, model, rot, kept);
        const dsv4_kv_rope_insert_args_t a = {c.x, c.pos, c.slots, c.cs, got};
        TH_OK(t, dsv4_kv_rope_insert_ref(&c.d, &a));
        char what[128];
        snprintf(what, sizeof what, "rope_insert_ref vs model T=%lld r=%lld P=%lld", (long long)c.T, (long long)c.r,
                 (long long)g.P);
        kvt_cmp_cache(t, what, g, got, model);
        /* The same bytes as dsv4_kv_insert_ref of the rotated rows (skipped ones as -1). */
        const dsv4_kv_insert_desc_t di = {c.T, 512, g.P, g.stride, g.num_pages};
        const dsv4_kv_insert_args_t ai = {rot, kept, via_insert};
        TH_OK(t, dsv4_kv_insert_ref(&di, &ai));
        snprintf(what, sizeof what, "rope_insert_ref vs kv_insert_ref(y) T=%lld r=%lld", (long long)c.T,
                 (long long)c.r);
        kvt_cmp_cache(t, what, g, got, via_insert);
        free(got), free(model), free(via_insert), free(rot), free(kept);
        rope_case_free(&c);
    }
}

/* ---- GPU: the kernel against the reference ------------------------------------------- */
static void gpu_rope_case(th_ctx_t *t, kvt_geom_t g, int64_t T, int64_t stride, int64_t r) {
    th_rng_t *rng = th_rng(t);
    rope_case_t c;
    rope_case(rng, g, T, stride, r, &c);
    const size_t cb = kvt_cache_bytes(g), xb = (size_t)((T + 1) * stride * 2 + 64), n8 = (size_t)(T + 1) * 8;
    uint8_t *want = th_aligned_alloc(64, cb), *got = malloc(cb);
    for (size_t i = 0; i < cb; ++i) want[i] = (uint8_t)th_rng_u32(rng);
    th_buf_t dx = kvt_dev_from(c.x, xb), dp = kvt_dev_from(c.pos, n8), ds = kvt_dev_from(c.slots, n8);
    th_buf_t dcs = kvt_dev_from(c.cs, (size_t)c.max_pos * 256), dc = kvt_dev_from(want, cb);
    const dsv4_kv_rope_insert_args_t ha = {c.x, c.pos, c.slots, c.cs, want};
    const dsv4_kv_rope_insert_args_t da = {th_ptr(&dx), th_ptr(&dp), th_ptr(&ds), th_ptr(&dcs), th_ptr(&dc)};
    TH_OK(t, dsv4_kv_rope_insert_ref(&c.d, &ha));
    void *s = th_stream_create(t);
    TH_OK(t, dsv4_kv_rope_insert(&c.d, &da, NULL, 0, DSV4_STREAM(s)));
    th_stream_sync_destroy(t, s);
    th_buf_download(&dc, got);
    char what[128];
    snprintf(what, sizeof what, "kv_rope_insert T=%lld stride=%lld r=%lld P=%lld pages=%lld", (long long)T,
             (long long)stride, (long long)r, (long long)g.P, (long long)g.num_pages);
    kvt_cmp_cache(t, what, g, got, want);
    th_buf_guards_ok(t, &dc, "cache");
    th_buf_free(&dx), th_buf_free(&dp), th_buf_free(&ds), th_buf_free(&dcs), th_buf_free(&dc);
    free(want), free(got);
    rope_case_free(&c);
}

/* At least T slots, so that the slots are distinct: of rows sharing a slot the kernel keeps
 * one, not necessarily the reference's last (kvcache.gpu_duplicate_slots covers that). */
void test_kv_gpu_rope_insert(th_ctx_t *t) {
    gpu_rope_case(t, (kvt_geom_t){128, MC_PAGE_STRIDE(128), 4}, 1, 512, 1);
    gpu_rope_case(t, (kvt_geom_t){128, MC_PAGE_STRIDE(128), 40}, 5000, 512, 1);
    gpu_rope_case(t, (kvt_geom_t){64, MC_PAGE_STRIDE(64), 80}, 5000, 520, 2);
    /* each warp of a resident wave (4,224 on an H200, 3,456 on an A100) takes three or more
     * tokens: the kernel's loads run one and two tokens ahead */
    gpu_rope_case(t, (kvt_geom_t){64, MC_PAGE_STRIDE(64), 320}, 20000, 512, 2);
    gpu_rope_case(t, (kvt_geom_t){64, MC_PAGE_STRIDE(64) + 16, 3}, 37, 512, 2);
    gpu_rope_case(t, (kvt_geom_t){32, MC_PAGE_STRIDE(32), 100}, 3000, 512, 4);
}
