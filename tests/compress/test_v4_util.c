/*
 * dsv4_compress_v4 test helpers: the random-case generator and the independent model.
 * The model walks each closing row's window with its own index arithmetic (request,
 * block table column, row in block, the half of the row), pools in double with libm's
 * exp, normalizes and rotates in double, and decodes the reference's records through the
 * format's reference decode: a wrong row, half, scale or rotation shows far outside the
 * rounding bounds below.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kv_format.h"
#include "compress/v4_plan.h"
#include "dsv4/numerics.h"
#include "test_v4.h"

enum { D = DSV4_COMPRESS_DIM, NOPE = DSV4_KV_NOPE_DIM };

/* clang-format off */
const v4t_shape_t v4t_shapes[V4T_SHAPES] = {
    {4, 3, 4, 0, 0, 0, 0, 64, 0},    /* the model's ratio-4 layout                      */
    {4, 5, 3, 4, 8, 12, 3, 5, 0},    /* odd block rows and page, padded                 */
    {4, 2, 1, 0, 0, 0, 0, 1, 0},     /* one row per block, one slot a page              */
    {128, 2, 8, 0, 0, 0, 0, 2, 0},   /* the model's ratio-128 layout                    */
    {128, 3, 5, 8, 4, 16, 1, 3, 0},  /* padded                                          */
    {4, 0, 4, 0, 0, 0, 0, 64, 0},    /* padding rows only                               */
    {4, 3, 4, 0, 0, 0, 0, 64, 128},  /* the indexer's compressor in the model's layout  */
    {4, 4, 3, 4, 8, 12, 2, 7, 128},  /* padded                                          */
    {128, 2, 8, 4, 0, 4, 0, 3, 128}, /* ratio 128 into indexer states                   */
};
/* clang-format on */

static void *zalloc(size_t bytes) {
    void *p = th_aligned_alloc(64, bytes ? bytes : 64);
    memset(p, 0, bytes ? bytes : 64);
    return p;
}

static int64_t coff(int64_t ratio) { return ratio == 4 ? 2 : 1; }
static int64_t head_of(const dsv4_compress_v4_desc_t *d) { return d->head_dim == 128 ? 128 : 512; }
static int closes(int64_t pos, int64_t r) { return ((pos % r) + r) % r == r - 1; }

/* A row of `width` kv values (normal, scaled by 2^-4 .. 2^4), then `width` scores in
 * [-8, 8]; the padding after it NaN, so that a read of it shows. */
static void fill_row(th_rng_t *r, float *row, int64_t width, int64_t stride) {
    for (int64_t i = 0; i < width; ++i) row[i] = (float)(th_rng_normal(r) * ldexp(1.0, (int)th_rng_range(r, -4, 4)));
    for (int64_t i = width; i < 2 * width; ++i) row[i] = (float)(16.0 * th_rng_unit(r) - 8.0);
    for (int64_t i = 2 * width; i < stride; ++i) row[i] = NAN;
}

