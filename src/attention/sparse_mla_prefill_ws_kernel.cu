/*
 * Sparse MLA prefill, config 4 (the auto choice): a warp-specialised CTA (same formula
 * and semantics as sparse_mla_prefill_kernel.cu; spec/sparse-mla.md section 3).
 * H200: 29-35% of mma.sync against config 2's 22-25% (docs/attention.md, session 11).
 *
 * Why a second decomposition. The engine of mla_tile.cuh splits every product over 4
 * dim-slice warps, so a tile's scores need a CTA-wide reduction and softmax between QK
 * and PV (two CTA barriers per tile), and each warp runs QK, softmax and PV of one tile
 * in series: at two CTAs per SM it stays under 25% of mma.sync (docs/attention.md,
 * session 10's barrier ablation). Here the roles are split so that QK of tile i + 1
 * runs while PV of tile i does:
 *
 *   score warps (warps 4, 5): warp 4 + q owns heads 16q .. 16q + 15 of the CTA's 32 and
 *     all 512 dims. Its Q (16 x 512 bf16) stays in registers as A fragments (128 regs),
 *     so a tile's scores come out of one warp's mma chains: no partial-score buffer, no
 *     CTA reduction. The online softmax runs in registers (4 lanes per head row, a quad
 *     shuffle for the max); the warp publishes bf16 p and alpha for its 16 rows.
 *   PV warps (warps 0-3): warp wd owns all 32 heads and dims wd*128 .. +127 of O (128
 *     fp32 regs) and is slice group wd of mla_prefill_rows.cuh: it copies its dims of
 *     each key row (tile i + 2 right after its PV of tile i, into the buffer tile i
 *     leaves) and fetches the ids of tile i + 3.
 *
 * Per tile i (buffer b = i & 1), named barriers (prim/named_barrier.cuh), 192 threads:
 *   KFULL[b]: PV warps arrive once their copies of tile i have landed (and tile i's key
 *     flags are written); score warps wait, then QK and softmax.
 *   PREADY[b]: score warps arrive after writing p and alpha of tile i into slot b; PV
 *     warps wait, then O = O * alpha + P K.
 * Reuse is ordered by the same two barriers: buffer b and its flags are rewritten (tile
 * i + 2) only after PV of tile i, which follows QK of tile i (PREADY); p slot b is
 * rewritten (tile i + 2) only after KFULL of tile i + 2, which PV warps arrive after
 * their PV of tile i. FINAL: score warps arrive after publishing each row's m and l;
 * PV warps wait, then write the output with the engine's epilogue (same finalisation
 * and division code, mla_softmax.cuh). compute-sanitizer racecheck cannot follow an
 * arrive -> sync handoff and reports these as hazards (tools/racecheck_arrive_repro.cu);
 * memcheck and synccheck run this kernel.
 *
 * One (token, 32-head group) per CTA, head group fastest. A persistent version (each CTA
 * walking items c, c + G, ... with its copies running ahead across item boundaries, so
 * that start-up and output write overlap the next item) was 1-2% faster than itself with
 * one item per CTA but 9-11% slower than this kernel (session 11 run 4: its cursor and
 * item bookkeeping sat on the PV warps' path), so it was not kept.
 *
 * Numerics: as the engine (bf16 products, fp32 accumulation, lazy reference max, p
 * rounded to bf16 for PV), except that a score is one 512-wide mma chain per
 * accumulator (MLA_WS_QK_CHAINS interleaved chains over the k-steps, added in order at
 * the end) instead of four 128-wide slice sums, and l is summed per lane (4 lanes per
 * row) and the 4 lanes' sums added at the end. Deterministic; within the same fp64
 * contract (spec section 6).
 *
 * Resources: 192 threads, MLA_WS_CTAS_PER_SM CTAs per SM (168 registers); shared
 * memory MLA_SMEM_PREFILL_WS (sparse_mla_config.h).
 */
#include <cuda_runtime.h>
#include <float.h>

#include "attention/mla_prefill_rows.cuh"
#include "common/error.h"
#include "prim/named_barrier.cuh"

/* Interleaved accumulator chains per score fragment (the mma latency is several times
 * its issue interval). 4 spills at the two-CTA register cap. */
#ifndef MLA_WS_QK_CHAINS
#define MLA_WS_QK_CHAINS 2
#endif

typedef MlaCfg<32, 2, 4> MlaWsPv; /* the PV warps' geometry: 32 heads x 128 dims each */

enum { MLA_WS_THREADS = 32 * (MLA_WS_PV_WARPS + MLA_WS_SCORE_WARPS) };
enum { MLA_WS_BAR_KFULL = 1, MLA_WS_BAR_PREADY = 3, MLA_WS_BAR_FINAL = 5 }; /* + buffer */

