/*
 * Tile sizes of the top-k translation kernels (dense and packed), and the plain parameter
 * block the host planner hands to the launchers.
 *
 * One warp per token row; a row is processed in segments of DSV4_TT_SEG columns (32 lanes
 * x 4 columns x DSV4_TT_UNROLL chunks). Each warp stages the block-table pages that its
 * segment touches in its own slice of shared memory when the page range is dense enough
 * (see topk_translate_kernel.cu); the slice is smaller on SM86/SM89, whose SMs have
 * 100 KB of shared memory, so that 12 CTAs still fit per SM.
 */
#ifndef DSV4_INDICES_TOPK_TRANSLATE_CONFIG_H
#define DSV4_INDICES_TOPK_TRANSLATE_CONFIG_H

#include <stdint.h>

#include "common/launch.h"
#include "dsv4/indices.h"
#include "common/kv_format.h"

#define DSV4_TT_WARPS 4 /* warps (= rows in flight) per CTA */
#define DSV4_TT_THREADS (DSV4_TT_WARPS * 32)
/* Minimum resident CTAs per SM given to ptxas (__launch_bounds__): caps the kernels at 80
 * registers. Without it ptxas picks a lower register target on sm_86/sm_90 and spills;
 * 6 CTAs (24 warps) still keep 48 KB of top-k loads in flight per SM. */
#define DSV4_TT_MIN_CTAS 6
#define DSV4_TT_UNROLL 4                      /* 16-byte chunks per lane per segment */
#define DSV4_TT_SEG (32 * 4 * DSV4_TT_UNROLL) /* 512 columns per segment            */

/* Per-warp staging slice, in block-table entries (pages). */
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 870 || __CUDA_ARCH__ == 890)
#define DSV4_TT_STAGE_PAGES 512
#else
#define DSV4_TT_STAGE_PAGES 1024
#endif
#define DSV4_TT_STAGE_PAGES_MAX 1024
/* Stage a segment's page range [pmin, pmax] only when it spans more than one 128-byte
 * line's worth of pages (below that the L1 serves the gather in one wavefront) and holds
 * at least one valid index per DSV4_TT_STAGE_PAGES_PER_HIT pages (else staging reads more
 * table than the gather touches). */
#define DSV4_TT_STAGE_MIN_PAGES 32
#define DSV4_TT_STAGE_PAGES_PER_HIT 16

/* Four staging slices plus the packed kernel's few words of reduction scratch. */
DSV4_SMEM_BUDGET_ASSERT((DSV4_TT_WARPS * DSV4_TT_STAGE_PAGES_MAX * 4 + 64), "topk_translate staging");

/* Packed variant: rows are taken in groups (one CTA per group in both launches); the group
 * is 4 rows up to T = 4 * DSV4_TT_MAX_GROUPS and grows beyond, so each CTA of the pack
 * launch sums at most DSV4_TT_MAX_GROUPS group totals to find its offset. */
#define DSV4_TT_MAX_GROUPS 2048

typedef struct dsv4_tt_params {
    const int32_t *topk_indices; /* [T, topk_stride]                                   */
    const int32_t *token_to_req; /* [T]                                                */
    const int32_t *table;        /* [R, block_table_stride]                                  */
    const uint8_t *is_valid;     /* [T]                                                */
    int32_t *out;                /* dense: [T, out_stride]                             */
    int32_t *lens;               /* [T]                                                */
    int32_t *indptr;             /* packed: [T+1]                                      */
    int32_t *packed;             /* packed: [T*K]                                      */
    int32_t *group_sums;         /* packed: workspace [num_groups]                     */
    int64_t topk_stride, block_table_stride, out_stride;
    int32_t num_tokens, topk, num_reqs, page_tokens;
    uint32_t vlimit;        /* min(block_table_width * page_tokens, 2^31): v valid iff (uint32)v < vlimit */
    kv_page_div_t page_div; /* division by page_tokens                              */
    int32_t group_rows;     /* packed: rows per group (multiple of DSV4_TT_WARPS)  */
    int32_t num_groups;     /* packed: ceil(T / group_rows)                        */
    int32_t vec;            /* 16-byte chunks allowed (see the launchers)          */
    uint32_t stage_end;     /* block_table_width & ~3 when table rows are 16-byte aligned (cp.async
                                  staging allowed below that page), else 0: no staging */
} dsv4_tt_params_t;

/* Host-side interface of the op (topk_translate.c, topk_translate_ref.c, the launchers). */
typedef struct dsv4_tt_strides {
    int64_t topk, table, out; /* resolved row strides (0 in the descriptor means dense) */
} dsv4_tt_strides_t;

#ifdef __cplusplus
extern "C" {
#endif
/* Full validation of a call (descriptor, args, pointers); `packed` selects the variant's
 * args type. Resolves the strides. Used by the run calls and the references alike. */
dsv4_status_t dsv4_tt_validate(const char *op, const dsv4_topk_translate_desc_t *d, const void *args, int packed,
                               dsv4_tt_strides_t *s);
/* Rows per group and number of groups of the packed variant for T tokens (host planning). */
void dsv4_tt_packed_groups(int64_t num_tokens, int32_t *group_rows, int32_t *num_groups);
dsv4_status_t dsv4_topk_translate_launch(const dsv4_tt_params_t *p, dsv4_stream_t stream);
dsv4_status_t dsv4_topk_translate_packed_launch(const dsv4_tt_params_t *p, dsv4_stream_t stream);
#ifdef __cplusplus
}
#endif

#endif /* DSV4_INDICES_TOPK_TRANSLATE_CONFIG_H */
