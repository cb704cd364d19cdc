/*
 * The attention family: sparse MLA decode (paged fp8_ds_mla caches, split-KV, sink) and
 * sparse MLA prefill (bf16 workspace rows). This header is the contract: semantics,
 * numerics and accuracy, shapes, errors, the split and configuration policies.
 *
 * ---------------------------------------------------------------------------------
 * Common semantics
 * ---------------------------------------------------------------------------------
 * For token t and head h, with J the list of valid key rows of t (defined per op below,
 * in list order; an entry listed twice counts twice):
 *
 *   s_j        = scale * sum_{d<512} q[t,h,d] * K_j[d]       (bf16 inputs, fp32 sums)
 *   out[t,h,:] = sum_j e^{s_j} K_j / (sum_j e^{s_j} + e^{sink[h]})        stored as bf16
 *
 * K = V: the value is the same 512-wide row. No sink (sink == NULL) drops the e^sink
 * term; sink[h] = -inf does the same for one head. An empty J gives zeros, with or
 * without a sink. Invalid entries are skipped, never errors.
 *
 * NaN and Inf: NaN in, NaN out, so that an upstream bug stays visible. A NaN score s_j
 * (a NaN in q, or q * K making inf - inf) or a +inf score makes the softmax denominator
 * NaN, and then every element of out[t,h,:] is NaN (ref_lse NaN); a -inf score weighs
 * its row 0, and 0 * inf elements of that row are NaN in the dims they touch. Kernels
 * and references agree on every NaN position.
 *
 * Kernel numerics (what the tests hold the kernels to): one unified 512-wide dot on
 * mma.sync (bf16 x bf16 -> fp32); an online softmax per tile of 16 keys whose reference
 * max m starts at -FLT_MAX and moves to a tile's max only when that exceeds m by more
 * than 8 (lazy rescale: p <= e^8); p = e^(s - m) evaluated as __expf (ex2.approx of
 * x*log2 e, relative error ~2^-21, far below the bf16 rounding of p); p is rounded to
 * bf16 for the P*V product while l sums the fp32 p; the output is rounded to bf16 once.
 * Accuracy: against an fp64 evaluation of the formula on the same K rows (the _ref
 * functions) the error is within max abs 1e-2 * max|K| and relative L2 5e-3 (every
 * bound, with its reason: the DSV4_MLA_TOL_* constants below). Results are
 * deterministic (no atomics): two runs give identical bits.
 *
 * Finalisation (single pass, or the merge of S split partials s = 0..S-1, in order):
 *   M = max_s m_s, then M = max(M, sink[h]) with a sink;  w_s = e^(m_s - M)
 *   L = w_0 l_0 + w_1 l_1 + ... (+ e^(sink[h] - M), added last)
 *   out = L > 0 ? (w_0 acc_0 + w_1 acc_1 + ...) / max(L, 1e-30) : 0
 * with every product and sum rounded separately (no fused multiply-add) and IEEE
 * division, so that the direct write of a single split and partial + merge with S = 1
 * give identical bits.
 *
 * Shapes, strides and alignment: q and out are [T, H, 512] bf16 with the last dim
 * contiguous and token/head strides in elements (no default, dsv4.h; dense: head 512,
 * token H*512), multiples of 8; q, out and kv/cache pointers 16-byte aligned; index,
 * length and sink pointers 4-byte aligned. H is a multiple of 16 in [16, 128]. T = 0
 * is a valid no-op.
 *
 * Errors: NULL descriptor, args or required pointer -> DSV4_STATUS_NULL_POINTER; a
 * size, stride or scalar out of range, or a call needing more than 2^31 - 1 CTAs
 * (num_tokens x H / heads per CTA x num_splits) -> DSV4_STATUS_INVALID_VALUE; a pointer or
 * stride breaking an alignment rule -> DSV4_STATUS_MISALIGNED; a forced config whose
 * heads per CTA do not divide H, or a decode-only config for prefill ->
 * DSV4_STATUS_UNSUPPORTED; workspace_bytes below the size ->
 * DSV4_STATUS_WORKSPACE_TOO_SMALL. All checks run before anything is enqueued, and a
 * failing call writes nothing. dsv4_last_error() names the op, the field and the value.
 *
 * Kernel configurations (the `config` field, dsv4_mla_config_t; DSV4_MLA_CONFIG_AUTO = 0
 * picks one, see the plan functions; dsv4_mla_config_name gives the short names used
 * in benchmark cases):
 *   H16W4  16 heads per CTA, 4 warps (each: 16 heads x 128 dims)
 *   H32W4  32 heads per CTA, 4 warps (each: 32 heads x 128 dims)
 *   H32W8  32 heads per CTA, 8 warps (each: 16 heads x 128 dims)
 *   WS32   32 heads per CTA, 6 warps in two roles (2 score warps of 16 heads x 512 dims,
 *          4 PV warps of 32 heads x 128 dims); decode partials always merge in a second
 *          launch (plan.merge 1)
 *   WS64   decode only: 64 heads per CTA, 12 warps in the same two roles (4 score warps,
 *          8 PV warps of 64 heads x 64 dims), one CTA per SM; a second-launch merge too;
 *          prefill -> DSV4_STATUS_UNSUPPORTED
 *   H16W8  decode only: 16 heads per CTA, 8 warps (each: 16 heads x 64 dims); prefill ->
 *          DSV4_STATUS_UNSUPPORTED
 * All use tiles of 16 keys and at most 48 KB of shared memory per CTA.
 */
