/*
 * kv_gather launch shape. grid = (num_reqs, workers); a CTA holds KV_GATHER_WARPS warps
 * and warp w of worker y takes rows y * W + w, + workers * W, ... of its request, one row
 * at a time with the next row's record loads issued before the current row is decoded,
 * so every warp keeps a record in flight from its first row to its last.
 *
 * workers: the plan sizes it from the row bound (max_gather_len, else out_rows - offset)
 * at KV_GATHER_ROWS rows per warp, capped at KV_GATHER_MAX_WORKERS; the launcher then caps
 * the whole grid at KV_GATHER_CTAS_PER_SM CTAs per multiprocessor (one resident wave), so
 * rows are spread evenly over resident warps (48K rows: 7 or 8 per warp) instead of over
 * short-lived CTAs that each pay the block-table and record latencies once. No shared
 * memory. The same shape serves SM80, SM86 and SM90.
 */
#ifndef DSV4_KVCACHE_KV_GATHER_CONFIG_H
#define DSV4_KVCACHE_KV_GATHER_CONFIG_H

#include "common/launch.h"

#define KV_GATHER_WARPS 8
#define KV_GATHER_THREADS (KV_GATHER_WARPS * 32)
#define KV_GATHER_ROWS 2           /* fewest rows per warp worth a warp of its own */
#define KV_GATHER_MAX_WORKERS 8192 /* <= 65535, the grid.y limit */
/* Resident CTAs per SM asked of ptxas: 6 x 8 warps = 48 warps (75% of SM80/SM90, all of
 * SM86), which caps registers at 40 per thread without spills; bytes in flight scale with
 * resident warps, and that is what a memory-bound kernel needs. */
#define KV_GATHER_MIN_BLOCKS 6
/* Grid cap: one resident wave. Chosen by the two H200 runs of 2026-11-30 (docs/kvcache.md,
 * versions table), on the 16K and 48K cases where the cap helps (16K: 12.2-12.9 us against
 * 12.8-13.3 uncapped; 48K: even, 26.1-27.2 against 26.5-27.0; two waves, 12 per SM: even);
 * at 128K rows the uncapped grid was 1-2% faster (59.7-61.3 us against 61.2-62.8). */
#define KV_GATHER_CTAS_PER_SM KV_GATHER_MIN_BLOCKS
#define KV_GATHER_SMEM_BYTES 0
DSV4_SMEM_BUDGET_ASSERT(KV_GATHER_SMEM_BYTES, "kv_gather");

#endif
