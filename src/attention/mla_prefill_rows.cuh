/*
 * The bf16 row producer of sparse MLA prefill: which rows a slice group copies into a K
 * tile, and how. Used by the engine's prefill kernel
 * (sparse_mla_prefill_kernel.cu, every slice group a producer) and by the
 * warp-specialised prefill kernel (sparse_mla_prefill_ws_kernel.cu, where the four PV
 * warps are the slice groups).
 *
 * Slice group wd (C::WH warps: one, or two in h32w8) copies its 2 * DW
 * bytes of each key row (the dims it multiplies) with cp.async 16-byte chunks straight
 * into the K tile, two rows (4 whole lines) per warp instruction. Each group fetches
 * the ids of its tiles itself, one tile before it copies their rows, and each lane
 * turns its rows' ids into addresses (one multiply-add, so no ring of converted
 * addresses shared across the CTA, which decode keeps for its record math). Invalid and
 * past-the-end rows are zero-filled by cp.async (src-size 0) and flagged in meta, so
 * they get p = 0 and a finite K.
 *
 * Smem needs members k[2][MLA_N][MLA_KSTR] (the K tiles), ids[WD][2][MLA_N] (each group's
 * ids by tile parity) and c.meta[2][MLA_N] (key flags, written by group 0).
 */
#ifndef DSV4_ATTENTION_MLA_PREFILL_ROWS_CUH
#define DSV4_ATTENTION_MLA_PREFILL_ROWS_CUH

#include "attention/mla_tile.cuh"

struct MlaPrefillProd {
    static constexpr bool MERGE_CTAS = false; /* prefill never splits */
    static constexpr bool STAGE_OUT = true;   /* the epilogue stages rows in k (mla_epilogue_stage) */
    template <class C> struct SmemT {
        uint16_t k[2][MLA_N][MLA_KSTR];
        int ids[C::WD][2][MLA_N] __attribute__((aligned(16))); /* per slice group: ids of its next tiles, by parity */
        MlaSmemCommon<C> c;
    };

    /* The ids of tile k of walk w into the group's slot k & 1 by cp.async (-1 past the
     * end): lanes 0-15 of the group's first warp, one key each. */
    template <class C, class Smem>
    static __device__ __forceinline__ void fetch_ids(const mla_params_t &p, const MlaWork &w, Smem &sm, int k, int wd) {
        const int gt = mla_group_thread<C>();
        if (gt < C::N) mla_key_id_async(p, w, k * C::N + gt, &sm.ids[wd][k & 1][gt]);
    }

    /* Slice group wd's cp.async of tile k's rows (ids in slot k & 1) into buffer `buf`.
     * Whole lines per instruction: each step copies two rows, 16 lanes per row, each lane
     * one 16-byte chunk of the group's 2 * DW bytes (measured faster than single 32-byte
     * sectors of 16 rows per instruction). A lane's rows are consecutive,
     * so their ids come in 16-byte loads. Prefill has one list (sparse_mla_prefill.c), so
     * every row checks against list 0. */
    template <class C, class Smem>
    static __device__ __forceinline__ void issue(const mla_params_t &p, Smem &sm, int k, int buf, int wd) {
        constexpr int WR = 32 / C::TPG, HALF = WR / 2; /* rows per warp, per lane */
        static_assert(C::DW == 128 && HALF % 4 == 0, "16 chunks per row slice; ids in 16-byte loads");
        const int lane = threadIdx.x & 31, first = mla_group_thread<C>() / 32 * WR;
        const int r0 = first + (lane >> 4) * HALF;
        const int *slot = sm.ids[wd][k & 1];
        /* all ids first: a cp.async is a memory clobber, so a load after one waits for it */
        int id[HALF];
#pragma unroll
        for (int j = 0; j < HALF; j += 4) *(int4 *)&id[j] = *(const int4 *)&slot[r0 + j];
        const int meta_id = slot[first + (lane & (WR - 1))];
        const mla_list_params_t &L = p.list[0];
        const uint8_t *base = L.base + 2 * wd * C::DW + 16 * (lane & 15);
        uint16_t *dst = &sm.k[buf][r0][wd * C::DW + 8 * (lane & 15)];
#pragma unroll
        for (int j = 0; j < HALF; ++j) {
            const bool valid = (uint32_t)id[j] < L.id_limit;
            /* an invalid row reads nothing (src-size 0) from the list's base: zero-filled */
            dsv4_cp_async_16_zfill(dst + j * MLA_KSTR, base + (valid ? (int64_t)(uint32_t)id[j] * L.row_bytes : 0),
                                   valid);
        }
        if (wd == 0 && lane < WR) sm.c.meta[buf][first + lane] = (uint32_t)meta_id < L.id_limit ? 1 : 0;
    }

