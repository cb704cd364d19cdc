/*
 * mhc_post and mhc_post_with_sqrsum:
 *   R_new[t][k][h] = bf16(post_channel(post[t], comb[t], x[t][h], R[t][0..3][h]))
 *   sqrsum[t]      = sum over the 4H stored values of float(bf16)^2       (optional)
 *
 * Grid: T CTAs (one per token) of 128 threads. Thread i handles the 8-channel vectors
 * i, i + 128, ... of the token: one 16-byte load of x and one per stream of R, 4
 * 16-byte stores. The token's post and comb (80 bytes) go through shared memory.
 * Numerics: the shared per-channel function (fmul, then 4 fma in stream order, RNE to
 * bf16): bit-exact with the C reference and with every seam. sqrsum: per-thread fp32 FMA
 * chains over its rounded outputs, warp trees, warps in order (tolerance 1e-5).
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "mhc/mhc_device.cuh"
#include "mhc/mhc_host.h"
#include "mhc/post_config.h"

template <bool SQ>
__global__ void __launch_bounds__(MHC_POST_THREADS)
    mhc_post_kernel(const dsv4_mhc_post_args_t a, int64_t H, int64_t xs, int64_t rs, int64_t ros) {
    __shared__ float s_coef[20], s_red[33];
    const int tid = threadIdx.x;
    const int64_t t = blockIdx.x, nv = H / 8;
    float pc[4], cb[16];
    mhc_token_coef(a.post + 4 * t, a.comb + 16 * t, s_coef, pc, cb);

    const uint4 *x4 = reinterpret_cast<const uint4 *>(a.x + t * xs);
    const uint4 *r4 = reinterpret_cast<const uint4 *>(a.residual + t * rs);
    uint4 *o4 = reinterpret_cast<uint4 *>(a.residual_out + t * ros);
    const float sq = mhc_post_row<SQ>(x4, r4, o4, nv, pc, cb, tid, MHC_POST_THREADS);
    if (SQ) {
        const float total = mhc_block_sum(sq, s_red);
        if (tid == 0) a.sqrsum[t] = total;
    }
}

template <bool SQ>
static dsv4_status_t mhc_launch_post_sq(const dsv4_mhc_post_args_t *a, int64_t T, int64_t H, int64_t xs, int64_t rs,
                                        int64_t ros, cudaStream_t s) {
    static const char *op = "mhc_post";
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mhc_post_kernel<SQ>, 0, &smem_cache));
    dsv4_launch(mhc_post_kernel<SQ>, (unsigned)T, MHC_POST_THREADS, 0, s, *a, H, xs, rs, ros);
    return dsv4_launch_status(op);
}

extern "C" dsv4_status_t mhc_launch_post(const dsv4_mhc_post_args_t *a, int64_t T, int64_t H, int64_t xs, int64_t rs,
                                         int64_t ros, dsv4_stream_t stream) {
    cudaStream_t s = (cudaStream_t)stream;
    return a->sqrsum ? mhc_launch_post_sq<true>(a, T, H, xs, rs, ros, s)
                     : mhc_launch_post_sq<false>(a, T, H, xs, rs, ros, s);
}
