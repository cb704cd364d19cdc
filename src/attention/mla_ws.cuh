/*
 * ws32 and ws64: the warp-specialised sparse MLA CTA, shared by prefill (bf16 rows,
 * sparse_mla_prefill_ws_kernel.cu, ws32) and decode (fp8 records,
 * sparse_mla_decode_ws_kernel.cu, ws32 and ws64). Same formula and semantics as the
 * engine of mla_tile.cuh (include/dsv4/attention.h).
 *
 * Why a second decomposition. The engine splits every product over 4 dim-slice warps,
 * so a tile's scores need a CTA-wide reduction and softmax between QK and PV (two CTA
 * barriers per tile), and each warp runs QK, softmax and PV of one tile in series: at
 * two CTAs per SM it stays far below the mma.sync rate, even with its CTA barriers
 * removed. Here the roles are split so that QK of tile i + 1 runs while PV of tile i
 * does. A CTA of HC heads (MlaWsGeo: 32 in ws32, 64 in ws64) has
 *
 *   HC / 16 score warps (the last warps): score warp q owns heads 16q .. 16q + 15 and
 *     all 512 dims. Its Q (16 x 512 bf16) stays in registers as A fragments (128 regs),
 *     so a tile's scores come out of one warp's mma chains: no partial-score buffer, no
 *     CTA reduction. The online softmax runs in registers (4 lanes per head row, a quad
 *     shuffle for the max); the warp publishes bf16 p and alpha for its 16 rows.
 *   PVW PV warps (warps 0 .. PVW - 1; 4 in ws32, 8 in ws64): warp wd owns all HC
 *     heads and dims wd * 512 / PVW .. of O (128 fp32 regs) and is slice group wd of the
 *     row producer (Prod): after its PV of tile i it refills the buffer tile i leaves
 *     with its dims of tile i + 2 (prefill: copies the bf16 rows; decode: dequantizes
 *     the fp8 records it staged a tile earlier).
 *
 * Per tile i (buffer b = i & 1), named barriers (prim/named_barrier.cuh) over all the
 * CTA's threads:
 *   KFULL[b]: PV warps arrive once their slices of tile i are in buffer b (and tile i's
 *     key flags are written); score warps wait, then QK and softmax.
 *   PREADY[b]: score warps arrive after writing p and alpha of tile i; PV warps wait,
 *     then O = O * alpha + P K.
 * Reuse is ordered by the same two barriers: buffer b is rewritten (tile i + 2) only
 * after PV of tile i, which follows QK of tile i (PREADY); with two p slots (ws32),
 * slot b is rewritten (tile i + 2) only after KFULL of tile i + 2, which PV warps arrive
 * after their PV of tile i. With one p slot (ws64: two do not fit next to 64 heads'
 * state in 48 KB) the score warps also wait at PFREE before writing p of tile i >= 1;
 * PV warps arrive there after their PV of tile i - 1.
 * Key flags live in two slots by buffer parity, written by the producer. FINAL:
 * score warps arrive after publishing each row's m and l; PV warps wait, then write the
 * output (or the split's partials) with the engine's epilogue (same finalisation and
 * division code, mla_softmax.cuh). compute-sanitizer racecheck cannot follow an arrive
 * -> sync handoff and reports these as hazards (tools/racecheck_arrive_repro.cu);
 * memcheck and synccheck run these kernels.
 *
 * One (token, split, head group) per CTA, head group fastest. Partials of a split are
 * merged by the second-launch merge (no merge CTAs in this launch; a merge by the last
 * split's CTA measured slower). A persistent version (each CTA walking items c, c + G,
 * ... with its copies running ahead across item boundaries) measured slower for
 * prefill.
 *
 * Numerics: as the engine (bf16 products, fp32 accumulation, lazy reference max, p
 * rounded to bf16 for PV), except that a score is one 512-wide mma chain per
 * accumulator (Prod::QK_CHAINS interleaved chains over the k-steps, added in order at
 * the end) instead of four 128-wide slice sums, and l is summed per lane (4 lanes per
 * row) and the 4 lanes' sums added at the end. Deterministic; within the same accuracy
 * contract (include/dsv4/attention.h).
 *
 * Resources (168 registers either way): ws32 192 threads, 2 CTAs per SM; ws64
 * 384 threads, 1 CTA per SM; shared memory MLA_SMEM_PREFILL_WS / MLA_SMEM_DECODE_WS
 * (sparse_mla_config.h).
 *
 * A producer Prod provides: Geo (its MlaWsGeo), WsSmem (members k[2][MLA_N][MLA_KSTR] and
 * c, an MlaWsShared<Geo>), SPLITS (whether the grid has a split dimension), EARLY_Q
 * (whether the score warps load Q before w is known, across the barrier that publishes
 * it: prefill; decode ws64 spills 8 bytes on sm_90 with it), QK_CHAINS (the score
 * warps' accumulator chains, mla_ws_scores), STAGE_OUT (whether the
 * epilogue stages rows in k: mla_epilogue_stage), ws_pre_start(t) (the PV warps' work
 * before w is known: prefill fetches its first ids), ws_start() (the PV warps' start:
 * tiles 0 and 1 into buffers 0 and 1, each announced by an arrive at KFULL[b]),
 * ws_refill<BUF>(i) (after PV of tile i: tile i + 2 into buffer BUF), ws_ahead(i) (after
 * tile i + 2 is announced: work for later tiles, off the score warps' path), and the
 * score warps' share: ws_score_start() before their first tile and ws_score_ahead(i)
 * after they hand tile i to the PV warps.
 */
