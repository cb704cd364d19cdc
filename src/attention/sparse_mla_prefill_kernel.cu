/*
 * Sparse MLA prefill kernel: bf16 workspace rows gathered by index (spec/sparse-mla.md
 * section 3), on the CTA engine of mla_tile.cuh (formula, decomposition, pipeline and
 * numerics are described there).
 *
 *   out[t,h,:] = sum_j e^{s_j} kv[id_j] / (sum_j e^{s_j} + e^{sink_h}),
 *   s_j = scale <q[t,h], kv[id_j]>,  id_j = ids[t, j], j < min(lens[t], C), 0 <= id_j < kv_rows.
 *
 * Producer: slice group wd (mla_tile.cuh) copies its 2 * DW bytes of each key row (the
 * dims it multiplies) with cp.async 16-byte chunks straight into the K tile, two rows
 * (4 whole lines) per warp instruction; double-buffered (2 x 16 rows x 1040 B); with
 * MLA_PREFETCH_TILES_PREFILL > 0 the slice's lines that many tiles ahead are prefetched
 * into L2 (off by default). Invalid and past-the-end rows are zero-filled by cp.async
 * (src-size 0) and flagged in meta, so they get p = 0 and a
 * finite K. Grid: T * H/HC CTAs (no split: prefill has enough tokens to fill the GPU);
 * direct bf16 write.
 */
#include <cuda_runtime.h>

#include "attention/mla_tile.cuh"
#include "common/error.h"

struct MlaPrefillProd {
    static constexpr int PREFETCH_TILES = MLA_PREFETCH_TILES_PREFILL;
    template <class C> struct SmemT {
        uint16_t k[2][MLA_N][MLA_KSTR];
        MlaSmemCommon<C> c;
    };

    template <class C>
    static __device__ __forceinline__ void issue(const mla_params_t &p, const MlaRowJob &r, int buf, SmemT<C> &sm,
                                                 int wd) {
        /* Whole lines per instruction: step k copies rows 2k and 2k+1 of this warp's rows
         * (32 / TPG of them), 16 lanes per row, each lane one 16-byte chunk. Each thread
         * computes the source of its own row's slice once (bit 0 set for an invalid row,
         * which then points at the mapped, never read base: the rows are 16-byte
         * aligned); a step takes its row's from the row's first thread by shuffle.
         * Measured (session 5, H200): whole lines are 18% faster than single 32-byte
         * sectors of 16 rows per instruction, and passing the row's id instead of its
         * address (validity and a 64-bit multiply per step) cost 290 instead of ~110
         * producer instructions per tile. */
        constexpr int WR = 32 / C::TPG; /* rows per warp */
        static_assert(C::DW == 128, "16 chunks per row slice: one step covers two rows");
        const int lane = threadIdx.x & 31, first = r.row - (lane / C::TPG);
        const mla_list_params_t &L = p.list[0];
        const unsigned long long mine =
            r.valid ? (unsigned long long)(L.base + (int64_t)r.id * L.row_bytes + 2 * wd * C::DW)
                    : ((unsigned long long)L.base | 1ull);
        uint16_t *dst = &sm.k[buf][first + (lane >> 4)][wd * C::DW + 8 * (lane & 15)];
#pragma unroll
        for (int k = 0; k < WR / 2; ++k) {
            const unsigned long long src = __shfl_sync(0xffffffffu, mine, (2 * k + (lane >> 4)) * C::TPG);
            dsv4_cp_async_16_zfill(dst + 2 * k * MLA_KSTR, (const uint8_t *)(src & ~1ull) + 16 * (lane & 15),
                                   !(src & 1ull));
        }
        if (wd == 0 && r.part == 0) sm.c.meta[buf][r.row] = r.valid ? 1 : 0;
    }

    /* The slice's 128-byte lines (2 * DW / 128 of them) into L2. */
    template <class C> static __device__ __forceinline__ void prefetch(const mla_params_t &p, const MlaRowJob &r, int wd) {
        if (!r.valid) return;
        const uint8_t *row = p.list[0].base + (int64_t)r.id * p.list[0].row_bytes + 2 * wd * C::DW;
        for (int k = r.part; k < 2 * C::DW / 128; k += C::TPG) dsv4_prefetch_l2(row + 128 * k);
    }

    template <class C> static __device__ __forceinline__ const uint16_t *tile(SmemT<C> &sm, int buf, int, int) {
        return &sm.k[buf][0][0];
    }
};

template <class C> struct MlaPrefillBind : MlaPrefillProd {
    typedef SmemT<C> Smem;
};

extern "C" dsv4_status_t mla_launch_prefill(int config, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
    return mla_launch<MlaPrefillBind>("sparse_mla_prefill", config, p, ctas, stream);
}
