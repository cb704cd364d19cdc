/* CPU reference of the decode SWA index lists (include/dsv4/indices.h, section 3): plain
 * loops with / and %, 64-bit products truncated to int32 at the store. */
#include "common/error.h"
#include "dsv4/indices.h"
#include "indices/decode_swa_indices_config.h"

dsv4_status_t dsv4_decode_swa_indices_ref(const dsv4_decode_swa_indices_desc_t *desc,
                                          const dsv4_decode_swa_indices_args_t *args) {
    dsv4_dsw_strides_t s;
    DSV4_TRY(dsv4_dsw_validate("decode_swa_indices_ref", desc, args, &s));
    const int64_t W = desc->window, P = desc->page_tokens;
    for (int64_t t = 0; t < desc->num_tokens; ++t) {
        const int64_t req = args->token_to_req[t], pos = args->positions[t];
        const int req_ok = req >= 0 && req < desc->num_reqs;
        const int64_t len = (req_ok && pos >= 0) ? (pos + 1 < W ? pos + 1 : W) : 0;
        const int64_t start = pos - len + 1; /* max(pos - W + 1, 0) */
        for (int64_t j = 0; j < W; ++j) {
            int32_t v = -1;
            if (j < len) {
                const int64_t q = start + j, page = q / P;
                if (page < desc->block_table_width)
                    v = (int32_t)(uint32_t)(uint64_t)((int64_t)args->block_table[req * s.table + page] * P + q % P);
            }
            args->swa_indices[t * s.out + j] = v;
        }
        args->swa_lens[t] = args->is_valid_token[t] ? (int32_t)len : 0;
    }
    return DSV4_STATUS_SUCCESS;
}
