/*
 * The compress family: operators around attention that are not attention itself.
 *
 *   dsv4_compress          the V4.1 compressor: pooled, RMS-normalized latent rows
 *                          (ratio 1 and 2, with the ratio-2 ring state)
 *   dsv4_compress_v4       the V4.0 compressor (ratio 4 and 128): state save, window
 *                          pooling, norm, RoPE and the compressed-cache record, fused
 *   dsv4_inv_rope          undo the RoPE rotation of the attention output, in place
 *   dsv4_engram_lookup     fetch and dequantize Engram hash-table rows into bf16
 *
 * Strides have no default: a stride of 0 is refused (INVALID_VALUE) on a dimension of
 * extent > 1 and accepted where it addresses nothing (dsv4.h).
 *
 * Number formats (bf16, fp8 e4m3fn, UE8M0 scales): dsv4/numerics.h. inv_rope, engram_lookup
 * and compress at ratio 1 are bit-exact against their CPU references (the kernels call
 * the same per-element functions); compress at ratio 2 meets the tolerance stated below.
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
#define DSV4_COMPRESS_DIM 512           /* latent dims; kv_score rows hold kv (and score) of this width */
#define DSV4_COMPRESS_MIN_RING_CAP 8    /* smallest ring block, rows                                */
#define DSV4_COMPRESS_MAX_RING_CAP 4096 /* largest ring block, rows                                 */

