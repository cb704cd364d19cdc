/*
 * Helpers of the compress tests: error-message checks, input generators and the
 * independent models. The models follow the header's formulas with double arithmetic,
 * not with src/compress: a product of an fp32 and a bf16 is exact in double, a sum is
 * made exact with Knuth's two-sum and brought to fp32 by round-to-odd (so the final fp32
 * rounding is correct, not a double rounding); only the last fp32 -> bf16 step uses
 * numerics.h, whose converter has its own exhaustive tests.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "test_compress.h"

uint16_t ct_bf16(th_rng_t *r, int specials) {
    if (specials && th_rng_range(r, 0, 15) == 0) {
        static const uint16_t sp[] = {0x7FC0, 0xFFC1, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x0001, 0x8033, 0x007F};
        return sp[th_rng_range(r, 0, (int64_t)(sizeof sp / sizeof sp[0]) - 1)];
    }
    const uint32_t v = th_rng_u32(r);
    return (uint16_t)(((v & 1u) << 15) | ((119u + (v >> 1) % 17u) << 7) | ((v >> 8) & 0x7Fu));
}

/* fp32 rounding (to nearest even) of the exact x + y, where x and y are doubles. */
static float f32_of_exact_sum(double x, double y) {
    const double s = x + y;
    if (!isfinite(s)) return (float)s;
    const double bb = s - x, err = (x - (s - bb)) + (y - bb); /* s + err == x + y exactly */
    double odd = s;
    uint64_t bits;
    memcpy(&bits, &s, sizeof bits);
    if (err != 0 && !(bits & 1)) odd = nextafter(s, err > 0 ? INFINITY : -INFINITY); /* round to odd */
    return (float)odd;
}

void ct_model_inv_rope_pair(uint16_t a, uint16_t b, float c, float s, uint16_t *ya, uint16_t *yb) {
    const double A = dsv4_bf16_to_f32(a), B = dsv4_bf16_to_f32(b);
    const float bs = (float)(B * s), as = (float)(A * s); /* exact products, one rounding each */
    *ya = dsv4_f32_to_bf16(f32_of_exact_sum(A * c, bs));  /* A * c is exact in double */
    *yb = dsv4_f32_to_bf16(f32_of_exact_sum(B * c, -(double)as));
}

uint16_t ct_model_engram(uint8_t code, uint8_t enc) {
    const int sign = code >> 7, E = (code >> 3) & 15, M = code & 7;
    double v;
    if ((code & 0x7F) == 0x7F) v = NAN;
    else v = E == 0 ? ldexp(M, -9) : ldexp(8 + M, E - 10);
    if (sign) v = -v;
    const double scale = enc == 0 ? 0.0 : (enc == 255 ? INFINITY : ldexp(1.0, enc - 127));
    return dsv4_f32_to_bf16((float)(v * scale)); /* the double product is exact: one rounding to fp32 */
}

void ct_engram_case(th_rng_t *r, const dsv4_engram_lookup_desc_t *shape, ct_engram_case_t *c) {
    memset(c, 0, sizeof *c);
    c->d = *shape;
    const dsv4_engram_lookup_desc_t *d = &c->d;
    const int64_t D = d->head_dim, rows = d->vocab_end - d->vocab_start;
    const int64_t vs = d->values_stride_bytes ? d->values_stride_bytes : D;
    const int64_t ss = d->scales_stride_bytes ? d->scales_stride_bytes : D / 32;
    const int64_t sh = d->ids_stride_head ? d->ids_stride_head : 1;
    const int64_t st = d->ids_stride_token ? d->ids_stride_token : d->n_cols * sh;
    c->values_bytes = (size_t)((rows ? rows : 1) * vs);
    c->scales_bytes = (size_t)((rows ? rows : 1) * ss);
    c->ids_elems = (size_t)((d->num_tokens ? d->num_tokens - 1 : 0) * st + (d->n_cols - 1) * sh + 1);
    c->out_elems = (size_t)(d->num_tokens * d->local_heads * D);
    c->values = aligned_alloc(64, (c->values_bytes + 63) / 64 * 64);
    c->scales = aligned_alloc(64, (c->scales_bytes + 63) / 64 * 64);
    c->ids = aligned_alloc(64, (c->ids_elems * 4 + 63) / 64 * 64);
    for (size_t i = 0; i < c->values_bytes; ++i) c->values[i] = (uint8_t)th_rng_u32(r); /* NaN codes too */
    static const uint8_t rare[] = {0, 255, 1, 254};
    for (size_t i = 0; i < c->scales_bytes; ++i)
        c->scales[i] = th_rng_range(r, 0, 31) ? (uint8_t)th_rng_range(r, 100, 150) : rare[th_rng_range(r, 0, 3)];
    for (size_t i = 0; i < c->ids_elems; ++i) c->ids[i] = (int32_t)th_rng_u32(r); /* gaps: never read */
    for (int64_t t = 0; t < d->num_tokens; ++t)
        for (int64_t h = 0; h < d->n_cols; ++h) {
            const int64_t kind = th_rng_range(r, 0, 19);
            int64_t id;
            if (kind < 14 || rows == 0) id = rows ? d->vocab_start + th_rng_range(r, 0, rows - 1) : d->vocab_start;
            else if (kind < 16) id = -1;
            else if (kind < 18)
                id = d->vocab_start ? th_rng_range(r, 0, d->vocab_start - 1) : -2; /* another rank's rows */
            else
                id = d->vocab_end + th_rng_range(r, 0, 1000) > INT32_MAX ? INT32_MAX
                                                                         : d->vocab_end + th_rng_range(r, 0, 1000);
            c->ids[t * st + h * sh] = (int32_t)id;
        }
}

