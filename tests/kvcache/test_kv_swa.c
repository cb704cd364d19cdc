/*
 * CPU tests of dsv4_kv_swa_write_ref: known answers, the kv bytes against the contract's
 * definition (RoPE in the stated fmaf form written out here, bf16, then the independent
 * record model and dsv4_kv_insert_ref), and the q output against an fp64 evaluation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "kv_test_util.h"
#include "test_kvcache.h"

/* A random cos/sin table: angles theta_i * pos as the model would have them. */
static float *make_table(th_rng_t *r, int64_t max_pos) {
    float *cs = th_aligned_alloc(64, (size_t)(max_pos * 64 * sizeof(float)));
    const double base = 1.0 + 9999.0 * th_rng_unit(r);
    for (int64_t p = 0; p < max_pos; ++p)
        for (int i = 0; i < 32; ++i) {
            const double ang = (double)p * pow(base, -(double)i / 32.0);
            cs[p * 64 + i] = (float)cos(ang);
            cs[p * 64 + 32 + i] = (float)sin(ang);
        }
    return cs;
}

/* The contract's kv row after RoPE and rounding: bf16(RoPE(kv)) with the fmaf form. */
static void spec_rope_row(const uint16_t *kv, const float *cs, int64_t pos, int64_t max_pos, uint16_t *out) {
    memcpy(out, kv, 1024);
    for (int i = 0; i < 32; ++i) {
        const int in = pos >= 0 && pos < max_pos;
        const float c = in ? cs[pos * 64 + i] : 1.0f, s = in ? cs[pos * 64 + 32 + i] : 0.0f;
        const float xa = dsv4_bf16_to_f32(kv[448 + 2 * i]), xb = dsv4_bf16_to_f32(kv[449 + 2 * i]);
        const float xbs = xb * s, xbc = xb * c;
        out[448 + 2 * i] = dsv4_f32_to_bf16(fmaf(xa, c, -xbs));
        out[449 + 2 * i] = dsv4_f32_to_bf16(fmaf(xa, s, xbc));
    }
}

/* The known answers' one-token case: q of 3 live heads and 1 padding head (the caller
 * fills it), a kv row of (d % 7) - 3.5 for slot 5 of a poisoned V4 page, and a table
 * whose position 3 has cos 0, sin 1 (a quarter turn): (a, b) -> (-b, a). */
typedef struct {
    uint16_t *q, *kv;
    float *cs;
    uint8_t *page;
    int64_t pos, slot;
    dsv4_kv_swa_write_desc_t d;
    dsv4_kv_swa_write_args_t a;
} swa_one_token_t;

static void one_token_make(swa_one_token_t *k, float eps) {
    k->q = th_aligned_alloc(64, 4 * 1024), k->kv = th_aligned_alloc(64, 1024);
    k->cs = th_aligned_alloc(64, 4 * 64 * sizeof(float));
    for (int i = 0; i < 4 * 64; ++i) k->cs[i] = (i % 64) < 32 ? 1.0f : 0.0f;
    for (int i = 0; i < 32; ++i) k->cs[3 * 64 + i] = 0.0f, k->cs[3 * 64 + 32 + i] = 1.0f;
    for (int d = 0; d < 512; ++d) k->kv[d] = dsv4_f32_to_bf16((float)(d % 7) - 3.5f);
    k->pos = 3, k->slot = 5;
    k->page = th_aligned_alloc(64, 37440);
    memset(k->page, 0xEE, 37440);
    k->d = (dsv4_kv_swa_write_desc_t){.num_tokens = 1,
                                      .num_insert = 1,
                                      .num_heads = 3,
                                      .num_heads_padded = 4,
                                      .max_position = 4,
                                      .page_tokens = 64,
                                      .page_stride_bytes = 37440,
                                      .num_pages = 1,
                                      .eps = eps,
                                      .q_stride_token = 4 * 512,
                                      .q_stride_head = 512,
                                      .kv_stride_row = 512};
    k->a = (dsv4_kv_swa_write_args_t){k->q, k->kv, &k->pos, &k->slot, k->cs, k->page};
}
static void one_token_free(swa_one_token_t *k) { free(k->q), free(k->kv), free(k->cs), free(k->page); }

