/*
 * CPU references of dsv4_indexer_logits and dsv4_indexer_topk: plain loops. A logit takes
 * each head's dot product exactly (double: 128 products of two e4m3 values are multiples
 * of 2^-18 below 2^25, so the sum is exact) rounded once to fp32, then relu, the product
 * with w and the head sum in head order, each rounded in fp32, times the key scale. The
 * selection streams over the eligible columns in ascending order with a bounded heap of
 * the best topk (order key, column) pairs; the candidate blocks likewise with a heap of C.
 * No allocation: the heaps live on the stack (topk and C are at most 2048).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "indexer/indexer_common.h"
#include "indexer/indexer_math.h"

#define REF_MAX_SET 2048

int64_t idx_ref_row_cols(const idx_src_t *s, const idx_src_args_t *a, int64_t t) {
    if (a->row_valid && !a->row_valid[t]) return 0;
    const int32_t req = a->row_req[t];
    if (req < 0 || req >= s->num_reqs) return 0;
    return idx_row_cols(a->positions[t], s->ratio, s->col_cap);
}

static double dec(uint8_t b) { return (double)dsv4_e4m3_to_f32(b); }

float idx_ref_logit(const idx_src_t *s, const idx_src_args_t *a, int64_t t, int64_t j) {
    const int64_t P = s->page_tokens;
    const int32_t page = a->block_table[(int64_t)a->row_req[t] * s->bt_stride + j / P];
    if (page < 0 || page >= s->num_pages) return -INFINITY;
    const uint8_t *base = a->cache + page * s->page_stride_bytes, *k = base + j % P * DSV4_INDEXER_HEAD_DIM;
    float sk;
    memcpy(&sk, base + P * DSV4_INDEXER_HEAD_DIM + j % P * 4, 4);
    float sum = 0.0f;
    for (int64_t h = 0; h < s->heads; ++h) {
        const uint8_t *q = a->q8 + (t * s->heads + h) * DSV4_INDEXER_HEAD_DIM;
        double dot = 0.0;
        for (int d = 0; d < DSV4_INDEXER_HEAD_DIM; ++d) dot += dec(q[d]) * dec(k[d]);
        const float p = idx_relu((float)dot) * a->w[t * s->heads + h];
        sum = sum + p;
    }
    return sum * sk;
}

/* ---- bounded heaps of ranks: rank = key << 32 | ~index, larger ranks first ---------------- */
typedef struct {
    uint64_t *v;
    int64_t n, cap;
} heap_t;

static void heap_down(heap_t *h, int64_t i) {
    for (;;) {
        int64_t m = i;
        const int64_t l = 2 * i + 1, r = l + 1;
        if (l < h->n && h->v[l] < h->v[m]) m = l;
        if (r < h->n && h->v[r] < h->v[m]) m = r;
        if (m == i) return;
        const uint64_t x = h->v[i];
        h->v[i] = h->v[m], h->v[m] = x, i = m;
    }
}

/* Keep the cap largest ranks seen (a min-heap on rank). */
static void heap_offer(heap_t *h, uint32_t key, int64_t index) {
    const uint64_t rank = (uint64_t)key << 32 | (uint32_t) ~(uint32_t)index;
    if (h->n < h->cap) {
        int64_t i = h->n++;
        h->v[i] = rank;
        while (i > 0 && h->v[(i - 1) / 2] > h->v[i]) {
            const uint64_t x = h->v[i];
            h->v[i] = h->v[(i - 1) / 2], h->v[(i - 1) / 2] = x, i = (i - 1) / 2;
        }
    } else if (rank > h->v[0]) {
        h->v[0] = rank;
        heap_down(h, 0);
    }
}