void ct_engram_case_free(ct_engram_case_t *c) {
    free(c->values), free(c->scales), free(c->ids);
    memset(c, 0, sizeof *c);
}

void ct_engram_model(const ct_engram_case_t *c, uint16_t *out) {
    const dsv4_engram_lookup_desc_t *d = &c->d;
    const int64_t D = d->head_dim;
    const int64_t vs = d->values_stride_bytes ? d->values_stride_bytes : D;
    const int64_t ss = d->scales_stride_bytes ? d->scales_stride_bytes : D / 32;
    const int64_t sh = d->ids_stride_head ? d->ids_stride_head : 1;
    const int64_t st = d->ids_stride_token ? d->ids_stride_token : d->n_cols * sh;
    for (int64_t t = 0; t < d->num_tokens; ++t)
        for (int64_t j = 0; j < d->local_heads; ++j) {
            const int64_t h = d->head_start + j;
            const int64_t id = h < d->n_cols ? c->ids[t * st + h * sh] : -1;
            const int owned = h < d->n_cols && id >= d->vocab_start && id < d->vocab_end;
            uint16_t *o = out + (t * d->local_heads + j) * D;
            for (int64_t e = 0; e < D; ++e)
                o[e] = owned ? ct_model_engram(c->values[(id - d->vocab_start) * vs + e],
                                               c->scales[(id - d->vocab_start) * ss + e / 32])
                             : 0;
        }
}

size_t ct_cmp_bf16(th_ctx_t *t, const char *what, const uint16_t *got, const uint16_t *want, size_t n, size_t cols) {
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        if (got[i] == want[i]) continue;
        if (bad++ < 6)
            th_fail(t, __FILE__, __LINE__, "%s: row %zu col %zu: 0x%04x, expected 0x%04x", what, i / cols, i % cols,
                    got[i], want[i]);
    }
    if (bad > 6) th_fail(t, __FILE__, __LINE__, "%s: %zu mismatches in all", what, bad);
    return bad;
}

const dsv4_engram_lookup_desc_t ct_engram_shapes[CT_ENGRAM_SHAPES] = {
    /* V4.1-Flash-like: 8 heads x 256 per rank, columns 16..23 of 20 (4 padding columns) */
    {.num_tokens = 100,
     .n_cols = 20,
     .head_start = 16,
     .local_heads = 8,
     .head_dim = 256,
     .vocab_start = 3000,
     .vocab_end = 3000 + 8192,
     .ids_stride_head = 1,
     .ids_stride_token = 20,
     .values_stride_bytes = 256,
     .scales_stride_bytes = 256 / 32},
    /* every column live; ids a layer slice of [T, 3, n_cols], padded table rows */
    {.num_tokens = 100,
     .n_cols = 8,
     .local_heads = 8,
     .head_dim = 256,
     .ids_stride_token = 24,
     .vocab_start = 0,
     .vocab_end = 700,
     .values_stride_bytes = 272,
     .scales_stride_bytes = 12,
     .ids_stride_head = 1},
    /* transposed ids, D = 96 (not a power of two) */
    {.num_tokens = 33,
     .n_cols = 6,
     .local_heads = 6,
     .head_dim = 96,
     .ids_stride_token = 1,
     .ids_stride_head = 33,
     .vocab_start = 5,
     .vocab_end = 300,
     .values_stride_bytes = 96,
     .scales_stride_bytes = 96 / 32},
    {.num_tokens = 7,
     .n_cols = 3,
     .head_start = 1,
     .local_heads = 2,
     .head_dim = 32,
     .vocab_end = 50,
     .ids_stride_head = 1,
     .ids_stride_token = 3,
     .values_stride_bytes = 32,
     .scales_stride_bytes = 32 / 32},
    {.num_tokens = 3,
     .n_cols = 2,
     .local_heads = 2,
     .head_dim = 4096,
     .vocab_start = 100,
     .vocab_end = 140,
     .ids_stride_head = 1,
     .ids_stride_token = 2,
     .values_stride_bytes = 4096,
     .scales_stride_bytes = 4096 / 32},
    /* an empty shard: every row zero */
    {.num_tokens = 5,
     .n_cols = 4,
     .local_heads = 4,
     .head_dim = 64,
     .vocab_start = 77,
     .vocab_end = 77,
     .ids_stride_head = 1,
     .ids_stride_token = 4,
     .values_stride_bytes = 64,
     .scales_stride_bytes = 64 / 32},
};

void ct_engram_name(char *buf, size_t n, const char *where, const dsv4_engram_lookup_desc_t *s) {
    snprintf(buf, n, "engram %s T=%lld cols %lld+%lld of %lld D=%lld strides %lld/%lld/%lld/%lld", where,
             (long long)s->num_tokens, (long long)s->head_start, (long long)s->local_heads, (long long)s->n_cols,
             (long long)s->head_dim, (long long)s->ids_stride_token, (long long)s->ids_stride_head,
             (long long)s->values_stride_bytes, (long long)s->scales_stride_bytes);
}

th_buf_t ct_upload(const void *host, size_t n) {
    th_buf_t b = th_buf_device(n ? n : 64);
    if (host && n) th_buf_upload(&b, host);
    return b;
}

void ct_expect_unchanged(th_ctx_t *t, const char *what, const th_buf_t *b, const void *host, size_t n) {
    uint8_t *now = malloc(b->bytes);
    th_buf_download(b, now);
    if (n) th_cmp_bytes(t, what, now, host, n);
    th_buf_guards_ok(t, b, what);
    free(now);
}
