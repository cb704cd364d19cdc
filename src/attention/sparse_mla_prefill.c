/* Sparse MLA prefill, host side: validate, pick the config, launch (include/dsv4/attention.h). */
#include "attention/mla_host.h"
#include "attention/mla_params.h"
#include "attention/sparse_mla_config.h"
#include "common/error.h"

static const char *OP = "sparse_mla_prefill";

static dsv4_status_t check(const dsv4_sparse_mla_prefill_desc_t *d, mla_qo_geom_t *geom) {
    DSV4_TRY(dsv4_check_ptr(OP, "desc", d));
    DSV4_TRY(mla_check_common(OP, d->num_tokens, d->num_heads, d->q_stride_token, d->q_stride_head, d->out_stride_token,
                              d->out_stride_head, d->scale, d->config, geom));
    if (MLA_CFG_DECODE_ONLY(d->config))
        return dsv4_fail(DSV4_STATUS_UNSUPPORTED, OP, "config %s is a decode-only kernel",
                         dsv4_mla_config_name(d->config));
    DSV4_TRY(dsv4_check_range(OP, "kv_rows", d->kv_rows, 0, INT64_C(1) << 40));
    int64_t kv_stride;
    DSV4_TRY(dsv4_given_stride(OP, "kv_stride", d->kv_stride, d->kv_rows, DSV4_MLA_DIM, &kv_stride));
    DSV4_TRY(dsv4_check_range(OP, "kv_stride", kv_stride, DSV4_MLA_DIM, INT64_C(1) << 40));
    if (kv_stride % 8 != 0)
        return dsv4_fail(DSV4_STATUS_MISALIGNED, OP, "kv_stride = %lld is not a multiple of 8 elements (16 bytes)",
                         (long long)kv_stride);
    DSV4_TRY(mla_check_list_shape(OP, "width", d->width, "ids_stride", d->ids_stride, d->num_tokens));
    return mla_check_grid(OP, 0, d->num_tokens, d->num_heads, d->config, 1);
}

dsv4_status_t dsv4_sparse_mla_prefill_check(const dsv4_sparse_mla_prefill_desc_t *desc) {
    mla_qo_geom_t geom;
    return check(desc, &geom);
}

static dsv4_status_t plan(const dsv4_sparse_mla_prefill_desc_t *d, dsv4_sparse_mla_plan_t *p, mla_qo_geom_t *geom) {
    DSV4_TRY(check(d, geom));
    DSV4_TRY(dsv4_check_ptr(OP, "plan", p));
    mla_plan_config(d->config ? d->config : mla_pick_config(0, d->num_tokens, d->num_heads), p);
    p->num_splits = 1;
    p->merge = 0;
    p->ctas = d->num_tokens * (d->num_heads / p->heads_per_cta);
    p->workspace_bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_sparse_mla_prefill_plan(const dsv4_sparse_mla_prefill_desc_t *desc, dsv4_sparse_mla_plan_t *p) {
    mla_qo_geom_t geom;
    return plan(desc, p, &geom);
}

dsv4_status_t dsv4_sparse_mla_prefill_workspace_size(const dsv4_sparse_mla_prefill_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(OP, "bytes", bytes));
    DSV4_TRY(dsv4_sparse_mla_prefill_check(desc));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_sparse_mla_prefill(const dsv4_sparse_mla_prefill_desc_t *desc,
                                      const dsv4_sparse_mla_prefill_args_t *a, void *workspace, size_t workspace_bytes,
                                      dsv4_stream_t stream) {
    dsv4_sparse_mla_plan_t p;
    mla_qo_geom_t geom;
    DSV4_TRY(plan(desc, &p, &geom));
    DSV4_TRY(mla_check_args_qo(OP, a, a ? a->q : NULL, a ? a->out : NULL));
    DSV4_TRY(mla_check_ptr16(OP, "kv", a->kv));
    DSV4_TRY(mla_check_ptr4(OP, "ids", a->ids, 1));
    DSV4_TRY(mla_check_ptr4(OP, "lens", a->lens, 1));
    DSV4_TRY(mla_check_ptr4(OP, "sink", a->sink, 0));
    DSV4_TRY(dsv4_check_stream(OP, stream));
    (void)workspace;
    (void)workspace_bytes;
    if (desc->num_tokens == 0) return DSV4_STATUS_SUCCESS;

    mla_params_t k;
    mla_params_init(&k, &geom, a->q, a->out, a->sink, desc->scale, desc->num_tokens, desc->num_heads, 1, 1);
    k.list[0] = mla_prefill_list(desc, a->kv, a->ids, a->lens);
    k.list[1] = k.list[0];
    return p.config == DSV4_MLA_CONFIG_WS32 ? mla_launch_prefill_ws(&k, p.ctas, stream)
                                            : mla_launch_prefill((int)p.config, &k, p.ctas, stream);
}
