/*
 * Sparse MLA tile configurations and their shared-memory budgets (host C and CUDA).
 *
 * A config fixes heads per CTA (HC), m16 tiles per warp (MT: 16 or 32 heads per warp),
 * dim slices (WD warps share a head block, each owning 512/WD dims of Q, of the scores'
 * partial sums and of O) and keys per tile (N). Warps = HC / (16 MT) * WD.
 *
 * Shared memory per CTA (bytes), N = 16:
 *   Sp  partial scores   WD * HC * (N + 4) * 4     (row pad: fewer bank conflicts)
 *   Ps  bf16 p           HC * (N + 8) * 2          (48-byte rows: conflict-free ldmatrix)
 *   alpha, m, l          3 * HC * 4
 *   meta                 2 * N * 4                 (key flags)
 *   prefill: K tiles     2 * N * 1040              (bf16 rows of 520: conflict-free ldmatrix)
 *            ids         WD * 2 * N * 4            (each slice group's next tiles, by parity)
 *   decode:  raw records 2 * N * 576 + scale words 2 * WD * N * 4 + K tile N * 1040
 *            row ring    (A + 1) * N * 12          (record and scale addresses, A tiles ahead)
 *            ids         2 * N * 4                 (the next tile to convert, by parity)
 * All of it is static shared memory, so the ptxas gate and dsv4_launch_prepare see it;
 * the asserts below keep every config within 48 KB.
 */
#ifndef DSV4_ATTENTION_SPARSE_MLA_CONFIG_H
#define DSV4_ATTENTION_SPARSE_MLA_CONFIG_H

#include "common/launch.h"

#define MLA_N 16         /* keys per tile                                        */
#define MLA_KSTR 520     /* bf16 per K-tile row: 1040 B = 16 mod 128              */
#define MLA_SSTR (MLA_N + 4)
#define MLA_PSTR (MLA_N + 8)
/* Decode converts its rows (record addresses) and prefetches them into L2 this many
 * tiles before they are computed (the cp.async runs one tile ahead, shared memory has no
 * room for more stages). Decode's random slots are DRAM reads (~1-2 us under load,
 * several tiles): measured 89 -> 82 us at T64 H64 with 4 (session 3). Prefill has no
 * ring: it fetches its ids 2 tiles ahead and computes the addresses at the copy, without
 * L2 prefetching (its rows are mostly L2 hits; the prefetch's producer instructions made
 * it 6-10% slower, session 4). */
#ifndef MLA_AHEAD_DECODE
#define MLA_AHEAD_DECODE 4
#endif

/* Lazy-rescale slack in natural-log units (mla_tile.cuh's numerics note): O and l are
 * rescaled only when a tile's max exceeds the reference max by more than this. 0.0f
 * gives the spec's exact running max. */
#ifndef MLA_RESCALE_SLACK
#define MLA_RESCALE_SLACK 8.0f
#endif

/* Config table: id -> HC, MT, WD for the engine's configs 1-3 and 6 (keep in sync with
 * the kernel instantiations); configs 4 and 5 are the warp-specialised CTA (mla_ws.cuh):
 * config 4 has 32 heads, 2 score + 4 PV warps, two CTAs per SM (prefill and decode);
 * config 5 has 64 heads, 4 score + 8 PV warps, one CTA per SM (decode only). Config 6
 * (decode only) is config 1 with 8 dim slices of 64: half of each warp's per-tile chain
 * (QK, PV, dequantize) for the latency-bound few-token case. */
#define MLA_CFG_WS 4
#define MLA_CFG_WS64 5
#define MLA_CFG_SLICE8 6
#define MLA_CFG_DECODE_ONLY(id) ((id) == MLA_CFG_WS64 || (id) == MLA_CFG_SLICE8)
#define MLA_WS_PV_WARPS 4
#define MLA_CFG_HC(id) ((id) == 1 || (id) == MLA_CFG_SLICE8 ? 16 : (id) == MLA_CFG_WS64 ? 64 : 32)
#define MLA_CFG_MT(id) ((id) == 2 ? 2 : 1)
#define MLA_CFG_WD(id) ((id) == MLA_CFG_SLICE8 ? 8 : 4)
#define MLA_CFG_WARPS(id)                                           \
    ((id) == MLA_CFG_WS     ? MLA_WS_PV_WARPS + 2                   \
     : (id) == MLA_CFG_WS64 ? 12                                    \
                            : MLA_CFG_HC(id) / (16 * MLA_CFG_MT(id)) * MLA_CFG_WD(id))
/* The warp-specialised configs (mla_ws.cuh): no merge CTAs in their launch. */
#define MLA_CFG_IS_WS(id) ((id) == MLA_CFG_WS || (id) == MLA_CFG_WS64)
/* Resident CTAs per SM a config's launch bounds plan for (the split policy's wave).
 * Config 4: two (168 registers; 1.75x faster than one CTA per SM, session 11 run 2). */
