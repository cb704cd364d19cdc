/*
 * Device building blocks of the mhc family, shared by the standalone kernels (post,
 * collapse, gates) and the fused ones (pre, seams), so that every path runs the same
 * fp32 operations in the same order:
 *
 *   mhc_post_channel     acc = post[k]*x; acc = fma(comb[j][k], R_j, acc), j = 0..3
 *   mhc_collapse_channel y = p0*R0; y = fma(p_j, R_j, y), j = 1..3
 *   mhc_aux_channel      (((R0 + R1) + R2) + R3) * 0.25
 *   mhc_inv_rms          1 / sqrt(sum / n + eps), IEEE sqrt and division (bit-equal to
 *                        the C reference given the same sum)
 *   mhc_gates_warp       RMS scaling, pre/post sigmoids and the 20-step Sinkhorn of one
 *                        token in one warp
 *   mhc_collapse_row     one token's collapse, aux and RMSNorm across a CTA, from a stored
 *                        row or from one produced on the way (post-apply, broadcast)
 *   mhc_norm_row         the second pass of the RMSNorm over a stored bf16 row
 *
 * Every operation whose order include/dsv4/mhc.h fixes is written with __fmul_rn /
 * __fmaf_rn / __fadd_rn / __fdiv_rn so that nvcc cannot contract or reorder it; the C
 * reference uses the same fmaf form. bf16 rounding is cvt.rn.bf16x2.f32 (mhc_pack2), which
 * gives the bits of dsv4_f32_to_bf16 (numerics.h), the reference's converter.
 */
#ifndef DSV4_MHC_DEVICE_CUH
#define DSV4_MHC_DEVICE_CUH

#include <stdint.h>

#include "dsv4/numerics.h"
#include "prim/mma.cuh"
#include "prim/store.cuh"

#define MHC_FULL_MASK 0xFFFFFFFFu

/* ---- bf16 x 8 in a uint4 (element i in word i/2, even i in the low half) ---------------- */
static __device__ __forceinline__ void mhc_unpack8(const uint4 v, float f[8]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        f[2 * q] = dsv4_bits_f32(w[q] << 16);
        f[2 * q + 1] = dsv4_bits_f32(w[q] & 0xFFFF0000u);
    }
}

/* One cvt.rn.bf16x2.f32: the same bits as dsv4_f32_to_bf16 on each half (RNE, NaN ->
 * 0x7FFF), in one instruction instead of ~10 integer ones: the producers that pack every
 * output are instruction-bound at large T. */
static __device__ __forceinline__ uint32_t mhc_pack2(float lo, float hi) { return dsv4_pack_bf16x2(lo, hi); }

static __device__ __forceinline__ uint4 mhc_pack8(const float f[8]) {
    return make_uint4(mhc_pack2(f[0], f[1]), mhc_pack2(f[2], f[3]), mhc_pack2(f[4], f[5]), mhc_pack2(f[6], f[7]));
}

/* Word q (channels 2q, 2q + 1) of a bf16 x 8 vector; q must fold to a constant. */
static __device__ __forceinline__ uint32_t mhc_word(const uint4 &v, int q) {
    return q == 0 ? v.x : (q == 1 ? v.y : (q == 2 ? v.z : v.w));
}

static __device__ __forceinline__ float mhc_bf16_lo(uint32_t w) { return dsv4_bits_f32(w << 16); }
static __device__ __forceinline__ float mhc_bf16_hi(uint32_t w) { return dsv4_bits_f32(w & 0xFFFF0000u); }

/* ---- per-channel arithmetic (the bit-exact contract) ------------------------------------ */
/* pc = post[4]; cb = comb[16] row-major (comb[j][k] at 4j + k); r = R[0..3][h]. */
static __device__ __forceinline__ void mhc_post_channel(const float *pc, const float *cb, float x, const float r[4],
                                                        float out[4]) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        float acc = __fmul_rn(pc[k], x);
