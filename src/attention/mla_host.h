/*
 * Internal: host-side pieces shared by sparse MLA decode and prefill: validation of the
 * q/out geometry and common scalars, the config table, the split policy, the SM count.
 */
#ifndef DSV4_ATTENTION_MLA_HOST_H
#define DSV4_ATTENTION_MLA_HOST_H

#include <stdint.h>

#include "attention/mla_params.h"
#include "dsv4/attention.h"

/* Resolved q/out strides (defaults applied). */
typedef struct mla_qo_geom {
    int64_t q_st, q_sh, o_st, o_sh;
} mla_qo_geom_t;

/* T, H, strides of q and out, scale, config: checked, defaults applied. */
dsv4_status_t mla_check_common(const char *op, int64_t T, int64_t H, int64_t q_st, int64_t q_sh, int64_t o_st,
                               int64_t o_sh, float scale, int64_t config, mla_qo_geom_t *geom);

/* An index list [T, width] with row stride (0 = width); lens handled by the kernels. */
dsv4_status_t mla_check_list_shape(const char *op, const char *width_name, int64_t width, const char *stride_name,
                                   int64_t stride, int64_t rows);

/* Pointer checks: q/out 16-byte, ids/lens/sink 4-byte aligned, non-NULL as required. */
dsv4_status_t mla_check_ptr16(const char *op, const char *what, const void *p);
/* args non-NULL, q and out non-NULL and 16-byte aligned. */
dsv4_status_t mla_check_args_qo(const char *op, const void *args, const void *q, const void *out);
dsv4_status_t mla_check_ptr4(const char *op, const char *what, const void *p, int required);

/* The auto configuration (sparse_mla_config.h says the rule) of a decode (1) or prefill
 * (0) call of T tokens and H heads. */
int64_t mla_pick_config(int decode, int64_t T, int64_t H);
/* The attention grid (T x head groups x splits CTAs) must fit the launch's 2^31-1 blocks.
 * splits = 1 stands for the auto split too: it picks more than one only when T x groups is
 * below the SM count, far from the limit. */
dsv4_status_t mla_check_grid(const char *op, int decode, int64_t T, int64_t H, int64_t config, int64_t splits);
/* Fill the config fields of a plan (heads per CTA, warps, rows per tile). */
void mla_plan_config(int64_t config, dsv4_sparse_mla_plan_t *plan);

/* The split count the policy picks (attention.h says the rule), for a
 * config with ctas_per_sm resident CTAs per SM. */
int64_t mla_auto_splits(int64_t T, int64_t head_groups, int64_t main_width, int64_t extra_width, int64_t sm_count,
                        int64_t ctas_per_sm);

/* CTAs of the merge for T x H partial rows when appended to an attention launch of
 * `warps` warps per CTA (MLA_MERGE_THREADS per row: mla_merge.cuh). */
int64_t mla_merge_ctas(int64_t T, int64_t H, int64_t warps);

/* SMs of the current device, cached per device ordinal; 0 when there is none. */
int64_t mla_current_sm_count(void);

float mla_scale_or_default(float scale);

/* The list descriptions the kernels and the references both walk: the one mapping from
 * the public descriptors (stride 0 = width; decode: paged fp8 records, valid ids
 * [0, num_pages * P); prefill: bf16 rows of kv_stride (0 = 512) elements, valid ids
 * [0, kv_rows)). */
mla_list_params_t mla_decode_list(const dsv4_sparse_mla_list_t *l, const void *cache, const int32_t *ids,
                                  const int32_t *lens);
mla_list_params_t mla_prefill_list(const dsv4_sparse_mla_prefill_desc_t *d, const void *kv, const int32_t *ids,
                                   const int32_t *lens);

/* The kernel parameters common to both ops (lists and partials are set by the caller). */
void mla_params_init(mla_params_t *k, const mla_qo_geom_t *g, const void *q, void *out, const float *sink, float scale,
                     int64_t T, int64_t H, int64_t S, int num_lists);

#endif
