/*
 * Top-k translation kernels: local compressed index -> global slot id
 * (include/dsv4/indices.h, section 1), dense and packed.
 *
 * Formula, per token t with req = token_to_req[t] and column j < K:
 *     v = topk[t, j];  ok = req in [0, R) and 0 <= v < block_table_width * P
 *     out[t, j] = ok ? table[req, v / P] * P + v % P : -1          (int32, wraps mod 2^32)
 *     lens[t]   = (req in [0, R) and is_valid[t]) ? #ok over the row : 0
 * with P = page_tokens. "0 <= v < block_table_width * P" is one unsigned compare against
 * vlimit (a negative v is a huge unsigned value); the division by P is the cache format's
 * multiply-high (common/kv_format.h).
 *
 * Dense (one launch): CTAs of 4 warps; warp g of the grid takes rows g, g + nw, g + 2 nw,
 * ... (nw warps in the grid: as many as are resident for K <= 512, one per row above it,
 * see the launcher). A row is walked in segments of 512 columns: every lane loads 4
 * chunks of 4 columns (chunk c = seg/4 + lane + 32u, u < 4; 16-byte loads when allowed).
 * After segment 0 the warp reduces (redux.sync) the smallest and largest valid index and
 * the valid count; when the page range is dense enough (config header) every lane issues
 * its cp.async copies of table[req, range] into the warp's shared slice at once, and the
 * lookups become shared-memory gathers instead of L1 gathers that touch one line per lane.
 * Pages outside the window go through the read-only cache. The loads of the warp's next
 * segment (or of segment 0 of its next row) are issued before the current one waits for
 * its table pages, so a row's top-k round trip overlaps the previous row's table round
 * trip and stores: one exposed round trip per row instead of two. Each output chunk is
 * written by the lane that loaded it (16-byte streaming stores when allowed): every
 * element has exactly one writer, and warps share nothing, so there are no CTA barriers,
 * only __syncwarp around the warp's slice.
 *
 * Packed (two launches, no host synchronization): rows are grouped (group_rows rows,
 * at most DSV4_TT_MAX_GROUPS groups, config header).
 *   1. count: one CTA per group, one warp per row: lens[t] and, per CTA, the group's
 *      total into the workspace (group_sums[g]).
 *   2. pack: one CTA per group. The CTA sums group_sums[0 .. g) (at most 2048 values,
 *      L2-resident) for the group's offset; each warp takes rows of the group, adds the
 *      lens of the group's earlier rows, writes indptr[t+1] and translates the first
 *      lens[t] columns to packed[indptr[t] + j] (4-byte stores: indptr has no alignment).
 *      CTA 0 writes indptr[0] = 0. Launch 2 is ordered after launch 1 by the stream.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "indices/index_device.cuh"
#include "indices/topk_translate_config.h"
#include "prim/cp_async.cuh"

/* Pages [base, base + len) of the row's block-table row sit in the warp's shared slice;
 * len = 0: nothing staged. */
struct tt_window {
    uint32_t base, len;
};

/* Raw loads of the segment's chunks (seg/4 + lane + 32u, u < UNROLL) into v: no
 * arithmetic on the values, so issuing them does not wait for them (the kernels prefetch
 * their next segment this way). tt_tally then masks and counts them. */
template <bool VIN>
static __device__ __forceinline__ void tt_fetch(int (&v)[DSV4_TT_UNROLL][4], const int32_t *__restrict__ in, int seg,
                                                int lane, int ncols) {
#pragma unroll
    for (int u = 0; u < DSV4_TT_UNROLL; ++u) {
        const int c = (seg >> 2) + lane + 32 * u;
        if (4 * c < ncols) {
            dsv4_idx_load4<VIN>(v[u], in, c, ncols);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) v[u][e] = -1;
        }
    }
}

/* MASK: sets fetched columns past ncols to -1 (only 16-byte loads of a packed row, which
 * ends inside a chunk, need it: element loads and whole dense rows are exact). Then
 * accumulates this lane's valid count, smallest and largest valid index. */