struct MlaWsSmem {
    uint16_t k[2][MLA_N][MLA_KSTR];
    int ids[MlaWsPv::WD][2][MLA_N] __attribute__((aligned(16))); /* per PV warp, by tile parity */
    struct {
        int meta[2][MLA_N]; /* key flags per buffer (mla_prefill_rows.cuh) */
        uint16_t ps[2][MlaWsPv::HC][MLA_PSTR] __attribute__((aligned(16)));
        float alpha[2][MlaWsPv::HC];
        float m[MlaWsPv::HC], l[MlaWsPv::HC];
    } c;
};
static_assert(sizeof(MlaWsSmem) == MLA_SMEM_PREFILL_WS, "sparse_mla_config.h's budget line is stale");

/* One score warp's 16 x 16 scores of a tile over all 512 dims: s[nb] = keys 8nb .. 8nb+7,
 * mma accumulator layout (rows g, g + 8; keys 2tq, 2tq + 1). */
static __device__ __forceinline__ void mla_ws_scores(const uint32_t (&qf)[1][32][4], const uint16_t *kt,
                                                     float (&s)[2][4], int lane) {
    constexpr int NC = MLA_WS_QK_CHAINS;
    float acc[NC][2][4];
    mla_zero(acc);
#pragma unroll
    for (int ks = 0; ks < 32; ++ks) {
        uint32_t b[4];
        mla_ld_kfrag(b, kt, 0, 16 * ks, lane);
        dsv4_mma_bf16_16816(acc[ks % NC][0], qf[0][ks], b, acc[ks % NC][0]);
        dsv4_mma_bf16_16816(acc[ks % NC][1], qf[0][ks], b + 2, acc[ks % NC][1]);
    }
#pragma unroll
    for (int nb = 0; nb < 2; ++nb)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float v = acc[0][nb][i];
#pragma unroll
            for (int c = 1; c < NC; ++c) v = __fadd_rn(v, acc[c][nb][i]);
            s[nb][i] = v;
        }
}

/* The online softmax of a score warp's 16 rows for tile `buf` (lazy reference max, as
 * mla_softmax_rows): p -> ps[buf], alpha -> alpha[buf]; m, l per row half (g, g + 8),
 * l as this lane's partial sum. */
static __device__ __forceinline__ void mla_ws_softmax(const float (&s)[2][4], MlaWsSmem &sm, int buf, int row0,
                                                      float (&m)[2], float (&l)[2], float scale, int lane) {
    const int g = lane >> 2, tq = lane & 3;
    const int2 f0 = *(const int2 *)&sm.c.meta[buf][2 * tq], f1 = *(const int2 *)&sm.c.meta[buf][8 + 2 * tq];
    const bool ok[4] = {f0.x != 0, f0.y != 0, f1.x != 0, f1.y != 0};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float v[4], tmax = -FLT_MAX;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            v[k] = __fmul_rn(s[k >> 1][2 * h + (k & 1)], scale);
            if (ok[k]) tmax = fmaxf(tmax, v[k]);
        }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
        const float m_new = mla_lazy_max(m[h], tmax), alpha = mla_rescale(m[h], m_new);
        float pr[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) pr[k] = mla_prob(v[k], m_new, ok[k]);
        const float psum = __fadd_rn(__fadd_rn(__fadd_rn(pr[0], pr[1]), pr[2]), pr[3]);
        l[h] = mla_running_sum(l[h], alpha, psum);
        m[h] = m_new;
        const int row = row0 + g + 8 * h;
        *(uint32_t *)&sm.c.ps[buf][row][2 * tq] = dsv4_pack_bf16x2(pr[0], pr[1]);
        *(uint32_t *)&sm.c.ps[buf][row][8 + 2 * tq] = dsv4_pack_bf16x2(pr[2], pr[3]);
        if (tq == 0) sm.c.alpha[buf][row] = alpha;
    }
}

/* Score warp tile in buffer BUF (a template argument: constant offsets, immediate
 * barrier ids; the loops below take the tiles in pairs). */
template <int BUF>
static __device__ __forceinline__ void mla_ws_score_tile(const mla_params_t &p, MlaWsSmem &sm,
                                                         const uint32_t (&qf)[1][32][4], int q, float (&m)[2],
                                                         float (&l)[2], int lane) {
    dsv4_bar_sync<MLA_WS_BAR_KFULL + BUF>(MLA_WS_THREADS);
    float s[2][4];
    mla_ws_scores(qf, &sm.k[BUF][0][0], s, lane);
    mla_ws_softmax(s, sm, BUF, 16 * q, m, l, p.scale, lane);
    dsv4_bar_arrive<MLA_WS_BAR_PREADY + BUF>(MLA_WS_THREADS);
}

