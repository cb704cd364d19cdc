/*
 * The sparse MLA CTA engine shared by decode (fp8 records) and prefill (bf16 rows).
 *
 * Formula (include/dsv4/attention.h), per token t, head h, key rows K_j:
 *   s_j = scale * <q[t,h,:], K_j>  (512 wide);  online softmax over tiles of N = 16 keys;
 *   acc = sum_j bf16(e^(s_j - m)) K_j,  l = sum_j e^(s_j - m),  m = reference max
 *   (lazy: see Numerics below).
 *
 * Grid: one CTA per (head group of HC heads, split s, token t), flattened into
 * blockIdx.x with the head group fastest, so the CTAs that read the same rows run
 * side by side. Block: NW = WH * WD warps. Warp (wh, wd) owns heads
 * [16*MT*wh, 16*MT*(wh+1)) of the CTA and dims [wd*DW, (wd+1)*DW), DW = 512/WD:
 *   - its Q slice lives in registers as mma A fragments (MT * DW/16 * 4 regs),
 *   - its O slice lives in registers as fp32 accumulators (MT * DW/8 * 4 regs),
 *   - the K tile in shared memory serves both products: QK reads it with ldmatrix
 *     (keys = n), PV with ldmatrix.trans (keys = k), each B fragment feeding MT mmas.
 *
 * The WH warps that share a dim slice (a "slice group"; one warp except in h32w8)
 * also own that slice of every K tile: they copy it, decode it (decode) and are its
 * only readers, in QK and in PV. So a tile's arrival and the reuse of its buffer are
 * ordered inside the group (its own cp.async wait + __syncwarp, or a named barrier for
 * WH = 2), not by a CTA barrier.
 *
 * Row sources, the producer's part (Prod::start / Prod::step):
 *   decode (MlaRingRows below): a tile's 16 ids are turned into row sources once per
 *   CTA, not once per slice group. Converter lanes (RPW = 16 / NW per warp, one row each)
 *   fetch the ids of tile k by cp.async, convert them AH tiles ahead of the tile's
 *   computation (validity, the record and scale addresses; Prod::convert), store the
 *   result in a ring of AH + 1 slots in shared memory (the start also prefetches tiles
 *   2 .. AH - 1 into L2); every slice group then issues its cp.async from the slot. A slot written in [A]
 *   of tile k - AH is read in [A] of tile k - 1 (AH >= 2: barriers [B], [C] lie between)
 *   and rewritten in [A] of tile k + 1, after barrier [B] of tile k.
 *   prefill: an address is one multiply-add, cheaper than a ring slot's
 *   bookkeeping, so each slice group fetches its own ids a tile ahead and its lanes
 *   compute their rows' addresses (sparse_mla_prefill_kernel.cu).
 *
 * Per tile (two CTA barriers):
 *   [A] wait for the group's cp.async of this tile, group sync; Prod::step: issue the
 *       group's slice of the next tile into the other buffer (one tile of lookahead) and
 *       prepare the row sources of later tiles (above); decode: dequantize the group's
 *       slice of the fp8 records into the bf16 tile, group sync.
 *   [B] QK: each warp's 16*MT x N partial scores over its DW dims -> Sp[wd] (fp32), barrier.
 *   [C] softmax, rows spread over all threads (LPR lanes per head row, KPL keys each):
 *       s = scale * (Sp[0] + Sp[1] + ... + Sp[WD-1]) in that order (the unified 512-wide
 *       dot), tile max over valid keys, m' = tile max if it exceeds m by more than the slack
 *       (else m' = m), alpha = e^(m - m'),
 *       p = e^(s - m') (0 for invalid keys), l = l*alpha + sum p (fp32; butterfly sums
 *       give every lane the same bits); p -> bf16 into Ps, alpha -> smem, barrier.
 *   [D] PV: O = O * alpha + Ps * K (ldmatrix of Ps as A, ldmatrix.trans of K as B);
 *       the rescale is skipped when alpha is 1 for all 16 rows of an m tile (exact).
 * The barriers also order the CTA-wide buffers: a warp writes Sp in [B] of tile i+1 only
 * after every warp has read it in [C] of tile i, and Ps in [C] of tile i+1 only after
 * every warp has left [D] of tile i (barrier [B] of tile i+1 lies between). The key
 * flags (meta) of tile i+1 are written by group 0 in [A] of tile i, after barrier [C] of
 * tile i-1 (their last readers) and before barrier [B] of tile i+1 (their next ones).
 *
 * Epilogue: the row owners publish m, l; then either raw partials (fp32 acc, m, l) go
 * to the workspace (and, when merge CTAs follow in the same launch, one completion flag
 * per row: mla_merge.cuh), or the direct path finalises with the sink
 * (mla_softmax.cuh) and stores bf16.
 *
 * Numerics: bf16 x bf16 products accumulated in fp32 by mma.sync (QK per 128-dim
 * slice, then the slices added in fixed order); p rounded to bf16 for PV only; one
 * bf16 rounding of the output. No atomics: results are deterministic.
 * m is not the running max but a reference max that moves only when a tile's max
 * exceeds it by more than MLA_RESCALE_SLACK (lazy rescaling, as FlashAttention-4 does),
 * so most tiles skip the O rescale; the accuracy contract of attention.h holds. Every
 * p = e^(s - m) then stays <= e^slack (bf16 rounds it with the same relative error),
 * and the partials' m is that reference, which the merge's w_s = e^(m_s - M) handles
 * as it is; acc and l grow by up to e^8, which overflows only for |K| above ~1e35.
 */
