/*
 * Bad input, for every public function of the family: NULL descriptor, NULL args, each NULL
 * pointer, negative or zero sizes, strides below their width, misaligned pointers, NULL
 * stream, short workspace. Each must return the expected status with a message naming the
 * operator and the field, and write nothing: the CPU test runs the run call and the
 * reference on poisoned host buffers; the GPU test runs the run call on poisoned device
 * buffers (a real stream) and checks them after a synchronize.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "idx_test.h"

enum { M_DESC_FIELD, M_DESC_NULL, M_ARGS_NULL, M_PTR_NULL, M_PTR_SHIFT, M_STREAM_NULL, M_WS_SMALL, M_WS_SHIFT };

typedef struct {
    int kind;
    size_t off;    /* desc field (int64_t) or args pointer member                     */
    int64_t value; /* new field value, or pointer shift in bytes                      */
    size_t off2;   /* optional second desc field (SIZE_MAX: none)                     */
    int64_t value2;
    dsv4_status_t want;
    const char *field; /* must appear in the message                                 */
} mut_t;

#define NONE2 SIZE_MAX, 0
#define FIELD(T, f, v, want)                                                                                           \
    { M_DESC_FIELD, offsetof(T, f), (v), NONE2, (want), #f }
#define PTR_NULL(A, f)                                                                                                 \
    { M_PTR_NULL, offsetof(A, f), 0, NONE2, DSV4_STATUS_NULL_POINTER, #f }
#define PTR_SHIFT(A, f, b)                                                                                             \
    { M_PTR_SHIFT, offsetof(A, f), (b), NONE2, DSV4_STATUS_MISALIGNED, #f }
#define COMMON_MUTS                                                                                                    \
    {M_DESC_NULL, 0, 0, NONE2, DSV4_STATUS_NULL_POINTER, "desc"},                                                      \
        {M_ARGS_NULL, 0, 0, NONE2, DSV4_STATUS_NULL_POINTER, "args"}, {                                                \
        M_STREAM_NULL, 0, 0, NONE2, DSV4_STATUS_NULL_POINTER, "stream"                                                 \
    }

/* The family's public functions behind one signature each. */
typedef struct {
    const char *op;
    size_t desc_size, args_size;
    dsv4_status_t (*check)(const void *d);
    dsv4_status_t (*wss)(const void *d, size_t *b);
    dsv4_status_t (*run)(const void *d, const void *a, void *ws, size_t wsb, dsv4_stream_t s);
    dsv4_status_t (*ref)(const void *d, const void *a);
} op_api_t;

#define API(name, D, A)                                                                                                \
    static dsv4_status_t name##_check_v(const void *d) { return dsv4_##name##_check(d); }                              \
    static dsv4_status_t name##_wss_v(const void *d, size_t *b) { return dsv4_##name##_workspace_size(d, b); }         \
    static dsv4_status_t name##_run_v(const void *d, const void *a, void *ws, size_t wsb, dsv4_stream_t s) {           \
        return dsv4_##name(d, a, ws, wsb, s);                                                                          \
    }                                                                                                                  \
    static dsv4_status_t name##_ref_v(const void *d, const void *a) { return dsv4_##name##_ref(d, a); }                \
    static const op_api_t name##_api = {#name,        sizeof(D),    sizeof(A),   name##_check_v,                       \
                                        name##_wss_v, name##_run_v, name##_ref_v};
API(topk_translate, dsv4_topk_translate_desc_t, dsv4_topk_translate_args_t)
API(topk_translate_packed, dsv4_topk_translate_packed_desc_t, dsv4_topk_translate_packed_args_t)
API(combine_topk_swa, dsv4_combine_topk_swa_desc_t, dsv4_combine_topk_swa_args_t)
API(decode_swa_indices, dsv4_decode_swa_indices_desc_t, dsv4_decode_swa_indices_args_t)

typedef dsv4_topk_translate_desc_t TTD;
typedef dsv4_topk_translate_args_t TTA;
typedef dsv4_topk_translate_packed_args_t TPA;
typedef dsv4_combine_topk_swa_desc_t CD;
typedef dsv4_combine_topk_swa_args_t CA;
typedef dsv4_decode_swa_indices_desc_t DD;
typedef dsv4_decode_swa_indices_args_t DA;

#define TT_DESC_MUTS(D)                                                                                                \
    FIELD(D, num_tokens, -1, DSV4_STATUS_INVALID_VALUE),                                                               \
        FIELD(D, num_tokens, INT64_C(1) << 31, DSV4_STATUS_INVALID_VALUE),                                             \
        FIELD(D, topk, -1, DSV4_STATUS_INVALID_VALUE), FIELD(D, num_reqs, 0, DSV4_STATUS_INVALID_VALUE),               \
        FIELD(D, num_reqs, -2, DSV4_STATUS_INVALID_VALUE), FIELD(D, block_table_width, 0, DSV4_STATUS_INVALID_VALUE),  \
        FIELD(D, page_tokens, 0, DSV4_STATUS_INVALID_VALUE), FIELD(D, page_tokens, -16, DSV4_STATUS_INVALID_VALUE),    \
        FIELD(D, topk_stride, 7, DSV4_STATUS_INVALID_VALUE), FIELD(D, topk_stride, -8, DSV4_STATUS_INVALID_VALUE),     \
        FIELD(D, block_table_stride, 3, DSV4_STATUS_INVALID_VALUE)

/* The four inputs both translation variants share. */
#define TT_INPUT_MUTS(A)                                                                                               \
    PTR_NULL(A, topk_indices), PTR_NULL(A, token_to_req), PTR_NULL(A, block_table), PTR_NULL(A, is_valid_token),       \
        PTR_SHIFT(A, topk_indices, 2), PTR_SHIFT(A, token_to_req, 1), PTR_SHIFT(A, block_table, 2)

static const mut_t tt_muts[] = {
    COMMON_MUTS,
    TT_DESC_MUTS(TTD),
    FIELD(TTD, out_stride, 7, DSV4_STATUS_INVALID_VALUE),
    TT_INPUT_MUTS(TTA),
    PTR_NULL(TTA, global_indices),
    PTR_NULL(TTA, lens),
    PTR_SHIFT(TTA, global_indices, 2),
    PTR_SHIFT(TTA, lens, 3),
};

static const mut_t tp_muts[] = {
    COMMON_MUTS,
    TT_DESC_MUTS(TTD),
    /* T * K must stay below 2^31 (indptr is int32) */
    {M_DESC_FIELD, offsetof(TTD, num_tokens), INT32_MAX, offsetof(TTD, topk), 8, DSV4_STATUS_INVALID_VALUE,
     "num_tokens * topk"},
    TT_INPUT_MUTS(TPA),
    PTR_NULL(TPA, lens),
    PTR_NULL(TPA, indptr),
    PTR_NULL(TPA, packed),
    PTR_SHIFT(TPA, indptr, 2),
    PTR_SHIFT(TPA, packed, 1),
    {M_WS_SMALL, 0, 1, NONE2, DSV4_STATUS_WORKSPACE_TOO_SMALL, "workspace_bytes"},
    {M_WS_SHIFT, 0, 2, NONE2, DSV4_STATUS_MISALIGNED, "workspace"},
};

static const mut_t cmb_muts[] = {
    COMMON_MUTS,
    FIELD(CD, num_tokens, -1, DSV4_STATUS_INVALID_VALUE),
    FIELD(CD, num_reqs, 0, DSV4_STATUS_INVALID_VALUE),
    FIELD(CD, topk, -4, DSV4_STATUS_INVALID_VALUE),
    FIELD(CD, topk_cols, 3, DSV4_STATUS_INVALID_VALUE), /* below topk = 4 */
    FIELD(CD, topk_stride, 2, DSV4_STATUS_INVALID_VALUE),
    FIELD(CD, window, 0, DSV4_STATUS_INVALID_VALUE),
    FIELD(CD, window, -128, DSV4_STATUS_INVALID_VALUE),
    FIELD(CD, ratio, -1, DSV4_STATUS_INVALID_VALUE),
    FIELD(CD, slab_rows, 0, DSV4_STATUS_INVALID_VALUE),
    FIELD(CD, swa_row0, 65, DSV4_STATUS_INVALID_VALUE), /* above slab_rows = 64 */
    FIELD(CD, swa_row0, -1, DSV4_STATUS_INVALID_VALUE),
    FIELD(CD, slab_rows, INT64_C(1) << 30, DSV4_STATUS_INVALID_VALUE), /* * num_reqs 2 overflows int32 */
    FIELD(CD, out_stride, 127, DSV4_STATUS_INVALID_VALUE),
    FIELD(CD, mode, 2, DSV4_STATUS_INVALID_VALUE),
    FIELD(CD, mode, -1, DSV4_STATUS_INVALID_VALUE),
    {M_DESC_FIELD, offsetof(CD, mode), DSV4_COMBINE_V4, offsetof(CD, ratio), 0, DSV4_STATUS_INVALID_VALUE, "ratio"},
    PTR_NULL(CA, topk_indices),
    PTR_NULL(CA, query_start_loc),
    PTR_NULL(CA, seq_lens),
    PTR_NULL(CA, gather_lens),
    PTR_NULL(CA, combined),
    PTR_NULL(CA, combined_lens),
    PTR_SHIFT(CA, topk_indices, 2),
    PTR_SHIFT(CA, query_start_loc, 2),
    PTR_SHIFT(CA, combined, 2),
    PTR_SHIFT(CA, combined_lens, 1),
};

static const mut_t dsw_muts[] = {
    COMMON_MUTS,
    FIELD(DD, num_tokens, -1, DSV4_STATUS_INVALID_VALUE),
    FIELD(DD, num_reqs, 0, DSV4_STATUS_INVALID_VALUE),
    FIELD(DD, window, 0, DSV4_STATUS_INVALID_VALUE),
    FIELD(DD, page_tokens, 0, DSV4_STATUS_INVALID_VALUE),
    FIELD(DD, page_tokens, -64, DSV4_STATUS_INVALID_VALUE),
    FIELD(DD, block_table_width, -1, DSV4_STATUS_INVALID_VALUE),
    FIELD(DD, block_table_stride, 1, DSV4_STATUS_INVALID_VALUE),
    FIELD(DD, out_stride, 3, DSV4_STATUS_INVALID_VALUE),
    PTR_NULL(DA, token_to_req),
    PTR_NULL(DA, positions),
    PTR_NULL(DA, is_valid_token),
    PTR_NULL(DA, block_table),
    PTR_NULL(DA, swa_indices),
    PTR_NULL(DA, swa_lens),
    PTR_SHIFT(DA, positions, 2),
    PTR_SHIFT(DA, swa_indices, 2),
    PTR_SHIFT(DA, swa_lens, 1),
};

/* A valid call of one op: descriptor, args over buffers (host or device), workspace. The
 * first `n_out` args pointers after `out_first` are outputs (checked untouched). */
typedef struct {
    const op_api_t *api;
    const mut_t *muts;
    size_t n_muts;
    uint8_t desc[128], args[128];
    size_t ws_bytes;
    void *ws;
} suite_t;

static void set_i64(void *base, size_t off, int64_t v) { memcpy((uint8_t *)base + off, &v, sizeof v); }
static void shift_ptr(void *base, size_t off, int64_t bytes) {
    uint8_t *p;
    memcpy(&p, (uint8_t *)base + off, sizeof p);
    p = bytes ? p + bytes : NULL;
    memcpy((uint8_t *)base + off, &p, sizeof p);
}

/* Runs every mutation: the check / workspace_size calls for descriptor mutations, the run
 * call always, the reference for host buffers. */
static void run_suite(th_ctx_t *t, const suite_t *s, dsv4_stream_t stream, int host) {
    for (size_t i = 0; i < s->n_muts; ++i) {
        const mut_t *m = &s->muts[i];
        uint8_t d[128], a[128];
        memcpy(d, s->desc, sizeof d);
        memcpy(a, s->args, sizeof a);
        const void *dp = d, *ap = a;
        dsv4_stream_t st = stream;
        size_t wsb = s->ws_bytes;
        uint8_t *ws = s->ws;
        switch (m->kind) {
        case M_DESC_FIELD:
            set_i64(d, m->off, m->value);
            if (m->off2 != SIZE_MAX) set_i64(d, m->off2, m->value2);
            break;
        case M_DESC_NULL: dp = NULL; break;
        case M_ARGS_NULL: ap = NULL; break;
        case M_PTR_NULL: shift_ptr(a, m->off, 0); break;
        case M_PTR_SHIFT: shift_ptr(a, m->off, m->value); break;
        case M_STREAM_NULL: st = NULL; break;
        case M_WS_SMALL: wsb -= (size_t)m->value; break;
        case M_WS_SHIFT: ws += m->value; break;
        }
        const char *op = s->api->op;
        if (m->kind == M_DESC_FIELD || m->kind == M_DESC_NULL) {
            size_t bytes = 0;
            idx_expect_fail(t, "check", s->api->check(dp), m->want, op, m->field);
            idx_expect_fail(t, "workspace_size", s->api->wss(dp, &bytes), m->want, op, m->field);
        }
        idx_expect_fail(t, "run", s->api->run(dp, ap, ws, wsb, st), m->want, op, m->field);
        if (host && m->kind != M_STREAM_NULL && m->kind != M_WS_SMALL && m->kind != M_WS_SHIFT)
            idx_expect_fail(t, "ref", s->api->ref(dp, ap), m->want, op, m->field);
        if (th_failed(t)) {
            th_note(t, "%s: mutation %zu (field %s) failed", op, i, m->field);
            return;
        }
    }
    size_t bytes = 0;
    TH_OK(t, s->api->wss(s->desc, &bytes));
    TH_CHECK(t, bytes == s->ws_bytes, "%s: workspace_size %zu, suite assumed %zu", s->api->op, bytes, s->ws_bytes);
    idx_expect_fail(t, "workspace_size(NULL bytes)", s->api->wss(s->desc, NULL), DSV4_STATUS_NULL_POINTER, s->api->op,
                    "bytes");
}

/* ---- the four suites over one set of buffers --------------------------------------------- */
enum { NB = 12 };
typedef struct {
    void *p[NB];
    idx_dev_t dev[NB];
    size_t bytes[NB];
    int out[NB];
    int host;
} bufs_t;

/* Buffers: 0 topk [4 x 8] / [4 x 4], 1 t2r, 2 table, 3 valid, 4 qsl, 5 seq, 6 gather, 7 out
 * [4 x 128], 8 lens, 9 indptr, 10 packed [32], 11 workspace. Inputs hold valid data (all
 * zero indices, lengths and positions are fine); outputs are poisoned. */
static void bufs_make(bufs_t *b, int host) {
    static const size_t bytes[NB] = {4 * 8 * 4, 4 * 4,       2 * 4 * 4, 4,     3 * 4,  2 * 4,
                                     2 * 4,     4 * 128 * 4, 4 * 4,     5 * 4, 32 * 4, 64};
    static const int out[NB] = {0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0};
    memset(b, 0, sizeof *b);
    b->host = host;
    for (int i = 0; i < NB; ++i) {
        b->bytes[i] = bytes[i];
        b->out[i] = out[i];
        uint8_t *init = malloc(bytes[i]);
        memset(init, out[i] ? IDX_POISON : 0, bytes[i]);
        if (i == 4) { /* qsl [0, 2, 4] */
            int32_t q[3] = {0, 2, 4};
            memcpy(init, q, sizeof q);
        }
        if (host) {
            b->p[i] = init;
        } else {
            b->dev[i] = out[i] ? idx_dev_out(bytes[i], 0, "output") : idx_dev_in(init, bytes[i], 0, "input");
            b->p[i] = idx_dev_ptr(&b->dev[i]);
            if (!out[i]) b->dev[i].host = NULL; /* contents freed below; guards still checked */
            free(init);
        }
    }
}

static void bufs_check_untouched(th_ctx_t *t, bufs_t *b) {
    for (int i = 0; i < NB; ++i) {
        if (!b->out[i]) continue;
        uint8_t *h = malloc(b->bytes[i]);
        if (b->host) memcpy(h, b->p[i], b->bytes[i]);
        else idx_dev_get(t, &b->dev[i], h);
        for (size_t k = 0; k < b->bytes[i]; ++k)
            if (h[k] != IDX_POISON) {
                th_fail(t, __FILE__, __LINE__, "buffer %d byte %zu written by a failing call", i, k);
                break;
            }
        free(h);
    }
}

static void bufs_free(bufs_t *b) {
    for (int i = 0; i < NB; ++i) {
        if (b->host) free(b->p[i]);
        else idx_dev_free(&b->dev[i]);
    }
}

/* One op's suite from its valid descriptor and args (copied into the suite). */
static void suite(th_ctx_t *t, const op_api_t *api, const mut_t *muts, size_t n, const void *desc, const void *args,
                  void *ws, size_t ws_bytes, dsv4_stream_t stream, int host) {
    suite_t s;
    memset(&s, 0, sizeof s);
    s.api = api;
    s.muts = muts;
    s.n_muts = n;
    memcpy(s.desc, desc, api->desc_size);
    memcpy(s.args, args, api->args_size);
    s.ws = ws;
    s.ws_bytes = ws_bytes;
    run_suite(t, &s, stream, host);
}
#define SUITE(api, muts, d, a, ws, wsb)                                                                                \
    suite(t, &api, muts, sizeof muts / sizeof muts[0], &d, &a, ws, wsb, stream, b->host)

static void all_suites(th_ctx_t *t, bufs_t *b, dsv4_stream_t stream) {
    void **p = b->p;
    /* translate: T 4, K 8, R 2, width 4, P 16; the packed variant needs one group (4 B) */
    const TTD td = {4, 8, 2, 4, 16, 8, 4, 8};
    const TTA ta = {p[0], p[1], p[2], p[3], p[7], p[8]};
    const TPA pa = {p[0], p[1], p[2], p[3], p[8], p[9], p[10]};
    SUITE(topk_translate_api, tt_muts, td, ta, NULL, 0);
    SUITE(topk_translate_packed_api, tp_muts, td, pa, p[11], 4);
    /* combine: T 4, R 2, TOP_K 4, K_w 8, W 4, r 1, M 64, N 16 -> C 128 */
    const CD cd = {4, 2, 4, 8, 8, 4, 1, 64, 16, 128, DSV4_COMBINE_V4_1};
    const CA ca = {p[0], p[4], p[5], p[6], p[7], p[8]};
    SUITE(combine_topk_swa_api, cmb_muts, cd, ca, NULL, 0);
    /* decode SWA: T 4, R 2, W 128, P 16, width 4 (positions: the zeroed token_to_req buffer) */
    const DD dd = {4, 2, 128, 16, 4, 4, 128};
    const DA da = {p[1], p[1], p[3], p[2], p[7], p[8]};
    SUITE(decode_swa_indices_api, dsw_muts, dd, da, NULL, 0);
}

void test_bad_input_cpu(th_ctx_t *t) {
    bufs_t b;
    bufs_make(&b, 1);
    /* Checks run before the stream is used, so a dummy handle is enough here. */
    all_suites(t, &b, DSV4_STREAM((void *)0x1));
    bufs_check_untouched(t, &b);
    bufs_free(&b);
}

void test_bad_input_gpu(th_ctx_t *t) {
    bufs_t b;
    bufs_make(&b, 0);
    void *s = th_stream_create(t);
    all_suites(t, &b, DSV4_STREAM(s));
    th_stream_sync_destroy(t, s);
    TH_CUDA(t, cudaDeviceSynchronize());
    bufs_check_untouched(t, &b);
    bufs_free(&b);
}
