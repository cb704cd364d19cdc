/* Sparse MLA decode, host side: validate, plan (config, split count), launch the
 * attention kernel with, for partials, the merge: CTAs appended to it or a second launch
 * (include/dsv4/attention.h, src/attention/mla_merge.cuh). */
#include <stdio.h>

#include "attention/mla_host.h"
#include "attention/mla_params.h"
#include "attention/sparse_mla_config.h"
#include "common/call_tag.h"
#include "common/error.h"

static const char *OP = "sparse_mla_decode";

static dsv4_status_t check_list(const char *name, const dsv4_sparse_mla_list_t *l, int64_t rows) {
    char what[64], what2[64];
    snprintf(what, sizeof what, "%s.width", name);
    snprintf(what2, sizeof what2, "%s.stride", name);
    DSV4_TRY(mla_check_list_shape(OP, what, l->width, what2, l->stride, rows));
    const dsv4_sparse_mla_cache_t *c = &l->cache;
    snprintf(what, sizeof what, "%s.cache.page_tokens", name);
    DSV4_TRY(dsv4_check_range(OP, what, c->page_tokens, 1, INT64_C(1) << 20));
    snprintf(what, sizeof what, "%s.cache.page_stride_bytes", name);
    DSV4_TRY(
        dsv4_check_range(OP, what, c->page_stride_bytes, c->page_tokens * DSV4_MLA_RECORD_BYTES, INT64_C(1) << 40));
    if (c->page_stride_bytes % 16 != 0)
        return dsv4_fail(DSV4_STATUS_MISALIGNED, OP, "%s = %lld is not a multiple of 16", what,
                         (long long)c->page_stride_bytes);
    snprintf(what, sizeof what, "%s.cache.num_pages", name);
    DSV4_TRY(dsv4_check_range(OP, what, c->num_pages, 0, INT64_C(1) << 31));
    return DSV4_STATUS_SUCCESS;
}

static dsv4_status_t check(const dsv4_sparse_mla_decode_desc_t *d, mla_qo_geom_t *geom) {
    DSV4_TRY(dsv4_check_ptr(OP, "desc", d));
    DSV4_TRY(mla_check_common(OP, d->num_tokens, d->num_heads, d->q_stride_token, d->q_stride_head, d->out_stride_token,
                              d->out_stride_head, d->scale, d->config, geom));
    DSV4_TRY(check_list("main", &d->main, d->num_tokens));
    DSV4_TRY(dsv4_check_range(OP, "has_extra", d->has_extra, 0, 1));
    if (d->has_extra) DSV4_TRY(check_list("extra", &d->extra, d->num_tokens));
    DSV4_TRY(dsv4_check_range(OP, "num_splits", d->num_splits, 0, DSV4_MLA_MAX_SPLITS));
    DSV4_TRY(dsv4_check_range(OP, "force_merge", d->force_merge, 0, 1));
    DSV4_TRY(dsv4_check_range(OP, "sm_count", d->sm_count, 0, 1 << 16));
    DSV4_TRY(dsv4_check_range(OP, "batch_invariant", d->batch_invariant, 0, 1));
    return mla_check_grid(OP, 1, d->num_tokens, d->num_heads, d->config, d->num_splits ? d->num_splits : 1);
}

dsv4_status_t dsv4_sparse_mla_decode_check(const dsv4_sparse_mla_decode_desc_t *desc) {
    mla_qo_geom_t geom;
    return check(desc, &geom);
}

/* CTAs of the attention launch: the attention CTAs, then (merge 2) the merge CTAs. */
static int64_t launch_ctas(const dsv4_sparse_mla_plan_t *p, int64_t T, int64_t H) {
    return p->ctas + (p->merge == 2 ? mla_merge_ctas(T, H, p->warps) : 0);
}

