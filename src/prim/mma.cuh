/*
 * Ampere tensor-core primitives: mma.sync.m16n8k16 and ldmatrix. The only home of this
 * inline PTX (with cp_async.cuh and fp8.cuh beside it). SM80 instructions only.
 *
 * Notation: lane = threadIdx.x % 32, g = lane / 4 ("group", 0..7), t = lane % 4.
 * A .b32 register holding two 16-bit values keeps the lower column index in its low half.
 *
 * mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32   D = A * B + C
 *   A (16 x 16, row-major), 4 regs:   a[0] = A[g   ][2t .. 2t+1]   a[1] = A[g+8][2t .. 2t+1]
 *                                     a[2] = A[g   ][2t+8 .. +9]   a[3] = A[g+8][2t+8 .. +9]
 *   B (16 x 8, K x N, "col"), 2 regs: b[0] = B[2t .. 2t+1][g]      b[1] = B[2t+8 .. +9][g]
 *                                     (the two values of a register are consecutive in K)
 *   C, D (16 x 8, fp32), 4 regs:      c[0], c[1] = C[g][2t], C[g][2t+1]
 *                                     c[2], c[3] = C[g+8][2t], C[g+8][2t+1]
 *
 * ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16
 *   Loads 1, 2 or 4 matrices of 8 x 8 16-bit values. Lanes 8i .. 8i+7 pass the shared
 *   addresses of rows 0..7 of matrix i (16 contiguous bytes each, 16-byte aligned; for
 *   x1/x2 the addresses of lanes >= 8 / >= 16 are ignored). Each lane receives register
 *   r[i] = matrix_i[g][2t .. 2t+1]; with .trans, r[i] = (matrix_i)^T[g][2t .. 2t+1], that is
 *   matrix_i[2t][g] (low half) and matrix_i[2t+1][g] (high half).
 *   So for a row-major 16 x 16 A tile, x4 with lane l addressing row (l % 16) at column
 *   8 * (l / 16) yields a[0..3] in mma order; for B stored K-major (row k holds N values)
 *   use .trans, and for B stored N-major (row n holds K values, as K rows of attention)
 *   use plain x2/x4 with rows = n.
 */
#ifndef DSV4_PRIM_MMA_CUH
#define DSV4_PRIM_MMA_CUH

#include <stdint.h>

/* D = A * B + C, bf16 inputs, fp32 accumulate. d may alias c. */
static __device__ __forceinline__ void dsv4_mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                           const float c[4]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

/* D = A * B + C, fp16 inputs, fp32 accumulate. */
static __device__ __forceinline__ void dsv4_mma_f16_16816(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                          const float c[4]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

static __device__ __forceinline__ uint32_t dsv4_smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void dsv4_ldmatrix_x1(uint32_t r[1], const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(dsv4_smem_addr(row)));
}
static __device__ __forceinline__ void dsv4_ldmatrix_x2(uint32_t r[2], const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(dsv4_smem_addr(row)));
}
static __device__ __forceinline__ void dsv4_ldmatrix_x4(uint32_t r[4], const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(dsv4_smem_addr(row)));
}
static __device__ __forceinline__ void dsv4_ldmatrix_x1_trans(uint32_t r[1], const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0])
                 : "r"(dsv4_smem_addr(row)));
}
static __device__ __forceinline__ void dsv4_ldmatrix_x2_trans(uint32_t r[2], const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(dsv4_smem_addr(row)));
}
static __device__ __forceinline__ void dsv4_ldmatrix_x4_trans(uint32_t r[4], const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(dsv4_smem_addr(row)));
}

/* Pack two fp32 into one bf16x2 register (round to nearest even; lo -> low half). */
static __device__ __forceinline__ uint32_t dsv4_pack_bf16x2(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

#endif /* DSV4_PRIM_MMA_CUH */
