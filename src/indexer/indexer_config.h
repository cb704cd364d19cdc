/*
 * Launch shapes of the indexer kernels. No shared memory; the same shape serves SM80,
 * SM86 and SM90.
 *
 *   indexer_q        16 lanes per (token, head) row (8 dims, one 16-byte load each), two
 *                    rows per warp, IDX_Q_THREADS threads per CTA
 *   indexer_k_store  one warp per key row (4 dims per lane, the norm's partial shape),
 *                    IDX_K_THREADS threads per CTA
 *
 * The grids stride over the rest when the rows exceed IDX_MAX_BLOCKS CTAs.
 */
#ifndef DSV4_INDEXER_INDEXER_CONFIG_H
#define DSV4_INDEXER_INDEXER_CONFIG_H

#include "common/launch.h"

#define IDX_Q_THREADS 256
#define IDX_Q_LANES_PER_ROW 16
#define IDX_Q_ROWS_PER_CTA (IDX_Q_THREADS / IDX_Q_LANES_PER_ROW)
/* 4 x 256 resident threads per SM asked of ptxas: a 64-register cap, loads of many rows
 * in flight for a memory-bound kernel. */
#define IDX_Q_MIN_BLOCKS 4
#define IDX_K_THREADS 256
#define IDX_K_ROWS_PER_CTA (IDX_K_THREADS / 32)
#define IDX_K_MIN_BLOCKS 4
#define IDX_MAX_BLOCKS (1 << 20)
#define IDX_SMEM_BYTES 0
DSV4_SMEM_BUDGET_ASSERT(IDX_SMEM_BYTES, "indexer");

/* indexer_topk / indexer_logits (indexer_topk_kernel.cu): 4 warps per CTA; a K tile is 64
 * consecutive states of one page (codes 8,192 B + scales 256 B), double-buffered. A warp
 * owns one 32-head slice of one row (its Q fragments stay in 64 registers) and 2, 4 or 8
 * of the tile's 8-key MMA columns. Pass A keeps per row a buffer of (order key, 16-bit
 * split-local column) pairs: IDX_TOPK_BUF_BYTES over R rows, R = min(4 / slices, the
 * largest power of two with 4096 / R >= topk + 64). */
#define IDX_TOPK_THREADS 128
#define IDX_TILE_KEYS 64
#define IDX_TILE_BYTES (IDX_TILE_KEYS * DSV4_INDEXER_STATE_BYTES)
#define IDX_TOPK_BUF_ENTRIES 4096
#define IDX_TOPK_BUF_BYTES (IDX_TOPK_BUF_ENTRIES * 6)
#define IDX_TOPK_MAX_ROWS 4
/* Splits: the automatic count aims at IDX_TOPK_TARGET_CTAS pass-A CTAs (2 waves on an A100)
 * with at least IDX_TOPK_MIN_SPLIT_COLS columns per split; a split never exceeds 65,536
 * columns (the buffer's 16-bit column). */
#define IDX_TOPK_TARGET_CTAS 256
#define IDX_TOPK_MIN_SPLIT_COLS 4096
#define IDX_TOPK_MAX_SPLIT_COLS 65536
#define IDX_TOPK_MAX_SPLITS 4096
#define IDX_TOPK_MAX_CAND 2048 /* candidate_count limit: the restrict path sorts a list in shared memory */
#define IDX_LOGITS_CHUNK 4096  /* columns per indexer_logits CTA */
/* shared memory of pass A: two K tiles, the head-slice partial sums, the row buffers,
 * a 256-bin histogram and a few words */
#define IDX_TOPK_SMEM_BYTES                                                                                            \
    (2 * IDX_TILE_BYTES + IDX_TOPK_MAX_ROWS * IDX_TILE_KEYS * 4 + IDX_TOPK_BUF_BYTES + 256 * 4 + 256)
DSV4_SMEM_BUDGET_ASSERT(IDX_TOPK_SMEM_BYTES, "indexer_topk");

#endif
