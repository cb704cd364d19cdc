/*
 * Internal to the kvcache family: the host-side checks the three operators share, each
 * operator's plan (its descriptor with defaults resolved and its grid), and the
 * launchers that the .cu files export. Plans are plain C so tests can check them
 * without a GPU.
 */
#ifndef DSV4_KVCACHE_KV_COMMON_H
#define DSV4_KVCACHE_KV_COMMON_H

#include <stdint.h>

#include "dsv4/kvcache.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Run-call preamble shared by the operators: the stream and the (unused) workspace. */
dsv4_status_t kv_check_run(const char *op, dsv4_stream_t stream, const void *workspace, size_t workspace_bytes);

/* Multiprocessors of the current device, for grids sized to what stays resident (a
 * device query: no allocation, no synchronization, legal during graph capture). */
dsv4_status_t kv_sm_count(const char *op, int *count);

/* ---- plans --------------------------------------------------------------------------- */
typedef struct {
    int64_t k_stride_row; /* resolved */
    int64_t blocks;       /* CTAs of KV_INSERT_WARPS warps, one warp per token */
} kv_insert_plan_t;

typedef struct {
    int64_t heads_padded, q_stride_token, q_stride_head, kv_stride_row; /* resolved */
    int64_t tasks_per_token;                                            /* heads_padded q heads + 1 kv row */
    int64_t blocks; /* CTAs of KV_SWA_WARPS warps, one warp per task */
} kv_swa_plan_t;

typedef struct {
    int64_t block_table_stride, out_stride_req, out_stride_row; /* resolved */
    int64_t workers; /* CTAs per request (grid.y); each warp strides over the rows */
} kv_gather_plan_t;

/* Validate a descriptor (everything but pointers) and fill the plan. */
dsv4_status_t kv_insert_plan(const dsv4_kv_insert_desc_t *desc, kv_insert_plan_t *plan);
/* kv_rope_insert runs kv_insert's kernel shape: its plan is kv_insert's (latent stride). */
dsv4_status_t kv_rope_insert_plan(const dsv4_kv_rope_insert_desc_t *desc, kv_insert_plan_t *plan);
dsv4_status_t kv_swa_plan(const dsv4_kv_swa_write_desc_t *desc, kv_swa_plan_t *plan);
dsv4_status_t kv_gather_plan(const dsv4_kv_gather_desc_t *desc, kv_gather_plan_t *plan);

/* ---- launchers (src/kvcache/<op>_kernel.cu); called only with validated input ------- */
dsv4_status_t kv_insert_launch(const dsv4_kv_insert_desc_t *desc, const kv_insert_plan_t *plan,
                               const dsv4_kv_insert_args_t *args, dsv4_stream_t stream);
dsv4_status_t kv_rope_insert_launch(const dsv4_kv_rope_insert_desc_t *desc, const kv_insert_plan_t *plan,
                                    const dsv4_kv_rope_insert_args_t *args, dsv4_stream_t stream);
dsv4_status_t kv_swa_launch(const dsv4_kv_swa_write_desc_t *desc, const kv_swa_plan_t *plan,
                            const dsv4_kv_swa_write_args_t *args, dsv4_stream_t stream);
dsv4_status_t kv_gather_launch(const dsv4_kv_gather_desc_t *desc, const kv_gather_plan_t *plan,
                               const dsv4_kv_gather_args_t *args, dsv4_stream_t stream);

/* ---- the references' loops (src/kvcache/<op>_ref.c), on validated input ------------- */
dsv4_status_t kv_insert_ref_run(const dsv4_kv_insert_desc_t *desc, const kv_insert_plan_t *plan,
                                const dsv4_kv_insert_args_t *args);
dsv4_status_t kv_rope_insert_ref_run(const dsv4_kv_rope_insert_desc_t *desc, const kv_insert_plan_t *plan,
                                     const dsv4_kv_rope_insert_args_t *args);
dsv4_status_t kv_swa_ref_run(const dsv4_kv_swa_write_desc_t *desc, const kv_swa_plan_t *plan,
                             const dsv4_kv_swa_write_args_t *args);
dsv4_status_t kv_gather_ref_run(const dsv4_kv_gather_desc_t *desc, const kv_gather_plan_t *plan,
                                const dsv4_kv_gather_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_KVCACHE_KV_COMMON_H */
