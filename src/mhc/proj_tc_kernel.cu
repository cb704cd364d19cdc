/*
 * K1, tensor-core route (spec/mhc.md 6.3): one pass over the residual that produces the
 * bf16 rows the projection reads and runs the projection on them with mma.sync.
 *
 * Formula, per token t and slice `split` (chunks [split*cps, (split+1)*cps)):
 *   A[t][k] = bf16 value of flat column k:  R_new = bf16(post_channel(x, R)) (POST, also
 *             stored), R (RES), or the embedding e (BCAST, stored 4 times as R_out)
 *   raw_part[split][t][m] = sum_{k in slice} A[t][k] * (hi[m][k] + lo[m][k])
 *             hi = bf16(fn), lo = bf16(fn - hi): fn to ~16 mantissa bits
 *   sq_part[split][t] = sum_{k in slice} A[t][k]^2            (the rounded values)
 *   with collapse_k1: yb = bf16(collapse(A row, pre_mix)) stored as the un-normed layer
 *   input, ss_part[split][t] = sum yb^2; aux = bf16(stream mean of the A row).
 *
 * Grid (ceil(T / 32), S); 128 threads = 4 warps. A chunk is 128 K-columns: 32 channels of
 * each of the 4 streams (POST, RES) or 128 channels of e (BCAST).
 *   Loads: cp.async (16 bytes each, 4-5 per thread) of the chunk's A rows (R or e; 64
 *   contiguous bytes per token and stream) and, for POST, its x rows into a 3-stage ring
 *   of shared-memory tiles, issued 2 chunks ahead; nothing of the residual passes through
 *   registers before it is needed. The fn chunk (24 x 128 fp32, 6 float4 per thread) is
 *   loaded into registers one chunk ahead (from L2).
 *   Producer: thread (row = tid / 4, grp = tid % 4) owns token row and 8 channels of each
 *   stream (32 channels of e): it reads its 16-byte vectors from the stage, computes the
 *   post-apply with the shared per-channel function (its token's post, comb and pre-mix
 *   come from shared memory, 32 x 25 fp32), stores R_new / yb / aux with 16-byte stores,
 *   and (POST) writes R_new over R in the stage, which is then the mma's A tile. The fn
 *   chunk is split into hi/lo bf16 and stored N-major.
 *   MMA: warp w takes m-tile w % 2 (16 tokens) and k-steps 4*(w/2) .. +3 of the chunk;
 *   per k-step one ldmatrix.x4 for A, and per n-tile (3 x 8 outputs) one ldmatrix.x4
 *   giving hi and lo fragments, two mma.m16n8k16 into the same fp32 accumulators.
 *   The two k-halves are added through shared memory at the end (half 0 + half 1).
 * Pipeline, per chunk i: wait for stage i, barrier (stage i visible to all; every warp is
 *   past mma(i-1), so stage i-1 and the B tile are free), issue chunk i+2 into stage i-1,
 *   produce(i) + hi/lo(i), load fn(i+1), barrier, mma(i). Two barriers per chunk as in v3,
 *   but 4 CTAs per SM (<= 128 registers, 47.4 KB of shared memory on the H200's 228 KB)
 *   with 2 chunks each in flight instead of 2 CTAs with 1: v3 measured 25 % occupancy and
 *   68 % of cycles with no eligible warp (docs/mhc.md).
 *   Shared memory: 3 x (A 32 x 136 bf16 = 8,704 B [+ x 32 x 32 bf16 = 2,048 B, POST])
 *   + B 2 x 24 x 136 bf16 (13,056 B), 272-byte pitch (ldmatrix conflict-free), + per-token
 *   coefficients 32 x 25 fp32 (3,200 B): 48,512 B for POST, 42,368 B otherwise.
 * Numerics: post / collapse / aux are the shared functions (bit-exact with the standalone
 *   ops). The projection multiplies exact bf16 residual values by a two-term bf16 split of
 *   fn with fp32 accumulation in mma order, then adds the k-halves; the error is
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

namespace {

constexpr int BM = MHC_TC_BM, KC = MHC_TC_KC, LDS = MHC_TC_LDS, NTHR = MHC_TC_THREADS, NST = MHC_TC_STAGES;
constexpr int FN_F4 = 24 * KC / 4 / NTHR; /* float4 of the fn chunk per thread: 6 */
static_assert(FN_F4 * 4 * NTHR == 24 * KC, "fn chunk must split evenly over the threads");
static_assert(BM * 4 == NTHR, "one thread per (token row, 8-channel group)");
static_assert(BM == 32 && NTHR == 128, "the mma split assumes 2 m-tiles x 2 k-halves = 4 warps");

