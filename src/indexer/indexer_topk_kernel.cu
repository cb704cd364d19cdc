/*
 * indexer_logits and indexer_topk kernels: the lightning indexer's logits on tensor cores,
 * materialized (idx_logits_kernel) or fused with the top-k selection (idx_topk_pass_a,
 * idx_topk_pass_b), reading keys straight from the paged cache.
 *
 * Formula (include/dsv4/indexer.h): logit[t, j] = sk_j * sum_h w[t, h] * relu(q8[t, h] . k_j),
 * columns j < n_t of the row's request; the selection keeps the first topk columns by
 * (order key descending, j ascending) and writes them in ascending j.
 *
 * Tile (shared by both operators, so their logits have the same bits): a CTA of 4 warps
 * scores up to 4 rows of one request against 64 consecutive states of one page (page_tokens
 * is a multiple of 64). The states' 8,192 code bytes and 256 scale bytes arrive by cp.async
 * into one of two stages while the other is scored. MMA m16n8k16 (f16 in, f32 accumulate):
 * heads are M (a warp owns a 32-head slice of one row: 2 m-tiles, its A fragments held in
 * 64 registers for the whole pass), keys are N (8 n-tiles per tile, split among the warps
 * that share a row), the 128 dims are the reduction. The dims are permuted consistently on
 * both sides (any permutation gives the same products): k-step s of lane (g, t) holds dims
 * 64*(s/4) + 16t + 4*(s%4) + {0, 1 | 2, 3}, so one 16-byte load gives four k-steps of a
 * key or a head. Key rows are stored with 16-byte chunk c at c ^ 4*(key & 1): the 8 lanes of
 * an LDS.128 phase (2 keys x 4 chunks) hit 8 distinct bank groups.
 *
 * Numerics: e4m3 -> fp16 by shifting (value * 2^-8, exact, subnormals included), so every
 * product is exact and carries 2^-16, restored exactly on the fp32 accumulator before the
 * ReLU. The tensor core's fp32 accumulation order is the hardware's (within the header's
 * tolerance). Epilogue per key column: relu(acc * 2^16) times w[t, h] accumulated with
 * __fmaf_rn over the lane's 4 heads in a fixed order, then an xor butterfly over the 8
 * lane groups (every lane ends with the same bits), one partial per 32-head slice in
 * shared memory; the logit is (slice 0 [+ slice 1]) * sk_j. NaN codes (0x7F / 0xFF) are
 * flagged per query row and per key and give NaN; a tile whose page entry is out of range
 * gives -inf.
 *
 * indexer_topk pass A (one CTA per (row group, column split), grid-stride): each row of the
 * group keeps a buffer of (order key, split-local column) pairs with a running threshold
 * theta; a tile appends the columns whose key exceeds theta, in ascending order (warp
 * ballot). When a buffer could not take another tile, the CTA selects its top topk in
 * place (radix select on the key, 4 passes of 8 bits, then a stable compaction that keeps
 * the first ties in column order) and theta becomes the topk-th key: a later column with
 * a key equal to theta has a higher column and loses its tie. At the split's end the
 * top min(topk, count) pairs go to the workspace in ascending column order, -1-padded.
 * Pass B (one CTA per row): radix select over the splits' pairs (in ascending column order
 * already), the same stable compaction straight into the output row. The selected set is
 * the same for every split count and tile size because the order is a strict total order.
 * Short rows (n_t <= topk) skip pass A and are written by pass B. In candidate mode 1, pass
 * A also writes each row's block scores (max key of 8 columns, the last block pinned) to
 * the workspace, and pass B selects the candidate blocks from them the same way.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "indexer/indexer_common.h"
#include "indexer/indexer_config.h"
#include "indexer/indexer_math.h"
#include "prim/cp_async.cuh"
#include "prim/fp8.cuh"
#include "prim/mma.cuh"

#define NT_PER_TILE (IDX_TILE_KEYS / 8)
#define WARPS (IDX_TOPK_THREADS / 32)

typedef struct {
    const uint8_t *q8;
    const float *w;
    const int64_t *pos;
    const int32_t *req;
    const uint8_t *valid;
    const int32_t *bt;
    const uint8_t *cache;
    int64_t rows, heads, slices, ratio, num_reqs, bt_stride, P, page_stride, num_pages, col_cap;
    int64_t group_rows, groups;
    /* indexer_topk */
    int32_t *topk, *cand;
    uint2 *pairs;
    uint32_t *scores;
    int32_t *lists, *meta; /* mode 2: each row's sorted unique blocks; (blocks, |E_t|) per row */
    int64_t K, topk_stride, cap, splits, split_len, mode, C, cand_stride, score_stride;
    /* indexer_logits */
    float *out;
    int64_t out_cols, out_stride, chunks;
} idx_prm_t;

/* Shared memory of the tile: two stages of codes and scales, the slice partials, flags. */
typedef struct __align__(16) {
    uint8_t codes[2][IDX_TILE_KEYS * DSV4_INDEXER_HEAD_DIM];
    float scale[2][IDX_TILE_KEYS];
    float part[IDX_TOPK_MAX_ROWS][IDX_TILE_KEYS]; /* [row slot * slices + slice][key]        */
    uint8_t knan[IDX_TILE_KEYS];                  /* key has a NaN code                      */
    uint8_t bvalid[2][IDX_TILE_KEYS / 8];         /* the 8-key block's page entry is in range */
    /* sparse tiles: the blocks' page bases and first states, per stage (the next tile's are
     * written while threads may still read this one's: no barrier between two issues) */
    const uint8_t *bsrc[2][IDX_TILE_KEYS / 8];
    int64_t bq[2][IDX_TILE_KEYS / 8];
    int64_t row[IDX_TOPK_MAX_ROWS], ncols[IDX_TOPK_MAX_ROWS];
    int qnan[IDX_TOPK_MAX_ROWS];
    int nact;
}
tile_smem_t;

