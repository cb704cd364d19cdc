/*
 * mHC: manifold-constrained hyper-connections. Design notes and measurements: docs/mhc.md.
 *
 * The residual of DeepSeek-V4/V4.1 is hc_mult = 4 bf16 copies ("streams") of the hidden
 * state. Around every sublayer, a 24-wide fp32 projection of the flattened residual gives
 * 4 pre gates, 4 post gates and a 4x4 comb matrix made doubly stochastic by Sinkhorn.
 * This header is the manual of the family's operators:
 *
 *   dsv4_mhc_post       R_new = post (x) x + comb^T R, optionally with per-token sum of
 *                       squares of the stored outputs (mhc_post, mhc_post_with_sqrsum)
 *   dsv4_mhc_collapse   y = sum_j p[j] R[j], optional RMSNorm and stream-mean aux
 *                       (the V4.1 final collapse, hc_collapse)
 *   dsv4_mhc_gates      projection + RMS + gates + Sinkhorn of a residual
 *   dsv4_mhc_pre        gates + collapse for a sublayer input: V4 mhc_pre, V4.1
 *                       mhc_pre_delayed, and both first-layer broadcast variants
 *   dsv4_mhc_seam       post of sublayer k fused with the pre of sublayer k+1: the V4
 *                       mhc_fused_post_pre and the V4.1 mhc_fused_post_pre_delayed
 *   dsv4_mhc_fn_bcast   fn_bcast[m][h] = sum_s fn[m][s*H + h], once after loading
 *   dsv4_mhc_fn_split   fn's bf16 hi / lo split for the tensor-core route, once after loading
 *   dsv4_mhc_plan       which projection route and split count a call will use
 *
 * ---------------------------------------------------------------------------------
 * Notation, layouts, dtypes (all tensors little-endian, row-major)
 * ---------------------------------------------------------------------------------
 *   T tokens, H hidden size (4096 V4-Flash, 5120 V4.1-Flash, 7168 V4-Pro), K = 4H.
 *   bf16 tensors are uint16_t bit patterns (include/dsv4/numerics.h converts them).
 *   residual R   [T, 4, H] bf16: token t, stream s, channel h at t*residual_stride + s*H + h
 *                (the 4 streams of a token are contiguous; the token stride is a field)
 *   x            [T, H] bf16 sublayer output (t*x_stride + h)
 *   fn           [24, 4H] fp32: flat column s*H + h; rows 0..3 pre, 4..7 post,
 *                8..23 comb logits, (j, k) at row 8 + 4j + k
 *   fn_bcast     [24, H] fp32 (dsv4_mhc_fn_bcast)
 *   fn_split     [48, K] bf16 (dsv4_mhc_fn_split): rows 0..23 hi, 24..47 lo of fn (K = 4H)
 *                or of fn_bcast (K = H)
 *   scale        [3] fp32: [0] pre, [1] post, [2] comb;  base [24] fp32
 *   post         [T, 4] fp32;  comb [T, 4, 4] fp32 row-major, comb[t][j][k];
 *   pre, pre_mix [T, 4] fp32;  mix [T, 24] fp32;  sqrsum [T] fp32 (all contiguous)
 *   norm_weight  [H] bf16;  layer_input, aux [T, H] bf16 (token strides are fields)
 *
 * Sizes: 0 <= T <= 2^24; H a multiple of 128 in [128, 16384]. With T = 0 a call checks the
 * descriptor, the args pointer and the stream, and does nothing (pointers may be NULL).
 * Strides: elements between consecutive tokens, at least the row (dense: H, or 4H for a
 * residual) and a multiple of 8 (16-byte rows); 0 only with T <= 1 (no default, dsv4.h).
 * Alignment (run calls): every bf16 tensor, post, comb, pre_mix, fn and the workspace
 * 16 bytes; other fp32 tensors 4 bytes. The reference calls need no alignment.
 * Outputs must not overlap any input or each other (no in-place update):
 * DSV4_STATUS_INVALID_VALUE names the pair.
 *
 * ---------------------------------------------------------------------------------
 * Formulas and rounding (fp32 unless stated; bf16 values enter exactly)
 * ---------------------------------------------------------------------------------
 * post (bit-exact):    acc = post[k] * x[h];  acc = fmaf(comb[j][k], R[j][h], acc), j = 0..3;
 *                      R_new[k][h] = bf16_rne(acc)
 * collapse (bit-exact before the norm):
 *                      y = p[0] * R[0][h];  y = fmaf(p[j], R[j][h], y), j = 1..3;  yb = bf16(y)
 *                      With no pre-mix (NULL), y = R[0][h] exactly (stream 0, a copy).
 * aux (bit-exact):     aux[h] = bf16((((R0 + R1) + R2) + R3) * 0.25)
 * RMSNorm (<= 1 bf16 ulp): ss = sum_h v^2 with v = yb (V4.1) or y (V4);
 *                      rn = 1 / sqrtf(ss / H + norm_eps);  out = bf16((yb * rn) * w[h])
 * projection:          raw[m] = sum_k X[k] * fn[m][k],  sq = sum_k X[k]^2 over the slice
 *                      partials, summed in slice order 0..S-1; checked against fp64 with
 *                      |mix - ref| <= tol * rms * sum_k |X[k] fn[m][k]| (Tolerances below).
 * RMS and gates:       rms = 1 / sqrtf(sq / numel + rms_eps), numel = 4H (H broadcast);
 *                      mix = raw * rms;  sigmoid(z) = 1 / (1 + expf(-z));
 *                      pre[j]  = sigmoid(fmaf(mix[j],   scale[0], base[j]))   + pre_eps
 *                      post[j] = sigmoid(fmaf(mix[4+j], scale[1], base[4+j])) * post_mult
 *                      L[j][k] = fmaf(mix[8+4j+k], scale[2], base[8+4j+k])
 * Sinkhorn:            row softmax, then + eps, then a column normalisation, then
 *                      (iters - 1) x (row normalisation, column normalisation), each
 *                      C /= (sum + eps) with true division and sums in index order 0..3.
 *                      Every column of comb sums to 1 within ~1e-6.
 *
 * ---------------------------------------------------------------------------------
 * Projection routes (dsv4_mhc_plan reports the choice)
 * ---------------------------------------------------------------------------------
 *   SMALL_T (auto for T < 16 when the geometry tiles H): ONE kernel launch whose grid
 *     holds the projection CTAs, geometry (tile_n, split_k, threads) = (6, H/256, 256)
 *     (each thread owns one channel; it tiles H when H % 256 == 0: 4096, 5120, 7168 all
 *     do; up to 5 tokens per CTA), plus one CTA per token for collapse/norm (V4.1 seam)
 *     and one per token for the gates, which polls the producers' tagged partials in
 *     the workspace (see dsv4_mhc_plan_t.workspace_bytes). fp32 FMA: tolerance 1e-5.
 *     One channel per thread and stream lets each thread issue all of its loads at
 *     once (docs/mhc.md). In a seam it projects the bf16-rounded post-apply values,
 *     the stored R_new, like the tensor-core route (projecting the unrounded fp32
 *     values instead, as the model's reference kernel does, puts the gates up to ~3e-3
 *     from the unfused pipeline; the plan's unrounded_input says which). The routes
 *     differ only in summation order; R_new is identical on both.
 *   TENSOR_CORE (auto for T >= 16, or when no geometry tiles H): mma.sync.m16n8k16 on the
 *     bf16-rounded residual (the stored R_new in a seam) with fn split into two bf16
 *     terms, fn = hi + lo (hi = bf16(fn), lo = bf16(fn - hi), about 16 mantissa bits;
 *     a small kernel writes the split into the workspace first, unless the call passes
 *     fn_split, the same split made once by dsv4_mhc_fn_split), fp32 accumulation:
 *     tolerance 1e-5 as on the FMA route. Blocks of 32 tokens, split-K over S slices.
 *     In a seam, post, collapse, sum of squares and projection run in one pass over the
 *     residual. It addresses token rows with 32-bit element offsets: a run call in which
 *     a token tensor's last element lies past 2^32 - 1 (e.g. T > ~149K at H = 7168,
 *     dense) returns DSV4_STATUS_UNSUPPORTED; split such a call into fewer tokens.
 *   BATCH_INVARIANT (never auto): the tensor-core route with its split count S chosen
 *     from H alone (the choice for one block of tokens). AUTO switches routes at T = 16
 *     and the tensor-core S follows the number of token blocks, and the summation order
 *     follows S, so a token's bits depend on the rest of the batch; with this route a
 *     token alone and the same token inside any batch give identical bits (the plan
 *     reports TENSOR_CORE). The cost: the small-T kernel's latency is not used.
 *   Both sum fp32 partials in slice order and then evaluate RMS, gates and Sinkhorn:
 *   SMALL_T in its gate CTAs, TENSOR_CORE in an epilogue kernel (gate CTAs of 4 tokens,
 *   one warp each; V4.1 adds one norm CTA per token for the layer input; V4 one CTA per
 *   token).
 *
 * Tolerances (what tests/mhc checks; the table with the reasons is tests/mhc/mhc_test.h):
 * mix as above with tol = 1e-5 on both routes; pre, post and comb within 1e-5 absolute of
 * an fp64 evaluation fed the kernel's own mix; sqrsum relative error <= 1e-5; the
 * RMS-normed layer input within 1 bf16 ulp; everything else bit-exact.
 */