#ifndef DSV4_ATTENTION_H
#define DSV4_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/dsv4.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSV4_MLA_DIM 512                             /* latent width: 448 NoPE (fp8) + 64 RoPE (bf16)  */
#define DSV4_MLA_RECORD_BYTES 584                    /* fp8_ds_mla bytes per slot (dsv4/kvcache.h)      */
#define DSV4_MLA_DEFAULT_SCALE 0.044194173824159216f /* 512^-0.5, fp32 0x3D3504F3 */
#define DSV4_MLA_MAX_SPLITS 32
#define DSV4_MLA_NUM_CONFIGS 6

/*
 * The accuracy contract as numbers: what the tests and `dsv4_bench --check` hold the
 * kernels to, against the fp64 reference (dsv4_sparse_mla_*_ref) on the same K rows.
 * Outputs must also have NaN exactly where the reference has it.
 */
/* max |out - ref| <= DSV4_MLA_TOL_MAX_ABS * max|K| (max|K| over the keys read): out is a
 * convex combination of K rows, and bf16 p (2^-9 per weight) plus the bf16 output bound
 * the error near 2^-8 max|K|. Also for a split's raw partial, acc / l. */
#define DSV4_MLA_TOL_MAX_ABS 1e-2
/* ||out - ref||_2 / ||ref||_2 <= DSV4_MLA_TOL_REL_L2 over the outputs compared: the same
 * bf16 roundings, averaged over many outputs, stay well below it (about 2e-3 on random
 * unit-scale inputs). */
#define DSV4_MLA_TOL_REL_L2 5e-3
/* A split's raw partial: |m + ln l - lse| <= DSV4_MLA_TOL_PARTIAL_LSE * max(1, |lse|),
 * lse the fp64 ln(sum_j e^{s_j}) of the split's keys: m and l see only fp32 roundings. */
#define DSV4_MLA_TOL_PARTIAL_LSE 1e-3
/* Prefill on unit-scale inputs (q, kv ~ N(0, 1)) at the model's widths 640 and 1152:
 * max |out - ref| <= DSV4_MLA_TOL_UNIT_PREFILL where |ref| < 1, the bound the upstream
 * Triton kernel meets. Larger outputs are held to the bounds above only: rounding an
 * exact value in [1, 2) to bf16 alone can be off by 2^-9 * 2 = 3.9e-3. */
#define DSV4_MLA_TOL_UNIT_PREFILL 4.8e-3

typedef enum dsv4_mla_config {
    DSV4_MLA_CONFIG_AUTO = 0,
    DSV4_MLA_CONFIG_H16W4 = 1,
    DSV4_MLA_CONFIG_H32W4 = 2,
    DSV4_MLA_CONFIG_H32W8 = 3,
    DSV4_MLA_CONFIG_WS32 = 4,
    DSV4_MLA_CONFIG_WS64 = 5,
    DSV4_MLA_CONFIG_H16W8 = 6
} dsv4_mla_config_t;