void v4t_case(th_rng_t *r, const v4t_shape_t *s, v4t_case_t *c) {
    memset(c, 0, sizeof *c);
    dsv4_compress_v4_desc_t *d = &c->d;
    const int64_t ratio = s->ratio, N = s->head_dim == 128 ? 128 : 512, width = coff(ratio) * N;
    const int64_t B = s->block_rows, R = s->num_reqs;
    const int64_t maxlen = ratio == 4 ? 29 : 300, maxp0 = ratio == 4 ? 40 : 400;
    int64_t len[8] = {0}, p0[8] = {0}, cols[8] = {0}, T = th_rng_range(r, 1, 3), max_blocks = 1, used = 0, pmax = 0;
    for (int64_t b = 0; b < R; ++b) {
        len[b] = th_rng_range(r, 0, 6) ? th_rng_range(r, 1, maxlen) : 0;
        p0[b] = th_rng_range(r, 0, maxp0);
        const int64_t last = p0[b] + (len[b] ? len[b] - 1 : 0);
        cols[b] = last / B + 1;
        T += len[b], used += cols[b];
        max_blocks = cols[b] + 1 > max_blocks ? cols[b] + 1 : max_blocks;
        pmax = last > pmax ? last : pmax;
    }
    d->num_tokens = T, d->ratio = ratio, d->head_dim = s->head_dim, d->eps = 1e-6f;
    d->kv_stride = 2 * width + s->kv_pad;
    d->state_block_rows = B, d->state_blocks = used + 3;
    d->state_stride_row = 2 * width + s->row_pad, d->state_stride_block = B * d->state_stride_row + s->block_pad;
    d->num_reqs = R, d->max_blocks = max_blocks, d->block_table_stride = max_blocks + s->bt_pad;
    d->max_position = th_rng_range(r, 0, 3) ? pmax + 1 : 1 + th_rng_range(r, 0, pmax); /* some pass the table */

    c->kv_elems = (size_t)(T * d->kv_stride);
    c->kv = zalloc(c->kv_elems * 4);
    for (int64_t t = 0; t < T; ++t) fill_row(r, c->kv + t * d->kv_stride, width, d->kv_stride);
    c->ape = zalloc((size_t)(ratio * width) * 4);
    for (int64_t i = 0; i < ratio * width; ++i) c->ape[i] = (float)(2.0 * th_rng_unit(r) - 1.0);
    c->state_elems = (size_t)(d->state_blocks * d->state_stride_block);
    c->state = zalloc(c->state_elems * 4);
    for (size_t i = 0; i < c->state_elems; ++i) c->state[i] = NAN;
    for (int64_t k = 0; k < d->state_blocks; ++k)
        for (int64_t q = 0; q < B; ++q)
            fill_row(r, c->state + k * d->state_stride_block + q * d->state_stride_row, width, d->state_stride_row);
    c->gamma = zalloc((size_t)N * 2);
    for (int i = 0; i < N; ++i)
        c->gamma[i] = th_rng_range(r, 0, 31) ? dsv4_f32_to_bf16((float)th_rng_normal(r)) : (uint16_t)0;
    c->cs_elems = (size_t)(d->max_position * 64);
    c->cos_sin = zalloc(c->cs_elems * 4);
    for (int64_t p = 0; p < d->max_position; ++p)
        for (int i = 0; i < 32; ++i) {
            const double a = 6.283185307179586 * th_rng_unit(r);
            c->cos_sin[p * 64 + i] = (float)cos(a), c->cos_sin[p * 64 + 32 + i] = (float)sin(a);
        }

    /* block table: distinct blocks per (request, column), a few entries invalid */
    c->bt_elems = (size_t)((R ? R : 1) * d->block_table_stride);
    c->block_table = zalloc(c->bt_elems * 4);
    int32_t *perm = malloc((size_t)d->state_blocks * 4);
    for (int64_t k = 0; k < d->state_blocks; ++k) perm[k] = (int32_t)k;
    th_rng_shuffle_i32(r, perm, d->state_blocks);
    for (int64_t b = 0, next = 0; b < R; ++b)
        for (int64_t j = 0; j < d->block_table_stride; ++j) {
            int32_t v = j < cols[b] ? perm[next++] : (int32_t)th_rng_range(r, -2, d->state_blocks + 2);
            if (th_rng_range(r, 0, 39) == 0) v = th_rng_range(r, 0, 1) ? -1 : (int32_t)(d->state_blocks + 1);
            c->block_table[b * d->block_table_stride + j] = v;
        }
    free(perm);

    c->pos = zalloc((size_t)T * 8), c->state_slot = zalloc((size_t)T * 8), c->slot = zalloc((size_t)T * 8);
    c->req = zalloc((size_t)T * 4);
    int64_t t = 0, closing = 0;
    for (int64_t b = 0; b < R; ++b)
        for (int64_t i = 0; i < len[b]; ++i, ++t) {
            const int64_t pos = p0[b] + i, blk = c->block_table[b * d->block_table_stride + pos / B];
            c->pos[t] = pos, c->req[t] = (int32_t)b;
            c->state_slot[t] = blk >= 0 && blk < d->state_blocks && th_rng_range(r, 0, 15) ? blk * B + pos % B : -1;
        }
    const int64_t tpad = t;
    for (int64_t k = 0; t < T; ++t, ++k) { /* padding: the first at position -1 */
        c->pos[t] = k ? th_rng_range(r, -1, 50) : -1;
        c->req[t] = (int32_t)th_rng_range(r, -1, R + 1);
        c->state_slot[t] = -1;
    }
    for (t = 0; t < T; ++t) closing += closes(c->pos[t], ratio);
    const int64_t P = s->page_tokens;
    d->page_tokens = P, d->num_pages = (closing + 2) / P + 1;
    const int64_t state_bytes = N == 128 ? DSV4_INDEXER_STATE_BYTES : DSV4_KV_RECORD_BYTES;
    d->page_stride_bytes = (P * state_bytes + 15) / 16 * 16 + (s->row_pad ? 16 : 0);
    int32_t *slots = malloc((size_t)(d->num_pages * P) * 4);
    for (int64_t k = 0; k < d->num_pages * P; ++k) slots[k] = (int32_t)k;
    th_rng_shuffle_i32(r, slots, d->num_pages * P);
    for (int64_t next = 0, k = 0; k < T; ++k) {
        const int pad = k == tpad; /* the row at position -1 always writes */
        if (!closes(c->pos[k], ratio)) c->slot[k] = th_rng_range(r, -1, d->num_pages * P - 1); /* never written */
        else if (!pad && th_rng_range(r, 0, 9) == 0) c->slot[k] = -1;
        else if (!pad && th_rng_range(r, 0, 19) == 0) c->slot[k] = d->num_pages * P + th_rng_range(r, 0, 3);
        else c->slot[k] = slots[next++];
    }
    free(slots);
    c->cache_bytes = (size_t)(d->num_pages * d->page_stride_bytes);
    c->cache = zalloc(c->cache_bytes);
    memset(c->cache, V4T_POISON, c->cache_bytes);
}