#ifndef DSV4_ATTENTION_MLA_WS_CUH
#define DSV4_ATTENTION_MLA_WS_CUH

#include <float.h>

#include "attention/mla_tile.cuh"
#include "common/error.h"
#include "prim/named_barrier.cuh"

/* A warp-specialised CTA's geometry: HC heads, HC / 16 score warps (16 heads x 512 dims
 * each), PVW PV warps (all HC heads x 512 / PVW dims each: the engine's MlaCfg with one
 * warp per slice group), P p slots (2: by tile parity; 1: the score warps wait at PFREE
 * until the PV warps have read the previous tile's p), CPS CTAs per SM for the
 * register cap of __launch_bounds__. */
template <int HC_, int PVW_, int P_, int CPS_> struct MlaWsGeo {
    static constexpr int HC = HC_, PV_WARPS = PVW_, SCORE_WARPS = HC_ / 16, P_SLOTS = P_, CTAS_PER_SM = CPS_;
    static constexpr int THREADS = 32 * (PV_WARPS + SCORE_WARPS);
    typedef MlaCfg<HC, HC / 16, PVW_> Pv;
    static_assert(Pv::WH == 1 && Pv::NW == PV_WARPS, "one PV warp per dim slice");
};
/* Whether geometry G is what the host's config table (sparse_mla_config.h) plans config
 * `id` with: heads per CTA, warps, resident CTAs per SM (the split policy's wave). */
template <class G> constexpr bool mla_ws_geo_is(int id) {
    return G::HC == MLA_CFG_HC(id) && G::THREADS == 32 * MLA_CFG_WARPS(id) && G::PV_WARPS == MLA_CFG_WD(id) &&
           G::CTAS_PER_SM == MLA_CFG_CTAS_PER_SM(id);
}
/* ws32: 32 heads, 2 score + 4 PV warps, 2 CTAs per SM (168 registers) */
typedef MlaWsGeo<32, MLA_WS_PV_WARPS, 2, MLA_CFG_CTAS_PER_SM(DSV4_MLA_CONFIG_WS32)> MlaWsGeo32;

/* KFULL and PREADY + buffer; PV: the PV warps alone (decode's start); PFREE: p slot read */
enum { MLA_WS_BAR_KFULL = 1, MLA_WS_BAR_PREADY = 3, MLA_WS_BAR_FINAL = 5, MLA_WS_BAR_PV = 6, MLA_WS_BAR_PFREE = 7 };

