/*
 * Top-k translation on the GPU against the CPU reference: dense and packed, whole outputs
 * (including row padding and the untouched tail of the packed list) bit-exact.
 *
 * Rows are drawn in kinds that steer the kernel through each of its paths: "narrow" (a
 * dense page range: staged in shared memory), "wide" (more pages than a staging slice),
 * "sparse" (a few indices over many pages), "tiny" (one or two pages) and "junk" (every
 * kind of invalid value anywhere in the row: negatives, past the table, INT32_MIN/MAX).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idx_test.h"
#include "indices/index_check.h" /* dsv4_idx_grid_cap: the grid-stride test hook */

enum { KIND_NARROW, KIND_WIDE, KIND_SPARSE, KIND_TINY, KIND_JUNK, KIND_MIX };
static const char *kind_name[] = {"narrow", "wide", "sparse", "tiny", "junk", "mix"};

/* ---- GPU runners (also used by the known-answer tests) --------------------------------- */

int tt_gpu_dense(th_ctx_t *t, const char *name, const dsv4_topk_translate_desc_t *d,
                 const dsv4_topk_translate_args_t *h, size_t in_off, size_t out_off) {
    const int64_t T = d->num_tokens, K = d->topk;
    const int64_t ts = d->topk_stride ? d->topk_stride : K,
                  bst = d->block_table_stride ? d->block_table_stride : d->block_table_width;
    const int64_t os = d->out_stride ? d->out_stride : K;
    idx_dev_t topk = idx_dev_in(h->topk_indices, (size_t)(T * ts) * 4, in_off, "topk_indices");
    idx_dev_t t2r = idx_dev_in(h->token_to_req, (size_t)T * 4, 0, "token_to_req");
    idx_dev_t tab = idx_dev_in(h->block_table, (size_t)(d->num_reqs * bst) * 4, 0, "block_table");
    idx_dev_t val = idx_dev_in(h->is_valid_token, (size_t)T, 0, "is_valid_token");
    idx_dev_t out = idx_dev_out((size_t)(T * os) * 4, out_off, "global_indices");
    idx_dev_t lens = idx_dev_out((size_t)T * 4, 0, "lens");
    dsv4_topk_translate_args_t a = {idx_dev_ptr(&topk), idx_dev_ptr(&t2r), idx_dev_ptr(&tab),
                                    idx_dev_ptr(&val),  idx_dev_ptr(&out), idx_dev_ptr(&lens)};
    void *s = th_stream_create(t);
    const int ok = idx_sync_status(t, name, dsv4_topk_translate(d, &a, NULL, 0, DSV4_STREAM(s)), s);
    idx_dev_get(t, &out, h->global_indices);
    idx_dev_get(t, &lens, h->lens);
    idx_dev_t *const ins[] = {&topk, &t2r, &tab, &val}, *const outs[] = {&out, &lens};
    idx_dev_finish(t, ins, 4, outs, 2);
    return ok;
}

