/*
 * kv_gather kernel: dequantize paged fp8_ds_mla rows into the bf16 workspace.
 *
 * Formula (spec/kv-cache.md section 6): request b, L = seq_lens[b], G = gather_lens[b]
 * (or L), i in [0, min(G, out_rows - offset)): pos = L - G + i; page =
 * block_table[b, pos / P]; p = pos % P; out[b, offset + i, 64k + j] =
 * bf16(e4m3(code) * 2^(enc_k - 127)), out[b, offset + i, 448 + j] = stored bf16.
 * Negative pos, pos / P past the table width, or a page outside [0, num_pages): zeros.
 *
 * Decomposition: grid = (num_reqs, workers), KV_GATHER_WARPS warps per CTA. Warp w of
 * worker y starts at row y * W + w and strides by workers * W rows; each step handles
 * KV_GATHER_ROWS rows spaced by that stride. A row is one warp: lane l produces output
 * elements 8l..8l+7 and 256+8l..+7 (two 16-byte stores, 512 contiguous bytes per store
 * instruction). Lane l reads the 8 codes of chunk l (8-byte load) and, for lanes < 24,
 * the codes of chunk l+32 (8 bytes) or, for lanes 24..31, 16 RoPE bytes; every lane
 * reads the slot's 8-byte scale word (one broadcast transaction).
 *
 * Pipeline: per step, the block-table entries of all KV_GATHER_ROWS rows are loaded
 * first, then all their record loads are issued, then rows are decoded and stored, so a
 * warp keeps about KV_GATHER_ROWS * 584 bytes in flight. No shared memory.
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

__global__ void __launch_bounds__(KV_GATHER_THREADS, KV_GATHER_MIN_BLOCKS) kv_gather_kernel(const kv_gather_params_t prm) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t b = blockIdx.x;
    const int64_t L = __ldg(prm.seq_lens + b);
    const int64_t G = prm.gather_lens ? (int64_t)__ldg(prm.gather_lens + b) : L;
    const int64_t room = prm.out_rows - prm.offset;
    const int64_t rows = G < room ? G : room;
    if (rows <= 0) return; /* CTA-uniform */
    const int64_t start = L - G;
    const int32_t *bt = prm.block_table + b * prm.block_table_stride;
    uint16_t *out = prm.out + b * prm.out_stride_req + prm.offset * prm.out_stride_row;
    const int64_t nw = (int64_t)gridDim.y * KV_GATHER_WARPS;

    for (int64_t i = (int64_t)blockIdx.y * KV_GATHER_WARPS + warp; i < rows; i += KV_GATHER_ROWS * nw) {
        int64_t page[KV_GATHER_ROWS], p[KV_GATHER_ROWS];
#pragma unroll
        for (int r = 0; r < KV_GATHER_ROWS; ++r) { /* block-table lookups of all rows first */
            const int64_t pos = start + i + r * nw;
            page[r] = -1;
            p[r] = 0;
            if (i + r * nw < rows && pos >= 0) {
                /* 0 <= pos < 2^31 and P <= 2^24: a 32-bit division is exact and cheaper */
                const int64_t lp = (int64_t)((uint32_t)pos / (uint32_t)prm.P);
                p[r] = pos - lp * prm.P;
                if (lp < prm.block_table_width) page[r] = __ldg(bt + lp);
            }
        }
        uint2 sc[KV_GATHER_ROWS], d0[KV_GATHER_ROWS];
        uint4 d1[KV_GATHER_ROWS];
#pragma unroll
        for (int r = 0; r < KV_GATHER_ROWS; ++r) { /* then every record load */
            sc[r] = d0[r] = make_uint2(0, 0);
            d1[r] = make_uint4(0, 0, 0, 0);
            if (page[r] >= 0 && page[r] < prm.num_pages) {
                const uint8_t *data = prm.cache + kv_data_offset(page[r], p[r], prm.page_stride_bytes);
                sc[r] = __ldg(reinterpret_cast<const uint2 *>(
                    prm.cache + kv_scale_offset(page[r], p[r], prm.P, prm.page_stride_bytes)));
                d0[r] = __ldg(reinterpret_cast<const uint2 *>(data + 8 * lane));
                if (lane < KV_LANE_ROPE_FIRST) {
                    const uint2 t = __ldg(reinterpret_cast<const uint2 *>(data + 256 + 8 * lane));
                    d1[r] = make_uint4(t.x, t.y, 0, 0);
                } else {
                    d1[r] = __ldg(reinterpret_cast<const uint4 *>(data + DSV4_KV_NOPE_DIM +
                                                                  16 * (lane - KV_LANE_ROPE_FIRST)));
                }
            }
        }
#pragma unroll
        for (int r = 0; r < KV_GATHER_ROWS; ++r) { /* decode and store */
            if (i + r * nw >= rows) continue;
            uint32_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0}; /* invalid position: a zero row */
            if (page[r] >= 0 && page[r] < prm.num_pages) {
                const uint32_t sh = 8 * (lane >> 3); /* block lane/8 of each half */
                kv_dequant8(d0[r].x, d0[r].y, (sc[r].x >> sh) & 0xFFu, v);
                if (lane < KV_LANE_ROPE_FIRST) {
                    kv_dequant8(d1[r].x, d1[r].y, (sc[r].y >> sh) & 0xFFu, v + 4);
                } else {
                    v[4] = d1[r].x, v[5] = d1[r].y, v[6] = d1[r].z, v[7] = d1[r].w;
                }
            }
            kv_row_store(out + (i + r * nw) * prm.out_stride_row, lane, v);
        }
    }
}

extern "C" dsv4_status_t kv_gather_launch(const dsv4_kv_gather_desc_t *d, const kv_gather_plan_t *plan,
                                          const dsv4_kv_gather_args_t *a, dsv4_stream_t stream) {
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare("kv_gather", (const void *)kv_gather_kernel, KV_GATHER_SMEM_BYTES, &smem_cache));
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
    const dim3 grid((unsigned)d->num_reqs, (unsigned)plan->workers);
    kv_gather_kernel<<<grid, KV_GATHER_THREADS, KV_GATHER_SMEM_BYTES, (cudaStream_t)stream>>>(prm);
    return dsv4_launch_status("kv_gather");
}
