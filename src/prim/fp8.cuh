/*
 * fp8 e4m3 -> bf16 decoding for kernels, four bytes at a time, without fp8 hardware.
 *
 * The trick: for a byte b = s|E|M, the bf16 bit pattern s<<15 | (b & 0x7F)<<4 has exponent
 * field E and mantissa M<<4, so it is the e4m3 value times 2^-120, for normals and for
 * subnormals alike (E = 0 lands on a bf16 subnormal). One bf16x2 FMA by 2^120 makes it
 * exact, a second by the UE8M0 scale (bf16 bits enc<<7 = 2^(enc-127), 0 for enc 0, +inf
 * for enc 255) applies the block scale; the product is exact for every code at enc
 * 1..254 (dsv4_dequant_e4m3's note), so this equals dsv4_dequant_e4m3 there. Codes
 * 0x7F/0xFF are patched to the canonical NaN 0x7FFF. tests/prim checks all 65,536
 * (byte, enc) pairs against dsv4_dequant_e4m3.
 */
#ifndef DSV4_PRIM_FP8_CUH
#define DSV4_PRIM_FP8_CUH

#include <stdint.h>

/* d = a * b + c on two bf16 lanes, one rounding (sm_80 fma.rn.bf16x2). */
static __device__ __forceinline__ uint32_t dsv4_bf16x2_fma(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* a * b on two bf16 lanes (the addend -0.0 keeps the sign of zero products). */
static __device__ __forceinline__ uint32_t dsv4_bf16x2_mul(uint32_t a, uint32_t b) {
    return dsv4_bf16x2_fma(a, b, 0x80008000u);
}

#define DSV4_BF16X2_2POW120 0x7B807B80u

/* UE8M0 scale byte as a bf16x2 pair 2^(enc-127) (0 for enc 0, +inf for enc 255). */
static __device__ __forceinline__ uint32_t dsv4_ue8m0_bf16x2(uint32_t enc) { return (enc << 7) * 0x00010001u; }

/* The bytes of x picked by SEL (prmt.b32 x, 0, SEL in its default mode): selector nibble
 * n names byte n of the result, 0-3 a byte of x, 4-7 a zero byte, and 8 + b the sign of
 * byte b replicated over the byte. Not __byte_perm: nvcc masks its selector to 3 bits
 * per byte (0xBB99 became 0x3311; docs/kvcache.md, Decisions). */
template <unsigned SEL> static __device__ __forceinline__ uint32_t dsv4_prmt(uint32_t x) {
    uint32_t d;
    asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(d) : "r"(x), "n"(SEL));
    return d;
}

/* Bytes 0..3 of w -> out[0] = (e0, e1), out[1] = (e2, e3) as bf16 values times 2^-120:
 * each lane is sign << 15 | (b & 0x7F) << 4 (the e4m3 exponent and mantissa bits land in
 * bf16's, subnormals included). Three instructions per pair: prmt sign-extends each byte
 * to its 16-bit lane, then << 4 puts the sign copies at bit 15 and the code at bits
 * 11..4, and the mask keeps bit 15 and bits 10..4 of each lane (the bits shifted across
 * the lane boundary fall outside it). */
static __device__ __forceinline__ void dsv4_e4m3x4_raw_bf16(uint32_t w, uint32_t out[2]) {
    const uint32_t lo = dsv4_prmt<0x9180>(w); /* lanes: sext(b0), sext(b1) */
    const uint32_t hi = dsv4_prmt<0xB3A2>(w); /* lanes: sext(b2), sext(b3) */
    out[0] = (lo << 4) & 0x87F087F0u;
    out[1] = (hi << 4) & 0x87F087F0u;
}

/* Exact dequantization of four e4m3 bytes with one UE8M0 scale, as bf16 pairs. */
static __device__ __forceinline__ void dsv4_e4m3x4_dequant_bf16(uint32_t w, uint32_t scale_bf16x2, uint32_t out[2]) {
    uint32_t raw[2];
    dsv4_e4m3x4_raw_bf16(w, raw);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        uint32_t v = dsv4_bf16x2_mul(dsv4_bf16x2_mul(raw[i], DSV4_BF16X2_2POW120), scale_bf16x2);
        /* (b & 0x7F) == 0x7F sits in raw as magnitude bits 0x07F0 of a lane. */
        uint32_t nan = __vcmpeq2(raw[i] & 0x7FF07FF0u, 0x07F007F0u);
        out[i] = (v & ~nan) | (0x7FFF7FFFu & nan);
    }
}

/* Bytes 0..3 of w -> out[0] = (e0, e1), out[1] = (e2, e3) as fp16 values times 2^-8: each
 * lane is sign << 15 | (b & 0x7F) << 7, so the e4m3 exponent and mantissa land in fp16's
 * (subnormals onto fp16 subnormals) and the value is decode(b) * 2^-8 exactly. A product
 * of two such values is the exact product times 2^-16. The NaN codes 0x7F / 0xFF come
 * out as +-480 * 2^-8 (callers that honour them flag them with dsv4_e4m3x4_nan_bits). prmt
 * sign-extends each byte to its 16-bit lane, << 7 puts a sign copy at bit 15 and the code
 * at bits 14..7, and the mask keeps bit 15 and bits 13..7 (bits shifted across the lane
 * boundary land in bits 0..6 of the next lane, outside the mask). */
static __device__ __forceinline__ void dsv4_e4m3x4_raw_f16(uint32_t w, uint32_t out[2]) {
    out[0] = (dsv4_prmt<0x9180>(w) << 7) & 0xBF80BF80u;
    out[1] = (dsv4_prmt<0xB3A2>(w) << 7) & 0xBF80BF80u;
}

/* Nonzero iff one of the four bytes of w is a NaN code (0x7F or 0xFF): adding 1 to the low
 * seven bits carries into bit 7 only from 0x7F, and never into the next byte. */
static __host__ __device__ __forceinline__ uint32_t dsv4_e4m3x4_nan_bits(uint32_t w) {
    return ((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;
}

#endif /* DSV4_PRIM_FP8_CUH */