#ifndef DSV4_MHC_H
#define DSV4_MHC_H

#include "dsv4/dsv4.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSV4_MHC_STREAMS 4 /* hc_mult */
#define DSV4_MHC_MIX 24    /* 4 pre + 4 post + 16 comb */

/* Model generation: decides when the collapse happens and what the norm squares. */
typedef enum dsv4_mhc_variant {
    DSV4_MHC_V41 = 0, /* delayed pre: collapse with the incoming pre_mix; norm of rounded yb */
    DSV4_MHC_V4 = 1   /* immediate pre: collapse with the fresh pre; norm of unrounded y    */
} dsv4_mhc_variant_t;

typedef enum dsv4_mhc_route {
    DSV4_MHC_ROUTE_AUTO = 0,           /* T < 16 and a tiling geometry: SMALL_T; else TENSOR_CORE */
    DSV4_MHC_ROUTE_SMALL_T = 1,        /* force the CUDA-core kernel (UNSUPPORTED if H does not tile) */
    DSV4_MHC_ROUTE_TENSOR_CORE = 2,    /* force the mma.sync kernel                              */
    DSV4_MHC_ROUTE_BATCH_INVARIANT = 3 /* the mma.sync kernel with S a function of H only   */
} dsv4_mhc_route_t;

/* Gate constants. No field has a default: pass the model's (the two macros below). */
typedef struct dsv4_mhc_gate_params {
    float rms_eps;          /* RMS scaling epsilon: 1e-6 (V4), 1e-20 (V4.1); finite, >= 0 */
    float pre_eps;          /* added after the pre sigmoid (hc_eps = 1e-6); finite, >= 0 */
    float sinkhorn_eps;     /* Sinkhorn epsilon (hc_eps = 1e-6); finite, >= 0           */
    float post_mult;        /* 2.0 in the model; finite                                   */
    int32_t sinkhorn_iters; /* 20; in [1, 100]                                            */
} dsv4_mhc_gate_params_t;
/* python/gen_structs.py reads each initializer on its #define line. */
/* clang-format off */
#define DSV4_MHC_GATE_PARAMS_V41 {1e-20f, 1e-6f, 1e-6f, 2.0f, 20}
#define DSV4_MHC_GATE_PARAMS_V4 {1e-6f, 1e-6f, 1e-6f, 2.0f, 20}
/* clang-format on */

