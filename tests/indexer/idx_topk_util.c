/*
 * Helpers of the logits + top-k tests: a random paged problem (requests with their own
 * context lengths, decode rows with mixed next_n, prefill runs, padding rows), an
 * independent fp64 model of the logit with its absolute mass, and an independent model of
 * the selection (a full sort under a float comparator, not the library's order key).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "test_indexer.h"

static uint8_t k_code(th_rng_t *r) {
    uint8_t b;
    do b = (uint8_t)th_rng_u32(r);
    while ((b & 0x7F) == 0x7F);
    return b;
}

void it_topk_case(th_rng_t *r, const it_topk_shape_t *sh, it_topk_case_t *c) {
    memset(c, 0, sizeof *c);
    const int64_t H = sh->heads, P = sh->page_tokens, R = sh->reqs;
    int64_t *n_req = calloc((size_t)R, 8), pages = 0, max_n = 1;
    for (int64_t b = 0; b < R; ++b) {
        n_req[b] = th_rng_range(r, sh->ctx_min, sh->ctx_max);
        pages += (n_req[b] + P - 1) / P;
        max_n = n_req[b] > max_n ? n_req[b] : max_n;
    }
    pages += 2;
    const int64_t width = (max_n + P - 1) / P + 1;
    /* rows: per request 1..next_n decode rows, then one prefill run, then padding rows */
    int64_t T = 0, cap_rows = R * (sh->next_n + sh->prefill_rows) + sh->pad_rows;
    c->pos = th_aligned_alloc(64, (size_t)cap_rows * 8 + 8);
    c->req = th_aligned_alloc(64, (size_t)cap_rows * 4 + 4);
    c->valid = th_aligned_alloc(64, (size_t)cap_rows + 1);
    for (int64_t b = 0; b < R; ++b) {
        const int64_t nn = th_rng_range(r, 1, sh->next_n), last = n_req[b] * sh->ratio + sh->ratio - 2;
        for (int64_t i = 0; i < nn; ++i, ++T) /* the last row closes n_req[b] states */
            c->pos[T] = last - (nn - 1 - i), c->req[T] = (int32_t)b, c->valid[T] = 1;
    }
    for (int64_t i = 0; i < sh->prefill_rows * R; ++i, ++T) {
        const int64_t b = th_rng_range(r, 0, R - 1), last = n_req[b] * sh->ratio + sh->ratio - 2;
        c->pos[T] = th_rng_range(r, -1, last), c->req[T] = (int32_t)b, c->valid[T] = 1;
    }
    for (int64_t i = 0; i < sh->pad_rows; ++i, ++T) {
        const int64_t kind = th_rng_range(r, 0, 2);
        c->pos[T] = th_rng_range(r, 0, max_n), c->req[T] = (int32_t)th_rng_range(r, 0, R - 1), c->valid[T] = 1;
        if (kind == 0) c->valid[T] = 0;
        if (kind == 1) c->req[T] = th_rng_range(r, 0, 1) ? -1 : (int32_t)R;
        if (kind == 2) c->pos[T] = -th_rng_range(r, 1, 5);
    }
    free(n_req);
    c->d = (dsv4_indexer_topk_desc_t){.num_rows = T,
                                      .num_heads = H,
                                      .topk = sh->topk,
                                      .ratio = sh->ratio,
                                      .num_reqs = R,
                                      .block_table_width = width,
                                      .block_table_stride = width + sh->bt_pad,
                                      .page_tokens = P,
                                      .page_stride_bytes = sh->page_stride ? sh->page_stride : P * 132,
                                      .num_pages = pages,
                                      .max_keys = max_n + sh->keys_pad,
                                      .candidate_mode = sh->mode,
                                      .topk_stride = sh->topk,
                                      .candidate_count = sh->cand_count,
                                      .candidate_stride = sh->cand_count ? sh->cand_count : 2048,
                                      .num_splits = sh->splits};
    /* block table: a random permutation of the pages; unused entries -1 or out of range */
    c->bt_elems = (size_t)(R * c->d.block_table_stride);
    c->bt = th_aligned_alloc(64, c->bt_elems * 4);
    int32_t *perm = malloc((size_t)pages * 4);
    for (int64_t i = 0; i < pages; ++i) perm[i] = (int32_t)i;
    th_rng_shuffle_i32(r, perm, pages);
    int64_t next = 0;
    for (size_t i = 0; i < c->bt_elems; ++i) c->bt[i] = th_rng_range(r, 0, 1) ? -1 : (int32_t)(pages + 7);
    for (int64_t b = 0; b < R; ++b)
        for (int64_t e = 0; e < width && next < pages; ++e) c->bt[b * c->d.block_table_stride + e] = perm[next++];
    if (sh->bad_page && R > 0) c->bt[th_rng_range(r, 0, R - 1) * c->d.block_table_stride] = (int32_t)(pages + 3);
    free(perm);
    /* cache: random codes (never 0x7F/0xFF unless specials), scales 2^-12 .. 2^3 */
    c->cache_bytes = (size_t)(pages * c->d.page_stride_bytes);
    c->cache = th_aligned_alloc(256, c->cache_bytes);
    uint8_t pool[4][128];
    for (int i = 0; i < 4 * 128; ++i) pool[i / 128][i % 128] = k_code(r);
    for (int64_t p = 0; p < pages; ++p) {
        uint8_t *page = c->cache + p * c->d.page_stride_bytes;
        for (int64_t i = 0; i < P * 128; ++i) page[i] = sh->ties ? pool[((i / 128) % 4) ^ (p & 1)][i % 128] : k_code(r);
        for (int64_t q = 0; q < P; ++q) {
            const uint32_t bits = (uint32_t)(127 + (sh->ties ? -3 : th_rng_range(r, -12, 3))) << 23;
            memcpy(page + P * 128 + q * 4, &bits, 4);
        }
        if (sh->specials && th_rng_range(r, 0, 3) == 0) page[th_rng_range(r, 0, P * 128 - 1)] = 0x7F; /* a NaN key */
    }
    c->q8_bytes = (size_t)(T * H * 128);
    c->q8 = th_aligned_alloc(64, c->q8_bytes + 16);
    c->w = th_aligned_alloc(64, (size_t)(T * H) * 4 + 4);
    for (size_t i = 0; i < c->q8_bytes; ++i) c->q8[i] = k_code(r);
    for (int64_t i = 0; i < T * H; ++i)
        c->w[i] = th_rng_range(r, 0, 30) ? (float)th_rng_logmag(r, -12, -4) : 0.0f;        /* signed, some zero */
    if (sh->specials && T > 0) c->q8[th_rng_range(r, 0, (int64_t)c->q8_bytes - 1)] = 0xFF; /* a NaN head */
    for (int64_t t = 0; sh->ties && t < T; t += 3) memset(c->w + t * H, 0, (size_t)H * 4); /* all-zero logits */
    c->cand_elems = (size_t)(T * (sh->cand_count ? sh->cand_count : 2048));
    c->cand = th_aligned_alloc(64, c->cand_elems * 4 + 4);
    for (size_t i = 0; i < c->cand_elems; ++i) c->cand[i] = -7;
}