/* The part of a warp-specialised CTA's shared memory that both roles use. */
template <class G> struct MlaWsShared {
    int meta[2][MLA_N]; /* key flags of the tile in buffer b (1 valid, 0 not) */
    uint16_t ps[G::P_SLOTS][G::HC][MLA_PSTR] __attribute__((aligned(16)));
    float alpha[2][G::HC];
    float m[G::HC], l[G::HC];
};

/* One score warp's 16 x 16 scores of a tile over all 512 dims: s[nb] = keys 8nb .. 8nb+7,
 * mma accumulator layout (rows g, g + 8; keys 2tq, 2tq + 1). NC interleaved accumulator
 * chains per score fragment over the k-steps (Prod::QK_CHAINS). With Q's 128 registers
 * at the 168-register cap, ptxas pays for NC = 2's second chain with the ldmatrix
 * prefetch in decode ws64 (half its k-steps load B right before the mma); NC = 1
 * keeps two k-steps of B in flight instead, and the step is one dependent mma. */
template <int NC>
static __device__ __forceinline__ void mla_ws_scores(const uint32_t (&qf)[1][32][4], const uint16_t *kt,
                                                     float (&s)[2][4], int lane) {
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

/* The online softmax of a score warp's 16 rows for the tile in buffer `buf` with key
 * flags meta[buf] (lazy reference max, as mla_softmax_rows): p -> ps[pslot], alpha ->
 * alpha[buf]; m, l per row half (g, g + 8), l as this lane's partial sum. */
template <class G>
static __device__ __forceinline__ void mla_ws_softmax(const float (&s)[2][4], MlaWsShared<G> &c, int buf, int pslot,
                                                      int row0, float (&m)[2], float (&l)[2], float scale, int lane) {
    const int g = lane >> 2, tq = lane & 3;
    const int2 f0 = *(const int2 *)&c.meta[buf][2 * tq], f1 = *(const int2 *)&c.meta[buf][8 + 2 * tq];
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
        *(uint32_t *)&c.ps[pslot][row][2 * tq] = dsv4_pack_bf16x2(pr[0], pr[1]);
        *(uint32_t *)&c.ps[pslot][row][8 + 2 * tq] = dsv4_pack_bf16x2(pr[2], pr[3]);
        if (tq == 0) c.alpha[buf][row] = alpha;
    }
}

/* Score warp tile i in buffer BUF = i & 1 (a template argument: constant offsets,
 * immediate barrier ids; the loops below take the tiles in pairs); then the producer's
 * part of the score warps for later tiles, while the PV warps run PV of tile i. */
template <class Prod, int BUF, class Smem>
static __device__ __forceinline__ void mla_ws_score_tile(const mla_params_t &p, Smem &sm, const MlaWork &w,
                                                         const uint32_t (&qf)[1][32][4], int i, int ntiles, int q,
                                                         float (&m)[2], float (&l)[2], int lane) {
    typedef typename Prod::Geo G;
    dsv4_bar_sync<MLA_WS_BAR_KFULL + BUF>(G::THREADS);
    float s[2][4];
    mla_ws_scores<Prod::QK_CHAINS>(qf, &sm.k[BUF][0][0], s, lane);
    if (G::P_SLOTS == 1 && i > 0) dsv4_bar_sync<MLA_WS_BAR_PFREE>(G::THREADS); /* p of tile i - 1 read */
    mla_ws_softmax(s, sm.c, BUF, G::P_SLOTS == 1 ? 0 : BUF, 16 * q, m, l, p.scale, lane);
    dsv4_bar_arrive<MLA_WS_BAR_PREADY + BUF>(G::THREADS);
    Prod::ws_score_ahead(p, w, sm, i, ntiles, q, lane);
}