    /* The ids of tiles 0 and 1 (one round trip), then their rows; the ids of tile 2 travel
     * with tile 1. */
    template <class C, class Smem>
    static __device__ __forceinline__ void start(const mla_params_t &p, const MlaWork &w, Smem &sm, int ntiles,
                                                 int wd) {
        fetch_ids<C>(p, w, sm, 0, wd);
        fetch_ids<C>(p, w, sm, 1, wd);
        dsv4_cp_async_commit();
        dsv4_cp_async_wait<0>();
        start_rows<C>(p, w, sm, ntiles, wd);
    }

    /* The ids of tiles 0 and 1 of token t before its length is known (the work
     * description's round trip): positions 0 .. 2N - 1 of its id row, those inside the
     * row's width (one list, no split: prefill). start_early_rows() then marks the
     * positions past the length invalid, as fetch_ids would have. */
    template <class C, class Smem>
    static __device__ __forceinline__ void start_early_ids(const mla_params_t &p, int t, Smem &sm, int wd) {
        const int gt = mla_group_thread<C>();
        const mla_list_params_t &L = p.list[0];
#pragma unroll
        for (int k = 0; k < 2; ++k)
            if (gt < C::N && k * C::N + gt < L.width)
                dsv4_cp_async_4(&sm.ids[wd][k][gt], L.ids + (int64_t)t * L.stride + k * C::N + gt);
        dsv4_cp_async_commit();
    }
    template <class C, class Smem>
    static __device__ __forceinline__ void start_early_rows(const mla_params_t &p, const MlaWork &w, Smem &sm,
                                                            int ntiles, int wd) {
        dsv4_cp_async_wait<0>();
        const int gt = mla_group_thread<C>();
#pragma unroll
        for (int k = 0; k < 2; ++k) /* each lane its own ids: ordered after its own copies */
            if (gt < C::N && k * C::N + gt >= w.n) sm.ids[wd][k][gt] = -1;
        start_rows<C>(p, w, sm, ntiles, wd);
    }

    /* start()'s second half: the rows of tiles 0 and 1 (their ids landed), and the ids of
     * tile 2. */
    template <class C, class Smem>
    static __device__ __forceinline__ void start_rows(const mla_params_t &p, const MlaWork &w, Smem &sm, int ntiles,
                                                      int wd) {
        mla_slice_sync<C>(wd);
        if (ntiles > 0) issue<C>(p, sm, 0, 0, wd);
        dsv4_cp_async_commit();
        mla_slice_sync<C>(wd); /* slot 0 read by the whole group before tile 2's ids refill it */
        if (ntiles > 1) issue<C>(p, sm, 1, 1, wd);
        if (ntiles > 2) fetch_ids<C>(p, w, sm, 2, wd);
        dsv4_cp_async_commit();
    }

    /* [A] of tile i: rows of tile i + 1 (ids fetched a tile ago, landed with this wait),
     * and the ids of tile i + 2 into the slot tile i's issue read (before [A]'s group sync). */
    template <class C, class Smem>
    static __device__ __forceinline__ void step(const mla_params_t &p, const MlaWork &w, Smem &sm, int i, int ntiles,
                                                int wd) {
        if (i >= 1 && i + 1 < ntiles) issue<C>(p, sm, i + 1, (i & 1) ^ 1, wd);
        if (i >= 1 && i + 2 < ntiles) fetch_ids<C>(p, w, sm, i + 2, wd);
    }

    template <class C> static __device__ __forceinline__ const uint16_t *tile(SmemT<C> &sm, int buf, int, int) {
        return &sm.k[buf][0][0];
    }
};

#endif /* DSV4_ATTENTION_MLA_PREFILL_ROWS_CUH */
