/*
 * The indices family: the integer index lists that sparse MLA attends to.
 *
 *   dsv4_topk_translate         decode: local compressed top-k index -> global slot id, + lens
 *   dsv4_topk_translate_packed  the same as a ragged list: lens, indptr [T+1], packed values
 *   dsv4_combine_topk_swa       prefill: top-k workspace rows + sliding-window rows + -1 fill
 *   dsv4_decode_swa_indices     decode: global SWA slot ids of the last min(pos+1, W) positions
 *
 * Three index spaces
 *   local compressed index v  0 .. n_t - 1, where n_t = (pos + 1) / ratio is the number of
 *                             complete compressed entries the token at position pos sees;
 *                             the lightning indexer's top-k rows hold these
 *   global slot id            physical_page * page_tokens + slot in a paged cache; read by
 *                             dsv4_sparse_mla_decode (include/dsv4/attention.h)
 *   workspace row             b * slab_rows + row in the bf16 prefill workspace; read by
 *                             dsv4_sparse_mla_prefill
 * Prefix contract: in a top-k row the valid entries (>= 0) come first, then -1 (the
 * indexer writes -1 only at the tail). The translation's lens relies on it.
 *
 * The prefill workspace slab. Request b of a prefill chunk owns slab_rows (M) bf16 rows,
 * filled by dsv4_kv_gather (include/dsv4/kvcache.h), with L = seq_lens[b]:
 *   compressed cache (ratio r >= 1):  rows [0, L / r) hold compressed entries 0 .. L/r - 1
 *   SWA cache:                        rows [N, N + G) hold positions L - G .. L - 1, where
 *                                     G = gather_lens[b] = query_len + min(prefix_len, W - 1)
 * N = swa_row0 = ceil(max_model_len / r) (0 for SWA-only layers), and the usual sizing
 * M = N + W + max_num_batched_tokens keeps N + G <= M. The combine (section 2) turns top-k
 * entries and window positions into rows of these slabs.
 *
 * Common rules of this family
 *   - Every index tensor is int32, row-major; row strides are in elements. -1 means invalid.
 *   - A row stride is at least the row width; 0 only where it addresses nothing (one row,
 *     or a width of 0): strides have no default (dsv4.h).
 *   - Every pointer must be non-NULL (even when num_tokens is 0) unless its comment says
 *     otherwise, and every int32 pointer 4-byte aligned (DSV4_STATUS_MISALIGNED). The kernels
 *     use 16-byte loads and stores where the pointers, strides and widths allow it and fall
 *     back to 4-byte accesses otherwise, so no alignment beyond 4 bytes is required.
 *   - is_valid_token is one byte per token (a torch.bool tensor): 0 = invalid, else valid.
 *   - Outputs must not overlap inputs. Only the elements named below are written; row padding
 *     (columns past the written width in a longer row stride) is left untouched.
 *   - Values inside index tensors are device data the host cannot check. Out-of-range values
 *     follow the formulas below (-1, not counted) or the library choices listed per
 *     operator; they are never dereferenced out of bounds. Results are bit-exact with the
 *     _ref functions.
 *   - Slot arithmetic wraps modulo 2^32 (as vLLM's int32 arithmetic does); no valid cache
 *     layout comes near that.
 *   - Every run call is one or two kernel launches, never allocates or synchronizes, and can
 *     be captured in a CUDA graph. Workspace is 0 bytes except for the packed translation.
 */
#ifndef DSV4_INDICES_H
#define DSV4_INDICES_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/dsv4.h"

