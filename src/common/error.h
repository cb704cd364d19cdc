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
/* A bf16 row stride in elements: >= min_elems, `rows` rows of it addressable with 64-bit
 * byte offsets (INVALID_VALUE), and a multiple of 8 so rows stay 16-byte aligned
 * (MISALIGNED). */
dsv4_status_t dsv4_check_row_stride(const char *op, const char *what, int64_t stride, int64_t min_elems, int64_t rows);

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
