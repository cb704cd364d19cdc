/*
 * Reference calls on small accepted descriptors. Inputs are allocated to the exact size
 * the descriptor implies (AddressSanitizer sees any read past them), outputs are framed
 * by guard bands that must stay intact. Input data is random within the documented
 * value ranges, out-of-range indices and slots included (the ops define what those do).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/compress.h"
#include "dsv4/indices.h"
#include "dsv4/kvcache.h"
#include "fuzz_ref.h"

enum { FZ_MAX_BYTES = 32 << 20 }; /* larger buffers are skipped */

/* a * b + c without overflow and within FZ_MAX_BYTES / 2 (elements of up to 2 bytes ...),
 * or -1. */
static int64_t fz_madd(int64_t a, int64_t b, int64_t c) {
    int64_t m, s;
    if (a < 0 || b < 0 || c < 0 || __builtin_mul_overflow(a, b, &m) || __builtin_add_overflow(m, c, &s)) return -1;
    return s > FZ_MAX_BYTES ? -1 : s;
}

/* Elements of `rows` rows of `width` elements, `stride` apart; -1 when too large. */
static int64_t fz_extent(int64_t rows, int64_t stride, int64_t width) {
    return rows <= 0 ? 0 : fz_madd(rows - 1, stride, width);
}

typedef struct {
    void *p[8];
    int n;
} fz_inputs_t;

/* An input of exactly `bytes` bytes filled with random bytes. */
static void *fz_in(fz_inputs_t *in, th_rng_t *r, int64_t bytes) {
    uint8_t *p = malloc(bytes > 0 ? (size_t)bytes : 1);
    for (int64_t i = 0; i < bytes; ++i) p[i] = (uint8_t)th_rng_u32(r);
    in->p[in->n++] = p;
    return p;
}

static void fz_in_free(fz_inputs_t *in) {
    for (int i = 0; i < in->n; ++i) free(in->p[i]);
    in->n = 0;
}

static void fill_i32(th_rng_t *r, int32_t *p, int64_t n, int64_t lo, int64_t hi) {
    for (int64_t i = 0; i < n; ++i) p[i] = (int32_t)th_rng_range(r, lo, hi);
}

static void fill_i64(th_rng_t *r, int64_t *p, int64_t n, int64_t lo, int64_t hi) {
    for (int64_t i = 0; i < n; ++i) p[i] = th_rng_range(r, lo, hi);
}

#define OR(v, dflt) ((v) ? (v) : (dflt))

/* The per-token inputs of the index ops: token_to_req [T] in [-1, R], a block table of
 * `table` entries, is_valid_token [T]; returns is_valid_token. */
static uint8_t *token_inputs(fz_inputs_t *in, th_rng_t *r, int64_t T, int64_t R, int64_t table, int32_t **req,
                             int32_t **bt) {
    *req = fz_in(in, r, T * 4), *bt = fz_in(in, r, table * 4);
    uint8_t *valid = fz_in(in, r, T);
    fill_i32(r, *req, T, -1, R);
    fill_i32(r, *bt, table, -1, 4096);
    for (int64_t i = 0; i < T; ++i) valid[i] &= 1;
    return valid;
}

/* The outputs' guards after a reference call that must succeed. */
static void ref_done(th_ctx_t *t, const char *op, dsv4_status_t st, th_buf_t *outs, int n, const char *log) {
    TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "%s_ref returned %s (%s) on an accepted descriptor:%s", op,
             dsv4_status_string(st), dsv4_last_error(), log);
    for (int i = 0; i < n; ++i) {
        char what[256];
        snprintf(what, sizeof what, "%s_ref output %d for%s", op, i, log);
        th_buf_guards_ok(t, &outs[i], what);
        th_buf_free(&outs[i]);
    }
}

static int ref_kv_insert(th_ctx_t *t, th_rng_t *r, const dsv4_kv_insert_desc_t *d, const char *log) {
    const int64_t k = fz_extent(d->num_tokens, OR(d->k_stride_row, 512), 512);
    const int64_t cache = fz_madd(d->num_pages, d->page_stride_bytes, 0);
    const int64_t slots = fz_madd(d->num_pages, d->page_tokens, 0);
    if (k < 0 || cache < 0 || slots < 0 || d->num_tokens > 4096) return 0;
    fz_inputs_t in = {0};
    dsv4_kv_insert_args_t a;
    a.k = fz_in(&in, r, k * 2);
    int64_t *slot = fz_in(&in, r, d->num_tokens * 8);
    fill_i64(r, slot, d->num_tokens, -3, slots + 3);
    a.slot_mapping = slot;
    th_buf_t out = th_buf_host((size_t)cache);
    a.cache = th_ptr(&out);
    ref_done(t, "kv_insert", dsv4_kv_insert_ref(d, &a), &out, 1, log);
    fz_in_free(&in);
    return 1;
}

