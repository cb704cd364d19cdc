/*
 * The fp8_ds_mla record, element by element, for the CPU references and the kernels
 * alike (compiled as static inline C on the host and __host__ __device__ by nvcc).
 *
 * This is the family's ONE copy of the per-row rules: the quantization of a 64-dim
 * block (insert and the SWA writer), the GPT-J RoPE evaluation form (SWA writer, q and
 * kv), and the q-side RMS factor. The references call them in plain loops; the kernels
 * call the same functions on the elements a lane holds (the e4m3 step excepted: see
 * below).
 *
 * Quantization (include/dsv4/kvcache.h): amax = max |x| with NaN left out, enc =
 * dsv4_ue8m0_from_amax(amax) (it applies the 1e-4 floor), inv = dsv4_ue8m0_inv_scale(enc),
 * code = e4m3(clamp(x * inv, -448, 448)) with NaN -> 448. The three steps here are
 * cheaper forms of those, exact on the values a block can produce (amax is 0, a bf16
 * magnitude or +inf; |x| <= amax), which tests/kvcache checks exhaustively against
 * numerics.h. The kernels quantize with the same three rules, the last one evaluated on
 * bf16 pairs (kv_warp.cuh's kv_quant_pair, checked exhaustively on the GPU against the
 * same numerics.h function): insert is bound by instruction issue as much as by memory.
 *   kv_enc_from_amax  reads enc off the bits of amax instead of dividing by 448.
 *   kv_inv_scale      2^(127-enc) without the enc 254 case (no bf16 amax gives it).
 *   kv_quant_elem     |v| * 2^-120 puts the e4m3 minimum normal 2^-6 on the fp32 minimum
 *                     normal, so e4m3 normals and subnormals alike round at bit 20 of the
 *                     fp32 pattern (one integer round-to-nearest-even). Exact because v =
 *                     x * 2^-e has at most 8 significant bits wherever a nonzero code can
 *                     come out, so the scaling by 2^-120 itself never rounds there.
 */
#ifndef DSV4_KVCACHE_KV_RECORD_H
#define DSV4_KVCACHE_KV_RECORD_H

#include <math.h>
#include <stdint.h>

#include "common/kv_format.h"
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

/* ---- quantization of a 64-dim block ------------------------------------------------ */
/* One step of the reference's block maximum: a NaN element leaves amax unchanged. A
 * comparison, because the C library's fmaxf returns NaN for a signalling NaN argument
 * (and a NaN amax would drop every earlier element). The kernels take the maximum on
 * bf16 pairs (kv_warp.cuh), which drops NaN the same way. */
DSV4_HD float kv_amax_step(float amax, uint16_t x) {
    const float v = fabsf(dsv4_bf16_to_f32(x));
    return v > amax ? v : amax;
}

/* enc = dsv4_ue8m0_from_amax(amax) for amax = 0, a bf16 magnitude or +inf. With amax =
 * 1.m * 2^k (floored first), 448 * 2^e >= amax holds from e = k - 8 if 1.m <= 1.75, else
 * from k - 7: enc = k + 119 + (m > 0.75), and adding 0x1FFFFF to the pattern carries into
 * the exponent field exactly when the mantissa field exceeds 0x600000. The division's
 * rounding could only matter for an amax within 2^-24 (relative) above 448 * 2^e, which
 * no bf16 value is; the floor constant itself gives 105 either way. */
DSV4_HD uint32_t kv_enc_from_amax(float amax) {
    const uint32_t b = dsv4_f32_bits(amax >= DSV4_UE8M0_AMAX_FLOOR ? amax : DSV4_UE8M0_AMAX_FLOOR);
    return b >= 0x7F800000u ? 255u : ((b + 0x1FFFFFu) >> 23) - 8u; /* the largest bf16 gives 247 */
}
/* dsv4_ue8m0_inv_scale(enc) for the enc kv_enc_from_amax returns (105..247 and 255). */
DSV4_HD float kv_inv_scale(uint32_t enc) { return enc == 255u ? 0.0f : dsv4_bits_f32((254u - enc) << 23); }

