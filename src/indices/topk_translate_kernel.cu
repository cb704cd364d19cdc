/*
 * Top-k translation kernels: local compressed index -> global slot id (spec/indices.md
 * section 2), dense and packed.
 *
 * Formula, per token t with req = token_to_req[t] and column j < K:
 *     v = topk[t, j];  ok = req in [0, R) and 0 <= v < table_width * bs
 *     out[t, j] = ok ? table[req, v / bs] * bs + v % bs : -1        (int32, wraps mod 2^32)
 *     lens[t]   = (req in [0, R) and is_valid[t]) ? #ok over the row : 0
 * "0 <= v < table_width * bs" is one unsigned compare against vlimit (a negative v is a
 * huge unsigned value); the division by bs is a multiply-shift (index_common.h).
 *
 * Dense (one launch): grid ceil(T / 4) CTAs of 4 warps; warp w of CTA b owns row 4b + w.
 * The row is walked in segments of 512 columns: every lane loads 4 chunks of 4 columns
 * (chunk c = seg/4 + lane + 32u, u < 4; 16-byte loads when allowed). After segment 0 the
 * warp reduces the smallest and largest valid index and the valid count; when the page
 * range is dense enough (config header) every lane issues its cp.async copies of
 * table[req, range] into the warp's shared slice at once, so the row pays two dependent
 * round trips (its top-k values, then its table pages) and the lookups become shared-memory
 * gathers instead of L1 gathers that touch one line per lane. Pages outside the window go
 * through the read-only cache. Each output chunk is written by the lane that loaded it
 * (16-byte streaming stores when allowed): every element has exactly one writer, and warps
 * share nothing, so there are no CTA barriers, only __syncwarp around the warp's slice.
 * The first version staged with a plain loop that ptxas unrolled by 4: a 512-page range
 * took 4 dependent table round trips per segment, and T = 8192, K = 512 ran at 1.9 TB/s.
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

/* Loads the segment's chunks (seg/4 + lane + 32u, u < UNROLL) into v, with columns past
 * ncols as -1 (packed rows end inside a chunk), and accumulates this lane's valid count,
 * smallest and largest valid index (the caller drops what it does not need). */
template <bool VIN>
static __device__ __forceinline__ void tt_load(int (&v)[DSV4_TT_UNROLL][4], const int32_t *__restrict__ in, int seg,
                                               int lane, int ncols, uint32_t vlimit, int &nv, int &vmin, int &vmax) {
#pragma unroll
    for (int u = 0; u < DSV4_TT_UNROLL; ++u) {
        const int c = (seg >> 2) + lane + 32 * u;
        if (4 * c < ncols) {
            dsv4_idx_load4<VIN>(v[u], in, c, ncols);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) v[u][e] = -1;
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            if (4 * c + e >= ncols) v[u][e] = -1;
            if ((uint32_t)v[u][e] < vlimit) {
                vmin = min(vmin, v[u][e]);
                vmax = max(vmax, v[u][e]);
                ++nv;
            }
        }
    }
}

/* Translates and stores the segment's chunks. A page inside the window is read from the
 * shared slice; any other page (nothing staged, a later segment's index outside segment
 * 0's range, the table's last width % 4 pages) from the table row `tab` through L1. */
