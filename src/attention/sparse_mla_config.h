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
#include "dsv4/attention.h"
#include "dsv4/kvcache.h"

#define MLA_N 16     /* keys per tile                                        */
#define MLA_KSTR 520 /* bf16 per K-tile row: 1040 B = 16 mod 128              */
#define MLA_SSTR (MLA_N + 4)
#define MLA_PSTR (MLA_N + 8)
/* Decode converts its rows (record addresses) and prefetches them into L2 this many
 * tiles before they are computed (the cp.async runs one tile ahead, shared memory has no
 * room for more stages). Decode's random slots are DRAM reads (~1-2 us under load,
 * several tiles). Prefill has no ring: it fetches its ids 2 tiles ahead and computes the
 * addresses at the copy, without L2 prefetching (its rows are mostly L2 hits, and the
 * prefetch's producer instructions cost more than they saved). */
#ifndef MLA_AHEAD_DECODE
#define MLA_AHEAD_DECODE 4
#endif

/* Lazy-rescale slack in natural-log units (mla_tile.cuh's numerics note): O and l are
 * rescaled only when a tile's max exceeds the reference max by more than this. 0.0f
 * gives the exact running max. */
#ifndef MLA_RESCALE_SLACK
#define MLA_RESCALE_SLACK 8.0f
#endif

/* The configurations (dsv4_mla_config_t), one row each:
 *   id, name, HC heads per CTA, MT m16 tiles per warp, WD dim slices, warps, WS
 *   (warp-specialised: mla_ws.cuh, no merge CTAs in its launch), DEC (decode only), CPS
 *   resident CTAs per SM (the split policy's wave), MINB the engine's __launch_bounds__
 *   minimum (caps registers at 65536 / (threads * MINB)).
 * Engine rows (WS 0): warps = HC / (16 MT) * WD. h16w8 is h16w4 with 8 dim slices of 64:
 * half of each warp's per-tile chain for the latency-bound few-token case (prefill's
 * producer knows only 4 slices). WS rows: HC / 16 score warps of 16 heads x 512 dims and
 * WD PV warps of HC heads x 512 / WD dims; ws32 runs two CTAs per SM at 168 registers
 * (one CTA with more registers measured slower), ws64 one (its 384 threads at 168
 * registers fill the register file). */
#define MLA_CONFIG_TABLE(X, a)                                                                                         \
    /*  id                     name     HC  MT WD warps WS DEC CPS MINB */                                             \
    X(a, DSV4_MLA_CONFIG_H16W4, "h16w4", 16, 1, 4, 4, 0, 0, 2, 3)                                                      \
    X(a, DSV4_MLA_CONFIG_H32W4, "h32w4", 32, 2, 4, 4, 0, 0, 2, 1)                                                      \
    X(a, DSV4_MLA_CONFIG_H32W8, "h32w8", 32, 1, 4, 8, 0, 0, 2, 2)                                                      \
    X(a, DSV4_MLA_CONFIG_WS32, "ws32", 32, 2, 4, 6, 1, 0, 2, 2)                                                        \
    X(a, DSV4_MLA_CONFIG_WS64, "ws64", 64, 4, 8, 12, 1, 1, 1, 1)                                                       \
    X(a, DSV4_MLA_CONFIG_H16W8, "h16w8", 16, 1, 8, 8, 0, 1, 2, 2)

/* A column of config `id`'s row, as a constant expression (0 for an unknown id). */
#define MLA_CFG_SEL_HC(id, i, n, hc, mt, wd, w, ws, dec, cps, minb) (id) == (i) ? (hc):
#define MLA_CFG_SEL_WD(id, i, n, hc, mt, wd, w, ws, dec, cps, minb) (id) == (i) ? (wd):
#define MLA_CFG_SEL_WARPS(id, i, n, hc, mt, wd, w, ws, dec, cps, minb) (id) == (i) ? (w):
#define MLA_CFG_SEL_WS(id, i, n, hc, mt, wd, w, ws, dec, cps, minb) (id) == (i) ? (ws):
#define MLA_CFG_SEL_DEC(id, i, n, hc, mt, wd, w, ws, dec, cps, minb) (id) == (i) ? (dec):
#define MLA_CFG_SEL_CPS(id, i, n, hc, mt, wd, w, ws, dec, cps, minb) (id) == (i) ? (cps):
#define MLA_CFG_HC(id) (MLA_CONFIG_TABLE(MLA_CFG_SEL_HC, id) 0)
#define MLA_CFG_WD(id) (MLA_CONFIG_TABLE(MLA_CFG_SEL_WD, id) 0)
#define MLA_CFG_WARPS(id) (MLA_CONFIG_TABLE(MLA_CFG_SEL_WARPS, id) 0)
#define MLA_CFG_IS_WS(id) (MLA_CONFIG_TABLE(MLA_CFG_SEL_WS, id) 0)
#define MLA_CFG_DECODE_ONLY(id) (MLA_CONFIG_TABLE(MLA_CFG_SEL_DEC, id) 0)
#define MLA_CFG_CTAS_PER_SM(id) (MLA_CONFIG_TABLE(MLA_CFG_SEL_CPS, id) 0)
#define MLA_WS_PV_WARPS MLA_CFG_WD(DSV4_MLA_CONFIG_WS32)