static int cmp_i32(const void *x, const void *y) {
    const int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* The heap's indices in ascending order into out[0 .. width), then -1. */
static void heap_write(const heap_t *h, int32_t *out, int64_t width) {
    for (int64_t i = 0; i < h->n; ++i) out[i] = (int32_t) ~(uint32_t)h->v[i];
    qsort(out, (size_t)h->n, 4, cmp_i32);
    for (int64_t i = h->n; i < width; ++i) out[i] = -1;
}

void idx_ref_select_row(const idx_topk_plan_t *p, int64_t n, idx_logit_fn fn, const void *ctx, int32_t *topk,
                        int32_t *cand) {
    const int64_t K = p->topk, C = p->cand_count, nb = (n + 7) / 8;
    uint64_t top_v[REF_MAX_SET], blk_v[REF_MAX_SET];
    int32_t list[REF_MAX_SET];
    heap_t top = {top_v, 0, K}, blk = {blk_v, 0, C};
    int64_t nl = 0, size = n; /* mode 2: the listed blocks, sorted and unique; |E_t| */
    if (p->mode == 2 && n > 0) {
        for (int64_t i = 0; i < C; ++i)
            if (cand[i] >= 0 && cand[i] < nb) list[nl++] = cand[i];
        qsort(list, (size_t)nl, 4, cmp_i32);
        int64_t u = 0;
        for (int64_t i = 0; i < nl; ++i)
            if (u == 0 || list[i] != list[u - 1]) list[u++] = list[i];
        nl = u, size = 0;
        for (int64_t i = 0; i < nl; ++i) size += (list[i] + 1 == nb ? n - 8 * (int64_t)list[i] : 8);
    }
    if (n <= 0) size = 0;
    const int need_logits = size > K || (p->mode == 1 && n > 0);
    if (!need_logits) { /* the short-row rule: E_t in ascending order */
        int64_t o = 0;
        if (p->mode == 2) {
            for (int64_t i = 0; i < nl; ++i)
                for (int64_t j = 8 * (int64_t)list[i]; j < n && j < 8 * (int64_t)list[i] + 8; ++j)
                    topk[o++] = (int32_t)j;
        } else {
            for (; o < size; ++o) topk[o] = (int32_t)o;
        }
        for (; o < K; ++o) topk[o] = -1;
        if (p->mode == 1)
            for (int64_t i = 0; i < C; ++i) cand[i] = -1;
        return;
    }
    if (p->mode == 2) {
        for (int64_t i = 0; i < nl; ++i)
            for (int64_t j = 8 * (int64_t)list[i]; j < n && j < 8 * (int64_t)list[i] + 8; ++j)
                heap_offer(&top, idx_order_key(fn(ctx, j)), j);
    } else {
        uint32_t bmax = 0;
        for (int64_t j = 0; j < n; ++j) {
            const uint32_t key = idx_order_key(fn(ctx, j));
            if (size > K) heap_offer(&top, key, j);
            bmax = j % 8 == 0 || key > bmax ? key : bmax;
            if (p->mode == 1 && (j % 8 == 7 || j == n - 1)) {
                const uint32_t score = j / 8 == nb - 1 ? IDX_KEY_POS_INF : bmax; /* the last block is pinned */
                if (score != IDX_KEY_NEG_INF) heap_offer(&blk, score, j / 8);
            }
        }
    }
    if (size > K) {
        heap_write(&top, topk, K);
    } else {
        for (int64_t o = 0; o < K; ++o) topk[o] = o < size ? (int32_t)o : -1;
    }
    if (p->mode == 1) heap_write(&blk, cand, C);
}

typedef struct {
    const idx_src_t *s;
    const idx_src_args_t *a;
    int64_t t;
} ref_row_t;

static float ref_row_logit(const void *ctx, int64_t j) {
    const ref_row_t *r = ctx;
    return idx_ref_logit(r->s, r->a, r->t, j);
}

dsv4_status_t idx_topk_ref_run(const idx_topk_plan_t *p, const dsv4_indexer_topk_args_t *a) {
    const idx_src_args_t sa = {a->q8, a->w, a->positions, a->row_req, a->row_valid, a->block_table, a->cache};
    for (int64_t t = 0; t < p->src.rows; ++t) {
        const ref_row_t row = {&p->src, &sa, t};
        idx_ref_select_row(p, idx_ref_row_cols(&p->src, &sa, t), ref_row_logit, &row, a->topk + t * p->topk_stride,
                           p->mode ? a->cand + t * p->cand_stride : NULL);
    }
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t idx_logits_ref_run(const idx_logits_plan_t *p, const dsv4_indexer_logits_args_t *a) {
    const idx_src_args_t sa = {a->q8, a->w, a->positions, a->row_req, a->row_valid, a->block_table, a->cache};
    for (int64_t t = 0; t < p->src.rows; ++t) {
        const int64_t n = idx_ref_row_cols(&p->src, &sa, t);
        float *out = a->out + t * p->out_stride;
        for (int64_t j = 0; j < p->out_cols; ++j) out[j] = j < n ? idx_ref_logit(&p->src, &sa, t, j) : -INFINITY;
    }
    return DSV4_STATUS_SUCCESS;
}
