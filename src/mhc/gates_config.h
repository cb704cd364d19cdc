/*
 * Tuning constants of the gates pipeline (projection routes + epilogue), shared by the
 * host planner (plan.c) and the kernels. SM80, SM86 and SM90 share them; the measurements
 * behind them are docs/mhc.md's Decisions.
 */
#ifndef DSV4_MHC_GATES_CONFIG_H
#define DSV4_MHC_GATES_CONFIG_H

#include "common/launch.h"
#include "mhc/collapse_config.h"

/* ---- routing ----------------------------------------------------------------------- */
/* T up to this goes to the small-T kernel when its geometry tiles H (AUTO route). */
#define MHC_SMALL_T_MAX_TOKENS 15

/* ---- small-T kernel (small_t_kernel.cu) ------------------------------------------------- */
/* Geometry (tile_n, split_k, threads) = (6, H / 256, 256): 24/6 = 4 n-tiles, slices of 256
 * channels (one per thread and stream), so a projection thread issues all of its loads
 * at once; S = 20 slices at H = 5120, 16 at 4096, 28 at 7168. It tiles H when
 * H % 256 == 0; other H take the tensor-core route. A geometry whose threads walk several
 * channels, such as (6, 8, 128), waits for one round of loads per channel (docs/mhc.md). */
#define MHC_SMALL_TILE_N 6
#define MHC_SMALL_THREADS 256
/* __launch_bounds__ minimum CTAs per SM: 2 caps the kernel at 128 registers, and the
 * ~250 CTAs of a T = 6..12 call fit on 132 SMs in one wave. */
#define MHC_SMALL_MIN_CTAS 2
/* Tokens per projection CTA: it loads its fn values once and applies them to this many
 * tokens, so fn is streamed from L2 ceil(T / tpc) times instead of T times (one token per
 * CTA would stream 23.6 MB of fn from L2 at T = 12).
 * Every T < 16 gets at most 3 token groups, i.e. <= 3 x 4 x 20 = 240 projection CTAs at
 * H = 5120: with the row and gate CTAs one wave of 2 CTAs per SM on the 132-SM H200. */
#define MHC_SMALL_TPC(T) ((T) <= 2 ? 1 : ((T) <= 6 ? 2 : ((T) <= 12 ? 4 : 5)))
#define MHC_SMALL_MAX_TPC 5

/* What the small-T route projects in a seam. The model's reference kernel projects the
 * UNROUNDED fp32 post-apply values, which the next layer never sees: with model-like gate
 * scales its gates then differ from the unfused pipeline (post, store bf16, project) by
 * up to ~3e-3 (mhc.seam_ref_small_t_route_gap over 30 seeds: 9 of them above the 1.9e-3
 * end-to-end bound of tests/mhc/mhc_test.h). This library projects the stored bf16 values
 * on both routes (0), so both agree with the unfused pipeline to fp32 accumulation error
 * and T = 15 and T = 16 give the same gates to ~1e-6. 1 projects the unrounded values
 * (the reference and the tests follow dsv4_mhc_plan_t.unrounded_input). */
#define MHC_SMALL_T_UNROUNDED 0

/* ---- tensor-core kernel (proj_tc_kernel.cu) ------------------------------------------- */
#define MHC_TC_THREADS 256 /* 8 warps: 2 m-tiles of 16 tokens x 4 k-quarters             */
#define MHC_TC_MIN_CTAS 2  /* __launch_bounds__ minimum blocks per SM (<= 128 regs)  */
#define MHC_TC_BM 32       /* tokens per CTA                                          */
#define MHC_TC_TPR 8       /* threads per token row                                   */
#define MHC_TC_KC                                                                                                      \
    256                            /* K elements per chunk: 4 streams x 64 channels (128-byte
                              rows per stream, whole lines per warp access), or 128
                              channels of the broadcast embedding                     */
#define MHC_TC_LDS (MHC_TC_KC + 8) /* smem row pitch in bf16: 528 B, ldmatrix conflict-free */
/* Channels a chunk takes of each stream (64; 128 of e for the broadcast projection, whose
 * chunk is KC / 2 columns): H % 128 == 0 (mhc_check_shape) makes both tile H. */
#define MHC_TC_CHUNK_CHANNELS(bcast) ((bcast) ? MHC_TC_KC / 2 : MHC_TC_KC / 4)
/* Chunks ahead of the register loads that the token inputs are prefetched into L2
 * (prefetch.global.L2), because the one chunk of register lookahead does not cover the
 * next chunk's DRAM round trip at 2 CTAs per SM; 1 is the fastest distance (docs/mhc.md,
 * Decisions). */
#ifndef MHC_TC_PREFETCH_CHUNKS
#define MHC_TC_PREFETCH_CHUNKS 1
#endif
/* Split count: the smallest divisor S of the chunk count with ceil(T/32) * S >= this
 * many CTAs, else the largest divisor <= MHC_TC_MAX_SPLIT. Device-independent, so a
 * given (T, H) sums its partials in the same order on every GPU. 256 = one wave at 2
 * CTAs per SM on the 132-SM H200 (264 slots; the A100 has 216); a larger target spreads
 * T = 512 over more than one wave. */