template <int PROD> struct tc_geom {
    static constexpr int CW = PROD == MHC_PROD_BCAST ? KC : KC / 4; /* channels per chunk */
    static constexpr int A_SEGS = BM * KC / 8;                      /* 16-byte copies of the A rows */
    static constexpr int X_SEGS = PROD == MHC_PROD_POST ? BM * KC / 4 / 8 : 0; /* ... of the x rows */
    /* one stage: the A tile [BM][LDS], then (POST) the x tile [BM][KC/4] */
    static constexpr int STAGE = BM * LDS + (PROD == MHC_PROD_POST ? BM * KC / 4 : 0); /* bf16 */
};

/* Issues the cp.async copies of chunk `chunk` into stage `st` (one commit group per call,
 * made by the caller). A segment seg of row r is flat K-column 8 * seg of the chunk, i.e.
 * stream seg / 4, channels c0 + 8 * (seg % 4) (POST, RES) or channels c0 + 8 * seg
 * (BCAST), at A column 8 * seg either way. Rows past T are zero-filled from row 0. */
template <int PROD>
__device__ __forceinline__ void tc_issue(const mhc_pipe_t &p, int64_t m0, int64_t chunk, int tid, uint16_t *st) {
    using G = tc_geom<PROD>;
    constexpr int SEGS = KC / 8, ROWS_PER_PASS = NTHR / SEGS; /* 16 segments, 8 rows */
    static_assert(G::A_SEGS % NTHR == 0 && G::X_SEGS % NTHR == 0, "copies must split evenly");
    const int64_t H = p.H, c0 = chunk * G::CW;
    /* every pass of a thread copies the same segment of another row */
    const int seg = tid % SEGS;
    const int64_t col = PROD == MHC_PROD_BCAST ? c0 + 8 * seg : (seg / 4) * H + c0 + 8 * (seg % 4);
#pragma unroll
    for (int j = 0; j < G::A_SEGS / NTHR; ++j) {
        const int r = tid / SEGS + ROWS_PER_PASS * j;
        const bool ok = m0 + r < p.T;
        dsv4_cp_async_16_zfill(st + r * LDS + 8 * seg, p.res + (ok ? m0 + r : m0) * p.res_stride + col, ok);
    }
    if (PROD == MHC_PROD_POST) { /* x: 4 segments per row, one pass */
        static_assert(G::X_SEGS == 0 || G::X_SEGS == NTHR, "one x copy per thread");
        const int r = tid / 4, q = tid % 4;
        const bool ok = m0 + r < p.T;
        dsv4_cp_async_16_zfill(st + BM * LDS + r * (KC / 4) + 8 * q, p.x + (ok ? m0 + r : m0) * p.x_stride + c0 + 8 * q,
                               ok);
    }
}

/* This thread's share of the fn chunk (L2-resident, read by every CTA). */
template <int PROD>
__device__ __forceinline__ void tc_load_fn(const mhc_pipe_t &p, int64_t chunk, int tid, float4 f[FN_F4]) {
    const int64_t H = p.H, c0 = chunk * tc_geom<PROD>::CW, K = PROD == MHC_PROD_BCAST ? H : 4 * H;
    const int k = 4 * (tid % 32); /* pass j: row n = tid / 32 + 4 j, same k */
    const float *src = p.fn + (tid / 32) * K + (PROD == MHC_PROD_BCAST ? c0 + k : (k / 32) * H + c0 + (k % 32));
#pragma unroll
    for (int j = 0; j < FN_F4; ++j) f[j] = __ldg(reinterpret_cast<const float4 *>(src + 4 * j * K));
}

