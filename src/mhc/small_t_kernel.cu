/*
 * The small-T route: projection, gates, Sinkhorn, stored rows and collapse of a gates /
 * pre / seam call in ONE launch, so that a decode step pays one launch and one DRAM round
 * trip per phase instead of two kernels' worth.
 *
 * Formula: as the tensor-core route (proj_tc_kernel.cu + epilogue.cuh). Per token t:
 *   r[s][h]  = bf16(post_channel(x, R)) (POST: the stored R_new) | R[s][h] (RES) | e[h] (BCAST)
 *   raw_part[ks][t][m] = sum_{h in slice ks} sum_s fn[m][s*H + h] * r[s][h],  sq_part likewise
 *   then the epilogue: slice-order sums, RMS, gates, Sinkhorn, collapse + RMSNorm.
 *
 * Grid: one dimension, three kinds of CTA of 256 threads, in this order:
 *   [0, P)       projection CTAs, P = ceil(T / TPC) x 4 x S: token group g (TPC tokens),
 *                n-tile nt (6 of the 24 mix outputs), slice ks (256 channels of every
 *                stream; S = H / 256 = 20 at H = 5120). Thread tid owns channel
 *                h = 256 ks + tid: it issues its 6 x 4 fn loads and its tokens' input loads
 *                together (one round trip; the CTA stores nothing that could alias them),
 *                forms the projection input and accumulates 6 mix partials and sq per
 *                token. Warp trees, then the 8 warps in order; the CTA stores each
 *                token's 6 mix partials and (n-tile 0) sq as tagged words of the record
 *                (t, nt, ks) (prim/grid_flag.cuh).
 *   [P, P + T)   row CTAs, V4.1 only: one pass over token t's row that stores R_new (the
 *                post-apply, recomputed here: cheaper than waiting for it) or the 4
 *                broadcast copies, and collapses it with the incoming pre-mix, aux and
 *                RMSNorm (mhc_collapse_row with a producing source; nothing is read back).
 *                None of this waits for the projection.
 *   last T       gate CTAs: thread i < 4 S of token t's CTA waits until every word of
 *                record i carries the tag and copies that producer's partials into the
 *                staging buffer (mhc_small_wait_stage), then the CTA runs the epilogue
 *                (epilogue.cuh). With the immediate pre (V4) there are no row CTAs: the
 *                gate CTA stores the rows first and collapses them after the gates.
 * Only gate CTAs wait, only on CTAs with lower block indices (dispatched before them: the
 * one ordering this route assumes), and at most T of them wait at once, so at auto-route
 * sizes they can never hold every CTA slot. The records live in the workspace
 * (T x 4 x S of MHC_SMALL_REC_WORDS words) and each gate CTA zeroes its own: graph replays
 * need no memset. A tag travels in the same 8-byte store as its value, so the producer
 * needs no fence and the gate CTA no second read after it sees the tag.
 * Sizes at T = 12, H = 5120: 240 projection CTAs (24.6 KB of fn each), 12 row, 12 gate
 * CTAs: 264 = one wave of 2 CTAs per SM on the H200; a gate CTA reads 20 x 25 partials.
 *
 * Numerics: per-thread fp32 FMA chains over its channel's streams (in order 0..3), warp
 * xor-trees, warps in order, slices in order. The projection reads the stored bf16 values
 * (MHC_SMALL_T_UNROUNDED = 1 projects the unrounded fp32 values instead; gates_config.h
 * says why not). Stored rows, collapse and aux use the shared per-row functions: bit-exact
 * with dsv4_mhc_post / dsv4_mhc_collapse and with the tensor-core route.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "mhc/epilogue.cuh"
#include "prim/grid_flag.cuh"

namespace {

constexpr int NT = MHC_SMALL_THREADS, NW = NT / 32, TN = MHC_SMALL_TILE_N, NTILES = 24 / TN;
static_assert(NTILES * (MHC_MAX_HIDDEN / NT) <= NT, "a gate CTA polls its 4 S records with one thread each");
static_assert(MHC_MAX_HIDDEN / NT <= MHC_TC_MAX_SPLIT, "the epilogue stages at most MHC_TC_MAX_SPLIT slices");

/* The record of token t's partials from the projection CTA of n-tile nt and slice ks. */
__device__ __forceinline__ unsigned long long *mhc_small_rec(const mhc_pipe_t &p, int64_t t, int nt, int ks) {
    return reinterpret_cast<unsigned long long *>(p.ws) +
           ((t * NTILES + nt) * p.plan.splits + ks) * MHC_SMALL_REC_WORDS;
}

