/*
 * Sparse MLA prefill kernel: bf16 workspace rows gathered by index, on the CTA engine of
 * mla_tile.cuh (formula, decomposition, pipeline and numerics are described there).
 *
 *   out[t,h,:] = sum_j e^{s_j} kv[id_j] / (sum_j e^{s_j} + e^{sink_h}),
 *   s_j = scale <q[t,h], kv[id_j]>,  id_j = ids[t, j], j < min(lens[t], C), 0 <= id_j < kv_rows.
 *
 * Producer: mla_prefill_rows.cuh (each slice group copies its dims of each key row,
 * double-buffered, 2 x 16 rows x 1040 B). Grid: T * H/HC CTAs (no split: prefill has
 * enough tokens to fill the GPU); direct bf16 write. ws32 is a different kernel
 * (sparse_mla_prefill_ws_kernel.cu).
 */
#include <cuda_runtime.h>

#include "attention/mla_prefill_rows.cuh"
#include "common/error.h"

template <class C> struct MlaPrefillBind : MlaPrefillProd { typedef SmemT<C> Smem; };

extern "C" dsv4_status_t mla_launch_prefill(int config, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
    return mla_launch<MlaPrefillBind, false>("sparse_mla_prefill", config, p, ctas, stream);
}
