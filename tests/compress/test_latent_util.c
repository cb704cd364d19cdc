/*
 * dsv4_compress test helpers: the random-case generator and the independent model. The
 * model follows the header's formulas in double arithmetic with its own request walk
 * (per request, first row by query_start_loc, ring row by block and position), not the
 * library's index functions; its answer is a double per element with the contract's
 * bound, plus the ring after the call, copied row by row.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "test_latent.h"

enum { D = DSV4_COMPRESS_DIM };

static void *zalloc(size_t bytes) {
    void *p = th_aligned_alloc(64, bytes ? bytes : 64);
    memset(p, 0, bytes ? bytes : 64);
    return p;
}

/* A kv value: normal, scaled by 2^k with k in [-4, 4]. */
static float kv_value(th_rng_t *r) { return (float)(th_rng_normal(r) * ldexp(1.0, (int)th_rng_range(r, -4, 4))); }

/* One kv_score row: kv, then scores in [-8, 8] (some equal to prev's, when given). */
static void fill_row(th_rng_t *r, float *row, int64_t width, const float *prev) {
    for (int64_t i = 0; i < D; ++i) row[i] = kv_value(r);
    for (int64_t i = D; i < width; ++i)
        row[i] = prev && th_rng_range(r, 0, 7) == 0 ? prev[i] : (float)(16.0 * th_rng_unit(r) - 8.0);
}

void lt_case(th_rng_t *r, const lt_shape_t *s, lt_case_t *c) {
    memset(c, 0, sizeof *c);
    const int64_t ratio = s->ratio, width = D * ratio;
    dsv4_compress_desc_t *d = &c->d;
    d->ratio = ratio;
    d->eps = 1e-6f;
    const int64_t ks = s->kv_stride ? s->kv_stride : width; /* a shape's 0: dense */
    d->kv_stride = ks;
    int64_t T = s->num_tokens;
    int64_t *len = NULL;
    if (ratio == 2) {
        const int64_t R = s->num_reqs, cap = s->ring_cap;
        len = malloc((size_t)(R ? R : 1) * sizeof *len);
        T = th_rng_range(r, 0, 3); /* padding rows after the last request */
        for (int64_t b = 0; b < R; ++b) T += len[b] = th_rng_range(r, 0, 5) ? th_rng_range(r, 1, 2 * cap + 3) : 0;
        d->num_reqs = R;
        d->ring_cap = cap;
        d->ring_rows = (R + 2) * cap; /* block 0 is the null block; one spare */
        d->ring_stride = s->ring_stride ? s->ring_stride : 2 * D;
    }
    d->num_tokens = T;
    c->kv_elems = (size_t)((T ? T : 1) * ks);
    c->kv = zalloc(c->kv_elems * 4);
    for (size_t i = 0; i < c->kv_elems; ++i) c->kv[i] = NAN; /* gaps: a read of one shows as NaN */
    for (int64_t t = 0; t < T; ++t) fill_row(r, c->kv + t * ks, width, t ? c->kv + (t - 1) * ks : NULL);
    c->pos = zalloc((size_t)(T ? T : 1) * 8);
    c->slot = zalloc((size_t)(T ? T : 1) * 8);
    c->gamma = zalloc(D * 2);
    for (int i = 0; i < D; ++i)
        c->gamma[i] = th_rng_range(r, 0, 31) ? dsv4_f32_to_bf16((float)th_rng_normal(r)) : (uint16_t)0;
    if (ratio == 1) {
        for (int64_t t = 0; t < T; ++t) {
            c->pos[t] = t;
            c->slot[t] = th_rng_range(r, 0, 5) ? th_rng_range(r, 0, 1 << 20) : -1;
        }
        return;
    }
    const int64_t R = d->num_reqs, cap = d->ring_cap, rs = d->ring_stride ? d->ring_stride : 2 * D;
    c->qsl_elems = (size_t)(R + 1);
    c->qsl = zalloc(c->qsl_elems * 4);
    c->ring_elems = (size_t)(d->ring_rows * rs);
    c->ring = zalloc(c->ring_elems * 4);
    for (size_t i = 0; i < c->ring_elems; ++i) c->ring[i] = NAN;
    for (int64_t row = 0; row < d->ring_rows; ++row) fill_row(r, c->ring + row * rs, 2 * D, NULL);
    int64_t t = 0;
    for (int64_t b = 0; b < R; ++b) {
        const int64_t p0 = th_rng_range(r, 0, 40), blk = th_rng_range(r, 0, 7) ? b + 1 : 0;
        c->qsl[b] = (int32_t)t;
        for (int64_t i = 0; i < len[b]; ++i, ++t) {
            c->pos[t] = p0 + i;
            c->slot[t] = blk && th_rng_range(r, 0, 15) ? blk * cap + (p0 + i) % cap : -1;
        }
    }
    c->qsl[R] = (int32_t)t;
    for (; t < T; ++t) c->pos[t] = th_rng_range(r, 0, 9), c->slot[t] = -1; /* padding */
    free(len);
}

void lt_case_free(lt_case_t *c) {
    free(c->kv), free(c->ring), free(c->pos), free(c->slot), free(c->qsl), free(c->gamma);
    memset(c, 0, sizeof *c);
}

dsv4_compress_args_t lt_args(const lt_case_t *c, float *ring, uint16_t *latent) {
    dsv4_compress_args_t a = {.kv_score = c->kv, .gamma = c->gamma, .latent = latent};
    if (c->d.ratio == 1) a.slot = c->slot;
    else a.positions = c->pos, a.ring_slot = c->slot, a.query_start_loc = c->qsl, a.ring = ring;
    return a;
}