template <bool MASK>
static __device__ __forceinline__ void tt_tally(int (&v)[DSV4_TT_UNROLL][4], int seg, int lane, int ncols,
                                                uint32_t vlimit, int &nv, int &vmin, int &vmax) {
#pragma unroll
    for (int u = 0; u < DSV4_TT_UNROLL; ++u)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            if (MASK && 4 * ((seg >> 2) + lane + 32 * u) + e >= ncols) v[u][e] = -1;
            if ((uint32_t)v[u][e] < vlimit) {
                vmin = min(vmin, v[u][e]);
                vmax = max(vmax, v[u][e]);
                ++nv;
            }
        }
}

/* Translates and stores the segment's chunks. A page inside the window is read from the
 * shared slice; any other page (nothing staged, a later segment's index outside segment
 * 0's range, the table's last width % 4 pages) from the table row `tab` through L1.
 * Branch-free on purpose: every element reads the slice (at offset 0 when its page is
 * outside the window, a harmless in-bounds read) and only the misses issue a predicated
 * global load, so a chunk's four lookups are in flight together (an if/else per element
 * compiles to a branch region per lookup that waits for each shared load in turn). */
template <bool VOUT, bool PACKED>
static __device__ __forceinline__ void tt_emit(const dsv4_tt_params_t &p, const int (&v)[DSV4_TT_UNROLL][4], int seg,
                                               int lane, int ncols, uint32_t vlimit, const int32_t *__restrict__ tab,
                                               const int32_t *stage, tt_window win, int32_t *__restrict__ dst) {
    const uint32_t bs = (uint32_t)p.page_tokens;
#pragma unroll
    for (int u = 0; u < DSV4_TT_UNROLL; ++u) {
        const int c = (seg >> 2) + lane + 32 * u;
        if (4 * c >= ncols) continue;
        int o[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const uint32_t x = (uint32_t)v[u][e];
            const bool ok = x < vlimit;
            const uint32_t page = kv_page_div(x, p.page_div.magic, p.page_div.shift), off = page - win.base;
            const bool hit = off < win.len;
            int32_t phys = stage[hit ? off : 0u];
            if (ok && !hit) phys = __ldg(tab + page);
            o[e] = ok ? (int32_t)((uint32_t)phys * bs + (x - page * bs)) : -1;
        }
        if (PACKED) {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (4 * c + e < ncols) dst[4 * c + e] = o[e];
        } else {
            dsv4_idx_store4<VOUT>(dst, c, o, ncols);
        }
    }
}

/* Starts the copy of the table pages that segment 0's valid indices span, [vmin / P,
 * vmax / P] widened to whole 16-byte chunks and cut at p.stage_end, into the warp's slice:
 * every lane issues its cp.async chunks at once (at most 8 for 1024 pages), so the row pays
 * one table round trip however wide the range. Staged only when the range is wider than
 * one 128-byte line (below that the L1 serves each lookup instruction in one pass), fits
 * the slice, and holds a valid index per DSV4_TT_STAGE_PAGES_PER_HIT pages (else staging
 * reads more of the table than the lookups touch). nv, vmin, vmax: warp-reduced. */
static __device__ __forceinline__ tt_window tt_stage(const dsv4_tt_params_t &p, const int32_t *__restrict__ tab,
                                                     int32_t *stage, int nv, int vmin, int vmax, int lane) {
    tt_window w = {0u, 0u};
    if (nv == 0) return w;
    w.base = kv_page_div((uint32_t)vmin, p.page_div.magic, p.page_div.shift) & ~3u;
    const uint32_t end = min((kv_page_div((uint32_t)vmax, p.page_div.magic, p.page_div.shift) | 3u) + 1u, p.stage_end);
    const uint32_t len = end > w.base ? end - w.base : 0u;
    if (len <= DSV4_TT_STAGE_MIN_PAGES || len > DSV4_TT_STAGE_PAGES || len > DSV4_TT_STAGE_PAGES_PER_HIT * (uint32_t)nv)
        return w;
    for (uint32_t i = 4u * lane; i < len; i += 128u) dsv4_cp_async_16(stage + i, tab + w.base + i);
    dsv4_cp_async_commit();
    w.len = len;
    return w;
}

/* Translates columns [0, ncols) of row t into dst (dense: 4-column chunks at dst + 4c;
 * packed: elements dst[j]) using `stage` (this warp's shared slice). Segment 0 decides the
 * staging window for the whole row (top-k rows spread over the same pages in every
 * segment); each later segment's loads are issued before the previous segment is
 * translated, so a K = 2048 row pays about one round trip per segment, not two. Returns
 * the number of valid entries among the columns (the same value in every lane). */