#pragma unroll
        for (int j = 0; j < 4; ++j) acc = __fmaf_rn(cb[4 * j + k], r[j], acc);
        out[k] = acc;
    }
}

static __device__ __forceinline__ float mhc_collapse_channel(const float *p, const float r[4]) {
    float y = __fmul_rn(p[0], r[0]);
#pragma unroll
    for (int j = 1; j < 4; ++j) y = __fmaf_rn(p[j], r[j], y);
    return y;
}

static __device__ __forceinline__ float mhc_aux_channel(const float r[4]) {
    return __fmul_rn(__fadd_rn(__fadd_rn(__fadd_rn(r[0], r[1]), r[2]), r[3]), 0.25f);
}

static __device__ __forceinline__ float mhc_inv_rms(float sum, float n, float eps) {
    return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sum, n), eps)));
}

static __device__ __forceinline__ float mhc_norm_channel(float yb, float rn, float w) {
    return __fmul_rn(__fmul_rn(yb, rn), w);
}

/* ---- one token's post-apply over a row ---------------------------------------------------- */
/* post[4] and comb[16] of one token into every thread's registers, through 20 floats of
 * shared memory (one global load each). Call from all threads. */
static __device__ __forceinline__ void mhc_token_coef(const float *post, const float *comb, float *s_coef, float pc[4],
                                                      float cb[16]) {
    const int tid = threadIdx.x;
    if (tid < 4) s_coef[tid] = post[tid];
    else if (tid < 20) s_coef[tid] = comb[tid - 4];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 4; ++i) pc[i] = s_coef[i];
#pragma unroll
    for (int i = 0; i < 16; ++i) cb[i] = s_coef[4 + i];
}

/* R_new of 8-channel vector v (nv per stream): out[s] = bf16 x 8 of stream s. */
static __device__ __forceinline__ void mhc_post_vec(const uint4 *x4, const uint4 *r4, int64_t v, int64_t nv,
                                                    const float pc[4], const float cb[16], uint4 out[4]) {
    float xf[8], r[4][8], o[4][8];
    mhc_unpack8(__ldg(x4 + v), xf);
#pragma unroll
    for (int s = 0; s < 4; ++s) mhc_unpack8(__ldg(r4 + s * nv + v), r[s]);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const float rc[4] = {r[0][i], r[1][i], r[2][i], r[3][i]};
        float oc[4];
        mhc_post_channel(pc, cb, xf[i], rc, oc);
#pragma unroll
        for (int s = 0; s < 4; ++s) o[s][i] = oc[s];
    }
#pragma unroll
    for (int s = 0; s < 4; ++s) out[s] = mhc_pack8(o[s]);
}

/* R_new of the vectors v = first, first + step, ...; returns the thread's sum of squares
 * of the stored values when SQ. */
template <bool SQ>
static __device__ __forceinline__ float mhc_post_row(const uint4 *x4, const uint4 *r4, uint4 *o4, int64_t nv,
                                                     const float pc[4], const float cb[16], int64_t first,
                                                     int64_t step) {
    float sq = 0.0f;
#pragma unroll 2 /* two vectors' loads in flight per thread */
    for (int64_t v = first; v < nv; v += step) {
        uint4 ov[4];
        mhc_post_vec(x4, r4, v, nv, pc, cb, ov);
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            o4[s * nv + v] = ov[s];
            if (SQ) {
                float rr[8];
                mhc_unpack8(ov[s], rr);
#pragma unroll
                for (int i = 0; i < 8; ++i) sq = __fmaf_rn(rr[i], rr[i], sq);
            }
        }
    }
    return sq;
}