int tt_gpu_packed(th_ctx_t *t, const char *name, const dsv4_topk_translate_desc_t *d,
                  const dsv4_topk_translate_packed_args_t *h, size_t in_off, size_t out_off) {
    const int64_t T = d->num_tokens, K = d->topk;
    const int64_t ts = d->topk_stride ? d->topk_stride : K,
                  bst = d->block_table_stride ? d->block_table_stride : d->block_table_width;
    size_t ws_bytes = 0;
    TH_OK(t, dsv4_topk_translate_packed_workspace_size(d, &ws_bytes));
    idx_dev_t topk = idx_dev_in(h->topk_indices, (size_t)(T * ts) * 4, in_off, "topk_indices");
    idx_dev_t t2r = idx_dev_in(h->token_to_req, (size_t)T * 4, 0, "token_to_req");
    idx_dev_t tab = idx_dev_in(h->block_table, (size_t)(d->num_reqs * bst) * 4, 0, "block_table");
    idx_dev_t val = idx_dev_in(h->is_valid_token, (size_t)T, 0, "is_valid_token");
    idx_dev_t lens = idx_dev_out((size_t)T * 4, 0, "lens");
    idx_dev_t indptr = idx_dev_out((size_t)(T + 1) * 4, out_off, "indptr");
    idx_dev_t packed = idx_dev_out((size_t)(T * K) * 4, out_off, "packed");
    idx_dev_t ws = idx_dev_out(ws_bytes, 0, "workspace");
    dsv4_topk_translate_packed_args_t a = {idx_dev_ptr(&topk),  idx_dev_ptr(&t2r),  idx_dev_ptr(&tab),
                                           idx_dev_ptr(&val),   idx_dev_ptr(&lens), idx_dev_ptr(&indptr),
                                           idx_dev_ptr(&packed)};
    void *s = th_stream_create(t);
    const int ok =
        idx_sync_status(t, name, dsv4_topk_translate_packed(d, &a, idx_dev_ptr(&ws), ws_bytes, DSV4_STREAM(s)), s);
    idx_dev_get(t, &lens, h->lens);
    idx_dev_get(t, &indptr, h->indptr);
    idx_dev_get(t, &packed, h->packed);
    th_buf_guards_ok(t, &ws.buf, "workspace");
    idx_dev_t *const ins[] = {&topk, &t2r, &tab, &val}, *const outs[] = {&lens, &indptr, &packed, &ws};
    idx_dev_finish(t, ins, 4, outs, 4);
    return ok;
}

/* ---- cases ------------------------------------------------------------------------------ */

void tt_case_free(tt_case_t *c) {
    free(c->topk);
    free(c->t2r);
    free(c->table);
    free(c->valid);
    memset(c, 0, sizeof *c);
}

static int32_t junk_value(th_rng_t *r, int64_t vlimit) {
    switch (th_rng_range(r, 0, 7)) {
    case 0: return -1;
    case 1: return (int32_t)th_rng_range(r, INT32_MIN, -2);
    case 2: return INT32_MAX;
    case 3: return INT32_MIN;
    case 4: return (int32_t)(vlimit < INT32_MAX ? vlimit : INT32_MAX); /* first value past the table */
    case 5: return (int32_t)th_rng_range(r, vlimit < INT32_MAX ? vlimit : INT32_MAX, INT32_MAX);
    default: return (int32_t)th_rng_range(r, 0, (vlimit < INT32_MAX ? vlimit : INT32_MAX) - 1);
    }
}

/* Fills row t's K values (prefix contract except for junk rows). */
static void fill_row(th_rng_t *r, int32_t *row, int64_t K, int64_t width, int64_t bs, int kind) {
    const int64_t vlimit = width * bs;
    if (kind == KIND_MIX) kind = (int)th_rng_range(r, 0, KIND_JUNK);
    if (kind == KIND_JUNK) {
        for (int64_t j = 0; j < K; ++j) row[j] = junk_value(r, vlimit);
        return;
    }
    int64_t n = K;
    const int64_t pick = th_rng_range(r, 0, 99);
    if (pick < 15) n = 0;
    else if (pick < 55) n = th_rng_range(r, 0, K);
    if (kind == KIND_SPARSE && n > 8) n = th_rng_range(r, 1, 8);
    int64_t lo = 0, hi = vlimit; /* values in [lo, hi) */
    if (kind == KIND_NARROW) {
        const int64_t span = th_rng_range(r, width < 33 ? width : 33, width < 900 ? width : 900);
        const int64_t p0 = th_rng_range(r, 0, width - span);
        lo = p0 * bs;
        hi = (p0 + span) * bs;
    } else if (kind == KIND_TINY) {
        const int64_t p0 = th_rng_range(r, 0, width - 1);
        lo = p0 * bs;
        hi = (p0 + (p0 + 1 < width ? 2 : 1)) * bs;
    }
    if (hi > INT32_MAX) hi = INT32_MAX;
    for (int64_t j = 0; j < K; ++j) row[j] = j < n ? (int32_t)th_rng_range(r, lo, hi - 1) : -1;
}

