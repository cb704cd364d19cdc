/*
 * The fp8_ds_mla cache format, for host and device code of every family: the record's
 * byte layout inside a page, the slot -> (page, position) mapping, and the reference
 * decode of one record. include/dsv4/kvcache.h describes the format for users; the
 * constants (DSV4_KV_*) are public there.
 *
 * A page at `page * page_stride_bytes` holds P = page_tokens slots as two regions: the
 * data region, DSV4_KV_DATA_BYTES per slot (448 e4m3 codes of dims 0..447, then dims
 * 448..511 as little-endian bf16), then the scale region, DSV4_KV_SCALE_BYTES per slot
 * (7 UE8M0 bytes, one per 64 NoPE dims, and a pad byte). All offsets are 64-bit.
 */
#ifndef DSV4_COMMON_KV_FORMAT_H
#define DSV4_COMMON_KV_FORMAT_H

#include <stdint.h>

#include "dsv4/kvcache.h"
#include "dsv4/numerics.h"

/* Offset of slot p's data bytes in page `page`. */
DSV4_HD int64_t kv_data_offset(int64_t page, int64_t p, int64_t page_stride_bytes) {
    return page * page_stride_bytes + p * DSV4_KV_DATA_BYTES;
}
/* Offset of slot p's scale bytes (7 scales, then the pad byte) in a page of P slots. */
DSV4_HD int64_t kv_scale_offset(int64_t page, int64_t p, int64_t P, int64_t page_stride_bytes) {
    return page * page_stride_bytes + P * DSV4_KV_DATA_BYTES + p * DSV4_KV_SCALE_BYTES;
}

/* ---- slot -> (page, position): floor(n / P) by one multiply-high ------------------- *
 * With l = ceil(log2 P) and magic = floor(2^32 (2^l - P) / P) + 1, floor(n / P) =
 * (umulhi(n, magic) + n) >> l for every 0 <= n < 2^31 (the sum stays below 2^32). A
 * power-of-two P gets magic 1, so the quotient is n >> l. */
typedef struct kv_page_div {
    uint32_t magic;
    int32_t shift;
} kv_page_div_t;

/* P in [1, 2^31 - 1]. */
static inline kv_page_div_t kv_page_div_make(int64_t P) {
    kv_page_div_t d;
    int l = 0;
    while ((INT64_C(1) << l) < P) ++l;
    d.magic = (uint32_t)((((uint64_t)1 << 32) * (uint64_t)((INT64_C(1) << l) - P)) / (uint64_t)P + 1);
    d.shift = l;
    return d;
}

DSV4_HD uint32_t kv_page_div(uint32_t n, uint32_t magic, int32_t shift) {
#if defined(__CUDA_ARCH__)
    return (__umulhi(n, magic) + n) >> shift;
#else
    return (uint32_t)((((uint64_t)n * magic) >> 32) + n) >> shift;
#endif
}

/* ---- the reference decode of one record ------------------------------------------- *
 * row[d] = bf16(e4m3(code_d) * 2^(enc_k - 127)) for d < 448 (k = d / 64; exact for the
 * scales writers emit), the stored bf16 bits for d >= 448. NaN codes stay NaN. */
DSV4_HD void kv_record_decode(const uint8_t *data, const uint8_t *scales, uint16_t *row) {
    for (int d = 0; d < DSV4_KV_NOPE_DIM; ++d) row[d] = dsv4_dequant_e4m3(data[d], dsv4_ue8m0_to_f32(scales[d / 64]));
    for (int i = 0; i < DSV4_KV_ROPE_DIM; ++i)
        row[DSV4_KV_NOPE_DIM + i] =
            (uint16_t)(data[DSV4_KV_NOPE_DIM + 2 * i] | (data[DSV4_KV_NOPE_DIM + 2 * i + 1] << 8));
}

#endif /* DSV4_COMMON_KV_FORMAT_H */
