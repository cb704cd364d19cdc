/*
 * Tuning constants of the collapse kernel and of every kernel that collapses a whole
 * token row (the V4 immediate epilogue shares the row function).
 */
#ifndef DSV4_MHC_COLLAPSE_CONFIG_H
#define DSV4_MHC_COLLAPSE_CONFIG_H

#include "common/launch.h"

#define MHC_COLLAPSE_THREADS 128
/* Largest hidden size any mhc op accepts (mhc_check_shape). */
#define MHC_MAX_HIDDEN 16384
/* With a norm weight the bf16 collapse row waits in dynamic shared memory for the second
 * pass of the RMSNorm: 2 * H bytes, 32 KB at the largest H. The static scratch beside it
 * (reduction, pre-mix, gate partials) stays under 1 KB. */
#define MHC_ROW_SMEM_BYTES(H) ((size_t)(H)*2)
DSV4_SMEM_BUDGET_ASSERT(2 * MHC_MAX_HIDDEN + 1024, "mhc collapse row buffer + scratch");

#endif