/* ===================================================================================
 * Plan: the projection route and split geometry a gates / pre / seam call will use.
 * =================================================================================== */
typedef struct dsv4_mhc_plan {
    int32_t route;           /* DSV4_MHC_ROUTE_SMALL_T or DSV4_MHC_ROUTE_TENSOR_CORE         */
    int32_t splits;          /* S: K slices; the epilogue sums their partials in order 0..S-1 */
    int32_t tile_n;          /* SMALL_T: mix outputs per CTA (6); TENSOR_CORE: 24             */
    int32_t threads;         /* threads per CTA of the projection kernel                      */
    int32_t tokens_per_cta;  /* tokens one projection CTA handles                             */
    int64_t ctas;            /* projection CTAs (SMALL_T's grid adds 2T or T more)           */
    int32_t unrounded_input; /* 1: a seam projects the fp32 post-apply values before bf16
                                rounding (the model reference's small-T numerics); 0: the
                                stored bf16 values (this build, both routes)                */
    size_t workspace_bytes;  /* TENSOR_CORE: partials, S * T * 26 fp32 rounded up to 256
                               bytes, then fn's bf16 hi / lo split, 48 * K * 2 bytes (K =
                               4H, or H broadcast). SMALL_T: T * 4 * S records of 8 64-bit
                               words, each partial with the call's tag (a NaN payload made
                               from post_out, the workspace, T and H) in its high half: the
                               workspace may hold anything before a call (another call's
                               tags included), and every call leaves its records at 0
                               (graph-safe, no memset). One call in flight per workspace;
                               a call that breaks the rule does not hang: a gate CTA gives
                               up after ~2 s and writes NaN gates (and what follows from
                               them), the failure the caller sees                        */
} dsv4_mhc_plan_t;

