/* dsv4_compress_v4 internals: the plan (descriptor with strides resolved), the launcher
 * (v4_kernel.cu) and the reference's loops (v4_ref.c). Contract: include/dsv4/compress.h. */
#ifndef DSV4_COMPRESS_V4_PLAN_H
#define DSV4_COMPRESS_V4_PLAN_H

#include <stdint.h>

#include "dsv4/compress.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t kv_stride, state_stride_block, state_stride_row, block_table_stride; /* resolved */
    int64_t head;                                                                /* N: 512 or 128 */
    int64_t width;  /* c * N: floats in each half of a kv_score or state row */
    int64_t window; /* W = c * ratio rows */
} v4_plan_t;

dsv4_status_t v4_plan(const dsv4_compress_v4_desc_t *desc, v4_plan_t *plan);
dsv4_status_t v4_launch(const dsv4_compress_v4_desc_t *desc, const v4_plan_t *plan, const dsv4_compress_v4_args_t *args,
                        dsv4_stream_t stream);
/* The reference's pooling of one closing row: x[d] for d < N from the W window rows at
 * element offsets off[j] of state (-1: not read), each row's kv at off[j] and its scores
 * width floats later (tests check it against an exact evaluation). */
void v4_ref_pool(const float *state, const int64_t *off, int64_t W, int64_t width, int64_t N, float *x);
dsv4_status_t v4_ref_run(const dsv4_compress_v4_desc_t *desc, const v4_plan_t *plan,
                         const dsv4_compress_v4_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_COMPRESS_V4_PLAN_H */
