/*
 * Internal to the indexer family: each operator's plan (its descriptor with defaults
 * resolved, and its grid), the launchers the .cu files export and the references' loops.
 * Plans are plain C so tests can check them without a GPU.
 */
#ifndef DSV4_INDEXER_INDEXER_COMMON_H
#define DSV4_INDEXER_INDEXER_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/indexer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t q_stride_token, q_stride_head, w_stride_token; /* resolved */
    float softmax_scale, head_scale;                       /* resolved */
    int64_t rows;                                          /* num_tokens * num_heads */
    unsigned blocks;                                       /* CTAs of the kernel's grid */
} idx_q_plan_t;

typedef struct {
    int64_t k_stride_row; /* resolved */
    int64_t slots;        /* num_pages * page_tokens: slots at or above are skipped */
    unsigned blocks;      /* CTAs of the kernel's grid */
} idx_k_plan_t;

dsv4_status_t idx_q_plan(const dsv4_indexer_q_desc_t *desc, idx_q_plan_t *plan);
dsv4_status_t idx_k_plan(const dsv4_indexer_k_store_desc_t *desc, idx_k_plan_t *plan);

/* Run-call preamble shared by both operators: the stream, and the workspace (none). */
dsv4_status_t idx_check_run(const char *op, dsv4_stream_t stream, const void *workspace, size_t workspace_bytes);
/* A float field that must be finite and >= 0 (INVALID_VALUE otherwise). */
dsv4_status_t idx_check_nonneg(const char *op, const char *what, float v);
/* CTAs for `rows` at rows_per_cta, capped at IDX_MAX_BLOCKS (the kernels stride over the rest). */
unsigned idx_blocks(int64_t rows, int64_t rows_per_cta);

/* ---- launchers (src/indexer/<op>_kernel.cu); called only with validated input -------- */
dsv4_status_t idx_q_launch(const dsv4_indexer_q_desc_t *desc, const idx_q_plan_t *plan,
                           const dsv4_indexer_q_args_t *args, dsv4_stream_t stream);
dsv4_status_t idx_k_launch(const dsv4_indexer_k_store_desc_t *desc, const idx_k_plan_t *plan,
                           const dsv4_indexer_k_store_args_t *args, dsv4_stream_t stream);

/* ---- the references' loops (src/indexer/<op>_ref.c), on validated input -------------- */
dsv4_status_t idx_q_ref_run(const dsv4_indexer_q_desc_t *desc, const idx_q_plan_t *plan,
                            const dsv4_indexer_q_args_t *args);
dsv4_status_t idx_k_ref_run(const dsv4_indexer_k_store_desc_t *desc, const idx_k_plan_t *plan,
                            const dsv4_indexer_k_store_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_INDEXER_INDEXER_COMMON_H */
