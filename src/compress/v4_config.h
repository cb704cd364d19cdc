/* dsv4_compress_v4 kernel shapes (v4_kernel.cu says why). */
#ifndef DSV4_COMPRESS_V4_CONFIG_H
#define DSV4_COMPRESS_V4_CONFIG_H

#include "common/launch.h"
#include "compress/v4_math.h"

#define V4_SAVE_THREADS 256         /* 256 x 16 bytes: a ratio-128 state row in one pass */
#define V4_DIM_THREADS(N) ((N) / 4) /* 4 dims per thread: 128 at N = 512 (= CL_PARTIALS), 32 at 128 */
/* Threads sharing a dim quad: 1 at ratio 4 (8 rows each), 4 at ratio 128 (32 rows each). */
#define V4_QUARTERS(R) ((R) == 128 ? 4 : 1)
#define V4_THREADS(R, N) (V4_DIM_THREADS(N) * V4_QUARTERS(R))
#define V4_MIN_BLOCKS(R, N) ((R) == 128 ? ((N) == 512 ? 2 : 8) : ((N) == 512 ? 8 : 16))
/* Static shared memory at ratio 128, N = 512: window offsets, the quarters' sums, the
 * partials, y. */
#define V4_SMEM_BYTES (V4_MAX_WINDOW * 8 + 2 * V4_QUARTERS(128) * V4_DIM_THREADS(512) * 16 + CL_PARTIALS * 4 + 1024)
DSV4_SMEM_BUDGET_ASSERT(V4_SMEM_BYTES, "compress_v4");

#if defined(__cplusplus)
static_assert(V4_DIM_THREADS(512) == CL_PARTIALS, "one partial sum of 4 dims per thread");
static_assert(V4_DIM_THREADS(128) == 32, "one warp holds a 128-dim key");
static_assert(V4_MAX_WINDOW % (V4_GROUP * V4_QUARTERS(128)) == 0, "whole groups per quarter");
#endif

#endif /* DSV4_COMPRESS_V4_CONFIG_H */
