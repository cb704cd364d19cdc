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
 * (2 x 16 rows x 1040 B). Invalid and past-the-end rows are zero-filled by cp.async
 * (src-size 0) and flagged in meta, so they get p = 0 and a finite K. Grid: T * H/HC
 * CTAs (no split: prefill has enough tokens to fill the GPU); direct bf16 write.
 */
#include <cuda_runtime.h>

#include "attention/mla_tile.cuh"
#include "common/error.h"

struct MlaPrefillProd {
    template <class C> struct SmemT {
        uint16_t k[2][MLA_N][MLA_KSTR];
        MlaSmemCommon<C> c;
    };

    template <class C>
    static __device__ __forceinline__ void issue(const mla_params_t &p, const MlaWork &w, int tile, int buf,
                                                 SmemT<C> &sm) {
        const int row = threadIdx.x / C::TPR, part = threadIdx.x % C::TPR;
        int list;
        const int id = mla_key_id(p, w, tile * C::N + row, list);
        const mla_list_params_t &L = p.list[0];
        const bool valid = id >= 0 && (int64_t)id < L.num_valid;
        const uint8_t *src = valid ? L.base + (int64_t)id * L.row_bytes : L.base;
#pragma unroll
        for (int c = part; c < 64; c += C::TPR)
            dsv4_cp_async_16_zfill(&sm.k[buf][row][8 * c], src + 16 * c, valid);
        if (part == 0) sm.c.meta[buf][row] = valid ? 1 : 0;
    }

    template <class C> static __device__ __forceinline__ const uint16_t *tile(SmemT<C> &sm, int buf) {
        return &sm.k[buf][0][0];
    }
};

template <class C> struct MlaPrefillBind : MlaPrefillProd {
    typedef SmemT<C> Smem;
};

#define MLA_PREFILL_KERNEL(id, hc, mt, wd, minb)                                                             \
    __global__ void __launch_bounds__(MlaCfg<hc, mt, wd>::THREADS, minb) mla_prefill_kernel_##id(mla_params_t p) { \
        mla_cta<MlaCfg<hc, mt, wd>, MlaPrefillBind<MlaCfg<hc, mt, wd>>>(p);                                    \
    }
MLA_FOR_EACH_CONFIG(MLA_PREFILL_KERNEL)

extern "C" dsv4_status_t mla_launch_prefill(int config, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
    static const char *op = "sparse_mla_prefill";
    cudaStream_t s = (cudaStream_t)stream;
#define MLA_PREFILL_LAUNCH(id, hc, mt, wd, minb)                                                                     \
    if (config == id) {                                                                                          \
        static int smem_cache;                                                                                   \
        DSV4_TRY(dsv4_launch_prepare(op, (const void *)mla_prefill_kernel_##id, 0, &smem_cache));                \
        mla_prefill_kernel_##id<<<(unsigned)ctas, MlaCfg<hc, mt, wd>::THREADS, 0, s>>>(*p);                     \
        return dsv4_launch_status(op);                                                                           \
    }
    MLA_FOR_EACH_CONFIG(MLA_PREFILL_LAUNCH)
    return dsv4_fail(DSV4_STATUS_INTERNAL, op, "no kernel for config %d", config);
}