/* =================================================================================
 * dsv4_compress: the V4.1 compressor, ratio 1 and ratio 2
 * =================================================================================
 * Turns the compressor GEMM's fp32 output into bf16 latent rows, one per compressed
 * position, for the compressed-cache writer. norm512 of a 512-dim fp32 row x:
 *     p_l  = fmaf(x[4l], x[4l], x[4l+1]*x[4l+1]) + fmaf(x[4l+2], x[4l+2], x[4l+3]*x[4l+3])
 *                                                     l < 128, each product and sum rounded
 *     ssq  = p_0 after the halving tree p_l += p_(l+h) for h = 64, 32, 16, 8, 4, 2, 1
 *     rr   = 1 / sqrtf(ssq / 512 + eps)               IEEE square root and division
 *     latent[d] = bf16((x[d] * rr) * gamma[d])        two rounded fp32 products, RNE
 *
 * Ratio 1: every row t with slot[t] >= 0 gets latent[t] = norm512(kv_score[t, 0:512]).
 *
 * Ratio 2: positions pair up as {2v, 2v + 1}; the pair closes at the odd position. A
 * row t of request b (query_start_loc[b] <= t < query_start_loc[b + 1]) at an odd
 * position p >= 1 with ring_slot[t] in [0, ring_rows) gets a latent: with Q = kv_score[t]
 * and P the row of position p - 1, which is kv_score[t - 1] unless t is the first row of
 * its request, else ring row (ring_slot[t] - ring_slot[t] % cap) + (p - 1) % cap (the
 * request's ring block, written by an earlier call), for each d < 512 (kv in columns
 * 0..511, score in 512..1023):
 *     m = max(sp, sq), ep = exp(sp - m), eq = exp(sq - m)   (sp = P[512 + d], sq = Q[512 + d])
 *     pooled[d] = P[d] * ep / (ep + eq) + Q[d] * eq / (ep + eq)
 *     latent[t] = norm512(pooled)
 * Then the ring update: after every read above, each request stores the last
 * min(rows, ring_cap) rows of its chunk (both parities), whole 1024-float rows copied bit
 * for bit, each into ring row ring_slot[t]; rows whose ring_slot is outside
 * [0, ring_rows) are skipped. A chunk of at least ring_cap rows overwrites the ring row
 * its first row read; the read sees the old contents (two launches in stream order).
 * The ring block holds cap = max(8, next_pow2(speculative tokens + 2)) rows per request.
 *
 * Latent rows that get no latent (ratio 1: slot < 0; ratio 2: even or negative
 * positions, ring_slot outside the ring, rows outside every request) are not written.
 *
 * Exactness. Ratio 1 is bit-exact against dsv4_compress_ref (fixed order, IEEE
 * operations on host and device). Ratio 2 needs exp, which the host C library and the
 * device compute differently: against an fp64 evaluation of the formulas,
 *     |latent[d] - ref[d]| <= ulp_bf16(ref[d]) + 2^-20 * rr * |gamma[d]| * max(|P[d]|, |Q[d]|)
 * (the second term covers cancellation between the two rows); the ring contents are
 * exact copies. Two scores of -inf give NaN (the whole row, through ssq); an all-zero
 * pooled row gives zeros.
 *
 *   kv_score         fp32 [num_tokens, 512 * ratio], row stride kv_stride (a multiple of
 *                    16 elements); 16-byte aligned
 *   positions        int64 [num_tokens] (ratio 2; ignored at ratio 1); 8-byte aligned
 *   gamma            bf16 [512], the compressor's RMSNorm weight; 8-byte aligned
 *   slot             int64 [num_tokens] (ratio 1): the compressed-cache slot mapping,
 *                    only its sign is read; 8-byte aligned
 *   ring_slot        int64 [num_tokens] (ratio 2): blk * cap + position % cap, -1 for no
 *                    ring; 8-byte aligned
 *   query_start_loc  int32 [num_reqs + 1] (ratio 2): each request's rows of this call,
 *                    ascending; 4-byte aligned
 *   ring             fp32 [ring_rows, 1024] (ratio 2), row stride ring_stride (a
 *                    multiple of 16); ring_rows = blocks * ring_cap; 16-byte aligned;
 *                    read and written in place
 *   latent           bf16 [num_tokens, 512], contiguous; 8-byte aligned
 * ring must not overlap kv_score or latent; the rows stored by one call must name
 * distinct ring rows (consecutive positions of distinct requests' blocks do).
 *
 * Errors: num_tokens outside [0, 2^31-1], ratio not 1 or 2, eps negative or not finite,
 * kv_stride below 512 * ratio or overflowing a 64-bit byte offset; at ratio 2 also
 * num_reqs outside [0, 2^31-2], ring_cap not a power of two in [8, 4096], ring_rows below
 * ring_cap or not a multiple of it, ring_stride below 1024 or overflowing -> INVALID_VALUE;
 * strides not multiples of 16, misaligned pointers -> MISALIGNED. Out-of-range values
 * inside positions, slot, ring_slot and query_start_loc never cause an access outside
 * the buffers above. num_tokens = 0 validates and launches nothing. */
typedef struct dsv4_compress_desc {
    int64_t num_tokens;  /* T: rows of kv_score, positions, slots and latent                 */
    int64_t ratio;       /* compression ratio: 1 or 2                                         */
    int64_t kv_stride;   /* elements between kv_score rows; dense: 512 * ratio               */
    int64_t num_reqs;    /* ratio 2: R, requests in query_start_loc                          */
    int64_t ring_cap;    /* ratio 2: rows per ring block, a power of two in [8, 4096]        */
    int64_t ring_rows;   /* ratio 2: rows of ring, a multiple of ring_cap                    */
    int64_t ring_stride; /* ratio 2: elements between ring rows; dense: 1024                */
    float eps;           /* RMSNorm epsilon: finite, >= 0                                     */
} dsv4_compress_desc_t;

typedef struct dsv4_compress_args {
    const float *kv_score;          /* [num_tokens, 512 * ratio] fp32                          */
    const int64_t *positions;       /* [num_tokens]; ratio 2 only                              */
    const uint16_t *gamma;          /* bf16 [512]                                              */
    const int64_t *slot;            /* [num_tokens]; ratio 1 only                              */
    const int64_t *ring_slot;       /* [num_tokens]; ratio 2 only                              */
    const int32_t *query_start_loc; /* [num_reqs + 1]; ratio 2 only                            */
    float *ring;                    /* [ring_rows, 1024] fp32, updated in place; ratio 2 only  */
    uint16_t *latent;               /* bf16 [num_tokens, 512]; only latent rows written        */
} dsv4_compress_args_t;

