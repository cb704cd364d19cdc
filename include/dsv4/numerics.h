/*
 * Number formats of DeepSeek-V4 caches: bf16, fp8 e4m3fn, UE8M0 block scales.
 *
 * The one source of truth for host and device. Every function is a
 * pure integer/IEEE function, compiled as `static inline` C on the host and as
 * `__host__ __device__` inline code by nvcc, so the CPU references and the kernels
 * run the same lines. No fast-math: the build never enables it.
 */
#ifndef DSV4_NUMERICS_H
#define DSV4_NUMERICS_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define DSV4_HD static __host__ __device__ __forceinline__
#else
#define DSV4_HD static inline
#endif

/* ---- fp32 bit views ------------------------------------------------------------------- */
DSV4_HD uint32_t dsv4_f32_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
#endif
}

DSV4_HD float dsv4_bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
#endif
}

/* ---- bf16 ---------------------------------------------------------------------------- */
/* bf16 -> fp32 is exact. */
DSV4_HD float dsv4_bf16_to_f32(uint16_t h) { return dsv4_bits_f32((uint32_t)h << 16); }

/* fp32 -> bf16, round to nearest even; NaN -> canonical 0x7FFF (as cvt.rn.bf16.f32);
 * overflow -> +-inf; subnormals kept. */
DSV4_HD uint16_t dsv4_f32_to_bf16(float x) {
    uint32_t u = dsv4_f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Round an fp32 to the nearest bf16 value, as fp32. */
DSV4_HD float dsv4_round_bf16(float x) { return dsv4_bf16_to_f32(dsv4_f32_to_bf16(x)); }

/* ---- fp8 e4m3fn ---------------------------------------------------------------------- */
/* Byte -> fp32 (exact). 0x7F/0xFF -> NaN; E == 0 subnormals M*2^-9; else (8+M)*2^(E-10). */
DSV4_HD float dsv4_e4m3_to_f32(uint8_t b) {
    uint32_t sign = (uint32_t)(b >> 7) << 31;
    uint32_t E = (b >> 3) & 15u, M = b & 7u;
    if ((b & 0x7F) == 0x7F) return dsv4_bits_f32(0x7FC00000u);
    if (E == 0) {
        /* M * 2^-9 is exact in fp32; the sign is OR-ed so 0x80 gives -0.0. */
        return dsv4_bits_f32(dsv4_f32_bits((float)M * 0.001953125f) | sign);
    }
    /* (8+M)*2^(E-10) = 1.M * 2^(E-7): biased fp32 exponent E-7+127. */
    return dsv4_bits_f32(sign | ((E + 120u) << 23) | (M << 20));
}

/* fp32 -> byte: round to nearest even, saturate to +-448, NaN -> 0x7F (sign dropped, as
 * the hardware cvt.rn.satfinite.e4m3x2.f32), step by step on the fp32 bits. */
DSV4_HD uint8_t dsv4_f32_to_e4m3(float x) {
    uint32_t u = dsv4_f32_bits(x);
    uint32_t sign = u >> 31, mag = u & 0x7FFFFFFFu;
    uint32_t code = 0;
    if (mag > 0x7F800000u) return 0x7F;
    uint32_t exp_field = mag >> 23;
    if (exp_field != 0) {
        int E = (int)exp_field - 127;
        uint32_t m24 = (mag & 0x7FFFFFu) | 0x800000u;
        int below = -6 - E;
        int shift = 20 + (below > 0 ? below : 0);
        if (shift > 30) shift = 30;
        uint32_t keep = m24 >> shift;
        uint32_t rest = m24 & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        keep += (rest > half) || (rest == half && (keep & 1u));
        /* A normal keeps its implicit bit in keep (8..16), so adding it to the exponent
         * field below bumps the exponent by one on a carry from 15 to 16. */
        code = (E >= -6) ? (uint32_t)((E + 6) << 3) + keep : keep;
    }
    if (code > 0x7Eu) code = 0x7Eu;
    return (uint8_t)(code | (sign << 7));
}

/* ---- UE8M0 block scales ---------------------------------------------------------------- */
#define DSV4_UE8M0_AMAX_FLOOR 1e-4f /* bit pattern 0x38D1B717 */

/* Scale byte for a block maximum |x| (NaN elements already left out of the max):
 * enc = clamp(e + 127, 0, 255) for the smallest integer e with 448 * 2^e >= max(amax, 1e-4).
 * amax = +inf gives 255. */
DSV4_HD uint8_t dsv4_ue8m0_from_amax(float amax) {
    if (!(amax >= DSV4_UE8M0_AMAX_FLOOR)) amax = DSV4_UE8M0_AMAX_FLOOR; /* also catches NaN */
    float q = amax / 448.0f;                                            /* IEEE RN division */
    uint32_t qb = dsv4_f32_bits(q);
    int e = (int)(qb >> 23) - 127 + ((qb & 0x7FFFFFu) != 0u);
    int enc = e + 127;
    if (enc < 0) enc = 0;
    if (enc > 255) enc = 255;
    return (uint8_t)enc;
}

/* Reader's decode: the integer shift into the fp32 exponent field, 2^(enc-127) for
 * enc 1..254, +0.0 for 0, +inf for 255. Never exp2. */
DSV4_HD float dsv4_ue8m0_to_f32(uint8_t enc) { return dsv4_bits_f32((uint32_t)enc << 23); }

/* Writer's multiplier 2^(127-enc) for enc 1..254, and 0 for enc 255, so that
 * x * inv equals x / dsv4_ue8m0_to_f32(enc) bit for bit (finite x -> +-0 and inf -> NaN at
 * enc 255, as upstream's division). Multiplying by an exact power of two rounds once,
 * as the division does. */
DSV4_HD float dsv4_ue8m0_inv_scale(uint8_t enc) {
    if (enc == 255) return 0.0f;
    if (enc == 254) return dsv4_bits_f32(0x00400000u); /* 2^-127 is subnormal */
    return dsv4_bits_f32((uint32_t)(254 - enc) << 23);
}

/* Quantizer's element step: clamp(x * 2^-e, -448, 448), where NaN goes to +448 (upstream's
 * clamp drops NaN and keeps the upper bound), then encode. */
DSV4_HD uint8_t dsv4_e4m3_quantize(float x, float inv_scale) {
    float v = x * inv_scale;
    if (v != v) v = 448.0f;
    v = v < -448.0f ? -448.0f : (v > 448.0f ? 448.0f : v);
    return dsv4_f32_to_e4m3(v);
}

/* Dequantized NoPE element as bf16 bits: bf16(decode(byte) * 2^(enc-127)). The fp32
 * product is exact over the encodings writers emit (enc 1..254 with a finite code), so the
 * final rounding changes nothing there; it still rounds, for enc 0 and 255. */
DSV4_HD uint16_t dsv4_dequant_e4m3(uint8_t byte, float scale) {
    return dsv4_f32_to_bf16(dsv4_e4m3_to_f32(byte) * scale);
}

#endif /* DSV4_NUMERICS_H */
