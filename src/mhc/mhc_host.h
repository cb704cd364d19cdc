/*
 * Internal to the mhc family: the description of one gates pipeline run (shared by the
 * gates, pre and seam operators, their kernels and their CPU reference), the checks
 * every operator's host side runs, and the launchers the .cu files export.
 *
 * A pipeline is, on the tensor-core route, the projection pass (proj_tc_kernel.cu) followed
 * by the gates epilogue (epilogue_kernel.cu), and on the small-T route one kernel that does
 * both (small_t_kernel.cu). The "producer" decides what the projection reads:
 *   MHC_PROD_POST   the post-apply of x, R, post, comb (seams); stores R_new
 *   MHC_PROD_RES    the residual itself (gates, pre)
 *   MHC_PROD_BCAST  the embedding e [T, H] with fn_bcast (first layer); stores 4 copies
 * and the epilogue's mode what follows the gates:
 *   MHC_EPI_GATES      nothing
 *   MHC_EPI_DELAYED    V4.1: the projection pass already wrote the un-normed collapse (with
 *                      the incoming pre-mix) and its sum-of-squares partials; the epilogue
 *                      normalises in place
 *   MHC_EPI_IMMEDIATE  V4: the epilogue collapses the row with the fresh pre, then
 *                      normalises
 */
#ifndef DSV4_MHC_HOST_H
#define DSV4_MHC_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/mhc.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MHC_PROD_POST = 0, MHC_PROD_RES = 1, MHC_PROD_BCAST = 2 };
enum { MHC_EPI_GATES = 0, MHC_EPI_DELAYED = 1, MHC_EPI_IMMEDIATE = 2 };

typedef struct mhc_pipe {
    int64_t T, H;
    int32_t prod, epi;
    int32_t proj_collapse; /* the projection pass writes the un-normed collapse + ss partials */
    int32_t sq_rounded;    /* the norm squares the rounded collapse (V4.1) or fp32 y (V4) */
    int64_t rms_numel;     /* 4H, or H for the broadcast projection                    */
    dsv4_mhc_plan_t plan;
    dsv4_mhc_gate_params_t gate;
    float norm_eps;
    /* projection inputs (strides in elements between tokens) */
    const uint16_t *x;
    int64_t x_stride;
    const uint16_t *res; /* R [T,4,H], or e [T,H] for BCAST */
    int64_t res_stride;
    const float *post_in, *comb_in; /* POST only */
    const float *pre_mix;           /* DELAYED collapse; NULL = stream 0 */
    const float *fn, *scale, *base;
    const float *sqrsum_in; /* replaces the projection's sq when not NULL */
    const uint16_t *norm_w;
    /* outputs */
    uint16_t *res_out; /* R_new (POST) or the broadcast copy (BCAST) */
    int64_t res_out_stride;
    uint16_t *li; /* layer input */
    int64_t li_stride;
    uint16_t *aux;
    int64_t aux_stride;
    float *post_out, *comb_out, *pre_out, *mix_out;
    /* the residual the collapse reads: res_out (POST, BCAST) or res (RES) */
    const uint16_t *col_src;
    int64_t col_src_stride;
    float *ws;             /* the workspace: tensor-core partials raw [S][T][24], sq [S][T], ss [S][T];
                  small-T records of tagged partials (gates_config.h) */
    unsigned tag;          /* small-T: the tag of this call's partials (common/call_tag.h) */
    const uint16_t *fn_hl; /* tensor-core route: the bf16 hi / lo rows of fn the projection
                              pass reads, [48][K]: the call's fn_split (set up with the
                              inputs), or NULL and then the fn split's rows in the workspace
                              (set by mhc_pipe_launch) */
} mhc_pipe_t;

/* ---- checks (each names the operator, the field and the value) ----------------------- */
dsv4_status_t mhc_check_shape(const char *op, int64_t tokens, int64_t hidden);
dsv4_status_t mhc_check_variant(const char *op, int32_t variant);
dsv4_status_t mhc_check_route(const char *op, int32_t route);
dsv4_status_t mhc_check_flag(const char *op, const char *what, int32_t v);
dsv4_status_t mhc_check_eps(const char *op, const char *what, float v);
dsv4_status_t mhc_check_gate_params(const char *op, const dsv4_mhc_gate_params_t *g);
/* A token stride: 0 only when tokens <= 1 (dsv4_given_stride), else >= row, a multiple of 8. */
dsv4_status_t mhc_stride(const char *op, const char *what, int64_t stride, int64_t tokens, int64_t row, int64_t *out);
/* Pointer checks of one call: NULL (when required), alignment (run calls only), and
 * the byte span of each tensor, so that every output can be checked disjoint from every
 * other tensor of the call. */
typedef struct {
    const char *what;
    const void *p;
    size_t bytes;
    int is_output;
} mhc_span_t;
typedef struct mhc_args_check {
    const char *op;
    int run; /* 1: run call (alignment enforced); 0: reference call */
    int n;
    mhc_span_t span[24];
} mhc_args_check_t;
size_t mhc_rows_bytes(int64_t T, int64_t stride, int64_t row, size_t elem);
dsv4_status_t mhc_arg(mhc_args_check_t *c, const char *what, const void *p, int required, int64_t align, size_t bytes,
                      int is_output);
