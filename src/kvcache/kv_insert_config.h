/*
 * kv_insert launch shape. One warp per token; a CTA holds KV_INSERT_WARPS warps. No shared
 * memory: a warp reads its 1024-byte row straight into registers (two 16-byte loads per
 * lane) and writes the 584-byte record from them. The same shape serves SM80, SM86 and
 * SM90: what keeps the kernel at memory speed is bytes in flight (about 1 KB per resident
 * warp), so the only rule is to keep registers low enough for high occupancy.
 */
#ifndef DSV4_KVCACHE_KV_INSERT_CONFIG_H
#define DSV4_KVCACHE_KV_INSERT_CONFIG_H

#include "common/launch.h"

#define KV_INSERT_WARPS 8
#define KV_INSERT_THREADS (KV_INSERT_WARPS * 32)
/* Resident CTAs per SM asked of ptxas: 6 x 8 warps = 48 warps (75% of SM80/SM90, all of
 * SM86), which caps registers at 40 per thread without spills; bytes in flight scale with
 * resident warps, and that is what a memory-bound kernel needs. */
#define KV_INSERT_MIN_BLOCKS 6
#define KV_INSERT_SMEM_BYTES 0
DSV4_SMEM_BUDGET_ASSERT(KV_INSERT_SMEM_BYTES, "kv_insert");

#endif
