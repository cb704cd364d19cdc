/*
 * The compress family: operators around attention that are not attention itself.
 *
 *   dsv4_inv_rope          undo the RoPE rotation of the attention output, in place
 *   dsv4_engram_lookup     fetch and dequantize Engram hash-table rows into bf16
 *
 * Number formats (bf16, fp8 e4m3fn, UE8M0 scales): dsv4/numerics.h. Both operators are
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
#define DSV4_ENGRAM_BLOCK 32        /* dims sharing one UE8M0 scale byte                  */
#define DSV4_ENGRAM_MAX_HEAD_DIM 4096

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

/* =================================================================================
 * dsv4_engram_lookup: Engram table rows -> bf16
 * =================================================================================
 * Per token, an n-gram hash gives n_cols absolute table row ids (one per hash column).
 * A tensor-parallel rank owns the columns [head_start, head_start + local_heads) and the
 * table rows [vocab_start, vocab_end), stored as values (e4m3 bytes) with one UE8M0
 * scale byte per 32 dims. For every output row r < num_tokens * local_heads:
 *     t = r / local_heads,   h = head_start + r % local_heads
 *     id = h < n_cols ? ids[t * ids_stride_token + h * ids_stride_head] : -1
 *     owned = h < n_cols and vocab_start <= id < vocab_end;   k = id - vocab_start
 *     out[r, d] = owned ? bf16(e4m3(values[k, d]) * scale(scales[k, d / 32])) : +0.0
 * for d < head_dim: one fp32 product, one round-to-nearest-even. The scale is decoded by
 * shifting the byte into the fp32 exponent field: 2^(enc - 127) for enc 1..254, +0.0 for
 * enc 0, +inf for enc 255. Codes 0x7F/0xFF give NaN; enc 255 gives +-inf (NaN for a zero
 * code); subnormal products are kept, not flushed. Rows not owned (column padding, the
 * dead id -1, ids of another rank's rows) are written as zeros; every output element is
 * written.
 *
 *   values   e4m3 [vocab_end - vocab_start, head_dim], row stride values_stride_bytes;
 *            16-byte aligned, stride a multiple of 16 (the kernel reads 16-byte pieces)
 *   scales   UE8M0 [vocab_end - vocab_start, head_dim / 32], row stride
 *            scales_stride_bytes; any alignment
 *   ids      int32 [num_tokens, n_cols], strides ids_stride_token, ids_stride_head
 *            (elements); 4-byte aligned
 *   out      bf16 [num_tokens, local_heads, head_dim], contiguous; 16-byte aligned
 * values and scales may live in device memory or in pinned host memory mapped into the
 * device (cudaHostAlloc with cudaHostAllocMapped, then cudaHostGetDevicePointer): the
 * kernel reads them with plain global loads. From host memory every row crosses the bus,
 * so issue the lookup early on a side stream.
 *
 * Errors: num_tokens outside [0, 2^31-1], n_cols or local_heads outside [1, 65536],
 * head_start outside [0, 2^31-1], head_dim outside [32, 4096] or not a multiple of 32,
 * vocab_start outside [0, 2^31-1], vocab_end outside [vocab_start, 2^31], strides below
 * their minimum or overflowing a 64-bit offset -> INVALID_VALUE; values_stride_bytes not
 * a multiple of 16, misaligned values/ids/out -> MISALIGNED. num_tokens = 0 validates
 * and launches nothing. */
typedef struct dsv4_engram_lookup_desc {
    int64_t num_tokens;          /* T                                                         */
    int64_t n_cols;              /* hash columns per token, all ranks together                */
    int64_t head_start;          /* first column of this rank                                 */
    int64_t local_heads;         /* columns of this rank = out's head dimension                */
    int64_t head_dim;            /* D: dims per row, a multiple of 32 in [32, 4096]           */
    int64_t ids_stride_token;    /* elements; 0 means n_cols * ids_stride_head                */
    int64_t ids_stride_head;     /* elements; 0 means 1                                       */
    int64_t vocab_start;         /* first table row of this rank (row 0 of values)            */
    int64_t vocab_end;           /* one past the last table row of this rank                  */
    int64_t values_stride_bytes; /* bytes between value rows; 0 means head_dim                */
    int64_t scales_stride_bytes; /* bytes between scale rows; 0 means head_dim / 32            */
} dsv4_engram_lookup_desc_t;

typedef struct dsv4_engram_lookup_args {
    const uint8_t *values; /* e4m3 codes                                                   */
    const uint8_t *scales; /* UE8M0 bytes                                                  */
    const int32_t *ids;    /* absolute table row per (token, column)                       */
    uint16_t *out;         /* bf16 [num_tokens, local_heads, head_dim]                      */
} dsv4_engram_lookup_args_t;

dsv4_status_t dsv4_engram_lookup_check(const dsv4_engram_lookup_desc_t *desc);
dsv4_status_t dsv4_engram_lookup_workspace_size(const dsv4_engram_lookup_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_engram_lookup(const dsv4_engram_lookup_desc_t *desc, const dsv4_engram_lookup_args_t *args,
                                 void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_engram_lookup_ref(const dsv4_engram_lookup_desc_t *desc, const dsv4_engram_lookup_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_COMPRESS_H */
