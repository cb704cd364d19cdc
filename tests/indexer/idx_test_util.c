/*
 * Helpers of the indexer tests: error-message checks, input generators and the
 * independent models. The models follow the header's formulas in double arithmetic, not
 * src/indexer: products of an fp32 and a bf16 (or two bf16) are exact in double; a sum is
 * computed toward zero with the inexact flag folded into the last bit (round to odd), so
 * the final conversion to fp32 rounds correctly instead of twice; e4m3 codes come from a
 * nearest-value search over the 127 non-negative codes. Only the fp32 -> bf16 step uses
 * numerics.h, whose converter has its own exhaustive tests.
 */
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "test_indexer.h"

static uint16_t bf16_of(int sign, int exp, unsigned mant) {
    return (uint16_t)(((unsigned)sign << 15) | ((unsigned)(exp + 127) << 7) | (mant & 0x7Fu));
}

void it_row(th_rng_t *r, uint16_t *x, int specials) {
    const int kind = (int)th_rng_range(r, 0, 9);
    const int top = (int)th_rng_range(r, -30, 40);
    for (int d = 0; d < 128; ++d)
        x[d] = kind == 0 ? (uint16_t)(th_rng_range(r, 0, 3) ? 0x0000 : 0x8000)
                         : bf16_of((int)(th_rng_u32(r) & 1), top - (int)th_rng_range(r, 0, 12), th_rng_u32(r));
    if (kind == 1) x[th_rng_range(r, 0, 127)] = bf16_of((int)(th_rng_u32(r) & 1), top + 1, 0x60); /* 1.75 * 2^k */
    if (specials && th_rng_range(r, 0, 5) == 0) {
        static const uint16_t sp[] = {0x7FC0, 0xFFC1, 0x7F80, 0xFF80};
        x[th_rng_range(r, 0, 127)] = sp[th_rng_range(r, 0, 3)];
    }
}

/* fp32 of the exact x + y: the sum toward zero, its last bit set when inexact. */
static float f32_sum(double x, double y) {
    volatile double vx = x, vy = y;
    feclearexcept(FE_INEXACT);
    const int mode = fegetround();
    fesetround(FE_TOWARDZERO);
    volatile double s = vx + vy;
    const int inexact = fetestexcept(FE_INEXACT);
    fesetround(mode);
    double out = s;
    if (inexact && isfinite(out)) {
        uint64_t b;
        memcpy(&b, &out, 8);
        b |= 1u;
        memcpy(&out, &b, 8);
    }
    return (float)out;
}

void it_model_rope(uint16_t a, uint16_t b, float c, float s, uint16_t *ya, uint16_t *yb) {
    const double A = dsv4_bf16_to_f32(a), B = dsv4_bf16_to_f32(b);
    const float bs = (float)(B * s), as = (float)(A * s); /* exact products, one rounding each */
    *ya = dsv4_f32_to_bf16(f32_sum(A * c, -(double)bs));
    *yb = dsv4_f32_to_bf16(f32_sum(B * c, (double)as));
}

int it_model_exp(double amax) {
    if (isinf(amax)) return 128;
    const double a = amax > (double)1e-4f ? amax : (double)1e-4f;
    int e = -40;
    while (448.0 * ldexp(1.0, e) < a) ++e;
    return e;
}

static double e4m3_value(int c) { return c < 8 ? ldexp(c, -9) : ldexp(8 + (c & 7), (c >> 3) - 10); }

uint8_t it_model_e4m3(double v, uint8_t nan_code) {
    if (isnan(v)) return nan_code;
    const int sign = signbit(v) ? 1 : 0;
    const double m = fabs(v);
    int c = 0x7E;
    if (m < 448.0) {
        int hi = 0;
        while (e4m3_value(hi) < m) ++hi; /* first code at or above m */
        c = hi;
        if (hi > 0) {
            const double dlo = m - e4m3_value(hi - 1), dhi = e4m3_value(hi) - m;
            if (dlo < dhi || (dlo == dhi && ((hi - 1) & 1) == 0)) c = hi - 1;
        }
    }
    return (uint8_t)(c | (sign << 7));
}