/* broadcast = 1 plans the first-layer projection (K = H). DSV4_STATUS_UNSUPPORTED when
 * SMALL_T is forced and no geometry tiles H. Host only. */
dsv4_status_t dsv4_mhc_plan(int64_t tokens, int64_t hidden, int32_t broadcast, int32_t route, dsv4_mhc_plan_t *plan);

/* ===================================================================================
 * dsv4_mhc_post: R_new = post (x) x + comb^T R, and optionally sqrsum.
 * sqrsum[t] = sum over the 4H stored outputs of float(bf16)^2 (tolerance 1e-5 relative).
 * Workspace: none.
 * =================================================================================== */
typedef struct dsv4_mhc_post_desc {
    int64_t tokens;              /* T                                  */
    int64_t hidden;              /* H                                  */
    int64_t x_stride;            /* x token stride; dense: H              */
    int64_t residual_stride;     /* residual token stride; dense: 4H      */
    int64_t residual_out_stride; /* residual_out token stride; dense: 4H  */
} dsv4_mhc_post_desc_t;

typedef struct dsv4_mhc_post_args {
    const uint16_t *x;        /* [T, H] bf16                         */
    const uint16_t *residual; /* [T, 4, H] bf16                      */
    const float *post;        /* [T, 4] fp32                         */
    const float *comb;        /* [T, 4, 4] fp32                      */
    uint16_t *residual_out;   /* [T, 4, H] bf16                      */
    float *sqrsum;            /* [T] fp32, or NULL (plain mhc_post)  */
} dsv4_mhc_post_args_t;

