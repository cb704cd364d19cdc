/*
 * The indexer family: the lightning indexer, which picks for every query token the
 * compressed entries that sparse MLA attends to. Built so far:
 *
 *   dsv4_indexer_q        query preparation: RoPE, e4m3 codes with a power-of-two scale,
 *                         and the head weights with that scale folded in
 *   dsv4_indexer_k_store  key store: RMSNorm, RoPE, e4m3 and the paged indexer cache
 *   dsv4_indexer_topk     fused logits + top-k over the paged cache (decode and prefill
 *                         alike), never writing a logits matrix; the V4.1 candidate
 *                         blocks (write, or restrict the selection to them)
 *   dsv4_indexer_logits   the same logits materialized as fp32 (tests, fallback)
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
 * -> NULL_POINTER; workspace is needed by dsv4_indexer_topk only (its _workspace_size). On any failure nothing is
 * launched and nothing is written; dsv4_last_error() names the operator, field, value.
 * No call allocates, synchronizes or prints; all are CUDA-graph safe. indexer_q and
 * indexer_k_store are bit-exact against their CPU references (the kernels call the same
 * per-element functions, all IEEE operations); the logits' tolerance and the selection's
 * exactness are stated at dsv4_indexer_topk.
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
 * to 0x7F, and w to +-inf (NaN for w_raw = 0). Every NaN w is stored as 0x7FFFFFFF.
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

/* =================================================================================
 * dsv4_indexer_topk: lightning-indexer logits and top-k selection, fused
 * =================================================================================
 * Rows are query tokens (decode rows, a prefill chunk's causal rows, or both): row t
 * belongs to request b = row_req[t] and sees the request-local compressed columns
 * j in [0, n_t), n_t = (positions[t] + 1) / ratio (integer division; 0 for a negative
 * position), capped at max_keys and at block_table_width * page_tokens (valid inputs never
 * reach either cap). Column j is state j of the request in the indexer cache that
 * dsv4_indexer_k_store writes: page = block_table[b * block_table_stride + j / P],
 * q = j % P (P = page_tokens). Keys of columns at or beyond n_t are never used, so
 * speculative rows of one request can share a cache that already holds later keys.
 *
 * Logit of row t, column j, with codes decoded exactly (e4m3 -> value; 0x7F and 0xFF
 * are NaN), sk_j the state's fp32 scale and w the head weights of dsv4_indexer_q:
 *     logit[t, j] = sk_j * sum_h w[t, h] * relu(sum_d q8[t, h, d] * k_j[d])
 * relu(x) = x > 0 ? x : 0 except relu(NaN) = NaN (the ReLU comes before w, which may be
 * negative). A column whose page entry is outside [0, num_pages) has the logit -inf
 * (a library choice: valid inputs never reach it). Evaluation: every q*k product is exact
 * (tensor cores, fp16 operands), the sums are fp32 in an order this library fixes per
 * kernel; tolerance against exact arithmetic: |logit - exact| <= 1e-5 * A[t, j] with
 * A = sk_j * sum_h |w[t, h]| * sum_d |q8 * k_j| (the absolute mass, so cancellation
 * cannot fail it). dsv4_indexer_topk's internal logits are bit-identical to
 * dsv4_indexer_logits' output (the two kernels share the tile and epilogue code).
 *
 * Selection. Each logit maps to an order key: -0 counts as +0, every NaN ranks above
 * +inf, then +inf > finite values > -inf. On the fp32 bits u: NaN -> 0xFFFFFFFF, else
 * with u of +0 for -0: key = (u >> 31) ? ~u : u | 0x80000000. Columns of the eligible set
 * E_t are ordered by (key descending, j ascending), a strict total order; the selection
 * is the first min(topk, |E_t|) columns. topk[t, 0 .. topk) holds the selected columns
 * in ascending j, then -1: every column of the row is written. If |E_t| <= topk the row is
 * E_t in ascending order (no logits needed; without candidates 0, 1, .., n_t - 1). A row
 * with n_t <= 0, row_valid[t] == 0 or row_req[t] outside [0, num_reqs) is all -1. The
 * result does not depend on the split count or the tile size.
 *
 * Candidate blocks (V4.1; B = candidate_block = 8 columns per block, C = candidate_count):
 *   mode 0  E_t = [0, n_t); cand is not touched.
 *   mode 1  (write) E_t = [0, n_t) as mode 0, and additionally, with nb_t = ceil(n_t / B):
 *           block g in [0, nb_t) covers columns [B*g, min(B*g + B, n_t)), its score is the
 *           largest order key of its columns (NaN propagates), the last block's score is
 *           pinned to +inf, blocks whose score is -inf are dropped, and the first
 *           min(C, kept) blocks by (score descending, g ascending) are written to
 *           cand[t, 0 .. C) in ascending g, then -1. Rows with n_t <= 0 (or invalid) get
 *           all -1.
 *   mode 2  (restrict) cand[t, 0 .. C) is read: ids g in [0, nb_t) name the eligible
 *           blocks; -1, other out-of-range ids and duplicates are ignored. E_t is the union
 *           of their columns; the selection above runs on it, and only those keys are read.
 *
 *   q8           e4m3 [num_rows, num_heads, 128], contiguous (dsv4_indexer_q's q8); 16-byte
 *                aligned
 *   w            fp32 [num_rows, num_heads], contiguous (dsv4_indexer_q's w); 4-byte aligned
 *   positions    int64 [num_rows]; 8-byte aligned
 *   row_req      int32 [num_rows], the row's request (block-table row); 4-byte aligned
 *   row_valid    uint8 [num_rows], 0 marks a padding row; NULL: every row is valid
 *   block_table  int32 [num_reqs, block_table_stride]; 4-byte aligned
 *   cache        the paged indexer cache (132-byte states, layout at dsv4_indexer_k_store);
 *                16-byte aligned
 *   topk         int32 [num_rows, topk_stride] output; 4-byte aligned
 *   cand         int32 [num_rows, candidate_stride]: written in mode 1, read in mode 2,
 *                NULL allowed in mode 0; 4-byte aligned
 *
 * Workspace: num_rows * S * topk * 8 bytes rounded up to 256 (S = column splits per row:
 * num_splits, or chosen from the descriptor when 0; the columns split are max_keys, in
 * mode 2 at most 8 * candidate_count), plus num_rows * ceil(max_keys / 8) * 4
 * bytes of block scores in mode 1, or num_rows * (candidate_count + 2) * 4 bytes of sorted
 * candidate lists in mode 2; 256-byte aligned. _workspace_size reports it. The logits
 * never reach global memory.
 *
 * Errors: num_rows outside [0, 2^31-1], num_heads not 32 or 64, topk outside [1, 2048],
 * ratio not 1 or 2, num_reqs < 1, block_table_width < 1, block_table_stride below it or
 * overflowing, page_tokens not a multiple of 64 in [64, 2^20], page_stride_bytes below
 * page_tokens*132, num_pages outside [1, INT64_MAX / page_stride_bytes], topk_stride below
 * topk or overflowing, max_keys outside [1, 2^26], candidate_mode not 0..2,
 * candidate_block not 8, candidate_count outside [1, 2048], candidate_stride below it or
 * overflowing, num_splits outside [0, 4096] or too small for the split length limit
 * (65,536 of the columns split) -> INVALID_VALUE; page_stride_bytes not a multiple of 16, misaligned
 * pointers -> MISALIGNED; cand NULL in mode 1 or 2 -> NULL_POINTER; workspace below
 * _workspace_size -> WORKSPACE_TOO_SMALL. num_rows = 0 validates and launches nothing. */