/* The short name of a configuration: "h16w4", "h32w4", "h32w8", "ws32", "ws64", "h16w8"
 * for DSV4_MLA_CONFIG_H16W4 .. DSV4_MLA_CONFIG_H16W8, "auto" for DSV4_MLA_CONFIG_AUTO,
 * NULL for any other value. */
const char *dsv4_mla_config_name(int64_t config);

/* ================================================================================== */
/* Sparse MLA decode over paged fp8_ds_mla caches                                      */
/* ================================================================================== */
/*
 * One paged fp8_ds_mla cache, as the kvcache writers fill it (include/dsv4/kvcache.h,
 * "The record and the page"). Slot s lives in page
 * s / page_tokens at position p = s % page_tokens; the page starts at
 * cache + page * page_stride_bytes and holds a data region of page_tokens * 576 bytes
 * (slot p: 448 e4m3 codes of dims 0..447 at p*576, then 64 little-endian bf16 of dims
 * 448..511) followed by the scale region (slot p: 7 UE8M0 bytes at
 * page_tokens*576 + p*8, one per 64 NoPE dims, and one pad byte that is never read).
 * K[d] = bf16(e4m3(code) * 2^(enc - 127)) for d < 448 (exact), the stored bf16 above;
 * NaN lanes of K (codes 0x7F/0xFF, or NaN RoPE values) are read as 0, as upstream.
 */
typedef struct dsv4_sparse_mla_cache {
    int64_t page_tokens;       /* P >= 1 slots per page                                 */
    int64_t page_stride_bytes; /* >= P * 584 and a multiple of 16                       */
    int64_t num_pages;         /* >= 0; slots >= num_pages * P are invalid (skipped)    */
} dsv4_sparse_mla_cache_t;

/* One list of global slot ids per token: ids[t, j] for j < min(lens[t], width) (lens
 * below 0 count as 0). An id is valid iff 0 <= id < num_pages * P of its own cache. */
typedef struct dsv4_sparse_mla_list {
    int64_t width;  /* columns of the [T, width] int32 id tensor, 1 .. 2^20         */
    int64_t stride; /* row stride of the id tensor in elements; dense: width       */
    dsv4_sparse_mla_cache_t cache;
} dsv4_sparse_mla_list_t;

typedef struct dsv4_sparse_mla_decode_desc {
    int64_t num_tokens;           /* T >= 0 decode tokens                                    */
    int64_t num_heads;            /* H: multiple of 16 in [16, 128]                          */
    int64_t q_stride_token;       /* elements; dense: H * 512                                     */
    int64_t q_stride_head;        /* elements; dense: 512                                         */
    int64_t out_stride_token;     /* elements; dense: H * 512                                     */
    int64_t out_stride_head;      /* elements; dense: 512                                         */
    dsv4_sparse_mla_list_t main;  /* the SWA list and cache (processed first)             */
    int has_extra;                /* 1: the compressed list below is present              */
    dsv4_sparse_mla_list_t extra; /* the compressed (top-k) list and cache               */
    float scale;                  /* softmax scale; 0 means DSV4_MLA_DEFAULT_SCALE            */
    int64_t num_splits;           /* split-KV count S: 0 picks one, else 1 .. 32              */
    int force_merge;              /* 1: write partials and merge even when S == 1 (tests)     */
    int64_t config;               /* dsv4_mla_config_t: 0 picks one                           */
    int64_t sm_count;             /* SMs to plan for; 0: the current device's                  */
    int32_t batch_invariant;      /* 1: a row's bits independent of the batch (below); 0 or 1 */
} dsv4_sparse_mla_decode_desc_t;

typedef struct dsv4_sparse_mla_decode_args {
    const void *q;              /* [T, H, 512] bf16                                         */
    const uint8_t *main_cache;  /* main.cache pages                                     */
    const int32_t *main_ids;    /* [T, main.width] global slot ids, -1 padded           */
    const int32_t *main_lens;   /* [T]                                                  */
    const uint8_t *extra_cache; /* when has_extra                                       */
    const int32_t *extra_ids;
    const int32_t *extra_lens;
    const float *sink; /* [H] fp32 or NULL (no sink)                               */
    void *out;         /* [T, H, 512] bf16                                         */
    /* Reference only (dsv4_sparse_mla_decode_ref; ignored by the run call), optional: */
    double *ref_out; /* [T, H, 512] the unrounded fp64 result                    */
    double *ref_lse; /* [T, H] ln(sum_j e^{s_j}) without the sink; -inf if empty */
} dsv4_sparse_mla_decode_args_t;

