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

/* The geometry dsv4_indexer_topk and dsv4_indexer_logits share, defaults resolved. */
typedef struct {
    int64_t rows, heads, ratio, num_reqs, bt_width, bt_stride;
    int64_t page_tokens, page_stride_bytes, num_pages, max_keys;
    int64_t col_cap; /* min(max_keys, bt_width * page_tokens): n_t never exceeds it */
} idx_src_t;

typedef struct {
    idx_src_t src;
    int64_t topk, topk_stride, mode, cand_count, cand_stride;
    int64_t slices;     /* num_heads / 32: 32-head slices, one warp each            */
    int64_t group_rows; /* R: rows a pass-A CTA scores together                   */
    int64_t cap;        /* candidate buffer entries per row in pass A             */
    int64_t groups;     /* ceil(rows / R)                                         */
    int64_t splits;     /* S: column splits per row                               */
    int64_t split_len;  /* columns per split, a multiple of 64, <= 65,536         */
    size_t ws_pairs;    /* bytes of the split results: rows * S * topk * 8        */
    size_t ws_scores;   /* at offset ws_pairs: block scores (mode 1), lists (mode 2) */
    size_t ws_bytes;    /* the total                                              */
} idx_topk_plan_t;

typedef struct {
    idx_src_t src;
    int64_t out_cols, out_stride;
    int64_t group_rows, groups; /* as the top-k plan's                              */
    int64_t chunks;             /* column chunks of IDX_LOGITS_CHUNK per row group */
} idx_logits_plan_t;

dsv4_status_t idx_q_plan(const dsv4_indexer_q_desc_t *desc, idx_q_plan_t *plan);
dsv4_status_t idx_k_plan(const dsv4_indexer_k_store_desc_t *desc, idx_k_plan_t *plan);
dsv4_status_t idx_topk_plan(const dsv4_indexer_topk_desc_t *desc, idx_topk_plan_t *plan);
dsv4_status_t idx_logits_plan(const dsv4_indexer_logits_desc_t *desc, idx_logits_plan_t *plan);

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
dsv4_status_t idx_topk_launch(const idx_topk_plan_t *plan, const dsv4_indexer_topk_args_t *args, void *workspace,
                              dsv4_stream_t stream);
dsv4_status_t idx_logits_launch(const idx_logits_plan_t *plan, const dsv4_indexer_logits_args_t *args,
                                dsv4_stream_t stream);

/* ---- the references' loops (src/indexer/<op>_ref.c), on validated input -------------- */
dsv4_status_t idx_q_ref_run(const dsv4_indexer_q_desc_t *desc, const idx_q_plan_t *plan,
                            const dsv4_indexer_q_args_t *args);
dsv4_status_t idx_k_ref_run(const dsv4_indexer_k_store_desc_t *desc, const idx_k_plan_t *plan,
                            const dsv4_indexer_k_store_args_t *args);

/* The inputs of one row of the logits (the fields of both args structs). */
typedef struct {
    const uint8_t *q8;
    const float *w;
    const int64_t *positions;
    const int32_t *row_req;
    const uint8_t *row_valid;
    const int32_t *block_table;
    const uint8_t *cache;
} idx_src_args_t;

/* Columns of row t: n_t, or 0 for an invalid row (padding, request out of range). */
int64_t idx_ref_row_cols(const idx_src_t *src, const idx_src_args_t *a, int64_t t);
/* The reference logit of row t, column j < n_t. */
float idx_ref_logit(const idx_src_t *src, const idx_src_args_t *a, int64_t t, int64_t j);
/* The selection of one row with n columns, its logits given by fn(ctx, j) (called once
 * per needed column, j ascending): writes topk[0 .. K) and, in mode 1, cand[0 .. C);
 * mode 2 reads cand. The GPU tests run it on dsv4_indexer_logits' output. */
typedef float (*idx_logit_fn)(const void *ctx, int64_t j);
void idx_ref_select_row(const idx_topk_plan_t *plan, int64_t n, idx_logit_fn fn, const void *ctx, int32_t *topk,
                        int32_t *cand);
dsv4_status_t idx_topk_ref_run(const idx_topk_plan_t *plan, const dsv4_indexer_topk_args_t *args);
dsv4_status_t idx_logits_ref_run(const idx_logits_plan_t *plan, const dsv4_indexer_logits_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_INDEXER_INDEXER_COMMON_H */
