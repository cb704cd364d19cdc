/*
 * Internal helpers of the indices family shared by the host planners and the kernels
 * (never by the CPU references, which use plain / and %, so the kernels' arithmetic is
 * checked against an independent form).
 *
 * Division by the page size: the hot loops divide every index by the same P, so they use
 * the cache format's multiply-high division (common/kv_format.h, exact for n < 2^31).
 */
#ifndef DSV4_INDICES_INDEX_COMMON_H
#define DSV4_INDICES_INDEX_COMMON_H

#include <stdint.h>

#include "common/kv_format.h"
#include "dsv4/numerics.h" /* DSV4_HD: static inline on the host, __host__ __device__ in nvcc */

/* Values the library writes as "invalid". */
#define DSV4_IDX_INVALID (-1)

#endif /* DSV4_INDICES_INDEX_COMMON_H */
