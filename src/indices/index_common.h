/*
 * Internal helpers of the indices family shared by the host planners and the kernels
 * (never by the CPU references, which use plain / and %, so the kernels' arithmetic is
 * checked against an independent form).
 *
 * Fast division by a run-time constant (the page size): the hot loops divide every index
 * by the same d, and an integer division costs about twenty instructions on the GPU, so
 * the host precomputes a multiplier and the kernels use one wide multiply and a shift.
 * Round-up method (Granlund-Montgomery): with l = ceil(log2 d), p = 31 + l and
 * m = ceil(2^p / d) = (2^p + e) / d where 0 <= e < d <= 2^l,
 *     n * m / 2^p = n / d + n * e / (d * 2^p),
 * and the error term is below 1/d for every n < 2^31 (n * e < 2^31 * 2^l = 2^p), so
 * floor(n * m / 2^p) = floor(n / d). m < 2^32 for every d in [1, 2^31-1] (for d a power of
 * two m = 2^31; otherwise d > 2^(l-1) keeps m below 2^32). d = 1 gives m = 2^31, p = 31.
 */
#ifndef DSV4_INDICES_INDEX_COMMON_H
#define DSV4_INDICES_INDEX_COMMON_H

#include <stdint.h>

#include "dsv4/numerics.h" /* DSV4_HD: static inline on the host, __host__ __device__ in nvcc */

typedef struct dsv4_idx_fastdiv {
    uint32_t mul;   /* m = ceil(2^shift / d)   */
    uint32_t shift; /* p = 31 + ceil(log2 d)   */
} dsv4_idx_fastdiv_t;

/* d must be in [1, 2^31 - 1] (the host checks sizes before planning). */
static inline dsv4_idx_fastdiv_t dsv4_idx_fastdiv_make(uint32_t d) {
    uint32_t l = 0;
    while (l < 31 && (1ull << l) < (uint64_t)d) ++l;
    dsv4_idx_fastdiv_t f;
    f.shift = 31 + l;
    f.mul = (uint32_t)(((1ull << f.shift) + d - 1) / d);
    return f;
}

/* floor(n / d) for 0 <= n < 2^31. */
DSV4_HD uint32_t dsv4_idx_div(uint32_t n, dsv4_idx_fastdiv_t f) { return (uint32_t)(((uint64_t)n * f.mul) >> f.shift); }

/* Values the library writes as "invalid". */
#define DSV4_IDX_INVALID (-1)

#endif /* DSV4_INDICES_INDEX_COMMON_H */
