/*
 * GPU fuzzer of the bit-exact data-movement operators against their CPU references:
 * kv_insert, kv_gather and topk_translate on adversarial inputs. Indices take -1,
 * INT32_MAX / INT64_MAX, INT32_MIN, other negatives, duplicates (reads only) and pages
 * past the table; activations are raw bit patterns (NaN and Inf included); caches hold
 * random bytes (corrupt e4m3 codes, NaN codes, any UE8M0 scale); each op also gets one
 * case of its largest size. Every device tensor and every reference output sits between
 * guard bands, outputs start poisoned, inputs must come back unchanged, and the device
 * result must equal the reference's bit for bit. scripts/gpu_check.sh runs it under
 * compute-sanitizer memcheck.
 *
 *   DSV4_FUZZ_SECONDS   time budget of each GPU test (default 20); the CPU test runs the
 *                       same generators through the references only (200 small cases)
 * kv_insert's slots are distinct here: of rows naming one slot the kernel keeps one and
 * the reference the last (include/dsv4/kvcache.h; kvcache.gpu_duplicate_slots).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsv4/dsv4.h"
#include "harness.h"

#define KV_RECORD 584

static double budget_s(void) {
    const char *s = getenv("DSV4_FUZZ_SECONDS");
    const double v = s ? atof(s) : 20.0;
    return v > 0 ? v : 1.0;
}
static double now_s(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill_bytes(th_rng_t *r, void *p, size_t n) {
    uint8_t *b = p;
    for (size_t i = 0; i < n; ++i) b[i] = (uint8_t)th_rng_u32(r);
}

/* An index in [lo, hi) most of the time, else one of the adversarial values. */
static int64_t adv_index(th_rng_t *r, int64_t lo, int64_t hi, int wide) {
    static const int64_t odd32[] = {-1, -2, INT32_MIN, INT32_MAX, INT32_MAX - 1};
    static const int64_t odd64[] = {-1, INT64_MIN, INT64_MAX, (int64_t)1 << 40, -((int64_t)1 << 40)};
    const uint32_t k = th_rng_u32(r) % 16;
    if (k == 0) return wide ? odd64[th_rng_u32(r) % 5] : odd32[th_rng_u32(r) % 5];
    if (k == 1) return hi + (int64_t)(th_rng_u32(r) % 5); /* past the table */
    return hi > lo ? lo + (int64_t)(th_rng_u32(r) % (uint32_t)(hi - lo)) : lo;
}

/* One tensor of a case: host bytes, and (on a GPU run) its guarded device copy. */
typedef struct {
    void *h;
    size_t n;
    th_buf_t d;
    int on_dev;
} fz_t;

static fz_t fz_make(th_rng_t *r, size_t n, int gpu) {
    fz_t f = {malloc(n ? n : 1), n, {0}, gpu};
    fill_bytes(r, f.h, n);
    if (gpu) {
        f.d = th_buf_device(n ? n : 1);
        th_buf_upload(&f.d, f.h);
    }
    return f;
}
static void *fz_dev(fz_t *f) { return f->on_dev ? th_ptr(&f->d) : NULL; }
/* Inputs: unchanged and guarded. Outputs (want = the reference's bytes): bit-exact. */
static void fz_finish(th_ctx_t *t, const char *what, fz_t *f, const void *want) {
    if (f->on_dev) {
        void *got = malloc(f->n ? f->n : 1);
        th_buf_download(&f->d, got);
        th_buf_guards_ok(t, &f->d, what);
        th_cmp_bytes(t, what, got, want ? want : f->h, f->n);
        free(got);
        th_buf_free(&f->d);
    }
    free(f->h);
}

/* The reference's copy of an output, between guard bands of its own. */
static th_buf_t ref_copy(const fz_t *f) {
    th_buf_t b = th_buf_host(f->n ? f->n : 1);
    memcpy(th_ptr(&b), f->h, f->n);
    return b;
}
static void ref_copy_done(th_ctx_t *t, const char *what, th_buf_t *b) {
    th_buf_guards_ok(t, b, what);
    th_buf_free(b);
}

static int run_ok(th_ctx_t *t, const char *op, dsv4_status_t st, void *stream) {
    if (stream) th_stream_sync_destroy(t, stream);
    TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "%s: %s (%s)", op, dsv4_status_string(st), dsv4_last_error());
    return st == DSV4_STATUS_SUCCESS;
}