void v4t_case_free(v4t_case_t *c) {
    free(c->kv), free(c->ape), free(c->state), free(c->cos_sin), free(c->pos), free(c->state_slot), free(c->slot);
    free(c->req), free(c->block_table), free(c->gamma), free(c->cache);
    memset(c, 0, sizeof *c);
}

dsv4_compress_v4_args_t v4t_args(const v4t_case_t *c, float *state, uint8_t *cache) {
    const dsv4_compress_v4_args_t a = {.kv_score = c->kv,
                                       .ape = c->ape,
                                       .positions = c->pos,
                                       .state_slot = c->state_slot,
                                       .req_idx = c->req,
                                       .block_table = c->block_table,
                                       .gamma = c->gamma,
                                       .cos_sin_cache = c->cos_sin,
                                       .slot_mapping = c->slot,
                                       .state = state,
                                       .cache = cache};
    return a;
}

void v4t_name(char *buf, size_t n, const char *where, const v4t_shape_t *s) {
    snprintf(buf, n, "compress_v4 %s r=%lld N=%lld R=%lld B=%lld pads %lld/%lld/%lld/%lld P=%lld", where,
             (long long)s->ratio, (long long)(s->head_dim == 128 ? 128 : 512), (long long)s->num_reqs,
             (long long)s->block_rows, (long long)s->kv_pad, (long long)s->row_pad, (long long)s->block_pad,
             (long long)s->bt_pad, (long long)s->page_tokens);
}

void v4t_model_state(const v4t_case_t *c, float *state) {
    const dsv4_compress_v4_desc_t *d = &c->d;
    const int64_t width = coff(d->ratio) * head_of(d), B = d->state_block_rows;
    memcpy(state, c->state, c->state_elems * 4);
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        const int64_t pos = c->pos[t], s = c->state_slot[t];
        if (pos < 0 || s < 0 || s >= d->state_blocks * B) continue;
        float *row = state + (s / B) * d->state_stride_block + (s % B) * d->state_stride_row;
        for (int64_t i = 0; i < width; ++i) {
            row[i] = c->kv[t * d->kv_stride + i];
            row[width + i] = c->kv[t * d->kv_stride + width + i] + c->ape[(pos % d->ratio) * width + i];
        }
    }
}

