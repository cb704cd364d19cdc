/*
 * The compress family: operators around attention that are not attention itself.
 *
 *   dsv4_inv_rope          undo the RoPE rotation of the attention output, in place
 *
 * Number formats (bf16): dsv4/numerics.h. Both operators are
 * bit-exact against their CPU references (the kernels call the same converters).
 *
 * Every call: NULL descriptor, args or required pointer -> NULL_POINTER; a NULL stream
 * -> NULL_POINTER; workspace is never needed (size 0). On any failure nothing is
 * launched and nothing is written; dsv4_last_error() names the operator, field, value.
 * No call allocates, synchronizes or prints; all are CUDA-graph safe.
 */
#ifndef DSV4_COMPRESS_H
#define DSV4_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/dsv4.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSV4_INV_ROPE_HEAD_DIM 512  /* bf16 elements per head row of o                  */
#define DSV4_INV_ROPE_FIRST_DIM 448 /* first rotated dim; dims 448..511 hold 32 pairs    */
#define DSV4_INV_ROPE_PAIRS 32      /* rotated pairs per head row                        */

/* =================================================================================
 * dsv4_inv_rope: inverse GPT-J RoPE on the attention output, in place
 * =================================================================================
 * The attention output o of a layer carries its RoPE dims 448..511 rotated at each
 * token's own position; before the output projection they are rotated back. For token
 * t < num_tokens, head h < num_heads and pair i < 32, with pos = position_ids[t],
 * c = cos_sin_cache[pos * 64 + i], s = cos_sin_cache[pos * 64 + 32 + i], and
 * a = o[t, h, 448 + 2i], b = o[t, h, 449 + 2i] read as fp32:
 *     o[t, h, 448 + 2i] = bf16(fmaf(a, c,   b * s ))
 *     o[t, h, 449 + 2i] = bf16(fmaf(b, c, -(a * s)))
 * where b * s and a * s are fp32 products rounded before the fused multiply-add, and
 * bf16() rounds to nearest even (NaN in, NaN out). A position outside
 * [0, max_position) uses c = 1, s = 0 (a library choice, as the kvcache family's RoPE;
 * valid inputs never reach it) and the same arithmetic: a pair of finite nonzero values
 * comes back unchanged; a signed zero may lose its sign and a NaN or inf partner gives
 * NaN. Dims 0..447 of every head and heads num_heads .. num_heads_padded - 1 are
 * neither read nor written.
 *
 *   o              bf16 [num_tokens, num_heads_padded, 512], strides o_stride_token,
 *                  o_stride_head (elements): head rows never overlap, o_stride_head >=
 *                  512, o_stride_token >= num_heads_padded * o_stride_head (unless
 *                  num_tokens = 1); 16-byte aligned, strides multiples of 8
 *   position_ids   int64 [num_tokens], 8-byte aligned
 *   cos_sin_cache  fp32 [max_position, 64]: cos in columns 0..31, sin in 32..63 (the
 *                  layer's rotary table, the one its forward RoPE used); 16-byte aligned
 *
 * Errors: num_tokens outside [0, 2^31-1], num_heads outside [1, 1024], num_heads_padded
 * outside [num_heads, 1024], max_position < 1, strides below the minimum ->
 * INVALID_VALUE; strides not multiples of 8, misaligned pointers -> MISALIGNED.
 * num_tokens = 0 validates and launches nothing. */
typedef struct dsv4_inv_rope_desc {
    int64_t num_tokens;       /* T: rows of o and entries of position_ids                  */
    int64_t num_heads;        /* live heads, rotated                                        */
    int64_t num_heads_padded; /* heads in o's head dimension (>= num_heads); 0 = num_heads  */
    int64_t o_stride_token;   /* elements; 0 means num_heads_padded * o_stride_head         */
    int64_t o_stride_head;    /* elements; 0 means 512                                      */
    int64_t max_position;     /* rows of cos_sin_cache                                      */
} dsv4_inv_rope_desc_t;

typedef struct dsv4_inv_rope_args {
    uint16_t *o;                 /* bf16, dims 448..511 of live heads rewritten in place     */
    const int64_t *position_ids; /* [num_tokens]                                             */
    const float *cos_sin_cache;  /* [max_position, 64]                                       */
} dsv4_inv_rope_args_t;

dsv4_status_t dsv4_inv_rope_check(const dsv4_inv_rope_desc_t *desc);
dsv4_status_t dsv4_inv_rope_workspace_size(const dsv4_inv_rope_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_inv_rope(const dsv4_inv_rope_desc_t *desc, const dsv4_inv_rope_args_t *args, void *workspace,
                            size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_inv_rope_ref(const dsv4_inv_rope_desc_t *desc, const dsv4_inv_rope_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_COMPRESS_H */