#define MLA_CFG_CTAS_PER_SM(id) ((id) == MLA_CFG_WS64 ? 1 : 2)

#define MLA_SMEM_COMMON(hc, wd) ((wd) * (hc) * MLA_SSTR * 4 + (hc) * MLA_PSTR * 2 + 3 * (hc) * 4 + 2 * MLA_N * 4)
#define MLA_SMEM_PREFILL(hc, wd) (MLA_SMEM_COMMON(hc, wd) + 2 * MLA_N * MLA_KSTR * 2 + (wd) * 2 * MLA_N * 4)
#define MLA_SMEM_DECODE(hc, wd)                                                                        \
    (MLA_SMEM_COMMON(hc, wd) + 2 * MLA_N * 576 + 2 * (wd) * MLA_N * 4 + MLA_N * MLA_KSTR * 2 + \
     (MLA_AHEAD_DECODE + 1) * MLA_N * 12 + 2 * MLA_N * 4)

/* configs 4 and 5 (mla_ws.cuh), hc heads: K tiles, key flags, ps p slots, alphas by
 * parity, m and l; prefill (config 4): the PV warps' ids; decode: one raw record stage,
 * the wd groups' scale words, the row ring and the ids of the next tile to convert */
#define MLA_SMEM_WS(hc, ps) (2 * MLA_N * MLA_KSTR * 2 + 2 * MLA_N * 4 + (ps) * (hc) * MLA_PSTR * 2 + 4 * (hc) * 4)
#define MLA_SMEM_PREFILL_WS (MLA_SMEM_WS(32, 2) + 4 * 2 * MLA_N * 4)
#define MLA_SMEM_DECODE_WS(hc, wd, ps) \
    (MLA_SMEM_WS(hc, ps) + MLA_N * 576 + (wd) * MLA_N * 4 + (MLA_AHEAD_DECODE + 1) * MLA_N * 12 + 2 * MLA_N * 4)

DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_PREFILL(16, 4), "sparse_mla prefill config 1");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_DECODE_WS(32, 4, 2), "sparse_mla decode config 4");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_DECODE_WS(64, 8, 1), "sparse_mla decode config 5");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_PREFILL_WS, "sparse_mla prefill config 4");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_PREFILL(32, 4), "sparse_mla prefill configs 2, 3");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_DECODE(16, 4), "sparse_mla decode config 1");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_DECODE(32, 4), "sparse_mla decode configs 2, 3");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_DECODE(16, 8), "sparse_mla decode config 6");

/* The split merge (mla_merge.cuh): threads per (token, head) row, 4 dims each. Merge
 * CTAs appended to an attention launch of W warps take W * 32 / MLA_MERGE_THREADS rows. */
#define MLA_MERGE_THREADS 128

/* Merge CTAs appended to an engine launch must fit one wave at this many resident CTAs
 * per SM (the split policy's wave is MLA_CFG_CTAS_PER_SM of the config). */
#define MLA_TARGET_CTAS_PER_SM 2

/* Auto decode config (docs/history/attention-log.md, session 20): config 5 when 64 | H from
 * MLA_DECODE_WS64_MIN_T tokens on; else config 6 up to MLA_DECODE_SLICE8_MAX_T tokens
 * (16 heads, 8 dim slices: the most CTAs, the shortest per-warp chains); else, when
 * 32 | H, config 2 below MLA_DECODE_WS_MIN_T and config 4 from it on; else config 1.
 * H200, session 20 (one run for T = 8 / 12 at H = 64): T = 8, H = 32 config 6 19.2-19.5
 * us against config 2's 20.6-21.1; T = 4, H = 64 config 6 19.1-19.2 against config 1's
 * 19.6-19.9; T = 1 config 6 the same as config 1; T = 8, H = 64 configs 5 / 6 / 2 22.8 /
 * 23.9 / 24.5 us; T = 12, H = 64 25.3 / 30.8 / 29.4; T = 16, H = 64 26.5 / 33.4 / 31.3
 * (config 6 dequantizes every row once per 16 heads, config 5 once per 64). Session 12:
 * T = 64, H = 64: config 2 64 us, 4 53 us, 5 50 us; T = 384: 299 / 244 / 215 us. */
#ifndef MLA_DECODE_SLICE8_MAX_T
#define MLA_DECODE_SLICE8_MAX_T 8
#endif
#ifndef MLA_DECODE_WS64_MIN_T
#define MLA_DECODE_WS64_MIN_T 8
#endif
#ifndef MLA_DECODE_WS_MIN_T
#define MLA_DECODE_WS_MIN_T 16
#endif
/* Auto config of prefill when 32 divides H (else config 1): the warp-specialised kernel,
 * 1.3-1.4x faster than config 2 on the H200 (session 11). */
#ifndef MLA_PREFILL_AUTO_CONFIG
#define MLA_PREFILL_AUTO_CONFIG 4
#endif

#endif
