/*
 * The projection planner: route (small-T CUDA-core or tensor-core), split count S and
 * geometry, as a pure function of (T, H, broadcast, requested route). Host only, so the
 * routing table (include/dsv4/mhc.h, Projection routes) is tested without a GPU.
 */
#include <string.h>

#include "common/error.h"
#include "mhc/gates_config.h"
#include "mhc/mhc_host.h"

/* The small-T geometry has no remainder handling: H must split into slices of one channel
 * per thread. Same rule for the broadcast projection (K = H). */
static int mhc_small_tiles(int64_t H) { return H % MHC_SMALL_THREADS == 0; }

/* Smallest divisor S of nchunks with nblk * S >= MHC_TC_TARGET_CTAS and at most
 * MHC_TC_MAX_CHUNKS_PER_CTA chunks per slice, S <= MHC_TC_MAX_SPLIT; else the largest
 * divisor <= MHC_TC_MAX_SPLIT. */
static int mhc_tc_splits(int64_t nchunks, int64_t nblk) {
    int best = 1;
    for (int s = 1; s <= MHC_TC_MAX_SPLIT && s <= nchunks; ++s) {
        if (nchunks % s) continue;
        best = s;
        if (nblk * s >= MHC_TC_TARGET_CTAS && nchunks / s <= MHC_TC_MAX_CHUNKS_PER_CTA) break;
    }
    return best;
}

size_t mhc_fn_hl_offset(const dsv4_mhc_plan_t *pl, int64_t T) {
    if (pl->route == DSV4_MHC_ROUTE_SMALL_T) return MHC_WS_SMALL_BYTES(T, pl->splits);
    const size_t bytes = (size_t)pl->splits * (size_t)T * MHC_WS_FLOATS * sizeof(float);
    return (bytes + 255) / 256 * 256;
}

dsv4_status_t mhc_plan_compute(const char *op, int64_t T, int64_t H, int32_t broadcast, int32_t route,
                               dsv4_mhc_plan_t *pl) {
    memset(pl, 0, sizeof *pl);
    int use_small;
    if (route == DSV4_MHC_ROUTE_SMALL_T) {
        if (!mhc_small_tiles(H))
            return dsv4_fail(DSV4_STATUS_UNSUPPORTED, op,
                             "route SMALL_T needs hidden %% %d == 0 (geometry tile_n %d, split_k hidden / %d, %d "
                             "threads); hidden = %lld does not tile, use AUTO or TENSOR_CORE",
                             MHC_SMALL_THREADS, MHC_SMALL_TILE_N, MHC_SMALL_THREADS, MHC_SMALL_THREADS, (long long)H);
        use_small = 1;
    } else if (route == DSV4_MHC_ROUTE_TENSOR_CORE || route == DSV4_MHC_ROUTE_BATCH_INVARIANT) {
        use_small = 0;
    } else {
        use_small = mhc_small_tiles(H) && T <= MHC_SMALL_T_MAX_TOKENS;
    }
    if (use_small) {
        int64_t tpc = MHC_SMALL_TPC(T);
        pl->route = DSV4_MHC_ROUTE_SMALL_T;
        pl->splits = (int32_t)(H / MHC_SMALL_THREADS);
        pl->tile_n = MHC_SMALL_TILE_N;
        pl->threads = MHC_SMALL_THREADS;
        pl->tokens_per_cta = (int32_t)tpc;
        pl->ctas = (T + tpc - 1) / tpc * (24 / MHC_SMALL_TILE_N) * pl->splits;
        pl->unrounded_input = MHC_SMALL_T_UNROUNDED;
    } else {
        int64_t nchunks = H / MHC_TC_CHUNK_CHANNELS(broadcast);
        int64_t nblk = (T + MHC_TC_BM - 1) / MHC_TC_BM;
        pl->route = DSV4_MHC_ROUTE_TENSOR_CORE;
        /* batch-invariant: S from H alone, the choice for one block (mhc.h) */
        pl->splits = mhc_tc_splits(nchunks, route == DSV4_MHC_ROUTE_BATCH_INVARIANT ? 1 : nblk);
        pl->tile_n = 24;
        pl->threads = MHC_TC_THREADS;
        pl->tokens_per_cta = MHC_TC_BM;
        pl->ctas = nblk * pl->splits;
    }
    pl->workspace_bytes = mhc_fn_hl_offset(pl, T);
    if (pl->route == DSV4_MHC_ROUTE_TENSOR_CORE) pl->workspace_bytes += MHC_WS_FN_HL_BYTES(MHC_FN_K(broadcast, H));
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_mhc_plan(int64_t tokens, int64_t hidden, int32_t broadcast, int32_t route, dsv4_mhc_plan_t *plan) {
    static const char *op = "mhc_plan";
    DSV4_TRY(mhc_check_shape(op, tokens, hidden));
    DSV4_TRY(mhc_check_flag(op, "broadcast", broadcast));
    DSV4_TRY(mhc_check_route(op, route));
    DSV4_TRY(dsv4_check_ptr(op, "plan", plan));
    return mhc_plan_compute(op, tokens, hidden, broadcast, route, plan);
}

dsv4_status_t mhc_plan_pipe(const char *op, mhc_pipe_t *p, int32_t route) {
    return mhc_plan_compute(op, p->T, p->H, p->prod == MHC_PROD_BCAST, route, &p->plan);
}