/* n_t of row t, 0 for an invalid row. */
static __device__ __forceinline__ int64_t row_cols(const idx_prm_t &p, int64_t t) {
    if (p.valid && !p.valid[t]) return 0;
    const int32_t r = p.req[t];
    if (r < 0 || r >= p.num_reqs) return 0;
    return idx_row_cols(p.pos[t], p.ratio, p.col_cap);
}

/* Issue the cp.async copies of the 64-state tile starting at column c of request `req`
 * into `stage` (one commit group per call). */
static __device__ __forceinline__ void tile_issue(const idx_prm_t &p, tile_smem_t &sm, int32_t req, int64_t c,
                                                  int stage) {
    const int32_t page = __ldg(p.bt + (int64_t)req * p.bt_stride + c / p.P);
    const bool ok = page >= 0 && page < p.num_pages;
    const uint8_t *base = p.cache + (ok ? (int64_t)page * p.page_stride : 0);
    const int64_t q0 = c % p.P;
    const uint8_t *codes = base + q0 * DSV4_INDEXER_HEAD_DIM;
    for (int ch = threadIdx.x; ch < IDX_TILE_KEYS * 8; ch += IDX_TOPK_THREADS) {
        const int n = ch / 8, c16 = ch % 8;
        dsv4_cp_async_16_zfill(sm.codes[stage] + n * 128 + ((c16 ^ ((n & 1) << 2)) * 16), codes + ch * 16, ok);
    }
    if (threadIdx.x < IDX_TILE_KEYS / 4)
        dsv4_cp_async_16_zfill(&sm.scale[stage][threadIdx.x * 4], base + p.P * 128 + q0 * 4 + threadIdx.x * 16, ok);
    if (threadIdx.x < IDX_TILE_KEYS / 8) sm.bvalid[stage][threadIdx.x] = ok;
    dsv4_cp_async_commit();
}

/* A sparse tile: 8 blocks of 8 states, block b = the (c / 8 + b)-th entry of the sorted
 * candidate list (entries past `nlist` are empty). A block is 1,024 contiguous code bytes
 * and 32 scale bytes of one page (P is a multiple of 8). */
static __device__ __forceinline__ void tile_issue_blocks(const idx_prm_t &p, tile_smem_t &sm, int32_t req,
                                                         const int32_t *list, int64_t nlist, int64_t c, int stage) {
    if (threadIdx.x < IDX_TILE_KEYS / 8) {
        const int64_t e = c / 8 + threadIdx.x;
        int64_t g = 0;
        int32_t page = -1;
        if (e < nlist) g = list[e], page = __ldg(p.bt + (int64_t)req * p.bt_stride + 8 * g / p.P);
        const bool ok = page >= 0 && page < p.num_pages;
        sm.bsrc[stage][threadIdx.x] = p.cache + (ok ? (int64_t)page * p.page_stride : 0);
        sm.bq[stage][threadIdx.x] = ok ? 8 * g % p.P : 0;
        sm.bvalid[stage][threadIdx.x] = ok;
    }
    __syncthreads();
    for (int ch = threadIdx.x; ch < IDX_TILE_KEYS * 8; ch += IDX_TOPK_THREADS) {
        const int b = ch / 64, n = ch / 8, c16 = ch % 8;
        const uint8_t *src = sm.bsrc[stage][b] + sm.bq[stage][b] * DSV4_INDEXER_HEAD_DIM + (ch % 64) * 16;
        dsv4_cp_async_16_zfill(sm.codes[stage] + n * 128 + ((c16 ^ ((n & 1) << 2)) * 16), src, sm.bvalid[stage][b]);
    }
    if (threadIdx.x < IDX_TILE_KEYS / 4) {
        const int b = threadIdx.x / 2;
        const uint8_t *src = sm.bsrc[stage][b] + p.P * 128 + sm.bq[stage][b] * 4 + (threadIdx.x % 2) * 16;
        dsv4_cp_async_16_zfill(&sm.scale[stage][threadIdx.x * 4], src, sm.bvalid[stage][b]);
    }
    dsv4_cp_async_commit();
}

/* A warp's share of the tile: its row slot, 32-head slice and n-tiles. */
typedef struct {
    int unit, slot, slice, nt0, ntn;
    uint32_t qa[2][8][4]; /* A fragments: [m-tile][k-step][reg] */
    float w[2][2];        /* w of heads g and g + 8 of each m-tile */
} warp_role_t;