void it_topk_case_free(it_topk_case_t *c) {
    free(c->q8), free(c->w), free(c->pos), free(c->req), free(c->valid), free(c->bt), free(c->cache), free(c->cand);
}

dsv4_indexer_topk_args_t it_topk_args(const it_topk_case_t *c, int32_t *topk, int32_t *cand) {
    return (dsv4_indexer_topk_args_t){c->q8, c->w, c->pos, c->req, c->valid, c->bt, c->cache, topk, cand};
}

dsv4_indexer_logits_desc_t it_logits_desc(const dsv4_indexer_topk_desc_t *d, int64_t out_cols) {
    return (dsv4_indexer_logits_desc_t){.num_rows = d->num_rows,
                                        .num_heads = d->num_heads,
                                        .ratio = d->ratio,
                                        .num_reqs = d->num_reqs,
                                        .block_table_width = d->block_table_width,
                                        .block_table_stride = d->block_table_stride,
                                        .page_tokens = d->page_tokens,
                                        .page_stride_bytes = d->page_stride_bytes,
                                        .num_pages = d->num_pages,
                                        .max_keys = d->max_keys,
                                        .out_cols = out_cols,
                                        .out_stride = (out_cols + 3) / 4 * 4};
}

/* ---- the fp64 model ----------------------------------------------------------------------- */
int64_t it_model_cols(const it_topk_case_t *c, int64_t t) {
    const dsv4_indexer_topk_desc_t *d = &c->d;
    if (!c->valid[t] || c->req[t] < 0 || c->req[t] >= d->num_reqs || c->pos[t] < 0) return 0;
    int64_t n = (c->pos[t] + 1) / d->ratio;
    if (n > d->max_keys) n = d->max_keys;
    if (n > d->block_table_width * d->page_tokens) n = d->block_table_width * d->page_tokens;
    return n;
}