/* fn chunk -> hi/lo bf16 tiles, N-major (row n holds the chunk's 128 K values). */
__device__ __forceinline__ void tc_store_b(const float4 f[FN_F4], int tid, uint16_t *sB) {
    static_assert(NTHR == 128 && KC == 128, "pass j of a thread is row tid / 32 + 4 j, column 4 (tid % 32)");
#pragma unroll
    for (int j = 0; j < FN_F4; ++j) {
        const int n = tid / 32 + 4 * j, k = 4 * (tid % 32);
        const uint32_t h01 = mhc_pack2(f[j].x, f[j].y), h23 = mhc_pack2(f[j].z, f[j].w);
        /* fn - hi is exact in fp32 */
        const uint32_t l01 = mhc_pack2(__fsub_rn(f[j].x, mhc_bf16_lo(h01)), __fsub_rn(f[j].y, mhc_bf16_hi(h01)));
        const uint32_t l23 = mhc_pack2(__fsub_rn(f[j].z, mhc_bf16_lo(h23)), __fsub_rn(f[j].w, mhc_bf16_hi(h23)));
        *reinterpret_cast<uint2 *>(sB + n * LDS + k) = make_uint2(h01, h23);
        *reinterpret_cast<uint2 *>(sB + (24 + n) * LDS + k) = make_uint2(l01, l23);
    }
}

/* Reads this thread's values of the chunk from stage `st`, stores the op's outputs for
 * them, accumulates sq (rounded values) and ss (rounded collapse), and (POST) replaces
 * its R values in the stage by R_new, the values the projection reads. Each thread
 * rewrites only what it read, so no barrier separates the two. Rows past T compute on
 * the stage's zero fill and store nothing to global memory. */
template <int PROD>
__device__ __forceinline__ void tc_produce(const mhc_pipe_t &p, int64_t t, bool valid, int64_t chunk, int row,
                                           int grp, const float *coef, bool collapse, bool identity, uint16_t *st,
                                           float &sq, float &ss) {
    const int64_t H = p.H, c0 = chunk * tc_geom<PROD>::CW;
    uint16_t *sArow = st + row * LDS;
    if constexpr (PROD == MHC_PROD_BCAST) {
        /* 32 channels of e at 32 * grp: 4 stream copies, identity collapse, aux = e */
        if (!valid) return;
        const int64_t h0 = c0 + 32 * grp;
        uint16_t *ot = p.res_out ? p.res_out + t * p.res_out_stride + h0 : nullptr;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const uint4 v = *reinterpret_cast<const uint4 *>(sArow + 32 * grp + 8 * q);
            if (p.res_out) /* the gates op projects e without the copy */
#pragma unroll
                for (int s = 0; s < 4; ++s) *reinterpret_cast<uint4 *>(ot + s * H + 8 * q) = v;
            float e[8], a[8];
            mhc_unpack8(v, e);
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                sq = __fmaf_rn(e[i], e[i], sq);
                const float rc[4] = {e[i], e[i], e[i], e[i]};
                a[i] = mhc_aux_channel(rc);
            }
            if (collapse) {
#pragma unroll
                for (int i = 0; i < 8; ++i) ss = __fmaf_rn(e[i], e[i], ss);
                *reinterpret_cast<uint4 *>(p.li + t * p.li_stride + h0 + 8 * q) = v;
            }
            if (p.aux) *reinterpret_cast<uint4 *>(p.aux + t * p.aux_stride + h0 + 8 * q) = mhc_pack8(a);
        }
    } else {
    /* POST, RES: two passes of 4 channels, cc = 16 hh + 4 grp .. + 3 of the chunk's 32, so
     * that the 4 threads of a row store 32 contiguous bytes per stream and instruction and
     * only one pass's values are live (at 128 registers, 8 channels at once spilled).
     * Channel pairs (one 32-bit word per stream) go from load to packed output. */
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
        const int cc = 16 * hh + 4 * grp;
        uint32_t aw[4][2], yw[2], xw[2], xv[2];
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const uint2 v = *reinterpret_cast<const uint2 *>(sArow + 32 * s + cc);
            aw[s][0] = v.x, aw[s][1] = v.y;
        }
        if (PROD == MHC_PROD_POST) {
            const uint2 v = *reinterpret_cast<const uint2 *>(st + BM * LDS + row * (KC / 4) + cc);
            xv[0] = v.x, xv[1] = v.y;
        }
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            if (PROD == MHC_PROD_POST) {
                float o[2][4];
#pragma unroll
                for (int u = 0; u < 2; ++u) {
                    float rc[4];
#pragma unroll
                    for (int s = 0; s < 4; ++s) rc[s] = u ? mhc_bf16_hi(aw[s][q]) : mhc_bf16_lo(aw[s][q]);
                    mhc_post_channel(coef, coef + 4, u ? mhc_bf16_hi(xv[q]) : mhc_bf16_lo(xv[q]), rc, o[u]);
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
                /* uniform branches: the seam benchmarked without aux skips its arithmetic */
                if (collapse) y[u] = identity ? rc[0] : mhc_collapse_channel(coef + 20, rc);
                if (p.aux) a[u] = mhc_aux_channel(rc);
            }
            if (collapse) {
                yw[q] = mhc_pack2(y[0], y[1]);
                ss = __fmaf_rn(mhc_bf16_hi(yw[q]), mhc_bf16_hi(yw[q]),
                               __fmaf_rn(mhc_bf16_lo(yw[q]), mhc_bf16_lo(yw[q]), ss));
            }
            if (p.aux) xw[q] = mhc_pack2(a[0], a[1]);
        }
        const int64_t h0 = c0 + cc;
        if (PROD == MHC_PROD_POST) {
#pragma unroll
            for (int s = 0; s < 4; ++s)
                *reinterpret_cast<uint2 *>(sArow + 32 * s + cc) = make_uint2(aw[s][0], aw[s][1]);
            if (valid)
#pragma unroll
                for (int s = 0; s < 4; ++s)
                    *reinterpret_cast<uint2 *>(p.res_out + t * p.res_out_stride + s * H + h0) =
                        make_uint2(aw[s][0], aw[s][1]);
        }
        if (valid && collapse) *reinterpret_cast<uint2 *>(p.li + t * p.li_stride + h0) = make_uint2(yw[0], yw[1]);
        if (valid && p.aux) *reinterpret_cast<uint2 *>(p.aux + t * p.aux_stride + h0) = make_uint2(xw[0], xw[1]);
    }
    }
}

/* This warp's 4 k-steps of the chunk: m-tile mt, k-half kh. */
__device__ __forceinline__ void tc_mma(const uint16_t *sA, const uint16_t *sB, int mt, int kh, int lane,
                                       float acc[3][4]) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
        const int k0 = (kh * 4 + kk) * 16;
        uint32_t a[4];
        dsv4_ldmatrix_x4(a, sA + (mt * 16 + (lane & 15)) * LDS + k0 + (lane >> 4) * 8);
#pragma unroll
        for (int nt = 0; nt < 3; ++nt) {
            /* lanes 0-15: hi rows (k0, k0+8), lanes 16-31: lo rows -> b[0..1] hi, b[2..3] lo */
            uint32_t b[4];
            dsv4_ldmatrix_x4(b, sB + ((lane >> 4) * 24 + nt * 8 + (lane & 7)) * LDS + k0 + ((lane >> 3) & 1) * 8);
            dsv4_mma_bf16_16816(acc[nt], a, b, acc[nt]);
            dsv4_mma_bf16_16816(acc[nt], a, b + 2, acc[nt]);
        }
    }
}

} // namespace

template <int PROD>
__global__ void __launch_bounds__(MHC_TC_THREADS, PROD == MHC_PROD_POST ? MHC_TC_MIN_CTAS_POST : MHC_TC_MIN_CTAS)
mhc_proj_tc_kernel(const mhc_pipe_t p) {
    using G = tc_geom<PROD>;
    __shared__ __align__(16) uint16_t s_stage[NST * G::STAGE];
    __shared__ __align__(16) uint16_t sB[2 * 24 * LDS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int row = tid >> 2, grp = tid & 3;
    const int64_t T = p.T, H = p.H, S = p.plan.splits;
    const int64_t m0 = (int64_t)blockIdx.x * BM, t = m0 + row;
    const bool valid = t < T;
    const int64_t split = blockIdx.y;
    const bool collapse = p.collapse_k1 != 0, identity = p.pre_mix == nullptr;
    /* 32-bit: a 64-bit division is a call, whose saved registers spilled at 128 */
    const int cps = (int)(H / G::CW) / p.plan.splits;
    const int64_t c_begin = split * cps;
    /* Step i works on chunk c_begin + (i + rot) % cps: the row blocks of a slice start at
     * different chunks, so that the CTAs do not all read the same 12 KB of fn at the same
     * time (with S = 1 at T = 8192 the first version had all 256 CTAs on one fn chunk and
     * ran the gates op at 25 % of copy). The order inside a slice is the kernel's
     * (spec 3.1); it depends only on (T, H) and the block. */
    const int rot = (int)(blockIdx.x % (unsigned)cps);
    const auto chunk = [&](int i) { return c_begin + (i + rot < cps ? i + rot : i + rot - cps); };

    /* the first NST - 1 chunks leave before anything else: one commit group per stage */
#pragma unroll
    for (int i = 0; i < NST - 1; ++i) {
        if (i < cps) tc_issue<PROD>(p, m0, chunk(i), tid, s_stage + i * G::STAGE);
        dsv4_cp_async_commit();
    }
    float4 f[FN_F4];
    tc_load_fn<PROD>(p, chunk(0), tid, f);

    /* per token row: post[4], comb[16], pre_mix[4] (pitch 25: conflict-free row reads);
     * ordered before the first produce by the loop's first barrier */
    __shared__ float s_coef[BM][25];
    for (int i = tid; i < BM * 24; i += NTHR) {
        const int r = i / 24, q = i % 24;
        const int64_t tr = m0 + r;
        float v = 0.0f;
        if (tr < T) {
            if (q < 4) v = PROD == MHC_PROD_POST ? __ldg(p.post_in + 4 * tr + q) : 0.0f;
            else if (q < 20) v = PROD == MHC_PROD_POST ? __ldg(p.comb_in + 16 * tr + q - 4) : 0.0f;
            else if (collapse && !identity) v = __ldg(p.pre_mix + 4 * tr + q - 20);
        }
        s_coef[r][q] = v;
    }
    const float *coef = s_coef[row];

    const int mt = warp & 1, kh = warp >> 1;
    float acc[3][4];
#pragma unroll
    for (int nt = 0; nt < 3; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
    /* The mma accumulates in fp32 with the tensor cores' own (not round-to-nearest)
     * alignment, so its error grows with the chain length: every MHC_TC_FLUSH_CHUNKS chunks
     * the accumulators are added into `tot` (IEEE adds) and restart from 0. Unsplit
     * (S = 1, 160 chunks at T = 8192) the first version's gates missed the 1e-5 check. */
    float tot[3][4];
#pragma unroll
    for (int nt = 0; nt < 3; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) tot[nt][i] = 0.0f;
    float sq = 0.0f, ss = 0.0f;

    for (int i = 0, st_cur = 0; i < cps; ++i, st_cur = st_cur == NST - 1 ? 0 : st_cur + 1) {
        /* committed groups: NST - 1 + i; chunk i's is complete when <= NST - 2 remain */
        dsv4_cp_async_wait<NST - 2>();
        __syncthreads(); /* stage i visible to all; every warp is past mma(i - 1) */
        /* stage (i + NST - 1) % NST = (i - 1) % NST: the one mma(i - 1) has left */
        if (i + NST - 1 < cps)
            tc_issue<PROD>(p, m0, chunk(i + NST - 1), tid,
                           s_stage + (st_cur == 0 ? NST - 1 : st_cur - 1) * G::STAGE);
        dsv4_cp_async_commit(); /* possibly empty: keeps the group count uniform */
        uint16_t *st = s_stage + st_cur * G::STAGE;
        tc_store_b(f, tid, sB); /* before the producer: f is dead where registers peak */
        tc_produce<PROD>(p, t, valid, chunk(i), row, grp, coef, collapse, identity, st, sq, ss);
        if (i + 1 < cps) tc_load_fn<PROD>(p, chunk(i + 1), tid, f);
        __syncthreads(); /* A (R_new) and B tiles complete */
        tc_mma(st, sB, mt, kh, lane, acc);
        if ((i + 1) % MHC_TC_FLUSH_CHUNKS == 0 || i + 1 == cps)
#pragma unroll
            for (int nt = 0; nt < 3; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) tot[nt][e] = __fadd_rn(tot[nt][e], acc[nt][e]), acc[nt][e] = 0.0f;
    }

    /* sq, ss: the 4 threads of a token row are adjacent lanes */
    sq = __fadd_rn(sq, __shfl_xor_sync(MHC_FULL_MASK, sq, 1));
    sq = __fadd_rn(sq, __shfl_xor_sync(MHC_FULL_MASK, sq, 2));
    ss = __fadd_rn(ss, __shfl_xor_sync(MHC_FULL_MASK, ss, 1));
    ss = __fadd_rn(ss, __shfl_xor_sync(MHC_FULL_MASK, ss, 2));
    float *ws_raw = p.ws, *ws_sq = p.ws + S * T * 24, *ws_ss = ws_sq + S * T;
    if (valid && grp == 0) {
        ws_sq[split * T + t] = sq;
        if (collapse) ws_ss[split * T + t] = ss;
    }

    /* k-half 1 hands its accumulators to k-half 0 through the B tile, once every warp is
     * past its last mma (every real copy has completed: only empty groups are pending) */
    __syncthreads();
    float *xch = reinterpret_cast<float *>(sB);
    if (kh == 1) {
#pragma unroll
        for (int nt = 0; nt < 3; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) xch[(mt * 32 + lane) * 12 + nt * 4 + i] = tot[nt][i];
    }
    __syncthreads();
    if (kh == 0) {
        const int g = lane >> 2, tq = lane & 3;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int64_t tr = m0 + mt * 16 + g + 8 * half;
            if (tr >= T) continue;
            float *dst = ws_raw + (split * T + tr) * 24 + 2 * tq;
#pragma unroll
            for (int nt = 0; nt < 3; ++nt) {
                const float v0 = __fadd_rn(tot[nt][2 * half], xch[(mt * 32 + lane) * 12 + nt * 4 + 2 * half]);
                const float v1 = __fadd_rn(tot[nt][2 * half + 1], xch[(mt * 32 + lane) * 12 + nt * 4 + 2 * half + 1]);
                *reinterpret_cast<float2 *>(dst + nt * 8) = make_float2(v0, v1);
            }
        }
    }
}

template <int PROD> static dsv4_status_t launch(const mhc_pipe_t *p, cudaStream_t s) {
    static const char *op = "mhc_proj_tc";
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mhc_proj_tc_kernel<PROD>, 0, &smem_cache));
    dim3 grid((unsigned)((p->T + BM - 1) / BM), (unsigned)p->plan.splits);
    mhc_proj_tc_kernel<PROD><<<grid, MHC_TC_THREADS, 0, s>>>(*p);
    return dsv4_launch_status(op);
}

extern "C" dsv4_status_t mhc_launch_proj_tc(const mhc_pipe_t *p, dsv4_stream_t stream) {
    cudaStream_t s = (cudaStream_t)stream;
    const int64_t cw = p->prod == MHC_PROD_BCAST ? KC : KC / 4;
    if (p->plan.splits < 1 || (p->H / cw) % p->plan.splits != 0)
        return dsv4_fail(DSV4_STATUS_INTERNAL, "mhc_proj_tc", "split count %d does not divide %lld chunks",
                         (int)p->plan.splits, (long long)(p->H / cw));
    switch (p->prod) {
    case MHC_PROD_POST: return launch<MHC_PROD_POST>(p, s);
    case MHC_PROD_RES: return launch<MHC_PROD_RES>(p, s);
    default: return launch<MHC_PROD_BCAST>(p, s);
    }
}
