/*
 * kv_insert kernel: quantize bf16 rows and insert them into the paged fp8_ds_mla cache.
 *
 * Formula (spec/kv-cache.md section 4): for token t with slot = slot_mapping[t] in
 * [0, num_pages*P): page = slot / P, p = slot % P; per 64-dim block k < 7 of k[t]:
 * enc_k from the block's NaN-free amax, codes e4m3(clamp(x * 2^-e)), written at
 * page*stride + p*576 + 64k; enc_k at page*stride + P*576 + p*8 + k, pad byte 0; dims
 * 448..511 copied bit for bit to p*576 + 448.
 *
 * Decomposition: one warp per token, KV_INSERT_WARPS warps per CTA, grid = ceil(T / W).
 * Lane l holds elements 8l..8l+7 and 256+8l..256+8l+7 (kv_record.h). No shared memory,
 * no loop: the row comes in with two 16-byte loads per lane (issued together with the
 * slot load, so a warp has its 1 KB in flight at once), the block maxima are reduced
 * over 8 lanes with shuffles, and the record leaves as 8/16-byte stores (kv_warp.cuh).
 *
 * Numerics: integer and exactly-rounded fp32 only (kv_record.h); bit-exact with the CPU
 * reference. Byte offsets are 64-bit (page * page_stride_bytes passes 2^31).
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "kvcache/kv_common.h"
#include "kvcache/kv_insert_config.h"
#include "kvcache/kv_warp.cuh"

__global__ void __launch_bounds__(KV_INSERT_THREADS, KV_INSERT_MIN_BLOCKS)
    kv_insert_kernel(const uint16_t *__restrict__ k, int64_t k_stride_row, const int64_t *__restrict__ slot_mapping,
                     uint8_t *__restrict__ cache, int64_t num_tokens, int64_t P, int64_t page_stride_bytes,
                     int64_t num_pages) {
    const int lane = threadIdx.x & 31;
    const int64_t t = (int64_t)blockIdx.x * KV_INSERT_WARPS + (threadIdx.x >> 5);
    if (t >= num_tokens) return; /* warp-uniform */
    const int64_t slot = __ldg(slot_mapping + t);
    uint32_t w[8];
    kv_row_load<true>(k + t * k_stride_row, lane, w); /* rows < num_tokens exist even when skipped */
    if (slot < 0) return;
    const int64_t page = slot / P, p = slot - page * P;
    if (page >= num_pages) return;
    kv_warp_store_record(w, lane, cache + kv_data_offset(page, p, page_stride_bytes),
                         cache + kv_scale_offset(page, p, P, page_stride_bytes));
}

extern "C" dsv4_status_t kv_insert_launch(const dsv4_kv_insert_desc_t *d, const kv_insert_plan_t *plan,
                                          const dsv4_kv_insert_args_t *a, dsv4_stream_t stream) {
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare("kv_insert", (const void *)kv_insert_kernel, KV_INSERT_SMEM_BYTES, &smem_cache));
    kv_insert_kernel<<<(unsigned)plan->blocks, KV_INSERT_THREADS, KV_INSERT_SMEM_BYTES, (cudaStream_t)stream>>>(
        a->k, plan->k_stride_row, a->slot_mapping, a->cache, d->num_tokens, d->page_tokens, d->page_stride_bytes,
        d->num_pages);
    return dsv4_launch_status("kv_insert");
}