#define MLA_SMEM_COMMON(hc, wd) ((wd) * (hc)*MLA_SSTR * 4 + (hc)*MLA_PSTR * 2 + 3 * (hc)*4 + 2 * MLA_N * 4)
#define MLA_SMEM_PREFILL(hc, wd) (MLA_SMEM_COMMON(hc, wd) + 2 * MLA_N * MLA_KSTR * 2 + (wd)*2 * MLA_N * 4)
#define MLA_SMEM_DECODE(hc, wd)                                                                                        \
    (MLA_SMEM_COMMON(hc, wd) + 2 * MLA_N * DSV4_KV_DATA_BYTES + 2 * (wd)*MLA_N * 4 + MLA_N * MLA_KSTR * 2 +            \
     (MLA_AHEAD_DECODE + 1) * MLA_N * 12 + 2 * MLA_N * 4)

/* ws32 and ws64 (mla_ws.cuh), hc heads: K tiles, key flags, ps p slots, alphas by
 * parity, m and l; prefill (ws32): the PV warps' ids; decode: one raw record stage,
 * the wd groups' scale words, the row ring and the ids of the next tile to convert */
#define MLA_SMEM_WS(hc, ps) (2 * MLA_N * MLA_KSTR * 2 + 2 * MLA_N * 4 + (ps) * (hc)*MLA_PSTR * 2 + 4 * (hc)*4)
#define MLA_SMEM_PREFILL_WS (MLA_SMEM_WS(32, 2) + 4 * 2 * MLA_N * 4)
#define MLA_SMEM_DECODE_WS(hc, wd, ps)                                                                                 \
    (MLA_SMEM_WS(hc, ps) + MLA_N * DSV4_KV_DATA_BYTES + (wd)*MLA_N * 4 + (MLA_AHEAD_DECODE + 1) * MLA_N * 12 +         \
     2 * MLA_N * 4)

DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_PREFILL(16, 4), "sparse_mla prefill h16w4");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_DECODE_WS(32, 4, 2), "sparse_mla decode ws32");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_DECODE_WS(64, 8, 1), "sparse_mla decode ws64");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_PREFILL_WS, "sparse_mla prefill ws32");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_PREFILL(32, 4), "sparse_mla prefill h32w4, h32w8");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_DECODE(16, 4), "sparse_mla decode h16w4");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_DECODE(32, 4), "sparse_mla decode h32w4, h32w8");
DSV4_SMEM_BUDGET_ASSERT(MLA_SMEM_DECODE(16, 8), "sparse_mla decode h16w8");

/* The split merge (mla_merge.cuh): threads per (token, head) row, 4 dims each. Merge
 * CTAs appended to an attention launch of W warps take W * 32 / MLA_MERGE_THREADS rows. */
#define MLA_MERGE_THREADS 128

/* Merge CTAs appended to an engine launch must fit one wave at this many resident CTAs
 * per SM (the split policy's wave is MLA_CFG_CTAS_PER_SM of the config). */
#define MLA_TARGET_CTAS_PER_SM 2

/* The auto choice (mla_pick_config). Decode: ws64 when 64 | H from MLA_DECODE_WS64_MIN_T
 * tokens on (it dequantizes each key once per 64 heads); else h16w8 up to
 * MLA_DECODE_H16W8_MAX_T tokens (the most CTAs and the shortest per-warp chains); else,
 * when 32 | H, h32w4 below MLA_DECODE_WS32_MIN_T and ws32 from it on; else h16w4.
 * Prefill: ws32 when 32 | H (its QK of one tile overlaps PV of the previous one), else
 * h16w4. The crossovers are H200 measurements listed in docs/attention.md (Decisions). */
#ifndef MLA_DECODE_H16W8_MAX_T
#define MLA_DECODE_H16W8_MAX_T 8
#endif
#ifndef MLA_DECODE_WS64_MIN_T
#define MLA_DECODE_WS64_MIN_T 8
#endif
#ifndef MLA_DECODE_WS32_MIN_T
#define MLA_DECODE_WS32_MIN_T 16
#endif

#endif
