/*
 * Sparse MLA prefill, ws32 (the auto choice when 32 divides H): the warp-specialised CTA
 * of mla_ws.cuh (decomposition, handoffs, numerics) over bf16 workspace rows, whose QK of
 * one tile overlaps PV of the previous one (faster than the engine's h32w4).
 *
 * Producer: the four PV warps are the slice groups of mla_prefill_rows.cuh. Each copies
 * its dims of tile i + 2 right after its PV of tile i, into the buffer tile i leaves,
 * waits for the copies to land and announces the tile (KFULL); it fetches the ids of
 * tile i + 3 after them, in a commit group of its own (see ws_refill). Key flags are
 * written at the copy, so two slots suffice. Grid: T * H/32 CTAs (no split); direct
 * bf16 write.
 */
#include <cuda_runtime.h>

#include "attention/mla_prefill_rows.cuh"
#include "attention/mla_ws.cuh"

struct MlaPrefillWsProd : MlaPrefillProd {
    typedef MlaWsGeo32 Geo;
    typedef Geo::Pv C;
    static constexpr bool SPLITS = false, EARLY_Q = true;
    /* two chains: one measured slower here, unlike decode ws64 */
    static constexpr int QK_CHAINS = 2;
    struct WsSmem {
        uint16_t k[2][MLA_N][MLA_KSTR];
        int ids[C::WD][2][MLA_N] __attribute__((aligned(16))); /* per PV warp, by tile parity */
        MlaWsShared<Geo> c;
    };

    /* Before the work description: the ids of tiles 0 and 1 (start_early_ids). */
    static __device__ __forceinline__ void ws_pre_start(const mla_params_t &p, int t, WsSmem &sm, int wd) {
        start_early_ids<C>(p, t, sm, wd);
    }
    /* Tiles 0 and 1 and the ids of tile 2 (MlaPrefillProd::start_early_rows), each tile
     * announced when its commit group has landed. */
    static __device__ __forceinline__ void ws_start(const mla_params_t &p, const MlaWork &w, WsSmem &sm, int ntiles,
                                                    int wd) {
        start_early_rows<C>(p, w, sm, ntiles, wd);
        if (ntiles > 0) {
            dsv4_cp_async_wait<1>();
            dsv4_bar_arrive<MLA_WS_BAR_KFULL + 0>(Geo::THREADS);
        }
        if (ntiles > 1) {
            dsv4_cp_async_wait<0>();
            dsv4_bar_arrive<MLA_WS_BAR_KFULL + 1>(Geo::THREADS);
        }
    }

    /* Tile i + 2 into buffer BUF (landed before the caller's arrive), then the ids of tile
     * i + 3 in a commit group of their own, waited for at the next refill. The ids fetch
     * (two dependent shared loads of the work description, then the copy) runs while the
     * rows are in flight, and the arrive waits for the rows only: in one group, the rows'
     * wait also waited for the ids issued after them, on the loop that sets the tile rate
     * (PV, refill, QK, softmax). */
    template <int BUF>
    static __device__ __forceinline__ void ws_refill(const mla_params_t &p, const MlaWork &w, WsSmem &sm, int i,
                                                     int ntiles, int wd) {
        dsv4_cp_async_wait<0>(); /* this lane's ids of tile i + 2 (fetched at the last refill) */
        __syncwarp();            /* ... and every other lane's */
        issue<C>(p, sm, i + 2, BUF, wd);
        dsv4_cp_async_commit();
        if (i + 3 < ntiles) {
            fetch_ids<C>(p, w, sm, i + 3, wd);
            dsv4_cp_async_commit();
            dsv4_cp_async_wait<1>();
        } else {
            dsv4_cp_async_wait<0>();
        }
    }
    static __device__ __forceinline__ void ws_ahead(const mla_params_t &, const MlaWork &, WsSmem &, int, int, int) {}
    static __device__ __forceinline__ void ws_score_start(const mla_params_t &, const MlaWork &, WsSmem &, int, int,
                                                          int) {}
    static __device__ __forceinline__ void ws_score_ahead(const mla_params_t &, const MlaWork &, WsSmem &, int, int,
                                                          int, int) {}
};
static_assert(sizeof(MlaPrefillWsProd::WsSmem) == MLA_SMEM_PREFILL_WS, "sparse_mla_config.h's budget line is stale");
static_assert(mla_ws_geo_is<MlaPrefillWsProd::Geo>(DSV4_MLA_CONFIG_WS32),
              "sparse_mla_config.h's config table is stale");

extern "C" dsv4_status_t mla_launch_prefill_ws(const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
    return mla_ws_launch<MlaPrefillWsProd>("sparse_mla_prefill", p, ctas, stream);
}
