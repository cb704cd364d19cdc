/*
 * One pair of dsv4_inv_rope, for the CPU reference and the kernel alike (static inline C
 * on the host, __host__ __device__ under nvcc), so the two cannot round differently.
 *
 *   y_a = bf16(fmaf(a, c,   b * s )),   y_b = bf16(fmaf(b, c, -(a * s)))
 *
 * The products are rounded to fp32 on their own before the fused multiply-add: on the
 * device through __fmul_rn / __fmaf_rn, which nvcc never contracts; on the host the build
 * never contracts (C11 without fast-math) and fmaf is the C library's correctly rounded
 * one.
 */
#ifndef DSV4_COMPRESS_INV_ROPE_PAIR_H
#define DSV4_COMPRESS_INV_ROPE_PAIR_H

#include <math.h>
#include <stdint.h>

#include "dsv4/compress.h"
#include "dsv4/numerics.h"

#if defined(__CUDA_ARCH__)
#define IR_FMUL(a, b) __fmul_rn((a), (b))
#define IR_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#else
#define IR_FMUL(a, b) ((a) * (b))
#define IR_FMA(a, b, c) fmaf((a), (b), (c))
#endif

/* The bf16 pair word (a in the low half, b in the high half) rotated back by (c, s). */
DSV4_HD uint32_t inv_rope_word(uint32_t w, float c, float s) {
    const float a = dsv4_bf16_to_f32((uint16_t)w), b = dsv4_bf16_to_f32((uint16_t)(w >> 16));
    const uint16_t ya = dsv4_f32_to_bf16(IR_FMA(a, c, IR_FMUL(b, s)));
    const uint16_t yb = dsv4_f32_to_bf16(IR_FMA(b, c, -IR_FMUL(a, s)));
    return (uint32_t)ya | ((uint32_t)yb << 16);
}

/* Is pos a row of the rotary table? Outside it the rotation is (c, s) = (1, 0). */
DSV4_HD int inv_rope_pos_in(int64_t pos, int64_t max_position) { return pos >= 0 && pos < max_position; }

#endif /* DSV4_COMPRESS_INV_ROPE_PAIR_H */
