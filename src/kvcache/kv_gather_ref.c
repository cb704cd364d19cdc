/*
 * CPU reference of dsv4_kv_gather: plain loops, each record through kv_record_decode
 * (common/kv_format.h: fp32 product, one bf16 rounding, the scale by the exponent shift;
 * the RoPE dims copied byte for byte).
 * Invalid positions (negative, past the table width, page id out of range) give zeros.
 */
#include <string.h>

#include "kvcache/kv_common.h"
#include "kvcache/kv_record.h"

dsv4_status_t kv_gather_ref_run(const dsv4_kv_gather_desc_t *d, const kv_gather_plan_t *plan,
                                const dsv4_kv_gather_args_t *a) {
    const int64_t P = d->page_tokens;
    for (int64_t b = 0; b < d->num_reqs; ++b) {
        const int64_t L = a->seq_lens[b];
        const int64_t G = a->gather_lens ? a->gather_lens[b] : L;
        const int32_t *bt = a->block_table + b * plan->block_table_stride;
        for (int64_t i = 0; i < G && d->offset + i < d->out_rows; ++i) {
            uint16_t *row = a->out + b * plan->out_stride_req + (d->offset + i) * plan->out_stride_row;
            const int64_t pos = L - G + i;
            const int64_t page = (pos >= 0 && pos / P < d->block_table_width) ? bt[pos / P] : -1;
            if (page < 0 || page >= d->num_pages) {
                memset(row, 0, DSV4_KV_DIM * sizeof *row);
                continue;
            }
            kv_record_decode(a->cache + kv_data_offset(page, pos % P, d->page_stride_bytes),
                             a->cache + kv_scale_offset(page, pos % P, P, d->page_stride_bytes), row);
        }
    }
    return DSV4_STATUS_SUCCESS;
}
