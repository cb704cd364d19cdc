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

#endif
