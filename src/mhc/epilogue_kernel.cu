/*
 * K2 of the tensor-core route: the gates epilogue (epilogue.cuh), one CTA of 128
 * threads per token, launched after the projection kernel has written every partial.
 * In V4.1 it also normalises the layer input in place (the projection stored the
 * un-normed collapse and its sum-of-squares partials).
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "mhc/epilogue.cuh"

template <int EPI> __global__ void __launch_bounds__(MHC_EPI_THREADS) mhc_epilogue_kernel(const mhc_pipe_t p) {
    extern __shared__ uint4 s_row[]; /* IMMEDIATE with a norm weight: the bf16 collapse row */
    __shared__ mhc_epi_smem sm;
    mhc_epilogue_token<EPI>(p, blockIdx.x, true, false, sm, s_row);
}

template <int EPI> static dsv4_status_t launch(const mhc_pipe_t *p, size_t dyn, cudaStream_t s) {
    static const char *op = "mhc_epilogue";
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mhc_epilogue_kernel<EPI>, dyn, &smem_cache));
    mhc_epilogue_kernel<EPI><<<(unsigned)p->T, MHC_EPI_THREADS, dyn, s>>>(*p);
    return dsv4_launch_status(op);
}

extern "C" dsv4_status_t mhc_launch_epilogue(const mhc_pipe_t *p, dsv4_stream_t stream) {
    cudaStream_t s = (cudaStream_t)stream;
    switch (p->epi) {
    case MHC_EPI_GATES: return launch<MHC_EPI_GATES>(p, 0, s);
    case MHC_EPI_DELAYED: return launch<MHC_EPI_DELAYED>(p, 0, s);
    default: return launch<MHC_EPI_IMMEDIATE>(p, p->norm_w ? MHC_ROW_SMEM_BYTES(p->H) : 0, s);
    }
}