template <bool VOUT, bool PACKED>
static __device__ __forceinline__ void tt_emit(const dsv4_tt_params_t &p, const int (&v)[DSV4_TT_UNROLL][4], int seg,
                                               int lane, int ncols, uint32_t vlimit, const int32_t *__restrict__ tab,
                                               const int32_t *stage, tt_window win, int32_t *__restrict__ dst) {
    const uint32_t bs = (uint32_t)p.block_size;
#pragma unroll
    for (int u = 0; u < DSV4_TT_UNROLL; ++u) {
        const int c = (seg >> 2) + lane + 32 * u;
        if (4 * c >= ncols) continue;
        int o[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const uint32_t x = (uint32_t)v[u][e];
            o[e] = -1;
            if (x < vlimit) {
                const uint32_t page = dsv4_idx_div(x, p.bs_div), off = page - win.base;
                const int32_t phys = off < win.len ? stage[off] : __ldg(tab + page);
                o[e] = (int32_t)((uint32_t)phys * bs + (x - page * bs));
            }
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

/* Starts the copy of the table pages that segment 0's valid indices span, [vmin / bs,
 * vmax / bs] widened to whole 16-byte chunks and cut at p.stage_end, into the warp's slice:
 * every lane issues its cp.async chunks at once (at most 8 for 1024 pages), so the row pays
 * one table round trip however wide the range. Staged only when the range is wider than
 * one 128-byte line (below that the L1 serves each lookup instruction in one pass), fits
 * the slice, and holds a valid index per DSV4_TT_STAGE_PAGES_PER_HIT pages (else staging
 * reads more of the table than the lookups touch). nv, vmin, vmax: warp-reduced. */
static __device__ __forceinline__ tt_window tt_stage(const dsv4_tt_params_t &p, const int32_t *__restrict__ tab,
                                                     int32_t *stage, int nv, int vmin, int vmax, int lane) {
    tt_window w = {0u, 0u};
    if (nv == 0) return w;
    w.base = dsv4_idx_div((uint32_t)vmin, p.bs_div) & ~3u;
    const uint32_t end = min((dsv4_idx_div((uint32_t)vmax, p.bs_div) | 3u) + 1u, p.stage_end);
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
    const int32_t *tab = p.table + (int64_t)(rok ? req : 0) * p.table_stride;
    const uint32_t vlimit = rok ? p.vlimit : 0u; /* no valid index for an unknown request */
    int v[DSV4_TT_UNROLL][4];
    int nv = 0, vmin = 0x7FFFFFFF, vmax = -1;
    tt_load<VIN>(v, in, 0, lane, ncols, vlimit, nv, vmin, vmax);
    nv = dsv4_idx_warp_sum(nv);
    tt_window win = {0u, 0u};
    if (nv > 0) /* warp-uniform */
        win = tt_stage(p, tab, stage, nv, dsv4_idx_warp_min(vmin), dsv4_idx_warp_max(vmax), lane);
    int later = 0; /* this lane's valid count in segments 1, 2, ... */
    for (int seg = 0; seg < ncols; seg += DSV4_TT_SEG) {
        int next[DSV4_TT_UNROLL][4];
        const bool more = seg + DSV4_TT_SEG < ncols;
        if (more) tt_load<VIN>(next, in, seg + DSV4_TT_SEG, lane, ncols, vlimit, later, vmin, vmax);
        if (seg == 0 && win.len > 0) {
            dsv4_cp_async_wait<0>();
            __syncwarp(); /* every lane's chunks are in the slice */
        }
        tt_emit<VOUT, PACKED>(p, v, seg, lane, ncols, vlimit, tab, stage, win, dst);
        if (more) {
#pragma unroll
            for (int u = 0; u < DSV4_TT_UNROLL; ++u)
#pragma unroll
                for (int e = 0; e < 4; ++e) v[u][e] = next[u][e];
        }
    }
    __syncwarp(); /* the warp's next row may overwrite the slice */
    return ncols > DSV4_TT_SEG ? nv + dsv4_idx_warp_sum(later) : nv;
}

template <bool VEC>
__global__ void __launch_bounds__(DSV4_TT_THREADS, DSV4_TT_MIN_CTAS) tt_dense_kernel(const dsv4_tt_params_t p) {
    __shared__ __align__(16) int32_t stage[DSV4_TT_WARPS][DSV4_TT_STAGE_PAGES];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t t = (int64_t)blockIdx.x * DSV4_TT_WARPS + warp;
    if (t >= p.num_tokens) return; /* whole warps; the kernel has no CTA barrier */
    const int req = __ldg(p.token_to_req + t);
    const bool valid = __ldg(p.is_valid + t) != 0;
    const bool rok = (unsigned)req < (unsigned)p.num_reqs;
    const int n = tt_row<VEC, VEC, false>(p, t, req, rok, p.out + t * p.out_stride, p.topk, stage[warp], lane);
    if (lane == 0) p.lens[t] = (rok && valid) ? n : 0;
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
    static int smem_vec, smem_scalar;
    if (p->num_tokens == 0) return DSV4_STATUS_SUCCESS;
    const void *k = p->vec ? (const void *)tt_dense_kernel<true> : (const void *)tt_dense_kernel<false>;
    DSV4_TRY(dsv4_launch_prepare(op, k, 0, p->vec ? &smem_vec : &smem_scalar));
    const unsigned grid = (unsigned)(((int64_t)p->num_tokens + DSV4_TT_WARPS - 1) / DSV4_TT_WARPS);
    if (p->vec)
        tt_dense_kernel<true><<<grid, DSV4_TT_THREADS, 0, (cudaStream_t)stream>>>(*p);
    else
        tt_dense_kernel<false><<<grid, DSV4_TT_THREADS, 0, (cudaStream_t)stream>>>(*p);
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
        if (p->vec)
            tt_count_kernel<true><<<p->num_groups, DSV4_TT_THREADS, 0, s>>>(*p);
        else
            tt_count_kernel<false><<<p->num_groups, DSV4_TT_THREADS, 0, s>>>(*p);
        DSV4_TRY(dsv4_launch_status(op));
    }
    /* At least one CTA, so that indptr[0] is written when T = 0. */
    const unsigned grid = p->num_groups > 0 ? (unsigned)p->num_groups : 1u;
    if (p->vec)
        tt_pack_kernel<true><<<grid, DSV4_TT_THREADS, 0, s>>>(*p);
    else
        tt_pack_kernel<false><<<grid, DSV4_TT_THREADS, 0, s>>>(*p);
    return dsv4_launch_status(op);
}
