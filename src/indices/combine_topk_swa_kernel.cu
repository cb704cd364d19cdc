/*
 * Top-k + sliding-window combine for prefill (include/dsv4/indices.h, section 2).
 *
 * Formula, per token row t (key = qsl[0] + t; request b with qsl[b] <= key < qsl[b+1]):
 *     pos = L + key - qsl[b+1]                    (= L - (q1 - q0) + (t - q0), rebased)
 *     topk_len = ratio ? min(max(pos+1, 0) / ratio, TOP_K) : 0
 *     V4.1: swa_start = max(pos - W + 1, 0, gs), swa_len = max(pos - swa_start + 1, 0)
 *     V4:   swa_len = min(max(pos+1, 0), W),     swa_start = pos - swa_len + 1
 *     column j <  topk_len           : A(topk[t, j])  (V4.1: v in [0, N) ? v + M b : -1;
 *                                                      V4: v + M b)
 *     column j <  topk_len + swa_len : M b + N + (swa_start - gs) + (j - topk_len)
 *     column j <  C                  : -1;     lens[t] = topk_len + swa_len
 * Rows no request covers get -1 and lens 0. Arithmetic on slot values wraps mod 2^32
 * (unsigned adds), exactly as the reference's int64-then-truncate.
 *
 * Decomposition: CTAs of 4 warps, as many as are resident (at most ceil(T / 4)); warp g of
 * the grid takes rows g, g + nw, ... (nw warps in the grid). Lane l owns the 4-column
 * chunks c = l + 32k of a row, so every element has exactly one writer and the three
 * regions need no ordering: a chunk that straddles a region boundary is computed element
 * by element by its one lane. Stores are 16-byte streaming stores when the output row
 * allows it (C is a multiple of 128 int32). A row is emitted in units of 512 columns.
 *
 * Loads: for R <= 31 each lane loads qsl[l], seq_lens[l], gather_lens[l] once per warp,
 * and every row's request lookup is then a ballot and shuffles with no memory round trip.
 * A unit reads only the top-k chunks that start below its row's topk_len, and the warp
 * issues its next unit's loads before it computes and stores the current one. The warp's
 * first row is special: up to T = DSV4_CMB_SPEC_MAX_TOKENS (one wave, latency-bound) its
 * first batch is loaded before the request is known (spec_load columns), in parallel with
 * the request arrays, so the row pays one round trip before it stores; above it the
 * kernel is bandwidth-bound and reading -1 columns past topk_len (rows of short prefixes)
 * would cost DRAM bytes.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "indices/combine_topk_swa_config.h"
#include "indices/index_device.cuh"

#define CMB_BATCH (DSV4_CMB_BATCH_COLS / 4) /* chunks per batch */

/* The request of row t and what the row needs from it. Warp-uniform results. */
struct cmb_req {
    int b;
    int64_t key; /* qsl[0] + t          */
    int64_t q1;  /* qsl[b + 1]          */
    int64_t L;   /* seq_lens[b]         */
    int64_t G;   /* gather_lens[b]      */
};

/* The request arrays as the lanes hold them for R <= DSV4_CMB_FAST_REQS: lane l has qsl[l]
 * (l <= R), seq_lens[l] and gather_lens[l] (l < R), loaded once per warp; every row's
 * lookup is then a ballot and three shuffles, with no memory round trip. */
struct cmb_lanes {
    int64_t qv;
    int sl, gl;
};

static __device__ __forceinline__ cmb_lanes cmb_lanes_load(const dsv4_cmb_params_t &p, int lane) {
    cmb_lanes l = {0, 0, 0};
    const int R = p.num_reqs;
    if (R <= DSV4_CMB_FAST_REQS) {
        l.qv = lane <= R ? (int64_t)__ldg(p.qsl + lane) : 0;
        l.sl = lane < R ? __ldg(p.seq_lens + lane) : 0;
        l.gl = lane < R ? __ldg(p.gather_lens + lane) : 0;
    }
    return l;
}

