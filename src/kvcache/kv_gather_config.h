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
#define KV_GATHER_SMEM_BYTES 0
DSV4_SMEM_BUDGET_ASSERT(KV_GATHER_SMEM_BYTES, "kv_gather");

#endif
