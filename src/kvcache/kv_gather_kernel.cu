/*
 * kv_gather kernel: dequantize paged fp8_ds_mla rows into the bf16 workspace.
 *
 * Formula (include/dsv4/kvcache.h): request b, L = seq_lens[b], G = gather_lens[b]
 * (or L), i in [0, min(G, out_rows - offset)): pos = L - G + i; page =
 * block_table[b, pos / P]; p = pos % P; out[b, offset + i, 64k + j] =
 * bf16(e4m3(code) * 2^(enc_k - 127)), out[b, offset + i, 448 + j] = stored bf16.
 * Negative pos, pos / P past the table width, or a page outside [0, num_pages): zeros.
 *
 * Decomposition: grid = (num_reqs, workers), KV_GATHER_WARPS warps per CTA, the grid
 * capped at one resident wave (kv_gather_config.h). Warp w of worker y takes rows y * W + w,
 * + nw, + 2 nw, ... (nw = workers * W). A row is one warp: lane l produces output elements
 * 8l..8l+7 and 256+8l..+7 (two 16-byte stores, 512 contiguous bytes per store
 * instruction). Lane l reads the 8 codes of chunk l (8-byte load) and, for lanes < 24,
 * the codes of chunk l+32 (8 bytes) or, for lanes 24..31, 16 RoPE bytes; every lane
 * reads the slot's 8-byte scale word (one broadcast transaction).
 *
 * Pipeline: lane j looks up the block-table entry of the warp's j-th next row (one load
 * for 32 rows), then the warp walks those rows, issuing the record loads of row k+1
 * before it decodes and stores row k, so a record is always in flight. Without
 * gather_lens the first position is 0, so the block-table loads do not wait for seq_lens
 * (a template parameter, to keep that dependency out of the code).
 *
 * Numerics: scales decoded by the exponent shift. For enc 1..254 the codes go through
 * dsv4_e4m3x4_dequant_bf16 (prim/fp8.cuh: two bf16x2 FMAs per pair, exact, equal to
 * dsv4_dequant_e4m3 there, NaN codes -> 0x7FFF); enc 0 and 255 (no writer emits them for
 * finite data) take the scalar dsv4_dequant_e4m3, so every input matches the reference
 * bit for bit. RoPE bytes are copied. All offsets 64-bit.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "kvcache/kv_common.h"
#include "kvcache/kv_gather_config.h"
#include "kvcache/kv_warp.cuh"
#include "prim/fp8.cuh"

typedef struct {
    const uint8_t *cache;
    const int32_t *seq_lens, *gather_lens, *block_table;
    uint16_t *out;
    int64_t block_table_width, block_table_stride, out_stride_req, out_stride_row, offset, out_rows;
    int64_t P, page_stride_bytes, num_pages;
} kv_gather_params_t;

/* One row's record as a lane holds it: the scale word, the codes of chunk l, and the
 * codes of chunk l+32 (lanes < 24, in .x/.y) or 16 RoPE bytes (lanes 24..31). */
typedef struct {
    uint2 sc, d0;
    uint4 d1;
} kv_gather_rec_t;

/* Issue the loads of slot p of page `page`; page < 0 (a zero row) loads nothing. */
static __device__ __forceinline__ kv_gather_rec_t kv_gather_load(const kv_gather_params_t &prm, int32_t page, int32_t p,
                                                                 int lane) {
    kv_gather_rec_t r = {make_uint2(0, 0), make_uint2(0, 0), make_uint4(0, 0, 0, 0)};
    if (page < 0) return r;
    const uint8_t *data = prm.cache + kv_data_offset(page, p, prm.page_stride_bytes);
    r.sc = __ldg(reinterpret_cast<const uint2 *>(prm.cache + kv_scale_offset(page, p, prm.P, prm.page_stride_bytes)));
    r.d0 = __ldg(reinterpret_cast<const uint2 *>(data + 8 * lane));
    if (lane < KV_LANE_ROPE_FIRST) {
        const uint2 t = __ldg(reinterpret_cast<const uint2 *>(data + 256 + 8 * lane));
        r.d1 = make_uint4(t.x, t.y, 0, 0);
    } else {
        r.d1 = __ldg(reinterpret_cast<const uint4 *>(data + DSV4_KV_NOPE_DIM + 16 * (lane - KV_LANE_ROPE_FIRST)));
    }
    return r;
}

/* Eight codes of one 64-dim block with scale byte enc -> four bf16x2 words. */
static __device__ __forceinline__ void kv_dequant8(uint32_t c0, uint32_t c1, uint32_t enc, uint32_t v[4]) {
    if (enc - 1u < 254u) {
        const uint32_t sc = dsv4_ue8m0_bf16x2(enc);
        dsv4_e4m3x4_dequant_bf16(c0, sc, v);
        dsv4_e4m3x4_dequant_bf16(c1, sc, v + 2);
    } else {
        const float scale = dsv4_ue8m0_to_f32((uint8_t)enc);
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            const uint32_t word = m < 2 ? c0 : c1, sh = 16 * (m & 1);
            v[m] = dsv4_dequant_e4m3((uint8_t)(word >> sh), scale) |
                   ((uint32_t)dsv4_dequant_e4m3((uint8_t)(word >> (sh + 8)), scale) << 16);
        }
    }
}

