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
#define KV_SWA_SMEM_BYTES 0
DSV4_SMEM_BUDGET_ASSERT(KV_SWA_SMEM_BYTES, "kv_swa_write");

#endif