#define MHC_TC_TARGET_CTAS 256
#define MHC_TC_MAX_SPLIT 64
/* ... and at most this many chunks per CTA (a split count that reaches the CTA target with
 * longer slices is skipped): a warp's mma chain accumulates 4 k-steps per chunk in the
 * tensor cores' fp32, which does not round to nearest; at 80 chunks (T = 8192, S = 1) the
 * seam's gates reach 1.3e-5 against the 1e-5 tolerance. */
#define MHC_TC_MAX_CHUNKS_PER_CTA 40

/* Per-token coefficients post[4] | comb[16] | pre_mix[4], rows padded to 16-byte vectors
 * (28 floats: 16-byte row reads, the same row for the 8 threads of a token row). */
#define MHC_TC_COEF_PITCH 28
#define MHC_TC_SMEM_BYTES ((MHC_TC_BM + 2 * 24) * MHC_TC_LDS * 2 + MHC_TC_BM * MHC_TC_COEF_PITCH * 4)
DSV4_SMEM_BUDGET_ASSERT(MHC_TC_SMEM_BYTES, "mhc tensor-core projection tiles");
/* The k-quarter reduction of the accumulators reuses the A tile: 3 quarters x 2 m-tiles x
 * 32 lanes x 12. */
#if (3 * 2 * 32 * 12 * 4) > (MHC_TC_BM * MHC_TC_LDS * 2)
#error "mhc: the accumulator exchange does not fit in the A tile"
#endif
/* The projection's K (fn is [24][K]): the flattened residual's 4H, or H for the
 * first-layer broadcast projection of e. */
#define MHC_FN_K(bcast, H) ((bcast) ? (H) : 4 * (H))
/* The fn split's hi / lo rows (tensor-core route; workspace or fn_split): [48][K] bf16 */
#define MHC_WS_FN_HL_BYTES(K) ((size_t)48 * (size_t)(K)*2)

/* ---- epilogue (epilogue.cuh) --------------------------------------------------------------- */
/* The tensor-core route's gates epilogue: gate CTAs of MHC_EPI_TPC tokens (a warp's gates
 * and Sinkhorn each) and, in V4.1 with a norm weight, one norm CTA per token
 * (mhc_epilogue_kernel); V4: one CTA per token (mhc_epilogue_immediate_kernel), warp 0 the
 * gates, then all warps collapse the row with the fresh pre (the row buffer of
 * collapse_config.h). The small-T kernel's gate CTAs run the per-token form. */
#define MHC_EPI_THREADS 128
/* mhc_epilogue_kernel's gate CTAs: tokens per CTA, one warp each, and their partials staged
 * in dynamic shared memory: MHC_EPI_TPC x S rows of MHC_EPI_PITCH floats (a warp's raw[24]
 * and sq per slice; 16-byte aligned rows for cp.async), at most 28,672 bytes (S <= 64). */
#define MHC_EPI_TPC (MHC_EPI_THREADS / 32)
#define MHC_EPI_PITCH 28
#define MHC_EPI_STAGE_SMEM(S) ((size_t)MHC_EPI_TPC * (S)*MHC_EPI_PITCH * sizeof(float))
DSV4_SMEM_BUDGET_ASSERT(MHC_EPI_STAGE_SMEM(MHC_TC_MAX_SPLIT) + MHC_EPI_TPC * 25 * 4 + 4, "mhc epilogue staging");

/* Workspace floats per (slice, token): 24 raw mix partials, sq, ss. The epilogue stages
 * a token's S x 26 partials in shared memory: at most 64 x 26 x 4 = 6,656 bytes. */
#define MHC_WS_FLOATS 26
#if MHC_MAX_HIDDEN / MHC_SMALL_THREADS > MHC_TC_MAX_SPLIT
#error "mhc: the epilogue's partial buffer is sized by MHC_TC_MAX_SPLIT"
#endif
/* The immediate epilogue (V4): partials + scratch (static) and the collapse row (dynamic, 2H). */
DSV4_SMEM_BUDGET_ASSERT(MHC_TC_MAX_SPLIT * MHC_WS_FLOATS * 4 + 512 + 2 * MHC_MAX_HIDDEN, "mhc immediate epilogue");
/* The small-T kernel: the epilogue's static buffer, its own reductions (< 1.3 KB) and the
 * collapse row. */
DSV4_SMEM_BUDGET_ASSERT(MHC_TC_MAX_SPLIT * MHC_WS_FLOATS * 4 + 512 + 1280 + 2 * MHC_MAX_HIDDEN, "mhc small-T kernel");

/* Workspace. Tensor-core route: [partials][fn hi/lo], the partials raw [S][T][24], sq
 * [S][T], ss [S][T] fp32, then the fn split's bf16 hi / lo rows (partials rounded up to 256
 * bytes). Small-T route: one record per (token, n-tile, slice), T x 4 x S of them, each
 * MHC_SMALL_REC_WORDS 64-bit tagged words (prim/grid_flag.cuh): 6 mix partials, sq (n-tile
 * 0), one pad word; a multiple of 256 bytes. */
#define MHC_SMALL_REC_WORDS 8
#define MHC_WS_SMALL_BYTES(T, S) ((size_t)(T)*4 * (size_t)(S)*MHC_SMALL_REC_WORDS * 8)

#endif