/* Score warp q: heads 16q .. 16q + 15 of the CTA (its Q in qf). */
template <class Prod, class Smem>
static __device__ __forceinline__ void mla_ws_score_warp(const mla_params_t &p, Smem &sm, const MlaWork &w,
                                                         const uint32_t (&qf)[1][32][4], int q, int lane) {
    float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.0f, 0.0f};
    const int ntiles = (w.n + MLA_N - 1) / MLA_N;
    Prod::ws_score_start(p, w, sm, ntiles, q, lane);
    for (int i = 0; i < ntiles; i += 2) {
        mla_ws_score_tile<Prod, 0>(p, sm, w, qf, i, ntiles, q, m, l, lane);
        if (i + 1 < ntiles) mla_ws_score_tile<Prod, 1>(p, sm, w, qf, i + 1, ntiles, q, m, l, lane);
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
    dsv4_bar_arrive<MLA_WS_BAR_FINAL>(Prod::Geo::THREADS);
}

/* PV warp tile i in buffer BUF = i & 1; then the producer refills the buffer with tile
 * i + 2, announces it and prepares later tiles. */
template <class Prod, int BUF, class Smem, class O>
static __device__ __forceinline__ void mla_ws_pv_tile(const mla_params_t &p, Smem &sm, const MlaWork &w, O &o, int i,
                                                      int ntiles, int wd, int lane) {
    typedef typename Prod::Geo G;
    typedef typename G::Pv C;
    dsv4_bar_sync<MLA_WS_BAR_PREADY + BUF>(G::THREADS);
    mla_pv<C>(o, &sm.k[BUF][0][0], sm.c.ps[G::P_SLOTS == 1 ? 0 : BUF], sm.c.alpha[BUF], 0, wd * C::DW, lane);
    /* one p slot: PV's mma has consumed this tile's p, the score warps may write the
     * next tile's (they wait for this from their second tile on; arriving right after
     * the first mma instead measured no faster) */
    if (G::P_SLOTS == 1 && i + 1 < ntiles) dsv4_bar_arrive<MLA_WS_BAR_PFREE>(G::THREADS);
    if (i + 2 < ntiles) {
        __syncwarp(); /* every lane's ldmatrix of this slice before the refill overwrites it */
        Prod::template ws_refill<BUF>(p, w, sm, i, ntiles, wd);
        dsv4_bar_arrive<MLA_WS_BAR_KFULL + BUF>(G::THREADS);
        Prod::ws_ahead(p, w, sm, i, ntiles, wd);
    }
}

/* A decode CTA's raw partials (acc, m, l: attention.h's workspace layout) through the
 * K tiles (free after FINAL): each PV warp stages its dims of 16 rows at a time (rows
 * 2080 bytes apart: conflict-free float2 stores) and writes them as 16-byte chunks, 512
 * contiguous bytes per warp instruction, instead of the engine epilogue's 8-byte stores
 * that touch 8 rows per instruction (measured faster). Warp-local: each warp reads back
 * only its own dims. */
template <class C, class Smem>
static __device__ __forceinline__ void mla_ws_store_partials(const mla_params_t &p, Smem &sm, const MlaWork &w,
                                                             const float (&o)[C::MT][C::NBO][4]) {
    const int tid = mla_opaque_tid(), lane = tid & 31, g = lane >> 2, tq = lane & 3, dim0 = (tid >> 5) * C::DW;
    const int64_t row0 = ((int64_t)w.t * p.num_splits + w.split) * p.num_heads + w.head_cta;
    if (tid < C::HC) {
        p.part_m[row0 + tid] = sm.c.m[tid];
        p.part_l[row0 + tid] = sm.c.l[tid];
    }
    constexpr int RS = 520, CPR = C::DW / 4, RPI = 32 / CPR; /* floats per staged row; chunks */
    static_assert(16 * RS * 4 <= (int)sizeof(sm.k) && RPI * CPR == 32, "16 rows fit the K tiles");
    float *stg = (float *)&sm.k[0][0][0] + dim0;
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt) {
        __syncwarp(); /* the previous block's reads */
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
            for (int nb = 0; nb < C::NBO; ++nb)
                *(float2 *)(stg + (8 * half + g) * RS + 8 * nb + 2 * tq) =
                    make_float2(o[mt][nb][2 * half], o[mt][nb][2 * half + 1]);
        __syncwarp();
#pragma unroll
        for (int r = lane / CPR; r < 16; r += RPI)
            *(float4 *)(p.part_acc + (row0 + 16 * mt + r) * 512 + dim0 + 4 * (lane % CPR)) =
                *(const float4 *)(stg + r * RS + 4 * (lane % CPR));
    }
}

