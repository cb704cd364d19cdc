/* Top-k translation, host side: validation, planning, launch (dense and packed). */
#include "dsv4/indices.h"
#include "indices/index_check.h"
#include "indices/topk_translate_config.h"

static dsv4_status_t tt_check_desc(const char *op, const dsv4_topk_translate_desc_t *d, int packed,
                                   dsv4_tt_strides_t *s) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(dsv4_check_range(op, "num_tokens", d->num_tokens, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "topk", d->topk, 0, INT64_C(1) << 24));
    DSV4_TRY(dsv4_check_range(op, "num_reqs", d->num_reqs, 1, INT64_C(1) << 30));
    DSV4_TRY(dsv4_check_range(op, "block_table_width", d->block_table_width, 1, INT64_C(1) << 30));
    DSV4_TRY(dsv4_check_range(op, "page_tokens", d->page_tokens, 1, INT32_MAX));
    DSV4_TRY(dsv4_idx_check_stride(op, "topk_stride", d->topk_stride, d->topk, d->num_tokens, &s->topk));
    DSV4_TRY(dsv4_idx_check_stride(op, "block_table_stride", d->block_table_stride, d->block_table_width, d->num_reqs,
                                   &s->table));
    if (packed) {
        s->out = 0;
        if (d->num_tokens * d->topk > INT32_MAX)
            return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                             "num_tokens * topk = %lld * %lld exceeds 2^31-1, the range of the int32 indptr",
                             (long long)d->num_tokens, (long long)d->topk);
    } else {
        DSV4_TRY(dsv4_idx_check_stride(op, "out_stride", d->out_stride, d->topk, d->num_tokens, &s->out));
    }
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_tt_validate(const char *op, const dsv4_topk_translate_desc_t *d, const void *args, int packed,
                               dsv4_tt_strides_t *s) {
    DSV4_TRY(tt_check_desc(op, d, packed, s));
    DSV4_TRY(dsv4_check_ptr(op, "args", args));
    const char *names[] = {"topk_indices", "token_to_req", "block_table", "global_indices", "lens", "indptr", "packed"};
    if (packed) {
        const dsv4_topk_translate_packed_args_t *pa = args;
        const void *ptrs[] = {pa->topk_indices, pa->token_to_req, pa->block_table, NULL,
                              pa->lens,         pa->indptr,       pa->packed};
        DSV4_TRY(dsv4_idx_check_i32_all(op, 3, names, ptrs));
        DSV4_TRY(dsv4_idx_check_i32_all(op, 3, names + 4, ptrs + 4)); /* lens, indptr, packed */
        return dsv4_check_ptr(op, "is_valid_token", pa->is_valid_token);
    }
    const dsv4_topk_translate_args_t *a = args;
    const void *ptrs[] = {a->topk_indices, a->token_to_req, a->block_table, a->global_indices, a->lens};
    DSV4_TRY(dsv4_idx_check_i32_all(op, 5, names, ptrs));
    return dsv4_check_ptr(op, "is_valid_token", a->is_valid_token);
}

/* The scalars and inputs every kernel of the op uses (`in` holds the inputs; its outputs are unused). */
static void tt_plan(const dsv4_topk_translate_desc_t *d, const dsv4_tt_strides_t *s,
                    const dsv4_topk_translate_args_t *in, dsv4_tt_params_t *p) {
    p->topk_indices = in->topk_indices;
    p->token_to_req = in->token_to_req;
    p->table = in->block_table;
    p->is_valid = in->is_valid_token;
    p->topk_stride = s->topk;
    p->block_table_stride = s->table;
    p->out_stride = s->out;
    p->num_tokens = (int32_t)d->num_tokens;
    p->topk = (int32_t)d->topk;
    p->num_reqs = (int32_t)d->num_reqs;
    p->page_tokens = (int32_t)d->page_tokens;
    const int64_t lim = d->block_table_width * d->page_tokens; /* <= 2^30 * (2^31 - 1): no overflow */
    p->vlimit = (uint32_t)(lim < (INT64_C(1) << 31) ? lim : (INT64_C(1) << 31));
    p->page_div = kv_page_div_make(d->page_tokens);
    /* Staging copies 16-byte chunks of a table row, so rows must start 16-byte aligned; it
     * stops at the last whole chunk inside the row (pages past it are looked up in place). */
    p->stage_end = dsv4_idx_vec16(in->block_table, s->table, 4) ? (uint32_t)(d->block_table_width & ~INT64_C(3)) : 0u;
}