/* Decode a loaded record (or write zeros for a row without one) into `row`. */
static __device__ __forceinline__ void kv_gather_store(const kv_gather_rec_t &r, bool valid, int lane, uint16_t *row) {
    uint32_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (valid) {
        const uint32_t sh = 8 * (lane >> 3); /* block lane/8 of each half */
        kv_dequant8(r.d0.x, r.d0.y, (r.sc.x >> sh) & 0xFFu, v);
        if (lane < KV_LANE_ROPE_FIRST) {
            kv_dequant8(r.d1.x, r.d1.y, (r.sc.y >> sh) & 0xFFu, v + 4);
        } else {
            v[4] = r.d1.x, v[5] = r.d1.y, v[6] = r.d1.z, v[7] = r.d1.w;
        }
    }
    kv_row_store(row, lane, v);
}

template <bool GATHER_LENS>
__global__ void __launch_bounds__(KV_GATHER_THREADS, KV_GATHER_MIN_BLOCKS)
    kv_gather_kernel(const kv_gather_params_t prm) {
    const int lane = threadIdx.x & 31;
    const int64_t b = blockIdx.x;
    const int64_t room = prm.out_rows - prm.offset; /* rows <= room */
    const int64_t nw = (int64_t)gridDim.y * KV_GATHER_WARPS;
    const int64_t first = (int64_t)blockIdx.y * KV_GATHER_WARPS + (threadIdx.x >> 5);
    if (first >= room) return; /* warp-uniform, as everything below */
    const int64_t L = __ldg(prm.seq_lens + b);
    int64_t G = L, start = 0;
    if (GATHER_LENS) {
        G = __ldg(prm.gather_lens + b);
        start = L - G;
    }
    const int32_t *bt = prm.block_table + b * prm.block_table_stride;
    uint16_t *out = prm.out + b * prm.out_stride_req + prm.offset * prm.out_stride_row;

    for (int64_t base = first; base < room; base += 32 * nw) {
        /* Lane j: page (-1: a zero row) and slot of row base + j * nw. */
        int32_t page = -1, p = 0;
        const int64_t i = base + lane * nw, pos = start + i;
        if (i < room && pos >= 0) {
            /* 0 <= pos < 2^31 and P <= 2^24: a 32-bit division is exact and cheaper */
            const uint32_t lp = (uint32_t)pos / (uint32_t)prm.P;
            p = (int32_t)(pos - (int64_t)lp * prm.P);
            if (lp < prm.block_table_width) {
                const int32_t id = __ldg(bt + lp);
                page = id < prm.num_pages ? id : -1;
            }
        }
        const int64_t rows = G < room ? G : room; /* the first use of seq_lens */
        if (base >= rows) break;
        int64_t row = base;
        kv_gather_rec_t cur =
            kv_gather_load(prm, __shfl_sync(KV_FULL_MASK, page, 0), __shfl_sync(KV_FULL_MASK, p, 0), lane);
        for (int k = 0;; ++k) {
            const int64_t next = row + nw;
            const bool more = k + 1 < 32 && next < rows;
            const int32_t next_page = __shfl_sync(KV_FULL_MASK, page, (k + 1) & 31);
            const int32_t next_p = __shfl_sync(KV_FULL_MASK, p, (k + 1) & 31);
            kv_gather_rec_t nxt = {make_uint2(0, 0), make_uint2(0, 0), make_uint4(0, 0, 0, 0)};
            if (more) nxt = kv_gather_load(prm, next_page, next_p, lane); /* in flight during the store */
            kv_gather_store(cur, __shfl_sync(KV_FULL_MASK, page, k) >= 0, lane, out + row * prm.out_stride_row);
            if (!more) break;
            row = next;
            cur = nxt;
        }
    }
}

extern "C" dsv4_status_t kv_gather_launch(const dsv4_kv_gather_desc_t *d, const kv_gather_plan_t *plan,
                                          const dsv4_kv_gather_args_t *a, dsv4_stream_t stream) {
    static int smem_cache[2];
    const bool glens = a->gather_lens != NULL;
    const void *kernel = glens ? (const void *)kv_gather_kernel<true> : (const void *)kv_gather_kernel<false>;
    DSV4_TRY(dsv4_launch_prepare("kv_gather", kernel, KV_GATHER_SMEM_BYTES, &smem_cache[glens]));
    int sms = 0;
    DSV4_TRY(kv_sm_count("kv_gather", &sms));
    /* One resident wave over all requests; at least one worker per request. */
    const int64_t cap = (int64_t)sms * KV_GATHER_CTAS_PER_SM / d->num_reqs;
    const int64_t workers = plan->workers < cap ? plan->workers : (cap > 1 ? cap : 1);
    kv_gather_params_t prm;
    prm.cache = a->cache;
    prm.seq_lens = a->seq_lens;
    prm.gather_lens = a->gather_lens;
    prm.block_table = a->block_table;
    prm.out = a->out;
    prm.block_table_width = d->block_table_width;
    prm.block_table_stride = plan->block_table_stride;
    prm.out_stride_req = plan->out_stride_req;
    prm.out_stride_row = plan->out_stride_row;
    prm.offset = d->offset;
    prm.out_rows = d->out_rows;
    prm.P = d->page_tokens;
    prm.page_stride_bytes = d->page_stride_bytes;
    prm.num_pages = d->num_pages;
    const dim3 grid((unsigned)d->num_reqs, (unsigned)workers);
    if (glens)
        dsv4_launch(kv_gather_kernel<true>, grid, KV_GATHER_THREADS, KV_GATHER_SMEM_BYTES, (cudaStream_t)stream, prm);
    else dsv4_launch(kv_gather_kernel<false>, grid, KV_GATHER_THREADS, KV_GATHER_SMEM_BYTES, (cudaStream_t)stream, prm);
    return dsv4_launch_status("kv_gather");
}
