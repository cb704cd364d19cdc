/*
 * The gates epilogue, in the forms the routes use, all running the same operations in the
 * same order:
 *
 *   raw[m] = sum_{s = 0..S-1} raw_part[s][t][m]   (serially, in slice order)
 *   sq     = sqrsum_in[t] if given, else sum_s sq_part[s][t] (slice order)
 *   rms = 1 / sqrt(sq / numel + rms_eps); mix = raw * rms; pre, post, Sinkhorn comb
 *   DELAYED (V4.1):   the gates only; the layer input is normalised by mhc_norm_token
 *                     (tensor-core route) or by the small-T kernel's row CTAs
 *   IMMEDIATE (V4):   layer_input = [norm](collapse(row, fresh pre)), aux, from the row the
 *                     pipeline names (R_new, R or the broadcast copy)
 *
 * mhc_epilogue_token (the small-T gate CTAs and mhc_epilogue_immediate_kernel; one token
 * per CTA): all threads stage the S x 25 partials in shared memory (all loads in flight
 * together), threads 0..24 sum them in slice order; warp 0 evaluates the gates (lanes
 * 0..7 sigmoids, lanes e = lane & 15 one Sinkhorn element each, width-16 shuffles); in V4
 * all warps then collapse the row with the pre (the row waits in dynamic shared memory,
 * 2H bytes, for the norm's second pass).
 * On the tensor-core route the gates op and V4.1 (mhc_epilogue_kernel, epilogue_kernel.cu)
 * give the roles to different CTAs: gate CTAs of MHC_EPI_TPC tokens, one warp each, which
 * stages its token's partials by cp.async and sums them in slice order (mhc_gate_warps),
 * and for V4.1 with a norm weight one norm CTA per token (mhc_norm_token): a CTA doing
 * both would live as long as its Sinkhorn chain while its other warps walked the row one
 * dependent round trip per vector.
 * Numerics: fp32; IEEE sqrt and divisions; expf (not bit-exact with the C library's,
 * hence the 1e-5 tolerance on gates); bf16 outputs through mhc_pack2.
 */
#ifndef DSV4_MHC_EPILOGUE_CUH
#define DSV4_MHC_EPILOGUE_CUH

#include "mhc/gates_config.h"
#include "mhc/mhc_device.cuh"
#include "mhc/mhc_host.h"
#include "prim/cp_async.cuh"

struct mhc_epi_smem {
    float part[MHC_TC_MAX_SPLIT][MHC_WS_FLOATS]; /* the S partials of this token */
    float raw[24], sq, pre[4], red[33];
};

/* Stages token t's S x 26 partials in sm.part, CH loads in flight per thread per round, so
 * that at S = 40 (T = 16..64) the gates wait ~2 dependent L2 round trips instead of the ~8
 * of a loop with one load per trip. */
static __device__ __forceinline__ void mhc_epi_stage(const mhc_pipe_t &p, int64_t t, mhc_epi_smem &sm) {
    constexpr int CH = 4; /* 4 x 128 threads = 512 partials, S <= 19, per round */
    const int64_t T = p.T;
    const int S = p.plan.splits, n = S * MHC_WS_FLOATS;
    const float *ws_raw = p.ws, *ws_sq = p.ws + S * T * 24;
    for (int base = threadIdx.x; base < n; base += CH * blockDim.x) {
        float v[CH];
#pragma unroll
        for (int k = 0; k < CH; ++k) {
            const int i = base + k * blockDim.x, s = i / MHC_WS_FLOATS, q = i % MHC_WS_FLOATS;
            /* L2 loads: on the small-T route other CTAs of the same grid wrote these */
            const float *src = q < 24 ? ws_raw + (s * T + t) * 24 + q : ws_sq + s * T + t;
            v[k] = i < n && q < 25 ? __ldcg(src) : 0.0f; /* q = 25 (ss) is the norm's */
        }
#pragma unroll
        for (int k = 0; k < CH; ++k) {
            const int i = base + k * blockDim.x;
            if (i < n) sm.part[i / MHC_WS_FLOATS][i % MHC_WS_FLOATS] = v[k];
        }
    }
}

/* staged: sm.part already holds the partials (the small-T gate CTAs copy them as their
 * records complete) and a barrier has passed since. gc: mhc_gate_coef_load for token t,
 * issued by the caller before it waited for the partials. */
