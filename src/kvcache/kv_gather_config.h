/*
 * kv_gather launch shape. grid = (num_reqs, workers); a CTA holds KV_GATHER_WARPS warps
 * and each warp gathers KV_GATHER_ROWS rows per step (their loads issued together, so
 * about 1.2 KB per warp is in flight), striding over the request's rows. workers is
 * sized from the row bound (max_gather_len or out_rows - offset) so that each warp does
 * about one step, capped at KV_GATHER_MAX_WORKERS (the cap still puts 64K warps on one
 * request, far more than any GPU keeps resident). No shared memory. The same shape
 * serves SM80, SM86 and SM90.
 */
#ifndef DSV4_KVCACHE_KV_GATHER_CONFIG_H
#define DSV4_KVCACHE_KV_GATHER_CONFIG_H

#include "common/launch.h"

#define KV_GATHER_WARPS 8
#define KV_GATHER_THREADS (KV_GATHER_WARPS * 32)
#define KV_GATHER_ROWS 2
#define KV_GATHER_MAX_WORKERS 8192 /* <= 65535, the grid.y limit */
/* Resident CTAs per SM asked of ptxas: 6 x 8 warps = 48 warps (75% of SM80/SM90, all of
 * SM86), which caps registers at 40 per thread without spills; bytes in flight scale with
 * resident warps, and that is what a memory-bound kernel needs. */
#define KV_GATHER_MIN_BLOCKS 6
#define KV_GATHER_SMEM_BYTES 0
DSV4_SMEM_BUDGET_ASSERT(KV_GATHER_SMEM_BYTES, "kv_gather");

#endif
