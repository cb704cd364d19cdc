/*
 * Internal to the compress family: each operator's plan (its descriptor with defaults
 * resolved and its grid), the shared run-call checks, the launchers the .cu files export
 * and the references' loops. Plans are plain C so tests can check them without a GPU.
 */
#ifndef DSV4_COMPRESS_COMPRESS_COMMON_H
#define DSV4_COMPRESS_COMPRESS_COMMON_H

#include <stdint.h>

#include "dsv4/compress.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Run-call preamble: the stream, and the workspace (none needed). */
dsv4_status_t cmp_check_run(const char *op, dsv4_stream_t stream, const void *workspace, size_t workspace_bytes);

/* Grid size for `units` threads' work at `threads` per CTA, capped at one resident wave
 * of ctas_per_sm CTAs per multiprocessor of the current device; the kernels stride over
 * the rest. A device attribute query: no allocation, no synchronization, legal during
 * graph capture. */
dsv4_status_t cmp_grid(const char *op, int64_t units, int threads, int ctas_per_sm, unsigned *blocks);

/* ---- plans --------------------------------------------------------------------------- */
typedef struct {
    int64_t heads_padded, o_stride_token, o_stride_head; /* resolved */
    int64_t units;                                       /* 16-byte segments to rotate: num_tokens * num_heads * 8 */
} inv_rope_plan_t;

typedef struct {
    int64_t ids_stride_token, ids_stride_head, values_stride_bytes, scales_stride_bytes; /* resolved */
    int64_t rows;  /* output rows: num_tokens * local_heads */
    int64_t units; /* 16-dim pieces of the output: rows * head_dim / 16 */
} engram_plan_t;

dsv4_status_t inv_rope_plan(const dsv4_inv_rope_desc_t *desc, inv_rope_plan_t *plan);
dsv4_status_t engram_plan(const dsv4_engram_lookup_desc_t *desc, engram_plan_t *plan);

/* ---- launchers (src/compress/<op>_kernel.cu); called only with validated input ------ */
dsv4_status_t inv_rope_launch(const dsv4_inv_rope_desc_t *desc, const inv_rope_plan_t *plan,
                              const dsv4_inv_rope_args_t *args, dsv4_stream_t stream);
dsv4_status_t engram_launch(const dsv4_engram_lookup_desc_t *desc, const engram_plan_t *plan,
                            const dsv4_engram_lookup_args_t *args, dsv4_stream_t stream);

/* ---- the references' loops (src/compress/<op>_ref.c), on validated input ------------ */
dsv4_status_t inv_rope_ref_run(const dsv4_inv_rope_desc_t *desc, const inv_rope_plan_t *plan,
                               const dsv4_inv_rope_args_t *args);
dsv4_status_t engram_ref_run(const dsv4_engram_lookup_desc_t *desc, const engram_plan_t *plan,
                             const dsv4_engram_lookup_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_COMPRESS_COMPRESS_COMMON_H */