void test_kv_swa_known_answers(th_ctx_t *t) {
    /* Heads: all 1.0; all 2.0; all 3.0 (eps 0: rq = 1, 1/2, fl(1/3)); one padding head. */
    swa_one_token_t k;
    one_token_make(&k, 0.0f);
    uint16_t *q = k.q;
    const uint16_t *kv = k.kv;
    for (int h = 0; h < 4; ++h)
        for (int d = 0; d < 512; ++d) q[h * 512 + d] = h < 3 ? dsv4_f32_to_bf16((float)(h + 1)) : 0x1234;
    uint8_t *want = malloc(37440);
    memcpy(want, k.page, 37440);
    TH_OK(t, dsv4_kv_swa_write_ref(&k.d, &k.a));
    for (int h = 0; h < 3; ++h) {
        for (int dd = 0; dd < 448; ++dd)
            TH_CHECK(t, q[h * 512 + dd] == 0x3F80, "head %d dim %d = 0x%04x, expected 1.0", h, dd, q[h * 512 + dd]);
        for (int i = 0; i < 32; ++i)
            TH_CHECK(t, q[h * 512 + 448 + 2 * i] == 0xBF80 && q[h * 512 + 449 + 2 * i] == 0x3F80,
                     "head %d pair %d = (0x%04x, 0x%04x), expected (-1, 1)", h, i, q[h * 512 + 448 + 2 * i],
                     q[h * 512 + 449 + 2 * i]);
    }
    for (int dd = 0; dd < 512; ++dd) TH_CHECK(t, q[3 * 512 + dd] == 0, "padding head dim %d not zero", dd);
    /* kv: the quarter turn (a, b) -> (-b, a) on dims 448.. (no zeros, so no signed-zero
     * subtleties: fmaf(a, 0, -b) = -b and fmaf(a, 1, b * 0) = a exactly), then insert. */
    uint16_t rot[512];
    memcpy(rot, kv, 1024);
    for (int i = 0; i < 32; ++i) {
        rot[448 + 2 * i] = kv[449 + 2 * i] ^ 0x8000;
        rot[449 + 2 * i] = kv[448 + 2 * i];
    }
    kvt_geom_t g = {MC_V4_PAGE_TOKENS, MC_PAGE_STRIDE(MC_V4_PAGE_TOKENS), 1};
    kvt_model_insert(g, want, k.slot, rot);
    kvt_cmp_cache(t, "swa known answer kv", g, k.page, want);
    one_token_free(&k);
    free(want);
}

void test_kv_swa_kv_equals_insert(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    const kvt_geom_t g = {MC_SWA_PAGE_TOKENS, MC_PAGE_STRIDE(MC_SWA_PAGE_TOKENS), 12};
    const int64_t N = 120, Ni = 100, max_pos = 300, kvs = 528;
    uint16_t *q = th_aligned_alloc(64, (size_t)N * 1024), *kv = th_aligned_alloc(64, (size_t)(N * kvs * 2));
    uint16_t *rot = th_aligned_alloc(64, (size_t)N * 1024);
    float *cs = make_table(r, max_pos);
    int64_t *pos = malloc((size_t)N * 8), *slots = malloc((size_t)Ni * 8);
    for (int64_t i = 0; i < N; ++i)
        pos[i] = th_rng_range(r, 0, 9) == 0 ? th_rng_range(r, -3, 2 * max_pos) : th_rng_range(r, 0, max_pos - 1);
    th_fill_bf16_normal(r, q, (size_t)N * 512, 1.0);
    kvt_fill_rows(r, kv, N, kvs, KVT_ROW_KINDS, NULL);
    kvt_make_slots(r, g, Ni, 1, slots);
    uint8_t *got = th_aligned_alloc(64, kvt_cache_bytes(g)), *model = malloc(kvt_cache_bytes(g));
    uint8_t *via_insert = th_aligned_alloc(64, kvt_cache_bytes(g));
    for (size_t b = 0; b < kvt_cache_bytes(g); ++b) got[b] = (uint8_t)(b * 13 + 1);
    memcpy(model, got, kvt_cache_bytes(g));
    memcpy(via_insert, got, kvt_cache_bytes(g));
    for (int64_t i = 0; i < Ni; ++i) {
        spec_rope_row(kv + i * kvs, cs, pos[i], max_pos, rot + i * 512);
        if (slots[i] >= 0 && slots[i] < g.num_pages * g.P) kvt_model_insert(g, model, slots[i], rot + i * 512);
    }
    dsv4_kv_swa_write_desc_t d = {.num_tokens = N,
                                  .num_insert = Ni,
                                  .num_heads = 1,
                                  .kv_stride_row = kvs,
                                  .max_position = max_pos,
                                  .page_tokens = g.P,
                                  .page_stride_bytes = g.stride,
                                  .num_pages = g.num_pages,
                                  .eps = 1e-6f,
                                  .q_stride_token = 1 * 512,
                                  .q_stride_head = 512};
    dsv4_kv_swa_write_args_t a = {q, kv, pos, slots, cs, got};
    TH_OK(t, dsv4_kv_swa_write_ref(&d, &a));
    kvt_cmp_cache(t, "swa_ref kv vs model of insert(bf16(rope(kv)))", g, got, model);
    dsv4_kv_insert_desc_t di = {.num_tokens = Ni,
                                .page_tokens = g.P,
                                .page_stride_bytes = g.stride,
                                .num_pages = g.num_pages,
                                .k_stride_row = 512};
    dsv4_kv_insert_args_t ai = {rot, slots, via_insert};
    TH_OK(t, dsv4_kv_insert_ref(&di, &ai));
    kvt_cmp_cache(t, "swa_ref kv vs dsv4_kv_insert_ref(bf16(rope(kv)))", g, got, via_insert);
    free(q), free(kv), free(rot), free(cs), free(pos), free(slots), free(got), free(model), free(via_insert);
}

