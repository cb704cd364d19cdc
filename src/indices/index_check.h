/*
 * Internal: host-side argument checks shared by the indices family. Each fails with a
 * sentence naming the operator, the field and the value (src/common/error.h).
 */
#ifndef DSV4_INDICES_INDEX_CHECK_H
#define DSV4_INDICES_INDEX_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A required int32 tensor pointer: non-NULL (NULL_POINTER) and 4-byte aligned (MISALIGNED). */
dsv4_status_t dsv4_idx_check_i32(const char *op, const char *what, const void *p);

/* dsv4_idx_check_i32 on n pointers in order: ptrs[i] is named names[i]. */
dsv4_status_t dsv4_idx_check_i32_all(const char *op, int n, const char *const names[], const void *const ptrs[]);

/* workspace_size of an op that needs no workspace: the descriptor check's status, then a
 * non-NULL `bytes`, which gets 0. */
dsv4_status_t dsv4_idx_no_workspace(const char *op, dsv4_status_t desc_status, size_t *bytes);

/* What a run call checks after its arguments: the workspace (`need` bytes, 4-byte aligned
 * when any is needed) and the stream. */
dsv4_status_t dsv4_idx_check_launch(const char *op, size_t need, const void *ws, size_t ws_bytes, dsv4_stream_t stream);

/* Resolves a row stride (0 only where it addresses nothing: dsv4_given_stride) into *out
 * after checking stride >= width and that
 * `rows` rows of it stay addressable (rows * stride * 4 bytes below 2^62). */
dsv4_status_t dsv4_idx_check_stride(const char *op, const char *what, int64_t stride, int64_t width, int64_t rows,
                                    int64_t *out);

/* 1 when rows of `width` int32 at `p` with row stride `stride` can be read or written as
 * 16-byte chunks: p 16-byte aligned, stride and width multiples of 4. */
int dsv4_idx_vec16(const void *p, int64_t stride, int64_t width);

/* Internal test hook, not part of the API: when > 0, the grid-stride kernels (dense
 * translation, combine) launch at most this many CTAs, so that a test drives every warp
 * through many rows. 0 (the default): the resident grid. Set it only from a
 * single-threaded test, between runs. */
extern int dsv4_idx_grid_cap;

#ifdef __cplusplus
}
#endif

#endif /* DSV4_INDICES_INDEX_CHECK_H */
