/*
 * The indexer family: the lightning indexer, which picks for every query token the
 * compressed entries that sparse MLA attends to. Built so far:
 *
 *   dsv4_indexer_q        query preparation: RoPE, e4m3 codes with a power-of-two scale,
 *                         and the head weights with that scale folded in
 *   dsv4_indexer_k_store  key store: RMSNorm, RoPE, e4m3 and the paged indexer cache
 *
 * Strides have no default: a stride of 0 is refused (INVALID_VALUE) on a dimension of
 * extent > 1 and accepted where it addresses nothing (dsv4.h).
 *
 * V4.1 shapes: 32 index heads (V4: 64) of 128 dims; dims 0..63 are not rotated (NoPE),
 * dims 64..127 hold 32 GPT-J pairs (64 + 2i, 65 + 2i). Number formats (bf16, fp8 e4m3fn):
 * dsv4/numerics.h. bf16r(x) below rounds an fp32 to bf16 (nearest even) and back.
 *
 * Shared pieces of both formulas:
 *   RoPE pair (a, b) at the table row p, c = cos_sin[p*64 + i], s = cos_sin[p*64 + 32 + i]:
 *       y_a = bf16r(fmaf(a, c, -(b * s))),   y_b = bf16r(fmaf(b, c, a * s))
 *   where b * s and a * s are fp32 products rounded before the fused multiply-add.
 *   A row p outside [0, max_position) rotates by (c, s) = (1, 0) through the same
 *   arithmetic (a library choice; valid inputs never reach it): finite values come back
 *   unchanged, a signed zero may lose its sign, an infinite partner gives NaN.
 *   Scale exponent: amax = max |y[d]| over the 128 dims with NaN left out; e = the
 *   smallest integer with 448 * 2^e >= max(amax, 1e-4f) (e in [-22, 120] for finite
 *   data; an infinite amax gives e = 128 and the scale 2^e = +inf).
 *
 * Every call: NULL descriptor, args or required pointer -> NULL_POINTER; a NULL stream
 * -> NULL_POINTER; workspace is never needed (size 0). On any failure nothing is
 * launched and nothing is written; dsv4_last_error() names the operator, field, value.
 * No call allocates, synchronizes or prints; all are CUDA-graph safe. Both operators are
 * bit-exact against their CPU references (the kernels call the same per-element
 * functions, all IEEE operations).
 *
 * Not built yet: the fused logits + top-k operator and the V4.1 candidate stage.
 */
#ifndef DSV4_INDEXER_H
#define DSV4_INDEXER_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/dsv4.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSV4_INDEXER_HEAD_DIM 128      /* dims per index head (and per key)                 */
#define DSV4_INDEXER_ROPE_FIRST_DIM 64 /* first rotated dim; dims 64..127 hold 32 pairs     */
#define DSV4_INDEXER_MAX_HEADS 128     /* num_heads limit of dsv4_indexer_q                  */
#define DSV4_INDEXER_STATE_BYTES 132   /* one cache state: 128 codes + an fp32 scale         */