/* q against fp64: NoPE dims within 1 bf16 ulp; RoPE dims within 1 ulp of the fp64 result
 * plus 2^-20 of the terms' magnitude (fp32 rounding before a cancelling sum is amplified
 * relative to a small result; kvcache.h's q contract). */
void test_kv_swa_q_vs_fp64(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    const int64_t N = 40, H = 3, Hp = 5, sh = 520, st = Hp * sh + 64, max_pos = 64;
    const float eps = 1e-6f;
    uint16_t *q = th_aligned_alloc(64, (size_t)(N * st * 2)), *q0 = malloc((size_t)(N * st * 2));
    uint16_t *kv = th_aligned_alloc(64, 1024);
    float *cs = make_table(r, max_pos);
    int64_t *pos = malloc((size_t)N * 8), slot = -1;
    for (int64_t i = 0; i < N * st; ++i) q[i] = (uint16_t)th_rng_u32(r); /* gaps: junk that must stay */
    for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < H; ++h) {
            const double scale = ldexp(1.0, (int)th_rng_range(r, -20, 20));
            th_fill_bf16_normal(r, q + n * st + h * sh, 512, scale);
        }
    for (int64_t n = 0; n < N; ++n) pos[n] = th_rng_range(r, 0, max_pos - 1);
    memset(kv, 0, 1024);
    memcpy(q0, q, (size_t)(N * st * 2));
    uint8_t *cache = th_aligned_alloc(64, 19008);
    dsv4_kv_swa_write_desc_t d = {.num_tokens = N,
                                  .num_insert = 1,
                                  .num_heads = H,
                                  .num_heads_padded = Hp,
                                  .q_stride_token = st,
                                  .q_stride_head = sh,
                                  .max_position = max_pos,
                                  .page_tokens = 32,
                                  .page_stride_bytes = 19008,
                                  .num_pages = 1,
                                  .eps = eps,
                                  .kv_stride_row = 512};
    dsv4_kv_swa_write_args_t a = {q, kv, pos, &slot, cs, cache};
    TH_OK(t, dsv4_kv_swa_write_ref(&d, &a));
    uint32_t worst = 0;
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t h = 0; h < Hp; ++h) {
            const uint16_t *x = q0 + n * st + h * sh, *y = q + n * st + h * sh;
            if (h >= H) {
                for (int dd = 0; dd < 512; ++dd)
                    TH_CHECK(t, y[dd] == 0, "token %lld pad head %lld dim %d", (long long)n, (long long)h, dd);
                continue;
            }
            double ss = 0;
            for (int dd = 0; dd < 512; ++dd) ss += (double)dsv4_bf16_to_f32(x[dd]) * dsv4_bf16_to_f32(x[dd]);
            const double rq = 1.0 / sqrt(ss / 512.0 + (double)eps);
            for (int dd = 0; dd < 448; ++dd) {
                const uint32_t u = kvt_bf16_ulp_diff(y[dd], dsv4_f32_to_bf16((float)(dsv4_bf16_to_f32(x[dd]) * rq)));
                worst = u > worst ? u : worst;
                TH_CHECK(t, u <= 1, "token %lld head %lld dim %d: %u ulp", (long long)n, (long long)h, dd, u);
            }
            for (int i = 0; i < 32; ++i) {
                const double c = cs[pos[n] * 64 + i], s = cs[pos[n] * 64 + 32 + i];
                const double xa = dsv4_bf16_to_f32(x[448 + 2 * i]) * rq, xb = dsv4_bf16_to_f32(x[449 + 2 * i]) * rq;
                const double ya = xa * c - xb * s, yb = xa * s + xb * c;
                const double ta = fabs(xa * c) + fabs(xb * s), tb = fabs(xa * s) + fabs(xb * c);
                const double ga = dsv4_bf16_to_f32(y[448 + 2 * i]), gb = dsv4_bf16_to_f32(y[449 + 2 * i]);
                const double ua = ldexp(1.0, (int)floor(log2(fabs(ya) + 1e-300)) - 7);
                const double ub = ldexp(1.0, (int)floor(log2(fabs(yb) + 1e-300)) - 7);
                TH_CHECK(t, fabs(ga - ya) <= ua + ldexp(ta, -20), "token %lld head %lld pair %d a: %.9g vs fp64 %.9g",
                         (long long)n, (long long)h, i, ga, ya);
                TH_CHECK(t, fabs(gb - yb) <= ub + ldexp(tb, -20), "token %lld head %lld pair %d b: %.9g vs fp64 %.9g",
                         (long long)n, (long long)h, i, gb, yb);
            }
        }
        for (int64_t e = Hp * sh; e < st; ++e)
            TH_CHECK(t, q[n * st + e] == q0[n * st + e], "token %lld gap element %lld changed", (long long)n,
                     (long long)e);
        for (int64_t h = 0; h < Hp; ++h)
            for (int64_t e = 512; e < sh; ++e)
                TH_CHECK(t, q[n * st + h * sh + e] == q0[n * st + h * sh + e],
                         "token %lld head %lld gap element %lld changed", (long long)n, (long long)h, (long long)e);
    }
    th_note(t, "worst NoPE difference from fp64: %u bf16 ulp", worst);
    free(q), free(q0), free(kv), free(cs), free(pos), free(cache);
}

