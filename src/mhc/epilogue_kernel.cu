/*
 * K2, the gates epilogue (spec/mhc.md 3.2-3.5, 6.4): one CTA of 128 threads per token.
 *
 *   raw[m] = sum_{s = 0..S-1} raw_part[s][t][m]   (serially, in slice order)
 *   sq     = sqrsum_in[t] if given, else sum_s sq_part[s][t] (slice order)
 *   rms = 1 / sqrt(sq / numel + rms_eps); mix = raw * rms; pre, post, Sinkhorn comb
 *   DELAYED (V4.1):   K1 stored the un-normed collapse yb; with a norm weight
 *                     layer_input = bf16((yb * rn) * w), rn from ss = sum_s ss_part (in place)
 *   IMMEDIATE (V4):   layer_input = [norm](collapse(row, fresh pre)), aux, from the row the
 *                     pipeline names (R_new, R or the broadcast copy)
 *
 * Decomposition: all threads stage the S x 26 partials in shared memory (parallel global
 * loads), threads 0..23 then sum the 24 raw partials, 24 sq, 25 ss in slice order; warp 0
 * then evaluates the gates (lanes 0..7 sigmoids, lanes e = lane & 15 one Sinkhorn
 * element each, width-16 shuffles). Meanwhile warps 1..3 normalise the V4.1 layer input
 * (16-byte vectors); in V4 all warps collapse the row once warp 0 has the pre (the row
 * waits in dynamic shared memory, 2H bytes, for the norm's second pass).
 * Numerics: fp32; IEEE sqrt and divisions; expf (not bit-exact with the C library's,
 * hence the 1e-5 tolerance on gates); bf16 outputs through dsv4_f32_to_bf16.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "mhc/gates_config.h"
#include "mhc/mhc_device.cuh"
#include "mhc/mhc_host.h"

template <int EPI> __global__ void __launch_bounds__(MHC_EPI_THREADS) mhc_epilogue_kernel(const mhc_pipe_t p) {
    extern __shared__ uint4 s_row[]; /* IMMEDIATE with a norm weight: the bf16 collapse row */
    __shared__ float s_part[MHC_TC_MAX_SPLIT][MHC_WS_FLOATS]; /* the S partials of this token */
    __shared__ float s_raw[24], s_sum[2], s_pre[4], s_red[33];
    const int tid = threadIdx.x, warp = tid >> 5;
    const int64_t T = p.T, H = p.H, t = blockIdx.x;
    const int S = p.plan.splits;
    const float *ws_raw = p.ws, *ws_sq = p.ws + S * T * 24, *ws_ss = ws_sq + S * T;

    /* every thread loads a few partials at once (no chain of dependent global loads) ... */
    for (int i = tid; i < S * MHC_WS_FLOATS; i += blockDim.x) {
        const int s = i / MHC_WS_FLOATS, q = i % MHC_WS_FLOATS;
        float v = 0.0f;
        if (q < 24) v = ws_raw[(s * T + t) * 24 + q];
        else if (q == 24) v = ws_sq[s * T + t];
        else if (EPI == MHC_EPI_DELAYED) v = ws_ss[s * T + t];
        s_part[s][q] = v;
    }
    __syncthreads();
    /* ... then one thread per value sums them serially in slice order 0..S-1 */
    if (tid < MHC_WS_FLOATS) {
        float v = s_part[0][tid];
        for (int s = 1; s < S; ++s) v = __fadd_rn(v, s_part[s][tid]);
        if (tid < 24) s_raw[tid] = v;
        else s_sum[tid - 24] = tid == 24 && p.sqrsum_in ? p.sqrsum_in[t] : v;
    }
    __syncthreads();

    if (warp == 0)
        mhc_gates_warp(s_raw, s_sum[0], (float)p.rms_numel, p.scale, p.base, p.gate.rms_eps, p.gate.pre_eps,
                       p.gate.sinkhorn_eps, p.gate.post_mult, p.gate.sinkhorn_iters, p.post_out + 4 * t,
                       p.comb_out + 16 * t, p.pre_out ? p.pre_out + 4 * t : nullptr,
                       p.mix_out ? p.mix_out + 24 * t : nullptr, EPI == MHC_EPI_IMMEDIATE ? s_pre : nullptr);

    if (EPI == MHC_EPI_DELAYED && p.norm_w && warp > 0) {
        const float rn = mhc_inv_rms(s_sum[1], (float)H, p.norm_eps);
        uint4 *li = reinterpret_cast<uint4 *>(p.li + t * p.li_stride);
        mhc_norm_row(li, reinterpret_cast<const uint4 *>(p.norm_w), rn, li, H / 8, tid - 32, blockDim.x - 32);
    }
    if (EPI == MHC_EPI_IMMEDIATE) {
        __syncthreads(); /* s_pre */
        mhc_collapse_row(p.col_src + t * p.col_src_stride, H, s_pre, p.norm_w, p.norm_eps, p.sq_rounded,
                         p.li + t * p.li_stride, p.aux ? p.aux + t * p.aux_stride : nullptr, s_row, s_red);
    }
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