/* What the run call will do for a descriptor (the split policy and config choice). */
typedef struct dsv4_sparse_mla_plan {
    int64_t config; /* dsv4_mla_config_t, 1 .. DSV4_MLA_NUM_CONFIGS              */
    int64_t heads_per_cta;
    int64_t warps;
    int64_t rows_per_tile; /* keys per tile                                            */
    int64_t num_splits;    /* S                                                        */
    int merge;             /* 0: direct bf16 write; partials + merge: 1 in a second     */
                           /* launch, 2 by merge CTAs appended to the attention launch  */
    int64_t ctas;          /* attention CTAs of the attention launch (merge 2 adds      */
                           /* T * H / (warps / 4) merge CTAs after them)                */
    size_t workspace_bytes;
} dsv4_sparse_mla_plan_t;

/*
 * Split-KV: each list is cut independently into S contiguous chunks of
 * c = ceil(len / S); split s walks main[s*c_m, min((s+1)*c_m, len_m)) then
 * extra[s*c_e, ...). With S = 1 and force_merge = 0 the kernel writes bf16 directly
 * and no workspace is needed. Otherwise the workspace holds the raw partials (no sink,
 * no normalisation), all fp32: acc [T, S, H, 512] at byte 0, then m [T, S, H], then
 * l [T, S, H] (m = the split's reference max of the scaled scores, at most 8 below their
 * max, -FLT_MAX for an empty split;
 * l = sum of e^(s - m); acc = sum of bf16(e^(s - m)) * K), T*S*H*514*4 bytes, then
 * T*S*H 32-bit completion flags ([T, H, S]): T*S*H*515*4 bytes in all.
 *
 * Merge: with merge = 2 (the plan's choice when the T * H / (warps / 4) merge CTAs fit
 * one wave of two CTAs per SM, e.g. T = 1..8; never with WS32 and WS64) the merge CTAs
 * follow the attention CTAs in the same launch. Each waits for its row's S flags, which
 * the split CTAs set after their partials, and stores 0 back, so every call leaves the
 * flags at 0: the workspace needs no clearing. A flag carries a tag of the call (a NaN
 * payload made from out, the workspace, T and S), so an uninitialized workspace, an
 * earlier call's results or another call's flags are never taken for this call's. Rule:
 * one call in flight per workspace (the partials are shared too). A call that breaks it
 * does not hang: a merge warp gives up after ~2 s of waiting and writes NaN to the dims
 * of the row it merges, the failure the caller sees; clear the flag words before reusing
 * that workspace.
 * Otherwise (merge = 1) a second kernel merges. Both give the same bits.
 *
 * Auto split (num_splits = 0): with G = T * H / heads_per_cta CTAs per split, S = 1 when
 * G >= sm_count; otherwise, among the S with G * S <= R * sm_count (one wave at R
 * resident CTAs per SM: 2, or 1 for WS64) and S <= 32, the smallest S whose splits
 * have the fewest 16-key tiles, ceil((ceil(main.width / S) + ceil(extra.width / S)) /
 * 16): more splits than that only add merge work.
 *
 * Auto config (config = DSV4_MLA_CONFIG_AUTO): WS64 when 64 divides H and T >= 8; otherwise H16W8 when
 * T <= 8, H16W4 when 32 does not divide H, H32W4 when T < 16, else WS32.
 *
 * Batch-invariant mode (batch_invariant = 1): the auto choices above depend on T and the
 * SM count, so a request's output bits would depend on the rest of the batch. In this
 * mode the auto config is the T = 1 choice for H (a function of H only) and the auto
 * split count is 1; the SM count then only picks the merge route, which gives the same
 * bits either way. An explicit config or num_splits is kept. Each (token, split, head group) tile is computed on its own and every list is
 * cut by the row's own length, so with the config and S fixed a row's bits depend only
 * on its own inputs: a request alone and the same request inside any batch give
 * identical bits. The cost: no split-KV at small T (one CTA per head group and token).
 */
