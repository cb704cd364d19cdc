/* Decode SWA index lists, host side: validation, planning, launch. */
#include "dsv4/indices.h"
#include "indices/decode_swa_indices_config.h"
#include "indices/index_check.h"

static dsv4_status_t dsw_check_desc(const char *op, const dsv4_decode_swa_indices_desc_t *d, dsv4_dsw_strides_t *s) {
    DSV4_TRY(dsv4_check_ptr(op, "desc", d));
    DSV4_TRY(dsv4_check_range(op, "num_tokens", d->num_tokens, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "num_reqs", d->num_reqs, 1, INT64_C(1) << 30));
    DSV4_TRY(dsv4_check_range(op, "window", d->window, 1, INT64_C(1) << 20));
    DSV4_TRY(dsv4_check_range(op, "page_tokens", d->page_tokens, 1, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "block_table_width", d->block_table_width, 1, INT64_C(1) << 30));
    DSV4_TRY(dsv4_idx_check_stride(op, "block_table_stride", d->block_table_stride, d->block_table_width, d->num_reqs,
                                   &s->table));
    DSV4_TRY(dsv4_idx_check_stride(op, "out_stride", d->out_stride, d->window, d->num_tokens, &s->out));
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_dsw_validate(const char *op, const dsv4_decode_swa_indices_desc_t *d,
                                const dsv4_decode_swa_indices_args_t *a, dsv4_dsw_strides_t *s) {
    DSV4_TRY(dsw_check_desc(op, d, s));
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    const char *names[] = {"token_to_req", "positions", "block_table", "swa_indices", "swa_lens"};
    const void *ptrs[] = {a->token_to_req, a->positions, a->block_table, a->swa_indices, a->swa_lens};
    DSV4_TRY(dsv4_idx_check_i32_all(op, 5, names, ptrs));
    return dsv4_check_ptr(op, "is_valid_token", a->is_valid_token);
}

dsv4_status_t dsv4_decode_swa_indices_check(const dsv4_decode_swa_indices_desc_t *desc) {
    dsv4_dsw_strides_t s;
    return dsw_check_desc("decode_swa_indices", desc, &s);
}

dsv4_status_t dsv4_decode_swa_indices_workspace_size(const dsv4_decode_swa_indices_desc_t *desc, size_t *bytes) {
    dsv4_dsw_strides_t s;
    return dsv4_idx_no_workspace("decode_swa_indices", dsw_check_desc("decode_swa_indices", desc, &s), bytes);
}

dsv4_status_t dsv4_decode_swa_indices(const dsv4_decode_swa_indices_desc_t *desc,
                                      const dsv4_decode_swa_indices_args_t *args, void *workspace,
                                      size_t workspace_bytes, dsv4_stream_t stream) {
    static const char *op = "decode_swa_indices";
    dsv4_dsw_strides_t s;
    DSV4_TRY(dsv4_dsw_validate(op, desc, args, &s));
    DSV4_TRY(dsv4_idx_check_launch(op, 0, workspace, workspace_bytes, stream));
    dsv4_dsw_params_t p = {0};
    p.token_to_req = args->token_to_req;
    p.positions = args->positions;
    p.is_valid = args->is_valid_token;
    p.table = args->block_table;
    p.out = args->swa_indices;
    p.lens = args->swa_lens;
    p.block_table_stride = s.table;
    p.out_stride = s.out;
    p.num_tokens = (int32_t)desc->num_tokens;
    p.num_reqs = (int32_t)desc->num_reqs;
    p.window = (int32_t)desc->window;
    p.page_tokens = (int32_t)desc->page_tokens;
    p.block_table_width = (int32_t)desc->block_table_width;
    p.page_div = kv_page_div_make(desc->page_tokens);
    p.vec = dsv4_idx_vec16(p.out, s.out, desc->window);
    return dsv4_decode_swa_indices_launch(&p, stream);
}
