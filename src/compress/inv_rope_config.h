/*
 * inv_rope launch shape. A thread owns one 16-byte segment of a head row's RoPE dims
 * (4 pairs; 8 threads per row, so a warp covers 4 rows and every load and store of o is a
 * full 128-byte line), INV_ROPE_THREADS threads per CTA, the grid capped at one resident
 * wave (INV_ROPE_CTAS_PER_SM per multiprocessor) and strided over the rest. No shared
 * memory. The same shape serves SM80, SM86 and SM90.
 */
#ifndef DSV4_COMPRESS_INV_ROPE_CONFIG_H
#define DSV4_COMPRESS_INV_ROPE_CONFIG_H

#include "common/launch.h"

#define INV_ROPE_THREADS 256
#define INV_ROPE_SEGS_PER_ROW 8 /* 64 bf16 RoPE dims = 8 segments of 16 bytes */
/* Resident CTAs per SM asked of ptxas: 6 x 256 threads (75% of SM80/SM90, all of SM86),
 * a 40-register cap; a memory-bound kernel wants the loads of many threads in flight. */
#define INV_ROPE_MIN_BLOCKS 6
#define INV_ROPE_CTAS_PER_SM INV_ROPE_MIN_BLOCKS
#define INV_ROPE_SMEM_BYTES 0
DSV4_SMEM_BUDGET_ASSERT(INV_ROPE_SMEM_BYTES, "inv_rope");

#endif