/* ---- where a row's 4 streams come from (mhc_collapse_row's Src) ------------------------------ */
/* Each gives the 4 stream vectors of 8-channel vector v (nv per stream) as stored bf16. */
struct mhc_src_stored { /* a residual row already in memory */
    const uint4 *r4;
    __device__ __forceinline__ void operator()(int64_t v, int64_t nv, uint4 r[4]) const {
#pragma unroll
        for (int s = 0; s < 4; ++s) r[s] = r4[s * nv + v];
    }
};
struct mhc_src_post { /* R_new of a seam, stored on the way (so nothing reads it back) */
    const uint4 *x4, *r4;
    uint4 *o4;
    float pc[4], cb[16];
    __device__ __forceinline__ void operator()(int64_t v, int64_t nv, uint4 r[4]) const {
        mhc_post_vec(x4, r4, v, nv, pc, cb, r);
#pragma unroll
        for (int s = 0; s < 4; ++s) o4[s * nv + v] = r[s];
    }
};
struct mhc_src_bcast { /* the first layer's embedding, its 4 copies stored when o4 is set */
    const uint4 *e4;
    uint4 *o4;
    __device__ __forceinline__ void operator()(int64_t v, int64_t nv, uint4 r[4]) const {
        const uint4 e = __ldg(e4 + v);
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            r[s] = e;
            if (o4) o4[s * nv + v] = e;
        }
    }
};

/* ---- reductions --------------------------------------------------------------------- */
static __device__ __forceinline__ float mhc_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(MHC_FULL_MASK, v, o));
    return v;
}

/* Sum over the CTA: warp trees, then the warp values in warp order by thread 0. Every
 * thread gets the total. red: >= 33 floats of shared memory. Call from all threads. */
static __device__ __forceinline__ float mhc_block_sum(float v, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = mhc_warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = red[0];
        for (int w = 1; w < nw; ++w) s = __fadd_rn(s, red[w]);
        red[32] = s;
    }
    __syncthreads();
    return red[32];
}

/* ---- gates + Sinkhorn of one token in one warp ------------------------------------------- */
static __device__ __forceinline__ float mhc_sigmoid(float z) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-z))); }

static __device__ __forceinline__ float mhc_sum4(float a, float b, float c, float d) {
    return __fadd_rn(__fadd_rn(__fadd_rn(a, b), c), d);
}

/* Lanes hold C[j][k] with e = lane & 15 = 4j + k (lanes 16..31 mirror 0..15). Sums are
 * formed from shuffled copies in index order 0..3, once per row/column, before any
 * element is divided; every lane of a row (column) forms the identical sum. */
static __device__ __forceinline__ float mhc_row_sum(float c, int j) {
    return mhc_sum4(__shfl_sync(MHC_FULL_MASK, c, 4 * j, 16), __shfl_sync(MHC_FULL_MASK, c, 4 * j + 1, 16),
                    __shfl_sync(MHC_FULL_MASK, c, 4 * j + 2, 16), __shfl_sync(MHC_FULL_MASK, c, 4 * j + 3, 16));
}
static __device__ __forceinline__ float mhc_col_sum(float c, int k) {
    return mhc_sum4(__shfl_sync(MHC_FULL_MASK, c, k, 16), __shfl_sync(MHC_FULL_MASK, c, 4 + k, 16),
                    __shfl_sync(MHC_FULL_MASK, c, 8 + k, 16), __shfl_sync(MHC_FULL_MASK, c, 12 + k, 16));
}

/* Sinkhorn's first step on lane e's element: the row softmax of the logits, then + eps
 * (the column normalisation follows). */
static __device__ __forceinline__ float mhc_sinkhorn_softmax(float L, int e, float eps) {
    const int j = e >> 2;
    const float l0 = __shfl_sync(MHC_FULL_MASK, L, 4 * j, 16), l1 = __shfl_sync(MHC_FULL_MASK, L, 4 * j + 1, 16);
    const float l2 = __shfl_sync(MHC_FULL_MASK, L, 4 * j + 2, 16), l3 = __shfl_sync(MHC_FULL_MASK, L, 4 * j + 3, 16);
    const float mx = fmaxf(fmaxf(fmaxf(l0, l1), l2), l3);
    const float ex = expf(__fsub_rn(L, mx));
    return __fadd_rn(__fdiv_rn(ex, mhc_row_sum(ex, j)), eps);
}

