/*
 * Shared pieces of the indices family's tests: device mirrors of host arrays with guard
 * bands (inputs checked unmodified, outputs poisoned), an int32 matrix comparator that
 * prints the first mismatches as (row, col) with the case that produced them, and the
 * test entry points of each file.
 */
#ifndef DSV4_TEST_IDX_TEST_H
#define DSV4_TEST_IDX_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/indices.h"
#include "harness.h"
#include "model_cases.h"

/* Outputs are poisoned with this byte: the int32 0xA5A5A5A5 is neither -1 nor a plausible
 * slot, so an element no one wrote stands out. */
#define IDX_POISON 0xA5
#define IDX_POISON_I32 ((int32_t)0xA5A5A5A5u)

/* A device copy of `bytes` bytes placed `off` bytes into a guarded buffer, so a caller can
 * pass a pointer that is 4- but not 16-byte aligned. */
typedef struct {
    th_buf_t buf;
    size_t off, bytes;
    const void *host; /* input: the original contents (checked unmodified) */
    const char *what;
} idx_dev_t;

idx_dev_t idx_dev_in(const void *host, size_t bytes, size_t off, const char *what);
idx_dev_t idx_dev_out(size_t bytes, size_t off, const char *what); /* whole payload poisoned */
void *idx_dev_ptr(const idx_dev_t *d);
/* Guards intact and (inputs) contents unchanged; 1 when fine. */
int idx_dev_check_in(th_ctx_t *t, const idx_dev_t *d);
/* Downloads the `bytes` at the pointer into host_out and checks the guards and the poison of
 * the `off` bytes before the pointer. */
void idx_dev_get(th_ctx_t *t, const idx_dev_t *d, void *host_out);
void idx_dev_free(idx_dev_t *d);
/* After a run: checks the inputs (guards, unchanged) and frees inputs and outputs (whose
 * results the caller has already fetched with idx_dev_get). */
void idx_dev_finish(th_ctx_t *t, idx_dev_t *const ins[], int n_in, idx_dev_t *const outs[], int n_out);
/* Records a failing run status with its message, synchronizes and destroys the stream;
 * returns 1 when the run call succeeded. */
int idx_sync_status(th_ctx_t *t, const char *name, dsv4_status_t st, void *stream);

/* Host array of n int32 filled with the poison. */
int32_t *idx_poisoned_i32(size_t n);

/* Compares n int32 laid out as rows of `stride` (n = rows * stride, or any n with stride 0
 * for a flat list). Prints up to 8 mismatches with their (row, col), then a count. */
size_t idx_cmp_i32(th_ctx_t *t, const char *case_name, const char *what, const int32_t *got, const int32_t *want,
                   size_t n, int64_t stride);

/* Expects a non-success status whose message names `op` and `field`. */
void idx_expect_fail(th_ctx_t *t, const char *call, dsv4_status_t st, dsv4_status_t want, const char *op,
                     const char *field);
#define IDX_EXPECT_FAIL(t, call, want, op, field) idx_expect_fail((t), #call, (call), (want), (op), (field))

/* ---- per-op cases and GPU runners (host arrays in, host arrays out) ------------------- */
typedef struct {
    dsv4_topk_translate_desc_t d;
    int32_t *topk, *t2r, *table;
    uint8_t *valid;
    char name[200];
} tt_case_t;
/* pad: 0 dense strides; 1 each stride padded by a few elements; 2 as 1 but the table
 * stride is a multiple of 4 above the width (16-byte aligned table rows). */
void tt_case_make(th_rng_t *r, tt_case_t *c, int64_t T, int64_t K, int64_t R, int64_t width, int64_t bs, int kind,
                  int pad);
void tt_case_free(tt_case_t *c);
void tt_check_case(th_ctx_t *t, const tt_case_t *c, size_t in_off, size_t out_off, int packed);
/* Run through the device with guarded, poisoned buffers; outputs land in h's host arrays.
 * `in_off` / `out_off` bytes shift the top-k input / main output pointer (4: misaligned). */
int tt_gpu_dense(th_ctx_t *t, const char *name, const dsv4_topk_translate_desc_t *d,
                 const dsv4_topk_translate_args_t *h, size_t in_off, size_t out_off);
int tt_gpu_packed(th_ctx_t *t, const char *name, const dsv4_topk_translate_desc_t *d,
                  const dsv4_topk_translate_packed_args_t *h, size_t in_off, size_t out_off);
int cmb_gpu(th_ctx_t *t, const char *name, const dsv4_combine_topk_swa_desc_t *d, const dsv4_combine_topk_swa_args_t *h,
            size_t in_off, size_t out_off);
int dsw_gpu(th_ctx_t *t, const char *name, const dsv4_decode_swa_indices_desc_t *d,
            const dsv4_decode_swa_indices_args_t *h, size_t out_off);

/* Each file's tests. */
void test_idx_page_division(th_ctx_t *t);
void test_idx_planning(th_ctx_t *t);
void test_kat_translate(th_ctx_t *t);
void test_kat_translate_packed(th_ctx_t *t);
void test_kat_decode_swa(th_ctx_t *t);
void test_kat_combine(th_ctx_t *t);
void test_kat_library_choices(th_ctx_t *t);
void test_kat_gpu(th_ctx_t *t);
void test_translate_gpu_random(th_ctx_t *t);
void test_translate_gpu_model(th_ctx_t *t);
void test_translate_packed_gpu(th_ctx_t *t);
void test_combine_gpu_warmup(th_ctx_t *t);
void test_combine_gpu_random(th_ctx_t *t);
void test_combine_gpu_requests(th_ctx_t *t);
void test_translate_gpu_grid_stride(th_ctx_t *t);
void test_combine_gpu_grid_stride(th_ctx_t *t);
void test_decode_swa_gpu_random(th_ctx_t *t);
void test_bad_input_cpu(th_ctx_t *t);
void test_bad_input_gpu(th_ctx_t *t);

#endif