static __device__ __forceinline__ void role_setup(const idx_prm_t &p, const tile_smem_t &sm, warp_role_t &r) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int units = sm.nact * (int)p.slices, wpu = units == 1 ? 4 : (units == 2 ? 2 : 1);
    r.unit = warp / wpu;
    if (r.unit >= units) {
        r.unit = -1;
        return;
    }
    r.slot = r.unit / (int)p.slices, r.slice = r.unit % (int)p.slices;
    r.ntn = NT_PER_TILE / wpu, r.nt0 = (warp % wpu) * r.ntn;
    const int64_t row = sm.row[r.slot];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int64_t h = r.slice * 32 + mt * 16 + g + 8 * hh;
            r.w[mt][hh] = __ldg(p.w + row * p.heads + h);
            const uint4 *src = reinterpret_cast<const uint4 *>(p.q8 + (row * p.heads + h) * DSV4_INDEXER_HEAD_DIM);
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                const uint4 v = __ldg(src + 4 * u + t);
                const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    uint32_t f[2];
                    dsv4_e4m3x4_raw_f16(words[i], f);
                    r.qa[mt][4 * u + i][hh] = f[0];     /* a[0] / a[1]: dims +0, +1 */
                    r.qa[mt][4 * u + i][2 + hh] = f[1]; /* a[2] / a[3]: dims +2, +3 */
                }
            }
        }
}

/* MMA and epilogue of the warp's n-tiles of `stage`: partial head sums into sm.part and the
 * keys' NaN flags into sm.knan. */
static __device__ __forceinline__ void tile_score(tile_smem_t &sm, const warp_role_t &r, int stage) {
    if (r.unit < 0) return;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    for (int nt = r.nt0; nt < r.nt0 + r.ntn; ++nt) {
        const int n = nt * 8 + g;
        const uint8_t *krow = sm.codes[stage] + n * 128;
        float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
        uint32_t nanb = 0;
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const uint4 v = *reinterpret_cast<const uint4 *>(krow + (((4 * u + t) ^ ((n & 1) << 2)) * 16));
            const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                uint32_t b[2];
                dsv4_e4m3x4_raw_f16(words[i], b);
                nanb |= dsv4_e4m3x4_nan_bits(words[i]);
                dsv4_mma_f16_16816(acc[0], r.qa[0][4 * u + i], b, acc[0]);
                dsv4_mma_f16_16816(acc[1], r.qa[1][4 * u + i], b, acc[1]);
            }
        }
        /* key n's flag: the OR over its 4 lanes t */
        nanb |= __shfl_xor_sync(0xffffffffu, nanb, 1);
        nanb |= __shfl_xor_sync(0xffffffffu, nanb, 2);
        if (t == 0) sm.knan[n] = nanb != 0;
        /* columns 2t, 2t + 1: heads g, g + 8 of both m-tiles, in a fixed order */
        float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
            s0 = __fmaf_rn(idx_relu(acc[mt][0] * 65536.0f), r.w[mt][0], s0);
            s1 = __fmaf_rn(idx_relu(acc[mt][1] * 65536.0f), r.w[mt][0], s1);
            s0 = __fmaf_rn(idx_relu(acc[mt][2] * 65536.0f), r.w[mt][1], s0);
            s1 = __fmaf_rn(idx_relu(acc[mt][3] * 65536.0f), r.w[mt][1], s1);
        }
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) {
            s0 = __fadd_rn(s0, __shfl_xor_sync(0xffffffffu, s0, o));
            s1 = __fadd_rn(s1, __shfl_xor_sync(0xffffffffu, s1, o));
        }
        if (g == 0) sm.part[r.unit][nt * 8 + 2 * t] = s0, sm.part[r.unit][nt * 8 + 2 * t + 1] = s1;
    }
}

/* The logit of row slot `slot`, key kk of `stage` (after tile_score and a barrier). */
static __device__ __forceinline__ float tile_logit(const idx_prm_t &p, const tile_smem_t &sm, int slot, int kk,
                                                   int stage) {
    if (!sm.bvalid[stage][kk / 8]) return -__int_as_float(0x7f800000);
    if (sm.qnan[slot] || sm.knan[kk]) return __int_as_float(0x7fffffff);
    float s = sm.part[slot * p.slices][kk];
    if (p.slices == 2) s = __fadd_rn(s, sm.part[slot * 2 + 1][kk]);
    return __fmul_rn(s, sm.scale[stage][kk]);
}

/* Warp `slot` flags a query row with a NaN code (dims of every head). */
static __device__ __forceinline__ void flag_q_nan(const idx_prm_t &p, tile_smem_t &sm) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp >= sm.nact) return;
    const uint4 *q = reinterpret_cast<const uint4 *>(p.q8 + sm.row[warp] * p.heads * DSV4_INDEXER_HEAD_DIM);
    uint32_t f = 0;
    for (int64_t i = lane; i < p.heads * 8; i += 32) {
        const uint4 v = __ldg(q + i);
        f |= dsv4_e4m3x4_nan_bits(v.x) | dsv4_e4m3x4_nan_bits(v.y) | dsv4_e4m3x4_nan_bits(v.z) |
             dsv4_e4m3x4_nan_bits(v.w);
    }
    const unsigned any = __ballot_sync(0xffffffffu, f != 0);
    if (lane == 0) sm.qnan[warp] = any != 0;
}

/* The tile loop over columns [lo, hi) (multiples of 64 apart from hi), each tile brought in
 * by issue(c, stage): after a tile is scored, consume(stage, c) runs on every thread, then
 * the barrier after it. Set-up (rows, nact, qnan) must be visible before the call. */
template <class Issue, class Consume>
static __device__ __forceinline__ void tile_loop(const idx_prm_t &p, tile_smem_t &sm, Issue issue, int64_t lo,
                                                 int64_t hi, Consume consume) {
    warp_role_t role;
    role_setup(p, sm, role);
    const int64_t ntiles = (hi - lo + IDX_TILE_KEYS - 1) / IDX_TILE_KEYS;
    if (ntiles > 0) issue(lo, 0);
    for (int64_t i = 0; i < ntiles; ++i) {
        const int stage = (int)(i & 1);
        if (i + 1 < ntiles) {
            issue(lo + (i + 1) * IDX_TILE_KEYS, stage ^ 1);
            dsv4_cp_async_wait<1>();
        } else {
            dsv4_cp_async_wait<0>();
        }
        __syncthreads();
        tile_score(sm, role, stage);
        __syncthreads();
        consume(stage, lo + i * IDX_TILE_KEYS);
        __syncthreads();
    }
}