struct mhc_small_smem {
    mhc_epi_smem epi;
    float coef[MHC_SMALL_MAX_TPC][20];        /* post[4], comb[16] per token */
    float red[NW][MHC_SMALL_MAX_TPC][TN + 1]; /* per-warp sums: 6 mix, sq      */
    float pm[4];                              /* the incoming pre-mix (V4.1)   */
};

template <int PROD, int TPC>
__device__ __forceinline__ void mhc_small_proj(const mhc_pipe_t &p, int64_t b, mhc_small_smem &sm) {
    constexpr int NS = PROD == MHC_PROD_BCAST ? 1 : 4; /* streams in the projection input */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t T = p.T, H = p.H, S = p.plan.splits;
    const int ks = (int)(b % S), nt = (int)(b / S % NTILES);
    const int64_t t0 = b / (S * NTILES) * TPC, h = (int64_t)ks * NT + tid, K = NS * H;
    if (PROD == MHC_PROD_POST)
        for (int i = tid; i < TPC * 20; i += NT) {
            const int tb = i / 20, q = i % 20;
            const int64_t t = t0 + tb;
            sm.coef[tb][q] = t >= T ? 0.0f : (q < 4 ? p.post_in[4 * t + q] : p.comb_in[16 * t + q - 4]);
        }

    /* every load before any arithmetic: the thread's whole input is one round trip */
    float f[TN][NS];
    const float *fnb = p.fn + (int64_t)nt * TN * K + h;
#pragma unroll
    for (int n = 0; n < TN; ++n)
#pragma unroll
        for (int s = 0; s < NS; ++s) f[n][s] = __ldg(fnb + n * K + s * H);
    uint16_t in[TPC][5] = {}; /* R0..R3 (BCAST: e), then x (POST) */
#pragma unroll
    for (int tb = 0; tb < TPC; ++tb) {
        const int64_t t = t0 + tb;
        if (t >= T) continue;
        const uint16_t *rt = p.res + t * p.res_stride + h;
        if (PROD == MHC_PROD_POST) in[tb][4] = __ldg(p.x + t * p.x_stride + h);
#pragma unroll
        for (int s = 0; s < NS; ++s) in[tb][s] = __ldg(rt + s * H);
    }
    __syncthreads(); /* sm.coef */

    float acc[TPC][TN], sq[TPC];
#pragma unroll
    for (int tb = 0; tb < TPC; ++tb) {
        float r[4];
#pragma unroll
        for (int s = 0; s < NS; ++s) r[s] = dsv4_bf16_to_f32(in[tb][s]);
        if (PROD == MHC_PROD_POST) {
            float o[4];
            mhc_post_channel(sm.coef[tb], sm.coef[tb] + 4, dsv4_bf16_to_f32(in[tb][4]), r, o);
            const uint32_t w01 = mhc_pack2(o[0], o[1]), w23 = mhc_pack2(o[2], o[3]); /* the stored R_new */
            const float rb[4] = {mhc_bf16_lo(w01), mhc_bf16_hi(w01), mhc_bf16_lo(w23), mhc_bf16_hi(w23)};
#pragma unroll
            for (int s = 0; s < 4; ++s) r[s] = MHC_SMALL_T_UNROUNDED ? o[s] : rb[s];
        }
        sq[tb] = 0.0f;
#pragma unroll
        for (int s = 0; s < NS; ++s) sq[tb] = __fmaf_rn(r[s], r[s], sq[tb]);
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            float a = 0.0f;
#pragma unroll
            for (int s = 0; s < NS; ++s) a = __fmaf_rn(f[n][s], r[s], a);
            acc[tb][n] = a;
        }
    }

    /* warp trees, then the warps in order */
#pragma unroll
    for (int tb = 0; tb < TPC; ++tb) {
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            const float v = mhc_warp_sum(acc[tb][n]);
            if (lane == 0) sm.red[warp][tb][n] = v;
        }
        const float v = mhc_warp_sum(sq[tb]);
        if (lane == 0) sm.red[warp][tb][TN] = v;
    }
    __syncthreads();
    /* each result leaves as a tagged word of the token's record for (n-tile, slice): no
     * fence, no flag (prim/grid_flag.cuh) */
    if (tid < TPC * (TN + 1)) {
        const int tb = tid / (TN + 1), q = tid % (TN + 1);
        const int64_t t = t0 + tb;
        if (t < T && (q < TN || nt == 0)) {
            float v = sm.red[0][tb][q];
#pragma unroll
            for (int w = 1; w < NW; ++w) v = __fadd_rn(v, sm.red[w][tb][q]);
            dsv4_tagged_store(mhc_small_rec(p, t, nt, ks) + q, v, p.tag);
        }
    }
}