void tt_case_make(th_rng_t *r, tt_case_t *c, int64_t T, int64_t K, int64_t R, int64_t width, int64_t bs, int kind,
                  int pad) {
    memset(c, 0, sizeof *c);
    dsv4_topk_translate_desc_t *d = &c->d;
    d->num_tokens = T;
    d->topk = K;
    d->num_reqs = R;
    d->block_table_width = width;
    d->page_tokens = bs;
    d->topk_stride = pad ? K + th_rng_range(r, 1, 5) : K;
    /* pad 2: a table stride that keeps rows 16-byte aligned past a width that is not a
     * multiple of 4 (staging stops at the last whole chunk of the row). */
    d->block_table_stride = pad == 2 ? (width + 3) / 4 * 4 + 4 : pad ? width + th_rng_range(r, 1, 3) : width;
    d->out_stride = pad ? K + th_rng_range(r, 1, 6) : K;
    const int64_t ts = d->topk_stride ? d->topk_stride : K, bst = d->block_table_stride ? d->block_table_stride : width;
    c->topk = malloc((size_t)(T * ts + 1) * 4);
    c->t2r = malloc((size_t)(T + 1) * 4);
    c->valid = malloc((size_t)T + 1);
    c->table = malloc((size_t)(R * bst + 1) * 4);
    for (int64_t i = 0; i < R * bst; ++i) {
        const int64_t p = th_rng_range(r, 0, 99);
        /* Mostly ordinary pages; a few huge ones (the slot wraps) and unallocated (-1). */
        c->table[i] = p < 2   ? (int32_t)th_rng_range(r, INT32_MAX / 2, INT32_MAX)
                      : p < 3 ? -1
                              : (int32_t)th_rng_range(r, 0, 1 << 20);
    }
    for (int64_t t = 0; t < T; ++t) {
        const int64_t p = th_rng_range(r, 0, 99);
        c->t2r[t] = p < 2 ? -1 : p < 4 ? (int32_t)R : p < 5 ? INT32_MIN : (int32_t)th_rng_range(r, 0, R - 1);
        const int64_t v = th_rng_range(r, 0, 99);
        c->valid[t] = v < 12 ? 0 : v < 16 ? (uint8_t)th_rng_range(r, 2, 255) : 1;
        for (int64_t j = K; j < ts; ++j) c->topk[t * ts + j] = (int32_t)th_rng_range(r, INT32_MIN, INT32_MAX);
        fill_row(r, c->topk + t * ts, K, width, bs, kind);
    }
    snprintf(c->name, sizeof c->name, "T=%lld K=%lld R=%lld width=%lld bs=%lld rows=%s pad=%d", (long long)T,
             (long long)K, (long long)R, (long long)width, (long long)bs, kind_name[kind], pad);
}

/* Reference and GPU on the same case; `in_off`/`out_off` misalign the pointers by 4 bytes to
 * force the element (non-16-byte) paths. */
