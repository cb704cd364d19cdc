/*
 * kv_insert launch shape. One warp per token at a time; a CTA holds KV_INSERT_WARPS warps.
 * No shared memory: a warp reads its 1024-byte row straight into registers (two 16-byte
 * loads per lane) and writes the 584-byte record from them. The same shape serves SM80,
 * SM86 and SM90.
 *
 * The grid is capped at KV_INSERT_CTAS_PER_SM CTAs per multiprocessor; warps then loop
 * over tokens with a stride of the grid's warp count, loading the next token's row
 * before quantizing the current one, so a warp keeps a row in flight while it computes.
 */
#ifndef DSV4_KVCACHE_KV_INSERT_CONFIG_H
#define DSV4_KVCACHE_KV_INSERT_CONFIG_H

#include "common/launch.h"

#define KV_INSERT_WARPS 8
#define KV_INSERT_THREADS (KV_INSERT_WARPS * 32)
/* Resident CTAs per SM asked of ptxas: 5 x 8 warps = 40 warps (63% of SM80/SM90, 83% of
 * SM86), which caps registers at 48 per thread. 6 (cap 40) fitted until the
 * duplicate-slot claim check (kv_warp.cuh), which spills there. */
#define KV_INSERT_MIN_BLOCKS 5
/* Grid cap: one resident wave, each warp looping with its next row in flight. Chosen by
 * the H200 run of 2026-11-30 (docs/kvcache.md, versions table): 65,536 tokens in 35.3-35.7
 * us with the cap against 37.1 us without it (a warp per token, no prefetch). 7 CTAs per
 * SM gives ptxas the same 32-register cap as 8, and both spill. */
#define KV_INSERT_CTAS_PER_SM KV_INSERT_MIN_BLOCKS
/* kv_rope_insert (the ROPE variant of the kernel) also holds the cos/sin of its RoPE pairs
 * next to two rows: 4 CTAs per SM (32 warps) leave ptxas 64 registers; 5 spill on SM90. */
#define KV_ROPE_INSERT_MIN_BLOCKS 4
#define KV_INSERT_SMEM_BYTES 0
DSV4_SMEM_BUDGET_ASSERT(KV_INSERT_SMEM_BYTES, "kv_insert");

#endif