/* Token t's 4 stream rows as the collapse reads them; a seam's R_new and the broadcast
 * copies are stored on the way. */
template <int PROD, class F>
__device__ __forceinline__ void mhc_small_with_src(const mhc_pipe_t &p, int64_t t, mhc_small_smem &sm, F &&f) {
    uint4 *o4 = reinterpret_cast<uint4 *>(p.res_out + t * p.res_out_stride);
    const uint4 *r4 = reinterpret_cast<const uint4 *>(p.res + t * p.res_stride);
    if (PROD == MHC_PROD_POST) {
        mhc_src_post src = {reinterpret_cast<const uint4 *>(p.x + t * p.x_stride), r4, o4, {}, {}};
        mhc_token_coef(p.post_in + 4 * t, p.comb_in + 16 * t, sm.coef[0], src.pc, src.cb);
        f(src);
    } else if (PROD == MHC_PROD_BCAST) {
        f(mhc_src_bcast{r4, p.res_out ? o4 : nullptr});
    } else {
        f(mhc_src_stored{reinterpret_cast<const uint4 *>(p.col_src + t * p.col_src_stride)});
    }
}

/* Gate CTA: thread i < 4 S polls the record of producer (n-tile i / S, slice i % S) of
 * token t, its 6 mix partials (and sq from n-tile 0) as tagged words: each look loads all
 * of them before testing any (one round trip per look, prim/grid_flag.cuh says why)
 * until every one carries the tag, then copies them into the epilogue's staging buffer and
 * zeroes the whole record for the next call on this workspace. Each thread spins on its
 * own record (no CTA barrier per look, which made every look as slow as the slowest
 * thread's round trip); one barrier at the end. */
__device__ __forceinline__ void mhc_small_wait_stage(const mhc_pipe_t &p, int64_t t, mhc_epi_smem &sm) {
    const int tid = threadIdx.x, S = p.plan.splits, n = NTILES * S;
    if (tid < n) {
        const int nt = tid / S, ks = tid % S, nw = nt == 0 ? TN + 1 : TN;
        unsigned long long *rec = mhc_small_rec(p, t, nt, ks);
        unsigned long long x[TN + 1];
        bool all;
        unsigned looks = 0;
        do {
#pragma unroll
            for (int q = 0; q < TN + 1; ++q) x[q] = q < nw ? dsv4_tagged_look(rec + q) : 0ull;
            all = true;
#pragma unroll
            for (int q = 0; q < TN + 1; ++q) all = all && (q >= nw || dsv4_tagged_is_set(x[q], p.tag));
            if (!all && ++looks == DSV4_GRID_WAIT_POLLS) { /* lost (mhc.h): NaN partials, NaN gates */
#pragma unroll
                for (int q = 0; q < TN + 1; ++q) x[q] = 0x7FFFFFFFull;
                all = true;
            }
        } while (!all);
#pragma unroll
        for (int q = 0; q < TN; ++q) sm.part[ks][nt * TN + q] = dsv4_tagged_value(x[q]);
        if (nt == 0) {
            sm.part[ks][24] = dsv4_tagged_value(x[TN]);
            sm.part[ks][25] = 0.0f;
        }
        uint4 *r4 = reinterpret_cast<uint4 *>(rec);
#pragma unroll
        for (int i = 0; i < MHC_SMALL_REC_WORDS / 2; ++i) r4[i] = make_uint4(0u, 0u, 0u, 0u);
    }
    __syncthreads();
}

} // namespace

