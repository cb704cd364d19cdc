/*
 * Sparse MLA prefill kernel: bf16 workspace rows gathered by index (spec/sparse-mla.md
 * section 3), on the CTA engine of mla_tile.cuh (formula, decomposition, pipeline and
 * numerics are described there).
 *
 *   out[t,h,:] = sum_j e^{s_j} kv[id_j] / (sum_j e^{s_j} + e^{sink_h}),
 *   s_j = scale <q[t,h], kv[id_j]>,  id_j = ids[t, j], j < min(lens[t], C), 0 <= id_j < kv_rows.
 *
 * Producer: TPR = THREADS / 16 threads per key row; each issues 64 / TPR cp.async
 * 16-byte chunks of its row (1 KB of bf16) straight into the K tile, double-buffered
 * (2 x 16 rows x 1040 B); with MLA_PREFETCH_TILES_PREFILL > 0 rows that many tiles
 * ahead are prefetched into L2 (8 lines, one per thread; off by default). Invalid and past-the-end rows are
 * zero-filled by cp.async (src-size 0) and flagged in meta, so they get p = 0 and a
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
    static __device__ __forceinline__ void issue(const mla_params_t &p, const MlaRowJob &r, int buf, SmemT<C> &sm) {
        const mla_list_params_t &L = p.list[0];
        const uint8_t *src = r.valid ? L.base + (int64_t)r.id * L.row_bytes : L.base;
#pragma unroll
        for (int c = r.part; c < 64; c += C::TPR)
            dsv4_cp_async_16_zfill(&sm.k[buf][r.row][8 * c], src + 16 * c, r.valid);
        if (r.part == 0) sm.c.meta[buf][r.row] = r.valid ? 1 : 0;
    }

    template <class C> static __device__ __forceinline__ void prefetch(const mla_params_t &p, const MlaRowJob &r) {
        static_assert(C::TPR >= 8, "one producer thread per 128-byte line of a row");
        if (r.valid && r.part < 8) dsv4_prefetch_l2(p.list[0].base + (int64_t)r.id * p.list[0].row_bytes + 128 * r.part);
    }

    template <class C> static __device__ __forceinline__ const uint16_t *tile(SmemT<C> &sm, int buf) {
        return &sm.k[buf][0][0];
    }
};

template <class C> struct MlaPrefillBind : MlaPrefillProd {
    typedef SmemT<C> Smem;
};

extern "C" dsv4_status_t mla_launch_prefill(int config, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
    return mla_launch<MlaPrefillBind>("sparse_mla_prefill", config, p, ctas, stream);
}
