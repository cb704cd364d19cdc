/* CPU reference of the top-k translation (include/dsv4/indices.h, section 1): plain loops
 * in the header's terms (/ and %, 64-bit products), independent of the kernels' arithmetic. */
#include "common/error.h"
#include "dsv4/indices.h"
#include "indices/topk_translate_config.h"

/* Global slot of local index v for request req, or -1 (*ok = 0) when it has none. */
static int32_t tt_ref_slot(const dsv4_topk_translate_desc_t *d, int64_t block_table_stride, const int32_t *table,
                           int32_t req, int32_t v, int *ok) {
    *ok = 0;
    if (req < 0 || req >= d->num_reqs || v < 0) return -1;
    const int64_t page = v / d->page_tokens, off = v % d->page_tokens;
    if (page >= d->block_table_width) return -1; /* library choice: past the table row */
    const int64_t slot = (int64_t)table[req * block_table_stride + page] * d->page_tokens + off;
    *ok = 1;
    return (int32_t)(uint32_t)(uint64_t)slot; /* int32 wrap, as the kernels */
}

/* lens[t] of the header's formula: valid entries anywhere in the row, 0 for invalid tokens. */
static int32_t tt_ref_len(const dsv4_topk_translate_desc_t *d, const dsv4_tt_strides_t *s, const int32_t *topk,
                          const int32_t *token_to_req, const int32_t *table, const uint8_t *is_valid, int64_t t) {
    const int32_t req = token_to_req[t];
    int32_t count = 0;
    for (int64_t j = 0; j < d->topk; ++j) {
        int ok;
        tt_ref_slot(d, s->table, table, req, topk[t * s->topk + j], &ok);
        count += ok;
    }
    const int req_ok = req >= 0 && req < d->num_reqs;
    return (req_ok && is_valid[t]) ? count : 0;
}

dsv4_status_t dsv4_topk_translate_ref(const dsv4_topk_translate_desc_t *desc, const dsv4_topk_translate_args_t *args) {
    dsv4_tt_strides_t s;
    DSV4_TRY(dsv4_tt_validate("topk_translate_ref", desc, args, 0, &s));
    for (int64_t t = 0; t < desc->num_tokens; ++t) {
        const int32_t req = args->token_to_req[t];
        for (int64_t j = 0; j < desc->topk; ++j) {
            int ok;
            args->global_indices[t * s.out + j] =
                tt_ref_slot(desc, s.table, args->block_table, req, args->topk_indices[t * s.topk + j], &ok);
        }
        args->lens[t] =
            tt_ref_len(desc, &s, args->topk_indices, args->token_to_req, args->block_table, args->is_valid_token, t);
    }
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_topk_translate_packed_ref(const dsv4_topk_translate_packed_desc_t *desc,
                                             const dsv4_topk_translate_packed_args_t *args) {
    dsv4_tt_strides_t s;
    DSV4_TRY(dsv4_tt_validate("topk_translate_packed_ref", desc, args, 1, &s));
    args->indptr[0] = 0;
    for (int64_t t = 0; t < desc->num_tokens; ++t) {
        const int32_t len =
            tt_ref_len(desc, &s, args->topk_indices, args->token_to_req, args->block_table, args->is_valid_token, t);
        args->lens[t] = len;
        args->indptr[t + 1] = args->indptr[t] + len;
        for (int32_t j = 0; j < len; ++j) {
            int ok;
            args->packed[args->indptr[t] + j] = tt_ref_slot(desc, s.table, args->block_table, args->token_to_req[t],
                                                            args->topk_indices[t * s.topk + j], &ok);
        }
    }
    return DSV4_STATUS_SUCCESS;
}