template <int PROD, int TPC>
__global__ void __launch_bounds__(MHC_SMALL_THREADS, MHC_SMALL_MIN_CTAS) mhc_small_kernel(const mhc_pipe_t p) {
    extern __shared__ uint4 s_row[]; /* the bf16 collapse row between the norm's two passes */
    __shared__ mhc_small_smem sm;
    const int64_t T = p.T, S = p.plan.splits, b = blockIdx.x;
    const int64_t P = (T + TPC - 1) / TPC * NTILES * S, R = p.epi == MHC_EPI_DELAYED ? T : 0;
    if (b < P) {
        mhc_small_proj<PROD, TPC>(p, b, sm);
        return;
    }
    if (b < P + R) { /* V4.1 row CTA: one pass over the row, nothing read back */
        const int64_t t = b - P;
        if (threadIdx.x < 4 && p.pre_mix) sm.pm[threadIdx.x] = p.pre_mix[4 * t + threadIdx.x];
        __syncthreads();
        mhc_small_with_src<PROD>(p, t, sm, [&](const auto &src) {
            mhc_collapse_row(src, p.H, p.pre_mix ? sm.pm : nullptr, p.norm_w, p.norm_eps, p.sq_rounded,
                             p.li + t * p.li_stride, p.aux ? p.aux + t * p.aux_stride : nullptr, s_row, sm.epi.red);
        });
        return;
    }
    const int64_t t = b - P - R;                                                  /* gate CTA */
    const mhc_gate_coef gc = mhc_gate_coef_load(p.scale, p.base, p.sqrsum_in, t); /* in flight while it waits */
    if (p.epi != MHC_EPI_DELAYED && PROD != MHC_PROD_RES && p.res_out) { /* rows stored while the projection runs */
        mhc_small_with_src<PROD>(p, t, sm, [&](const auto &src) {
            uint4 r[4];
            for (int64_t v = threadIdx.x; v < p.H / 8; v += NT) src(v, p.H / 8, r);
        });
        __syncthreads(); /* stored before the V4 collapse reads them back */
    }
    mhc_small_wait_stage(p, t, sm.epi);
    switch (p.epi) {
    case MHC_EPI_GATES: mhc_epilogue_token<MHC_EPI_GATES>(p, t, true, sm.epi, s_row, gc); break;
    case MHC_EPI_DELAYED: mhc_epilogue_token<MHC_EPI_DELAYED>(p, t, true, sm.epi, s_row, gc); break;
    default: mhc_epilogue_token<MHC_EPI_IMMEDIATE>(p, t, true, sm.epi, s_row, gc); break;
    }
}

template <int PROD, int TPC> static dsv4_status_t mhc_launch_small_tpc(const mhc_pipe_t *p, cudaStream_t s) {
    static const char *op = "mhc_small_t";
    static int smem_cache;
    const void *k = (const void *)mhc_small_kernel<PROD, TPC>;
    const size_t dyn = p->norm_w && p->epi != MHC_EPI_GATES ? MHC_ROW_SMEM_BYTES(p->H) : 0;
    DSV4_TRY(dsv4_launch_prepare(op, k, dyn, &smem_cache));
    const int64_t P = (p->T + TPC - 1) / TPC * NTILES * p->plan.splits;
    const int64_t ctas = P + (p->epi == MHC_EPI_DELAYED ? 2 : 1) * p->T;
    dsv4_launch(mhc_small_kernel<PROD, TPC>, (unsigned)ctas, MHC_SMALL_THREADS, dyn, s, *p);
    return dsv4_launch_status(op);
}

template <int PROD> static dsv4_status_t mhc_launch_small_prod(const mhc_pipe_t *p, cudaStream_t s) {
    switch (p->plan.tokens_per_cta) {
    case 1: return mhc_launch_small_tpc<PROD, 1>(p, s);
    case 2: return mhc_launch_small_tpc<PROD, 2>(p, s);
    case 4: return mhc_launch_small_tpc<PROD, 4>(p, s);
    case 5: return mhc_launch_small_tpc<PROD, 5>(p, s);
    }
    return dsv4_fail(DSV4_STATUS_INTERNAL, "mhc_small_t", "no kernel for %d tokens per CTA",
                     (int)p->plan.tokens_per_cta);
}

extern "C" dsv4_status_t mhc_launch_small(const mhc_pipe_t *p, dsv4_stream_t stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (p->plan.tile_n != MHC_SMALL_TILE_N || p->plan.threads != MHC_SMALL_THREADS ||
        (int64_t)p->plan.splits * MHC_SMALL_THREADS != p->H)
        return dsv4_fail(DSV4_STATUS_INTERNAL, "mhc_small_t", "plan does not match the compiled geometry");
    switch (p->prod) {
    case MHC_PROD_POST: return mhc_launch_small_prod<MHC_PROD_POST>(p, s);
    case MHC_PROD_RES: return mhc_launch_small_prod<MHC_PROD_RES>(p, s);
    default: return mhc_launch_small_prod<MHC_PROD_BCAST>(p, s);
    }
}