static __device__ __forceinline__ cmb_req cmb_find_request(const dsv4_cmb_params_t &p, const cmb_lanes &l, int64_t t,
                                                           int lane) {
    cmb_req r;
    const int R = p.num_reqs;
    if (R <= DSV4_CMB_FAST_REQS) {
        r.key = __shfl_sync(DSV4_IDX_FULL, l.qv, 0) + t;
        /* qsl is non-decreasing: the boundaries qsl[1..R-1] <= key are a prefix. */
        r.b = __popc(__ballot_sync(DSV4_IDX_FULL, lane >= 1 && lane < R && l.qv <= r.key));
        r.q1 = __shfl_sync(DSV4_IDX_FULL, l.qv, r.b + 1);
        r.L = __shfl_sync(DSV4_IDX_FULL, l.sl, r.b);
        r.G = __shfl_sync(DSV4_IDX_FULL, l.gl, r.b);
        return r;
    }
    /* 32-ary search for the last b in [0, R) with qsl[b] <= key: each round the 32 lanes
     * probe evenly spaced boundaries and the count of those <= key narrows [lo, hi) to one
     * step. Even a decreasing qsl keeps lo inside [0, R) (c counts probes below hi). */
    r.key = (int64_t)__ldg(p.qsl) + t;
    int lo = 0, hi = R;
    while (hi - lo > 1) {
        const int step = (hi - lo - 1 + 31) >> 5;
        const int i = lo + step * (lane + 1);
        const bool le = i < hi && (int64_t)__ldg(p.qsl + i) <= r.key;
        lo += __popc(__ballot_sync(DSV4_IDX_FULL, le)) * step;
        hi = min(hi, lo + step);
    }
    r.b = lo;
    r.q1 = __ldg(p.qsl + lo + 1);
    r.L = __ldg(p.seq_lens + lo);
    r.G = __ldg(p.gather_lens + lo);
    return r;
}

/* The row's regions, reduced to what the element formula needs. */
struct cmb_row {
    int topk_len; /* end of region A                                    */
    int total;    /* end of region B (= lens)                           */
    uint32_t mb;  /* M * b: region A offset                             */
    uint32_t b0;  /* region B value at column j is b0 + j               */
};

template <bool V4> static __device__ __forceinline__ cmb_row cmb_regions(const dsv4_cmb_params_t &p, const cmb_req &r) {
    cmb_row w;
    int topk_len = 0, swa_len = 0;
    int64_t swa_start = 0;
    const int64_t gs = r.L - r.G;
    if (r.key < r.q1) { /* covered by request b */
        const int64_t pos = r.L + r.key - r.q1;
        const int64_t np1 = pos + 1 > 0 ? pos + 1 : 0;
        /* np1 <= 2^31 - 1 (pos < L): a 32-bit division, far cheaper than a 64-bit one. */
        if (p.ratio > 0) topk_len = (int)min((uint32_t)np1 / (uint32_t)p.ratio, (uint32_t)p.topk);
        if (V4) {
            swa_len = (int)min(np1, (int64_t)p.window);
            swa_start = pos - swa_len + 1;
        } else {
            swa_start = max(max(pos - p.window + 1, (int64_t)0), gs);
            swa_len = (int)max(pos - swa_start + 1, (int64_t)0);
        }
    }
    w.topk_len = topk_len;
    w.total = topk_len + swa_len;
    w.mb = (uint32_t)p.slab_rows * (uint32_t)r.b;
    w.b0 = w.mb + (uint32_t)p.swa_row0 + (uint32_t)(uint64_t)(swa_start - gs) - (uint32_t)topk_len;
    return w;
}

/* Computes and stores the chunks base + lane + 32u (u < UNROLL) from their top-k values. */
template <bool V4, bool VEC>
static __device__ __forceinline__ void cmb_emit(const dsv4_cmb_params_t &p, const cmb_row &w,
                                                const int (&v)[DSV4_CMB_UNROLL][4], int base, int lane,
                                                int32_t *__restrict__ row) {
    const int c4 = p.cols >> 2;
#pragma unroll
    for (int u = 0; u < DSV4_CMB_UNROLL; ++u) {
        const int c = base + lane + 32 * u;
        if (c >= c4) continue;
        int o[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int j = 4 * c + e;
            const int x = v[u][e];
            const int a = (V4 || (x >= 0 && x < p.swa_row0)) ? (int)((uint32_t)x + w.mb) : -1;
            o[e] = j < w.topk_len ? a : (j < w.total ? (int)(w.b0 + (uint32_t)j) : -1);
        }
        dsv4_idx_store4<VEC>(row, c, o, p.cols);
    }
}

/* Loads the chunks base + lane + 32u (u < UNROLL) whose columns start in [lo, hi); the
 * other chunks keep their values (batch 0's preloaded chunks, or values emit ignores). */
template <bool VEC>
static __device__ __forceinline__ void cmb_load(int (&v)[DSV4_CMB_UNROLL][4], const int32_t *__restrict__ in, int base,
                                                int lane, int lo, int hi, int ncols) {
#pragma unroll
    for (int u = 0; u < DSV4_CMB_UNROLL; ++u) {
        const int c = base + lane + 32 * u;
        if (4 * c >= lo && 4 * c < hi) dsv4_idx_load4<VEC>(v[u], in, c, ncols);
    }
}