static int ref_kv_gather(th_ctx_t *t, th_rng_t *r, const dsv4_kv_gather_desc_t *d, const char *log) {
    const int64_t R = d->num_reqs, W = d->block_table_width;
    const int64_t cache = fz_madd(d->num_pages, d->page_stride_bytes, 0);
    const int64_t table = fz_extent(R, OR(d->block_table_stride, W), W);
    const int64_t row = OR(d->out_stride_row, 512);
    const int64_t slab = d->out_rows > 0 ? fz_extent(d->out_rows, row, 512) : 0;
    const int64_t out = slab > 0 ? fz_extent(R, OR(d->out_stride_req, d->out_rows * row), slab) : 0;
    const int64_t ctx = fz_madd(W, d->page_tokens, 3);
    if (cache < 0 || table < 0 || slab < 0 || out < 0 || ctx < 0 || R > 4096) return 0;
    fz_inputs_t in = {0};
    dsv4_kv_gather_args_t a;
    a.cache = fz_in(&in, r, cache);
    int32_t *seq = fz_in(&in, r, R * 4), *glen = NULL, *bt = fz_in(&in, r, table * 4);
    fill_i32(r, seq, R, -2, ctx < INT32_MAX ? ctx : INT32_MAX);
    if (th_rng_u32(r) & 1) {
        glen = fz_in(&in, r, R * 4);
        fill_i32(r, glen, R, -2, d->out_rows + 3);
    }
    fill_i32(r, bt, table, -2, d->num_pages + 2);
    a.seq_lens = seq, a.gather_lens = glen, a.block_table = bt;
    th_buf_t o = th_buf_host((size_t)out * 2);
    a.out = th_ptr(&o);
    ref_done(t, "kv_gather", dsv4_kv_gather_ref(d, &a), &o, 1, log);
    fz_in_free(&in);
    return 1;
}

static int ref_translate(th_ctx_t *t, th_rng_t *r, const dsv4_topk_translate_desc_t *d, int packed, const char *log) {
    const int64_t T = d->num_tokens, K = d->topk, R = d->num_reqs, W = d->block_table_width;
    const int64_t topk = fz_extent(T, OR(d->topk_stride, K), K);
    const int64_t table = fz_extent(R, OR(d->block_table_stride, W), W);
    const int64_t outs = packed ? fz_madd(T, K, 0) : fz_extent(T, OR(d->out_stride, K), K);
    const int64_t span = fz_madd(W + 1, d->page_tokens, 0);
    if (topk < 0 || table < 0 || outs < 0 || span < 0 || span > INT32_MAX || T > 4096) return 0;
    fz_inputs_t in = {0};
    int32_t *ti = fz_in(&in, r, topk * 4), *req, *bt;
    const uint8_t *valid = token_inputs(&in, r, T, R, table, &req, &bt);
    fill_i32(r, ti, topk, -2, span);
    dsv4_status_t st;
    if (packed) {
        th_buf_t o[3] = {th_buf_host((size_t)T * 4), th_buf_host((size_t)(T + 1) * 4), th_buf_host((size_t)outs * 4)};
        const dsv4_topk_translate_packed_args_t a = {ti, req, bt, valid, th_ptr(&o[0]), th_ptr(&o[1]), th_ptr(&o[2])};
        st = dsv4_topk_translate_packed_ref(d, &a);
        ref_done(t, "topk_translate_packed", st, o, 3, log);
    } else {
        th_buf_t o[2] = {th_buf_host((size_t)outs * 4), th_buf_host((size_t)T * 4)};
        const dsv4_topk_translate_args_t a = {ti, req, bt, valid, th_ptr(&o[0]), th_ptr(&o[1])};
        st = dsv4_topk_translate_ref(d, &a);
        ref_done(t, "topk_translate", st, o, 2, log);
    }
    fz_in_free(&in);
    return 1;
}