template <bool VIN, bool VOUT, bool PACKED>
static __device__ __forceinline__ int tt_row(const dsv4_tt_params_t &p, int64_t t, int req, bool rok,
                                             int32_t *__restrict__ dst, int ncols, int32_t *stage, int lane) {
    const int32_t *in = p.topk_indices + t * p.topk_stride;
    const int32_t *tab = p.table + (int64_t)(rok ? req : 0) * p.block_table_stride;
    const uint32_t vlimit = rok ? p.vlimit : 0u; /* no valid index for an unknown request */
    int v[DSV4_TT_UNROLL][4];
    int nv = 0, vmin = 0x7FFFFFFF, vmax = -1;
    tt_fetch<VIN>(v, in, 0, lane, ncols);
    tt_tally<VIN && PACKED>(v, 0, lane, ncols, vlimit, nv, vmin, vmax);
    nv = dsv4_idx_warp_sum(nv);
    tt_window win = {0u, 0u};
    if (nv > 0) /* warp-uniform */
        win = tt_stage(p, tab, stage, nv, dsv4_idx_warp_min(vmin), dsv4_idx_warp_max(vmax), lane);
    int later = 0; /* this lane's valid count in segments 1, 2, ... */
    for (int seg = 0; seg < ncols; seg += DSV4_TT_SEG) {
        int next[DSV4_TT_UNROLL][4];
        const bool more = seg + DSV4_TT_SEG < ncols;
        if (more) tt_fetch<VIN>(next, in, seg + DSV4_TT_SEG, lane, ncols);
        if (seg == 0 && win.len > 0) {
            dsv4_cp_async_wait<0>();
            __syncwarp(); /* every lane's chunks are in the slice */
        }
        tt_emit<VOUT, PACKED>(p, v, seg, lane, ncols, vlimit, tab, stage, win, dst);
        if (more) { /* counted only now: counting right after the fetch would wait for it */
            tt_tally<VIN && PACKED>(next, seg + DSV4_TT_SEG, lane, ncols, vlimit, later, vmin, vmax);
#pragma unroll
            for (int u = 0; u < DSV4_TT_UNROLL; ++u)
#pragma unroll
                for (int e = 0; e < 4; ++e) v[u][e] = next[u][e];
        }
    }
    __syncwarp(); /* the warp's next row may overwrite the slice */
    return ncols > DSV4_TT_SEG ? nv + dsv4_idx_warp_sum(later) : nv;
}

/* Dense translation, grid-stride over units: a unit is one 512-column segment of a row;
 * warp g of the grid takes rows g, g + nw, g + 2 nw, ... (nw = warps in the grid, sized by
 * the launcher to what is resident). The loads of the warp's next unit (the next segment,
 * or segment 0 of its next row, with that row's token_to_req and is_valid) are issued
 * before the current unit waits for its table pages, so the top-k round trip of every row
 * but the warp's first is hidden behind the previous row's table round trip and stores. */
