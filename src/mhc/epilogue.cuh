/*
 * One token's gates epilogue, by every thread of a CTA (spec/mhc.md 3.2-3.5, 6.4). Shared
 * by K2 of the tensor-core route (epilogue_kernel.cu, one CTA per token) and the gate CTAs
 * of the small-T kernel (small_t_kernel.cu), so both routes run the same operations:
 *
 *   raw[m] = sum_{s = 0..S-1} raw_part[s][t][m]   (serially, in slice order)
 *   sq     = sqrsum_in[t] if given, else sum_s sq_part[s][t] (slice order)
 *   rms = 1 / sqrt(sq / numel + rms_eps); mix = raw * rms; pre, post, Sinkhorn comb
 *   DELAYED (V4.1), norm_in_place: the projection stored the un-normed collapse yb and
 *                     its ss partials; layer_input = bf16((yb * rn) * w) in place
 *                     (the small-T route normalises in its row CTAs instead)
 *   IMMEDIATE (V4):   layer_input = [norm](collapse(row, fresh pre)), aux, from the row the
 *                     pipeline names (R_new, R or the broadcast copy)
 *
 * Decomposition: all threads stage the S x 26 partials in shared memory (all loads in
 * flight together), threads 0..25 sum them in slice order; warp 0
 * evaluates the gates (lanes 0..7 sigmoids, lanes e = lane & 15 one Sinkhorn element
 * each, width-16 shuffles) while the other warps normalise the V4.1 layer input; in V4
 * all warps collapse the row once warp 0 has the pre (the row waits in dynamic shared
 * memory, 2H bytes, for the norm's second pass).
 * Numerics: fp32; IEEE sqrt and divisions; expf (not bit-exact with the C library's,
 * hence the 1e-5 tolerance on gates); bf16 outputs through mhc_pack2.
 */
#ifndef DSV4_MHC_EPILOGUE_CUH
#define DSV4_MHC_EPILOGUE_CUH

#include "mhc/gates_config.h"
#include "mhc/mhc_device.cuh"
#include "mhc/mhc_host.h"

struct mhc_epi_smem {
    float part[MHC_TC_MAX_SPLIT][MHC_WS_FLOATS]; /* the S partials of this token */
    float raw[24], sum[2], pre[4], red[33];
};

/* Stages token t's S x 26 partials in sm.part, CH loads in flight per thread per round: a
 * loop with one load per trip kept each load waiting on the previous one (S = 40 at
 * T = 16..64: ~8 dependent L2 round trips before the gates could start; now 2). */
static __device__ __forceinline__ void mhc_epi_stage(const mhc_pipe_t &p, int64_t t, bool with_ss, mhc_epi_smem &sm) {
    constexpr int CH = 4; /* 4 x 128 threads = 512 partials, S <= 19, per round */
    const int64_t T = p.T;
    const int S = p.plan.splits, n = S * MHC_WS_FLOATS;
    const float *ws_raw = p.ws, *ws_sq = p.ws + S * T * 24, *ws_ss = ws_sq + S * T;
    for (int base = threadIdx.x; base < n; base += CH * blockDim.x) {
        float v[CH];
#pragma unroll
        for (int k = 0; k < CH; ++k) {
            const int i = base + k * blockDim.x, s = i / MHC_WS_FLOATS, q = i % MHC_WS_FLOATS;
            /* L2 loads: on the small-T route other CTAs of the same grid wrote these */
            const float *src = q < 24 ? ws_raw + (s * T + t) * 24 + q : (q == 24 ? ws_sq : ws_ss) + s * T + t;
            v[k] = i < n && (q < 25 || with_ss) ? __ldcg(src) : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < CH; ++k) {
            const int i = base + k * blockDim.x;
            if (i < n) sm.part[i / MHC_WS_FLOATS][i % MHC_WS_FLOATS] = v[k];
        }
    }
}

/* staged: sm.part already holds the partials (the small-T gate CTAs copy them as their
 * flags arrive) and a barrier has passed since. */
template <int EPI>
static __device__ __forceinline__ void mhc_epilogue_token(const mhc_pipe_t &p, int64_t t, bool norm_in_place,
                                                          bool staged, mhc_epi_smem &sm, uint4 *s_row) {
    const int tid = threadIdx.x, warp = tid >> 5;
    const int64_t H = p.H;
    const int S = p.plan.splits;
    const bool with_ss = EPI == MHC_EPI_DELAYED && norm_in_place;
    if (!staged) {
        mhc_epi_stage(p, t, with_ss, sm);
        __syncthreads();
    }
    if (tid < MHC_WS_FLOATS) {
        float v = sm.part[0][tid];
#pragma unroll 8 /* 8 shared loads in flight per step; the adds stay in slice order */
        for (int s = 1; s < S; ++s) v = __fadd_rn(v, sm.part[s][tid]);
        if (tid < 24) sm.raw[tid] = v;
        else sm.sum[tid - 24] = tid == 24 && p.sqrsum_in ? p.sqrsum_in[t] : v;
    }
    __syncthreads();

    if (warp == 0)
        mhc_gates_warp(sm.raw, sm.sum[0], (float)p.rms_numel, p.scale, p.base, p.gate.rms_eps, p.gate.pre_eps,
                       p.gate.sinkhorn_eps, p.gate.post_mult, p.gate.sinkhorn_iters, p.post_out + 4 * t,
                       p.comb_out + 16 * t, p.pre_out ? p.pre_out + 4 * t : nullptr,
                       p.mix_out ? p.mix_out + 24 * t : nullptr, EPI == MHC_EPI_IMMEDIATE ? sm.pre : nullptr);

    if (with_ss && p.norm_w && warp > 0) {
        const float rn = mhc_inv_rms(sm.sum[1], (float)H, p.norm_eps);
        uint4 *li = reinterpret_cast<uint4 *>(p.li + t * p.li_stride);
        mhc_norm_row(li, reinterpret_cast<const uint4 *>(p.norm_w), rn, li, H / 8, tid - 32, blockDim.x - 32);
    }
    if (EPI == MHC_EPI_IMMEDIATE) {
        __syncthreads(); /* sm.pre */
        const mhc_src_stored src = {reinterpret_cast<const uint4 *>(p.col_src + t * p.col_src_stride)};
        mhc_collapse_row(src, H, sm.pre, p.norm_w, p.norm_eps, p.sq_rounded,
                         p.li + t * p.li_stride, p.aux ? p.aux + t * p.aux_stride : nullptr, s_row, sm.red);
    }
}

#endif /* DSV4_MHC_EPILOGUE_CUH */
