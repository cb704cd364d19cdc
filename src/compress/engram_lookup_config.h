/*
 * engram_lookup launch shape. A thread owns one 16-dim piece of an output row (a 16-byte
 * load of codes, 32 bytes of bf16 out), ENGRAM_THREADS threads per CTA, the grid capped at
 * one resident wave (ENGRAM_CTAS_PER_SM per multiprocessor) and strided over the rest.
 * Consecutive threads take consecutive pieces, so a warp reads 512 contiguous bytes of
 * codes (two rows at D = 256) and writes 1 KiB of out. No shared memory. The same shape
 * serves SM80, SM86 and SM90.
 */
#ifndef DSV4_COMPRESS_ENGRAM_LOOKUP_CONFIG_H
#define DSV4_COMPRESS_ENGRAM_LOOKUP_CONFIG_H

#include "common/launch.h"

#define ENGRAM_THREADS 256
#define ENGRAM_PIECE 16 /* dims per thread: one 16-byte code load */
/* Resident CTAs per SM asked of ptxas: 6 x 256 threads (75% of SM80/SM90, all of SM86),
 * a 40-register cap; host-mapped tables need many loads in flight to cover the bus
 * latency. */
#define ENGRAM_MIN_BLOCKS 6
#define ENGRAM_CTAS_PER_SM ENGRAM_MIN_BLOCKS
#define ENGRAM_SMEM_BYTES 0
DSV4_SMEM_BUDGET_ASSERT(ENGRAM_SMEM_BYTES, "engram_lookup");

#endif