/* ---- kv_insert ------------------------------------------------------------------------ */
static void case_kv_insert(th_ctx_t *t, th_rng_t *r, int gpu, int64_t T) {
    const int64_t P = th_rng_u32(r) % 2 ? 64 : 1 + th_rng_u32(r) % 17, pages = 1 + T / P + th_rng_u32(r) % 3;
    const int64_t stride = (P * KV_RECORD + 15) / 16 * 16 + 16 * (th_rng_u32(r) % 2), slots = P * pages;
    const dsv4_kv_insert_desc_t d = {T, 512 + 8 * (th_rng_u32(r) % 2), P, stride, pages};
    fz_t k = fz_make(r, (size_t)(T * d.k_stride_row * 2), gpu), sl = fz_make(r, (size_t)T * 8, gpu);
    fz_t cache = fz_make(r, (size_t)(pages * stride), gpu);
    int64_t *slot = sl.h;
    uint8_t *used = calloc((size_t)slots, 1);
    for (int64_t i = 0; i < T; ++i) { /* distinct valid slots, adversarial skips */
        int64_t s = adv_index(r, 0, slots, 1);
        if (s >= 0 && s < slots && used[s]) s = -1;
        if (s >= 0 && s < slots) used[s] = 1;
        slot[i] = s;
    }
    if (gpu) th_buf_upload(&sl.d, sl.h);
    th_buf_t want = ref_copy(&cache);
    const dsv4_kv_insert_args_t ha = {k.h, slot, th_ptr(&want)};
    TH_OK(t, dsv4_kv_insert_ref(&d, &ha));
    if (gpu) {
        const dsv4_kv_insert_args_t da = {fz_dev(&k), fz_dev(&sl), fz_dev(&cache)};
        void *s = th_stream_create(t);
        run_ok(t, "kv_insert", dsv4_kv_insert(&d, &da, NULL, 0, DSV4_STREAM(s)), s);
    }
    fz_finish(t, "kv_insert k", &k, NULL);
    fz_finish(t, "kv_insert slot_mapping", &sl, NULL);
    fz_finish(t, "kv_insert cache", &cache, th_ptr(&want));
    ref_copy_done(t, "kv_insert_ref cache", &want);
    free(used);
}

/* ---- kv_gather ------------------------------------------------------------------------ */
static void case_kv_gather(th_ctx_t *t, th_rng_t *r, int gpu, int64_t rows) {
    const int64_t R = rows > 4096 ? 1 : 1 + th_rng_u32(r) % 4, P = th_rng_u32(r) % 2 ? 64 : 1 + th_rng_u32(r) % 9;
    const int64_t W = 1 + rows / P, pages = 1 + th_rng_u32(r) % 8, stride = (P * KV_RECORD + 15) / 16 * 16;
    const dsv4_kv_gather_desc_t d = {.num_reqs = R,
                                     .block_table_width = W,
                                     .block_table_stride = W + th_rng_u32(r) % 3,
                                     .out_rows = rows,
                                     .out_stride_req = rows * 512 + 8 * (th_rng_u32(r) % 3),
                                     .out_stride_row = 512,
                                     .offset = th_rng_u32(r) % 2 ? 0 : th_rng_u32(r) % (uint32_t)(rows + 1),
                                     .page_tokens = P,
                                     .page_stride_bytes = stride,
                                     .num_pages = pages};
    fz_t cache = fz_make(r, (size_t)(pages * stride), gpu); /* corrupt records: random bytes */
    fz_t seq = fz_make(r, (size_t)R * 4, gpu), glen = fz_make(r, (size_t)R * 4, gpu);
    fz_t bt = fz_make(r, (size_t)(R * d.block_table_stride) * 4, gpu);
    fz_t out = fz_make(r, (size_t)(R * d.out_stride_req) * 2, gpu);
    for (int64_t b = 0; b < R; ++b) {
        ((int32_t *)seq.h)[b] = (int32_t)adv_index(r, 0, W * P + 1, 0);
        ((int32_t *)glen.h)[b] = (int32_t)adv_index(r, 0, rows + 1, 0);
    }
    for (int64_t i = 0; i < R * d.block_table_stride; ++i) ((int32_t *)bt.h)[i] = (int32_t)adv_index(r, 0, pages, 0);
    const int with_glen = th_rng_u32(r) % 2;
    if (gpu) th_buf_upload(&seq.d, seq.h), th_buf_upload(&glen.d, glen.h), th_buf_upload(&bt.d, bt.h);
    th_buf_t want = ref_copy(&out);
    const dsv4_kv_gather_args_t ha = {cache.h, seq.h, with_glen ? glen.h : NULL, bt.h, th_ptr(&want)};
    TH_OK(t, dsv4_kv_gather_ref(&d, &ha));
    if (gpu) {
        const dsv4_kv_gather_args_t da = {fz_dev(&cache), fz_dev(&seq), with_glen ? fz_dev(&glen) : NULL, fz_dev(&bt),
                                          fz_dev(&out)};
        void *s = th_stream_create(t);
        run_ok(t, "kv_gather", dsv4_kv_gather(&d, &da, NULL, 0, DSV4_STREAM(s)), s);
    }
    fz_finish(t, "kv_gather cache", &cache, NULL);
    fz_finish(t, "kv_gather seq_lens", &seq, NULL);
    fz_finish(t, "kv_gather gather_lens", &glen, NULL);
    fz_finish(t, "kv_gather block_table", &bt, NULL);
    fz_finish(t, "kv_gather out", &out, th_ptr(&want));
    ref_copy_done(t, "kv_gather_ref out", &want);
}