dsv4_status_t dsv4_compress_check(const dsv4_compress_desc_t *desc);
dsv4_status_t dsv4_compress_workspace_size(const dsv4_compress_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_compress(const dsv4_compress_desc_t *desc, const dsv4_compress_args_t *args, void *workspace,
                            size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_compress_ref(const dsv4_compress_desc_t *desc, const dsv4_compress_args_t *args);

/* =================================================================================
 * dsv4_compress_v4: the V4.0 compressor (ratio 4 with overlap, ratio 128), fused with
 * the compressed-cache writer
 * =================================================================================
 * DeepSeek-V4.0's compressed layers keep, per request, a sliding window of fp32 state
 * rows (one per position) in a paged state cache, and at every position that closes a
 * group of r = ratio positions pool the window into one latent of N = head_dim dims,
 * normalize it and store it: N = 512 (the attention compressor) as a 584-byte
 * fp8_ds_mla record (dsv4_kv_insert's format) in the compressed cache; N = 128 (the
 * lightning indexer's own compressor) as a 132-byte state of the indexer cache
 * (dsv4_indexer_k_store's format). With c = 2 at ratio 4 (overlapping windows) and c = 1
 * at ratio 128, a kv_score row holds kv (c * N floats) then score (c * N); a state row
 * holds the same two halves; the window has W = c * r rows (8 or 128). One call runs two
 * steps in stream order:
 *
 * Step 1, save. Every row t with pos = positions[t] >= 0 and s = state_slot[t] in
 * [0, state_blocks * B) (B = state_block_rows) stores state row (s / B, s % B):
 *     kv half     kv_score[t, d]                          bit copy, d < c * N
 *     score half  kv_score[t, c * N + d] + ape[pos % r, d]   one fp32 add
 *
 * Step 2, records; it reads the state after every store of step 1. Row t writes a record
 * when slot = slot_mapping[t] is in [0, num_pages * P) and pos + 1 is a multiple of r
 * (the state slot plays no part: a padded row has slot -1 in both mappings). Its window
 * is the positions q_j = pos - W + 1 + j, j < W. Row j is readable when q_j >= 0, the
 * request b = req_idx[t] is in [0, num_reqs), q_j / B < max_blocks and blk =
 * block_table[b * block_table_stride + q_j / B] is in [0, state_blocks); it is state row
 * (blk, q_j % B), of which it uses dims o_j .. o_j + N - 1 of each half, o_j = N if
 * j >= r (the newer half of an overlapping window) else 0: kv_j[d], s_j[d]. A row that is
 * not readable counts as kv 0 and score -inf (it is not read). Per dim d < N:
 *     m      = the largest s_j[d] (NaN scores left out); if m = -inf, x[d] = 0, else
 *     e_j    = exp(s_j[d] - m)                          the library's exp, below
 *     num, den: per group of 8 consecutive rows, den_g = e_(8g) + ... + e_(8g+7) and
 *               num_g = fmaf(kv_j[d], e_j, num_g) over the same rows in order, from +0;
 *               then the W / 8 groups by a halving tree (for h = W/16, ..., 2, 1, group
 *               g < h adds group g + h: ratio 128 only)
 *     x[d]   = num / den
 *     rr     = the RMS factor of x: N/4 partials p_l = fmaf(x[4l], x[4l], x[4l+1]^2) +
 *              fmaf(x[4l+2], x[4l+2], x[4l+3]^2), a halving tree (+N/8, ..., +1),
 *              1 / sqrtf(ssq / N + eps) (dsv4_compress's norm512 at N = 512)
 *     n[d]   = (x[d] * rr) * gamma[d], fp32, not rounded
 *     y[d]   = bf16(n[d]) for d < N - 64; each RoPE pair i < 32 of (a, b) = (n[N-64 + 2i],
 *              n[N-63 + 2i]) rotated at the group's first position pos + 1 - r with
 *              dsv4_kv_rope_insert's form on these unrounded fp32 values:
 *              y_a = bf16(fmaf(a, c, -(b * s))), y_b = bf16(fmaf(b, c, a * s))
 * N = 512: the record is exactly the one dsv4_kv_insert writes for the bf16 row y; of
 * several rows naming one slot, one row's whole record stands (as dsv4_kv_insert).
 * N = 128: the state is exactly the one dsv4_indexer_k_store writes for a normalized,
 * rotated key y (one scale 2^e from max |y|, 128 e4m3 codes, 2^e as fp32); two rows
 * naming one slot are a caller error. A closing position below 0 or past the rotary
 * table rotates by the identity; its window has no readable row and gives a zero latent.
 *
 * exp is evaluated by one fixed sequence of fp32 operations, the same on host and device:
 * k = rint(x * log2(e)), a two-constant reduction by k * ln 2 and a degree-7 polynomial
 * in fmaf steps, scaled by 2^k (0 below -104, NaN stays NaN); within 2 ulp of e^x. With
 * every other step an IEEE operation in a fixed order, records are bit-exact against
 * dsv4_compress_v4_ref and the state rows are exact. Against an exact evaluation of the
 * formulas the pooled values x[d] stay within W * 2^-22 * max_j |kv_j[d]|.
 *
 *   kv_score       fp32 [num_tokens, 2 * c * N], row stride kv_stride; 16-byte
 *                  aligned, stride a multiple of 4
 *   ape            fp32 [r, c * N], contiguous, 16-byte aligned
 *   positions      int64 [num_tokens]; state_slot int64 [num_tokens] (-1: not saved);
 *                  slot_mapping int64 [num_tokens] (the compressed cache, -1: no record);
 *                  8-byte aligned
 *   req_idx        int32 [num_tokens], each row's request; 4-byte aligned
 *   block_table    int32 [num_reqs, max_blocks], row stride block_table_stride: the
 *                  state blocks of each request's positions; 4-byte aligned
 *   gamma          bf16 [N], the compressor's RMSNorm weight; 8-byte aligned
 *   cos_sin_cache  fp32 [max_position, 64] (cos 0..31, sin 32..63), 16-byte aligned
 *   state          fp32 [state_blocks] blocks of B rows; block stride state_stride_block,
 *                  row stride state_stride_row (elements, multiples of 4, rows not
 *                  overlapping); 16-byte aligned; rows of step 1 written in place
 *   cache          N = 512: the compressed cache, as for dsv4_kv_insert (P = page_tokens
 *                  slots a page: 64 at ratio 4 and 2 at ratio 128 upstream); N = 128: the
 *                  indexer cache, as for dsv4_indexer_k_store (P = 64 upstream)
 * state must not overlap any input or cache. The rows saved by one call must name
 * distinct state rows, and no state row a record reads may be saved by the same call
 * except as the row of its own position q_j (what a block table of distinct blocks per
 * request gives).
 *
 * Errors: num_tokens outside [0, 2^31-1], ratio not 4 or 128, head_dim not 0, 128 or
 * 512, eps negative or not finite, kv_stride below 2 * c * N, state_block_rows outside
 * [1, 2^20], state_blocks < 1, state_stride_row below 2 * c * N, state_stride_block
 * below B * state_stride_row,
 * num_reqs outside [0, 2^31-1], max_blocks outside [1, 2^31-1], block_table_stride below
 * max_blocks (unless num_reqs <= 1), max_position < 1, a stride overflowing a 64-bit
 * offset, the cache rules of the output's operator -> INVALID_VALUE; strides not
 * multiples of 4,
 * misaligned pointers -> MISALIGNED. Out-of-range values inside positions, the slot
 * mappings, req_idx and block_table never cause an access outside the buffers above.
 * num_tokens = 0 validates and launches nothing. */
typedef struct dsv4_compress_v4_desc {
    int64_t num_tokens;         /* T: rows of kv_score and of every per-row array              */
    int64_t ratio;              /* 4 (overlapping windows of 8 rows) or 128 (windows of 128)   */
    int64_t head_dim;           /* N: 512 (0 means 512: records) or 128 (indexer states)       */
    int64_t kv_stride;          /* elements between kv_score rows; dense: 2 * c * N            */
    int64_t state_block_rows;   /* B: state rows per block (4 at ratio 4, 8 at 128 upstream)  */
    int64_t state_blocks;       /* blocks in state                                             */
    int64_t state_stride_block; /* elements between state blocks; dense: B * state_stride_row */
    int64_t state_stride_row;   /* elements between state rows; dense: 2 * c * N               */
    int64_t num_reqs;           /* rows of block_table                                          */
    int64_t max_blocks;         /* columns of block_table                                       */
    int64_t block_table_stride; /* elements between block_table rows; dense: max_blocks      */
    int64_t page_tokens;        /* P: slots per compressed-cache page                           */
    int64_t page_stride_bytes;  /* bytes between pages, >= P * 584, multiple of 16             */
    int64_t num_pages;          /* pages; slots >= num_pages * P write nothing                  */
    int64_t max_position;       /* rows of cos_sin_cache                                        */
    float eps;                  /* RMSNorm epsilon: finite, >= 0                                */
} dsv4_compress_v4_desc_t;

typedef struct dsv4_compress_v4_args {
    const float *kv_score;       /* [num_tokens, 2 * c * N] fp32: kv, then score               */
    const float *ape;            /* [ratio, c * N] fp32, added to the saved score              */
    const int64_t *positions;    /* [num_tokens]                                                */
    const int64_t *state_slot;   /* [num_tokens], state row of the position; -1 = not saved    */
    const int32_t *req_idx;      /* [num_tokens], request of each row                          */
    const int32_t *block_table;  /* [num_reqs, max_blocks], state blocks per request           */
    const uint16_t *gamma;       /* bf16 [N]                                                    */
    const float *cos_sin_cache;  /* [max_position, 64]                                          */
    const int64_t *slot_mapping; /* [num_tokens], compressed-cache slot; -1 = no record        */
    float *state;                /* the state cache, rows of step 1 written in place            */
    uint8_t *cache;              /* the compressed (N = 512) or indexer (N = 128) cache         */
} dsv4_compress_v4_args_t;

dsv4_status_t dsv4_compress_v4_check(const dsv4_compress_v4_desc_t *desc);
dsv4_status_t dsv4_compress_v4_workspace_size(const dsv4_compress_v4_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_compress_v4(const dsv4_compress_v4_desc_t *desc, const dsv4_compress_v4_args_t *args,
                               void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_compress_v4_ref(const dsv4_compress_v4_desc_t *desc, const dsv4_compress_v4_args_t *args);

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
    int64_t o_stride_token;   /* elements; dense: num_heads_padded * o_stride_head         */
    int64_t o_stride_head;    /* elements; dense: 512                                      */
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
    int64_t ids_stride_token;    /* elements; dense: n_cols * ids_stride_head                */
    int64_t ids_stride_head;     /* elements; dense: 1                                       */
    int64_t vocab_start;         /* first table row of this rank (row 0 of values)            */
    int64_t vocab_end;           /* one past the last table row of this rank                  */
    int64_t values_stride_bytes; /* bytes between value rows; dense: head_dim                */
    int64_t scales_stride_bytes; /* bytes between scale rows; dense: head_dim / 32            */
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