/* The next sub-pass of a row group: the pending rows (a thread-uniform bit mask) of the
 * lowest pending row's request go together into the row slots; returns that request, or
 * -1 when no row is left. */
static __device__ __forceinline__ int32_t next_subpass(const idx_prm_t &p, tile_smem_t &sm, int64_t first,
                                                       unsigned &pending) {
    __syncthreads(); /* the previous sub-pass's readers of the slots are done */
    if (!pending) return -1;
    const int lead = __ffs(pending) - 1;
    const int32_t req = __ldg(p.req + first + lead);
    int nact = 0;
    for (int i = lead; i < p.group_rows; ++i)
        if ((pending >> i) & 1u && __ldg(p.req + first + i) == req) {
            if (threadIdx.x == 0) sm.row[nact] = first + i, sm.ncols[nact] = row_cols(p, first + i);
            ++nact;
            pending &= ~(1u << i);
        }
    if (threadIdx.x == 0) sm.nact = nact;
    __syncthreads();
    flag_q_nan(p, sm);
    __syncthreads();
    return req;
}

/* =============================== indexer_logits ==================================== */
__global__ void __launch_bounds__(IDX_TOPK_THREADS) idx_logits_kernel(const idx_prm_t p) {
    __shared__ tile_smem_t sm;
    const float ninf = -__int_as_float(0x7f800000);
    for (int64_t cta = blockIdx.x; cta < p.groups * p.chunks; cta += gridDim.x) {
        const int64_t grp = cta / p.chunks, first = grp * p.group_rows;
        const int64_t c0 = cta % p.chunks * IDX_LOGITS_CHUNK;
        const int64_t c1 = min(c0 + IDX_LOGITS_CHUNK, p.out_cols);
        unsigned pending = 0;
        for (int i = 0; i < p.group_rows && first + i < p.rows; ++i) {
            const int64_t n = row_cols(p, first + i);
            /* -inf beyond the row's columns (disjoint from what the tiles write) */
            float *o = p.out + (first + i) * p.out_stride;
            for (int64_t j = max(c0, n) + threadIdx.x; j < c1; j += IDX_TOPK_THREADS) o[j] = ninf;
            if (n > c0) pending |= 1u << i;
        }
        int32_t req;
        while ((req = next_subpass(p, sm, first, pending)) >= 0) {
            int64_t hi = c0;
            for (int s = 0; s < sm.nact; ++s) hi = max(hi, min(sm.ncols[s], c1));
            auto issue = [&](int64_t c, int stage) { tile_issue(p, sm, req, c, stage); };
            tile_loop(p, sm, issue, c0, hi, [&](int stage, int64_t c) {
                for (int e = threadIdx.x; e < sm.nact * IDX_TILE_KEYS; e += IDX_TOPK_THREADS) {
                    const int s = e / IDX_TILE_KEYS, kk = e % IDX_TILE_KEYS;
                    const int64_t j = c + kk;
                    if (j < min(sm.ncols[s], c1)) p.out[sm.row[s] * p.out_stride + j] = tile_logit(p, sm, s, kk, stage);
                }
            });
        }
    }
}

/* ============================ selection helpers (CTA-wide) ========================== */
/* Radix select: the k-th largest of the n keys get(i) (k <= n): returns the key T and
 * *need, the number of keys equal to T among the first k in (key desc, position asc)
 * order. hist: 256 words; ex: 8 words of scratch. Every thread calls it. */
template <class Get>
static __device__ __forceinline__ uint32_t radix_kth(Get get, int64_t n, int64_t k, uint32_t *hist, uint32_t *ex,
                                                     int64_t *need) {
    uint32_t prefix = 0, mask = 0;
    int64_t rem = k;
    const int lane = threadIdx.x % 32;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += IDX_TOPK_THREADS) hist[b] = 0;
        __syncthreads();
        for (int64_t i = threadIdx.x; i < n; i += IDX_TOPK_THREADS) {
            const uint32_t key = get(i);
            if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x < 32) { /* lane l: bins 255 - 8l down to 248 - 8l */
            uint32_t local = 0;
            for (int b = 0; b < 8; ++b) local += hist[255 - 8 * lane - b];
            uint32_t incl = local;
            for (int o = 1; o < 32; o <<= 1) {
                const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o) incl += v;
            }
            const int64_t excl = (int64_t)incl - local;
            if (excl < rem && rem <= (int64_t)incl) {
                int64_t c = excl;
                for (int b = 0; b < 8; ++b) {
                    const uint32_t h = hist[255 - 8 * lane - b];
                    if (c + h >= rem) {
                        ex[0] = 255 - 8 * lane - b, ex[1] = (uint32_t)(rem - c);
                        break;
                    }
                    c += h;
                }
            }
        }
        __syncthreads();
        prefix |= ex[0] << shift, mask |= 255u << shift, rem = ex[1];
        __syncthreads();
    }
    *need = rem;
    return prefix;
}