/* ---- skip_q_norm (V4.1: q is RoPE only) ------------------------------------------------ */
/* The same problem run in both modes: returns the q of skip mode in q, the cache of each
 * mode in cache_skip and cache_norm. */
static void run_both_modes(th_ctx_t *t, dsv4_kv_swa_write_desc_t d, dsv4_kv_swa_write_args_t a, size_t q_elems,
                           size_t cache_bytes, uint8_t *cache_norm) {
    uint16_t *qn = th_aligned_alloc(64, (q_elems * 2 + 63) / 64 * 64);
    memcpy(qn, a.q, q_elems * 2);
    memcpy(cache_norm, a.cache, cache_bytes);
    dsv4_kv_swa_write_args_t an = a;
    an.q = qn, an.cache = cache_norm;
    d.skip_q_norm = 0;
    TH_OK(t, dsv4_kv_swa_write_ref(&d, &an));
    d.skip_q_norm = 1;
    TH_OK(t, dsv4_kv_swa_write_ref(&d, &a));
    free(qn);
}

void test_kv_swa_skip_q_norm_known_answers(th_ctx_t *t) {
    /* 3 live heads of random finite nonzero values (NaN and inf in the NoPE dims: not
     * touched, so they must come back bit for bit) and one padding head; at the quarter
     * turn the RoPE pairs become (-b, a) exactly. */
    th_rng_t *r = th_rng(t);
    swa_one_token_t k;
    one_token_make(&k, 1e-6f);
    uint16_t *q = k.q, *q0 = malloc(4 * 1024);
    for (int h = 0; h < 4; ++h)
        for (int dd = 0; dd < 512; ++dd) {
            uint16_t v = (uint16_t)th_rng_u32(r);
            if (dd >= 448) v = (uint16_t)((v & 0x80FF) | (0x3C00 + (v & 0x0F00))); /* finite, nonzero */
            q[h * 512 + dd] = v;
        }
    q[7] = 0x7FC1, q[512 + 100] = 0xFF80, q[1024 + 447] = 0x8000; /* NaN, -inf, -0 in NoPE dims */
    memcpy(q0, q, 4 * 1024);
    uint8_t *page_norm = malloc(37440);
    run_both_modes(t, k.d, k.a, 4 * 512, 37440, page_norm);
    for (int h = 0; h < 3; ++h) {
        for (int dd = 0; dd < 448; ++dd)
            TH_CHECK(t, q[h * 512 + dd] == q0[h * 512 + dd], "head %d dim %d = 0x%04x, input 0x%04x", h, dd,
                     q[h * 512 + dd], q0[h * 512 + dd]);
        for (int i = 0; i < 32; ++i) {
            const uint16_t wa = q0[h * 512 + 449 + 2 * i] ^ 0x8000, wb = q0[h * 512 + 448 + 2 * i];
            TH_CHECK(t, q[h * 512 + 448 + 2 * i] == wa && q[h * 512 + 449 + 2 * i] == wb,
                     "head %d pair %d = (0x%04x, 0x%04x), expected (0x%04x, 0x%04x)", h, i, q[h * 512 + 448 + 2 * i],
                     q[h * 512 + 449 + 2 * i], wa, wb);
        }
    }
    for (int dd = 0; dd < 512; ++dd) TH_CHECK(t, q[3 * 512 + dd] == 0, "padding head dim %d not zero", dd);
    TH_CHECK(t, memcmp(k.page, page_norm, 37440) == 0, "skip_q_norm changed the kv side's bytes");
    one_token_free(&k);
    free(q0), free(page_norm);
}