template <bool VEC>
__global__ void __launch_bounds__(DSV4_TT_THREADS, DSV4_TT_MIN_CTAS) tt_dense_kernel(const dsv4_tt_params_t p) {
    __shared__ __align__(16) int32_t stage[DSV4_TT_WARPS][DSV4_TT_STAGE_PAGES];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t nw = (int64_t)gridDim.x * DSV4_TT_WARPS;
    int64_t t = (int64_t)blockIdx.x * DSV4_TT_WARPS + warp;
    if (t >= p.num_tokens) return; /* whole warps; the kernel has no CTA barrier */
    const int K = p.topk;
    int v[DSV4_TT_UNROLL][4];
    int req = __ldg(p.token_to_req + t);
    bool valid = __ldg(p.is_valid + t) != 0;
    tt_fetch<VEC>(v, p.topk_indices + t * p.topk_stride, 0, lane, K);
    tt_window win = {0u, 0u};
    int seg = 0, row_nv = 0, row_n0 = 0; /* lane's valid count over the row so far; segment 0's warp total */
    for (;;) {
        /* Prefetch the next unit. */
        int64_t tn = t;
        int segn = seg + DSV4_TT_SEG;
        if (segn >= K) {
            tn = t + nw;
            segn = 0;
        }
        const bool more = tn < p.num_tokens;
        int nx[DSV4_TT_UNROLL][4];
        int reqn = req;
        bool validn = valid;
        if (more) {
            tt_fetch<VEC>(nx, p.topk_indices + tn * p.topk_stride, segn, lane, K);
            if (segn == 0) {
                reqn = __ldg(p.token_to_req + tn);
                validn = __ldg(p.is_valid + tn) != 0;
            }
        }
        /* The current unit. */
        const bool rok = (unsigned)req < (unsigned)p.num_reqs;
        const uint32_t vlimit = rok ? p.vlimit : 0u; /* no valid index for an unknown request */
        const int32_t *tab = p.table + (int64_t)(rok ? req : 0) * p.block_table_stride;
        int nv = 0, vmin = 0x7FFFFFFF, vmax = -1;
        tt_tally<false>(v, seg, lane, K, vlimit, nv, vmin, vmax);
        if (seg == 0) {
            row_nv = 0;
            win.len = 0u;
            row_n0 = __reduce_add_sync(DSV4_IDX_FULL, nv);
            if (row_n0 > 0) /* warp-uniform */
                win = tt_stage(p, tab, stage[warp], row_n0, __reduce_min_sync(DSV4_IDX_FULL, vmin),
                               __reduce_max_sync(DSV4_IDX_FULL, vmax), lane);
            if (win.len > 0) {
                dsv4_cp_async_wait<0>();
                __syncwarp(); /* every lane's chunks are in the slice */
            }
        }
        row_nv += nv;
        tt_emit<VEC, false>(p, v, seg, lane, K, vlimit, tab, stage[warp], win, p.out + t * p.out_stride);
        if (seg + DSV4_TT_SEG >= K) { /* the row's last unit */
            const int n = K <= DSV4_TT_SEG ? row_n0 : __reduce_add_sync(DSV4_IDX_FULL, row_nv);
            if (lane == 0) p.lens[t] = (rok && valid) ? n : 0;
            __syncwarp(); /* the next row's staging may overwrite the slice */
        }
        if (!more) break;
        t = tn;
        seg = segn;
        req = reqn;
        valid = validn;
        dsv4_idx_take(v, nx);
    }
}

template <bool VIN>
__global__ void __launch_bounds__(DSV4_TT_THREADS, DSV4_TT_MIN_CTAS) tt_count_kernel(const dsv4_tt_params_t p) {
    __shared__ int warp_total[DSV4_TT_WARPS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t row0 = (int64_t)blockIdx.x * p.group_rows;
    int mine = 0;
    for (int r = warp; r < p.group_rows; r += DSV4_TT_WARPS) {
        const int64_t t = row0 + r;
        if (t >= p.num_tokens) break;
        const int req = __ldg(p.token_to_req + t);
        const bool valid = __ldg(p.is_valid + t) != 0;
        const bool rok = (unsigned)req < (unsigned)p.num_reqs;
        const uint32_t vlimit = rok ? p.vlimit : 0u;
        const int32_t *in = p.topk_indices + t * p.topk_stride;
        int n = 0;
#pragma unroll 4
        for (int c = lane; 4 * c < p.topk; c += 32) {
            int v[4];
            dsv4_idx_load4<VIN>(v, in, c, p.topk);
#pragma unroll
            for (int e = 0; e < 4; ++e) n += (uint32_t)v[e] < vlimit;
        }
        n = dsv4_idx_warp_sum(n);
        const int len = (rok && valid) ? n : 0;
        if (lane == 0) p.lens[t] = len;
        mine += len;
    }
    if (lane == 0) warp_total[warp] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
#pragma unroll
        for (int w = 0; w < DSV4_TT_WARPS; ++w) s += warp_total[w];
        p.group_sums[blockIdx.x] = s;
    }
}