dsv4_status_t dsv4_mhc_post_check(const dsv4_mhc_post_desc_t *desc);
dsv4_status_t dsv4_mhc_post_workspace_size(const dsv4_mhc_post_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_mhc_post(const dsv4_mhc_post_desc_t *desc, const dsv4_mhc_post_args_t *args, void *workspace,
                            size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_mhc_post_ref(const dsv4_mhc_post_desc_t *desc, const dsv4_mhc_post_args_t *args);

/* ===================================================================================
 * dsv4_mhc_collapse: out = [RMSNorm](bf16(sum_j p[j] R[j])), aux = stream mean.
 * The V4.1 final collapse is this op with pre_mix = the last layer's FFN pre and the
 * final norm weight. Workspace: none.
 * =================================================================================== */
typedef struct dsv4_mhc_collapse_desc {
    int64_t tokens;          /* T                                                  */
    int64_t hidden;          /* H                                                  */
    int32_t variant;         /* what the norm squares: V41 rounded yb, V4 fp32 y   */
    float norm_eps;          /* RMSNorm epsilon (finite, >= 0); used with a weight */
    int64_t residual_stride; /* dense: 4H                                             */
    int64_t out_stride;      /* dense: H                                              */
    int64_t aux_stride;      /* dense: H                                              */
} dsv4_mhc_collapse_desc_t;

typedef struct dsv4_mhc_collapse_args {
    const uint16_t *residual;    /* [T, 4, H] bf16                                  */
    const float *pre_mix;        /* [T, 4] fp32, or NULL: stream 0 (identity)       */
    const uint16_t *norm_weight; /* [H] bf16, or NULL: out is the un-normed collapse */
    uint16_t *out;               /* [T, H] bf16                                     */
    uint16_t *aux;               /* [T, H] bf16 stream mean, or NULL                */
} dsv4_mhc_collapse_args_t;

dsv4_status_t dsv4_mhc_collapse_check(const dsv4_mhc_collapse_desc_t *desc);
dsv4_status_t dsv4_mhc_collapse_workspace_size(const dsv4_mhc_collapse_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_mhc_collapse(const dsv4_mhc_collapse_desc_t *desc, const dsv4_mhc_collapse_args_t *args,
                                void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_mhc_collapse_ref(const dsv4_mhc_collapse_desc_t *desc, const dsv4_mhc_collapse_args_t *args);

/* ===================================================================================
 * dsv4_mhc_gates: projection + RMS + gates + Sinkhorn of a residual.
 * broadcast = 1: residual is the embedding e [T, H], fn is fn_bcast [24, H], numel = H
 * (the first layer's 4 identical streams). Workspace: dsv4_mhc_gates_workspace_size.
 * =================================================================================== */
typedef struct dsv4_mhc_gates_desc {
    int64_t tokens;              /* T                                               */
    int64_t hidden;              /* H                                               */
    int32_t broadcast;           /* 0 or 1                                          */
    int32_t route;               /* dsv4_mhc_route_t                                */
    dsv4_mhc_gate_params_t gate; /* eps values, post_mult, sinkhorn_iters           */
    int64_t residual_stride;     /* dense: 4H (H with broadcast)                       */
} dsv4_mhc_gates_desc_t;

typedef struct dsv4_mhc_gates_args {
    const uint16_t *residual; /* [T, 4, H] bf16 (broadcast: [T, H])                           */
    const float *fn;          /* [24, 4H] fp32 (broadcast: fn_bcast [24, H])                  */
    const float *scale;       /* [3] fp32                                                     */
    const float *base;        /* [24] fp32                                                    */
    const float *sqrsum;      /* [T] fp32 sum of squares already known (dsv4_mhc_post), used
                                 instead of the projection's own; or NULL                     */
    float *post;              /* [T, 4] fp32 out                                              */
    float *comb;              /* [T, 4, 4] fp32 out                                           */
    float *pre;               /* [T, 4] fp32 out                                              */
    float *mix;               /* [T, 24] fp32 out (raw * rms, before scale/base), or NULL     */
    const uint16_t *fn_split; /* [48, K] bf16 fn's split from dsv4_mhc_fn_split (of this fn,
                                 same broadcast), or NULL. When given, the tensor-core route
                                 reads it and skips its per-call split kernel; the small-T
                                 route ignores it. Same bits either way                       */
} dsv4_mhc_gates_args_t;

dsv4_status_t dsv4_mhc_gates_check(const dsv4_mhc_gates_desc_t *desc);
dsv4_status_t dsv4_mhc_gates_workspace_size(const dsv4_mhc_gates_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_mhc_gates(const dsv4_mhc_gates_desc_t *desc, const dsv4_mhc_gates_args_t *args, void *workspace,
                             size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_mhc_gates_ref(const dsv4_mhc_gates_desc_t *desc, const dsv4_mhc_gates_args_t *args);

/* ===================================================================================
 * dsv4_mhc_pre: gates of a residual plus the sublayer input.
 *   V4   (mhc_pre):          layer_input = norm(collapse(R, fresh pre)); pre_mix must be NULL.
 *   V4.1 (mhc_pre_delayed):  layer_input = norm(collapse(R, pre_mix or stream 0)); the fresh
 *                            pre is stored in `pre` as the next pre-mix.
 *   broadcast = 1 (first layer): residual is the embedding e [T, H] and fn is fn_bcast;
 *     residual_out receives the materialised [T, 4, H] copy (required); V4.1 collapses
 *     with stream 0 (layer_input = norm(e)), so pre_mix must be NULL.
 * Workspace: dsv4_mhc_pre_workspace_size.
 * =================================================================================== */
typedef struct dsv4_mhc_pre_desc {
    int64_t tokens;              /* T                                          */
    int64_t hidden;              /* H                                          */
    int32_t variant;             /* dsv4_mhc_variant_t                         */
    int32_t broadcast;           /* 0 or 1                                     */
    int32_t route;               /* dsv4_mhc_route_t                           */
    dsv4_mhc_gate_params_t gate; /* gate constants                             */
    float norm_eps;              /* RMSNorm epsilon; used with a norm weight   */
    int64_t residual_stride;     /* dense: 4H (H with broadcast)                  */
    int64_t residual_out_stride; /* broadcast only (unused otherwise); dense: 4H  */
    int64_t layer_input_stride;  /* dense: H                                      */
    int64_t aux_stride;          /* dense: H                                      */
} dsv4_mhc_pre_desc_t;

typedef struct dsv4_mhc_pre_args {
    const uint16_t *residual;    /* [T, 4, H] bf16 (broadcast: e [T, H])                      */
    const float *fn;             /* [24, 4H] fp32 (broadcast: fn_bcast [24, H])               */
    const float *scale;          /* [3] fp32                                                  */
    const float *base;           /* [24] fp32                                                 */
    const float *pre_mix;        /* V4.1: [T, 4] incoming pre-mix or NULL (stream 0); V4: NULL */
    const uint16_t *norm_weight; /* [H] bf16, or NULL: layer_input is the un-normed collapse   */
    float *post;                 /* [T, 4] fp32 out                                           */
    float *comb;                 /* [T, 4, 4] fp32 out                                        */
    float *pre;                  /* [T, 4] fp32 out (V4.1: next_pre_mix); required            */
    uint16_t *layer_input;       /* [T, H] bf16 out                                           */
    uint16_t *residual_out;      /* broadcast: [T, 4, H] bf16 copy of e (required); else NULL */
    uint16_t *aux;               /* [T, H] bf16 stream mean of the collapsed residual, or NULL */
    float *mix;                  /* [T, 24] fp32 out, or NULL                                  */
    const uint16_t *fn_split;    /* [48, K] bf16 fn's split from dsv4_mhc_fn_split (of this fn,
                                    same broadcast), or NULL. When given, the tensor-core route
                                    reads it and skips its per-call split kernel; the small-T
                                    route ignores it. Same bits either way                     */
} dsv4_mhc_pre_args_t;

dsv4_status_t dsv4_mhc_pre_check(const dsv4_mhc_pre_desc_t *desc);
dsv4_status_t dsv4_mhc_pre_workspace_size(const dsv4_mhc_pre_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_mhc_pre(const dsv4_mhc_pre_desc_t *desc, const dsv4_mhc_pre_args_t *args, void *workspace,
                           size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_mhc_pre_ref(const dsv4_mhc_pre_desc_t *desc, const dsv4_mhc_pre_args_t *args);

/* ===================================================================================
 * dsv4_mhc_seam: post of this sublayer fused with the pre of the next site.
 *   residual_out = post (x) x + comb^T residual      (bit-identical to dsv4_mhc_post)
 *   post_out, comb_out, pre_out = gates(residual_out, the next site's fn/scale/base)
 *   V4.1 (mhc_fused_post_pre_delayed): layer_input = norm(collapse(residual_out, pre_mix
 *        or stream 0)), the INCOMING pre-mix; pre_out is the next pre-mix. One pass over
 *        the residual; the projection of residual_out runs in the same pass.
 *   V4   (mhc_fused_post_pre): layer_input = norm(collapse(residual_out, pre_out));
 *        pre_mix must be NULL.
 * Workspace: dsv4_mhc_seam_workspace_size.
 * =================================================================================== */
typedef struct dsv4_mhc_seam_desc {
    int64_t tokens;              /* T                                        */
    int64_t hidden;              /* H                                        */
    int32_t variant;             /* dsv4_mhc_variant_t                       */
    int32_t route;               /* dsv4_mhc_route_t                         */
    dsv4_mhc_gate_params_t gate; /* gate constants of the next site          */
    float norm_eps;              /* RMSNorm epsilon; used with a norm weight */
    int64_t x_stride;            /* dense: H                                    */
    int64_t residual_stride;     /* dense: 4H                                   */
    int64_t residual_out_stride; /* dense: 4H                                   */
    int64_t layer_input_stride;  /* dense: H                                    */
    int64_t aux_stride;          /* dense: H                                    */
} dsv4_mhc_seam_desc_t;

typedef struct dsv4_mhc_seam_args {
    const uint16_t *x;           /* [T, H] bf16 sublayer output                             */
    const uint16_t *residual;    /* [T, 4, H] bf16                                          */
    const float *post;           /* [T, 4] fp32 this sublayer's post gates                  */
    const float *comb;           /* [T, 4, 4] fp32 this sublayer's comb                     */
    const float *fn;             /* [24, 4H] fp32 the next site's projection                */
    const float *scale;          /* [3] fp32                                                */
    const float *base;           /* [24] fp32                                               */
    const float *pre_mix;        /* V4.1: [T, 4] incoming pre-mix or NULL (stream 0); V4: NULL */
    const uint16_t *norm_weight; /* [H] bf16 next sublayer's norm, or NULL (un-normed)       */
    uint16_t *residual_out;      /* [T, 4, H] bf16 out                                      */
    float *post_out;             /* [T, 4] fp32 out                                         */
    float *comb_out;             /* [T, 4, 4] fp32 out                                      */
    float *pre_out;              /* [T, 4] fp32 out (V4.1: next_pre_mix); required          */
    uint16_t *layer_input;       /* [T, H] bf16 out                                         */
    uint16_t *aux;               /* [T, H] bf16 stream mean of residual_out, or NULL        */
    float *mix;                  /* [T, 24] fp32 out, or NULL                               */
    const uint16_t *fn_split;    /* [48, 4H] bf16 fn's split from dsv4_mhc_fn_split (of this
                                    fn, broadcast = 0), or NULL. When given, the tensor-core
                                    route reads it and skips its per-call split kernel; the
                                    small-T route ignores it. Same bits either way          */
} dsv4_mhc_seam_args_t;

dsv4_status_t dsv4_mhc_seam_check(const dsv4_mhc_seam_desc_t *desc);
dsv4_status_t dsv4_mhc_seam_workspace_size(const dsv4_mhc_seam_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_mhc_seam(const dsv4_mhc_seam_desc_t *desc, const dsv4_mhc_seam_args_t *args, void *workspace,
                            size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_mhc_seam_ref(const dsv4_mhc_seam_desc_t *desc, const dsv4_mhc_seam_args_t *args);

/* ===================================================================================
 * dsv4_mhc_fn_bcast: fn_bcast[m][h] = ((fn[m][h] + fn[m][H+h]) + fn[m][2H+h]) + fn[m][3H+h]
 * in fp32 (bit-exact), for the first layer's broadcast projection. Workspace: none.
 * =================================================================================== */
typedef struct dsv4_mhc_fn_bcast_desc {
    int64_t hidden; /* H */
} dsv4_mhc_fn_bcast_desc_t;

typedef struct dsv4_mhc_fn_bcast_args {
    const float *fn; /* [24, 4H] fp32 */
    float *fn_bcast; /* [24, H] fp32  */
} dsv4_mhc_fn_bcast_args_t;

dsv4_status_t dsv4_mhc_fn_bcast_check(const dsv4_mhc_fn_bcast_desc_t *desc);
dsv4_status_t dsv4_mhc_fn_bcast_workspace_size(const dsv4_mhc_fn_bcast_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_mhc_fn_bcast(const dsv4_mhc_fn_bcast_desc_t *desc, const dsv4_mhc_fn_bcast_args_t *args,
                                void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_mhc_fn_bcast_ref(const dsv4_mhc_fn_bcast_desc_t *desc, const dsv4_mhc_fn_bcast_args_t *args);

/* ===================================================================================
 * dsv4_mhc_fn_split: fn's two-term bf16 split, the B operand of the tensor-core route,
 * made once after loading (fn is a weight). Pass it as fn_split to dsv4_mhc_gates,
 * dsv4_mhc_pre and dsv4_mhc_seam: their tensor-core route then reads it instead of
 * splitting fn into the workspace on every call (one launch and 24K x 8 bytes of traffic
 * less per call). K = 4H (fn [24, 4H]), or H with broadcast = 1 (fn is fn_bcast [24, H]).
 *   fn_split[m][k]      = hi = bf16(fn[m][k])                  (rows 0..23)
 *   fn_split[24 + m][k] = lo = bf16(fn[m][k] - float(hi))      (rows 24..47)
 * bf16() is dsv4_f32_to_bf16 (numerics.h: round to nearest even, subnormals kept, NaN ->
 * 0x7FFF, the bits of the kernel's cvt.rn.bf16x2.f32); the difference is one fp32
 * subtraction, exact for a finite fn whose hi is finite. Bit-exact: the kernel, the
 * reference and the per-call split give the same bits, so a call given fn_split produces
 * the same outputs as one without. hi + lo is fn within 2^-17 relative (2^-134 absolute
 * where lo is subnormal). Special values: fn = +-inf gives hi = +-inf, lo = NaN; fn = NaN
 * gives hi = lo = NaN (0x7FFF); a finite fn that rounds to +-inf (|fn| >= 0x1.ffp127)
 * gives hi = +-inf, lo = -+inf. The tensor-core projection over any of them is NaN, with
 * or without fn_split. Workspace: none.
 * =================================================================================== */
typedef struct dsv4_mhc_fn_split_desc {
    int64_t hidden;    /* H                                                    */
    int32_t broadcast; /* 1: fn is fn_bcast [24, H], K = H; 0: fn [24, 4H]    */
} dsv4_mhc_fn_split_desc_t;

typedef struct dsv4_mhc_fn_split_args {
    const float *fn;    /* [24, K] fp32                                            */
    uint16_t *fn_split; /* [48, K] bf16 out: rows 0..23 hi, 24..47 lo (16-byte aligned) */
} dsv4_mhc_fn_split_args_t;

dsv4_status_t dsv4_mhc_fn_split_check(const dsv4_mhc_fn_split_desc_t *desc);
dsv4_status_t dsv4_mhc_fn_split_workspace_size(const dsv4_mhc_fn_split_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_mhc_fn_split(const dsv4_mhc_fn_split_desc_t *desc, const dsv4_mhc_fn_split_args_t *args,
                                void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_mhc_fn_split_ref(const dsv4_mhc_fn_split_desc_t *desc, const dsv4_mhc_fn_split_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_MHC_H */