static int ref_combine(th_ctx_t *t, th_rng_t *r, const dsv4_combine_topk_swa_desc_t *d, const char *log) {
    const int64_t T = d->num_tokens, R = d->num_reqs;
    const int64_t C = dsv4_combine_topk_swa_cols(d->topk, d->window);
    const int64_t topk = fz_extent(T, OR(d->topk_stride, d->topk_cols), d->topk_cols);
    const int64_t outs = fz_extent(T, OR(d->out_stride, C), C);
    if (C <= 0 || topk < 0 || outs < 0 || T > 4096 || R > 4096) return 0;
    fz_inputs_t in = {0};
    int32_t *ti = fz_in(&in, r, topk * 4), *qsl = fz_in(&in, r, (R + 1) * 4);
    int32_t *seq = fz_in(&in, r, R * 4), *glen = fz_in(&in, r, R * 4);
    fill_i32(r, ti, topk, -2, d->swa_row0 + 2);
    qsl[0] = (int32_t)th_rng_range(r, 0, 100);
    for (int64_t b = 0; b < R; ++b) {
        const int64_t q = th_rng_range(r, 0, T / (R > 0 ? R : 1) + 2);
        qsl[b + 1] = qsl[b] + (int32_t)q;
        seq[b] = (int32_t)th_rng_range(r, 0, q + 300);
        glen[b] = (int32_t)th_rng_range(r, 0, q + d->window);
    }
    th_buf_t o[2] = {th_buf_host((size_t)outs * 4), th_buf_host((size_t)T * 4)};
    const dsv4_combine_topk_swa_args_t a = {ti, qsl, seq, glen, th_ptr(&o[0]), th_ptr(&o[1])};
    ref_done(t, "combine_topk_swa", dsv4_combine_topk_swa_ref(d, &a), o, 2, log);
    fz_in_free(&in);
    return 1;
}

static int ref_decode_swa(th_ctx_t *t, th_rng_t *r, const dsv4_decode_swa_indices_desc_t *d, const char *log) {
    const int64_t T = d->num_tokens, R = d->num_reqs, W = d->block_table_width;
    const int64_t table = fz_extent(R, OR(d->block_table_stride, W), W);
    const int64_t outs = fz_extent(T, OR(d->out_stride, d->window), d->window);
    const int64_t span = fz_madd(W + 1, d->page_tokens, 0);
    if (table < 0 || outs < 0 || span < 0 || span > INT32_MAX || T > 4096) return 0;
    fz_inputs_t in = {0};
    int32_t *pos = fz_in(&in, r, T * 4), *req, *bt;
    const uint8_t *valid = token_inputs(&in, r, T, R, table, &req, &bt);
    fill_i32(r, pos, T, -3, span);
    th_buf_t o[2] = {th_buf_host((size_t)outs * 4), th_buf_host((size_t)T * 4)};
    const dsv4_decode_swa_indices_args_t a = {req, pos, valid, bt, th_ptr(&o[0]), th_ptr(&o[1])};
    ref_done(t, "decode_swa_indices", dsv4_decode_swa_indices_ref(d, &a), o, 2, log);
    fz_in_free(&in);
    return 1;
}

static int ref_inv_rope(th_ctx_t *t, th_rng_t *r, const dsv4_inv_rope_desc_t *d, const char *log) {
    const int64_t T = d->num_tokens, hp = OR(d->num_heads_padded, d->num_heads), sh = OR(d->o_stride_head, 512);
    const int64_t head = fz_extent(hp, sh, 512);
    const int64_t o = head < 0 ? -1 : fz_extent(T, OR(d->o_stride_token, hp * sh), head);
    const int64_t cs = fz_madd(d->max_position, 64 * 4, 0);
    if (head < 0 || o < 0 || cs < 0 || T > 4096) return 0;
    fz_inputs_t in = {0};
    int64_t *pos = fz_in(&in, r, T * 8);
    fill_i64(r, pos, T, -2, d->max_position + 2);
    float *csc = fz_in(&in, r, cs);
    for (int64_t i = 0; i < d->max_position * 64; ++i) csc[i] = (float)th_rng_unit(r);
    th_buf_t ob = th_buf_host((size_t)o * 2);
    const dsv4_inv_rope_args_t a = {th_ptr(&ob), pos, csc};
    ref_done(t, "inv_rope", dsv4_inv_rope_ref(d, &a), &ob, 1, log);
    fz_in_free(&in);
    return 1;
}