/* PV warp wd: dims wd * 512 / PVW .. of all HC heads, and slice group wd of the producer. */
template <class Prod, class Smem>
static __device__ __forceinline__ void mla_ws_pv_warp(const mla_params_t &p, Smem &sm, const MlaWork &w, int wd,
                                                      int lane) {
    typedef typename Prod::Geo::Pv C;
    float o[C::MT][C::NBO][4];
    mla_zero(o);
    const int ntiles = (w.n + MLA_N - 1) / MLA_N;
    Prod::ws_start(p, w, sm, ntiles, wd);
    for (int i = 0; i < ntiles; i += 2) {
        mla_ws_pv_tile<Prod, 0>(p, sm, w, o, i, ntiles, wd, lane);
        if (i + 1 < ntiles) mla_ws_pv_tile<Prod, 1>(p, sm, w, o, i + 1, ntiles, wd, lane);
    }
    const MlaEpiSinks<C> sinks = mla_epilogue_sinks<C>(p, w.head_cta);
    dsv4_bar_sync<MLA_WS_BAR_FINAL>(Prod::Geo::THREADS);
    if constexpr (Prod::SPLITS) {
        if (p.part_acc) {
            mla_ws_store_partials<C>(p, sm, w, o);
            return;
        }
    }
    mla_epilogue<C, false>(p, sm.c.m, sm.c.l, w, o, sinks, mla_epilogue_stage<Prod, C>(sm, 0, wd * C::DW));
}

template <class Prod>
__global__ void __launch_bounds__(Prod::Geo::THREADS, Prod::Geo::CTAS_PER_SM) mla_ws_kernel(mla_params_t p) {
    typedef typename Prod::Geo G;
    __shared__ __align__(16) typename Prod::WsSmem sm;
    __shared__ MlaWork w;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int head_groups = p.num_heads / G::HC, rest = (int)blockIdx.x / head_groups;
    const int t = Prod::SPLITS ? rest / p.num_splits : rest, head_cta = ((int)blockIdx.x % head_groups) * G::HC;
    if (threadIdx.x == 0) w = mla_work(p, t, Prod::SPLITS ? rest % p.num_splits : 0, head_cta);
    /* what does not need w goes first: its round trips overlap w's (the lengths) */
    const int q = warp - G::PV_WARPS;
    uint32_t qf[1][32][4]; /* score warps: Q of heads 16q .. 16q + 15 */
    if (warp < G::PV_WARPS) {
        mla_prefetch_id_rows<typename G::Pv>(p, t);
        Prod::ws_pre_start(p, t, sm, warp);
    } else if (Prod::EARLY_Q) {
        mla_load_q<1, 32>(qf, p, t, head_cta + 16 * q, 0, lane);
    }
    __syncthreads(); /* w */
    if (warp < G::PV_WARPS) {
        mla_ws_pv_warp<Prod>(p, sm, w, warp, lane);
    } else {
        if (!Prod::EARLY_Q) mla_load_q<1, 32>(qf, p, t, head_cta + 16 * q, 0, lane);
        mla_ws_score_warp<Prod>(p, sm, w, qf, q, lane);
    }
}

/* Launch a warp-specialised config for producer Prod through the shared-memory gate. */
template <class Prod>
static dsv4_status_t mla_ws_launch(const char *op, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mla_ws_kernel<Prod>, 0, &smem_cache));
    dsv4_launch(mla_ws_kernel<Prod>, (unsigned)ctas, Prod::Geo::THREADS, 0, (cudaStream_t)stream, *p);
    return dsv4_launch_status(op);
}

#endif /* DSV4_ATTENTION_MLA_WS_CUH */