static __device__ __forceinline__ float mhc_sinkhorn_lane(float L, int e, float eps, int iters) {
    const int j = e >> 2, k = e & 3;
    float c = mhc_sinkhorn_softmax(L, e, eps);
    c = __fdiv_rn(c, __fadd_rn(mhc_col_sum(c, k), eps)); /* the first column normalisation */
    for (int it = 1; it < iters; ++it) {
        c = __fdiv_rn(c, __fadd_rn(mhc_row_sum(c, j), eps));
        c = __fdiv_rn(c, __fadd_rn(mhc_col_sum(c, k), eps));
    }
    return c;
}

/* The global gate inputs one lane needs besides the partials: scale[3] and base[24] (tiny
 * tensors) and, for lane 24 when the call passes one, token t's sqrsum_in. A caller loads
 * them before it waits for the partials, so that their round trip (a DRAM one when cold)
 * is not on the chain after the last partial lands. Lane l < 8: pre / post gate l; lane l:
 * Sinkhorn element l & 15. */
struct mhc_gate_coef {
    float pp_scale, pp_base, c_scale, c_base, sq_in;
};
static __device__ __forceinline__ mhc_gate_coef mhc_gate_coef_load(const float *scale, const float *base,
                                                                   const float *sqrsum_in, int64_t t) {
    const int lane = threadIdx.x & 31;
    mhc_gate_coef c;
    c.pp_scale = __ldg(scale + (lane < 4 ? 0 : 1));
    c.pp_base = __ldg(base + (lane & 7));
    c.c_scale = __ldg(scale + 2);
    c.c_base = __ldg(base + 8 + (lane & 15));
    c.sq_in = lane == 24 && sqrsum_in ? __ldg(sqrsum_in + t) : 0.0f;
    return c;
}

/* One token's gates, by all 32 lanes of a warp. raw: the 24 summed projection partials
 * (shared memory); sq: the summed squares; gc: this lane's mhc_gate_coef_load. Outputs are
 * already offset to the token; pre_out, mix_out and pre_smem may be NULL. */
static __device__ __forceinline__ void mhc_gates_warp(const float *raw, float sq, float numel, const mhc_gate_coef &gc,
                                                      float rms_eps, float pre_eps, float sinkhorn_eps, float post_mult,
                                                      int iters, float *post_out, float *comb_out, float *pre_out,
                                                      float *mix_out, float *pre_smem) {
    const int lane = threadIdx.x & 31;
    const float rms = mhc_inv_rms(sq, numel, rms_eps);
    if (mix_out && lane < 24) mix_out[lane] = __fmul_rn(raw[lane], rms);
    if (lane < 8) {
        const float z = __fmaf_rn(__fmul_rn(raw[lane], rms), gc.pp_scale, gc.pp_base);
        const float sg = mhc_sigmoid(z);
        if (lane < 4) {
            const float pre = __fadd_rn(sg, pre_eps);
            if (pre_out) pre_out[lane] = pre;
            if (pre_smem) pre_smem[lane] = pre;
        } else {
            post_out[lane - 4] = __fmul_rn(sg, post_mult);
        }
    }
    const int e = lane & 15;
    const float L = __fmaf_rn(__fmul_rn(raw[8 + e], rms), gc.c_scale, gc.c_base);
    const float c = mhc_sinkhorn_lane(L, e, sinkhorn_eps, iters);
    if (lane < 16) comb_out[lane] = c;
}

/* ---- RMSNorm of a stored bf16 row (second pass) ------------------------------------------ */
/* out[v] = bf16((yb * rn) * w) for the 8-channel vectors v = first, first + step, ...
 * in batches of MHC_NORM_BATCH vectors per thread, each loaded before any of it is
 * stored: out may be yb (the tensor-core epilogue normalises the layer input in place),
 * and with a store between two loads each load would wait for the one before (7 dependent
 * DRAM round trips per thread at H = 5120). A struct, so that the epilogue's norm CTA can
 * load its first batch before it knows rn. 5 x 128 threads = 640 vectors: H = 5120 in one. */
