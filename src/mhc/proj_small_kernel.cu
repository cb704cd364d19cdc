/*
 * K1, small-T route (spec/mhc.md 6.2): post-apply (or residual / broadcast embedding)
 * fused with the fp32 CUDA-core projection partials.
 *
 * Formula, per token t and slice ks (channels [ks*H/S, (ks+1)*H/S) of every stream):
 *   r[s][h]  = bf16(post_channel(x, R)) (POST; the stored R_new)  |  R[s][h] (RES)  |  e[h] (BCAST)
 *   raw_part[ks][t][m] = sum_{h in slice} sum_s fn[m][s*H + h] * r[s][h]     m in this CTA's n-tile
 *   sq_part[ks][t]     = sum_{h in slice} sum_s r[s][h]^2
 *   and, by the n-tile-0 CTAs only: R_new = bf16(r) (POST) or the 4 copies of e (BCAST);
 *   with collapse_k1 the un-normed collapse yb = bf16(collapse(R_new, pre_mix)) into the
 *   layer input, ss_part[ks][t] = sum yb^2; aux = bf16(stream mean of R_new).
 *
 * Grid (ceil(T / TPC), 24 / tile_n, split_k) = (.., 4, 8); 128 threads. Thread tid owns
 * channels h = ks*H/8 + it*128 + tid, it = 0 .. H/1024 - 1 (5 at H = 5120), so each warp
 * reads 64 contiguous bytes per stream and 128 per fn row. A CTA handles TPC tokens: it
 * loads the 6 x 4 fn values of a channel once and applies them to each of its tokens.
 * Every n-tile CTA redoes the post-apply (upstream's design), only n-tile 0 stores.
 *
 * Numerics: the projection and sq read the stored bf16 values, like the tensor-core route
 * (MHC_SMALL_T_UNROUNDED = 1 restores upstream's unrounded fp32 input; gates_config.h says
 * why not). Per token: per-thread fp32 FMA chains over its channels (streams in order
 * 0..3), then a warp xor-shuffle tree, then the 4 warp values in warp order by one thread. R_new, yb
 * and aux use the shared per-channel functions: bit-exact with dsv4_mhc_post/collapse.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "mhc/gates_config.h"
#include "mhc/mhc_device.cuh"
#include "mhc/mhc_host.h"

template <int PROD, int TPC>
__global__ void __launch_bounds__(MHC_SMALL_THREADS, MHC_SMALL_MIN_CTAS) mhc_proj_small_kernel(const mhc_pipe_t p) {
    constexpr int NT = MHC_SMALL_THREADS, NW = NT / 32, TN = MHC_SMALL_TILE_N;
    constexpr int NS = PROD == MHC_PROD_BCAST ? 1 : 4; /* streams in the projection input */
    constexpr int NQ = TN + 2;                          /* reduced values: TN mix, sq, ss */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t T = p.T, H = p.H, S = p.plan.splits;
    const int nt = blockIdx.y, ks = blockIdx.z;
    const int64_t t0 = (int64_t)blockIdx.x * TPC;
    const bool lead = nt == 0; /* the n-tile-0 CTAs store R_new, yb and aux */
    const bool collapse = p.collapse_k1 && lead;
    const bool identity = p.pre_mix == nullptr;
    const int64_t hps = H / S;
    const int iters = (int)(hps / NT);

    /* per token: post[4], comb[16], pre_mix[4] */
    __shared__ float s_coef[TPC][24];
    __shared__ float s_red[NW][TPC][NQ];
    for (int i = tid; i < TPC * 24; i += NT) {
        const int tb = i / 24, q = i % 24;
        const int64_t t = t0 + tb;
        float v = 0.0f;
        if (t < T) {
            if (q < 4) v = PROD == MHC_PROD_POST ? p.post_in[4 * t + q] : 0.0f;
            else if (q < 20) v = PROD == MHC_PROD_POST ? p.comb_in[16 * t + q - 4] : 0.0f;
            else if (!identity) v = p.pre_mix[4 * t + q - 20];
        }
        s_coef[tb][q] = v;
    }
    __syncthreads();

    float acc[TPC][TN], sq[TPC], ss[TPC];
#pragma unroll
    for (int tb = 0; tb < TPC; ++tb) {
        sq[tb] = 0.0f;
        ss[tb] = 0.0f;
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[tb][n] = 0.0f;
    }
    const int64_t K = NS * H;
    const float *fnb = p.fn + (int64_t)nt * TN * K;

    /* unrolled by 2 so that two iterations' loads are in flight: at small T this loop's
     * latency chain (H / 1024 round trips to L2 / memory) is the kernel's time */
