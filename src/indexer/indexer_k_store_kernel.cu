/*
 * indexer_k_store kernel: the key's RMSNorm, RoPE, e4m3 and the paged indexer cache.
 *
 * Formula (include/dsv4/indexer.h): a row t is stored when its slot is inside the cache
 * and positions[t] + 1 is a multiple of ratio; then ssq by 32 four-dim partials and a
 * halving tree, rr = 1 / sqrtf(ssq / 128 + eps), y = bf16((x * rr) * gamma), the RoPE
 * pairs of dims 64..127 rotated at (pos / ratio) * ratio, the scale exponent e from
 * max |y|, codes e4m3(clamp(y * 2^-e)); 128 code bytes at page + q*128 and 2^e as fp32
 * at page + P*128 + q*4.
 *
 * Decomposition: one warp per key row (IDX_K_ROWS_PER_CTA warps per CTA, striding over
 * the rows). Lane l owns dims 4l .. 4l + 3: one 8-byte load of k_pre and of gamma, the
 * partial p_l of the contract and the warp's pieces of indexer_k_warp.cuh: rr by a
 * 5-step xor butterfly (16, 8, 4, 2, 1) that leaves the tree's sum in every lane (each
 * step adds the same two values in either order), then the state (the row maximum by the
 * same butterfly, one 4-byte code store per lane, the scale from lane 0). Lanes 16..31 hold the
 * RoPE dims (pairs 2(l-16), 2(l-16) + 1) and load their cos and sin as 8-byte read-only
 * loads. The store test reads positions and slot_mapping once per warp, so skipped rows
 * cost 16 bytes. No shared memory, no synchronization.
 *
 * Numerics: indexer_math.h, the reference's own functions (IEEE __f*_rn operations, no
 * contraction; bf16 and e4m3 by the integer converters of numerics.h). Bit-exact with the
 * CPU reference.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "indexer/indexer_common.h"
#include "indexer/indexer_config.h"
#include "indexer/indexer_k_warp.cuh"
#include "indexer/indexer_math.h"

typedef struct {
    const uint16_t *k_pre, *gamma;
    const int64_t *positions, *slot_mapping;
    const float *cos_sin;
    uint8_t *cache;
    int64_t rows, k_stride_row, ratio, max_position, page_tokens, page_stride_bytes, slots;
    float eps;
} idx_k_params_t;

__global__ void __launch_bounds__(IDX_K_THREADS, IDX_K_MIN_BLOCKS) idx_k_kernel(const idx_k_params_t prm) {
    const int l = threadIdx.x % 32;
    const int64_t nwarps = (int64_t)gridDim.x * IDX_K_ROWS_PER_CTA;
    for (int64_t t = ((int64_t)blockIdx.x * IDX_K_THREADS + threadIdx.x) / 32; t < prm.rows; t += nwarps) {
        const int64_t pos = __ldg(prm.positions + t), slot = __ldg(prm.slot_mapping + t);
        if (!idx_k_stored(pos, slot, prm.ratio, prm.slots)) continue; /* uniform over the warp */
        const uint2 kv = __ldg(reinterpret_cast<const uint2 *>(prm.k_pre + t * prm.k_stride_row) + l);
        const uint2 gv = __ldg(reinterpret_cast<const uint2 *>(prm.gamma) + l);
        const float x[4] = {dsv4_bf16_to_f32((uint16_t)kv.x), dsv4_bf16_to_f32((uint16_t)(kv.x >> 16)),
                            dsv4_bf16_to_f32((uint16_t)kv.y), dsv4_bf16_to_f32((uint16_t)(kv.y >> 16))};
        const float g[4] = {dsv4_bf16_to_f32((uint16_t)gv.x), dsv4_bf16_to_f32((uint16_t)(gv.x >> 16)),
                            dsv4_bf16_to_f32((uint16_t)gv.y), dsv4_bf16_to_f32((uint16_t)(gv.y >> 16))};
        const float rr = idx_k_warp_rms_inv(x[0], x[1], x[2], x[3], prm.eps);
        uint32_t w0 = dsv4_f32_to_bf16(idx_k_norm(x[0], rr, g[0])) |
                      ((uint32_t)dsv4_f32_to_bf16(idx_k_norm(x[1], rr, g[1])) << 16);
        uint32_t w1 = dsv4_f32_to_bf16(idx_k_norm(x[2], rr, g[2])) |
                      ((uint32_t)dsv4_f32_to_bf16(idx_k_norm(x[3], rr, g[3])) << 16);
        if (l >= 16) { /* RoPE dims: pairs 2(l - 16), 2(l - 16) + 1 */
            const int64_t p = idx_k_rope_pos(pos, prm.ratio);
            float2 c = make_float2(1.0f, 1.0f), s = make_float2(0.0f, 0.0f);
            if (idx_pos_in(p, prm.max_position)) {
                const float2 *cs = reinterpret_cast<const float2 *>(prm.cos_sin + p * 64);
                c = __ldg(cs + (l - 16));
                s = __ldg(cs + 16 + (l - 16));
            }
            w0 = idx_rope_word(w0, c.x, s.x);
            w1 = idx_rope_word(w1, c.y, s.y);
        }
        idx_k_warp_store(w0, w1, l, prm.cache + slot / prm.page_tokens * prm.page_stride_bytes, prm.page_tokens,
                         slot % prm.page_tokens);
    }
}

extern "C" dsv4_status_t idx_k_launch(const dsv4_indexer_k_store_desc_t *d, const idx_k_plan_t *plan,
                                      const dsv4_indexer_k_store_args_t *a, dsv4_stream_t stream) {
    static int smem;
    DSV4_TRY(dsv4_launch_prepare("indexer_k_store", (const void *)idx_k_kernel, IDX_SMEM_BYTES, &smem));
    const idx_k_params_t prm = {a->k_pre,    a->gamma,        a->positions,   a->slot_mapping,
                                a->cos_sin,  a->cache,        d->num_tokens,  plan->k_stride_row,
                                d->ratio,    d->max_position, d->page_tokens, d->page_stride_bytes,
                                plan->slots, d->eps};
    dsv4_launch(idx_k_kernel, plan->blocks, IDX_K_THREADS, IDX_SMEM_BYTES, (cudaStream_t)stream, prm);
    return dsv4_launch_status("indexer_k_store");
}