#ifndef DSV4_ATTENTION_MLA_TILE_CUH
#define DSV4_ATTENTION_MLA_TILE_CUH

#include <float.h>
#include <stdint.h>

#include "attention/mla_merge.cuh"
#include "attention/mla_params.h"
#include "attention/mla_softmax.cuh"
#include "attention/sparse_mla_config.h"
#include "common/error.h"
#include "common/launch.h"
#include "prim/cp_async.cuh"
#include "prim/grid_flag.cuh"
#include "prim/mma.cuh"
#include "prim/named_barrier.cuh"

template <int HC_, int MT_, int WD_> struct MlaCfg {
    static constexpr int HC = HC_, MT = MT_, WD = WD_;
    static constexpr int N = MLA_N;
    static constexpr int WH = HC / (16 * MT);
    static constexpr int NW = WH * WD;
    static constexpr int THREADS = 32 * NW;
    static constexpr int DW = 512 / WD;
    static constexpr int KS = DW / 16; /* QK k-steps per warp          */
    static constexpr int NBO = DW / 8; /* O n-blocks per warp          */
    static constexpr int NBS = N / 8;  /* score n-blocks (keys)        */
    /* softmax lanes per head row: all threads, at most N / 2 (a lane stores bf16 pairs);
     * h16w8's 256 threads for 16 rows leave warps 4-7 out of the softmax */
    static constexpr int LPR = THREADS / HC < N / 2 ? THREADS / HC : N / 2;
    static constexpr int KPL = N / LPR; /* softmax keys per lane        */
    static constexpr int SMAX_THREADS = HC * LPR;
    static constexpr int GT = 32 * WH;             /* threads of a slice group     */
    static constexpr int TPG = GT / N;             /* its producer threads per key row */
    static constexpr int EPI_MB = MT < 2 ? MT : 2; /* epilogue m-blocks per batch: ws64's four spill */
    /* the id rows' L2 prefetch at the start (mla_prefetch_id_rows): h32w8 (8 warps of
     * 16 heads x 128 dims at the 128-register cap) spills with it */
    static constexpr bool PREFETCH_IDS = !(NW > 4 && WD == 4);
    static_assert(WH * 16 * MT == HC, "heads per CTA must be whole warp rows");
    static_assert(LPR >= 1 && LPR <= 32 && (LPR & (LPR - 1)) == 0, "softmax rows must sit inside a warp");
    static_assert(SMAX_THREADS % 32 == 0, "whole warps take part in the softmax or stay out");
    static_assert(KPL >= 2 && KPL % 2 == 0 && KPL * LPR == N, "softmax lanes store bf16 pairs");
    static_assert(TPG * N == GT, "a slice group's producer threads must cover the tile rows");
    static_assert(NBS % 2 == 0 && NBO % 2 == 0, "ldmatrix x4 loads two n-blocks");
};

/* Shared memory common to both producers; placed after the 16-byte aligned K tiles. */
template <class C> struct MlaSmemCommon {
    float sp[C::WD][C::HC][MLA_SSTR]; /* partial scores per dim slice      */
    uint16_t ps[C::HC][MLA_PSTR];     /* bf16 p, ldmatrix rows of 48 B     */
    float alpha[C::HC];
    float m[C::HC];
    float l[C::HC];
    int meta[2][MLA_N]; /* per key: 1 valid, 0 not (written by slice group 0) */
};

/* A converted row source: its address with bit 0 set when the row is invalid (it then
 * holds the list's base, mapped and never read: the zero-fill source). */
static __device__ __forceinline__ unsigned long long mla_src(const uint8_t *row) { return (unsigned long long)row; }
static __device__ __forceinline__ unsigned long long mla_src_invalid(const uint8_t *base) {
    return (unsigned long long)base | 1ull;
}
static __device__ __forceinline__ bool mla_src_valid(unsigned long long s) { return !(s & 1ull); }
static __device__ __forceinline__ const uint8_t *mla_src_ptr(unsigned long long s) {
    return (const uint8_t *)(s & ~1ull);
}

/* Which keys this CTA walks: list L, positions [begin, begin + count); t, split and
 * head_cta live here too (shared memory: registers are the scarce resource). */
struct MlaWork {
    int t, split, head_cta;
    int begin[2], count[2];
    int n;
};

static __device__ __forceinline__ MlaWork mla_work(const mla_params_t &p, int t, int s, int head_cta) {
    MlaWork w;
    w.t = t;
    w.split = s;
    w.head_cta = head_cta;
    w.n = 0;
#pragma unroll
    for (int L = 0; L < 2; ++L) {
        w.begin[L] = 0;
        w.count[L] = 0;
        if (L < p.num_lists) {
            int len = p.list[L].lens[t];
            len = len < 0 ? 0 : (len > (int)p.list[L].width ? (int)p.list[L].width : len);
            const int c = (len + p.num_splits - 1) / p.num_splits;
            const int b = min(s * c, len);
            w.begin[L] = b;
            w.count[L] = min(b + c, len) - b;
        }
        w.n += w.count[L];
    }
    return w;
}

/* Where the id behind virtual key j of this CTA lives (main list first, then extra);
 * NULL past the end. */
