/*
 * Internal to dsv4_compress: its plan (the descriptor with defaults resolved), the
 * launcher and the reference's loops. Plain C so tests can check the plan without a GPU.
 */
#ifndef DSV4_COMPRESS_LATENT_PLAN_H
#define DSV4_COMPRESS_LATENT_PLAN_H

#include <stdint.h>

#include "dsv4/compress.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t kv_stride, ring_stride; /* resolved; ring_stride 0 at ratio 1 */
} latent_plan_t;

dsv4_status_t latent_plan(const dsv4_compress_desc_t *desc, latent_plan_t *plan);
/* src/compress/latent_kernel.cu; called only with validated input and num_tokens > 0. */
dsv4_status_t latent_launch(const dsv4_compress_desc_t *desc, const latent_plan_t *plan,
                            const dsv4_compress_args_t *args, dsv4_stream_t stream);
/* src/compress/latent_ref.c, on validated input. */
dsv4_status_t latent_ref_run(const dsv4_compress_desc_t *desc, const latent_plan_t *plan,
                             const dsv4_compress_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_COMPRESS_LATENT_PLAN_H */