typedef struct dsv4_indexer_topk_desc {
    int64_t num_rows;           /* T: rows of q8, w, positions, row_req, topk (, cand)        */
    int64_t num_heads;          /* H_I: 32 (V4.1) or 64 (V4)                                  */
    int64_t topk;               /* K: selected columns per row, in [1, 2048] (V4.1: 512)      */
    int64_t ratio;              /* r: compression ratio of the layer, 1 or 2                  */
    int64_t num_reqs;           /* rows of block_table                                        */
    int64_t block_table_width;  /* page entries per request                                   */
    int64_t block_table_stride; /* elements between block_table rows, >= the width           */
    int64_t page_tokens;        /* P: states per page, a multiple of 64 (V4.1: 128 or 64)     */
    int64_t page_stride_bytes;  /* bytes between pages, >= P*132, a multiple of 16            */
    int64_t num_pages;          /* pages in the cache                                         */
    int64_t topk_stride;        /* elements between topk rows, >= topk                        */
    int64_t max_keys;           /* largest n_t of any row (e.g. max_model_len / r); sizes the
                                   workspace, caps n_t                                        */
    int64_t candidate_mode;     /* 0 none, 1 write the candidate blocks, 2 restrict to them   */
    int64_t candidate_count;    /* C: blocks per candidate row; 0 means 2048                  */
    int64_t candidate_block;    /* B: columns per block; 0 means 8 (the only value)           */
    int64_t candidate_stride;   /* elements between cand rows (modes 1, 2), >= candidate_count */
    int64_t num_splits;         /* S: column splits per row; 0 = chosen from the descriptor   */
} dsv4_indexer_topk_desc_t;