template <bool VIN>
__global__ void __launch_bounds__(DSV4_TT_THREADS, DSV4_TT_MIN_CTAS) tt_pack_kernel(const dsv4_tt_params_t p) {
    __shared__ __align__(16) int32_t stage[DSV4_TT_WARPS][DSV4_TT_STAGE_PAGES];
    __shared__ int warp_part[DSV4_TT_WARPS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = blockIdx.x;
    /* Offset of this group: the totals of the groups before it. */
    int s = 0;
    for (int i = threadIdx.x; i < g; i += DSV4_TT_THREADS) s += __ldg(p.group_sums + i);
    s = dsv4_idx_warp_sum(s);
    if (lane == 0) warp_part[warp] = s;
    __syncthreads();
    int group_base = 0;
#pragma unroll
    for (int w = 0; w < DSV4_TT_WARPS; ++w) group_base += warp_part[w];
    if (g == 0 && threadIdx.x == 0) p.indptr[0] = 0;

    const int64_t row0 = (int64_t)g * p.group_rows;
    for (int r = warp; r < p.group_rows; r += DSV4_TT_WARPS) {
        const int64_t t = row0 + r;
        if (t >= p.num_tokens) break;
        int before = 0; /* lens of the group's rows before t */
        for (int i = lane; i < r; i += 32) before += __ldg(p.lens + row0 + i);
        const int base = group_base + dsv4_idx_warp_sum(before);
        const int len = __ldg(p.lens + t);
        if (lane == 0) p.indptr[t + 1] = base + len;
        if (len > 0) { /* len > 0 implies a known request (launch 1) */
            const int req = __ldg(p.token_to_req + t);
            tt_row<VIN, false, true>(p, t, req, true, p.packed + base, len, stage[warp], lane);
        }
    }
}

extern "C" dsv4_status_t dsv4_topk_translate_launch(const dsv4_tt_params_t *p, dsv4_stream_t stream) {
    static const char *op = "topk_translate";
    static int smem_vec, smem_scalar, occ[2];
    if (p->num_tokens == 0) return DSV4_STATUS_SUCCESS;
    const void *k = p->vec ? (const void *)tt_dense_kernel<true> : (const void *)tt_dense_kernel<false>;
    DSV4_TRY(dsv4_launch_prepare(op, k, 0, p->vec ? &smem_vec : &smem_scalar));
    /* One warp per row (grid ceil(T / 4)) when rows have several segments: the hardware
     * then hands out CTAs as earlier ones finish, which balances rows of very different
     * cost better than a static grid-stride split. Single-segment rows (K <= 512) gain
     * from the resident grid's cross-row prefetch instead (docs/indices.md). */
    const int64_t need = ((int64_t)p->num_tokens + DSV4_TT_WARPS - 1) / DSV4_TT_WARPS;
    const unsigned grid = p->topk > DSV4_TT_SEG && dsv4_idx_grid_cap == 0
                              ? (unsigned)need
                              : dsv4_idx_resident_grid(k, DSV4_TT_THREADS, need, &occ[p->vec != 0]);
    if (p->vec) dsv4_launch(tt_dense_kernel<true>, grid, DSV4_TT_THREADS, 0, (cudaStream_t)stream, *p);
    else dsv4_launch(tt_dense_kernel<false>, grid, DSV4_TT_THREADS, 0, (cudaStream_t)stream, *p);
    return dsv4_launch_status(op);
}

extern "C" dsv4_status_t dsv4_topk_translate_packed_launch(const dsv4_tt_params_t *p, dsv4_stream_t stream) {
    static const char *op = "topk_translate_packed";
    static int smem_count[2], smem_pack[2];
    const void *kc = p->vec ? (const void *)tt_count_kernel<true> : (const void *)tt_count_kernel<false>;
    const void *kp = p->vec ? (const void *)tt_pack_kernel<true> : (const void *)tt_pack_kernel<false>;
    DSV4_TRY(dsv4_launch_prepare(op, kc, 0, &smem_count[p->vec != 0]));
    DSV4_TRY(dsv4_launch_prepare(op, kp, 0, &smem_pack[p->vec != 0]));
    cudaStream_t s = (cudaStream_t)stream;
    if (p->num_groups > 0) {
        if (p->vec) dsv4_launch(tt_count_kernel<true>, p->num_groups, DSV4_TT_THREADS, 0, s, *p);
        else dsv4_launch(tt_count_kernel<false>, p->num_groups, DSV4_TT_THREADS, 0, s, *p);
        DSV4_TRY(dsv4_launch_status(op));
    }
    /* At least one CTA, so that indptr[0] is written when T = 0. */
    const unsigned grid = p->num_groups > 0 ? (unsigned)p->num_groups : 1u;
    if (p->vec) dsv4_launch(tt_pack_kernel<true>, grid, DSV4_TT_THREADS, 0, s, *p);
    else dsv4_launch(tt_pack_kernel<false>, grid, DSV4_TT_THREADS, 0, s, *p);
    return dsv4_launch_status(op);
}