/* Stable compaction: for i < n in order, with (key, payload) = get(i), keep i when key > T,
 * or key == T among the first `need` such; put(dest, payload) for the kept ones, dest = rank
 * among the kept. A round reads all its entries before any write, so put may write in
 * place (dest <= i). ex: 8 words. */
template <class Get, class Put>
static __device__ __forceinline__ void keep_top(Get get, Put put, int64_t n, uint32_t T, int64_t need, uint32_t *ex) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const unsigned lt = (1u << lane) - 1u;
    int64_t ties_before = 0, out = 0;
    for (int64_t base = 0; base < n; base += IDX_TOPK_THREADS) {
        const int64_t i = base + threadIdx.x;
        const uint2 e = i < n ? get(i) : make_uint2(0u, 0u);
        const bool have = i < n, gt = have && e.x > T, tie = have && e.x == T;
        const unsigned tm = __ballot_sync(0xffffffffu, tie);
        if (lane == 0) ex[warp] = __popc(tm);
        __syncthreads();
        int64_t rank = ties_before + __popc(tm & lt), round_ties = 0;
        for (int w = 0; w < WARPS; ++w) rank += w < warp ? ex[w] : 0, round_ties += ex[w];
        const bool keep = gt || (tie && rank < need);
        const unsigned km = __ballot_sync(0xffffffffu, keep);
        if (lane == 0) ex[WARPS + warp] = __popc(km);
        __syncthreads();
        int64_t dest = out + __popc(km & lt), round_keep = 0;
        for (int w = 0; w < WARPS; ++w) dest += w < warp ? ex[WARPS + w] : 0, round_keep += ex[WARPS + w];
        if (keep) put(dest, e);
        ties_before += round_ties, out += round_keep;
        __syncthreads();
    }
}

/* =============================== indexer_topk pass A ================================= */
typedef struct __align__(16) {
    tile_smem_t tile;
    uint32_t bkey[IDX_TOPK_BUF_ENTRIES];
    uint16_t bidx[IDX_TOPK_BUF_ENTRIES];
    uint32_t hist[256];
    uint32_t ex[16];
    uint32_t theta[IDX_TOPK_MAX_ROWS];
    int count[IDX_TOPK_MAX_ROWS];
}
topk_smem_t;
static_assert(sizeof(topk_smem_t) <= DSV4_MAX_SMEM_PER_CTA, "indexer_topk pass A exceeds 48 KB of shared memory");

/* Select the top K of slot s's buffer in place; theta becomes the K-th key. */
static __device__ void buffer_compact(const idx_prm_t &p, topk_smem_t &sm, int s) {
    uint32_t *key = sm.bkey + s * p.cap;
    uint16_t *idx = sm.bidx + s * p.cap;
    const int64_t n = sm.count[s];
    int64_t need;
    const uint32_t T = radix_kth([&](int64_t i) { return key[i]; }, n, p.K, sm.hist, sm.ex, &need);
    keep_top([&](int64_t i) { return make_uint2(key[i], idx[i]); },
             [&](int64_t d, uint2 e) { key[d] = e.x, idx[d] = (uint16_t)e.y; }, n, T, need, sm.ex);
    if (threadIdx.x == 0) sm.count[s] = (int)p.K, sm.theta[s] = T;
    __syncthreads();
}

/* Warp `slot`, lane's key: append the lanes with `app` set to the row's buffer in lane
 * order, at split-local position `local`; `count` is the warp's copy of the count. */
static __device__ __forceinline__ void buffer_append(const idx_prm_t &p, topk_smem_t &sm, int slot, bool app,
                                                     uint32_t key, int64_t local, int &count) {
    const int lane = threadIdx.x % 32;
    const unsigned m = __ballot_sync(0xffffffffu, app);
    if (app) {
        const int at = slot * (int)p.cap + count + __popc(m & ((1u << lane) - 1u));
        sm.bkey[at] = key, sm.bidx[at] = (uint16_t)local;
    }
    count += __popc(m);
}

/* After a tile: compact every row buffer that could not take another tile. */
static __device__ __forceinline__ void buffers_make_room(const idx_prm_t &p, topk_smem_t &sm, int nact) {
    __syncthreads();
    for (int s = 0; s < nact; ++s)
        if (sm.count[s] > p.cap - IDX_TILE_KEYS) buffer_compact(p, sm, s);
}

/* The split's result of slot s: the top min(K, count) pairs (key, column col(local)) in
 * ascending column order, then (0, -1). */
template <class Col>
static __device__ __forceinline__ void write_split(const idx_prm_t &p, topk_smem_t &sm, int s, int64_t split, Col col) {
    if (sm.count[s] > p.K) buffer_compact(p, sm, s);
    uint2 *dst = p.pairs + (sm.tile.row[s] * p.splits + split) * p.K;
    for (int64_t i = threadIdx.x; i < p.K; i += IDX_TOPK_THREADS)
        dst[i] = i < sm.count[s] ? make_uint2(sm.bkey[s * p.cap + i], (uint32_t)col(sm.bidx[s * p.cap + i]))
                                 : make_uint2(0u, 0xFFFFFFFFu);
}

/* Mode 2: row t (n_t = n > 0 columns) lists every one of its blocks, so its eligible columns
 * are all of [0, n): the dense pass A scores it with the other rows of its group, sharing
 * their tiles, instead of a CTA of its own walking the list 8 blocks at a time. Pass B
 * reads the same splits either way (a split boundary is a multiple of 64, so it never falls
 * inside the last, partial block). */
static __device__ __forceinline__ bool restrict_full(const idx_prm_t &p, int64_t t, int64_t n) {
    return p.meta[2 * t] == (n + 7) / 8;
}

