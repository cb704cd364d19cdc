/*
 * Sparse MLA decode, ws32 and ws64: the warp-specialised CTA of mla_ws.cuh
 * (decomposition, handoffs, numerics) over paged fp8_ds_mla caches, with the record
 * producer of mla_decode_rows.cuh. Grid: T * S * H/HC CTAs (HC = 32 or 64); S > 1 (or
 * force_merge) writes raw partials that the second-launch merge combines.
 *
 * Producer, per PV warp wd (slice group wd), after its PV of tile i (buffer b = i & 1):
 *   1. wait for its raw slice of tile i + 2, staged a whole tile earlier (so the loop
 *      does not wait on a DRAM or L2 round trip), and dequantize it into buffer b;
 *   2. arrive at KFULL[b] (the score warps' wait ends here);
 *   3. stage its raw slice of tile i + 3 into the one raw buffer (its own bytes of each
 *      record: no other warp reads them).
 * So QK and softmax of tile i + 1 overlap PV of tile i and the dequantize pass of tile
 * i + 2, and step 3 overlaps QK of tile i + 2. Each record is decoded once per CTA for
 * all its heads (ws64 halves that work per head against ws32).
 *
 * Row sources (the ring of mla_tile.cuh): tiles 0 .. AHEAD - 1 are converted by the PV
 * warps at the start. Tile k >= AHEAD is converted in iteration k - AHEAD by the score
 * warps, with the ids of tile k + 1 fetched (no L2 prefetch: mla_tile.cuh's convert_next),
 * after their PREADY arrive of that iteration and before the next: on the PV warps (after
 * step 3) that work sat on every PV warp's per-tile path, a few lanes of each (measured
 * slower). It is staged in iteration k - 3, after the PV warps' PREADY sync of that
 * iteration, which follows the conversion (so AHEAD >= 4). Its slot is rewritten (tile
 * k + AHEAD + 1) only after a later barrier that the stage of tile k precedes. PV warp 0
 * writes a tile's key flags when it lands (from its ring slot: staging happens too early
 * for the flag slots).
 * Start: tiles 0 and 1 go through the raw buffer one after the other; then tile 2 is
 * staged. (Staging tile 0 in bf16 buffer 1's space to have both in flight at once
 * measured no faster.)
 */
#include <cuda_runtime.h>

#include "attention/mla_decode_rows.cuh"
#include "attention/mla_ws.cuh"

/* Record chunks a PV warp's thread dequantizes at a time (mla_decode_rows.cuh). */
#ifndef MLA_WS_DEQUANT_UNROLL
#define MLA_WS_DEQUANT_UNROLL 2
#endif

