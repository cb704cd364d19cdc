/*
 * Sparse MLA decode kernels: the attention CTA reading paged fp8_ds_mla caches on the
 * engine of mla_tile.cuh (h16w4, h32w4, h32w8 and h16w8; the engine documents the
 * formula, decomposition and pipeline), and the split merge. ws32 and ws64 are
 * sparse_mla_decode_ws_kernel.cu.
 *
 * Producer: mla_decode_rows.cuh (record addresses converted once per CTA into a ring,
 * slice groups staging their record bytes in a double-buffered raw stage, 2 x 16 x 576 B,
 * and dequantizing them into one bf16 K tile). Grid: T * S * H/HC attention CTAs (+ the
 * merge CTAs of plan.merge == 2, mla_merge.cuh).
 *
 * Merge (include/dsv4/attention.h, Finalisation): mla_merge.cuh, either as CTAs appended to the
 * attention launch (plan.merge == 2) or as a second launch (plan.merge == 1).
 */
#include <cuda_runtime.h>

#include "attention/mla_decode_rows.cuh"
#include "attention/mla_merge.cuh"
#include "common/error.h"

template <class C> struct MlaDecodeBind : MlaDecodeProd { typedef SmemT<C> Smem; };

extern "C" dsv4_status_t mla_launch_decode(int config, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
    return mla_launch<MlaDecodeBind, true>("sparse_mla_decode", config, p, ctas, stream);
}

/* ---- merge (mla_merge.cuh): the second-launch form, one CTA per (token, head) ------- */
/* B splits in flight per batch. Its registers decide how many of these small CTAs are
 * resident: B = 8 takes 56-62, B = 2 36-40 (16 CTAs per SM on the H200 against 8), which
 * is what S <= 2 needs: many rows of few splits (B = 8 measured slower there). */
template <int B> __global__ void __launch_bounds__(MLA_MERGE_THREADS) mla_merge_kernel(mla_params_t p) {
    const int H = p.num_heads;
    mla_merge_row<false, B>(p, (int)blockIdx.x / H, (int)blockIdx.x % H, (int)threadIdx.x);
}

template <int B> static dsv4_status_t launch_merge(const mla_params_t *p, cudaStream_t stream) {
    static const char *op = "sparse_mla_decode (merge)";
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mla_merge_kernel<B>, 0, &smem_cache));
    dsv4_launch(mla_merge_kernel<B>, (unsigned)((int64_t)p->num_tokens * p->num_heads), MLA_MERGE_THREADS, 0, stream,
                *p);
    return dsv4_launch_status(op);
}

extern "C" dsv4_status_t mla_launch_merge(const mla_params_t *p, dsv4_stream_t stream) {
    return p->num_splits <= 2 ? launch_merge<2>(p, (cudaStream_t)stream) : launch_merge<8>(p, (cudaStream_t)stream);
}