static double e4m3_exact(uint8_t b) {
    if ((b & 0x7F) == 0x7F) return NAN;
    const int e = (b >> 3) & 15, m = b & 7;
    const double v = e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return b & 0x80 ? -v : v;
}

double it_model_logit(const it_topk_case_t *c, int64_t t, int64_t j, double *mass) {
    const dsv4_indexer_topk_desc_t *d = &c->d;
    const int64_t P = d->page_tokens, H = d->num_heads;
    const int32_t page = c->bt[c->req[t] * d->block_table_stride + j / P];
    *mass = 0.0;
    if (page < 0 || page >= d->num_pages) return -INFINITY;
    const uint8_t *base = c->cache + page * d->page_stride_bytes, *k = base + j % P * 128;
    uint32_t sb;
    memcpy(&sb, base + P * 128 + j % P * 4, 4);
    const double sk = ldexp(1.0, (int)(sb >> 23) - 127);
    double sum = 0.0, m = 0.0;
    for (int64_t h = 0; h < H; ++h) {
        double dot = 0.0, ad = 0.0;
        for (int i = 0; i < 128; ++i) {
            const double p = e4m3_exact(c->q8[(t * H + h) * 128 + i]) * e4m3_exact(k[i]);
            dot += p, ad += fabs(p);
        }
        const double wv = c->w[t * H + h];
        sum += wv * (isnan(dot) ? dot : (dot > 0 ? dot : 0.0));
        m += fabs(wv) * ad;
    }
    *mass = sk * m;
    return sk * sum;
}

/* ---- the selection model ------------------------------------------------------------------ */
typedef struct {
    float v;
    int64_t j;
} it_item_t;

/* (value descending under NaN > +inf > finite > -inf, -0 == +0; then j ascending) */
static int item_cmp(const void *x, const void *y) {
    const it_item_t *a = x, *b = y;
    const int an = isnan(a->v), bn = isnan(b->v);
    if (an != bn) return an ? -1 : 1;
    if (!an && a->v != b->v) return a->v > b->v ? -1 : 1;
    return (a->j > b->j) - (a->j < b->j);
}