/* G: the CTA geometry (mla_ws.cuh). */
template <class G> struct MlaDecodeWsProd : MlaDecodeProd {
    typedef G Geo;
    typedef typename G::Pv C;
    static constexpr bool SPLITS = true, EARLY_Q = false;
    /* ws64: one chain (measured faster); ws32 spills 8 bytes on sm_86 / sm_90 with one */
    static constexpr int QK_CHAINS = G::HC == 64 ? 1 : 2;
    /* the output leaves through the two bf16 K tiles (mla_epilogue_stage), free after
     * FINAL: 16-byte chunks instead of 4-byte stores */
    static constexpr bool STAGE_OUT = true;
    static constexpr int R = AHEAD + 1;
    static_assert(AHEAD >= 4, "a ring slot is converted at least one barrier before it is staged");
    struct WsSmem {
        uint16_t k[2][MLA_N][MLA_KSTR];
        uint8_t raw[1][MLA_N][DSV4_KV_DATA_BYTES];
        uint32_t scale[1][C::WD][MLA_N];
        unsigned long long src[R][MLA_N];
        uint32_t scale_off[R][MLA_N];
        int ids[2][MLA_N];
        MlaWsShared<G> c;
    };

    static __device__ __forceinline__ int lane() { return (int)(threadIdx.x & 31); }

    /* Stage tile k's raw slice (ring slot k % R). */
    static __device__ __forceinline__ void stage(WsSmem &sm, int k, int wd) { issue<C, false>(sm, k % R, 0, wd); }

    /* Wait for tile k's staged slice, dequantize it into buffer
     * b = k & 1; PV warp 0 writes the tile's key flags from its ring slot (converted
     * AHEAD tiles before it, rewritten only R tiles after). */
    static __device__ __forceinline__ void land(WsSmem &sm, int k, int wd) {
        const int b = k & 1;
        dsv4_cp_async_wait<0>();
        __syncwarp();
        dequant<C, MLA_WS_DEQUANT_UNROLL>(sm, 0, &sm.k[b][0][0], wd, lane());
        if (wd == 0 && lane() < C::N) sm.c.meta[b][lane()] = mla_src_valid(sm.src[k % R][lane()]) ? 1 : 0;
        __syncwarp(); /* the raw slice is read before the next stage overwrites it */
    }

    static __device__ __forceinline__ void ws_pre_start(const mla_params_t &, int, WsSmem &, int) {}
    static __device__ __forceinline__ void ws_start(const mla_params_t &p, const MlaWork &w, WsSmem &sm, int ntiles,
                                                    int wd) {
        const int crow = converter_row<C>();
        if (lane() < C::N / C::NW) convert_first<C>(p, w, sm, ntiles, crow);
        dsv4_bar_sync<MLA_WS_BAR_PV>(32 * G::PV_WARPS); /* ring slots 0 .. AHEAD - 1 */
        if (ntiles > 0) stage(sm, 0, wd);
        dsv4_cp_async_commit();
        if (ntiles > 0) land(sm, 0, wd);
        if (ntiles > 1) stage(sm, 1, wd);
        dsv4_cp_async_commit();
        if (ntiles > 0) dsv4_bar_arrive<MLA_WS_BAR_KFULL + 0>(G::THREADS);
        if (ntiles > 1) land(sm, 1, wd);
        if (ntiles > 2) stage(sm, 2, wd);
        dsv4_cp_async_commit();
        if (ntiles > 1) dsv4_bar_arrive<MLA_WS_BAR_KFULL + 1>(G::THREADS);
    }

    /* After PV of tile i (called when i + 2 < ntiles): tile i + 2 into buffer BUF. */
    template <int BUF>
    static __device__ __forceinline__ void ws_refill(const mla_params_t &, const MlaWork &, WsSmem &sm, int i, int,
                                                     int wd) {
        land(sm, i + 2, wd);
    }

    /* After tile i + 2 is announced: stage tile i + 3. */
    static __device__ __forceinline__ void ws_ahead(const mla_params_t &, const MlaWork &, WsSmem &sm, int i,
                                                    int ntiles, int wd) {
        if (i + 3 < ntiles) stage(sm, i + 3, wd);
        dsv4_cp_async_commit();
    }

    /* The score warps convert the row sources from tile AHEAD on: lanes
     * 0 .. 16 / SCORE_WARPS - 1 of score warp q, one row each, each fetching its ids a
     * tile ahead (cp.async, its own group). */
    static constexpr int SROWS = C::N / G::SCORE_WARPS;
    static __device__ __forceinline__ void ws_score_start(const mla_params_t &p, const MlaWork &w, WsSmem &sm, int,
                                                          int q, int lane) {
        if (lane < SROWS) {
            const int row = q * SROWS + lane;
            mla_key_id_async(p, w, AHEAD * C::N + row, &sm.ids[AHEAD & 1][row]);
            dsv4_cp_async_commit();
        }
    }

    /* After handing tile i to the PV warps: convert tile i + AHEAD (staged in iteration
     * i + AHEAD - 3, after the PREADY barrier that this warp arrives at next) and fetch
     * the ids of the one after. */
    static __device__ __forceinline__ void ws_score_ahead(const mla_params_t &p, const MlaWork &w, WsSmem &sm, int i,
                                                          int ntiles, int, int) {
        /* the row from an opaque %tid.x read: nothing of it lives through the QK loop
         * (the score warps are at the register cap) */
        const int tid = mla_opaque_tid(), lane = tid & 31, q = (tid >> 5) - G::PV_WARPS;
        if (lane < SROWS && i + AHEAD < ntiles) {
            dsv4_cp_async_wait<0>(); /* its ids, fetched one tile ago */
            convert_next<C>(p, w, sm, i + AHEAD, q * SROWS + lane);
            dsv4_cp_async_commit();
        }
    }
};

/* ws32: 32 heads */
typedef MlaDecodeWsProd<MlaWsGeo32> MlaDecodeWs32;
/* ws64: 64 heads, 4 score + 8 PV warps, one p slot, one CTA per SM */
typedef MlaDecodeWsProd<MlaWsGeo<64, 8, 1, 1>> MlaDecodeWs64;
static_assert(sizeof(MlaDecodeWs32::WsSmem) == MLA_SMEM_DECODE_WS(32, 4, 2), "sparse_mla_config.h's budget is stale");
static_assert(sizeof(MlaDecodeWs64::WsSmem) == MLA_SMEM_DECODE_WS(64, 8, 1), "sparse_mla_config.h's budget is stale");
static_assert(mla_ws_geo_is<MlaDecodeWs32::Geo>(DSV4_MLA_CONFIG_WS32) &&
                  mla_ws_geo_is<MlaDecodeWs64::Geo>(DSV4_MLA_CONFIG_WS64),
              "sparse_mla_config.h's config table is stale");

extern "C" dsv4_status_t mla_launch_decode_ws(int config, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
    return config == DSV4_MLA_CONFIG_WS32 ? mla_ws_launch<MlaDecodeWs32>("sparse_mla_decode", p, ctas, stream)
                                          : mla_ws_launch<MlaDecodeWs64>("sparse_mla_decode", p, ctas, stream);
}
