/*
 * The gates epilogue of the tensor-core route (epilogue.cuh), launched after the projection
 * pass has written every partial, 128 threads per CTA:
 *   GATES, DELAYED (V4.1): ceil(T / MHC_EPI_TPC) gate CTAs, one warp per token; V4.1 with a
 *     norm weight then T norm CTAs, which normalise the layer input in place (the
 *     projection stored the un-normed collapse and its sum-of-squares partials). The
 *     gate CTAs come first in the grid so that their Sinkhorn chains start first.
 *   IMMEDIATE (V4): one CTA per token, gates then the collapse with the fresh pre.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "mhc/epilogue.cuh"

__global__ void __launch_bounds__(MHC_EPI_THREADS) mhc_epilogue_kernel(const mhc_pipe_t p) {
    extern __shared__ __align__(16) float s_stage[]; /* MHC_EPI_STAGE_SMEM(S) */
    const int64_t G = (p.T + MHC_EPI_TPC - 1) / MHC_EPI_TPC;
    if (blockIdx.x < G) mhc_gate_warps(p, (int64_t)blockIdx.x * MHC_EPI_TPC, s_stage);
    else mhc_norm_token(p, blockIdx.x - G, s_stage);
}

__global__ void __launch_bounds__(MHC_EPI_THREADS) mhc_epilogue_immediate_kernel(const mhc_pipe_t p) {
    extern __shared__ uint4 s_row[]; /* with a norm weight: the bf16 collapse row */
    __shared__ mhc_epi_smem sm;
    const mhc_gate_coef gc = mhc_gate_coef_load(p.scale, p.base, p.sqrsum_in, blockIdx.x); /* with the partials */
    mhc_epilogue_token<MHC_EPI_IMMEDIATE>(p, blockIdx.x, false, sm, s_row, gc);
}

extern "C" dsv4_status_t mhc_launch_epilogue(const mhc_pipe_t *p, dsv4_stream_t stream) {
    static const char *op = "mhc_epilogue";
    cudaStream_t s = (cudaStream_t)stream;
    if (p->epi == MHC_EPI_IMMEDIATE) {
        static int smem_cache;
        const size_t dyn = p->norm_w ? MHC_ROW_SMEM_BYTES(p->H) : 0;
        DSV4_TRY(dsv4_launch_prepare(op, (const void *)mhc_epilogue_immediate_kernel, dyn, &smem_cache));
        dsv4_launch(mhc_epilogue_immediate_kernel, (unsigned)p->T, MHC_EPI_THREADS, dyn, s, *p);
        return dsv4_launch_status(op);
    }
    static int smem_cache;
    const int64_t G = (p->T + MHC_EPI_TPC - 1) / MHC_EPI_TPC;
    const int64_t norm = p->epi == MHC_EPI_DELAYED && p->norm_w ? p->T : 0;
    const size_t dyn = MHC_EPI_STAGE_SMEM(p->plan.splits);
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mhc_epilogue_kernel, dyn, &smem_cache));
    dsv4_launch(mhc_epilogue_kernel, (unsigned)(G + norm), MHC_EPI_THREADS, dyn, s, *p);
    return dsv4_launch_status(op);
}