/* ---- topk_translate ------------------------------------------------------------------- */
static void case_translate(th_ctx_t *t, th_rng_t *r, int gpu, int64_t T) {
    const int64_t K = 1 + th_rng_u32(r) % 600, R = 1 + th_rng_u32(r) % 5, W = 1 + th_rng_u32(r) % 40;
    const int64_t P = 1 + th_rng_u32(r) % 128;
    const dsv4_topk_translate_desc_t d = {
        T, K, R, W, P, K + th_rng_u32(r) % 5, W + th_rng_u32(r) % 3, K + th_rng_u32(r) % 4};
    fz_t ti = fz_make(r, (size_t)(T * d.topk_stride) * 4, gpu), req = fz_make(r, (size_t)T * 4, gpu);
    fz_t bt = fz_make(r, (size_t)(R * d.block_table_stride) * 4, gpu), valid = fz_make(r, (size_t)T, gpu);
    fz_t out = fz_make(r, (size_t)(T * d.out_stride) * 4, gpu), lens = fz_make(r, (size_t)T * 4, gpu);
    for (int64_t i = 0; i < T * d.topk_stride; ++i) /* duplicates come with the small ranges */
        ((int32_t *)ti.h)[i] = (int32_t)adv_index(r, 0, th_rng_u32(r) % 2 ? 8 : W * P, 0);
    for (int64_t i = 0; i < T; ++i) ((int32_t *)req.h)[i] = (int32_t)adv_index(r, 0, R, 0);
    for (int64_t i = 0; i < R * d.block_table_stride; ++i) ((int32_t *)bt.h)[i] = (int32_t)adv_index(r, 0, 1 << 20, 0);
    if (gpu) th_buf_upload(&ti.d, ti.h), th_buf_upload(&req.d, req.h), th_buf_upload(&bt.d, bt.h);
    th_buf_t want = ref_copy(&out), want_lens = ref_copy(&lens);
    const dsv4_topk_translate_args_t ha = {ti.h, req.h, bt.h, valid.h, th_ptr(&want), th_ptr(&want_lens)};
    TH_OK(t, dsv4_topk_translate_ref(&d, &ha));
    if (gpu) {
        const dsv4_topk_translate_args_t da = {fz_dev(&ti),    fz_dev(&req), fz_dev(&bt),
                                               fz_dev(&valid), fz_dev(&out), fz_dev(&lens)};
        void *s = th_stream_create(t);
        run_ok(t, "topk_translate", dsv4_topk_translate(&d, &da, NULL, 0, DSV4_STREAM(s)), s);
    }
    fz_finish(t, "topk_translate topk_indices", &ti, NULL);
    fz_finish(t, "topk_translate token_to_req", &req, NULL);
    fz_finish(t, "topk_translate block_table", &bt, NULL);
    fz_finish(t, "topk_translate is_valid_token", &valid, NULL);
    fz_finish(t, "topk_translate global_indices", &out, th_ptr(&want));
    fz_finish(t, "topk_translate lens", &lens, th_ptr(&want_lens));
    ref_copy_done(t, "topk_translate_ref global_indices", &want);
    ref_copy_done(t, "topk_translate_ref lens", &want_lens);
}

/* One case of a random op; `largest` picks that op's largest size. */
static void one_case(th_ctx_t *t, th_rng_t *r, int gpu, int op, int largest) {
    const int64_t n = largest ? 0 : 1 + th_rng_u32(r) % 300;
    switch (op) {
    case 0: case_kv_insert(t, r, gpu, largest ? 65536 : n); break;
    case 1: case_kv_gather(t, r, gpu, largest ? 131072 : n); break;
    default: case_translate(t, r, gpu, largest ? 8192 : n); break;
    }
}

static void fuzz_loop(th_ctx_t *t, int gpu, long max_cases, double seconds) {
    th_rng_t *r = th_rng(t);
    const double end = now_s() + seconds;
    long n = 0;
    for (int op = 0; gpu && op < 3 && !th_failed(t); ++op, ++n) one_case(t, r, gpu, op, 1);
    while (n < max_cases && now_s() < end && !th_failed(t)) one_case(t, r, gpu, (int)(n++ % 3), 0);
    th_note(t, "%ld cases (kv_insert, kv_gather, topk_translate%s)", n, gpu ? "; the largest of each first" : "");
}

static void test_refs_cpu(th_ctx_t *t) { fuzz_loop(t, 0, 200, 1e9); }
static void test_ops_gpu(th_ctx_t *t) { fuzz_loop(t, 1, 1L << 40, budget_s()); }

static const th_test_t tests[] = {
    {"fuzz_gpu.refs", test_refs_cpu, TH_CPU},
    {"fuzz_gpu.ops_against_refs", test_ops_gpu, TH_GPU},
};

int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }
