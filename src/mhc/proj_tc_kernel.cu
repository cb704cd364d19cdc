/*
 * The tensor-core route's fn split (mhc_fn_split_kernel) and projection pass
 * (mhc_proj_tc_kernel): one pass over the residual that produces the bf16 rows the
 * projection reads and runs the projection on them with mma.sync.
 *
 * Formula, per token t and slice `split` (chunks [split*cps, (split+1)*cps)):
 *   A[t][k] = bf16 value of flat column k:  R_new = bf16(post_channel(x, R)) (POST, also
 *             stored), R (RES), or the embedding e (BCAST, stored 4 times as R_out)
 *   raw_part[split][t][m] = sum_{k in slice} A[t][k] * (hi[m][k] + lo[m][k])
 *             hi = bf16(fn), lo = bf16(fn - hi): fn to ~16 mantissa bits
 *   sq_part[split][t] = sum_{k in slice} A[t][k]^2            (the rounded values)
 *   with proj_collapse: yb = bf16(collapse(A row, pre_mix)) stored as the un-normed layer
 *   input, ss_part[split][t] = sum yb^2; aux = bf16(stream mean of the A row).
 *
 * The fn split writes hi and lo of fn once per call into the workspace ([48][K] bf16,
 * rows 0..23 hi, 24..47 lo), so the projection pass copies its B tiles with cp.async: no
 * registers, no per-CTA conversion. A call that passes fn_split (the same rows, made once
 * after loading by dsv4_mhc_fn_split, which launches the same kernel) skips the fn split
 * and the projection pass reads those rows instead.
 *
 * Projection grid (ceil(T / 32), S); 256 threads = 8 warps. A chunk is 256 K-columns: 64
 * channels of each of the 4 streams (POST, RES), or 128 columns: 128 channels of e (BCAST).
 *   Producer: thread (row = tid / 8, grp = tid % 8) owns token row and 8 channels of each
 *   stream (16 channels of e): it loads 16-byte vectors, computes the post-apply with the
 *   shared per-channel function (its token's post, comb and pre-mix come from shared
 *   memory, 32 x 28 fp32 read as 16-byte vectors), stores R_new / yb / aux with 16-byte
 *   stores, and writes its bf16 A row segment to shared memory. The 8 threads of a row
 *   cover 128 contiguous bytes of each stream, so every warp access is 4 whole 128-byte
 *   lines: 8 half lines per access (64 tokens x 32 channels per stream) would make the
 *   stores bound by L1 wavefronts rather than DRAM (docs/mhc.md, Decisions).
 *   The optional outputs (collapse with or without a pre-mix, aux) are template mode bits
 *   (MHC_TC_COLL, MHC_TC_PMIX, MHC_TC_AUX), and addresses are 32-bit offsets from the
 *   tensor bases (mhc_tc_rows), so that the seam's loop issues ~530 instead of ~750
 *   instructions per thread and chunk.
 *   MMA: warp w takes m-tile w % 2 (16 tokens) and k-quarter w / 2 of the chunk (4 k-steps;
 *   BCAST 2); per k-step one ldmatrix.x4 for A, and per n-tile (3 x 8 outputs) one
 *   ldmatrix.x4 giving hi and lo fragments, two mma.m16n8k16 into the same fp32
 *   accumulators. The four k-quarters are added through shared memory at the end, in
 *   order 0 + 1 + 2 + 3.
 * Pipeline: the next chunk's token inputs are loaded into the same registers as soon as
 *   the producer has consumed this chunk's (in flight during the barrier's wait and this
 *   chunk's mma); the token inputs of the chunk MHC_TC_PREFETCH_CHUNKS
 *   further on are prefetched into L2 at that point (mhc_tc_prefetch); the next B tile is
 *   copied by cp.async once the mma is done with this one and waited for before the
 *   next barrier, behind the next producer. Other resident CTAs (2 per SM at <= 128
 *   registers) cover the rest of the latency.
 *   Shared memory: A 32 x 264 bf16 (16,896 B) + B 48 x 264 bf16 (25,344 B), 528-byte
 *   pitch (ldmatrix conflict-free), + per-token coefficients 32 x 28 fp32 (3,584 B).
 * Numerics: post / collapse / aux are the shared functions (bit-exact with the standalone
 *   ops). The projection multiplies exact bf16 residual values by a two-term bf16 split of
 *   fn with fp32 accumulation in mma order, then adds the k-quarters; the error is
 *   ~2^-18 of sum|A fn| from the split, well inside the 1e-5 tolerance.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "mhc/gates_config.h"
#include "mhc/mhc_device.cuh"
#include "mhc/mhc_host.h"
#include "prim/cp_async.cuh"
#include "prim/mma.cuh"
#include "prim/store.cuh"

namespace {

constexpr int BM = MHC_TC_BM, KC = MHC_TC_KC, LDS = MHC_TC_LDS, NTHR = MHC_TC_THREADS, TPR = MHC_TC_TPR;
static_assert(BM * TPR == NTHR, "one thread per (token row, channel group)");
static_assert(BM == 32 && NTHR == 256, "the mma split: 8 warps = 2 m-tiles x 4 k-quarters");

/* Mode bits of an instantiation: which optional outputs the producer makes. They are
 * uniform per call; as template arguments they leave the producer without per-channel
 * branches, so that its coefficients stay in registers (run-time flags make ptxas re-read
 * them from shared memory around every branch: 52 LDS and 21 branches per chunk). */
enum { MHC_TC_COLL = 1, MHC_TC_PMIX = 2, MHC_TC_AUX = 4 };

template <int PROD> struct mhc_tc_geom {
    /* channels per chunk and stream (e's channels for BCAST), A / B columns per chunk */
    static constexpr int CW = MHC_TC_CHUNK_CHANNELS(PROD == MHC_PROD_BCAST);
    static constexpr int NCOL = PROD == MHC_PROD_BCAST ? CW : 4 * CW;
    static constexpr int CG = CW / TPR;                             /* channels per thread           */
    static constexpr int NA = PROD == MHC_PROD_BCAST ? CG / 8 : 4;  /* A-row vectors: e, or 4 streams */
    static constexpr int NV = NA + (PROD == MHC_PROD_POST ? 1 : 0); /* token-input vectors (+ x)     */
    static constexpr int KSTEPS = NCOL / 16 / 4;                    /* per warp (k-quarter)          */
    static constexpr int B_PIECES = 48 * NCOL / 8 / NTHR;           /* 16-byte B copies per thread   */
};
static_assert(mhc_tc_geom<MHC_PROD_POST>::B_PIECES * NTHR * 8 == 48 * KC, "B tile copies must split evenly");
static_assert(mhc_tc_geom<MHC_PROD_BCAST>::B_PIECES * NTHR * 8 == 48 * KC / 2, "B tile copies must split evenly");

/* One chunk's token inputs of one thread: POST x, R0..R3 | RES R0..R3 | BCAST 2 x 8 channels of e */
struct mhc_tc_in {
    uint4 v[5];
};

/* Addressing: every token-row address is the tensor's base pointer plus a 32-bit element
 * offset, the thread's row offset (token x stride + its channel group, computed once) plus
 * the chunk's column: one add and one shift-add per address, where rebuilding each address
 * from 64-bit products costs ~100 integer instructions per chunk and thread. The
 * host refuses tensors whose offsets do not fit in 32 bits (mhc_check_tc_offsets). A row
 * past T takes row T - 1's offsets, so it loads real data (its results are never stored)
 * and no path branches on validity. */
struct mhc_tc_rows {
    uint32_t ox, orr, oout, oli, oaux;
};

/* Address of the thread's 16-byte token-input vector v of a chunk: the one place mhc_tc_load
 * and mhc_tc_prefetch take their addresses from. */
template <int PROD>
__device__ __forceinline__ const uint16_t *mhc_tc_vec_ptr(const mhc_pipe_t &p, const mhc_tc_rows &r, int chunk, int v) {
    const uint32_t c0 = (uint32_t)chunk * mhc_tc_geom<PROD>::CW;
    if (PROD == MHC_PROD_BCAST) return p.res + (r.orr + c0 + 8 * v);
    if (PROD == MHC_PROD_POST && v-- == 0) return p.x + (r.ox + c0);
    return p.res + (r.orr + c0 + (uint32_t)v * (uint32_t)p.H);
}

template <int PROD>
__device__ __forceinline__ void mhc_tc_load(const mhc_pipe_t &p, const mhc_tc_rows &r, int chunk, mhc_tc_in &in) {
#pragma unroll
    for (int v = 0; v < mhc_tc_geom<PROD>::NV; ++v)
        in.v[v] = __ldcs(reinterpret_cast<const uint4 *>(mhc_tc_vec_ptr<PROD>(p, r, chunk, v)));
}

/* L2 prefetch of the token inputs mhc_tc_load will read for `chunk` (one per 16-byte load of
 * this thread), issued MHC_TC_PREFETCH_CHUNKS chunks ahead of those loads so that they hit
 * L2 instead of waiting a DRAM round trip. */
template <int PROD>
__device__ __forceinline__ void mhc_tc_prefetch(const mhc_pipe_t &p, const mhc_tc_rows &r, int chunk) {
#pragma unroll
    for (int v = 0; v < mhc_tc_geom<PROD>::NV; ++v) dsv4_prefetch_l2(mhc_tc_vec_ptr<PROD>(p, r, chunk, v));
}

/* The chunk's B tile by cp.async from fn's hi/lo rows (p.fn_hl, [48][K] bf16): row n of sB
 * holds the chunk's columns in A order, stream-major (POST, RES: column 64 s + j is K index
 * s * H + 64 * chunk + j) or e's channels (BCAST). A thread copies one 16-byte column
 * piece of rows n0, n0 + NTHR / PR, ... (PR pieces per row divide NTHR); 32-bit offsets
 * from one base keep the loop-invariant state to two registers. One commit group. */
template <int PROD>
__device__ __forceinline__ void mhc_tc_copy_b(const mhc_pipe_t &p, int chunk, int tid, uint16_t *sB) {
    using G = mhc_tc_geom<PROD>;
    constexpr int PR = G::NCOL / 8, RSTEP = NTHR / PR;
    static_assert(NTHR % PR == 0, "a thread's B pieces share one column");
    const uint32_t H = (uint32_t)p.H, K = MHC_FN_K(PROD == MHC_PROD_BCAST, H);
    const int n0 = tid / PR, col = 8 * (tid % PR);
    const uint32_t k = (uint32_t)chunk * G::CW + (PROD == MHC_PROD_BCAST ? col : (col / G::CW) * H + col % G::CW);
    const uint32_t off = (uint32_t)n0 * K + k; /* 48 K < 2^32 */
#pragma unroll
    for (int j = 0; j < G::B_PIECES; ++j)
        dsv4_cp_async_16(sB + (n0 + RSTEP * j) * LDS + col, p.fn_hl + (off + (uint32_t)(RSTEP * j) * K));
    dsv4_cp_async_commit();
}

/* Builds this thread's A row segment (bf16) from the loaded inputs, stores the op's
 * outputs for it (only for rows below T: `valid`), and accumulates sq (rounded values)
 * and ss (rounded collapse). */
template <int PROD, int MODE>
__device__ __forceinline__ void mhc_tc_produce(const mhc_pipe_t &p, const mhc_tc_rows &r, bool valid, int chunk,
                                               int grp, const float *coef, const mhc_tc_in &in, uint16_t *sArow,
                                               float &sq, float &ss) {
    constexpr bool COLL = MODE & MHC_TC_COLL, PMIX = (MODE & MHC_TC_PMIX) != 0, AUX = (MODE & MHC_TC_AUX) != 0;
    const uint32_t H = (uint32_t)p.H, c0 = (uint32_t)chunk * mhc_tc_geom<PROD>::CW;
    uint4 av[4];
    if (PROD == MHC_PROD_BCAST) {
        /* 16 channels of e: 4 stream copies, identity collapse, aux = e */
        uint16_t *ot = p.res_out ? p.res_out + (r.oout + c0) : nullptr;
#pragma unroll
        for (int q = 0; q < mhc_tc_geom<PROD>::NA; ++q) {
            av[q] = in.v[q];
            if (ot && valid) /* the gates op projects e without the copy */
#pragma unroll
                for (int s = 0; s < 4; ++s) dsv4_st_v4(ot + (s * H + 8 * q), in.v[q]);
            float e[8], a[8];
            mhc_unpack8(in.v[q], e);
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                sq = __fmaf_rn(e[i], e[i], sq);
                const float rc[4] = {e[i], e[i], e[i], e[i]};
                a[i] = mhc_aux_channel(rc);
            }
            if (COLL) {
#pragma unroll
                for (int i = 0; i < 8; ++i) ss = __fmaf_rn(e[i], e[i], ss);
                if (valid) dsv4_st_v4(p.li + (r.oli + c0 + 8 * q), in.v[q]);
            }
            if (AUX && valid) dsv4_st_v4(p.aux + (r.oaux + c0 + 8 * q), mhc_pack8(a));
        }
    } else {
        /* channel pairs (one 32-bit word of every vector) from load to packed outputs, so
         * that only a pair's floats are live: at 128 registers the 8-channel form spills */
        uint32_t aw[4][4], yw[4], xw[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
#pragma unroll
            for (int s = 0; s < 4; ++s) {
                if (PROD == MHC_PROD_POST) aw[s][q] = mhc_word(in.v[1 + s], q);
                else aw[s][q] = mhc_word(in.v[s], q);
            }
            if (PROD == MHC_PROD_POST) {
                const uint32_t xq = mhc_word(in.v[0], q);
                float o[2][4];
#pragma unroll
                for (int u = 0; u < 2; ++u) {
                    float rc[4];
#pragma unroll
                    for (int s = 0; s < 4; ++s) rc[s] = u ? mhc_bf16_hi(aw[s][q]) : mhc_bf16_lo(aw[s][q]);
                    mhc_post_channel(coef, coef + 4, u ? mhc_bf16_hi(xq) : mhc_bf16_lo(xq), rc, o[u]);
                }
#pragma unroll
                for (int s = 0; s < 4; ++s) aw[s][q] = mhc_pack2(o[0][s], o[1][s]); /* the stored R_new */
            }
            float y[2], a[2];
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                float rc[4];
#pragma unroll
                for (int s = 0; s < 4; ++s) {
                    rc[s] = u ? mhc_bf16_hi(aw[s][q]) : mhc_bf16_lo(aw[s][q]);
                    sq = __fmaf_rn(rc[s], rc[s], sq);
                }
                if (COLL) y[u] = PMIX ? mhc_collapse_channel(coef + 20, rc) : rc[0];
                if (AUX) a[u] = mhc_aux_channel(rc);
            }
            if (COLL) {
                yw[q] = mhc_pack2(y[0], y[1]);
                ss = __fmaf_rn(mhc_bf16_hi(yw[q]), mhc_bf16_hi(yw[q]),
                               __fmaf_rn(mhc_bf16_lo(yw[q]), mhc_bf16_lo(yw[q]), ss));
            }
            if (AUX) xw[q] = mhc_pack2(a[0], a[1]);
            /* aux leaves in two 8-byte halves: holding all four words to the end spills
             * (POST with collapse, pre-mix and aux sits at the 128-register cap) */
            if (AUX && (q & 1) && valid) dsv4_st_v2(p.aux + (r.oaux + c0 + 2 * (q - 1)), xw[q - 1], xw[q]);
        }
#pragma unroll
        for (int s = 0; s < 4; ++s) av[s] = make_uint4(aw[s][0], aw[s][1], aw[s][2], aw[s][3]);
        if (valid) {
            if (PROD == MHC_PROD_POST) {
#pragma unroll
                for (int s = 0; s < 4; ++s) dsv4_st_v4(p.res_out + (r.oout + c0 + s * H), av[s]);
            }
            if (COLL) dsv4_st_v4(p.li + (r.oli + c0), yw[0], yw[1], yw[2], yw[3]);
        }
    }
    /* A row segment: streams at column s * 64 (POST, RES), or 16 channels at 16 * grp (BCAST) */
#pragma unroll
    for (int q = 0; q < mhc_tc_geom<PROD>::NA; ++q) {
        const int col =
            PROD == MHC_PROD_BCAST ? mhc_tc_geom<PROD>::CG * grp + 8 * q : mhc_tc_geom<PROD>::CW * q + 8 * grp;
        *reinterpret_cast<uint4 *>(sArow + col) = av[q];
    }
}

/* This warp's k-steps of the chunk: m-tile mt, k-quarter kq. */
template <int PROD>
__device__ __forceinline__ void mhc_tc_mma(const uint16_t *sA, const uint16_t *sB, int mt, int kq, int lane,
                                           float acc[3][4]) {
#pragma unroll
    for (int kk = 0; kk < mhc_tc_geom<PROD>::KSTEPS; ++kk) {
        const int kb = (kq * mhc_tc_geom<PROD>::KSTEPS + kk) * 16;
        uint32_t a[4];
        dsv4_ldmatrix_x4(a, sA + (mt * 16 + (lane & 15)) * LDS + kb + (lane >> 4) * 8);
#pragma unroll
        for (int nt = 0; nt < 3; ++nt) {
            /* lanes 0-15: hi rows (kb, kb+8), lanes 16-31: lo rows -> b[0..1] hi, b[2..3] lo */
            uint32_t b[4];
            dsv4_ldmatrix_x4(b, sB + ((lane >> 4) * 24 + nt * 8 + (lane & 7)) * LDS + kb + ((lane >> 3) & 1) * 8);
            dsv4_mma_bf16_16816(acc[nt], a, b, acc[nt]);
            dsv4_mma_bf16_16816(acc[nt], a, b + 2, acc[nt]);
        }
    }
}

} // namespace

/* The fn split: fn [24][K] fp32 -> hi / lo bf16 rows [48][K] (hi = bf16(fn),
 * lo = bf16(fn - hi), the difference exact in fp32). mhc_pack2 (cvt.rn.bf16x2.f32) gives the bits of
 * dsv4_f32_to_bf16, NaN -> 0x7FFF and subnormals kept, and __fsub_rn does not flush
 * subnormals, so dsv4_mhc_fn_split_ref is bit-exact with this kernel. A thread converts
 * MHC_FN_SPLIT_VECS float4 a grid apart, all loads issued first, so that at K = 20480 120
 * CTAs hold the whole of fn in flight in one round trip. */
constexpr int MHC_FN_SPLIT_VECS = 4;
__global__ void __launch_bounds__(256)
    mhc_fn_split_kernel(const float *__restrict__ fn, uint16_t *__restrict__ hl, uint32_t K) {
    const uint32_t n4 = 6 * K, stride = gridDim.x * blockDim.x; /* 24 K / 4 float4 */
    const uint32_t i0 = blockIdx.x * blockDim.x + threadIdx.x;
    float4 f[MHC_FN_SPLIT_VECS];
#pragma unroll
    for (int j = 0; j < MHC_FN_SPLIT_VECS; ++j)
        if (i0 + j * stride < n4) f[j] = __ldg(reinterpret_cast<const float4 *>(fn) + i0 + j * stride);
#pragma unroll
    for (int j = 0; j < MHC_FN_SPLIT_VECS; ++j) {
        const uint32_t i = 4 * (i0 + j * stride);
        if (i >= 24 * K) break;
        const uint32_t h01 = mhc_pack2(f[j].x, f[j].y), h23 = mhc_pack2(f[j].z, f[j].w);
        const uint32_t l01 = mhc_pack2(__fsub_rn(f[j].x, mhc_bf16_lo(h01)), __fsub_rn(f[j].y, mhc_bf16_hi(h01)));
        const uint32_t l23 = mhc_pack2(__fsub_rn(f[j].z, mhc_bf16_lo(h23)), __fsub_rn(f[j].w, mhc_bf16_hi(h23)));
        const uint32_t n = i / K, k = i % K; /* K % 4 == 0: the 4 values share a row */
        dsv4_st_v2(hl + n * K + k, h01, h23);
        dsv4_st_v2(hl + (24 + n) * K + k, l01, l23);
    }
}

template <int PROD, int MODE>
__global__ void __launch_bounds__(MHC_TC_THREADS, MHC_TC_MIN_CTAS) mhc_proj_tc_kernel(const mhc_pipe_t p) {
    using G = mhc_tc_geom<PROD>;
    __shared__ __align__(16) uint16_t sA[BM * LDS];
    __shared__ __align__(16) uint16_t sB[48 * LDS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int row = tid / TPR, grp = tid % TPR;
    const int64_t T = p.T, H = p.H, S = p.plan.splits;
    const int64_t t = (int64_t)blockIdx.x * BM + row;
    const bool valid = t < T;
    mhc_tc_rows rw;
    {
        const uint32_t tr = (uint32_t)(valid ? t : T - 1);
        const uint32_t cg = G::CG * grp;
        rw.ox = tr * (uint32_t)p.x_stride + cg;
        rw.orr = tr * (uint32_t)p.res_stride + cg;
        rw.oout = tr * (uint32_t)p.res_out_stride + cg;
        rw.oli = tr * (uint32_t)p.li_stride + cg;
        rw.oaux = tr * (uint32_t)p.aux_stride + cg;
    }
    const int64_t split = blockIdx.y;
    constexpr bool COLL = MODE & MHC_TC_COLL, PMIX = (MODE & MHC_TC_PMIX) != 0;

    /* chunk indices fit in 32 bits (H <= MHC_MAX_HIDDEN); int keeps the loop in one register */
    const int nchunks = (int)(H / G::CW), cps = nchunks / (int)S;
    const int c_begin = (int)split * cps;
    /* The i-th chunk of this CTA. Token blocks start their slice at different chunks
     * (rotation by blockIdx.x), so that CTAs of the same slice do not read the same B rows
     * of fn at the same time. */
    const int rot = (int)(blockIdx.x % (unsigned)cps);
    auto chunk_at = [&](int i) {
        const int j = i + rot;
        return c_begin + (j >= cps ? j - cps : j);
    };
    mhc_tc_copy_b<PROD>(p, chunk_at(0), tid, sB);

    /* per token row: post[4], comb[16], pre_mix[4] */
    __shared__ __align__(16) float s_coef[BM][MHC_TC_COEF_PITCH];
    for (int i = tid; i < BM * 24; i += NTHR) {
        const int r = i / 24, q = i % 24;
        const int64_t tr = (int64_t)blockIdx.x * BM + r;
        float v = 0.0f;
        if (tr < T) {
            if (q < 4) v = PROD == MHC_PROD_POST ? __ldg(p.post_in + 4 * tr + q) : 0.0f;
            else if (q < 20) v = PROD == MHC_PROD_POST ? __ldg(p.comb_in + 16 * tr + q - 4) : 0.0f;
            else if (COLL && PMIX) v = __ldg(p.pre_mix + 4 * tr + q - 20);
        }
        s_coef[r][q] = v;
    }
    const float *coef = s_coef[row];
    __syncthreads();

    const int mt = warp & 1, kq = warp >> 1;
    float acc[3][4];
#pragma unroll
    for (int nt = 0; nt < 3; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
    float sq = 0.0f, ss = 0.0f;

    mhc_tc_in in;
    mhc_tc_load<PROD>(p, rw, chunk_at(0), in);
    for (int d = 1; d <= MHC_TC_PREFETCH_CHUNKS; ++d)
        if (d < cps) mhc_tc_prefetch<PROD>(p, rw, chunk_at(d));
    for (int i = 0; i < cps; ++i) {
        const bool more = i + 1 < cps;
        const int c = chunk_at(i);
        mhc_tc_produce<PROD, MODE>(p, rw, valid, c, grp, coef, in, sA + row * LDS, sq, ss);
        /* the producer is done with this chunk's inputs, so the next chunk's leave now and
         * their round trip also covers the barrier's wait */
        if (more) mhc_tc_load<PROD>(p, rw, chunk_at(i + 1), in);
        dsv4_cp_async_wait<0>(); /* this chunk's B tile */
        __syncthreads();
        if (i + 1 + MHC_TC_PREFETCH_CHUNKS < cps)
            mhc_tc_prefetch<PROD>(p, rw, chunk_at(i + 1 + MHC_TC_PREFETCH_CHUNKS));
        mhc_tc_mma<PROD>(sA, sB, mt, kq, lane, acc);
        __syncthreads();
        if (more) mhc_tc_copy_b<PROD>(p, chunk_at(i + 1), tid, sB);
    }

    /* sq, ss: the TPR threads of a token row are adjacent lanes */
#pragma unroll
    for (int o = 1; o < TPR; o <<= 1) {
        sq = __fadd_rn(sq, __shfl_xor_sync(MHC_FULL_MASK, sq, o));
        ss = __fadd_rn(ss, __shfl_xor_sync(MHC_FULL_MASK, ss, o));
    }
    float *ws_raw = p.ws, *ws_sq = p.ws + S * T * 24, *ws_ss = ws_sq + S * T;
    if (valid && grp == 0) {
        ws_sq[split * T + t] = sq;
        if (COLL) ws_ss[split * T + t] = ss;
    }

    /* k-quarters 1..3 hand their accumulators to k-quarter 0 through the (now free) A tile */
    float *xch = reinterpret_cast<float *>(sA);
    if (kq > 0) {
#pragma unroll
        for (int nt = 0; nt < 3; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) xch[(((kq - 1) * 2 + mt) * 32 + lane) * 12 + nt * 4 + i] = acc[nt][i];
    }
    __syncthreads();
    if (kq == 0) {
        const int g = lane >> 2, tq = lane & 3;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int64_t tr = (int64_t)blockIdx.x * BM + mt * 16 + g + 8 * half;
            if (tr >= T) continue;
            float *dst = ws_raw + (split * T + tr) * 24 + 2 * tq;
#pragma unroll
            for (int nt = 0; nt < 3; ++nt) {
                float v[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int i = nt * 4 + 2 * half + e;
                    v[e] = acc[nt][2 * half + e];
#pragma unroll
                    for (int q = 0; q < 3; ++q) v[e] = __fadd_rn(v[e], xch[((q * 2 + mt) * 32 + lane) * 12 + i]);
                }
                *reinterpret_cast<float2 *>(dst + nt * 8) = make_float2(v[0], v[1]);
            }
        }
    }
}

template <int PROD, int MODE> static dsv4_status_t mhc_launch_proj_tc_mode(const mhc_pipe_t *p, cudaStream_t s) {
    static const char *op = "mhc_proj_tc";
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mhc_proj_tc_kernel<PROD, MODE>, 0, &smem_cache));
    dim3 grid((unsigned)((p->T + BM - 1) / BM), (unsigned)p->plan.splits);
    dsv4_launch(mhc_proj_tc_kernel<PROD, MODE>, grid, MHC_TC_THREADS, 0, s, *p);
    return dsv4_launch_status(op);
}

/* The instantiations a call can need: collapse (with or without a pre-mix) or none, aux or
 * not; the broadcast embedding has no pre-mix (its collapse is the identity). */
template <int PROD> static dsv4_status_t mhc_launch_proj_tc_prod(const mhc_pipe_t *p, cudaStream_t s) {
    const int coll =
        p->proj_collapse ? (PROD != MHC_PROD_BCAST && p->pre_mix ? MHC_TC_COLL | MHC_TC_PMIX : MHC_TC_COLL) : 0;
    switch (coll | (p->aux ? MHC_TC_AUX : 0)) {
    case 0: return mhc_launch_proj_tc_mode<PROD, 0>(p, s);
    case MHC_TC_COLL: return mhc_launch_proj_tc_mode<PROD, MHC_TC_COLL>(p, s);
    case MHC_TC_AUX: return mhc_launch_proj_tc_mode<PROD, MHC_TC_AUX>(p, s);
    case MHC_TC_COLL | MHC_TC_AUX: return mhc_launch_proj_tc_mode<PROD, MHC_TC_COLL | MHC_TC_AUX>(p, s);
    case MHC_TC_COLL | MHC_TC_PMIX:
        return mhc_launch_proj_tc_mode < PROD,
               PROD == MHC_PROD_BCAST ? MHC_TC_COLL : MHC_TC_COLL | MHC_TC_PMIX > (p, s);
    default:
        return mhc_launch_proj_tc_mode < PROD,
               PROD == MHC_PROD_BCAST ? MHC_TC_COLL | MHC_TC_AUX : MHC_TC_COLL | MHC_TC_PMIX | MHC_TC_AUX > (p, s);
    }
}

/* The fn split, for dsv4_mhc_fn_split and for a tensor-core call without fn_split.
 * K <= 4 x 16384, so 24 K fits the kernel's 32-bit indices. */
extern "C" dsv4_status_t mhc_launch_fn_split(const float *fn, uint16_t *hl, int64_t K, dsv4_stream_t stream) {
    static const char *op = "mhc_fn_split";
    static int smem_cache;
    const uint32_t k = (uint32_t)K;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mhc_fn_split_kernel, 0, &smem_cache));
    const uint32_t ctas = (6 * k + 256 * MHC_FN_SPLIT_VECS - 1) / (256 * MHC_FN_SPLIT_VECS);
    dsv4_launch(mhc_fn_split_kernel, ctas, 256, 0, (cudaStream_t)stream, fn, hl, k);
    return dsv4_launch_status(op);
}

extern "C" dsv4_status_t mhc_launch_proj_tc(const mhc_pipe_t *p, dsv4_stream_t stream) {
    cudaStream_t s = (cudaStream_t)stream;
    const int64_t cw = MHC_TC_CHUNK_CHANNELS(p->prod == MHC_PROD_BCAST);
    if (p->plan.splits < 1 || (p->H / cw) % p->plan.splits != 0)
        return dsv4_fail(DSV4_STATUS_INTERNAL, "mhc_proj_tc", "split count %d does not divide %lld chunks",
                         (int)p->plan.splits, (long long)(p->H / cw));
    switch (p->prod) {
    case MHC_PROD_POST: return mhc_launch_proj_tc_prod<MHC_PROD_POST>(p, s);
    case MHC_PROD_RES: return mhc_launch_proj_tc_prod<MHC_PROD_RES>(p, s);
    default: return mhc_launch_proj_tc_prod<MHC_PROD_BCAST>(p, s);
    }
}