template <int EPI>
static __device__ __forceinline__ void mhc_epilogue_token(const mhc_pipe_t &p, int64_t t, bool staged, mhc_epi_smem &sm,
                                                          uint4 *s_row, const mhc_gate_coef &gc) {
    const int tid = threadIdx.x, warp = tid >> 5;
    const int64_t H = p.H;
    const int S = p.plan.splits;
    if (!staged) {
        mhc_epi_stage(p, t, sm);
        __syncthreads();
    }
    if (tid < 25) {
        float v = sm.part[0][tid];
#pragma unroll 8 /* 8 shared loads in flight per step; the adds stay in slice order */
        for (int s = 1; s < S; ++s) v = __fadd_rn(v, sm.part[s][tid]);
        if (tid < 24) sm.raw[tid] = v;
        else sm.sq = p.sqrsum_in ? gc.sq_in : v; /* tid 24 is lane 24 of warp 0 */
    }
    __syncthreads();

    if (warp == 0)
        mhc_gates_warp(sm.raw, sm.sq, (float)p.rms_numel, gc, p.gate.rms_eps, p.gate.pre_eps, p.gate.sinkhorn_eps,
                       p.gate.post_mult, p.gate.sinkhorn_iters, p.post_out + 4 * t, p.comb_out + 16 * t,
                       p.pre_out ? p.pre_out + 4 * t : nullptr, p.mix_out ? p.mix_out + 24 * t : nullptr,
                       EPI == MHC_EPI_IMMEDIATE ? sm.pre : nullptr);

    if (EPI == MHC_EPI_IMMEDIATE) {
        __syncthreads(); /* sm.pre */
        const mhc_src_stored src = {reinterpret_cast<const uint4 *>(p.col_src + t * p.col_src_stride)};
        mhc_collapse_row(src, H, sm.pre, p.norm_w, p.norm_eps, p.sq_rounded, p.li + t * p.li_stride,
                         p.aux ? p.aux + t * p.aux_stride : nullptr, s_row, sm.red);
    }
}

/* Gate CTA of mhc_epilogue_kernel: warp w evaluates the gates of token t0 + w (GATES and
 * DELAYED; the same operations and order as mhc_epilogue_token). `stage` is that kernel's
 * dynamic shared memory (MHC_EPI_STAGE_SMEM; a norm CTA uses its first S floats for the ss
 * partials): the partials arrive by cp.async, all in flight without holding registers. */
static __device__ __forceinline__ void mhc_gate_warps(const mhc_pipe_t &p, int64_t t0, float *stage) {
    __shared__ float s_raw[MHC_EPI_TPC][25];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t T = p.T, t = t0 + w;
    const int S = p.plan.splits;
    if (t >= T) return; /* warp-uniform; no CTA barrier follows */
    const mhc_gate_coef gc = mhc_gate_coef_load(p.scale, p.base, p.sqrsum_in, t); /* in flight with the partials */
    float *st = stage + w * S * MHC_EPI_PITCH;
    const float *ws_raw = p.ws, *ws_sq = p.ws + S * T * 24;
    for (int j = lane; j < 7 * S; j += 32) { /* per slice: raw[24] as 6 x 16 bytes, then sq */
        const int sl = j / 7, c = j % 7;
        if (c < 6) dsv4_cp_async_16(st + sl * MHC_EPI_PITCH + 4 * c, ws_raw + (sl * T + t) * 24 + 4 * c);
        else dsv4_cp_async_4(st + sl * MHC_EPI_PITCH + 24, ws_sq + sl * T + t);
    }
    dsv4_cp_async_commit();
    dsv4_cp_async_wait<0>();
    __syncwarp();
    if (lane < 25) {
        float v = st[lane];
#pragma unroll 8 /* shared loads in flight; the adds stay in slice order */
        for (int sl = 1; sl < S; ++sl) v = __fadd_rn(v, st[sl * MHC_EPI_PITCH + lane]);
        s_raw[w][lane] = lane == 24 && p.sqrsum_in ? gc.sq_in : v;
    }
    __syncwarp();
    mhc_gates_warp(s_raw[w], s_raw[w][24], (float)p.rms_numel, gc, p.gate.rms_eps, p.gate.pre_eps, p.gate.sinkhorn_eps,
                   p.gate.post_mult, p.gate.sinkhorn_iters, p.post_out + 4 * t, p.comb_out + 16 * t,
                   p.pre_out ? p.pre_out + 4 * t : nullptr, p.mix_out ? p.mix_out + 24 * t : nullptr, nullptr);
}

/* Norm CTA of mhc_epilogue_kernel (V4.1 with a norm weight): layer_input[t] = bf16((yb * rn) * w)
 * in place, rn from the ss partials summed in slice order. The first batch of the row is
 * loaded before rn is known, so its round trip overlaps the partials'. */
static __device__ __forceinline__ void mhc_norm_token(const mhc_pipe_t &p, int64_t t, float *stage) {
    __shared__ float s_rn;
    const int64_t T = p.T, nv = p.H / 8;
    const int S = p.plan.splits;
    const float *ws_ss = p.ws + S * T * 25;
    for (int sl = threadIdx.x; sl < S; sl += blockDim.x) dsv4_cp_async_4(stage + sl, ws_ss + sl * T + t);
    dsv4_cp_async_commit();
    uint4 *li = reinterpret_cast<uint4 *>(p.li + t * p.li_stride);
    const uint4 *w = reinterpret_cast<const uint4 *>(p.norm_w);
    mhc_norm_batch b;
    mhc_norm_load(li, w, nv, threadIdx.x, blockDim.x, b);
    dsv4_cp_async_wait<0>();
    __syncthreads();
    if (threadIdx.x == 0) {
        float v = stage[0];
#pragma unroll 8
        for (int sl = 1; sl < S; ++sl) v = __fadd_rn(v, stage[sl]);
        s_rn = mhc_inv_rms(v, (float)p.H, p.norm_eps);
    }
    __syncthreads();
    const float rn = s_rn;
    mhc_norm_store(b, rn, li, nv, threadIdx.x, blockDim.x);
    mhc_norm_row(li, w, rn, li, nv, threadIdx.x + MHC_NORM_BATCH * blockDim.x, blockDim.x);
}

#endif /* DSV4_MHC_EPILOGUE_CUH */