/* The spacing of bf16 values at |v| (the smallest subnormal step below 2^-126). */
static double ulp_bf16(double v) {
    int e;
    if (fabs(v) < 0x1p-126) return 0x1p-133;
    frexp(v, &e);
    return ldexp(1.0, e - 8);
}

/* One latent row of the model from rows P and Q (P = Q at ratio 1). */
static void model_row(const lt_case_t *c, const float *p, const float *q, double *ref, double *bound) {
    double x[D], ssq = 0;
    for (int i = 0; i < D; ++i) {
        if (c->d.ratio == 1) {
            x[i] = q[i];
        } else {
            const double sp = p[D + i], sq = q[D + i], m = sp > sq ? sp : sq;
            const double ep = exp(sp - m), eq = exp(sq - m);
            x[i] = ((double)p[i] * ep + (double)q[i] * eq) / (ep + eq);
        }
        ssq += x[i] * x[i];
    }
    const double rr = 1.0 / sqrt(ssq / D + (double)c->d.eps);
    for (int i = 0; i < D; ++i) {
        const double g = dsv4_bf16_to_f32(c->gamma[i]), mx = fmax(fabs(p[i]), fabs(q[i]));
        ref[i] = x[i] * rr * g;
        bound[i] = ulp_bf16(ref[i]) + 0x1p-20 * rr * fabs(g) * mx;
    }
}

void lt_model(const lt_case_t *c, lt_model_t *m) {
    const dsv4_compress_desc_t *d = &c->d;
    const int64_t T = d->num_tokens, ks = d->kv_stride ? d->kv_stride : D * d->ratio;
    m->has = zalloc((size_t)(T ? T : 1));
    m->ref = zalloc((size_t)(T ? T : 1) * D * 8);
    m->bound = zalloc((size_t)(T ? T : 1) * D * 8);
    m->ring_after = NULL;
    if (d->ratio == 1) {
        for (int64_t t = 0; t < T; ++t)
            if ((m->has[t] = c->slot[t] >= 0))
                model_row(c, c->kv + t * ks, c->kv + t * ks, m->ref + t * D, m->bound + t * D);
        return;
    }
    const int64_t cap = d->ring_cap, rs = d->ring_stride ? d->ring_stride : 2 * D;
    m->ring_after = zalloc(c->ring_elems * 4);
    memcpy(m->ring_after, c->ring, c->ring_elems * 4);
    for (int64_t b = 0; b < d->num_reqs; ++b) {
        const int64_t q0 = c->qsl[b], q1 = c->qsl[b + 1];
        for (int64_t t = q0; t < q1; ++t) {
            const int64_t pos = c->pos[t], slot = c->slot[t];
            if (pos % 2 != 1 || slot < 0 || slot >= d->ring_rows) continue;
            const float *p = t > q0 ? c->kv + (t - 1) * ks : c->ring + ((slot / cap) * cap + (pos - 1) % cap) * rs;
            m->has[t] = 1;
            model_row(c, p, c->kv + t * ks, m->ref + t * D, m->bound + t * D);
        }
        for (int64_t t = q1 - cap > q0 ? q1 - cap : q0; t < q1; ++t) /* stores, after the reads */
            if (c->slot[t] >= 0) memcpy(m->ring_after + c->slot[t] * rs, c->kv + t * ks, 2 * D * 4);
    }
}

void lt_model_free(lt_model_t *m) {
    free(m->has), free(m->ref), free(m->bound), free(m->ring_after);
    memset(m, 0, sizeof *m);
}

size_t lt_check(th_ctx_t *t, const char *what, const lt_case_t *c, const lt_model_t *m, const uint16_t *latent,
                const float *ring) {
    size_t bad = 0;
    for (int64_t row = 0; row < c->d.num_tokens; ++row)
        for (int i = 0; i < D; ++i) {
            const uint16_t y = latent[row * D + i];
            const double got = dsv4_bf16_to_f32(y), ref = m->ref[row * D + i];
            int ok;
            if (!m->has[row]) ok = y == LT_POISON;
            else if (isnan(ref)) ok = isnan(got);
            else ok = !isnan(got) && fabs(got - ref) <= m->bound[row * D + i];
            if (!ok && bad++ < 6)
                th_fail(t, __FILE__, __LINE__, "%s: row %lld dim %d: 0x%04x (%.9g), want %s %.9g +- %.3g", what,
                        (long long)row, i, y, got, m->has[row] ? "" : "poison", m->has[row] ? ref : 0.0,
                        m->has[row] ? m->bound[row * D + i] : 0.0);
        }
    if (ring && c->d.ratio == 2) {
        char w[160];
        snprintf(w, sizeof w, "%s: ring", what);
        bad += th_cmp_bytes(t, w, ring, m->ring_after, c->ring_elems * 4);
    }
    if (bad > 6) th_fail(t, __FILE__, __LINE__, "%s: %zu mismatches in all", what, bad);
    return bad;
}

void lt_name(char *buf, size_t n, const char *where, const lt_shape_t *s) {
    snprintf(buf, n, "compress %s r=%lld T=%lld R=%lld cap=%lld strides %lld/%lld", where, (long long)s->ratio,
             (long long)s->num_tokens, (long long)s->num_reqs, (long long)s->ring_cap, (long long)s->kv_stride,
             (long long)s->ring_stride);
}