/* =================================================================================
 * dsv4_indexer_q: query preparation
 * =================================================================================
 * For token t < num_tokens and head h < num_heads, x[d] = q[t, h, d] read as fp32, the
 * RoPE pairs of dims 64..127 rotated at the table row positions[t] (formula above; dims
 * 0..63 keep their bf16 values), then with e the row's scale exponent and s = 2^e:
 *     q8[t, h, d] = e4m3(x[d] / s)                  d < 128: exact scaling, then the
 *                                                   saturating encode (no clamp before it:
 *                                                   NaN -> 0x7F, beyond 448 -> +-448)
 *     w[t, h]     = ((w_raw[t, h] * s) * softmax_scale) * head_scale
 *                                                   three rounded fp32 products, in order
 * (the query's scale is folded into the head weight: no separate scale tensor). An
 * all-zero head gives e = -22 and zero codes; an
 * infinite element gives s = +inf: the finite elements encode to +-0, the infinite one
 * to 0x7F, and w to +-inf (NaN for w_raw = 0).
 * Defaults: softmax_scale 0 means fl32(128^-0.5) (bits 0x3DB504F3); head_scale 0 means
 * fl32(num_heads^-0.5) (32 heads: 0x3E3504F3, 64 heads: 0.125).
 *
 *   q          bf16 [num_tokens, num_heads, 128], strides q_stride_token, q_stride_head
 *              (elements, multiples of 8); 16-byte aligned
 *   w_raw      bf16 [num_tokens, num_heads], row stride w_stride_token; 2-byte aligned
 *   positions  int64 [num_tokens]; 8-byte aligned
 *   cos_sin    fp32 [max_position, 64]: cos in columns 0..31, sin in 32..63; 16-byte aligned
 *   q8         e4m3 [num_tokens, num_heads, 128], contiguous; 16-byte aligned
 *   w          fp32 [num_tokens, num_heads], contiguous; 4-byte aligned
 *
 * Errors: num_tokens outside [0, 2^31-1], num_heads outside [1, 128], max_position < 1,
 * q_stride_head below 128, q_stride_token below num_heads * q_stride_head (unless
 * num_tokens = 1), w_stride_token below num_heads, a stride overflowing a 64-bit byte
 * offset, softmax_scale or head_scale negative or not finite -> INVALID_VALUE; q strides
 * not multiples of 8, misaligned pointers -> MISALIGNED. num_tokens = 0 validates and
 * launches nothing. */
typedef struct dsv4_indexer_q_desc {
    int64_t num_tokens;     /* T: rows of q, w_raw, positions, q8 and w                       */
    int64_t num_heads;      /* H_I: index heads, in [1, 128] (V4.1: 32)                       */
    int64_t q_stride_token; /* elements; dense: num_heads * q_stride_head                    */
    int64_t q_stride_head;  /* elements; dense: 128                                          */
    int64_t w_stride_token; /* elements between w_raw rows; dense: num_heads                 */
    int64_t max_position;   /* rows of cos_sin                                                */
    float softmax_scale;    /* 0 means fl32(128^-0.5)                                         */
    float head_scale;       /* 0 means fl32(num_heads^-0.5)                                   */
} dsv4_indexer_q_desc_t;

typedef struct dsv4_indexer_q_args {
    const uint16_t *q;        /* bf16 [num_tokens, num_heads, 128]                          */
    const uint16_t *w_raw;    /* bf16 [num_tokens, num_heads], the head-weight projection   */
    const int64_t *positions; /* [num_tokens], absolute positions                           */
    const float *cos_sin;     /* [max_position, 64]                                         */
    uint8_t *q8;              /* e4m3 [num_tokens, num_heads, 128]                           */
    float *w;                 /* [num_tokens, num_heads]                                     */
} dsv4_indexer_q_args_t;

