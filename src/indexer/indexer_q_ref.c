/*
 * CPU reference of dsv4_indexer_q: plain loops over tokens and heads, each element
 * through the functions of indexer_math.h, which the kernel calls too.
 */
#include "indexer/indexer_common.h"
#include "indexer/indexer_math.h"

dsv4_status_t idx_q_ref_run(const dsv4_indexer_q_desc_t *d, const idx_q_plan_t *plan, const dsv4_indexer_q_args_t *a) {
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        const int64_t pos = a->positions[t];
        const int in = idx_pos_in(pos, d->max_position);
        for (int64_t h = 0; h < d->num_heads; ++h) {
            const uint16_t *q = a->q + t * plan->q_stride_token + h * plan->q_stride_head;
            float x[DSV4_INDEXER_HEAD_DIM];
            for (int i = 0; i < DSV4_INDEXER_ROPE_FIRST_DIM; ++i) x[i] = dsv4_bf16_to_f32(q[i]);
            for (int i = 0; i < DSV4_INDEXER_ROPE_FIRST_DIM / 2; ++i) {
                const int at = DSV4_INDEXER_ROPE_FIRST_DIM + 2 * i;
                const float c = in ? a->cos_sin[pos * 64 + i] : 1.0f, s = in ? a->cos_sin[pos * 64 + 32 + i] : 0.0f;
                const uint32_t w = idx_rope_word(q[at] | ((uint32_t)q[at + 1] << 16), c, s);
                x[at] = dsv4_bf16_to_f32((uint16_t)w);
                x[at + 1] = dsv4_bf16_to_f32((uint16_t)(w >> 16));
            }
            float amax = 0.0f;
            for (int i = 0; i < DSV4_INDEXER_HEAD_DIM; ++i) amax = idx_absmax(amax, x[i]);
            const uint8_t enc = dsv4_ue8m0_from_amax(amax);
            const float inv = dsv4_ue8m0_inv_scale(enc);
            uint8_t *q8 = a->q8 + (t * d->num_heads + h) * DSV4_INDEXER_HEAD_DIM;
            for (int i = 0; i < DSV4_INDEXER_HEAD_DIM; ++i) q8[i] = idx_q_code(x[i], inv);
            a->w[t * d->num_heads + h] = idx_q_weight(dsv4_bf16_to_f32(a->w_raw[t * plan->w_stride_token + h]),
                                                      dsv4_ue8m0_to_f32(enc), plan->softmax_scale, plan->head_scale);
        }
    }
    return DSV4_STATUS_SUCCESS;
}