/* dsv4_e4m3_quantize(x, inv) for a bf16 x and an inv = kv_inv_scale(enc) of a block that
 * holds x (so |x * inv| <= 448 unless x is inf or NaN). Only the upper clamp is needed
 * there: NaN and inf * 0 (x = inf means enc 255) become +448 (0x7E) through it, and no
 * finite product goes below -448. The sign rides along in bit 31: the rounding add
 * cannot carry into it, since |v| * 2^-120 < 2^27 as a pattern. */
DSV4_HD uint32_t kv_quant_elem(uint16_t x, float inv) {
    float v = KV_FMUL(dsv4_bf16_to_f32(x), inv);
    v = v < 448.0f ? v : 448.0f; /* NaN -> 448, as the quantizer's clamp */
    const uint32_t b = dsv4_f32_bits(KV_FMUL(v, 0x1p-120f));
    const uint32_t r = (b + 0x7FFFFu + ((b >> 20) & 1u)) >> 20; /* round to nearest even at bit 20 */
    return (r & 0x7Fu) | ((b >> 24) & 0x80u);
}

/* The whole record of one bf16 row, as the references write it: data[0..447] codes,
 * data[448..575] the RoPE dims' bf16 bytes, scales[0..6] enc, scales[7] = 0. */
DSV4_HD void kv_quant_row(const uint16_t *row, uint8_t *data, uint8_t *scales) {
    for (int k = 0; k < DSV4_KV_NOPE_DIM / 64; ++k) {
        float amax = 0.0f;
        for (int i = 0; i < 64; ++i) amax = kv_amax_step(amax, row[64 * k + i]);
        const uint32_t enc = kv_enc_from_amax(amax);
        const float inv = kv_inv_scale(enc);
        for (int i = 0; i < 64; ++i) data[64 * k + i] = (uint8_t)kv_quant_elem(row[64 * k + i], inv);
        scales[k] = (uint8_t)enc;
    }
    scales[7] = 0;
    for (int i = 0; i < DSV4_KV_ROPE_DIM; ++i) {
        const uint16_t h = row[DSV4_KV_NOPE_DIM + i]; /* little-endian bf16, bit for bit */
        data[DSV4_KV_NOPE_DIM + 2 * i] = (uint8_t)h;
        data[DSV4_KV_NOPE_DIM + 2 * i + 1] = (uint8_t)(h >> 8);
    }
}

/* ---- GPT-J RoPE, this library's evaluation form (include/dsv4/kvcache.h) ----------- */
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

/* The compressed writer's form (dsv4_kv_rope_insert): y_b = fmaf(x_b, c, x_a * s), the
 * contraction upstream's Triton writer compiles to; y_a as kv_rope_pair. */
DSV4_HD void kv_rope_pair_t(float xa, float xb, float c, float s, float *ya, float *yb) {
    *ya = fmaf(xa, c, -KV_FMUL(xb, s));
    *yb = fmaf(xb, c, KV_FMUL(xa, s));
}
/* kv_rope_word in that form, unscaled: bf16(rotate(x)) of the pair word w. */
DSV4_HD uint32_t kv_rope_word_t(uint32_t w, float c, float s) {
    float ya, yb;
    kv_rope_pair_t(dsv4_bf16_to_f32((uint16_t)w), dsv4_bf16_to_f32((uint16_t)(w >> 16)), c, s, &ya, &yb);
    return dsv4_f32_to_bf16(ya) | ((uint32_t)dsv4_f32_to_bf16(yb) << 16);
}

/* Does a token at position pos close a group of r positions ((pos + 1) % r == 0)? If so,
 * *first = the group's first position pos + 1 - r, negative for a negative pos (the
 * identity rotation). Written without pos + 1, which overflows at INT64_MAX. */
DSV4_HD int kv_group_closes(int64_t pos, int64_t r, int64_t *first) {
    const int64_t m = pos % r; /* in (-r, r), C's truncating remainder */
    *first = pos < 0 ? -1 : pos - (r - 1);
    return m == r - 1 || m == -1;
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
