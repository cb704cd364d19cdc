/*
 * CPU reference of dsv4_inv_rope: plain loops over tokens, live heads and the 32 pairs,
 * each through inv_rope_word (src/compress/inv_rope_pair.h); dims below 448 and padding
 * heads are not touched.
 */
#include "compress/compress_common.h"
#include "compress/inv_rope_pair.h"

dsv4_status_t inv_rope_ref_run(const dsv4_inv_rope_desc_t *d, const inv_rope_plan_t *plan,
                               const dsv4_inv_rope_args_t *a) {
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        const int64_t pos = a->position_ids[t];
        const int in = inv_rope_pos_in(pos, d->max_position);
        for (int64_t h = 0; h < d->num_heads; ++h) {
            uint16_t *x = a->o + t * plan->o_stride_token + h * plan->o_stride_head + DSV4_INV_ROPE_FIRST_DIM;
            for (int i = 0; i < DSV4_INV_ROPE_PAIRS; ++i) {
                const float c = in ? a->cos_sin_cache[pos * 64 + i] : 1.0f;
                const float s = in ? a->cos_sin_cache[pos * 64 + 32 + i] : 0.0f;
                const uint32_t w = inv_rope_word(x[2 * i] | ((uint32_t)x[2 * i + 1] << 16), c, s);
                x[2 * i] = (uint16_t)w;
                x[2 * i + 1] = (uint16_t)(w >> 16);
            }
        }
    }
    return DSV4_STATUS_SUCCESS;
}