static __device__ __forceinline__ const int32_t *mla_key_src(const mla_params_t &p, const MlaWork &w, int j) {
    if (j >= w.n) return NULL;
    const int list = j < w.count[0] ? 0 : 1;
    const int pos = list == 0 ? w.begin[0] + j : w.begin[1] + (j - w.count[0]);
    const mla_list_params_t &L = p.list[list];
    return L.ids + (int64_t)w.t * L.stride + pos;
}
/* The id itself; -1 past the end. */
static __device__ __forceinline__ int mla_key_id(const mla_params_t &p, const MlaWork &w, int j) {
    const int32_t *src = mla_key_src(p, w, j);
    return src ? __ldg(src) : -1;
}
/* The id of key j into shared memory by cp.async (it lands with the caller's next
 * commit group), -1 past the end: an id fetched a tile early waits in shared memory,
 * not in a register, and its load is off the critical path. */
static __device__ __forceinline__ void mla_key_id_async(const mla_params_t &p, const MlaWork &w, int j, int *dst) {
    const int32_t *src = mla_key_src(p, w, j);
    if (src) dsv4_cp_async_4(dst, src);
    else *dst = -1;
}

/* Token t's id rows (every list, the whole width) into L2, issued before the lengths
 * arrive: the split's range is only known after that round trip, and without this its
 * first ids would be a second dependent DRAM round trip (the split CTAs of one token
 * prefetch the same lines; L2 keeps one copy). */
template <class C> static __device__ __forceinline__ void mla_prefetch_id_rows(const mla_params_t &p, int t) {
#pragma unroll
    for (int L = 0; L < 2; ++L) {
        if (L >= p.num_lists) break;
        const char *a = (const char *)(p.list[L].ids + (int64_t)t * p.list[L].stride);
        /* one line per thread: the first 32 * THREADS ids (4096 or more), a hint only */
        const int64_t bytes = 4 * p.list[L].width, off = 128 * (int64_t)threadIdx.x;
        if (off < bytes + 127) dsv4_prefetch_l2(a + (off < bytes ? off : bytes - 1)); /* inside the row */
    }
}

/* A thread's index in its slice group (warps wd, wd + WD, ... form group wd). */
template <class C> static __device__ __forceinline__ int mla_group_thread() {
    return (int)(threadIdx.x >> 5) / C::WD * 32 + (int)(threadIdx.x & 31);
}
/* Which list virtual key j of this CTA's walk comes from (the main list first). */
static __device__ __forceinline__ int mla_key_list(const MlaWork &w, int j) { return j < w.count[0] ? 0 : 1; }

/* threadIdx.x through an opaque read: values derived from it are recomputed where this
 * is called instead of being kept in registers (the 8-warp config, at its 128-register
 * cap, spilled such values across the tile loop). */
static __device__ __forceinline__ int mla_opaque_tid() {
    int t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return t;
}

/* Orders the threads of slice group wd (the WH warps sharing dims wd*DW ..): a warp
 * sync for one warp, otherwise named barrier 1 + wd over the group's 32*WH threads. */
template <class C> static __device__ __forceinline__ void mla_slice_sync(int wd) {
    if (C::WH == 1) __syncwarp();
    else dsv4_bar_sync(1 + wd, C::GT);
}

static __device__ __forceinline__ uint32_t mla_ld_u32(const uint16_t *p) { return *(const uint32_t *)p; }

/* Zero a block of mma accumulator fragments. */
template <int A, int B> static __device__ __forceinline__ void mla_zero(float (&x)[A][B][4]) {
#pragma unroll
    for (int a = 0; a < A; ++a)
#pragma unroll
        for (int b = 0; b < B; ++b)
#pragma unroll
            for (int i = 0; i < 4; ++i) x[a][b][i] = 0.0f;
}

/* Q of token t, heads head0 .. head0 + 16 MT - 1, dims dim0 .. dim0 + 16 KS - 1, as mma A
 * fragments: a0 = (row g, cols 2tq..), a1 = row g+8, a2/a3 = cols +8. */
template <int MT, int KS>
static __device__ __forceinline__ void mla_load_q(uint32_t (&qf)[MT][KS][4], const mla_params_t &p, int t, int head0,
                                                  int dim0, int lane) {
    const int g = lane >> 2, tq = lane & 3;
    const uint16_t *qt = p.q + (int64_t)t * p.q_st;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        /* both rows from their head index: no 64-bit 8 * q_sh held across a caller's loop */
        const uint16_t *r0 = qt + (int64_t)(head0 + 16 * mt + g) * p.q_sh + dim0 + 2 * tq;
        const uint16_t *r1 = qt + (int64_t)(head0 + 16 * mt + g + 8) * p.q_sh + dim0 + 2 * tq;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            qf[mt][ks][0] = mla_ld_u32(r0 + 16 * ks);
            qf[mt][ks][1] = mla_ld_u32(r1 + 16 * ks);
            qf[mt][ks][2] = mla_ld_u32(r0 + 16 * ks + 8);
            qf[mt][ks][3] = mla_ld_u32(r1 + 16 * ks + 8);
        }
    }
}

/* QK's B fragments of keys key0 .. key0 + 15 at dims col0 .. col0 + 15 of a K tile, x4:
 * (keys 0-7, dims +0), (keys 0-7, +8), (keys 8-15, +0), (keys 8-15, +8). */
static __device__ __forceinline__ void mla_ld_kfrag(uint32_t (&b)[4], const uint16_t *kt, int key0, int col0,
                                                    int lane) {
    const int key = key0 + (lane & 7) + ((lane >> 4) << 3);
    const int col = col0 + (((lane >> 3) & 1) << 3);
    dsv4_ldmatrix_x4(b, kt + key * MLA_KSTR + col);
}

/* [B] partial scores of this warp's heads over its DW dims -> sp (rows = CTA heads). */
template <class C>
static __device__ __forceinline__ void mla_qk(const uint32_t (&qf)[C::MT][C::KS][4], const uint16_t *kt,
                                              float (*sp)[MLA_SSTR], int hw, int dim0, int lane) {
    float sacc[C::MT][C::NBS][4];
    mla_zero(sacc);
#pragma unroll
    for (int ks = 0; ks < C::KS; ++ks) {
#pragma unroll
        for (int nbp = 0; nbp < C::NBS / 2; ++nbp) {
            uint32_t b[4];
            mla_ld_kfrag(b, kt, 16 * nbp, dim0 + 16 * ks, lane);
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt) {
                dsv4_mma_bf16_16816(sacc[mt][2 * nbp], qf[mt][ks], b, sacc[mt][2 * nbp]);
                dsv4_mma_bf16_16816(sacc[mt][2 * nbp + 1], qf[mt][ks], b + 2, sacc[mt][2 * nbp + 1]);
            }
        }
    }
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int nb = 0; nb < C::NBS; ++nb) {
            const int row = hw + 16 * mt + g, col = 8 * nb + 2 * tq;
            *(float2 *)&sp[row][col] = make_float2(sacc[mt][nb][0], sacc[mt][nb][1]);
            *(float2 *)&sp[row + 8][col] = make_float2(sacc[mt][nb][2], sacc[mt][nb][3]);
        }
}

/* [C] one head row's slice of the online softmax (LPR lanes per row, KPL keys each). */
template <class C> static __device__ __forceinline__ void mla_softmax_rows(MlaSmemCommon<C> &sm, int buf, float scale) {
    /* The running m, l of the row live in sm.m / sm.l (registers are scarce); the
     * row's lanes read them first and lane k0 == 0 writes them back after a __syncwarp. */
    if (C::SMAX_THREADS < C::THREADS && (int)threadIdx.x >= C::SMAX_THREADS) return; /* whole warps */
    const int row = threadIdx.x / C::LPR, k0 = (threadIdx.x % C::LPR) * C::KPL;
    const float m_run = sm.m[row], l_run = sm.l[row];
    float s[C::KPL];
    bool valid[C::KPL];
    float tmax = -FLT_MAX;
#pragma unroll
    for (int k = 0; k < C::KPL; ++k) {
        float acc = sm.sp[0][row][k0 + k];
#pragma unroll
        for (int d = 1; d < C::WD; ++d) acc = __fadd_rn(acc, sm.sp[d][row][k0 + k]);
        s[k] = __fmul_rn(acc, scale);
        valid[k] = sm.meta[buf][k0 + k] != 0;
        if (valid[k]) tmax = fmaxf(tmax, s[k]);
    }
#pragma unroll
    for (int off = 1; off < C::LPR; off <<= 1) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, off));
    /* Lazy rescale: the reference max m moves only when the tile exceeds it by more
     * than MLA_RESCALE_SLACK, so p <= e^slack and most tiles leave alpha at exactly 1
     * (PV then skips the O rescale). l, acc and the finalisation / merge all use the
     * same reference, so the quotient is unchanged (see the numerics note above). */
    const float m_new = mla_lazy_max(m_run, tmax);
    const float alpha = mla_rescale(m_run, m_new);
    float psum = 0.0f;
    uint32_t packed[C::KPL / 2];
#pragma unroll
    for (int k = 0; k < C::KPL; k += 2) {
        const float p0 = mla_prob(s[k], m_new, valid[k]), p1 = mla_prob(s[k + 1], m_new, valid[k + 1]);
        psum = __fadd_rn(__fadd_rn(psum, p0), p1);
        packed[k / 2] = dsv4_pack_bf16x2(p0, p1);
    }
#pragma unroll
    for (int off = 1; off < C::LPR; off <<= 1) psum = __fadd_rn(psum, __shfl_xor_sync(0xffffffffu, psum, off));
#pragma unroll
    for (int k = 0; k < C::KPL / 2; ++k) *(uint32_t *)&sm.ps[row][k0 + 2 * k] = packed[k];
    __syncwarp();
    if (k0 == 0) {
        sm.alpha[row] = alpha;
        sm.m[row] = m_new;
        sm.l[row] = mla_running_sum(l_run, alpha, psum);
    }
}

/* [D] O = O * alpha + P * K over this warp's heads and dims. */
template <class C>
static __device__ __forceinline__ void mla_pv(float (&o)[C::MT][C::NBO][4], const uint16_t *kt,
                                              const uint16_t (*ps)[MLA_PSTR], const float *alpha, int hw, int dim0,
                                              int lane) {
    const int g = lane >> 2;
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt) {
        const float a0 = alpha[hw + 16 * mt + g], a1 = alpha[hw + 16 * mt + g + 8];
        /* The lazy reference max leaves most tiles alone: skip the 4 * NBO
         * multiplies by exactly 1 (a warp-uniform branch). */
        if (__any_sync(0xffffffffu, a0 != 1.0f || a1 != 1.0f)) {
#pragma unroll
            for (int nb = 0; nb < C::NBO; ++nb) {
                o[mt][nb][0] *= a0;
                o[mt][nb][1] *= a0;
                o[mt][nb][2] *= a1;
                o[mt][nb][3] *= a1;
            }
        }
    }
    const int pl = C::NW > 4 ? mla_opaque_tid() & 31 : lane; /* see mla_opaque_tid */
#pragma unroll
    for (int kstep = 0; kstep < C::N / 16; ++kstep) {
        uint32_t pa[C::MT][4];
#pragma unroll
        for (int mt = 0; mt < C::MT; ++mt)
            dsv4_ldmatrix_x4(pa[mt], &ps[hw + 16 * mt + (pl & 15)][16 * kstep + ((pl >> 4) << 3)]);
#pragma unroll
        for (int nbp = 0; nbp < C::NBO / 2; ++nbp) {
            /* x4.trans: (keys 0-7, dims +0), (keys 8-15, +0), (keys 0-7, +8), (keys 8-15, +8) */
            const int key = 16 * kstep + (lane & 7) + (((lane >> 3) & 1) << 3);
            const int col = dim0 + 16 * nbp + ((lane >> 4) << 3);
            uint32_t b[4];
            dsv4_ldmatrix_x4_trans(b, kt + key * MLA_KSTR + col);
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt) {
                dsv4_mma_bf16_16816(o[mt][2 * nbp], pa[mt], b, o[mt][2 * nbp]);
                dsv4_mma_bf16_16816(o[mt][2 * nbp + 1], pa[mt], b + 2, o[mt][2 * nbp + 1]);
            }
        }
    }
}

/* The first of this warp's 16 * MT head rows in the CTA: the thread's epilogue rows are
 * hw + 16 * mt + g + 8 * half. The thread's geometry is read afresh (mla_opaque_tid):
 * nothing from before the tile loop has to live through it. */
template <class C> static __device__ __forceinline__ int mla_epilogue_hw() {
    return (mla_opaque_tid() >> 5) / C::WD * 16 * C::MT;
}

/* Where a warp's epilogue stages its bf16 rows (mla_epilogue, a batch of up to 2 m-blocks
 * = 32 rows at a time): rows hw .. of the two K tiles (k[2][MLA_N][MLA_KSTR], 32
 * consecutive rows), at its own dims, for producers whose tiles have that shape
 * (Prod::STAGE_OUT: prefill, decode ws32 and ws64); NULL otherwise.
 * Called after the last reads of the tiles by other warps (a barrier before the
 * epilogue); the warp's own reads are ordered by the epilogue's __syncwarp. */
template <class Prod, class C, class Smem>
static __device__ __forceinline__ uint16_t *mla_epilogue_stage(Smem &sm, int hw, int dim0) {
    if constexpr (Prod::STAGE_OUT) {
        static_assert(C::WH * 16 * C::EPI_MB <= 2 * MLA_N, "a batch of every warp's rows fits the two K tiles");
        return &sm.k[0][0][0] + hw * MLA_KSTR + dim0;
    } else {
        return NULL;
    }
}

/* The sinks of this thread's epilogue rows, loaded before the barrier that precedes
 * mla_epilogue (one round trip, waited for at that barrier; loaded inside, each row's
 * load would follow the previous row's output stores: 4 round trips per PV warp of
 * ws32). */
template <class C> struct MlaEpiSinks { mla_row_sink r[C::MT][2]; };
template <class C>
static __device__ __forceinline__ MlaEpiSinks<C> mla_epilogue_sinks(const mla_params_t &p, int head_cta) {
    MlaEpiSinks<C> s;
    const int row0 = mla_epilogue_hw<C>() + ((mla_opaque_tid() & 31) >> 2);
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half)
            s.r[mt][half] = mla_load_row_sink(p.sink, head_cta + row0 + 16 * mt + 8 * half);
    return s;
}

/* Partials or the final bf16 rows of a CTA. The bf16 rows go out directly (4-byte
 * stores: 8 rows x 16 bytes per warp instruction) or, given a staging area
 * (mla_epilogue_stage), through shared memory as 16-byte chunks (512 contiguous bytes
 * per instruction; out and both its strides are 16-byte multiples, checked by the API):
 * the 4-byte stores were a measurable share of prefill's and of decode ws32 / ws64's
 * time. */
