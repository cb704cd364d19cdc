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
 * (4 whole lines) per warp instruction, each row's address converted once per CTA
 * (mla_tile.cuh's row sources); double-buffered (2 x 16 rows x 1040 B). Invalid and
 * past-the-end rows are zero-filled by cp.async (src-size 0) and flagged in meta, so
 * they get p = 0 and a finite K. Grid: T * H/HC CTAs (no split: prefill has enough
 * tokens to fill the GPU); direct bf16 write.
 */
#include <cuda_runtime.h>

#include "attention/mla_tile.cuh"
#include "common/error.h"

struct MlaPrefillProd {
    /* Rows are converted this many tiles ahead (the minimum, see mla_tile.cuh); no L2
     * prefetch: prefill's rows are mostly L2 hits (the tokens of a request share them),
     * and prefetching cost 6-10% in session 4's measurements. */
    static constexpr int AHEAD = 2;
    static constexpr bool MERGE_CTAS = false; /* prefill never splits */
    template <class C> struct SmemT {
        uint16_t k[2][MLA_N][MLA_KSTR];
        unsigned long long src[AHEAD + 1][MLA_N]; /* ring: kv row address (mla_src) */
        MlaSmemCommon<C> c;
    };

    template <class C>
    static __device__ __forceinline__ void convert(const mla_list_params_t &L, uint32_t id, SmemT<C> &sm, int slot,
                                                   int row, bool) {
        sm.src[slot][row] = mla_src(L.base + (int64_t)id * L.row_bytes);
    }

    /* Whole lines per instruction: step k copies rows 2k and 2k+1 of this warp's rows
     * (32 / TPG of them), 16 lanes per row, each lane one 16-byte chunk of the group's
     * 2 * DW bytes, from the row's ring slot. Measured (session 5, H200): whole lines
     * are 18% faster than single 32-byte sectors of 16 rows per instruction. */
    template <class C> static __device__ __forceinline__ void issue(SmemT<C> &sm, int slot, int buf, int wd) {
        constexpr int WR = 32 / C::TPG; /* rows per warp */
        static_assert(C::DW == 128, "16 chunks per row slice: one step covers two rows");
        const int lane = threadIdx.x & 31, first = mla_group_thread<C>() / 32 * WR;
        uint16_t *dst = &sm.k[buf][first + (lane >> 4)][wd * C::DW + 8 * (lane & 15)];
        /* All sources first: a cp.async is a memory clobber, so a load after one waits
         * for it (one shared-memory round trip per step otherwise). */
        unsigned long long src[WR / 2];
#pragma unroll
        for (int k = 0; k < WR / 2; ++k) src[k] = sm.src[slot][first + 2 * k + (lane >> 4)];
#pragma unroll
        for (int k = 0; k < WR / 2; ++k)
            dsv4_cp_async_16_zfill(dst + 2 * k * MLA_KSTR, mla_src_ptr(src[k]) + 2 * wd * C::DW + 16 * (lane & 15),
                                   mla_src_valid(src[k]));
        if (wd == 0 && lane < WR) sm.c.meta[buf][first + lane] = mla_src_valid(sm.src[slot][first + lane]) ? 1 : 0;
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
