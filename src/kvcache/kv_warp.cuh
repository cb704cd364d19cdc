/*
 * Warp-level pieces the kvcache kernels share: a 512-element bf16 row in registers in the
 * lane layout of kv_record.h (lane l: chunk l in w[0..3], chunk l+32 in w[4..7]), and the
 * quantize+store of such a row as one fp8_ds_mla record (insert and the SWA writer's kv
 * side call the same function, so their bytes cannot drift apart).
 *
 * Memory access per row: two 16-byte loads per lane, each instruction covering 512
 * contiguous bytes; the record goes out as one 8-byte store per lane for the codes of
 * chunk l (256 contiguous bytes per instruction), one 8-byte store for chunk l+32 on
 * lanes 0..23 (192 bytes), one 16-byte store of RoPE bytes on lanes 24..31 (128 bytes),
 * and one 8-byte store of the scale word from lane 0. Every address is aligned because
 * the cache base is 16-byte aligned and page strides are multiples of 16.
 */
#ifndef DSV4_KVCACHE_KV_WARP_CUH
#define DSV4_KVCACHE_KV_WARP_CUH

#include <stdint.h>

#include "kvcache/kv_record.h"

#define KV_FULL_MASK 0xFFFFFFFFu

/* Row in registers; NC = read-only for the kernel's lifetime (ld.global.nc). */
template <bool NC> static __device__ __forceinline__ void kv_row_load(const uint16_t *row, int lane, uint32_t w[8]) {
    const uint4 *p = reinterpret_cast<const uint4 *>(row);
    const uint4 a = NC ? __ldg(p + lane) : p[lane];
    const uint4 b = NC ? __ldg(p + 32 + lane) : p[32 + lane];
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
    w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
}

static __device__ __forceinline__ void kv_row_store(uint16_t *row, int lane, const uint32_t w[8]) {
    uint4 *p = reinterpret_cast<uint4 *>(row);
    p[lane] = make_uint4(w[0], w[1], w[2], w[3]);
    p[32 + lane] = make_uint4(w[4], w[5], w[6], w[7]);
}

/* Quantize the bf16 row w (all 32 lanes) and write its record: `data` = the slot's 576
 * data bytes, `scales` = its 8 scale bytes. Block amax: each lane's partial maximum,
 * then a butterfly over the 8 lanes of the block (xor 1, 2, 4), so all of them hold
 * the same amax and derive the same enc; NaN never enters (kv_amax_step skips it). */
static __device__ __forceinline__ void kv_warp_store_record(const uint32_t w[8], int lane, uint8_t *data,
                                                            uint8_t *scales) {
    float a0 = 0.0f, a1 = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        a0 = kv_amax_word(a0, w[i]);
        a1 = kv_amax_word(a1, w[4 + i]);
    }
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) {
        a0 = fmaxf(a0, __shfl_xor_sync(KV_FULL_MASK, a0, o));
        a1 = fmaxf(a1, __shfl_xor_sync(KV_FULL_MASK, a1, o));
    }
    /* Block lane/8 from the first chunk, block 4 + lane/8 from the second (lanes 24..31:
     * RoPE, their e1 is computed and never used). */
    const uint32_t e0 = dsv4_ue8m0_from_amax(a0), e1 = dsv4_ue8m0_from_amax(a1);
    const float inv0 = dsv4_ue8m0_inv_scale((uint8_t)e0), inv1 = dsv4_ue8m0_inv_scale((uint8_t)e1);

    *reinterpret_cast<uint2 *>(data + 8 * lane) =
        make_uint2(kv_quant_word2(w[0], w[1], inv0), kv_quant_word2(w[2], w[3], inv0));
    if (lane < KV_LANE_ROPE_FIRST) {
        *reinterpret_cast<uint2 *>(data + 256 + 8 * lane) =
            make_uint2(kv_quant_word2(w[4], w[5], inv1), kv_quant_word2(w[6], w[7], inv1));
    } else {
        /* RoPE dims 448 + 8j .. +7 (j = lane - 24), bit for bit, at byte 448 + 16j. */
        *reinterpret_cast<uint4 *>(data + DSV4_KV_NOPE_DIM + 16 * (lane - KV_LANE_ROPE_FIRST)) =
            make_uint4(w[4], w[5], w[6], w[7]);
    }
    /* Scale word: enc of block k at byte k (k < 4 from lanes 0, 8, 16, 24 first chunk;
     * k = 4..6 from lanes 0, 8, 16 second chunk), pad byte 7 = 0. */
    const uint32_t lo = __shfl_sync(KV_FULL_MASK, e0, 0) | (__shfl_sync(KV_FULL_MASK, e0, 8) << 8) |
                        (__shfl_sync(KV_FULL_MASK, e0, 16) << 16) | (__shfl_sync(KV_FULL_MASK, e0, 24) << 24);
    const uint32_t hi = __shfl_sync(KV_FULL_MASK, e1, 0) | (__shfl_sync(KV_FULL_MASK, e1, 8) << 8) |
                        (__shfl_sync(KV_FULL_MASK, e1, 16) << 16);
    if (lane == 0) *reinterpret_cast<uint2 *>(scales) = make_uint2(lo, hi);
}

/* cos/sin of the four RoPE pairs 4j .. 4j+3 that lane 24 + j holds (c[m], s[m] for pair
 * 4j + m), at position pos; identity outside [0, max_position). Lanes below 24 get the
 * identity without loading. */
static __device__ __forceinline__ void kv_rope_coeffs(const float *cos_sin, int64_t pos, int64_t max_position,
                                                      int lane, float c[4], float s[4]) {
    float4 cv = make_float4(1.0f, 1.0f, 1.0f, 1.0f), sv = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (lane >= KV_LANE_ROPE_FIRST && pos >= 0 && pos < max_position) {
        const float4 *row = reinterpret_cast<const float4 *>(cos_sin + pos * DSV4_KV_ROPE_DIM);
        const int j = lane - KV_LANE_ROPE_FIRST;
        cv = __ldg(row + j);     /* cos of pairs 4j .. 4j+3 (columns 0..31)  */
        sv = __ldg(row + 8 + j); /* sin of the same pairs (columns 32..63)   */
    }
    c[0] = cv.x, c[1] = cv.y, c[2] = cv.z, c[3] = cv.w;
    s[0] = sv.x, s[1] = sv.y, s[2] = sv.z, s[3] = sv.w;
}

#endif /* DSV4_KVCACHE_KV_WARP_CUH */
