/*
 * The fp8_ds_mla record, element by element, for the CPU references and the kernels
 * alike (compiled as static inline C on the host and __host__ __device__ by nvcc).
 *
 * This is the family's ONE copy of the per-row rules: the quantization of a 64-dim
 * block (insert and the SWA writer), the GPT-J RoPE evaluation form (SWA writer, q and
 * kv), and the q-side RMS factor. The references call them in plain loops; the kernels
 * call the same functions on the elements a lane holds.
 *
 * Quantization (spec/numerics.md 4.1): amax = max |x| with NaN left out, enc =
 * dsv4_ue8m0_from_amax(amax) (it applies the 1e-4 floor), inv = dsv4_ue8m0_inv_scale(enc),
 * code = e4m3(clamp(x * inv, -448, 448)) with NaN -> 448.
 * kv_quant_elem is that last step for a bf16 input. It equals dsv4_e4m3_quantize bit for
 * bit on its whole domain (every bf16 x, every enc: tests/kvcache checks all 65,536 x 256
 * pairs) but costs about a third of the instructions, which keeps the insert kernel
 * memory-bound: after the clamp, |v| * 2^-120 puts the e4m3 minimum normal 2^-6 on the
 * fp32 minimum normal, so e4m3 normals and subnormals alike round at bit 20 of the fp32
 * pattern (one integer round-to-nearest-even). That is exact because v = x * 2^-e has at
 * most 8 significant bits wherever a nonzero code can come out, so the scaling by 2^-120
 * itself never rounds there.
 */
#ifndef DSV4_KVCACHE_KV_RECORD_H
#define DSV4_KVCACHE_KV_RECORD_H

#include <math.h>
#include <stdint.h>

#include "dsv4/kvcache.h"
#include "dsv4/numerics.h"

/* fp32 operations that nvcc must not contract into FMAs: the references round each
 * product and sum on its own, so the kernels do too. */
#if defined(__CUDA_ARCH__)
#define KV_FMUL(a, b) __fmul_rn((a), (b))
#define KV_FADD(a, b) __fadd_rn((a), (b))
#define KV_FDIV(a, b) __fdiv_rn((a), (b))
#define KV_FSQRT(a) __fsqrt_rn(a)
#else
#define KV_FMUL(a, b) ((a) * (b))
#define KV_FADD(a, b) ((a) + (b))
#define KV_FDIV(a, b) ((a) / (b))
#define KV_FSQRT(a) sqrtf(a)
#endif

/* ---- addressing (spec/kv-cache.md section 3); all byte offsets 64-bit --------------- */
/* Offset of slot p's 576 data bytes (448 codes, then 128 RoPE bytes). */
DSV4_HD int64_t kv_data_offset(int64_t page, int64_t p, int64_t page_stride_bytes) {
    return page * page_stride_bytes + p * DSV4_KV_DATA_BYTES;
}
/* Offset of slot p's 8 scale bytes (7 scales, then the pad byte). */
DSV4_HD int64_t kv_scale_offset(int64_t page, int64_t p, int64_t P, int64_t page_stride_bytes) {
    return page * page_stride_bytes + P * DSV4_KV_DATA_BYTES + p * DSV4_KV_SCALE_BYTES;
}

/* ---- quantization of a 64-dim block ------------------------------------------------ */
/* One step of the block maximum (amax is never NaN): a NaN element leaves amax unchanged.
 * The host compares, because the C library's fmaxf returns NaN for a signalling NaN
 * argument (and a NaN amax would drop every earlier element); the GPU's max.f32 returns
 * the other operand for any NaN, so there fmaxf is the same function in one instruction. */
DSV4_HD float kv_amax_step(float amax, uint16_t x) {
    const float v = fabsf(dsv4_bf16_to_f32(x));
#if defined(__CUDA_ARCH__)
    return fmaxf(amax, v);
#else
    return v > amax ? v : amax;
#endif
}
/* Two bf16 elements packed in a word (low half first). */
DSV4_HD float kv_amax_word(float amax, uint32_t w) {
    return kv_amax_step(kv_amax_step(amax, (uint16_t)w), (uint16_t)(w >> 16));
}

/* e4m3(clamp(x * inv, -448, 448)), NaN -> 0x7E: dsv4_e4m3_quantize for a bf16 x. */
DSV4_HD uint32_t kv_quant_elem(uint16_t x, float inv) {
    float v = KV_FMUL(dsv4_bf16_to_f32(x), inv);
    v = v < 448.0f ? v : 448.0f; /* NaN -> 448, as the quantizer's clamp */
    v = v > -448.0f ? v : -448.0f;
    const uint32_t sign = (dsv4_f32_bits(v) >> 24) & 0x80u;
    uint32_t b = dsv4_f32_bits(KV_FMUL(fabsf(v), 0x1p-120f));
    b += 0x7FFFFu + ((b >> 20) & 1u); /* round to nearest even at bit 20 */
    return (b >> 20) | sign;
}
/* Four codes (little-endian byte order) from the bf16 pairs w0, w1. */
DSV4_HD uint32_t kv_quant_word2(uint32_t w0, uint32_t w1, float inv) {
    return kv_quant_elem((uint16_t)w0, inv) | (kv_quant_elem((uint16_t)(w0 >> 16), inv) << 8) |
           (kv_quant_elem((uint16_t)w1, inv) << 16) | (kv_quant_elem((uint16_t)(w1 >> 16), inv) << 24);
}