#ifdef __cplusplus
extern "C" {
#endif

/* =====================================================================================
 * 1. Top-k translation for decode (vLLM's compute_global_topk_indices_and_lens)
 * =====================================================================================
 *
 *   for each token t:  req = token_to_req[t], count = 0
 *     for j in 0..K-1: v = topk_indices[t, j]
 *       if req outside [0, num_reqs) or v < 0 or v / page_tokens >= block_table_width:
 *            global[t, j] = -1
 *       else global[t, j] = block_table[req, v / page_tokens] * page_tokens + v % page_tokens
 *            count += 1
 *     lens[t] = (is_valid_token[t] && req inside [0, num_reqs)) ? count : 0
 *
 * Consumers read global[t, 0 : lens[t]]; lens counts valid entries anywhere in the row, so
 * this is right under the prefix contract (valid entries first, then -1). Translated entries
 * are written for invalid tokens too (only their lens is 0).
 * Library choices: v / page_tokens >= block_table_width gives -1 and is not counted (vLLM reads
 * past the table row); a token whose req is outside [0, num_reqs) gets a -1 row and lens 0.
 * Block-table entries are used as given.
 *
 * Shapes: topk_indices [T, K] (row stride topk_stride), token_to_req [T], block_table
 * [num_reqs, block_table_width] (row stride block_table_stride), is_valid_token [T] bytes;
 * global_indices [T, K] (row stride out_stride), lens [T].
 *
 * Errors: DSV4_STATUS_INVALID_VALUE for num_tokens outside [0, 2^31-1], topk outside
 * [0, 2^24], num_reqs or block_table_width outside [1, 2^30], page_tokens outside [1, 2^31-1], a
 * stride below its row width or whose extent overflows; NULL_POINTER / MISALIGNED for
 * pointers; NULL_POINTER for a NULL stream.
 */
typedef struct dsv4_topk_translate_desc {
    int64_t num_tokens;         /* T                                                            */
    int64_t topk;               /* K: columns of topk_indices and global_indices                */
    int64_t num_reqs;           /* R: rows of block_table                                       */
    int64_t block_table_width;  /* pages per block-table row                                    */
    int64_t page_tokens;        /* P: slots per page of the compressed cache        */
    int64_t topk_stride;        /* row stride of topk_indices, >= K; dense: K                  */
    int64_t block_table_stride; /* row stride of block_table, >= block_table_width; dense: width */
    int64_t out_stride;         /* row stride of global_indices, >= K; dense: K (unused by _packed) */
} dsv4_topk_translate_desc_t;

typedef struct dsv4_topk_translate_args {
    const int32_t *topk_indices;   /* [T, topk_stride] local compressed indices             */
    const int32_t *token_to_req;   /* [T]                                                   */
    const int32_t *block_table;    /* [R, block_table_stride] physical page of each logical page  */
    const uint8_t *is_valid_token; /* [T] (slot_mapping >= 0)                               */
    int32_t *global_indices;       /* [T, out_stride] out: columns [0, K) of each row        */
    int32_t *lens;                 /* [T] out                                               */
} dsv4_topk_translate_args_t;

dsv4_status_t dsv4_topk_translate_check(const dsv4_topk_translate_desc_t *desc);
dsv4_status_t dsv4_topk_translate_workspace_size(const dsv4_topk_translate_desc_t *desc, size_t *bytes); /* 0 */
dsv4_status_t dsv4_topk_translate(const dsv4_topk_translate_desc_t *desc, const dsv4_topk_translate_args_t *args,
                                  void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_topk_translate_ref(const dsv4_topk_translate_desc_t *desc, const dsv4_topk_translate_args_t *args);

/* -------------------------------------------------------------------------------------
 * 1b. Packed (ragged) translation: the V4 ROCm / Ampere path
 * -------------------------------------------------------------------------------------
 *   lens as above; indptr[0] = 0, indptr[t+1] = indptr[t] + lens[t];
 *   packed[indptr[t] + j] = global[t, j] for j < lens[t]   (the first lens[t] columns).
 * The packed list has no -1 fill; packed[indptr[T] ...] is left untouched. `packed` must
 * have room for T*K entries (the most indptr[T] can reach); T*K must be below 2^31.
 * Same descriptor as the dense call (out_stride is ignored and may be 0).
 *
 * Two launches, no host synchronization: (1) one warp per token counts lens and each CTA
 * writes the sum of its rows' lens to the workspace; (2) one CTA per group of rows adds the
 * group sums before it (the exclusive prefix), scans its own rows, writes indptr and packs.
 * Workspace: dsv4_topk_translate_packed_workspace_size (4 bytes per group of rows, 4-byte
 * aligned); DSV4_STATUS_WORKSPACE_TOO_SMALL below it.
 */
typedef dsv4_topk_translate_desc_t dsv4_topk_translate_packed_desc_t;

typedef struct dsv4_topk_translate_packed_args {
    const int32_t *topk_indices;   /* [T, topk_stride]                                      */
    const int32_t *token_to_req;   /* [T]                                                   */
    const int32_t *block_table;    /* [R, block_table_stride]                                     */
    const uint8_t *is_valid_token; /* [T]                                                   */
    int32_t *lens;                 /* [T] out                                               */
    int32_t *indptr;               /* [T+1] out                                             */
    int32_t *packed;               /* [T*K] out: entries [0, indptr[T]) written              */
} dsv4_topk_translate_packed_args_t;

dsv4_status_t dsv4_topk_translate_packed_check(const dsv4_topk_translate_packed_desc_t *desc);
dsv4_status_t dsv4_topk_translate_packed_workspace_size(const dsv4_topk_translate_packed_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_topk_translate_packed(const dsv4_topk_translate_packed_desc_t *desc,
                                         const dsv4_topk_translate_packed_args_t *args, void *workspace,
                                         size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_topk_translate_packed_ref(const dsv4_topk_translate_packed_desc_t *desc,
                                             const dsv4_topk_translate_packed_args_t *args);

/* =====================================================================================
 * 2. Top-k + sliding-window combine for prefill (vLLM's combine_topk_swa_indices)
 * =====================================================================================
 *
 * Builds, per prefill token of one chunk, the workspace rows sparse MLA prefill attends to.
 * C = dsv4_combine_topk_swa_cols(topk, window) = round_up(topk + window, 128) columns.
 *
 *   for each request b (qsl rebased: q0 = qsl[b] - qsl[0], q1 = qsl[b+1] - qsl[0]):
 *     L = seq_lens[b], G = gather_lens[b], gs = L - G
 *     for t in q0 .. q1-1:
 *       pos      = L - (q1 - q0) + (t - q0)
 *       topk_len = (ratio == 0) ? 0 : min(max(pos+1, 0) / ratio, topk)
 *       V4.1: swa_start = max(pos - window + 1, 0, gs);  swa_len = max(pos - swa_start + 1, 0)
 *       V4:   swa_len   = min(max(pos+1, 0), window);    swa_start = pos - swa_len + 1
 *       A: j <  topk_len:            v = topk_indices[t, j]
 *                                    V4.1: (0 <= v < swa_row0) ? v + slab_rows*b : -1
 *                                    V4:   v + slab_rows*b       (no validity filter)
 *       B: j - topk_len < swa_len:   slab_rows*b + swa_row0 + (swa_start - gs) + (j - topk_len)
 *       C: other columns < C:        -1
 *       combined_lens[t] = topk_len + swa_len
 *
 * query_start_loc holds batch-global offsets; the op rebases them by their first entry, so
 * a slice of the batch-wide tensor can be passed. It must be non-decreasing (device data,
 * not checked). Rows t < num_tokens that no request covers (t >= qsl[R] - qsl[0]) are all
 * -1 with lens 0; request tokens at rows >= num_tokens are not written.
 * Library choices: V4.1 clamps the window start at gs (as vLLM's later kernel does; identical
 * for gather_lens >= query_len + min(prefix_len, W-1)), so region B never names a row the
 * gather did not write; a position below 0 (seq_len < query_len) gives an empty row.
 * V4 mode reproduces V4's kernel: no validity filter, no clamp, and no ratio 0 (V4 maps a
 * config ratio of 0 to 1; pass 1).
 *
 * Shapes: topk_indices [T, topk_cols] (row stride topk_stride), query_start_loc [R+1],
 * seq_lens [R], gather_lens [R]; combined [T, C] (row stride out_stride), combined_lens [T].
 *
 * Errors (INVALID_VALUE): num_tokens outside [0, 2^31-1]; num_reqs outside [1, 2^30]; topk
 * outside [0, 2^24] or above topk_cols; window outside [1, 2^20]; ratio outside [0, 2^31-1]
 * (V4: [1, ...]); swa_row0 outside [0, slab_rows]; slab_rows * num_reqs above 2^31-1;
 * out_stride below C; mode not a dsv4_combine_mode_t.
 * One warp per token, 16-byte stores when combined and out_stride allow it.
 */
typedef enum dsv4_combine_mode {
    DSV4_COMBINE_V4_1 = 0, /* primary contract: validity filter, ratio 0 = SWA-only, clamp   */
    DSV4_COMBINE_V4 = 1    /* V4 behaviour: region A values shifted without the filter       */
} dsv4_combine_mode_t;

typedef struct dsv4_combine_topk_swa_desc {
    int64_t num_tokens;  /* T_chunk: rows of topk_indices, combined and combined_lens        */
    int64_t num_reqs;    /* R: requests of the chunk                                         */
    int64_t topk;        /* TOP_K: the layer's top-k width; 0 for SWA-only layers            */
    int64_t topk_cols;   /* K_w >= topk: columns of topk_indices                             */
    int64_t topk_stride; /* row stride of topk_indices, >= topk_cols; dense: topk_cols     */
    int64_t window;      /* W (128 in every DeepSeek-V4 model)                               */
    int64_t ratio;       /* r: compress ratio; 0 = SWA-only (V4.1 mode only)                 */
    int64_t slab_rows;   /* M: rows per request slab of the prefill workspace                */
    int64_t swa_row0;    /* N: first SWA row of a slab (the SWA gather's offset, above)      */
    int64_t out_stride;  /* row stride of combined, >= C; dense: C                          */
    int64_t mode;        /* dsv4_combine_mode_t; 0 = DSV4_COMBINE_V4_1                        */
} dsv4_combine_topk_swa_desc_t;

typedef struct dsv4_combine_topk_swa_args {
    const int32_t *topk_indices;    /* [T, topk_stride]; may be NULL when topk == 0 or ratio == 0 */
    const int32_t *query_start_loc; /* [R+1] batch-global cumulative token offsets          */
    const int32_t *seq_lens;        /* [R] context length after this chunk                  */
    const int32_t *gather_lens;     /* [R] SWA rows gathered (query_len + min(prefix, W-1)) */
    int32_t *combined;              /* [T, out_stride] out: columns [0, C) of each row       */
    int32_t *combined_lens;         /* [T] out                                              */
} dsv4_combine_topk_swa_args_t;

/* C = round_up(topk + window, 128), FlashMLA's B_TOPK alignment; -1 for negative input. */
int64_t dsv4_combine_topk_swa_cols(int64_t topk, int64_t window);

dsv4_status_t dsv4_combine_topk_swa_check(const dsv4_combine_topk_swa_desc_t *desc);
dsv4_status_t dsv4_combine_topk_swa_workspace_size(const dsv4_combine_topk_swa_desc_t *desc, size_t *bytes); /* 0 */
dsv4_status_t dsv4_combine_topk_swa(const dsv4_combine_topk_swa_desc_t *desc, const dsv4_combine_topk_swa_args_t *args,
                                    void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_combine_topk_swa_ref(const dsv4_combine_topk_swa_desc_t *desc,
                                        const dsv4_combine_topk_swa_args_t *args);

/* =====================================================================================
 * 3. Decode SWA index lists, built once per step and shared by all layers
 * =====================================================================================
 *
 *   for each decode token t: req = token_to_req[t], pos = positions[t]
 *     len = (req inside [0, num_reqs) and pos >= 0) ? min(pos + 1, window) : 0
 *     for j < len:  q = pos - len + 1 + j      (positions max(pos-W+1, 0) .. pos, ascending)
 *                   out[t, j] = (q / page_tokens < block_table_width)
 *                             ? block_table[req, q / page_tokens] * page_tokens + q % page_tokens : -1
 *     for j >= len: out[t, j] = -1
 *     swa_lens[t] = is_valid_token[t] ? len : 0
 *
 * positions[t] is the token's absolute position, seq_len - query_len + i for the i-th token
 * of its request. The row is written for invalid tokens too (only the length is 0).
 * Library choices: a page past block_table_width gives -1 but keeps its column and is counted
 * (as the combine's validity filter); a req outside [0, num_reqs) or a negative position
 * gives an all -1 row and length 0.
 *
 * Shapes: token_to_req [T], positions [T], is_valid_token [T] bytes, block_table
 * [num_reqs, block_table_width] (row stride block_table_stride); swa_indices [T, window] (row stride
 * out_stride; vLLM's [T, 1, W] tensor fits), swa_lens [T].
 * Errors (INVALID_VALUE): num_tokens outside [0, 2^31-1]; num_reqs or block_table_width outside
 * [1, 2^30]; window outside [1, 2^20]; page_tokens outside [1, 2^31-1]; strides too small.
 */
typedef struct dsv4_decode_swa_indices_desc {
    int64_t num_tokens;         /* T_dec                                             */
    int64_t num_reqs;           /* R: rows of block_table                            */
    int64_t window;             /* W: columns of swa_indices                         */
    int64_t page_tokens;        /* P: slots per page of the SWA cache                */
    int64_t block_table_width;  /* pages per block-table row                         */
    int64_t block_table_stride; /* row stride of block_table, >= block_table_width; dense: width */
    int64_t out_stride;         /* row stride of swa_indices, >= window; dense: W   */
} dsv4_decode_swa_indices_desc_t;

typedef struct dsv4_decode_swa_indices_args {
    const int32_t *token_to_req;   /* [T]                                    */
    const int32_t *positions;      /* [T] absolute position of each token    */
    const uint8_t *is_valid_token; /* [T]                                    */
    const int32_t *block_table;    /* [R, block_table_stride] SWA block table      */
    int32_t *swa_indices;          /* [T, out_stride] out: columns [0, W)    */
    int32_t *swa_lens;             /* [T] out                                */
} dsv4_decode_swa_indices_args_t;

dsv4_status_t dsv4_decode_swa_indices_check(const dsv4_decode_swa_indices_desc_t *desc);
dsv4_status_t dsv4_decode_swa_indices_workspace_size(const dsv4_decode_swa_indices_desc_t *desc, size_t *bytes); /* 0 */
dsv4_status_t dsv4_decode_swa_indices(const dsv4_decode_swa_indices_desc_t *desc,
                                      const dsv4_decode_swa_indices_args_t *args, void *workspace,
                                      size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_decode_swa_indices_ref(const dsv4_decode_swa_indices_desc_t *desc,
                                          const dsv4_decode_swa_indices_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_INDICES_H */
