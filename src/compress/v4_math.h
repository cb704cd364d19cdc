/*
 * dsv4_compress_v4 per element and per window row, for the CPU reference and the kernels
 * alike (static inline C on the host, __host__ __device__ under nvcc), so the records
 * the two write are the same bits:
 *
 *   v4_exp       the library's e^x (include/dsv4/compress.h): range reduction by k ln 2
 *                with k = rint(x log2 e), ln 2 in two parts (the high part has 15
 *                significant bits, so k * ln2_hi is exact for |k| <= 2^9), Taylor terms
 *                to degree 7 in fmaf steps (truncation below 0.1 ulp on |r| <= ln2 / 2),
 *                then 2^k built from its exponent bits, in two steps below 2^-126. Only
 *                IEEE operations, so host and device agree bit for bit.
 *   v4_row       where window row j of a closing position lives in the state cache
 *   v4_rope      the RoPE pair of the unrounded normalized values, in the compressed
 *                writer's form (kvcache's kv_rope_pair_t), rounded to bf16
 * The pooling order (groups of 8 rows, then a halving tree over groups) is written out
 * twice, as loops in v4_ref.c and spread over threads in v4_kernel.cu.
 */
#ifndef DSV4_COMPRESS_V4_MATH_H
#define DSV4_COMPRESS_V4_MATH_H

#include <math.h>
#include <stdint.h>

#include "compress/latent_math.h"
#include "compress/v4_plan.h"
#include "kvcache/kv_record.h"

#define V4_GROUP 8 /* rows summed in order before the tree over groups */
#define V4_MAX_WINDOW 128
#define V4_MAX_BLOCK_ROWS (1 << 20)

/* N of a descriptor: 512 unless 128 is asked for (0 means 512). */
DSV4_HD int64_t v4_head(int64_t head_dim) { return head_dim == 128 ? 128 : 512; }
/* c (halves per state row) and W (window rows) of a ratio, 4 or 128; macros, so that the
 * kernels size arrays with them. */
#define V4_COFF(ratio) ((ratio) == 4 ? 2 : 1)
#define V4_WINDOW(ratio) (V4_COFF(ratio) * (ratio))

/* e^x; used on x = s - m <= 0, correct for any x below 88. */
DSV4_HD float v4_exp(float x) {
    if (x != x) return x;
    if (!(x >= -104.0f)) return 0.0f;                  /* e^-104 is below half the smallest subnormal */
    const float k = rintf(CL_FMUL(x, 0x1.715476p+0f)); /* to nearest even, as cvt.rni on the device */
    float r = CL_FMA(-k, 0x1.62e4p-1f, x);             /* ln2_hi */
    r = CL_FMA(-k, 0x1.7f7d1cp-20f, r);                /* ln2_lo */
    float p = 1.98412698e-4f;                          /* 1/7! */
    p = CL_FMA(p, r, 1.38888889e-3f);                  /* 1/6! */
    p = CL_FMA(p, r, 8.33333333e-3f);                  /* 1/5! */
    p = CL_FMA(p, r, 4.16666667e-2f);                  /* 1/4! */
    p = CL_FMA(p, r, 1.66666667e-1f);                  /* 1/3! */
    p = CL_FMA(p, r, 0.5f);
    p = CL_FMA(p, r, 1.0f);
    p = CL_FMA(p, r, 1.0f);
    const int ki = (int)k; /* in [-150, 128] */
    if (ki >= -126) return CL_FMUL(p, dsv4_bits_f32((uint32_t)(ki + 127) << 23));
    return CL_FMUL(CL_FMUL(p, dsv4_bits_f32((uint32_t)(ki + 127 + 64) << 23)), 0x1p-64f);
}

/* One max step over a dim's scores: NaN left out (a comparison), from -inf. */
DSV4_HD float v4_max_step(float m, float s) { return s > m ? s : m; }

/* The state rows a closing position reads: what v4_row needs of the call. */
typedef struct {
    const int32_t *block_table;
    int64_t num_reqs, max_blocks, block_table_stride, state_block_rows, state_blocks, stride_block, stride_row;
    int64_t head; /* N */
} v4_rows_t;

/* v4_rows_t of a validated call. */
static inline v4_rows_t v4_rows_make(const dsv4_compress_v4_desc_t *d, const v4_plan_t *pl,
                                     const int32_t *block_table) {
    const v4_rows_t w = {block_table,
                         d->num_reqs,
                         d->max_blocks,
                         pl->block_table_stride,
                         d->state_block_rows,
                         d->state_blocks,
                         pl->state_stride_block,
                         pl->state_stride_row,
                         pl->head};
    return w;
}

/* The element offset in the state of window row j (position q = pos - W + 1 + j) of a
 * row of request b, including the half it reads (o_j), or -1 when the row is not
 * readable. kv_j is at that offset, s_j at offset + c * N. */
DSV4_HD int64_t v4_row(const v4_rows_t *w, int64_t ratio, int64_t pos, int64_t b, int64_t j) {
    const int64_t W = V4_WINDOW(ratio);
    if (pos < W - 1 - j) return -1; /* q < 0, written without pos - W + 1 + j overflowing */
    const int64_t q = pos - (W - 1 - j);
    if (b < 0 || b >= w->num_reqs || q / w->state_block_rows >= w->max_blocks) return -1;
    const int64_t blk = w->block_table[b * w->block_table_stride + q / w->state_block_rows];
    if (blk < 0 || blk >= w->state_blocks) return -1;
    return blk * w->stride_block + (q % w->state_block_rows) * w->stride_row + (j >= ratio ? w->head : 0);
}

/* RoPE pair (a, b) of normalized fp32 values at (c, s), each result rounded to bf16:
 * the bf16 pair word, a in the low half. */
DSV4_HD uint32_t v4_rope(float a, float b, float c, float s) {
    float ya, yb;
    kv_rope_pair_t(a, b, c, s, &ya, &yb);
    return dsv4_f32_to_bf16(ya) | ((uint32_t)dsv4_f32_to_bf16(yb) << 16);
}

#endif /* DSV4_COMPRESS_V4_MATH_H */
