/*
 * CPU reference of dsv4_kv_rope_insert: plain loops over tokens; a token that closes its
 * group and has a valid slot gets its RoPE dims rotated (kv_rope_word_t) into a copy of
 * its row, whose record kv_quant_row writes (as dsv4_kv_insert_ref would), nothing else
 * touched.
 */
#include <string.h>

#include "kvcache/kv_common.h"
#include "kvcache/kv_record.h"

dsv4_status_t kv_rope_insert_ref_run(const dsv4_kv_rope_insert_desc_t *d, const kv_insert_plan_t *plan,
                                     const dsv4_kv_rope_insert_args_t *a) {
    const int64_t P = d->page_tokens;
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        const int64_t slot = a->slot_mapping[t];
        int64_t first;
        if (slot < 0 || slot / P >= d->num_pages) continue; /* -1, other negatives, past the cache */
        if (!kv_group_closes(a->positions[t], d->ratio, &first)) continue;
        uint16_t y[DSV4_KV_DIM];
        memcpy(y, a->latent + t * plan->k_stride_row, sizeof(y));
        for (int i = 0; i < DSV4_KV_ROPE_DIM / 2; ++i) {
            float c, s;
            kv_rope_coeff(a->cos_sin_cache, first, d->max_position, i, &c, &s);
            uint16_t *pair = y + DSV4_KV_NOPE_DIM + 2 * i;
            const uint32_t w = kv_rope_word_t(pair[0] | ((uint32_t)pair[1] << 16), c, s);
            pair[0] = (uint16_t)w, pair[1] = (uint16_t)(w >> 16);
        }
        const int64_t page = slot / P, p = slot % P;
        kv_quant_row(y, a->cache + kv_data_offset(page, p, d->page_stride_bytes),
                     a->cache + kv_scale_offset(page, p, P, d->page_stride_bytes));
    }
    return DSV4_STATUS_SUCCESS;
}
