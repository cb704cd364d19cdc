/*
 * mhc_collapse: the sublayer input, and the V4.1 final collapse.
 *   yb[h]  = bf16(y),  y = p0*R0; y = fma(p_j, R_j, y), j = 1..3   (p = NULL: y = R0)
 *   out[h] = yb, or with a norm weight bf16((yb * rn) * w[h]), rn = 1/sqrt(ss/H + eps),
 *            ss = sum yb^2 (V4.1) or sum y^2 (V4)
 *   aux[h] = bf16((((R0 + R1) + R2) + R3) * 0.25)
 *
 * Grid: T CTAs of 128 threads, thread i on the 8-channel vectors i, i + 128, ...; the row
 * function (mhc_device.cuh, shared with the V4 epilogue) keeps yb in dynamic shared
 * memory (2H bytes) between the sum-of-squares pass and the normalisation pass.
 * Numerics: yb and aux bit-exact with the C reference; ss is a per-thread FMA chain,
 * warp trees and warps in order, so the normalised output is within 1 bf16 ulp.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "mhc/collapse_config.h"
#include "mhc/mhc_device.cuh"
#include "mhc/mhc_host.h"

__global__ void __launch_bounds__(MHC_COLLAPSE_THREADS)
    mhc_collapse_kernel(const dsv4_mhc_collapse_args_t a, int64_t H, int sq_rounded, float norm_eps, int64_t rs,
                        int64_t os, int64_t as) {
    extern __shared__ uint4 s_row[];
    __shared__ float s_p[4], s_red[33];
    const int64_t t = blockIdx.x;
    if (a.pre_mix && threadIdx.x < 4) s_p[threadIdx.x] = a.pre_mix[4 * t + threadIdx.x];
    __syncthreads();
    const mhc_src_stored src = {reinterpret_cast<const uint4 *>(a.residual + t * rs)};
    mhc_collapse_row(src, H, a.pre_mix ? s_p : nullptr, a.norm_weight, norm_eps, sq_rounded, a.out + t * os,
                     a.aux ? a.aux + t * as : nullptr, s_row, s_red);
}

extern "C" dsv4_status_t mhc_launch_collapse(const dsv4_mhc_collapse_args_t *a, int64_t T, int64_t H, int sq_rounded,
                                             float norm_eps, int64_t rs, int64_t os, int64_t as, dsv4_stream_t stream) {
    static const char *op = "mhc_collapse";
    static int smem_cache;
    const size_t dyn = a->norm_weight ? MHC_ROW_SMEM_BYTES(H) : 0;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mhc_collapse_kernel, dyn, &smem_cache));
    dsv4_launch(mhc_collapse_kernel, (unsigned)T, MHC_COLLAPSE_THREADS, dyn, (cudaStream_t)stream, *a, H, sq_rounded,
                norm_eps, rs, os, as);
    return dsv4_launch_status(op);
}