__global__ void __launch_bounds__(IDX_TOPK_THREADS) idx_topk_pass_a(const idx_prm_t p) {
    __shared__ topk_smem_t sm;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int64_t cta = blockIdx.x; cta < p.groups * p.splits; cta += gridDim.x) {
        const int64_t grp = cta / p.splits, split = cta % p.splits, first = grp * p.group_rows;
        const int64_t lo = split * p.split_len;
        unsigned pending = 0;
        for (int i = 0; i < p.group_rows && first + i < p.rows; ++i) {
            const int64_t n = row_cols(p, first + i);
            /* pass A: rows longer than K, or (mode 1) every row with columns, or (mode 2) rows
             * longer than K whose list holds every block, reaching this split */
            const bool take = p.mode == 2 ? n > p.K && restrict_full(p, first + i, n) : n > p.K || p.mode == 1;
            if (n > lo && take) pending |= 1u << i;
        }
        int32_t req;
        while ((req = next_subpass(p, sm.tile, first, pending)) >= 0) {
            const int nact = sm.tile.nact;
            int64_t hi = lo;
            for (int s = 0; s < nact; ++s) hi = max(hi, min(sm.tile.ncols[s], lo + p.split_len));
            if (threadIdx.x < nact) sm.count[threadIdx.x] = 0, sm.theta[threadIdx.x] = 0;
            __syncthreads();
            auto issue = [&](int64_t c, int stage) { tile_issue(p, sm.tile, req, c, stage); };
            tile_loop(p, sm.tile, issue, lo, hi, [&](int stage, int64_t c) {
                if (warp < nact) { /* warp s appends row slot s's columns in ascending order */
                    const int64_t n = sm.tile.ncols[warp], row = sm.tile.row[warp];
                    const bool sel = n > p.K;
                    uint32_t theta = sm.theta[warp];
                    int count = sm.count[warp];
                    for (int half = 0; half < 2; ++half) {
                        const int kk = half * 32 + lane;
                        const int64_t j = c + kk;
                        const uint32_t key = j < n ? idx_order_key(tile_logit(p, sm.tile, warp, kk, stage)) : 0u;
                        buffer_append(p, sm, warp, sel && j < n && key > theta, key, j - lo, count);
                        if (p.mode == 1) { /* block scores: max key of 8 columns, the last pinned */
                            uint32_t bm = key;
                            for (int o = 1; o < 8; o <<= 1) bm = max(bm, __shfl_xor_sync(0xffffffffu, bm, o));
                            const int64_t nb = (n + 7) / 8, g = j / 8;
                            if (lane % 8 == 0 && j < n)
                                p.scores[row * p.score_stride + g] = g == nb - 1 ? IDX_KEY_POS_INF : bm;
                        }
                    }
                    __syncwarp(); /* every lane has read the count (racecheck does not count the ballots) */
                    if (lane == 0) sm.count[warp] = count;
                }
                buffers_make_room(p, sm, nact);
            });
            /* the split's result: top min(K, count) pairs in ascending column order, -1-padded */
            for (int s = 0; s < nact; ++s)
                if (sm.tile.ncols[s] > p.K) write_split(p, sm, s, split, [&](int64_t local) { return local + lo; });
            __syncthreads();
        }
    }
}

/* ====================== indexer_topk, candidate mode 2 (restrict) ====================== */
/* Per row: the candidate ids in [0, nb_t) sorted (bitonic, in shared memory) and made
 * unique into lists[t], with meta[t] = (their count, |E_t|). */
__global__ void __launch_bounds__(IDX_TOPK_THREADS, 4) idx_topk_restrict_prep(const idx_prm_t p) {
    __shared__ int32_t v[IDX_TOPK_MAX_CAND];
    __shared__ uint32_t ex[16];
    __shared__ int32_t stat[2];
    const int32_t none = 0x7FFFFFFF;
    int64_t m = 1;
    while (m < p.C) m <<= 1;
    for (int64_t t = blockIdx.x; t < p.rows; t += gridDim.x) {
        const int64_t n = row_cols(p, t), nb = (n + 7) / 8;
        const int32_t *in = p.cand + t * p.cand_stride;
        __syncthreads();
        if (threadIdx.x == 0) stat[0] = 0, stat[1] = -1;
        for (int64_t i = threadIdx.x; i < m; i += IDX_TOPK_THREADS) {
            const int32_t id = i < p.C && n > 0 ? in[i] : none;
            v[i] = id >= 0 && id < nb ? id : none;
        }
        __syncthreads();
        for (int64_t k = 2; k <= m; k <<= 1)
            for (int64_t j = k >> 1; j > 0; j >>= 1) {
                for (int64_t i = threadIdx.x; i < m; i += IDX_TOPK_THREADS) {
                    const int64_t l = i ^ j;
                    if (l > i && ((v[i] > v[l]) == ((i & k) == 0))) {
                        const int32_t x = v[i];
                        v[i] = v[l], v[l] = x;
                    }
                }
                __syncthreads();
            }
        int32_t cnt = 0;
        for (int64_t i = threadIdx.x; i < m; i += IDX_TOPK_THREADS) {
            const bool first = v[i] != none && (i == 0 || v[i] != v[i - 1]);
            cnt += first;
            if (v[i] != none && (i == m - 1 || v[i + 1] == none)) stat[1] = v[i]; /* the largest id */
        }
        atomicAdd(&stat[0], cnt);
        int32_t *list = p.lists + t * p.C;
        keep_top(
            [&](int64_t i) {
                const bool first = v[i] != none && (i == 0 || v[i] != v[i - 1]);
                return make_uint2(first ? 2u : 0u, (uint32_t)v[i]);
            },
            [&](int64_t d, uint2 e) { list[d] = (int32_t)e.y; }, m, 1u, 0, ex);
        if (threadIdx.x == 0) {
            const int64_t blocks = stat[0], tail = stat[1] == nb - 1 ? 8 * nb - n : 0;
            p.meta[2 * t] = (int32_t)blocks, p.meta[2 * t + 1] = (int32_t)(8 * blocks - tail);
        }
    }
}