/* Grid-stride over units: a unit is one batch (512 columns) of a row; warp g of the grid
 * takes rows g, g + nw, ... (nw = warps in the grid, sized by the launcher to what is
 * resident). The top-k loads of the warp's next unit are issued before the current unit is
 * computed and stored, so they overlap its stores instead of following them. */
template <bool V4, bool VEC> __global__ void __launch_bounds__(DSV4_CMB_THREADS) cmb_kernel(const dsv4_cmb_params_t p) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t nw = (int64_t)gridDim.x * DSV4_CMB_WARPS;
    int64_t t = (int64_t)blockIdx.x * DSV4_CMB_WARPS + warp;
    if (t >= p.num_tokens) return; /* whole warps; no CTA barrier in this kernel */
    const int c4 = p.cols >> 2;

    /* Columns [0, spec_load) of the warp's first row are loaded before its request is known:
     * they depend only on t, so their round trip overlaps the request lookup's. */
    int v[DSV4_CMB_UNROLL][4], nx[DSV4_CMB_UNROLL][4];
#pragma unroll
    for (int u = 0; u < DSV4_CMB_UNROLL; ++u)
#pragma unroll
        for (int e = 0; e < 4; ++e) v[u][e] = nx[u][e] = -1;
    cmb_load<VEC>(v, p.topk_indices + t * p.topk_stride, 0, lane, 0, p.spec_load, p.topk_load);
    const cmb_lanes lanes = cmb_lanes_load(p, lane);
    cmb_row w = cmb_regions<V4>(p, cmb_find_request(p, lanes, t, lane));
    /* Everything else is loaded only where the row needs it, columns below topk_len. */
    cmb_load<VEC>(v, p.topk_indices + t * p.topk_stride, 0, lane, p.spec_load, w.topk_len, p.topk_load);
    for (int base = 0;;) {
        int64_t tn = t;
        int basen = base + CMB_BATCH;
        cmb_row wn = w;
        if (basen >= c4) {
            tn = t + nw;
            basen = 0;
            if (tn < p.num_tokens) wn = cmb_regions<V4>(p, cmb_find_request(p, lanes, tn, lane));
        }
        const bool more = tn < p.num_tokens;
        if (more) cmb_load<VEC>(nx, p.topk_indices + tn * p.topk_stride, basen, lane, 0, wn.topk_len, p.topk_load);
        cmb_emit<V4, VEC>(p, w, v, base, lane, p.out + t * p.out_stride);
        if (base + CMB_BATCH >= c4 && lane == 0) p.lens[t] = w.total;
        if (!more) break;
        t = tn;
        base = basen;
        w = wn;
        dsv4_idx_take(v, nx);
    }
}

extern "C" dsv4_status_t dsv4_combine_topk_swa_launch(const dsv4_cmb_params_t *p, int v4_mode, dsv4_stream_t stream) {
    static const char *op = "combine_topk_swa";
    static int smem[4], occ[4];
    if (p->num_tokens == 0) return DSV4_STATUS_SUCCESS;
    const int which = (v4_mode ? 2 : 0) + (p->vec ? 1 : 0);
    const void *k = which == 0   ? (const void *)cmb_kernel<false, false>
                    : which == 1 ? (const void *)cmb_kernel<false, true>
                    : which == 2 ? (const void *)cmb_kernel<true, false>
                                 : (const void *)cmb_kernel<true, true>;
    DSV4_TRY(dsv4_launch_prepare(op, k, 0, &smem[which]));
    const int64_t need = ((int64_t)p->num_tokens + DSV4_CMB_WARPS - 1) / DSV4_CMB_WARPS;
    const unsigned grid = dsv4_idx_resident_grid(k, DSV4_CMB_THREADS, need, &occ[which]);
    cudaStream_t s = (cudaStream_t)stream;
    switch (which) {
    case 0: dsv4_launch(cmb_kernel<false, false>, grid, DSV4_CMB_THREADS, 0, s, *p); break;
    case 1: dsv4_launch(cmb_kernel<false, true>, grid, DSV4_CMB_THREADS, 0, s, *p); break;
    case 2: dsv4_launch(cmb_kernel<true, false>, grid, DSV4_CMB_THREADS, 0, s, *p); break;
    default: dsv4_launch(cmb_kernel<true, true>, grid, DSV4_CMB_THREADS, 0, s, *p); break;
    }
    return dsv4_launch_status(op);
}
