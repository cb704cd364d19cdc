/*
 * Sparse MLA decode, config 4: the warp-specialised CTA of mla_ws.cuh (decomposition,
 * handoffs, numerics) over paged fp8_ds_mla caches, with the record producer of
 * mla_decode_rows.cuh. Grid: T * S * H/32 CTAs; S > 1 (or force_merge) writes raw
 * partials that the second-launch merge combines (no merge CTAs in this launch).
 *
 * Producer, per PV warp wd (slice group wd), after its PV of tile i (buffer b = i & 1):
 *   1. wait for its raw slice of tile i + 2, staged a whole tile earlier (so the loop
 *      does not wait on a DRAM or L2 round trip), and dequantize it into buffer b;
 *   2. arrive at KFULL[b] (the score warps' wait ends here);
 *   3. stage its raw slice of tile i + 3 into the one raw buffer (its own 128 or 192
 *      bytes of each record: no other warp reads them);
 * The score warps, after handing tile i to the PV warps (their PREADY arrive), convert
 * the row sources of tile i + AHEAD into the ring (lanes 0-7 of each, one row each; the
 * record's lines prefetched into L2) and fetch the ids of the tile after: work that
 * would otherwise sit on every PV warp's per-tile path (4 lanes of each, SIMT).
 So QK and softmax of tile i + 1 overlap PV of tile i and the dequantize pass of tile
 * i + 2; steps 3-4 overlap QK of tile i + 2. Each record is still decoded once per CTA
 * for all 32 heads. PV warp 0 writes a tile's key flags when it lands (from its ring
 * slot: staging happens too early for the flag slots). The ring: tiles 0 .. AHEAD - 1
 * are converted by the PV warps at the start; tile k >= AHEAD by the score warps in
 * their iteration k - AHEAD, after their PREADY arrive for it and before the next, and
 * it is staged in iteration k - 3, after the PV warps' PREADY sync of iteration k - 3
 * (so AHEAD >= 4). Its slot is rewritten (tile k + AHEAD + 1) after the score warps'
 * KFULL sync of iteration k + 1, which the PV warps arrive at after staging tile k.
 * Start: tiles 0 and 1 go through the raw buffer one after the other (two staged round
 * trips before the first QK); then tile 2 is staged.
 */
#include <cuda_runtime.h>

#include "attention/mla_decode_rows.cuh"
#include "attention/mla_ws.cuh"

/* Record chunks a PV warp's thread dequantizes at a time (mla_decode_rows.cuh). */
#ifndef MLA_WS_DEQUANT_UNROLL
#define MLA_WS_DEQUANT_UNROLL 2
#endif

struct MlaDecodeWsProd : MlaDecodeProd {
    typedef MlaWsPv C;
    static constexpr bool SPLITS = true;
    static constexpr int R = AHEAD + 1;
    static_assert(AHEAD >= 4, "a ring slot is converted at least one barrier before it is staged");
    struct WsSmem {
        uint16_t k[2][MLA_N][MLA_KSTR];
        uint8_t raw[1][MLA_N][576];
        uint32_t scale[1][C::WD][MLA_N];
        unsigned long long src[R][MLA_N];
        uint32_t scale_off[R][MLA_N];
        int ids[2][MLA_N];
        MlaWsShared<2> c;
    };

    static __device__ __forceinline__ int lane() { return (int)(threadIdx.x & 31); }

    /* Stage tile k's raw slice (ring slot k % R). */
    static __device__ __forceinline__ void stage(WsSmem &sm, int k, int wd) { issue<C>(sm, k % R, 0, wd, -1); }

    /* Wait for tile k's staged slice (and any ids in flight), dequantize it into buffer
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

    static __device__ __forceinline__ void ws_start(const mla_params_t &p, const MlaWork &w, WsSmem &sm, int ntiles,
                                                    int wd) {
        const int crow = converter_row<C>();
        if (lane() < C::N / C::NW) {
            int id[AHEAD]; /* all loads first: one round trip */
#pragma unroll
            for (int j = 0; j < AHEAD; ++j) id[j] = j < ntiles ? mla_key_id(p, w, j * C::N + crow) : -1;
#pragma unroll
            for (int j = 0; j < AHEAD; ++j)
                if (j < ntiles) mla_convert_row<C, MlaDecodeWsProd>(p, w, j, crow, id[j], sm, j, j >= 2);
        }
        dsv4_bar_sync<MLA_WS_BAR_PV>(32 * MLA_WS_PV_WARPS); /* ring slots 0 .. AHEAD - 1 */
        if (ntiles > 0) stage(sm, 0, wd);
        dsv4_cp_async_commit();
        if (ntiles > 0) land(sm, 0, wd);
        if (ntiles > 1) stage(sm, 1, wd);
        dsv4_cp_async_commit();
        if (ntiles > 0) dsv4_bar_arrive<MLA_WS_BAR_KFULL + 0>(MLA_WS_THREADS);
        if (ntiles > 1) land(sm, 1, wd);
        if (ntiles > 2) stage(sm, 2, wd);
        dsv4_cp_async_commit();
        if (ntiles > 1) dsv4_bar_arrive<MLA_WS_BAR_KFULL + 1>(MLA_WS_THREADS);
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

    /* The score warps convert the row sources from tile AHEAD on: lanes 0-7 of score warp
     * q, row 8q + lane, each fetching its ids a tile ahead (cp.async, its own group). */
    static __device__ __forceinline__ void ws_score_start(const mla_params_t &p, const MlaWork &w, WsSmem &sm, int,
                                                          int q, int lane) {
        if (lane < C::N / MLA_WS_SCORE_WARPS) {
            const int row = q * (C::N / MLA_WS_SCORE_WARPS) + lane;
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
        const int tid = mla_opaque_tid(), lane = tid & 31, q = (tid >> 5) - MLA_WS_PV_WARPS;
        const int k = i + AHEAD;
        if (lane < C::N / MLA_WS_SCORE_WARPS && k < ntiles) {
            const int row = q * (C::N / MLA_WS_SCORE_WARPS) + lane;
            dsv4_cp_async_wait<0>(); /* its ids, fetched one tile ago */
            mla_convert_row<C, MlaDecodeWsProd>(p, w, k, row, sm.ids[k & 1][row], sm, k % R, true);
            mla_key_id_async(p, w, (k + 1) * C::N + row, &sm.ids[(k + 1) & 1][row]);
            dsv4_cp_async_commit();
        }
    }
};
static_assert(sizeof(MlaDecodeWsProd::WsSmem) == MLA_SMEM_DECODE_WS, "sparse_mla_config.h's budget line is stale");

extern "C" dsv4_status_t mla_launch_decode_ws(const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
    return mla_ws_launch<MlaDecodeWsProd>("sparse_mla_decode", p, ctas, stream);
}