/* Pass A over the listed blocks only: one row per CTA (rows have their own lists), the list
 * cut into splits of split_len columns; a tile is 8 listed blocks. Rows whose list holds
 * every block are idx_topk_pass_a's (restrict_full). */
__global__ void __launch_bounds__(IDX_TOPK_THREADS) idx_topk_restrict_a(const idx_prm_t p) {
    __shared__ topk_smem_t sm;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int64_t cta = blockIdx.x; cta < p.rows * p.splits; cta += gridDim.x) {
        const int64_t t = cta / p.splits, split = cta % p.splits, lo = split * p.split_len;
        const int64_t n = row_cols(p, t), blocks = p.meta[2 * t], size = p.meta[2 * t + 1];
        const int64_t cols = 8 * blocks;
        if (n <= 0 || size <= p.K || lo >= cols || restrict_full(p, t, n)) continue;
        const int32_t *list = p.lists + t * p.C, req = __ldg(p.req + t);
        __syncthreads(); /* the previous row's readers of the slot are done */
        if (threadIdx.x == 0)
            sm.tile.row[0] = t, sm.tile.ncols[0] = n, sm.tile.nact = 1, sm.count[0] = 0, sm.theta[0] = 0;
        __syncthreads();
        flag_q_nan(p, sm.tile);
        __syncthreads();
        auto col = [&](int64_t pos) { return pos < cols ? 8 * (int64_t)list[pos / 8] + pos % 8 : n; };
        auto issue = [&](int64_t c, int stage) { tile_issue_blocks(p, sm.tile, req, list, blocks, c, stage); };
        tile_loop(p, sm.tile, issue, lo, min(lo + p.split_len, cols), [&](int stage, int64_t c) {
            if (warp == 0) {
                const uint32_t theta = sm.theta[0];
                int count = sm.count[0];
                for (int half = 0; half < 2; ++half) {
                    const int kk = half * 32 + lane;
                    const int64_t j = col(c + kk);
                    const uint32_t key = j < n ? idx_order_key(tile_logit(p, sm.tile, 0, kk, stage)) : 0u;
                    buffer_append(p, sm, 0, j < n && key > theta, key, c + kk - lo, count);
                }
                __syncwarp(); /* as in idx_topk_pass_a */
                if (lane == 0) sm.count[0] = count;
            }
            buffers_make_room(p, sm, 1);
        });
        write_split(p, sm, 0, split, [&](int64_t local) { return col(local + lo); });
    }
}

/* =============================== indexer_topk pass B ================================= */
__global__ void __launch_bounds__(IDX_TOPK_THREADS, 4) idx_topk_pass_b(const idx_prm_t p) {
    __shared__ uint32_t hist[256], ex[16];
    for (int64_t t = blockIdx.x; t < p.rows; t += gridDim.x) {
        int64_t n = row_cols(p, t), cols = (n + p.split_len - 1) / p.split_len * p.split_len;
        int32_t *out = p.topk + t * p.topk_stride;
        const int32_t *list = p.lists + t * p.C;
        if (p.mode == 2) { /* the eligible set is the listed blocks' columns, in list order */
            cols = 8 * (int64_t)p.meta[2 * t];
            n = p.meta[2 * t + 1];
        }
        if (n <= p.K && p.mode == 2) {
            for (int64_t i = threadIdx.x; i < p.K; i += IDX_TOPK_THREADS)
                out[i] = i < n ? (int32_t)(8 * list[i / 8] + i % 8) : -1;
        } else if (n <= p.K) {
            for (int64_t i = threadIdx.x; i < p.K; i += IDX_TOPK_THREADS) out[i] = i < n ? (int32_t)i : -1;
        } else {
            const int64_t ns = (cols + p.split_len - 1) / p.split_len, m = ns * p.K;
            const uint2 *src = p.pairs + t * p.splits * p.K;
            int64_t need;
            const uint32_t T = radix_kth([&](int64_t i) { return src[i].x; }, m, p.K, hist, ex, &need);
            keep_top([&](int64_t i) { return src[i]; }, [&](int64_t d, uint2 e) { out[d] = (int32_t)e.y; }, m, T, need,
                     ex);
        }
        if (p.mode != 1) continue;
        /* candidate blocks: scores other than -inf, the first C by (score desc, block asc) */
        int32_t *cand = p.cand + t * p.cand_stride;
        const uint32_t *sc = p.scores + t * p.score_stride;
        const int64_t nb = n > 0 ? (n + 7) / 8 : 0;
        auto score = [&](int64_t g) {
            const uint32_t v = sc[g];
            return v == IDX_KEY_NEG_INF ? 0u : v;
        };
        if (threadIdx.x == 0) ex[15] = 0;
        __syncthreads();
        uint32_t cnt = 0;
        for (int64_t g = threadIdx.x; g < nb; g += IDX_TOPK_THREADS) cnt += score(g) != 0u;
        atomicAdd(&ex[15], cnt);
        __syncthreads();
        const int64_t valid = ex[15];
        __syncthreads();
        uint32_t T = 1u;
        int64_t need = 0;
        if (valid > p.C) T = radix_kth(score, nb, p.C, hist, ex, &need);
        keep_top([&](int64_t g) { return make_uint2(score(g), (uint32_t)g); },
                 [&](int64_t d, uint2 e) { cand[d] = (int32_t)e.y; }, nb, valid > p.C ? T : 0u, need, ex);
        const int64_t kept = valid < p.C ? valid : p.C;
        for (int64_t i = kept + threadIdx.x; i < p.C; i += IDX_TOPK_THREADS) cand[i] = -1;
        __syncthreads();
    }
}

