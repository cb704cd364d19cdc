/*
 * The indexer's per-element arithmetic, for the CPU references and the kernels alike
 * (static inline C on the host, __host__ __device__ under nvcc), so the two cannot round
 * differently. Every operation is a correctly rounded fp32 one: on the device through
 * the __f*_rn intrinsics, which nvcc never contracts into fused multiply-adds; on the
 * host the build never contracts (C11 without fast-math) and fmaf, sqrtf are the C
 * library's correctly rounded ones.
 */
#ifndef DSV4_INDEXER_INDEXER_MATH_H
#define DSV4_INDEXER_INDEXER_MATH_H

#include <math.h>
#include <stdint.h>

#include "dsv4/indexer.h"
#include "dsv4/numerics.h"

#if defined(__CUDA_ARCH__)
#define IDX_MUL(a, b) __fmul_rn((a), (b))
#define IDX_ADD(a, b) __fadd_rn((a), (b))
#define IDX_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#define IDX_DIV(a, b) __fdiv_rn((a), (b))
#define IDX_SQRT(a) __fsqrt_rn(a)
#else
#define IDX_MUL(a, b) ((a) * (b))
#define IDX_ADD(a, b) ((a) + (b))
#define IDX_FMA(a, b, c) fmaf((a), (b), (c))
#define IDX_DIV(a, b) ((a) / (b))
#define IDX_SQRT(a) sqrtf(a)
#endif

/* The bf16 pair word (a in the low half, b in the high half) rotated by (c, s):
 * y_a = bf16(fmaf(a, c, -(b * s))), y_b = bf16(fmaf(b, c, a * s)), products rounded first. */
DSV4_HD uint32_t idx_rope_word(uint32_t w, float c, float s) {
    const float a = dsv4_bf16_to_f32((uint16_t)w), b = dsv4_bf16_to_f32((uint16_t)(w >> 16));
    const uint16_t ya = dsv4_f32_to_bf16(IDX_FMA(a, c, -IDX_MUL(b, s)));
    const uint16_t yb = dsv4_f32_to_bf16(IDX_FMA(b, c, IDX_MUL(a, s)));
    return (uint32_t)ya | ((uint32_t)yb << 16);
}

/* Is p a row of the rotary table? Outside it the rotation is (c, s) = (1, 0). */
DSV4_HD int idx_pos_in(int64_t p, int64_t max_position) { return p >= 0 && p < max_position; }

/* Running max of |x| that leaves NaN out (a NaN compares false). */
DSV4_HD float idx_absmax(float m, float x) {
    const float a = fabsf(x);
    return a > m ? a : m;
}

/* The query's e4m3 code: x / 2^e as x * inv (inv = dsv4_ue8m0_inv_scale(enc), the same
 * bits), then the saturating encode with no clamp in front (NaN -> 0x7F). */
DSV4_HD uint8_t idx_q_code(float x, float inv) { return dsv4_f32_to_e4m3(IDX_MUL(x, inv)); }

/* The head weight: ((w_raw * s) * softmax_scale) * head_scale, three rounded products. A
 * NaN comes out as 0x7FFFFFFF: the host's default NaN (0xFFC00000 on x86) and payloads differ
 * from the device's. */
DSV4_HD float idx_q_weight(float w_raw, float s, float softmax_scale, float head_scale) {
    const float w = IDX_MUL(IDX_MUL(IDX_MUL(w_raw, s), softmax_scale), head_scale);
    return w != w ? dsv4_bits_f32(0x7FFFFFFFu) : w;
}

/* One sum-of-squares partial of the key norm: four consecutive dims. */
DSV4_HD float idx_sumsq_part(float x0, float x1, float x2, float x3) {
    return IDX_ADD(IDX_FMA(x0, x0, IDX_MUL(x1, x1)), IDX_FMA(x2, x2, IDX_MUL(x3, x3)));
}

