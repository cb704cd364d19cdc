/*
 * kv_swa_write launch shape. The work of a token is heads_padded + 1 warp tasks (its q
 * heads, then its kv row); tasks are numbered token-major and a warp takes one, so
 * the grid is balanced whatever the head count. No shared memory: every task is one
 * 512-element row held in registers. The same shape serves SM80, SM86 and SM90.
 */
#ifndef DSV4_KVCACHE_KV_SWA_WRITE_CONFIG_H
#define DSV4_KVCACHE_KV_SWA_WRITE_CONFIG_H

#include "common/launch.h"

#define KV_SWA_WARPS 8
#define KV_SWA_THREADS (KV_SWA_WARPS * 32)
#define KV_SWA_MAX_HEADS 1024
#define KV_SWA_MAX_BLOCKS INT64_C(2147483647) /* grid.x limit */
/* Resident CTAs per SM asked of ptxas: 6 x 8 warps = 48 warps (75% of SM80/SM90, all of
 * SM86), which caps registers at 40 per thread without spills; bytes in flight scale with
 * resident warps, and that is what a memory-bound kernel needs. */
#define KV_SWA_MIN_BLOCKS 6
#define KV_SWA_SMEM_BYTES 0
DSV4_SMEM_BUDGET_ASSERT(KV_SWA_SMEM_BYTES, "kv_swa_write");

#endif