#define MHC_NORM_BATCH 5
struct mhc_norm_batch {
    uint4 y[MHC_NORM_BATCH], w[MHC_NORM_BATCH];
};
static __device__ __forceinline__ void mhc_norm_load(const uint4 *yb, const uint4 *w, int64_t nv, int64_t vb,
                                                     int64_t step, mhc_norm_batch &b) {
#pragma unroll
    for (int i = 0; i < MHC_NORM_BATCH; ++i) {
        const int64_t v = vb + i * step;
        if (v < nv) b.y[i] = yb[v], b.w[i] = __ldg(&w[v]);
    }
}
static __device__ __forceinline__ void mhc_norm_store(const mhc_norm_batch &b, float rn, uint4 *out, int64_t nv,
                                                      int64_t vb, int64_t step) {
#pragma unroll
    for (int i = 0; i < MHC_NORM_BATCH; ++i) {
        const int64_t v = vb + i * step;
        if (v >= nv) break;
        float yf[8], wf[8], o[8];
        mhc_unpack8(b.y[i], yf);
        mhc_unpack8(b.w[i], wf);
#pragma unroll
        for (int k = 0; k < 8; ++k) o[k] = mhc_norm_channel(yf[k], rn, wf[k]);
        dsv4_st_v4(out + v, mhc_pack8(o));
    }
}
static __device__ __forceinline__ void mhc_norm_row(const uint4 *yb, const uint4 *w, float rn, uint4 *out, int64_t nv,
                                                    int64_t first, int64_t step) {
    for (int64_t vb = first; vb < nv; vb += MHC_NORM_BATCH * step) {
        mhc_norm_batch b;
        mhc_norm_load(yb, w, nv, vb, step, b);
        mhc_norm_store(b, rn, out, nv, vb, step);
    }
}

/* ---- one token's collapse across a CTA ----------------------------------------------------- */
/* src: the token's 4 stream rows (a Src above); p: pre-mix (NULL = stream 0, an exact
 * copy); w: norm weight (NULL = write the un-normed yb); s_row: 2H bytes of shared memory
 * (norm only); red: 33 floats of shared memory. Must be called by every thread of the CTA. */
template <class Src>
static __device__ __forceinline__ void mhc_collapse_row(const Src &src, int64_t H, const float *p, const uint16_t *w,
                                                        float norm_eps, int sq_rounded, uint16_t *out, uint16_t *aux,
                                                        uint4 *s_row, float *red) {
    const int64_t nv = H / 8;
    uint4 *dst = w ? s_row : reinterpret_cast<uint4 *>(out);
    float ss = 0.0f;
#pragma unroll 2
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
        uint4 rv[4];
        src(v, nv, rv);
        float r[4][8];
#pragma unroll
        for (int s = 0; s < 4; ++s) mhc_unpack8(rv[s], r[s]);
        float y[8], yb[8], a[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float rc[4] = {r[0][i], r[1][i], r[2][i], r[3][i]};
            y[i] = p ? mhc_collapse_channel(p, rc) : rc[0];
            a[i] = mhc_aux_channel(rc);
        }
        const uint4 ybv = mhc_pack8(y);
        mhc_unpack8(ybv, yb);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float q = sq_rounded ? yb[i] : y[i];
            ss = __fmaf_rn(q, q, ss);
        }
        dst[v] = ybv;
        if (aux) reinterpret_cast<uint4 *>(aux)[v] = mhc_pack8(a);
    }
    if (!w) return;
    const float rn = mhc_inv_rms(mhc_block_sum(ss, red), (float)H, norm_eps);
    /* each thread reads back only the vectors it wrote, so no barrier is needed here */
    mhc_norm_row(s_row, reinterpret_cast<const uint4 *>(w), rn, reinterpret_cast<uint4 *>(out), nv, threadIdx.x,
                 blockDim.x);
}

#endif /* DSV4_MHC_DEVICE_CUH */