dsv4_status_t dsv4_indexer_q_check(const dsv4_indexer_q_desc_t *desc);
dsv4_status_t dsv4_indexer_q_workspace_size(const dsv4_indexer_q_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_indexer_q(const dsv4_indexer_q_desc_t *desc, const dsv4_indexer_q_args_t *args, void *workspace,
                             size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_indexer_q_ref(const dsv4_indexer_q_desc_t *desc, const dsv4_indexer_q_args_t *args);

/* =================================================================================
 * dsv4_indexer_k_store: key norm, RoPE, e4m3 and the paged indexer cache
 * =================================================================================
 * The indexer cache holds one 132-byte state per compressed position: 128 e4m3 codes
 * and the fp32 scale 2^e. With P = page_tokens, a page at byte page * page_stride_bytes
 * from the cache base and q = slot % P:
 *
 *   page + q*128 + d         code of dim d of state q, d = 0..127
 *   page + P*128 + q*4       the state's scale 2^e, little-endian fp32 (bits (e+127) << 23)
 *   page + P*132 ...         padding up to page_stride_bytes: never read or written
 *
 * (vLLM pads every page to a multiple of 576 bytes: P = 128 -> 17,280, P = 64 -> 8,640.)
 *
 * Row t < num_tokens is stored when slot = slot_mapping[t] is in [0, num_pages * P) and
 * positions[t] + 1 is a multiple of ratio (the token closes its compressed group:
 * state pos / ratio holds positions [v*ratio, v*ratio + ratio - 1]). Other rows write
 * nothing. For a stored row, x[d] = k_pre[t, d] read as fp32:
 *     p_l  = fmaf(x[4l], x[4l], x[4l+1]*x[4l+1]) + fmaf(x[4l+2], x[4l+2], x[4l+3]*x[4l+3])
 *                                                  l < 32, every product and sum rounded
 *     ssq  = p_0 after the halving tree p_l += p_(l+h) for h = 16, 8, 4, 2, 1
 *     rr   = 1 / sqrtf(ssq / 128 + eps)            IEEE square root and division
 *     y[d] = bf16r((x[d] * rr) * gamma[d])         two rounded products, in this order
 * then the RoPE pairs of y rotated at the table row (positions[t] / ratio) * ratio (the
 * group's first position; a negative position rotates by the identity rule above), the
 * row's scale exponent e, and
 *     code[d] = e4m3(clamp(y[d] * 2^-e, -448, 448))    NaN -> 0x7E (the clamp keeps 448)
 * An infinite element gives the scale +inf, codes +-0 for the finite elements and 0x7E
 * for the infinite one. Two rows naming one slot are a caller error (one of them wins).
 *
 *   k_pre         bf16 [num_tokens, 128], row stride k_stride_row (a multiple of 8);
 *                 16-byte aligned
 *   gamma         bf16 [128], the key norm's weight; 16-byte aligned
 *   positions     int64 [num_tokens]; 8-byte aligned
 *   slot_mapping  int64 [num_tokens], the indexer cache's slot per row (negative: none);
 *                 8-byte aligned
 *   cos_sin       fp32 [max_position, 64] as for dsv4_indexer_q; 16-byte aligned
 *   cache         uint8 [num_pages * page_stride_bytes]; 16-byte aligned
 *
 * Errors: num_tokens outside [0, 2^31-1], ratio not 1 or 2, eps negative or not finite,
 * max_position < 1, page_tokens outside [1, 2^24], page_stride_bytes below P*132,
 * num_pages outside [1, INT64_MAX / page_stride_bytes], k_stride_row below 128 or
 * overflowing -> INVALID_VALUE; page_stride_bytes not a multiple of 16, k_stride_row not
 * a multiple of 8, misaligned pointers -> MISALIGNED. num_tokens = 0 validates and
 * launches nothing. */
typedef struct dsv4_indexer_k_store_desc {
    int64_t num_tokens;        /* T: rows of k_pre, positions and slot_mapping                 */
    int64_t k_stride_row;      /* elements between k_pre rows; dense: 128                     */
    int64_t ratio;             /* r: compression ratio of the layer, 1 or 2                    */
    int64_t max_position;      /* rows of cos_sin                                              */
    int64_t page_tokens;       /* P: states per page (V4.1: 128 at r = 1, 64 at r = 2)         */
    int64_t page_stride_bytes; /* bytes between pages, >= P*132, a multiple of 16              */
    int64_t num_pages;         /* pages in the cache; slots >= num_pages*P are skipped         */
    float eps;                 /* RMSNorm epsilon: finite, >= 0                                */
} dsv4_indexer_k_store_desc_t;

typedef struct dsv4_indexer_k_store_args {
    const uint16_t *k_pre;       /* bf16 [num_tokens, 128], the key before its norm             */
    const uint16_t *gamma;       /* bf16 [128]                                                  */
    const int64_t *positions;    /* [num_tokens], absolute positions                            */
    const int64_t *slot_mapping; /* [num_tokens], negative = not stored                         */
    const float *cos_sin;        /* [max_position, 64]                                          */
    uint8_t *cache;              /* the paged indexer cache; only stored states change          */
} dsv4_indexer_k_store_args_t;

dsv4_status_t dsv4_indexer_k_store_check(const dsv4_indexer_k_store_desc_t *desc);
dsv4_status_t dsv4_indexer_k_store_workspace_size(const dsv4_indexer_k_store_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_indexer_k_store(const dsv4_indexer_k_store_desc_t *desc, const dsv4_indexer_k_store_args_t *args,
                                   void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_indexer_k_store_ref(const dsv4_indexer_k_store_desc_t *desc,
                                       const dsv4_indexer_k_store_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_INDEXER_H */