/* Random tokens, heads, strides and positions (some outside the table): live heads equal
 * the test's fmaf model (spec_rope_row) bit for bit, NoPE dims and gaps keep their bits,
 * padding heads are zero, and the cache equals the one of the RMS-norm mode. */
void test_kv_swa_skip_q_norm_random(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    const int64_t N = 50, Ni = 40, H = 5, Hp = 7, sh = 528, st = Hp * sh + 24, max_pos = 200;
    const kvt_geom_t g = {MC_SWA_PAGE_TOKENS, MC_PAGE_STRIDE(MC_SWA_PAGE_TOKENS), 3};
    const size_t qn = (size_t)(N * st);
    uint16_t *q = th_aligned_alloc(64, qn * 2), *q0 = malloc(qn * 2), *kv = th_aligned_alloc(64, (size_t)N * 1024);
    float *cs = make_table(r, max_pos);
    int64_t *pos = malloc((size_t)N * 8), *slots = malloc((size_t)Ni * 8);
    for (size_t i = 0; i < qn; ++i) q[i] = (uint16_t)th_rng_u32(r); /* gaps and padding heads: junk */
    for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < H; ++h) kvt_fill_row(r, (kvt_row_kind_t)((n + h) % KVT_ROW_KINDS), q + n * st + h * sh);
    for (int64_t n = 0; n < N; ++n)
        pos[n] = th_rng_range(r, 0, 9) == 0 ? th_rng_range(r, -3, 2 * max_pos) : th_rng_range(r, 0, max_pos - 1);
    kvt_fill_rows(r, kv, N, 512, KVT_ROW_KINDS, NULL);
    kvt_make_slots(r, g, Ni, 1, slots);
    memcpy(q0, q, qn * 2);
    uint8_t *cache = th_aligned_alloc(64, kvt_cache_bytes(g)), *cache_norm = malloc(kvt_cache_bytes(g));
    for (size_t b = 0; b < kvt_cache_bytes(g); ++b) cache[b] = (uint8_t)(b * 7 + 3);
    dsv4_kv_swa_write_desc_t d = {.num_tokens = N,
                                  .num_insert = Ni,
                                  .num_heads = H,
                                  .num_heads_padded = Hp,
                                  .q_stride_token = st,
                                  .q_stride_head = sh,
                                  .max_position = max_pos,
                                  .page_tokens = g.P,
                                  .page_stride_bytes = g.stride,
                                  .num_pages = g.num_pages,
                                  .eps = 0.0f,
                                  .kv_stride_row = 512};
    dsv4_kv_swa_write_args_t a = {q, kv, pos, slots, cs, cache};
    run_both_modes(t, d, a, qn, kvt_cache_bytes(g), cache_norm);
    uint16_t *want = malloc(qn * 2), row[512];
    memcpy(want, q0, qn * 2);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < Hp; ++h) {
            uint16_t *w = want + n * st + h * sh;
            if (h < H) {
                spec_rope_row(w, cs, pos[n], max_pos, row);
                memcpy(w, row, sizeof row);
            } else {
                memset(w, 0, 1024);
            }
        }
    kvt_cmp_bf16_exact(t, "skip_q_norm q vs the fmaf model (gaps included)", q, want, N, st);
    kvt_cmp_cache(t, "skip_q_norm cache vs the RMS-norm mode's", g, cache, cache_norm);
    free(q), free(q0), free(kv), free(cs), free(pos), free(slots), free(cache), free(cache_norm), free(want);
}