/* rr = 1 / sqrtf(ssq / 128 + eps); ssq / 128 as an exact power-of-two product. */
DSV4_HD float idx_rms_inv(float ssq, float eps) {
    return IDX_DIV(1.0f, IDX_SQRT(IDX_ADD(IDX_MUL(ssq, 0.0078125f), eps)));
}

/* The normalized key element bf16((x * rr) * gamma), as fp32. */
DSV4_HD float idx_k_norm(float x, float rr, float gamma) { return dsv4_round_bf16(IDX_MUL(IDX_MUL(x, rr), gamma)); }

/* The key's stored rotary row: the group's first position (pos / ratio) * ratio, or -1
 * (outside every table) for a negative position. */
DSV4_HD int64_t idx_k_rope_pos(int64_t pos, int64_t ratio) { return pos < 0 ? -1 : pos / ratio * ratio; }

/* Is row (pos, slot) stored: a slot inside the cache, and pos closing its group. */
DSV4_HD int idx_k_stored(int64_t pos, int64_t slot, int64_t ratio, int64_t slots) {
    return slot >= 0 && slot < slots && (pos + 1) % ratio == 0;
}

/* The 132-byte state of the bf16 key y (normalized, rotated) in the page at `page` of
 * P states, slot q: enc from max |y| (NaN left out), 128 codes at q * 128, 2^e as a
 * little-endian fp32 at P * 128 + q * 4. */
DSV4_HD void idx_k_state_write(const uint16_t *y, uint8_t *page, int64_t P, int64_t q) {
    float amax = 0.0f;
    for (int i = 0; i < DSV4_INDEXER_HEAD_DIM; ++i) amax = idx_absmax(amax, dsv4_bf16_to_f32(y[i]));
    const uint8_t enc = dsv4_ue8m0_from_amax(amax);
    const float inv = dsv4_ue8m0_inv_scale(enc);
    uint8_t *codes = page + q * DSV4_INDEXER_HEAD_DIM;
    for (int i = 0; i < DSV4_INDEXER_HEAD_DIM; ++i) codes[i] = dsv4_e4m3_quantize(dsv4_bf16_to_f32(y[i]), inv);
    const uint32_t scale_bits = (uint32_t)enc << 23;
    uint8_t *sc = page + P * DSV4_INDEXER_HEAD_DIM + q * 4;
    sc[0] = (uint8_t)scale_bits, sc[1] = (uint8_t)(scale_bits >> 8), sc[2] = (uint8_t)(scale_bits >> 16);
    sc[3] = (uint8_t)(scale_bits >> 24);
}

/* ---- logits and selection ---------------------------------------------------------------- */

/* The columns a row sees: (pos + 1) / ratio without overflow (0 for a negative position),
 * capped at `cap` (max_keys and the block table's reach). */
DSV4_HD int64_t idx_row_cols(int64_t pos, int64_t ratio, int64_t cap) {
    if (pos < 0) return 0;
    const int64_t n = pos / ratio + (pos % ratio + 1) / ratio;
    return n < cap ? n : cap;
}

/* relu with relu(NaN) = NaN (a NaN fails the comparison and passes through) and +0 for
 * every x <= 0. */
DSV4_HD float idx_relu(float x) { return x <= 0.0f ? 0.0f : x; }

/* The selection's order key of an fp32 value: -0 as +0, every NaN above +inf, then the
 * numeric order, as an unsigned integer compare. */
DSV4_HD uint32_t idx_order_key(float x) {
    if (x != x) return 0xFFFFFFFFu;
    uint32_t u = dsv4_f32_bits(x);
    if (u == 0x80000000u) u = 0;
    return (u >> 31) ? ~u : (u | 0x80000000u);
}

#define IDX_KEY_NEG_INF 0x007FFFFFu /* idx_order_key(-inf) */
#define IDX_KEY_POS_INF 0xFF800000u /* idx_order_key(+inf) */

#endif /* DSV4_INDEXER_INDEXER_MATH_H */