dsv4_status_t dsv4_sparse_mla_decode_check(const dsv4_sparse_mla_decode_desc_t *desc);
dsv4_status_t dsv4_sparse_mla_decode_plan(const dsv4_sparse_mla_decode_desc_t *desc, dsv4_sparse_mla_plan_t *plan);
dsv4_status_t dsv4_sparse_mla_decode_workspace_size(const dsv4_sparse_mla_decode_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_sparse_mla_decode(const dsv4_sparse_mla_decode_desc_t *desc,
                                     const dsv4_sparse_mla_decode_args_t *args, void *workspace, size_t workspace_bytes,
                                     dsv4_stream_t stream);
/* fp64 CPU reference on host pointers (caches included); writes out (bf16) and, when
 * given, ref_out / ref_lse. Ignores num_splits, config and sm_count. */
dsv4_status_t dsv4_sparse_mla_decode_ref(const dsv4_sparse_mla_decode_desc_t *desc,
                                         const dsv4_sparse_mla_decode_args_t *args);

/* ================================================================================== */
/* Sparse MLA prefill over bf16 workspace rows                                         */
/* ================================================================================== */
/*
 * J(t) = { ids[t, j] : j < min(lens[t], width), 0 <= ids[t, j] < kv_rows } in column
 * order; K_j = kv[ids[t, j], 0:512]. NaN and Inf in q or kv propagate as the common
 * semantics say (the kernel does not scrub prefill rows).
 */
typedef struct dsv4_sparse_mla_prefill_desc {
    int64_t num_tokens;       /* T >= 0                                                   */
    int64_t num_heads;        /* H: multiple of 16 in [16, 128]                           */
    int64_t q_stride_token;   /* elements; dense: H * 512                                     */
    int64_t q_stride_head;    /* elements; dense: 512                                         */
    int64_t out_stride_token; /* elements; dense: H * 512                                     */
    int64_t out_stride_head;  /* elements; dense: 512                                         */
    int64_t kv_rows;          /* R_rows >= 0: rows of the workspace                       */
    int64_t kv_stride;        /* row stride in elements, >= 512, multiple of 8; dense: 512    */
    int64_t width;            /* C: columns of the index tensor, 1 .. 2^20                */
    int64_t ids_stride;       /* row stride of the index tensor in elements; dense: C         */
    float scale;              /* 0 means DSV4_MLA_DEFAULT_SCALE                           */
    int64_t config;           /* dsv4_mla_config_t: 0 picks one                           */
} dsv4_sparse_mla_prefill_desc_t;

typedef struct dsv4_sparse_mla_prefill_args {
    const void *q;       /* [T, H, 512] bf16                                         */
    const void *kv;      /* [kv_rows, kv_stride] bf16                                */
    const int32_t *ids;  /* [T, C] row ids (combined lists), -1 padded               */
    const int32_t *lens; /* [T]                                                      */
    const float *sink;   /* [H] or NULL                                              */
    void *out;           /* [T, H, 512] bf16                                         */
    double *ref_out;     /* reference only, optional: [T, H, 512] unrounded          */
    double *ref_lse;     /* reference only, optional: [T, H]                         */
} dsv4_sparse_mla_prefill_args_t;

/* Prefill never splits: plan.num_splits = 1, merge = 0, workspace 0. DSV4_MLA_CONFIG_AUTO
 * picks WS32 when 32 divides H, else H16W4. */
dsv4_status_t dsv4_sparse_mla_prefill_check(const dsv4_sparse_mla_prefill_desc_t *desc);
dsv4_status_t dsv4_sparse_mla_prefill_plan(const dsv4_sparse_mla_prefill_desc_t *desc, dsv4_sparse_mla_plan_t *plan);
dsv4_status_t dsv4_sparse_mla_prefill_workspace_size(const dsv4_sparse_mla_prefill_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_sparse_mla_prefill(const dsv4_sparse_mla_prefill_desc_t *desc,
                                      const dsv4_sparse_mla_prefill_args_t *args, void *workspace,
                                      size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_sparse_mla_prefill_ref(const dsv4_sparse_mla_prefill_desc_t *desc,
                                          const dsv4_sparse_mla_prefill_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_ATTENTION_H */