static int ref_engram(th_ctx_t *t, th_rng_t *r, const dsv4_engram_lookup_desc_t *d, const char *log) {
    const int64_t T = d->num_tokens, rows = d->vocab_end - d->vocab_start, D = d->head_dim;
    const int64_t values = fz_extent(rows, OR(d->values_stride_bytes, D), D);
    const int64_t scales = fz_extent(rows, OR(d->scales_stride_bytes, D / 32), D / 32);
    const int64_t ish = OR(d->ids_stride_head, 1);
    const int64_t head = fz_extent(d->n_cols, ish, 1);
    const int64_t ids = head < 0 ? -1 : fz_extent(T, OR(d->ids_stride_token, d->n_cols * ish), head);
    const int64_t out = fz_madd(fz_madd(T, d->local_heads, 0), D * 2, 0);
    if (values < 0 || scales < 0 || head < 0 || ids < 0 || out < 0 || T > 4096) return 0;
    fz_inputs_t in = {0};
    int32_t *id = fz_in(&in, r, ids * 4);
    fill_i32(r, id, ids, d->vocab_start - 2 > INT32_MIN ? d->vocab_start - 2 : -1,
             d->vocab_end + 2 < INT32_MAX ? d->vocab_end + 2 : INT32_MAX);
    th_buf_t ob = th_buf_host((size_t)out);
    const dsv4_engram_lookup_args_t a = {fz_in(&in, r, values), fz_in(&in, r, scales), id, th_ptr(&ob)};
    ref_done(t, "engram_lookup", dsv4_engram_lookup_ref(d, &a), &ob, 1, log);
    fz_in_free(&in);
    return 1;
}

/* A value near a valid one: small sizes and strides, so that buffers stay small. */
static int64_t small_i64(th_rng_t *r, int64_t orig) {
    switch (th_rng_u32(r) % 7) {
    case 0: return th_rng_range(r, -1, 3);
    case 1: return orig + th_rng_range(r, -8, 8);
    case 2: return orig > INT32_MAX ? orig : orig * 2;
    case 3: return th_rng_range(r, 0, 2 * (orig > 0 ? orig : 0) + 16);
    case 4: return th_rng_range(r, 0, 160) * 8;
    case 5: return orig + 8 * th_rng_range(r, -2, 4);
    default: return orig / 2;
    }
}

static const char *const ref_ops[] = {"kv_insert",        "kv_gather",
                                      "topk_translate",   "topk_translate_packed",
                                      "combine_topk_swa", "decode_swa_indices",
                                      "inv_rope",         "engram_lookup"};

int fz_ref_once(th_ctx_t *t, th_rng_t *r) {
    const int which = (int)(th_rng_u32(r) % (sizeof ref_ops / sizeof ref_ops[0]));
    const fz_op_t *op = NULL;
    for (int i = 0; i < fz_num_ops; ++i)
        if (!strcmp(fz_ops[i].op, ref_ops[which])) op = &fz_ops[i];
    if (!op) {
        TH_CHECK(t, 0, "no operator %s in the table", ref_ops[which]);
        return 0;
    }
    _Alignas(16) unsigned char d[256];
    memcpy(d, op->valid, op->desc_bytes);
    char log[1024];
    size_t used = 0;
    log[0] = 0;
    for (int n = (int)th_rng_range(r, 0, 3); n >= 0; --n) {
        const fz_field_t *f = &op->fields[th_rng_u32(r) % (uint32_t)op->num_fields];
        if (f->type != FZ_I64) continue;
        int64_t v;
        memcpy(&v, d + f->off, sizeof v);
        v = small_i64(r, v);
        memcpy(d + f->off, &v, sizeof v);
        int w = snprintf(log + used, sizeof log - used, " %s=%lld", f->name, (long long)v);
        if (w > 0 && used + (size_t)w < sizeof log) used += (size_t)w;
    }
    if (fz_judge(t, op, d, log) != DSV4_STATUS_SUCCESS) return 0;
    switch (which) {
    case 0: return ref_kv_insert(t, r, (const void *)d, log);
    case 1: return ref_kv_gather(t, r, (const void *)d, log);
    case 2: return ref_translate(t, r, (const void *)d, 0, log);
    case 3: return ref_translate(t, r, (const void *)d, 1, log);
    case 4: return ref_combine(t, r, (const void *)d, log);
    case 5: return ref_decode_swa(t, r, (const void *)d, log);
    case 6: return ref_inv_rope(t, r, (const void *)d, log);
    default: return ref_engram(t, r, (const void *)d, log);
    }
}