/* The whole record of one bf16 row, as the references write it: data[0..447] codes,
 * data[448..575] the RoPE dims' bf16 bytes, scales[0..6] enc, scales[7] = 0. */
DSV4_HD void kv_quant_row(const uint16_t *row, uint8_t *data, uint8_t *scales) {
    for (int k = 0; k < DSV4_KV_NOPE_DIM / 64; ++k) {
        float amax = 0.0f;
        for (int i = 0; i < 64; ++i) amax = kv_amax_step(amax, row[64 * k + i]);
        const uint8_t enc = dsv4_ue8m0_from_amax(amax);
        const float inv = dsv4_ue8m0_inv_scale(enc);
        for (int i = 0; i < 64; ++i) data[64 * k + i] = (uint8_t)kv_quant_elem(row[64 * k + i], inv);
        scales[k] = enc;
    }
    scales[7] = 0;
    for (int i = 0; i < DSV4_KV_ROPE_DIM; ++i) {
        const uint16_t h = row[DSV4_KV_NOPE_DIM + i]; /* little-endian bf16, bit for bit */
        data[DSV4_KV_NOPE_DIM + 2 * i] = (uint8_t)h;
        data[DSV4_KV_NOPE_DIM + 2 * i + 1] = (uint8_t)(h >> 8);
    }
}

/* ---- GPT-J RoPE, this library's evaluation form (spec/kv-cache.md section 5) -------- */
/* y_a = fmaf(x_a, c, -(x_b * s)), y_b = fmaf(x_a, s, x_b * c); inner products rounded. */
DSV4_HD void kv_rope_pair(float xa, float xb, float c, float s, float *ya, float *yb) {
    *ya = fmaf(xa, c, -KV_FMUL(xb, s));
    *yb = fmaf(xa, s, KV_FMUL(xb, c));
}

/* A bf16 pair word holding RoPE pair (x_a in the low half, x_b in the high half): rotate
 * (x * scale) and round both to bf16. scale = rq on the q side, 1 on the kv side (exact). */
DSV4_HD uint32_t kv_rope_word(uint32_t w, float scale, float c, float s) {
    float ya, yb;
    kv_rope_pair(KV_FMUL(dsv4_bf16_to_f32((uint16_t)w), scale), KV_FMUL(dsv4_bf16_to_f32((uint16_t)(w >> 16)), scale),
                 c, s, &ya, &yb);
    return dsv4_f32_to_bf16(ya) | ((uint32_t)dsv4_f32_to_bf16(yb) << 16);
}

/* cos_i and sin_i of pair i at position pos; the identity (1, 0) outside [0, max_position). */
DSV4_HD void kv_rope_coeff(const float *cos_sin, int64_t pos, int64_t max_position, int i, float *c, float *s) {
    const int in = pos >= 0 && pos < max_position;
    *c = in ? cos_sin[pos * DSV4_KV_ROPE_DIM + i] : 1.0f;
    *s = in ? cos_sin[pos * DSV4_KV_ROPE_DIM + DSV4_KV_ROPE_DIM / 2 + i] : 0.0f;
}

/* ---- q-side RMS factor --------------------------------------------------------------- */
/* One step of the sum of squares: acc + x*x with one rounding. */
DSV4_HD float kv_sumsq_step(float acc, float x) { return fmaf(x, x, acc); }
/* rq = 1 / sqrt(sumsq / 512 + eps), each operation correctly rounded in fp32. */
DSV4_HD float kv_rms_inv(float sumsq, float eps) {
    return KV_FDIV(1.0f, KV_FSQRT(KV_FADD(KV_FMUL(sumsq, 1.0f / 512.0f), eps)));
}
/* A NoPE pair word of q: bf16(x * rq) on both halves. */
DSV4_HD uint32_t kv_qnorm_word(uint32_t w, float rq) {
    return dsv4_f32_to_bf16(KV_FMUL(dsv4_bf16_to_f32((uint16_t)w), rq)) |
           ((uint32_t)dsv4_f32_to_bf16(KV_FMUL(dsv4_bf16_to_f32((uint16_t)(w >> 16)), rq)) << 16);
}

/* ---- the kernels' lane layout of a 512-element row ------------------------------------ *
 * Lane l of a warp holds chunk l (elements 8l .. 8l+7) and chunk l+32 (elements 256+8l ..
 * 256+8l+7), each as four bf16x2 words. So 64-dim block k < 4 lives in the first chunks
 * of lanes 8k .. 8k+7, block k = 4..6 in the second chunks of lanes 8(k-4) .. +7, and the
 * RoPE dims 448 + 8j .. +7 in the second chunk of lane 24 + j (pairs 4j .. 4j+3). The
 * q-side reference sums squares in this order: per lane its 16 elements in order, then
 * a butterfly over lanes with xor offsets 16, 8, 4, 2, 1. */
#define KV_LANE_ROPE_FIRST 24

#endif /* DSV4_KVCACHE_KV_RECORD_H */