static dsv4_status_t plan(const dsv4_sparse_mla_decode_desc_t *d, dsv4_sparse_mla_plan_t *p, mla_qo_geom_t *geom) {
    DSV4_TRY(check(d, geom));
    DSV4_TRY(dsv4_check_ptr(OP, "plan", p));
    const int64_t T = d->num_tokens, H = d->num_heads;
    /* batch-invariant: no choice may read T or the SM count (attention.h) */
    const int inv = d->batch_invariant;
    mla_plan_config(d->config ? d->config : mla_pick_config(1, inv ? 1 : T, H), p);
    const int64_t config = p->config;
    const int64_t groups = H / p->heads_per_cta;
    int64_t sm = d->sm_count;
    if (!sm && T > 0) sm = mla_current_sm_count();
    int64_t S = d->num_splits;
    if (!S && inv) S = 1;
    if (!S) {
        if (!sm && T > 0)
            return dsv4_fail(DSV4_STATUS_NO_DEVICE, OP,
                             "no CUDA device to plan the split count for; set sm_count or num_splits");
        S = mla_auto_splits(T, groups, d->main.width, d->has_extra ? d->extra.width : 0, sm,
                            MLA_CFG_CTAS_PER_SM(config));
    }
    p->num_splits = S;
    p->ctas = T * S * groups;
    /* Partials: the merge CTAs go into the attention launch when they fit one wave beside
     * it at the kernel's lowest occupancy (two CTAs per SM; its registers are the attention
     * CTA's): then they overlap the last splits and the second launch is saved. Without
     * an SM count (explicit num_splits, no device) the second launch; ws32 and ws64
     * have no merge CTAs (mla_ws.cuh), always the second launch. */
    const int appended = !MLA_CFG_IS_WS(config) && mla_merge_ctas(T, H, p->warps) <= MLA_TARGET_CTAS_PER_SM * sm;
    p->merge = S > 1 || d->force_merge ? (appended ? 2 : 1) : 0;
    const int64_t grid = launch_ctas(p, T, H);
    if (grid > INT32_MAX)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, OP,
                         "num_tokens = %lld with %lld splits needs %lld CTAs, over 2^31-1", (long long)T, (long long)S,
                         (long long)grid);
    /* partials, then one completion flag word per partial row (used when merge == 2) */
    p->workspace_bytes = p->merge ? (size_t)T * (size_t)S * (size_t)H * (DSV4_MLA_DIM + 3) * sizeof(float) : 0;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_sparse_mla_decode_plan(const dsv4_sparse_mla_decode_desc_t *desc, dsv4_sparse_mla_plan_t *p) {
    mla_qo_geom_t geom;
    return plan(desc, p, &geom);
}

dsv4_status_t dsv4_sparse_mla_decode_workspace_size(const dsv4_sparse_mla_decode_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(OP, "bytes", bytes));
    dsv4_sparse_mla_plan_t p;
    mla_qo_geom_t geom;
    DSV4_TRY(plan(desc, &p, &geom));
    *bytes = p.workspace_bytes;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_sparse_mla_decode(const dsv4_sparse_mla_decode_desc_t *desc, const dsv4_sparse_mla_decode_args_t *a,
                                     void *workspace, size_t workspace_bytes, dsv4_stream_t stream) {
    dsv4_sparse_mla_plan_t p;
    mla_qo_geom_t geom;
    DSV4_TRY(plan(desc, &p, &geom));
    DSV4_TRY(mla_check_args_qo(OP, a, a ? a->q : NULL, a ? a->out : NULL));
    DSV4_TRY(mla_check_ptr16(OP, "main_cache", a->main_cache));
    DSV4_TRY(mla_check_ptr4(OP, "main_ids", a->main_ids, 1));
    DSV4_TRY(mla_check_ptr4(OP, "main_lens", a->main_lens, 1));
    if (desc->has_extra) {
        DSV4_TRY(mla_check_ptr16(OP, "extra_cache", a->extra_cache));
        DSV4_TRY(mla_check_ptr4(OP, "extra_ids", a->extra_ids, 1));
        DSV4_TRY(mla_check_ptr4(OP, "extra_lens", a->extra_lens, 1));
    }
    DSV4_TRY(mla_check_ptr4(OP, "sink", a->sink, 0));
    DSV4_TRY(dsv4_check_workspace(OP, p.workspace_bytes, workspace, workspace_bytes));
    if (p.workspace_bytes) DSV4_TRY(dsv4_check_align(OP, "workspace", workspace, 16));
    DSV4_TRY(dsv4_check_stream(OP, stream));
    if (desc->num_tokens == 0) return DSV4_STATUS_SUCCESS;

    mla_params_t k;
    mla_params_init(&k, &geom, a->q, a->out, a->sink, desc->scale, desc->num_tokens, desc->num_heads, p.num_splits,
                    desc->has_extra ? 2 : 1);
    k.list[0] = mla_decode_list(&desc->main, a->main_cache, a->main_ids, a->main_lens);
    k.list[1] =
        desc->has_extra ? mla_decode_list(&desc->extra, a->extra_cache, a->extra_ids, a->extra_lens) : k.list[0];
    k.attn_ctas = (int)p.ctas;
    if (p.merge) {
        const size_t rows = (size_t)desc->num_tokens * (size_t)p.num_splits * (size_t)desc->num_heads;
        k.part_acc = (float *)workspace;
        k.part_m = k.part_acc + rows * DSV4_MLA_DIM;
        k.part_l = k.part_m + rows;
        if (p.merge == 2) {
            k.part_flags = (unsigned *)(k.part_l + rows);
            k.flag_tag = dsv4_call_tag(a->out, workspace, desc->num_tokens, p.num_splits);
        }
    }
    const int64_t ctas = launch_ctas(&p, desc->num_tokens, desc->num_heads);
    DSV4_TRY(MLA_CFG_IS_WS(p.config) ? mla_launch_decode_ws((int)p.config, &k, ctas, stream)
                                     : mla_launch_decode((int)p.config, &k, ctas, stream));
    if (p.merge == 1) DSV4_TRY(mla_launch_merge(&k, stream));
    return DSV4_STATUS_SUCCESS;
}