static int i64_cmp(const void *x, const void *y) {
    const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The first min(K, |E|) of E (columns cols[0 .. ne), logits v[j]) written ascending, then
 * -1 up to width. */
static void model_pick(const float *v, const int64_t *cols, int64_t ne, int64_t K, int32_t *out, int64_t width) {
    it_item_t *it = malloc((size_t)(ne ? ne : 1) * sizeof *it);
    int64_t *sel = malloc((size_t)(ne ? ne : 1) * 8);
    for (int64_t i = 0; i < ne; ++i) it[i] = (it_item_t){v ? v[cols[i]] : 0.0f, cols[i]};
    if (v) qsort(it, (size_t)ne, sizeof *it, item_cmp);
    const int64_t k = ne < K ? ne : K;
    for (int64_t i = 0; i < k; ++i) sel[i] = it[i].j;
    qsort(sel, (size_t)k, 8, i64_cmp);
    for (int64_t i = 0; i < width; ++i) out[i] = i < k ? (int32_t)sel[i] : -1;
    free(it), free(sel);
}

void it_model_select(const float *v, int64_t n, int64_t K, int mode, int64_t C, int32_t *cand, int32_t *topk) {
    const int64_t nb = (n + 7) / 8;
    int64_t *cols = malloc((size_t)(n > 0 ? n : 1) * 8), ne = 0;
    if (mode == 2 && n > 0) {
        char *listed = calloc((size_t)nb, 1);
        for (int64_t i = 0; i < C; ++i)
            if (cand[i] >= 0 && cand[i] < nb) listed[cand[i]] = 1;
        for (int64_t j = 0; j < n; ++j)
            if (listed[j / 8]) cols[ne++] = j;
        free(listed);
    } else {
        for (ne = 0; ne < (n > 0 ? n : 0); ++ne) cols[ne] = ne;
    }
    model_pick(ne > K ? v : NULL, cols, ne, K, topk, K);
    if (mode == 1) { /* block scores: max under the same order, the last pinned, -inf dropped */
        float *score = malloc((size_t)(nb ? nb : 1) * 4);
        int64_t *blocks = malloc((size_t)(nb ? nb : 1) * 8), nk = 0;
        for (int64_t g = 0; g < nb; ++g) {
            it_item_t best = {v[8 * g], 0};
            for (int64_t j = 8 * g + 1; j < n && j < 8 * g + 8; ++j) {
                const it_item_t x = {v[j], 0};
                if (item_cmp(&x, &best) < 0) best = x;
            }
            score[g] = g == nb - 1 ? INFINITY : best.v;
            if (!(score[g] == -INFINITY)) blocks[nk++] = g;
        }
        model_pick(score, blocks, nk, C, cand, C);
        free(score), free(blocks);
    }
    free(cols);
}

static int f64_cmp(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int it_check_margin(th_ctx_t *t, const it_topk_case_t *c, int64_t r, const int32_t *got) {
    const int64_t n = it_model_cols(c, r), K = c->d.topk;
    if (n <= K) return 0;
    double *ex = malloc((size_t)n * 8), *neg = malloc((size_t)n * 8), dmax = 0.0, mass;
    int has_nan = 0;
    for (int64_t j = 0; j < n; ++j) {
        ex[j] = it_model_logit(c, r, j, &mass);
        has_nan |= isnan(ex[j]);
        neg[j] = -ex[j], dmax = fmax(dmax, 1e-5 * mass);
    }
    if (!has_nan) {
        qsort(neg, (size_t)n, 8, f64_cmp);
        const double theta = -neg[K - 1];
        char *sel = calloc((size_t)n, 1);
        for (int64_t i = 0; i < K; ++i)
            if (got[i] >= 0 && got[i] < n) sel[got[i]] = 1;
        int64_t bad = 0;
        for (int64_t j = 0; j < n; ++j)
            if (!(sel[j] ? ex[j] >= theta - dmax : ex[j] <= theta + dmax) && bad++ < 3)
                TH_CHECK(t, 0, "row %lld col %lld (%s) logit %.9g vs theta %.9g", (long long)r, (long long)j,
                         sel[j] ? "selected" : "not selected", ex[j], theta);
        free(sel);
    }
    free(ex), free(neg);
    return !has_nan;
}

void it_check_logits(th_ctx_t *t, const char *what, const it_topk_case_t *c, const float *lg, int64_t stride,
                     int64_t W) {
    int64_t bad = 0;
    double worst = 0.0;
    for (int64_t r = 0; r < c->d.num_rows; ++r) {
        const int64_t n = it_model_cols(c, r);
        for (int64_t j = 0; j < W; ++j) {
            double mass = 0.0;
            const double want = j < n ? it_model_logit(c, r, j, &mass) : -INFINITY;
            const float got = lg[r * stride + j];
            const int ok = isnan(want) ? isnan(got) : (isinf(want) ? got == want : fabs(got - want) <= 1e-5 * mass);
            if (!isnan(want) && !isinf(want) && mass > 0) worst = fmax(worst, fabs(got - want) / mass);
            if (!ok && bad++ < 5)
                TH_CHECK(t, 0, "%s row %lld col %lld: %.9g, model %.9g (mass %.3g)", what, (long long)r, (long long)j,
                         (double)got, want, mass);
        }
    }
    th_note(t, "%s: %lld x %lld, worst |err| / mass %.3g", what, (long long)c->d.num_rows, (long long)W, worst);
}