void tt_check_case(th_ctx_t *t, const tt_case_t *c, size_t in_off, size_t out_off, int packed) {
    const dsv4_topk_translate_desc_t *d = &c->d;
    const int64_t T = d->num_tokens, K = d->topk, os = d->out_stride ? d->out_stride : K;
    char name[300];
    snprintf(name, sizeof name, "%s %s in_off=%zu out_off=%zu seed=%llu", packed ? "packed" : "dense", c->name, in_off,
             out_off, (unsigned long long)th_seed(t));
    int32_t *want_lens = idx_poisoned_i32((size_t)T), *got_lens = idx_poisoned_i32((size_t)T);
    if (!packed) {
        int32_t *want = idx_poisoned_i32((size_t)(T * os)), *got = idx_poisoned_i32((size_t)(T * os));
        dsv4_topk_translate_args_t ref = {c->topk, c->t2r, c->table, c->valid, want, want_lens};
        dsv4_topk_translate_args_t gpu = {c->topk, c->t2r, c->table, c->valid, got, got_lens};
        TH_OK(t, dsv4_topk_translate_ref(d, &ref));
        if (tt_gpu_dense(t, name, d, &gpu, in_off, out_off)) {
            idx_cmp_i32(t, name, "global", got, want, (size_t)(T * os), os);
            idx_cmp_i32(t, name, "lens", got_lens, want_lens, (size_t)T, 0);
        }
        free(want);
        free(got);
    } else {
        int32_t *want_ip = idx_poisoned_i32((size_t)T + 1), *got_ip = idx_poisoned_i32((size_t)T + 1);
        int32_t *want_pk = idx_poisoned_i32((size_t)(T * K)), *got_pk = idx_poisoned_i32((size_t)(T * K));
        dsv4_topk_translate_packed_args_t ref = {c->topk, c->t2r, c->table, c->valid, want_lens, want_ip, want_pk};
        dsv4_topk_translate_packed_args_t gpu = {c->topk, c->t2r, c->table, c->valid, got_lens, got_ip, got_pk};
        TH_OK(t, dsv4_topk_translate_packed_ref(d, &ref));
        if (tt_gpu_packed(t, name, d, &gpu, in_off, out_off)) {
            idx_cmp_i32(t, name, "lens", got_lens, want_lens, (size_t)T, 0);
            idx_cmp_i32(t, name, "indptr", got_ip, want_ip, (size_t)T + 1, 0);
            idx_cmp_i32(t, name, "packed", got_pk, want_pk, (size_t)(T * K), 0);
        }
        free(want_ip);
        free(got_ip);
        free(want_pk);
        free(got_pk);
    }
    free(want_lens);
    free(got_lens);
}

/* ---- tests ------------------------------------------------------------------------------ */

typedef struct {
    int64_t T, K, R, width, bs;
    int kind, pad;
    size_t in_off, out_off;
} tt_shape_t;

/* Shapes covering: both staging outcomes, multi-segment rows (K > 512), K not a multiple of
 * 4, misaligned pointers, padded strides, T = 0 and 1, P = 1, a table whose slot range
 * exceeds 2^31 (vlimit clamp), aligned table rows whose width is not a multiple of 4. */
static const tt_shape_t tt_shapes[] = {
    {1, 512, 1, 40, 16, KIND_NARROW, 0, 0, 0},
    {7, 512, 3, 600, 16, KIND_NARROW, 0, 0, 0},
    {300, 512, 37, 5000, 16, KIND_WIDE, 0, 0, 0},
    {300, 1024, 9, 3000, 64, KIND_SPARSE, 0, 0, 0},
    {300, 2048, 50, 700, 32, KIND_MIX, 0, 0, 0},
    {200, 2048, 13, 2000, 1, KIND_TINY, 1, 0, 0},
    {257, 777, 5, 900, 3, KIND_MIX, 0, 0, 0},
    {129, 512, 8, 1200, 16, KIND_JUNK, 0, 0, 0},
    {96, 8192, 6, 4000, 16, KIND_MIX, 0, 0, 0},
    {64, 512, 4, 300, 16, KIND_NARROW, 0, 4, 0},
    {64, 512, 4, 300, 16, KIND_NARROW, 0, 0, 4},
    {64, 1000, 4, 300, 16, KIND_MIX, 1, 4, 4},
    {5, 0, 2, 10, 16, KIND_MIX, 0, 0, 0},
    {0, 512, 2, 10, 16, KIND_MIX, 0, 0, 0},
    {150, 512, 3, 1 << 20, 4096, KIND_MIX, 0, 0, 0},
    {33, 13, 2, 7, 5, KIND_MIX, 1, 0, 0},
    {300, 1024, 7, 603, 8, KIND_NARROW, 2, 0, 0},
    {200, 2048, 5, 1001, 16, KIND_MIX, 2, 0, 0},
};

static void run_shapes(th_ctx_t *t, int packed) {
    th_rng_t *r = th_rng(t);
    for (size_t i = 0; i < sizeof tt_shapes / sizeof tt_shapes[0] && !th_failed(t); ++i) {
        const tt_shape_t *s = &tt_shapes[i];
        tt_case_t c;
        tt_case_make(r, &c, s->T, s->K, s->R, s->width, s->bs, s->kind, s->pad);
        tt_check_case(t, &c, s->in_off, s->out_off, packed);
        tt_case_free(&c);
    }
}

