/*
 * CPU reference of dsv4_kv_insert: plain loops over tokens,
 * one record per valid slot through kv_quant_row (src/kvcache/kv_record.h), nothing
 * else touched.
 */
#include "kvcache/kv_common.h"
#include "kvcache/kv_record.h"

dsv4_status_t kv_insert_ref_run(const dsv4_kv_insert_desc_t *d, const kv_insert_plan_t *plan,
                                const dsv4_kv_insert_args_t *a) {
    const int64_t P = d->page_tokens;
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        const int64_t slot = a->slot_mapping[t];
        if (slot < 0 || slot / P >= d->num_pages) continue; /* -1, other negatives, past the cache */
        const int64_t page = slot / P, p = slot % P;
        kv_quant_row(a->k + t * plan->k_stride_row, a->cache + kv_data_offset(page, p, d->page_stride_bytes),
                     a->cache + kv_scale_offset(page, p, P, d->page_stride_bytes));
    }
    return DSV4_STATUS_SUCCESS;
}