/* The model's window of closing row t: element offsets of its rows (with the half), -1
 * where not readable. */
static void model_window(const v4t_case_t *c, int64_t t, int64_t *off) {
    const dsv4_compress_v4_desc_t *d = &c->d;
    const int64_t W = coff(d->ratio) * d->ratio, B = d->state_block_rows, b = c->req[t], N = head_of(d);
    for (int64_t j = 0; j < W; ++j) {
        const int64_t q = c->pos[t] - W + 1 + j;
        off[j] = -1;
        if (q < 0 || b < 0 || b >= d->num_reqs || q / B >= d->max_blocks) continue;
        const int64_t blk = c->block_table[b * d->block_table_stride + q / B];
        if (blk < 0 || blk >= d->state_blocks) continue;
        off[j] = blk * d->state_stride_block + (q % B) * d->state_stride_row + (j >= d->ratio ? N : 0);
    }
}

/* The written values of closing row t's output as doubles, with the scale of each dim's
 * block (0 where the dim is stored as bf16): N = 512 the record's bf16 row through the
 * format's reference decode; N = 128 the indexer state's codes times its fp32 scale.
 * Marks the output's bytes in mask. */
static void decode_out(const v4t_case_t *c, int64_t slot, const uint8_t *cache, uint8_t *mask, double *dec,
                       double *scale) {
    const dsv4_compress_v4_desc_t *d = &c->d;
    const int64_t P = d->page_tokens, q = slot % P;
    if (head_of(d) == 512) {
        const int64_t dat = kv_data_offset(slot / P, q, d->page_stride_bytes);
        const int64_t sc = kv_scale_offset(slot / P, q, P, d->page_stride_bytes);
        memset(mask + dat, 1, DSV4_KV_DATA_BYTES), memset(mask + sc, 1, DSV4_KV_SCALE_BYTES);
        uint16_t y[D];
        kv_record_decode(cache + dat, cache + sc, y);
        for (int i = 0; i < D; ++i)
            dec[i] = dsv4_bf16_to_f32(y[i]), scale[i] = i < NOPE ? ldexp(1.0, cache[sc + i / 64] - 127) : 0.0;
        scale[D] = cache[sc + 7]; /* the pad byte, for the caller */
        return;
    }
    const uint8_t *page = cache + slot / P * d->page_stride_bytes;
    const int64_t sc = slot / P * d->page_stride_bytes + P * 128 + q * 4;
    memset(mask + (page - cache) + q * 128, 1, 128), memset(mask + sc, 1, 4);
    float s;
    memcpy(&s, cache + sc, 4);
    for (int i = 0; i < 128; ++i) dec[i] = dsv4_e4m3_to_f32(page[q * 128 + i]) * (double)s, scale[i] = s;
    scale[D] = 0.0;
}

