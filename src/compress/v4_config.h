/* dsv4_compress_v4 kernel shapes (v4_kernel.cu says why). */
#ifndef DSV4_COMPRESS_V4_CONFIG_H
#define DSV4_COMPRESS_V4_CONFIG_H

#include "common/launch.h"
#include "compress/v4_math.h"

#define V4_SAVE_THREADS 256 /* 256 x 16 bytes: a ratio-128 state row in one pass */
#define V4_DIM_THREADS 128  /* = CL_PARTIALS: 4 dims per thread */
/* Threads sharing a dim quad: 1 at ratio 4 (8 rows each), 4 at ratio 128 (32 rows each). */
#define V4_QUARTERS(R) ((R) == 128 ? 4 : 1)
#define V4_THREADS(R) (V4_DIM_THREADS * V4_QUARTERS(R))
#define V4_MIN_BLOCKS(R) ((R) == 128 ? 2 : 8)
/* Static shared memory at ratio 128: window offsets, the quarters' sums, the partials, y. */
#define V4_SMEM_BYTES (V4_MAX_WINDOW * 8 + 2 * V4_QUARTERS(128) * V4_DIM_THREADS * 16 + V4_DIM_THREADS * 4 + 1024)
DSV4_SMEM_BUDGET_ASSERT(V4_SMEM_BYTES, "compress_v4");

#if defined(__cplusplus)
static_assert(V4_DIM_THREADS == CL_PARTIALS, "one partial sum of 4 dims per thread");
static_assert(V4_MAX_WINDOW % (V4_GROUP * V4_QUARTERS(128)) == 0, "whole groups per quarter");
#endif

#endif /* DSV4_COMPRESS_V4_CONFIG_H */
