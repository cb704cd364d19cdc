/*
 * Internal: failing with a status and a sentence, and the checks every operator's host
 * side runs before it launches anything. Each check names the operator and the value.
 */
#ifndef DSV4_COMMON_ERROR_H
#define DSV4_COMMON_ERROR_H

#include <stdint.h>

#include "dsv4/dsv4.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DSV4_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DSV4_PRINTF(a, b)
#endif

/* Record "op: message" as this thread's last error and return `status`. */
dsv4_status_t dsv4_fail(dsv4_status_t status, const char *op, const char *fmt, ...) DSV4_PRINTF(3, 4);

/* Checks; each returns SUCCESS or fails with a sentence that names `op` and `what`. */
dsv4_status_t dsv4_check_ptr(const char *op, const char *what, const void *p);
dsv4_status_t dsv4_check_range(const char *op, const char *what, int64_t v, int64_t lo, int64_t hi);
dsv4_status_t dsv4_check_align(const char *op, const char *what, const void *p, int64_t align);
/* A row stride in elements of elem_bytes: >= min_elems, `rows` rows of it addressable with
 * 64-bit byte offsets (INVALID_VALUE), and a multiple of `multiple` elements so rows keep
 * the kernels' alignment (MISALIGNED). */
dsv4_status_t dsv4_check_row_stride(const char *op, const char *what, int64_t stride, int64_t min_elems, int64_t rows,
                                    int64_t elem_bytes, int64_t multiple);
/* The bf16 rows of the kvcache and compress operators: 16-byte aligned. */
#define DSV4_CHECK_BF16_ROWS(op, what, stride, min_elems, rows)                                                        \
    dsv4_check_row_stride(op, what, stride, min_elems, rows, 2, 8)

/* A paged cache of num_pages pages, page_stride_bytes apart, each holding page_tokens slots
 * of slot_bytes: page_tokens in [1, 2^24], a stride >= page_tokens * slot_bytes
 * (INVALID_VALUE) and a multiple of 16 (MISALIGNED: the kernels move 16-byte pieces),
 * num_pages >= 1 with every page at a 64-bit offset (INVALID_VALUE). */
dsv4_status_t dsv4_check_pages(const char *op, int64_t page_tokens, int64_t page_stride_bytes, int64_t num_pages,
                               int64_t slot_bytes);

/* Strides have no default (dsv4.h): a stride of 0 on a dimension of extent > 1 would
 * alias its rows, so it fails (INVALID_VALUE naming `what`). On extent <= 1 the stride
 * addresses nothing; there 0 stands for `unused`, a value the later checks accept.
 * Stores the stride to use in *out. */
dsv4_status_t dsv4_given_stride(const char *op, const char *what, int64_t stride, int64_t extent, int64_t unused,
                                int64_t *out);

dsv4_status_t dsv4_check_stream(const char *op, dsv4_stream_t stream);
dsv4_status_t dsv4_check_workspace(const char *op, size_t need, const void *ws, size_t have);

/* Propagate a failing status from a nested check. */
#define DSV4_TRY(expr)                                                                                                 \
    do {                                                                                                               \
        dsv4_status_t dsv4_try_st_ = (expr);                                                                           \
        if (dsv4_try_st_ != DSV4_STATUS_SUCCESS) return dsv4_try_st_;                                                  \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