template <class C, bool FLAGS>
static __device__ __forceinline__ void mla_epilogue(const mla_params_t &p, const float *row_m, const float *row_l,
                                                    const MlaWork &w, const float (&o)[C::MT][C::NBO][4],
                                                    const MlaEpiSinks<C> &sinks, uint16_t *stage) {
    const int tid = mla_opaque_tid(), tq = tid & 3, g = (tid & 31) >> 2;
    const int hw = mla_epilogue_hw<C>(), row0 = hw + g, dim0 = (tid >> 5) % C::WD * C::DW;
    const int head_cta = w.head_cta;
    const int64_t part_row0 = ((int64_t)w.t * p.num_splits + w.split) * p.num_heads + head_cta;
    if (p.part_acc && tid < C::HC) {
        p.part_m[part_row0 + tid] = row_m[tid];
        p.part_l[part_row0 + tid] = row_l[tid];
    }
    if (p.part_acc) {
#pragma unroll
        for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                float *dst = p.part_acc + (part_row0 + row0 + 16 * mt + 8 * half) * 512 + dim0 + 2 * tq;
#pragma unroll
                for (int nb = 0; nb < C::NBO; ++nb)
                    *(float2 *)(dst + 8 * nb) = make_float2(o[mt][nb][2 * half], o[mt][nb][2 * half + 1]);
            }
    } else {
        /* One divisor per row: the 2 * NBO quotients run 3 FFMAs each instead of
         * __fdiv_rn's inlined fast path, range check and branch, which showed in
         * prefill's profile. Same bits. Every row's finalisation first, then one
         * warp-uniform choice for all of them, so that the rows' dependent chains (shared
         * loads, exp, reciprocal, window checks) overlap instead of each running between
         * the previous row's stores and its own (two m-blocks of rows at a time). */
        constexpr int MB = C::EPI_MB;
        if (stage) __syncwarp(); /* the warp's last ldmatrix of the area */
#pragma unroll
        for (int mb = 0; mb < C::MT; mb += MB) {
            mla_final f[MB][2];
            mla_row_div rd[MB][2];
            bool fast = true;
#pragma unroll
            for (int j = 0; j < MB; ++j)
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int mt = mb + j, row = row0 + 16 * mt + 8 * half;
                    f[j][half] = mla_final_single(row_m[row], row_l[row], sinks.r[mt][half]);
                    rd[j][half] = mla_row_divisor(f[j][half].L);
                    fast = fast && rd[j][half].fast;
#pragma unroll
                    for (int nb = 0; nb < C::NBO; ++nb)
                        fast = fast && dsv4_div_in_window(__fmul_rn(f[j][half].w, o[mt][nb][2 * half])) &&
                               dsv4_div_in_window(__fmul_rn(f[j][half].w, o[mt][nb][2 * half + 1]));
                }
            fast = __all_sync(0xffffffffu, fast);
#pragma unroll
            for (int j = 0; j < MB; ++j)
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int mt = mb + j, row = row0 + 16 * mt + 8 * half;
                    uint16_t *dst =
                        stage ? stage + (16 * j + 8 * half + g) * MLA_KSTR + 2 * tq
                              : p.out + (int64_t)w.t * p.o_st + (int64_t)(head_cta + row) * p.o_sh + dim0 + 2 * tq;
                    const mla_final &fr = f[j][half];
                    if (fast) {
#pragma unroll
                        for (int nb = 0; nb < C::NBO; ++nb)
                            *(uint32_t *)(dst + 8 * nb) =
                                dsv4_pack_bf16x2(dsv4_div_fast(__fmul_rn(fr.w, o[mt][nb][2 * half]), rd[j][half].v),
                                                 dsv4_div_fast(__fmul_rn(fr.w, o[mt][nb][2 * half + 1]),
                                                               rd[j][half].v));
                    } else {
#pragma unroll
                        for (int nb = 0; nb < C::NBO; ++nb)
                            *(uint32_t *)(dst + 8 * nb) =
                                dsv4_pack_bf16x2(mla_final_apply(fr, o[mt][nb][2 * half]),
                                                 mla_final_apply(fr, o[mt][nb][2 * half + 1]));
                    }
                }
            if (stage) { /* the batch's rows: 16-byte chunks, CPR per row slice, RPI rows per warp instruction */
                constexpr int CPR = C::DW / 8, RPI = 32 / CPR;
                static_assert(RPI * CPR == 32 && (16 * MB) % RPI == 0, "whole rows per instruction");
                __syncwarp();
                const int lane = tid & 31, c = lane % CPR;
#pragma unroll
                for (int r = lane / CPR; r < 16 * MB; r += RPI) {
                    uint16_t *dst =
                        p.out + (int64_t)w.t * p.o_st + (int64_t)(head_cta + hw + 16 * mb + r) * p.o_sh + dim0 + 8 * c;
                    const uint4 v = *(const uint4 *)(stage + r * MLA_KSTR + 8 * c);
                    /* evict-first: the kernel never reads out back, L2 is for the K rows */
                    __stcs((uint4 *)dst, v);
                }
                if (mb + MB < C::MT) __syncwarp(); /* read before the next batch is staged */
            }
        }
    }
    /* partials merged in this launch: one flag per row for its merge CTA, [t, h, s] */
    if (FLAGS && p.part_flags)
        dsv4_grid_flag_publish(p.part_flags + ((int64_t)w.t * p.num_heads + head_cta + tid) * p.num_splits + w.split,
                               tid < C::HC, p.flag_tag);
}

/* A merge CTA appended to the launch (Prod::MERGE_CTAS, plan.merge == 2): rows
 * j * R .. j * R + R - 1 of the T x H (token, head) rows, R = THREADS / 128, 128
 * threads each (mla_merge.cuh). Splits in flight: all 32 in h16w4 and h32w4, 8 in the
 * 8-warp h32w8 (its register cap) and h16w8 (more measured no faster). */
template <class C> static __device__ __forceinline__ void mla_merge_cta(const mla_params_t &p) {
    constexpr int R = C::THREADS / MLA_MERGE_THREADS;
    constexpr int B = C::NW <= 4 ? 32 : 8;
    static_assert(R * MLA_MERGE_THREADS == C::THREADS, "whole merge rows per CTA");
    const int row = ((int)blockIdx.x - p.attn_ctas) * R + (int)threadIdx.x / MLA_MERGE_THREADS;
    mla_merge_row<true, B>(p, row / p.num_heads, row % p.num_heads, (int)threadIdx.x % MLA_MERGE_THREADS);
}