#pragma unroll 2
    for (int it = 0; it < iters; ++it) {
        const int64_t h = ks * hps + (int64_t)it * NT + tid;
        float f[TN][NS];
#pragma unroll
        for (int n = 0; n < TN; ++n)
#pragma unroll
            for (int s = 0; s < NS; ++s) f[n][s] = __ldg(fnb + n * K + s * H + h);
#pragma unroll
        for (int tb = 0; tb < TPC; ++tb) {
            const int64_t t = t0 + tb;
            if (t >= T) break; /* uniform across the CTA */
            /* r: the projection input; rb/rr: the stored bf16 residual value (bits / float) */
            float r[4] = {0.0f, 0.0f, 0.0f, 0.0f}, rr[4];
            uint16_t rb[4];
            const uint16_t *rt = p.res + t * p.res_stride;
            if (PROD == MHC_PROD_POST) {
                float rin[4];
#pragma unroll
                for (int s = 0; s < 4; ++s) rin[s] = dsv4_bf16_to_f32(rt[s * H + h]);
                mhc_post_channel(&s_coef[tb][0], &s_coef[tb][4], dsv4_bf16_to_f32(p.x[t * p.x_stride + h]), rin, r);
#pragma unroll
                for (int s = 0; s < 4; ++s) rb[s] = dsv4_f32_to_bf16(r[s]);
            } else if (PROD == MHC_PROD_RES) {
#pragma unroll
                for (int s = 0; s < 4; ++s) rb[s] = rt[s * H + h];
            } else {
#pragma unroll
                for (int s = 0; s < 4; ++s) rb[s] = rt[h];
            }
#pragma unroll
            for (int s = 0; s < 4; ++s) rr[s] = dsv4_bf16_to_f32(rb[s]);
            if (PROD != MHC_PROD_POST || !MHC_SMALL_T_UNROUNDED) { /* project what is stored */
#pragma unroll
                for (int s = 0; s < 4; ++s) r[s] = rr[s];
            }
            if (lead && PROD != MHC_PROD_RES && p.res_out) { /* the gates op projects e without the copy */
                uint16_t *ot = p.res_out + t * p.res_out_stride;
#pragma unroll
                for (int s = 0; s < 4; ++s) ot[s * H + h] = rb[s];
            }
            if (collapse) {
                const float y = identity ? rr[0] : mhc_collapse_channel(&s_coef[tb][20], rr);
                const uint16_t yb = dsv4_f32_to_bf16(y);
                const float ybf = dsv4_bf16_to_f32(yb);
                ss[tb] = __fmaf_rn(ybf, ybf, ss[tb]);
                p.li[t * p.li_stride + h] = yb;
            }
            if (lead && p.aux) p.aux[t * p.aux_stride + h] = dsv4_f32_to_bf16(mhc_aux_channel(rr));
#pragma unroll
            for (int s = 0; s < NS; ++s) sq[tb] = __fmaf_rn(r[s], r[s], sq[tb]);
#pragma unroll
            for (int n = 0; n < TN; ++n) {
                float a = acc[tb][n];
#pragma unroll
                for (int s = 0; s < NS; ++s) a = __fmaf_rn(f[n][s], r[s], a);
                acc[tb][n] = a;
            }
        }
    }

    /* warp trees, then the warps in order */
#pragma unroll
    for (int tb = 0; tb < TPC; ++tb) {
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            const float v = mhc_warp_sum(acc[tb][n]);
            if (lane == 0) s_red[warp][tb][n] = v;
        }
        const float vq = mhc_warp_sum(sq[tb]), vs = mhc_warp_sum(ss[tb]);
        if (lane == 0) {
            s_red[warp][tb][TN] = vq;
            s_red[warp][tb][TN + 1] = vs;
        }
    }
    __syncthreads();
    float *ws_raw = p.ws, *ws_sq = p.ws + S * T * 24, *ws_ss = ws_sq + S * T;
    for (int i = tid; i < TPC * NQ; i += NT) {
        const int tb = i / NQ, q = i % NQ;
        const int64_t t = t0 + tb;
        if (t >= T) continue;
        float v = s_red[0][tb][q];
#pragma unroll
        for (int w = 1; w < NW; ++w) v = __fadd_rn(v, s_red[w][tb][q]);
        if (q < TN) ws_raw[(ks * T + t) * 24 + nt * TN + q] = v;
        else if (q == TN && lead) ws_sq[ks * T + t] = v;
        else if (q == TN + 1 && collapse) ws_ss[ks * T + t] = v;
    }
}

template <int PROD, int TPC> static dsv4_status_t launch(const mhc_pipe_t *p, cudaStream_t s) {
    static const char *op = "mhc_proj_small";
    static int smem_cache;
    const void *k = (const void *)mhc_proj_small_kernel<PROD, TPC>;
    DSV4_TRY(dsv4_launch_prepare(op, k, 0, &smem_cache));
    dim3 grid((unsigned)((p->T + TPC - 1) / TPC), 24 / MHC_SMALL_TILE_N, (unsigned)p->plan.splits);
    mhc_proj_small_kernel<PROD, TPC><<<grid, MHC_SMALL_THREADS, 0, s>>>(*p);
    return dsv4_launch_status(op);
}

template <int PROD> static dsv4_status_t launch_tpc(const mhc_pipe_t *p, cudaStream_t s) {
    switch (p->plan.tokens_per_cta) {
    case 1: return launch<PROD, 1>(p, s);
    case 2: return launch<PROD, 2>(p, s);
    case 4: return launch<PROD, 4>(p, s);
    }
    return dsv4_fail(DSV4_STATUS_INTERNAL, "mhc_proj_small", "no kernel for %d tokens per CTA",
                     (int)p->plan.tokens_per_cta);
}

extern "C" dsv4_status_t mhc_launch_proj_small(const mhc_pipe_t *p, dsv4_stream_t stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (p->plan.splits != MHC_SMALL_SPLIT_K || p->plan.tile_n != MHC_SMALL_TILE_N ||
        p->plan.threads != MHC_SMALL_THREADS || p->H % ((int64_t)MHC_SMALL_SPLIT_K * MHC_SMALL_THREADS) != 0)
        return dsv4_fail(DSV4_STATUS_INTERNAL, "mhc_proj_small", "plan does not match the compiled geometry");
    switch (p->prod) {
    case MHC_PROD_POST: return launch_tpc<MHC_PROD_POST>(p, s);
    case MHC_PROD_RES: return launch_tpc<MHC_PROD_RES>(p, s);
    default: return launch_tpc<MHC_PROD_BCAST>(p, s);
    }
}