typedef struct dsv4_indexer_topk_args {
    const uint8_t *q8;          /* e4m3 [num_rows, num_heads, 128]                            */
    const float *w;             /* [num_rows, num_heads]                                      */
    const int64_t *positions;   /* [num_rows], absolute positions                             */
    const int32_t *row_req;     /* [num_rows], request of each row                            */
    const uint8_t *row_valid;   /* [num_rows] or NULL                                         */
    const int32_t *block_table; /* [num_reqs, block_table_stride], page ids                   */
    const uint8_t *cache;       /* the paged indexer cache                                    */
    int32_t *topk;              /* [num_rows, topk_stride] out                                */
    int32_t *cand;              /* [num_rows, candidate_stride]: out (mode 1), in (mode 2)    */
} dsv4_indexer_topk_args_t;

dsv4_status_t dsv4_indexer_topk_check(const dsv4_indexer_topk_desc_t *desc);
dsv4_status_t dsv4_indexer_topk_workspace_size(const dsv4_indexer_topk_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_indexer_topk(const dsv4_indexer_topk_desc_t *desc, const dsv4_indexer_topk_args_t *args,
                                void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
/* The reference: logits as dsv4_indexer_logits_ref computes them, then the selection and
 * candidate rules above, on host pointers (no workspace). */
dsv4_status_t dsv4_indexer_topk_ref(const dsv4_indexer_topk_desc_t *desc, const dsv4_indexer_topk_args_t *args);

/* =================================================================================
 * dsv4_indexer_logits: the logits of dsv4_indexer_topk, materialized
 * =================================================================================
 * out[t, j] = logit[t, j] (formula above) for j < min(n_t, out_cols); -inf for the other
 * columns j < out_cols (rows that are invalid or have n_t <= 0 are all -inf). Fields and
 * inputs as dsv4_indexer_topk (no candidates, no workspace). The kernel shares its tile and
 * epilogue with dsv4_indexer_topk, so the bits equal that operator's internal logits.
 *
 *   out   fp32 [num_rows, out_stride]; 16-byte aligned
 *
 * Errors: as dsv4_indexer_topk where the fields are the same; out_cols outside [0, 2^31-1],
 * out_stride below out_cols or overflowing -> INVALID_VALUE; out_stride not a multiple of 4
 * -> MISALIGNED. */
typedef struct dsv4_indexer_logits_desc {
    int64_t num_rows;           /* as dsv4_indexer_topk                                        */
    int64_t num_heads;          /* 32 or 64                                                    */
    int64_t ratio;              /* 1 or 2                                                      */
    int64_t num_reqs;           /* rows of block_table                                         */
    int64_t block_table_width;  /* page entries per request                                    */
    int64_t block_table_stride; /* >= the width                                                */
    int64_t page_tokens;        /* a multiple of 64                                            */
    int64_t page_stride_bytes;  /* >= P*132, a multiple of 16                                  */
    int64_t num_pages;          /* pages in the cache                                          */
    int64_t max_keys;           /* caps n_t, as dsv4_indexer_topk                              */
    int64_t out_cols;           /* columns written per row                                     */
    int64_t out_stride;         /* elements between out rows, >= out_cols                      */
} dsv4_indexer_logits_desc_t;

typedef struct dsv4_indexer_logits_args {
    const uint8_t *q8;
    const float *w;
    const int64_t *positions;
    const int32_t *row_req;
    const uint8_t *row_valid; /* or NULL */
    const int32_t *block_table;
    const uint8_t *cache;
    float *out; /* [num_rows, out_stride] */
} dsv4_indexer_logits_args_t;

dsv4_status_t dsv4_indexer_logits_check(const dsv4_indexer_logits_desc_t *desc);
dsv4_status_t dsv4_indexer_logits_workspace_size(const dsv4_indexer_logits_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_indexer_logits(const dsv4_indexer_logits_desc_t *desc, const dsv4_indexer_logits_args_t *args,
                                  void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
/* fp32 reference: each dot product exact, rounded once; then relu, the product with w and
 * the sum over heads in head order, each rounded; times sk_j. */
dsv4_status_t dsv4_indexer_logits_ref(const dsv4_indexer_logits_desc_t *desc, const dsv4_indexer_logits_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_INDEXER_H */
