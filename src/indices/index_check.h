/*
 * Internal: host-side argument checks shared by the indices family. Each fails with a
 * sentence naming the operator, the field and the value (src/common/error.h).
 */
#ifndef DSV4_INDICES_INDEX_CHECK_H
#define DSV4_INDICES_INDEX_CHECK_H

#include <stdint.h>

#include "common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A required int32 tensor pointer: non-NULL (NULL_POINTER) and 4-byte aligned (MISALIGNED). */
dsv4_status_t dsv4_idx_check_i32(const char *op, const char *what, const void *p);

/* Resolves a row stride (0 means `width`) into *out after checking stride >= width and that
 * `rows` rows of it stay addressable (rows * stride * 4 bytes below 2^62). */
dsv4_status_t dsv4_idx_check_stride(const char *op, const char *what, int64_t stride, int64_t width, int64_t rows,
                                    int64_t *out);

/* 1 when rows of `width` int32 at `p` with row stride `stride` can be read or written as
 * 16-byte chunks: p 16-byte aligned, stride and width multiples of 4. */
int dsv4_idx_vec16(const void *p, int64_t stride, int64_t width);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_INDICES_INDEX_CHECK_H */