void test_translate_gpu_random(th_ctx_t *t) { run_shapes(t, 0); }

void test_translate_packed_gpu(th_ctx_t *t) {
    run_shapes(t, 1);
    /* Past 4 * DSV4_TT_MAX_GROUPS rows the packed groups grow beyond 4 rows. */
    tt_case_t c;
    tt_case_make(th_rng(t), &c, 9000, 64, 100, 300, 16, KIND_MIX, 0);
    tt_check_case(t, &c, 0, 0, 1);
    tt_case_free(&c);
}

/* Decode-shaped: T = 8192 tokens, one request per token or two (MTP), contexts of 1K-64K
 * tokens at ratio 4 with 64-token blocks (P = 16), rows 0 .. n_t-1 prefix-contract. */
void tt_case_model(th_rng_t *r, tt_case_t *c, int64_t T, int64_t K, int64_t tokens_per_req) {
    const int64_t ratio = MC_RATIO, bs = MC_BLOCK_TOKENS / ratio, max_ctx = MC_DECODE_CTX_MAX,
                  width = max_ctx / ratio / bs;
    const int64_t R = (T + tokens_per_req - 1) / tokens_per_req;
    tt_case_make(r, c, T, K, R, width, bs, KIND_MIX, 0);
    for (int64_t i = 0; i < R * width; ++i) c->table[i] = (int32_t)th_rng_range(r, 0, 200000);
    for (int64_t t = 0; t < T; ++t) {
        const int64_t ctx = th_rng_range(r, MC_DECODE_CTX_MIN, max_ctx), n = ctx / ratio;
        c->t2r[t] = (int32_t)(t / tokens_per_req);
        c->valid[t] = 1;
        for (int64_t j = 0; j < K; ++j)
            c->topk[t * K + j] = j < n ? (int32_t)(n <= K ? j : th_rng_range(r, 0, n - 1)) : -1;
    }
    snprintf(c->name, sizeof c->name, "model T=%lld K=%lld tokens/req=%lld ctx 1K-64K r=4 bs=16", (long long)T,
             (long long)K, (long long)tokens_per_req);
}

void test_translate_gpu_model(th_ctx_t *t) {
    static const int64_t shapes[][3] = {{8192, 512, 1}, {8192, 2048, 2}, {1536, 1024, 1}};
    for (int i = 0; i < 3 && !th_failed(t); ++i) {
        tt_case_t c;
        tt_case_model(th_rng(t), &c, shapes[i][0], shapes[i][1], shapes[i][2]);
        tt_check_case(t, &c, 0, 0, 0);
        if (i == 0) tt_check_case(t, &c, 0, 0, 1);
        tt_case_free(&c);
    }
}

/* The dense kernel walks rows grid-stride with the next row prefetched across the row
 * boundary; on the device's resident grid most test shapes give a warp one row. With the
 * grid capped at 1 and 3 CTAs every warp takes many rows: multi-segment rows, K not a
 * multiple of 4, padded strides, misaligned pointers, unknown requests, junk rows. */
void test_translate_gpu_grid_stride(th_ctx_t *t) {
    static const size_t pick[] = {2, 4, 6, 7, 11, 12, 15, 16};
    th_rng_t *r = th_rng(t);
    for (int cap = 1; cap <= 3 && !th_failed(t); cap += 2) {
        dsv4_idx_grid_cap = cap;
        for (size_t i = 0; i < sizeof pick / sizeof pick[0] && !th_failed(t); ++i) {
            const tt_shape_t *s = &tt_shapes[pick[i]];
            tt_case_t c;
            tt_case_make(r, &c, s->T, s->K, s->R, s->width, s->bs, s->kind, s->pad);
            tt_check_case(t, &c, s->in_off, s->out_off, 0);
            tt_case_free(&c);
        }
    }
    dsv4_idx_grid_cap = 0;
}