/* Codes of a row y at exponent e; the k side clamps (NaN -> 0x7E), the q side does not (NaN -> 0x7F). */
static void model_codes(const double *y, int e, int clamp, uint8_t *codes) {
    const uint8_t nan_code = clamp ? 0x7E : 0x7F;
    for (int d = 0; d < 128; ++d) {
        if (e == 128) /* scale +inf: x / inf, or x * 0 on the clamped side */
            codes[d] = isfinite(y[d]) ? (uint8_t)(signbit(y[d]) ? 0x80 : 0x00) : nan_code;
        else codes[d] = it_model_e4m3(ldexp(y[d], -e), nan_code);
    }
}

static double row_amax(const double *y) {
    double m = 0.0;
    for (int d = 0; d < 128; ++d)
        if (!isnan(y[d]) && fabs(y[d]) > m) m = fabs(y[d]);
    return m;
}

/* Rotate the RoPE pairs of the bf16 row y (in place) at table row p. */
static void model_rope_row(uint16_t *y, int64_t p, int64_t max_position, const float *cs) {
    const int in = p >= 0 && p < max_position;
    for (int i = 0; i < 32; ++i)
        it_model_rope(y[64 + 2 * i], y[65 + 2 * i], in ? cs[p * 64 + i] : 1.0f, in ? cs[p * 64 + 32 + i] : 0.0f,
                      &y[64 + 2 * i], &y[65 + 2 * i]);
}

void it_model_q_row(const uint16_t *q, int64_t pos, int64_t max_position, const float *cs, uint16_t w_raw, float ss,
                    float hs, uint8_t *codes, float *w) {
    uint16_t yb[128];
    double y[128];
    memcpy(yb, q, sizeof yb);
    model_rope_row(yb, pos, max_position, cs);
    for (int d = 0; d < 128; ++d) y[d] = dsv4_bf16_to_f32(yb[d]);
    const int e = it_model_exp(row_amax(y));
    model_codes(y, e, 0, codes);
    const double s = e == 128 ? INFINITY : ldexp(1.0, e);
    const float p1 = (float)((double)dsv4_bf16_to_f32(w_raw) * s), p2 = (float)((double)p1 * ss);
    *w = (float)((double)p2 * hs);
    if (isnan(*w)) *w = dsv4_bits_f32(0x7FFFFFFFu); /* the contract's one NaN */
}

void it_model_k_row(const uint16_t *k, const uint16_t *gamma, float eps, int64_t rope_row, int64_t max_position,
                    const float *cs, uint8_t *codes, uint32_t *scale_bits) {
    double x[128], y[128];
    float p[32];
    uint16_t yb[128];
    for (int d = 0; d < 128; ++d) x[d] = dsv4_bf16_to_f32(k[d]);
    for (int l = 0; l < 32; ++l) {
        const double *v = x + 4 * l;
        const float f1 = f32_sum(v[0] * v[0], (float)(v[1] * v[1])), f2 = f32_sum(v[2] * v[2], (float)(v[3] * v[3]));
        p[l] = f32_sum(f1, f2);
    }
    for (int h = 16; h > 0; h >>= 1)
        for (int l = 0; l < h; ++l) p[l] = f32_sum(p[l], p[l + h]);
    const float v = f32_sum((double)p[0] / 128.0, eps);
    const float rr = (float)(1.0 / (double)(float)sqrt((double)v)); /* double then fp32: correctly rounded */
    for (int d = 0; d < 128; ++d)
        yb[d] = dsv4_f32_to_bf16((float)((double)(float)(x[d] * rr) * dsv4_bf16_to_f32(gamma[d])));
    model_rope_row(yb, rope_row, max_position, cs);
    for (int d = 0; d < 128; ++d) y[d] = dsv4_bf16_to_f32(yb[d]);
    const int e = it_model_exp(row_amax(y));
    model_codes(y, e, 1, codes);
    *scale_bits = (uint32_t)(e + 127) << 23;
}