/* One closing row against the model; returns mismatches (the first few reported). */
static size_t check_row(th_ctx_t *t, const char *what, const v4t_case_t *c, const float *state, int64_t row,
                        const uint8_t *cache, uint8_t *mask) {
    const dsv4_compress_v4_desc_t *d = &c->d;
    const int64_t N = head_of(d), W = coff(d->ratio) * d->ratio, width = coff(d->ratio) * N, rope0 = N - 64;
    int64_t off[128] = {0};
    double x[D], bx[D], ssq = 0, bsq = 0, dec[D], scale[D + 1];
    float xr[D];
    size_t bad = 0;
    model_window(c, row, off);
    v4_ref_pool(state, off, W, width, N, xr);
    for (int i = 0; i < N; ++i) {
        double m = -INFINITY, num = 0, den = 0, mk = 0;
        for (int64_t j = 0; j < W; ++j)
            if (off[j] >= 0) m = fmax(m, state[off[j] + width + i]);
        for (int64_t j = 0; j < W && m > -INFINITY; ++j) {
            if (off[j] < 0) continue;
            const double e = exp(state[off[j] + width + i] - m), kv = state[off[j] + i];
            num += kv * e, den += e, mk = fmax(mk, fabs(kv));
        }
        x[i] = m > -INFINITY ? num / den : 0.0;
        bx[i] = (double)W * 0x1p-22 * mk + 1e-38;
        ssq += x[i] * x[i], bsq += bx[i] * bx[i];
        if (!(fabs(xr[i] - x[i]) <= bx[i]) && bad++ < 4)
            th_fail(t, __FILE__, __LINE__, "%s: row %lld dim %d: pooled %.9g, model %.12g +- %.3g", what,
                    (long long)row, i, (double)xr[i], x[i], bx[i]);
    }
    const double rr = 1.0 / sqrt(ssq / (double)N + (double)d->eps);
    const double rel_rr = sqrt(bsq) / (sqrt(ssq) + 1e-300) + 0x1p-20;
    double n[D], en[D];
    for (int i = 0; i < N; ++i) {
        const double g = dsv4_bf16_to_f32(c->gamma[i]);
        n[i] = x[i] * rr * g;
        en[i] = fabs(g) * rr * (bx[i] + fabs(x[i]) * rel_rr) + fabs(n[i]) * 0x1p-21;
    }
    decode_out(c, c->slot[row], cache, mask, dec, scale);
    for (int i = 0; i < N && bad < 8; ++i) {
        double want = n[i], tol = en[i] + 0x1p-8 * fabs(n[i]);
        if (i >= rope0) {
            const int pr = (int)(i - rope0) / 2, ia = (int)rope0 + 2 * pr;
            const int64_t first = c->pos[row] + 1 - d->ratio;
            const int in = first >= 0 && first < d->max_position;
            const double cs = in ? c->cos_sin[first * 64 + pr] : 1.0, sn = in ? c->cos_sin[first * 64 + 32 + pr] : 0.0;
            const double a = n[ia], b = n[ia + 1];
            want = i == ia ? a * cs - b * sn : b * cs + a * sn;
            tol = 0x1p-7 * fabs(want) + (fabs(cs) + fabs(sn)) * fmax(en[ia], en[ia + 1]) +
                  0x1p-22 * (fabs(a) + fabs(b)) + 1e-38;
        }
        if (scale[i] > 0) /* quantized: half an e4m3 step, relative or subnormal */
            tol += 0x1p-4 * (fabs(want) + tol) + 0x1p-10 * scale[i];
        if (!(fabs(dec[i] - want) <= tol) && bad++ < 4)
            th_fail(t, __FILE__, __LINE__, "%s: row %lld dim %d: stored %.9g, model %.9g +- %.3g", what, (long long)row,
                    i, dec[i], want, tol);
    }
    if (scale[D] != 0 && bad++ < 4)
        th_fail(t, __FILE__, __LINE__, "%s: row %lld: pad byte 0x%02x", what, (long long)row, (unsigned)scale[D]);
    return bad;
}

size_t v4t_check(th_ctx_t *t, const char *what, const v4t_case_t *c, const float *state, const uint8_t *cache) {
    const dsv4_compress_v4_desc_t *d = &c->d;
    float *want_state = zalloc(c->state_elems * 4);
    uint8_t *mask = zalloc(c->cache_bytes); /* bytes some output owns */
    v4t_model_state(c, want_state);
    char w[200];
    snprintf(w, sizeof w, "%s: state", what);
    size_t bad = th_cmp_bytes(t, w, state, want_state, c->state_elems * 4);
    for (int64_t row = 0; row < d->num_tokens; ++row) {
        const int64_t slot = c->slot[row];
        if (!closes(c->pos[row], d->ratio) || slot < 0 || slot >= d->num_pages * d->page_tokens) continue;
        bad += check_row(t, what, c, want_state, row, cache, mask);
    }
    size_t stray = 0;
    for (size_t i = 0; i < c->cache_bytes; ++i) stray += !mask[i] && cache[i] != V4T_POISON;
    if (stray) th_fail(t, __FILE__, __LINE__, "%s: %zu cache bytes outside the records changed", what, stray);
    free(want_state), free(mask);
    return bad + stray;
}