/* Score warp q: heads 16q .. 16q + 15 of the CTA. */
static __device__ __forceinline__ void mla_ws_score_warp(const mla_params_t &p, MlaWsSmem &sm, const MlaWork &w,
                                                         int t, int head_cta, int q, int lane) {
    uint32_t qf[1][32][4];
    mla_load_q<1, 32>(qf, p, t, head_cta + 16 * q, 0, lane);
    float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.0f, 0.0f};
    const int ntiles = (w.n + MLA_N - 1) / MLA_N;
    for (int i = 0; i < ntiles; i += 2) {
        mla_ws_score_tile<0>(p, sm, qf, q, m, l, lane);
        if (i + 1 < ntiles) mla_ws_score_tile<1>(p, sm, qf, q, m, l, lane);
    }
    const int g = lane >> 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) { /* the row's 4 lanes: a butterfly gives each the same bits */
        l[h] = __fadd_rn(l[h], __shfl_xor_sync(0xffffffffu, l[h], 1));
        l[h] = __fadd_rn(l[h], __shfl_xor_sync(0xffffffffu, l[h], 2));
        if ((lane & 3) == 0) {
            sm.c.m[16 * q + g + 8 * h] = m[h];
            sm.c.l[16 * q + g + 8 * h] = l[h];
        }
    }
    dsv4_bar_arrive<MLA_WS_BAR_FINAL>(MLA_WS_THREADS);
}

/* PV warp tile i in buffer BUF = i & 1; then the copies of tile i + 2 into it. */
template <int BUF>
static __device__ __forceinline__ void mla_ws_pv_tile(const mla_params_t &p, MlaWsSmem &sm, const MlaWork &w,
                                                      float (&o)[MlaWsPv::MT][MlaWsPv::NBO][4], int i, int ntiles,
                                                      int wd, int lane) {
    typedef MlaWsPv C;
    dsv4_bar_sync<MLA_WS_BAR_PREADY + BUF>(MLA_WS_THREADS);
    mla_pv<C>(o, &sm.k[BUF][0][0], sm.c.ps[BUF], sm.c.alpha[BUF], 0, wd * C::DW, lane);
    if (i + 2 < ntiles) {
        __syncwarp(); /* every lane's ldmatrix of this slice before the copies overwrite it */
        MlaPrefillProd::issue<C>(p, sm, i + 2, BUF, wd);
        if (i + 3 < ntiles) MlaPrefillProd::fetch_ids<C>(p, w, sm, i + 3, wd);
        dsv4_cp_async_commit();
        dsv4_cp_async_wait<0>();
        dsv4_bar_arrive<MLA_WS_BAR_KFULL + BUF>(MLA_WS_THREADS);
    }
}

/* PV warp wd: dims wd*128 .. +127 of all 32 heads, and slice group wd of the copies. */
static __device__ __forceinline__ void mla_ws_pv_warp(const mla_params_t &p, MlaWsSmem &sm, const MlaWork &w, int wd,
                                                      int lane) {
    typedef MlaWsPv C;
    float o[C::MT][C::NBO][4];
    mla_zero(o);
    const int ntiles = (w.n + MLA_N - 1) / MLA_N;
    MlaPrefillProd::start<C>(p, w, sm, ntiles, wd); /* tiles 0 and 1, the ids of tile 2 */
    if (ntiles > 0) {
        dsv4_cp_async_wait<1>();
        dsv4_bar_arrive<MLA_WS_BAR_KFULL + 0>(MLA_WS_THREADS);
    }
    if (ntiles > 1) {
        dsv4_cp_async_wait<0>();
        dsv4_bar_arrive<MLA_WS_BAR_KFULL + 1>(MLA_WS_THREADS);
    }
    for (int i = 0; i < ntiles; i += 2) {
        mla_ws_pv_tile<0>(p, sm, w, o, i, ntiles, wd, lane);
        if (i + 1 < ntiles) mla_ws_pv_tile<1>(p, sm, w, o, i + 1, ntiles, wd, lane);
    }
    dsv4_bar_sync<MLA_WS_BAR_FINAL>(MLA_WS_THREADS);
    mla_epilogue<C, false>(p, sm.c.m, sm.c.l, w, o);
}

__global__ void __launch_bounds__(MLA_WS_THREADS, MLA_WS_CTAS_PER_SM) mla_prefill_ws_kernel(mla_params_t p) {
    __shared__ __align__(16) MlaWsSmem sm;
    __shared__ MlaWork w;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int head_groups = p.num_heads / MlaWsPv::HC;
    const int t = (int)blockIdx.x / head_groups, head_cta = ((int)blockIdx.x % head_groups) * MlaWsPv::HC;
    if (threadIdx.x == 0) w = mla_work(p, t, 0, head_cta);
    if (warp < MLA_WS_PV_WARPS) mla_prefetch_id_rows<MlaWsPv>(p, t);
    __syncthreads(); /* w */
    if (warp < MLA_WS_PV_WARPS) {
        mla_ws_pv_warp(p, sm, w, warp, lane);
    } else {
        mla_ws_score_warp(p, sm, w, t, head_cta, warp - MLA_WS_PV_WARPS, lane);
    }
}

extern "C" dsv4_status_t mla_launch_prefill_ws(const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
    static const char *op = "sparse_mla_prefill";
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mla_prefill_ws_kernel, 0, &smem_cache));
    mla_prefill_ws_kernel<<<(unsigned)ctas, MLA_WS_THREADS, 0, (cudaStream_t)stream>>>(*p);
    return dsv4_launch_status(op);
}