/* ---- random problems ------------------------------------------------------------------- */
void it_k_case(th_rng_t *r, int64_t T, int64_t ratio, int64_t P, int64_t stride, int64_t k_stride, it_k_case_t *c) {
    memset(c, 0, sizeof *c);
    const int64_t ks = k_stride ? k_stride : 128, states = T / ratio + 8;
    const int64_t pages = (states + P - 1) / P + 1, max_pos = 4096 + 2 * T;
    c->d = (dsv4_indexer_k_store_desc_t){.num_tokens = T,
                                         .k_stride_row = ks,
                                         .ratio = ratio,
                                         .max_position = max_pos,
                                         .page_tokens = P,
                                         .page_stride_bytes = stride,
                                         .num_pages = pages,
                                         .eps = 1e-6f};
    c->k_elems = (size_t)((T ? T - 1 : 0) * ks + 128);
    c->cache_bytes = (size_t)(pages * stride);
    c->k = th_aligned_alloc(64, c->k_elems * 2);
    c->gamma = th_aligned_alloc(64, 256);
    c->pos = th_aligned_alloc(64, (size_t)(T ? T : 1) * 8);
    c->slot = th_aligned_alloc(64, (size_t)(T ? T : 1) * 8);
    c->cs = th_aligned_alloc(64, (size_t)max_pos * 256);
    for (size_t i = 0; i < c->k_elems; ++i) c->k[i] = bf16_of((int)(th_rng_u32(r) & 1), (int)th_rng_range(r, -8, 4), 0);
    for (int64_t t = 0; t < T; ++t) it_row(r, c->k + t * ks, 1);
    for (int d = 0; d < 128; ++d) c->gamma[d] = bf16_of(0, (int)th_rng_range(r, -1, 1), th_rng_u32(r));
    th_rotary_table(c->cs, max_pos);
    int32_t *perm = malloc((size_t)(pages * P) * 4);
    for (int64_t i = 0; i < pages * P; ++i) perm[i] = (int32_t)i;
    th_rng_shuffle_i32(r, perm, pages * P);
    const int64_t start = th_rng_range(r, 0, max_pos - T - 1);
    for (int64_t t = 0; t < T; ++t) {
        c->pos[t] = th_rng_range(r, 0, 30) ? start + t : th_rng_range(r, -3, max_pos + 8); /* some outside */
        const int64_t k = th_rng_range(r, 0, 11);
        /* each slot at most once (rows past the cache's slot count skip) */
        c->slot[t] = k == 0 || t >= pages * P ? -1 : (k == 1 ? pages * P + th_rng_range(r, 0, 5) : perm[t]);
    }
    free(perm);
}

void it_k_case_free(it_k_case_t *c) { free(c->k), free(c->gamma), free(c->pos), free(c->slot), free(c->cs); }

void it_q_case(th_rng_t *r, const dsv4_indexer_q_desc_t *shape, it_q_case_t *c) {
    memset(c, 0, sizeof *c);
    c->d = *shape;
    const int64_t T = shape->num_tokens, H = shape->num_heads;
    const int64_t sh = shape->q_stride_head ? shape->q_stride_head : 128;
    const int64_t st = shape->q_stride_token ? shape->q_stride_token : H * sh;
    const int64_t sw = shape->w_stride_token ? shape->w_stride_token : H;
    c->q_elems = (size_t)((T ? T - 1 : 0) * st + (H - 1) * sh + 128);
    c->w_elems = (size_t)((T ? T - 1 : 0) * sw + H);
    c->q = th_aligned_alloc(64, c->q_elems * 2);
    c->w_raw = th_aligned_alloc(64, c->w_elems * 2);
    c->pos = th_aligned_alloc(64, (size_t)(T ? T : 1) * 8);
    c->cs = th_aligned_alloc(64, (size_t)shape->max_position * 256);
    for (size_t i = 0; i < c->q_elems; ++i) c->q[i] = (uint16_t)th_rng_u32(r); /* gaps: junk */
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) it_row(r, c->q + t * st + h * sh, 1);
    for (size_t i = 0; i < c->w_elems; ++i)
        c->w_raw[i] = th_rng_range(r, 0, 40)
                          ? bf16_of((int)(th_rng_u32(r) & 1), (int)th_rng_range(r, -6, 3), th_rng_u32(r))
                          : (uint16_t)0x0000;
    th_rotary_table(c->cs, shape->max_position);
    for (int64_t t = 0; t < T; ++t)
        c->pos[t] = th_rng_range(r, 0, 19) ? th_rng_range(r, 0, shape->max_position - 1)
                                           : th_rng_range(r, -2, 2 * shape->max_position);
}

void it_q_case_free(it_q_case_t *c) { free(c->q), free(c->w_raw), free(c->pos), free(c->cs); }