void dsv4_tt_packed_groups(int64_t num_tokens, int32_t *group_rows, int32_t *num_groups) {
    const int64_t per = (int64_t)DSV4_TT_WARPS * DSV4_TT_MAX_GROUPS;
    const int64_t rows = DSV4_TT_WARPS * ((num_tokens + per - 1) / per);
    *group_rows = (int32_t)(rows > 0 ? rows : DSV4_TT_WARPS);
    *num_groups = (int32_t)((num_tokens + *group_rows - 1) / *group_rows);
}

/* ---- dense -------------------------------------------------------------------------- */
dsv4_status_t dsv4_topk_translate_check(const dsv4_topk_translate_desc_t *desc) {
    dsv4_tt_strides_t s;
    return tt_check_desc("topk_translate", desc, 0, &s);
}

dsv4_status_t dsv4_topk_translate_workspace_size(const dsv4_topk_translate_desc_t *desc, size_t *bytes) {
    dsv4_tt_strides_t s;
    return dsv4_idx_no_workspace("topk_translate", tt_check_desc("topk_translate", desc, 0, &s), bytes);
}

dsv4_status_t dsv4_topk_translate(const dsv4_topk_translate_desc_t *desc, const dsv4_topk_translate_args_t *args,
                                  void *workspace, size_t workspace_bytes, dsv4_stream_t stream) {
    static const char *op = "topk_translate";
    dsv4_tt_strides_t s;
    DSV4_TRY(dsv4_tt_validate(op, desc, args, 0, &s));
    DSV4_TRY(dsv4_idx_check_launch(op, 0, workspace, workspace_bytes, stream));
    dsv4_tt_params_t p = {0};
    tt_plan(desc, &s, args, &p);
    p.out = args->global_indices;
    p.lens = args->lens;
    p.vec = dsv4_idx_vec16(p.topk_indices, s.topk, desc->topk) && dsv4_idx_vec16(p.out, s.out, desc->topk);
    return dsv4_topk_translate_launch(&p, stream);
}

/* ---- packed ------------------------------------------------------------------------- */
dsv4_status_t dsv4_topk_translate_packed_check(const dsv4_topk_translate_packed_desc_t *desc) {
    dsv4_tt_strides_t s;
    return tt_check_desc("topk_translate_packed", desc, 1, &s);
}

dsv4_status_t dsv4_topk_translate_packed_workspace_size(const dsv4_topk_translate_packed_desc_t *desc, size_t *bytes) {
    static const char *op = "topk_translate_packed";
    dsv4_tt_strides_t s;
    DSV4_TRY(tt_check_desc(op, desc, 1, &s));
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    int32_t rows, groups;
    dsv4_tt_packed_groups(desc->num_tokens, &rows, &groups);
    *bytes = (size_t)groups * sizeof(int32_t);
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_topk_translate_packed(const dsv4_topk_translate_packed_desc_t *desc,
                                         const dsv4_topk_translate_packed_args_t *args, void *workspace,
                                         size_t workspace_bytes, dsv4_stream_t stream) {
    static const char *op = "topk_translate_packed";
    dsv4_tt_strides_t s;
    DSV4_TRY(dsv4_tt_validate(op, desc, args, 1, &s));
    dsv4_tt_params_t p = {0};
    const dsv4_topk_translate_args_t in = {
        args->topk_indices, args->token_to_req, args->block_table, args->is_valid_token, NULL, NULL};
    tt_plan(desc, &s, &in, &p);
    dsv4_tt_packed_groups(desc->num_tokens, &p.group_rows, &p.num_groups);
    DSV4_TRY(dsv4_idx_check_launch(op, (size_t)p.num_groups * sizeof(int32_t), workspace, workspace_bytes, stream));
    p.lens = args->lens;
    p.indptr = args->indptr;
    p.packed = args->packed;
    p.group_sums = workspace;
    p.vec = dsv4_idx_vec16(p.topk_indices, s.topk, desc->topk);
    return dsv4_topk_translate_packed_launch(&p, stream);
}