/* ================================== launchers ======================================== */
static idx_prm_t src_params(const idx_src_t &s, const uint8_t *q8, const float *w, const int64_t *pos,
                            const int32_t *req, const uint8_t *valid, const int32_t *bt, const uint8_t *cache) {
    idx_prm_t p = {};
    p.q8 = q8, p.w = w, p.pos = pos, p.req = req, p.valid = valid, p.bt = bt, p.cache = cache;
    p.rows = s.rows, p.heads = s.heads, p.slices = s.heads / 32, p.ratio = s.ratio, p.num_reqs = s.num_reqs;
    p.bt_stride = s.bt_stride, p.P = s.page_tokens, p.page_stride = s.page_stride_bytes, p.num_pages = s.num_pages;
    p.col_cap = s.col_cap;
    return p;
}

static unsigned grid_of(int64_t ctas) { return (unsigned)(ctas < IDX_MAX_BLOCKS ? ctas : IDX_MAX_BLOCKS); }

extern "C" dsv4_status_t idx_logits_launch(const idx_logits_plan_t *plan, const dsv4_indexer_logits_args_t *a,
                                           dsv4_stream_t stream) {
    static int smem;
    DSV4_TRY(dsv4_launch_prepare("indexer_logits", (const void *)idx_logits_kernel, 0, &smem));
    idx_prm_t p = src_params(plan->src, a->q8, a->w, a->positions, a->row_req, a->row_valid, a->block_table, a->cache);
    p.group_rows = plan->group_rows, p.groups = plan->groups, p.chunks = plan->chunks;
    p.out = a->out, p.out_cols = plan->out_cols, p.out_stride = plan->out_stride;
    dsv4_launch(idx_logits_kernel, grid_of(p.groups * p.chunks), IDX_TOPK_THREADS, 0, (cudaStream_t)stream, p);
    return dsv4_launch_status("indexer_logits");
}

extern "C" dsv4_status_t idx_topk_launch(const idx_topk_plan_t *plan, const dsv4_indexer_topk_args_t *a,
                                         void *workspace, dsv4_stream_t stream) {
    static int smem_a, smem_b, smem_p, smem_r;
    DSV4_TRY(dsv4_launch_prepare("indexer_topk", (const void *)idx_topk_pass_a, 0, &smem_a));
    DSV4_TRY(dsv4_launch_prepare("indexer_topk", (const void *)idx_topk_pass_b, 0, &smem_b));
    DSV4_TRY(dsv4_launch_prepare("indexer_topk", (const void *)idx_topk_restrict_prep, 0, &smem_p));
    DSV4_TRY(dsv4_launch_prepare("indexer_topk", (const void *)idx_topk_restrict_a, 0, &smem_r));
    idx_prm_t p = src_params(plan->src, a->q8, a->w, a->positions, a->row_req, a->row_valid, a->block_table, a->cache);
    p.group_rows = plan->group_rows, p.groups = plan->groups;
    p.topk = a->topk, p.cand = a->cand, p.pairs = (uint2 *)workspace;
    p.scores = (uint32_t *)((uint8_t *)workspace + plan->ws_pairs);
    p.lists = (int32_t *)((uint8_t *)workspace + plan->ws_pairs);
    p.meta = p.lists + plan->src.rows * plan->cand_count;
    p.K = plan->topk, p.topk_stride = plan->topk_stride, p.cap = plan->cap, p.splits = plan->splits;
    p.split_len = plan->split_len, p.mode = plan->mode, p.C = plan->cand_count, p.cand_stride = plan->cand_stride;
    p.score_stride = (plan->src.max_keys + 7) / 8;
    cudaStream_t s = (cudaStream_t)stream;
    if (p.mode == 2) { /* lists, then the rows listing every block densely, then the others */
        dsv4_launch(idx_topk_restrict_prep, grid_of(p.rows), IDX_TOPK_THREADS, 0, s, p);
        DSV4_TRY(dsv4_launch_status("indexer_topk"));
        dsv4_launch(idx_topk_pass_a, grid_of(p.groups * p.splits), IDX_TOPK_THREADS, 0, s, p);
        DSV4_TRY(dsv4_launch_status("indexer_topk"));
        dsv4_launch(idx_topk_restrict_a, grid_of(p.rows * p.splits), IDX_TOPK_THREADS, 0, s, p);
    } else {
        dsv4_launch(idx_topk_pass_a, grid_of(p.groups * p.splits), IDX_TOPK_THREADS, 0, s, p);
    }
    DSV4_TRY(dsv4_launch_status("indexer_topk"));
    dsv4_launch(idx_topk_pass_b, grid_of(p.rows), IDX_TOPK_THREADS, 0, s, p);
    return dsv4_launch_status("indexer_topk");
}
