/*
 * dsv4_compress launch shape. Latent kernel: one CTA of LATENT_THREADS threads per
 * kv_score row (rows that get no latent return at once), 4 dims per thread, so a warp
 * reads 512 contiguous bytes of each 512-float half row; 512 bytes of shared memory for
 * the 128 partial sums. Ring kernel: one CTA of LATENT_RING_THREADS threads per request,
 * one 16-byte piece of a 4 KiB ring row per thread. The same shape serves SM80, SM86 and
 * SM90.
 */
#ifndef DSV4_COMPRESS_LATENT_CONFIG_H
#define DSV4_COMPRESS_LATENT_CONFIG_H

#include "common/launch.h"
#include "compress/latent_math.h"

#define LATENT_THREADS 128 /* = CL_PARTIALS: one partial sum per thread */
#define LATENT_DIMS_PER_THREAD 4
/* Resident CTAs per SM asked of ptxas: 12 x 128 threads (all of SM86, 75% of SM80), a
 * 40-register cap; short CTAs of a memory-bound kernel want many in flight. */
#define LATENT_MIN_BLOCKS 12
#define LATENT_SMEM_BYTES (LATENT_THREADS * 4) /* static: the partial sums */
#define LATENT_RING_THREADS 256                /* 256 x 16 bytes = one 1024-float ring row */
DSV4_SMEM_BUDGET_ASSERT(LATENT_SMEM_BYTES, "compress");

#if defined(__cplusplus)
static_assert(LATENT_THREADS == CL_PARTIALS && LATENT_THREADS * LATENT_DIMS_PER_THREAD == DSV4_COMPRESS_DIM,
              "one partial sum of 4 dims per thread");
static_assert(LATENT_RING_THREADS * 4 == 2 * DSV4_COMPRESS_DIM, "one float4 per thread per ring row");
#endif

#endif