/* A converter lane's row: key k*16 + row of the walk, id `id`, into ring slot `slot`.
 * The list it comes from and its validity (one unsigned compare) are the engine's; the
 * row source of a valid id is the producer's (Prod::convert), an invalid one gets the
 * list's base tagged invalid (mla_src_invalid). */
template <class C, class Prod, class Smem>
static __device__ __forceinline__ void mla_convert_row(const mla_params_t &p, const MlaWork &w, int k, int row, int id,
                                                       Smem &sm, int slot, bool pf) {
    const mla_list_params_t &L = p.list[mla_key_list(w, k * C::N + row)];
    if ((uint32_t)id < L.id_limit) Prod::template convert<C>(L, (uint32_t)id, sm, slot, row, pf);
    else sm.src[slot][row] = mla_src_invalid(L.base);
}

/* Row sources converted once per CTA into a ring of AHEAD + 1 slots ("Row sources" at
 * the top; decode, whose slot -> record math is worth doing once per CTA, not once per
 * slice group). Prod provides AHEAD, convert() and issue<C, FLAGS>()
 * (slice group wd's cp.async of a ring slot into buffer `buf`; with FLAGS group 0 also
 * sets meta[buf]); its Smem the ring `src` and `ids[2][N]`. convert_first() converts
 * tiles 0 .. AH-1 (their ids by plain loads: nothing is in flight yet); convert_next(k)
 * converts tile k from the ids fetched a tile earlier and fetches those of tile k + 1.
 * The engine's start() converts the first tiles, fetches the ids of tile AH (they land
 * with tile 0) and issues tiles 0 and 1; step(i) issues tile i+1 from its slot and
 * converts tile i+AH. */
template <class Prod> struct MlaRingRows {
    template <class C> static __device__ __forceinline__ int converter_row() {
        return (int)(threadIdx.x >> 5) * (C::N / C::NW) + (int)(threadIdx.x & 31);
    }

    /* Converter row crow of tiles 0 .. AH-1. */
    template <class C, class Smem>
    static __device__ __forceinline__ void convert_first(const mla_params_t &p, const MlaWork &w, Smem &sm, int ntiles,
                                                         int crow) {
        constexpr int AH = Prod::AHEAD;
        int id[AH]; /* all loads first: one round trip, not AH (T = 1 waits for them) */
#pragma unroll
        for (int j = 0; j < AH; ++j) id[j] = j < ntiles ? mla_key_id(p, w, j * C::N + crow) : -1;
#pragma unroll
        for (int j = 0; j < AH; ++j)
            if (j < ntiles) mla_convert_row<C, Prod>(p, w, j, crow, id[j], sm, j, j >= 2);
    }

    /* Row `row` of tile k from its ids (landed with the caller's cp.async wait); then
     * the ids of tile k + 1 by cp.async. No L2 prefetch here: the tile's own cp.async,
     * issued a tile ahead, hides its DRAM latency, and the 7 prefetches per row cost the
     * converter lanes more than they saved. */
    template <class C, class Smem>
    static __device__ __forceinline__ void convert_next(const mla_params_t &p, const MlaWork &w, Smem &sm, int k,
                                                        int row) {
        mla_convert_row<C, Prod>(p, w, k, row, sm.ids[k & 1][row], sm, k % (Prod::AHEAD + 1), false);
        mla_key_id_async(p, w, (k + 1) * C::N + row, &sm.ids[(k + 1) & 1][row]);
    }

    template <class C, class Smem>
    static __device__ __forceinline__ void start(const mla_params_t &p, const MlaWork &w, Smem &sm, int ntiles,
                                                 int wd) {
        constexpr int AH = Prod::AHEAD, RPW = C::N / C::NW;
        static_assert(AH >= 2 && RPW >= 1 && RPW * C::NW == C::N, "see the row-source note at the top");
        const int crow = converter_row<C>();
        if ((threadIdx.x & 31) < RPW) {
            convert_first<C>(p, w, sm, ntiles, crow);
            mla_key_id_async(p, w, AH * C::N + crow, &sm.ids[AH & 1][crow]);
        }
        __syncthreads(); /* the ring slots of tiles 0 .. AH-1 */
        if (ntiles > 0) Prod::template issue<C, true>(sm, 0, 0, wd);
        dsv4_cp_async_commit();
        if (ntiles > 1) Prod::template issue<C, true>(sm, 1, 1, wd);
        dsv4_cp_async_commit();
    }

    template <class C, class Smem>
    static __device__ __forceinline__ void step(const mla_params_t &p, const MlaWork &w, Smem &sm, int i, int ntiles,
                                                int wd) {
        constexpr int R = Prod::AHEAD + 1;
        if (i >= 1 && i + 1 < ntiles) Prod::template issue<C, true>(sm, (i + 1) % R, (i & 1) ^ 1, wd);
        const int k = i + Prod::AHEAD;
        if ((threadIdx.x & 31) < C::N / C::NW && k < ntiles) convert_next<C>(p, w, sm, k, converter_row<C>());
    }
};

/*
 * The CTA body. Prod supplies the shared-memory layout (Prod::Smem with a member `c` of
 * MlaSmemCommon<C>), MERGE_CTAS (whether merge CTAs may follow the attention CTAs in the
 * launch), the row pipeline (start(): issue tiles 0 and 1 into the two buffers, as two
 * commit groups; step(i), in [A] of tile i after its wait: issue tile i + 1 into the
 * other buffer and prepare later tiles, slice group wd's part of each; group 0 also
 * sets meta[buf]) and tile() (make slice wd of the bf16 K tile of buffer `buf` ready,
 * sync the group, and return the tile).
 */
template <class C, class Prod> static __device__ __forceinline__ void mla_cta(const mla_params_t &p) {
    __shared__ __align__(16) typename Prod::Smem sm;
    __shared__ MlaWork w;
    if (Prod::MERGE_CTAS && p.part_flags && (int)blockIdx.x >= p.attn_ctas) {
        mla_merge_cta<C>(p);
        return;
    }
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wd = warp % C::WD, hw = (warp / C::WD) * 16 * C::MT, dim0 = wd * C::DW;
    {
        const int head_groups = p.num_heads / C::HC, rest = (int)blockIdx.x / head_groups;
        if (tid == 0)
            w = mla_work(p, rest / p.num_splits, rest % p.num_splits, ((int)blockIdx.x % head_groups) * C::HC);
    }
    if (C::PREFETCH_IDS) mla_prefetch_id_rows<C>(p, (int)blockIdx.x / (p.num_heads / C::HC) / p.num_splits);
    /* Q slice as A fragments, loaded before the barrier (independent of the lists). */
    uint32_t qf[C::MT][C::KS][4];
    {
        const int head_groups = p.num_heads / C::HC;
        const int t = (int)blockIdx.x / head_groups / p.num_splits, head_cta = ((int)blockIdx.x % head_groups) * C::HC;
        mla_load_q<C::MT, C::KS>(qf, p, t, head_cta + hw, dim0, lane);
    }
    float o[C::MT][C::NBO][4];
    mla_zero(o);

    if (tid < C::HC) { /* the running softmax state of each head row */
        sm.c.m[tid] = -FLT_MAX;
        sm.c.l[tid] = 0.0f;
    }
    __syncthreads(); /* w, m, l */

    /* Rows of tiles 0 and 1 are issued into the two buffers at once (a short split waits
     * for one round trip, not two); iteration i issues tile i + 1 (Prod::step). */
    const int ntiles = (w.n + C::N - 1) / C::N;
    Prod::template start<C>(p, w, sm, ntiles, wd);
    for (int i = 0; i < ntiles; ++i) {
        const int buf = i & 1;
        if (i == 0) dsv4_cp_async_wait<1>(); /* tile 1 may stay in flight */
        else dsv4_cp_async_wait<0>();
        mla_slice_sync<C>(wd); /* [A] */
        Prod::template step<C>(p, w, sm, i, ntiles, wd);
        dsv4_cp_async_commit();
        const uint16_t *kt = Prod::template tile<C>(sm, buf, wd, mla_group_thread<C>());
        mla_qk<C>(qf, kt, sm.c.sp[wd], hw, dim0, lane);
        __syncthreads(); /* [B] */
        mla_softmax_rows<C>(sm.c, buf, p.scale);
        __syncthreads(); /* [C] */
        mla_pv<C>(o, kt, sm.c.ps, sm.c.alpha, hw, dim0, lane);
    }

    /* Epilogue: m, l per row are in sm.c (published by the last barrier of the loop,
     * or the initial values). */
    const MlaEpiSinks<C> sinks = mla_epilogue_sinks<C>(p, w.head_cta);
    __syncthreads();
    mla_epilogue<C, Prod::MERGE_CTAS>(p, sm.c.m, sm.c.l, w, o, sinks, mla_epilogue_stage<Prod, C>(sm, hw, dim0));
}

/* One kernel per (config, producer); Bind<C> is the producer bound to a config. */
template <int HC, int MT, int WD, int MINB, template <class> class Bind>
__global__ void __launch_bounds__(MlaCfg<HC, MT, WD>::THREADS, MINB) mla_attention_kernel(mla_params_t p) {
    mla_cta<MlaCfg<HC, MT, WD>, Bind<MlaCfg<HC, MT, WD>>>(p);
}

/* Launch the kernel of `config` for producer Bind through the shared-memory gate. */
template <template <class> class Bind, bool DECODE>
static dsv4_status_t mla_launch(const char *op, int config, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
/* The engine rows of sparse_mla_config.h's table; decode-only rows only for decode. */
#define MLA_LAUNCH_CONFIG(unused, id, name, hc, mt, wd, warps, ws, dec, cps, minb)                                     \
    if constexpr (!(ws) && (DECODE || !(dec)))                                                                         \
        if (config == id) {                                                                                            \
            static int smem_cache;                                                                                     \
            DSV4_TRY(                                                                                                  \
                dsv4_launch_prepare(op, (const void *)mla_attention_kernel<hc, mt, wd, minb, Bind>, 0, &smem_cache));  \
            dsv4_launch(mla_attention_kernel<hc, mt, wd, minb, Bind>, (unsigned)ctas, MlaCfg<hc, mt, wd>::THREADS, 0,  \
                        (cudaStream_t)stream, *p);                                                                     \
            return dsv4_launch_status(op);                                                                             \
        }
    MLA_CONFIG_TABLE(MLA_LAUNCH_CONFIG, 0)
#undef MLA_LAUNCH_CONFIG
    return dsv4_fail(DSV4_STATUS_INTERNAL, op, "no kernel for config %d", config);
}

#endif
