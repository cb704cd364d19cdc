/*
 * A warp that holds one 128-dim key (lane l: dims 4l .. 4l + 3): its RMS factor, and its
 * 132-byte indexer state from the bf16 key as two pair words per lane: the row maximum by
 * an xor butterfly (16, 8, 4, 2, 1; every lane ends with it), one 4-byte code store per
 * lane (the state's 128 code bytes as one line) and the scale 2^e as fp32 from lane 0.
 * indexer_math.h's idx_k_state_write is the same state for the references.
 */
#ifndef DSV4_INDEXER_INDEXER_K_WARP_CUH
#define DSV4_INDEXER_INDEXER_K_WARP_CUH

#include "indexer/indexer_math.h"

/* rr of the key whose dims 4l .. 4l + 3 lane l holds (all 32 lanes): the contract's 32
 * partials summed by the butterfly, which leaves the halving tree's bits in every lane. */
static __device__ __forceinline__ float idx_k_warp_rms_inv(float x0, float x1, float x2, float x3, float eps) {
    float ssq = idx_sumsq_part(x0, x1, x2, x3);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ssq = IDX_ADD(ssq, __shfl_xor_sync(0xffffffffu, ssq, o));
    return idx_rms_inv(ssq, eps);
}

/* page: the page's first byte; P states a page; q the state's slot in it. All 32 lanes. */
static __device__ __forceinline__ void idx_k_warp_store(uint32_t w0, uint32_t w1, int l, uint8_t *page, int64_t P,
                                                        int64_t q) {
    const float y[4] = {dsv4_bf16_to_f32((uint16_t)w0), dsv4_bf16_to_f32((uint16_t)(w0 >> 16)),
                        dsv4_bf16_to_f32((uint16_t)w1), dsv4_bf16_to_f32((uint16_t)(w1 >> 16))};
    float amax = idx_absmax(idx_absmax(idx_absmax(idx_absmax(0.0f, y[0]), y[1]), y[2]), y[3]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = idx_absmax(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const uint8_t enc = dsv4_ue8m0_from_amax(amax);
    const float inv = dsv4_ue8m0_inv_scale(enc);
    const uint32_t codes = (uint32_t)dsv4_e4m3_quantize(y[0], inv) | ((uint32_t)dsv4_e4m3_quantize(y[1], inv) << 8) |
                           ((uint32_t)dsv4_e4m3_quantize(y[2], inv) << 16) |
                           ((uint32_t)dsv4_e4m3_quantize(y[3], inv) << 24);
    reinterpret_cast<uint32_t *>(page + q * DSV4_INDEXER_HEAD_DIM)[l] = codes;
    if (l == 0) /* 2^e as fp32 */
        *reinterpret_cast<uint32_t *>(page + P * DSV4_INDEXER_HEAD_DIM + q * 4) = (uint32_t)enc << 23;
}

#endif /* DSV4_INDEXER_INDEXER_K_WARP_CUH */