dsv4_status_t mhc_check_overlaps(const mhc_args_check_t *c);
/* A bf16 tensor of T rows of `row` elements at `stride` (16-byte aligned on run calls). */
dsv4_status_t mhc_arg_rows(mhc_args_check_t *c, const char *what, const void *p, int required, int64_t T,
                           int64_t stride, int64_t row, int is_output);
/* The tensors every pipeline has (fn, scale, base, the optional fn_split and sqrsum_in,
 * the gate outputs), under the names the calling operator uses for its gate outputs. */
dsv4_status_t mhc_pipe_args(mhc_args_check_t *c, const mhc_pipe_t *p, const char *post_name, const char *comb_name,
                            const char *pre_name);
/* The collapse tensors of pre and seam as p holds them: pre_mix, norm_weight (optional),
 * residual_out (required when residual_out_required), layer_input, aux (optional). */
dsv4_status_t mhc_collapse_args(mhc_args_check_t *c, const mhc_pipe_t *p, int residual_out_required);

/* The planner behind dsv4_mhc_plan, failing in the name of `op` (arguments already checked). */
dsv4_status_t mhc_plan_compute(const char *op, int64_t T, int64_t H, int32_t broadcast, int32_t route,
                               dsv4_mhc_plan_t *plan);
/* Workspace offset of the tensor-core route's fn hi / lo rows: its partials, rounded up to
 * 256 bytes; on the small-T route the whole workspace, its records (gates_config.h). */
size_t mhc_fn_hl_offset(const dsv4_mhc_plan_t *pl, int64_t T);
/* Fills p->plan (route, splits, geometry) for the pipeline's T, H and producer. */
dsv4_status_t mhc_plan_pipe(const char *op, mhc_pipe_t *p, int32_t route);
/* The tensor-core kernel addresses token rows as base + a 32-bit element offset: a tensor
 * whose last element lies past 2^32 - 1 is refused (DSV4_STATUS_UNSUPPORTED). */
dsv4_status_t mhc_check_tc_offsets(const char *op, const mhc_pipe_t *p);
/* Checks the workspace against the plan, then enqueues the small-T kernel, or the fn split
 * (unless p->fn_hl is given: the call's fn_split), the projection pass and the gates
 * epilogue. */
dsv4_status_t mhc_pipe_launch(const char *op, mhc_pipe_t *p, void *ws, size_t ws_bytes, dsv4_stream_t stream);

/* ---- CPU reference building blocks (gates_ref.c, collapse_ref.c) ----------------------- */
/* One token's gates from raw mix partial sums (already summed) and its sum of squares. */
void mhc_gates_ref_token(const float raw[24], float sq, float numel, const float *scale, const float *base,
                         const dsv4_mhc_gate_params_t *g, float post[4], float comb[16], float pre[4], float mix[24]);
/* One token's collapse (p NULL = stream 0) with optional norm and aux. */
void mhc_collapse_ref_token(const uint16_t *R, int64_t H, const float *p, const uint16_t *w, float norm_eps,
                            int sq_rounded, uint16_t *out, uint16_t *aux);
/* dsv4_mhc_post's reference on resolved strides. */
void mhc_post_ref_run(const dsv4_mhc_post_args_t *a, int64_t T, int64_t H, int64_t xs, int64_t rs, int64_t ros);
/* dsv4_mhc_fn_bcast's checks (run = 1: alignment too). */
dsv4_status_t mhc_fn_bcast_setup(const dsv4_mhc_fn_bcast_desc_t *d, const dsv4_mhc_fn_bcast_args_t *a, int run);
/* dsv4_mhc_fn_split's checks (run = 1: alignment too); *K receives the split's K. */
dsv4_status_t mhc_fn_split_setup(const dsv4_mhc_fn_split_desc_t *d, const dsv4_mhc_fn_split_args_t *a, int run,
                                 int64_t *K);
/* The pipeline's CPU reference (all tokens). */
void mhc_pipe_ref_run(const mhc_pipe_t *p);

/* ---- launchers (the .cu files) ---------------------------------------------------------- */
dsv4_status_t mhc_launch_small(const mhc_pipe_t *p, dsv4_stream_t stream);
/* The projection pass; it reads fn's split at p->fn_hl (the caller's fn_split, or the fn
 * split's rows, which mhc_pipe_launch launches first). */
dsv4_status_t mhc_launch_proj_tc(const mhc_pipe_t *p, dsv4_stream_t stream);
/* The fn split: fn [24][K] fp32 -> hl [48][K] bf16 (rows 0..23 hi, 24..47 lo); both 16-byte aligned. */
dsv4_status_t mhc_launch_fn_split(const float *fn, uint16_t *hl, int64_t K, dsv4_stream_t stream);
/* The gates epilogue of the tensor-core route. */
dsv4_status_t mhc_launch_epilogue(const mhc_pipe_t *p, dsv4_stream_t stream);
dsv4_status_t mhc_launch_post(const dsv4_mhc_post_args_t *a, int64_t T, int64_t H, int64_t xs, int64_t rs, int64_t ros,
                              dsv4_stream_t stream);
dsv4_status_t mhc_launch_collapse(const dsv4_mhc_collapse_args_t *a, int64_t T, int64_t H, int sq_rounded,
                                  float norm_eps, int64_t rs, int64_t os, int64_t as, dsv4_stream_t stream);
dsv4_status_t mhc_launch_fn_bcast(const float *fn, float *out, int64_t H, dsv4_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif
