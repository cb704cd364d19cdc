/*
 * Tile sizes of the top-k + SWA combine kernel and the host <-> launcher interface.
 *
 * One warp per token row at a time (grid-stride over rows), DSV4_CMB_WARPS warps per CTA.
 * A warp writes its row in batches of 32 lanes x DSV4_CMB_UNROLL chunks of 4 columns (512
 * columns), so C = 640 takes two batches and C = 128 one. No shared memory.
 */
#ifndef DSV4_INDICES_COMBINE_TOPK_SWA_CONFIG_H
#define DSV4_INDICES_COMBINE_TOPK_SWA_CONFIG_H

#include <stdint.h>

#include "common/launch.h"
#include "dsv4/indices.h"

#define DSV4_CMB_WARPS 4
#define DSV4_CMB_THREADS (DSV4_CMB_WARPS * 32)
#define DSV4_CMB_UNROLL 4
#define DSV4_CMB_BATCH_COLS (32 * 4 * DSV4_CMB_UNROLL) /* columns per batch of a warp (512) */
/* Up to this many requests, one round of loads (lane l reads qsl[l], seq_lens[l] and
 * gather_lens[l]) finds a token's request; above it a 32-ary search over qsl runs. */
#define DSV4_CMB_FAST_REQS 31
/* Up to this many tokens (one wave of CTAs: latency-bound) the first batch of top-k columns
 * of a warp's first row is loaded before its request lookup; above it only the columns
 * below topk_len are read (bandwidth-bound: no DRAM bytes for -1 columns). */
#define DSV4_CMB_SPEC_MAX_TOKENS 4096

DSV4_SMEM_BUDGET_ASSERT(0, "combine_topk_swa (no shared memory)");

typedef struct dsv4_cmb_params {
    const int32_t *topk_indices; /* [T, topk_stride]; read only when topk_load > 0       */
    const int32_t *qsl;          /* [R+1]                                                */
    const int32_t *seq_lens;     /* [R]                                                  */
    const int32_t *gather_lens;  /* [R]                                                  */
    int32_t *out;                /* [T, out_stride]                                      */
    int32_t *lens;               /* [T]                                                  */
    int64_t topk_stride, out_stride;
    int32_t num_tokens, num_reqs;
    int32_t topk;      /* TOP_K                                                          */
    int32_t topk_load; /* columns that may be read: TOP_K, or 0 when ratio == 0            */
    int32_t spec_load; /* columns of batch 0 loaded before the request lookup (<= batch)   */
    int32_t window, ratio, cols, slab_rows, swa_row0;
    int32_t vec; /* 16-byte loads and stores allowed                               */
} dsv4_cmb_params_t;

typedef struct dsv4_cmb_layout {
    int64_t cols;        /* C                                                 */
    int64_t topk_stride; /* resolved (0 in the descriptor means topk_cols)    */
    int64_t out_stride;  /* resolved (0 means C)                              */
    int64_t topk_load;   /* TOP_K, or 0 when ratio == 0                       */
} dsv4_cmb_layout_t;

#ifdef __cplusplus
extern "C" {
#endif
/* Full validation of a call (descriptor, args, pointers), shared by the run call and the
 * reference; resolves the layout. */
dsv4_status_t dsv4_cmb_validate(const char *op, const dsv4_combine_topk_swa_desc_t *d,
                                const dsv4_combine_topk_swa_args_t *a, dsv4_cmb_layout_t *l);
dsv4_status_t dsv4_combine_topk_swa_launch(const dsv4_cmb_params_t *p, int v4_mode, dsv4_stream_t stream);
#ifdef __cplusplus
}
#endif

#endif /* DSV4_INDICES_COMBINE_TOPK_SWA_CONFIG_H */
