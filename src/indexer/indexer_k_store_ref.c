/*
 * CPU reference of dsv4_indexer_k_store: plain loops over the stored rows, each element
 * through the functions of indexer_math.h, which the kernel calls too. The sum of squares
 * takes the contract's partials and halving tree, which the kernel's xor butterfly
 * reproduces bit for bit (addition is commutative).
 */

#include "indexer/indexer_common.h"
#include "indexer/indexer_math.h"

static float sumsq128(const float *x) {
    float p[32];
    for (int l = 0; l < 32; ++l) p[l] = idx_sumsq_part(x[4 * l], x[4 * l + 1], x[4 * l + 2], x[4 * l + 3]);
    for (int h = 16; h > 0; h >>= 1)
        for (int l = 0; l < h; ++l) p[l] = IDX_ADD(p[l], p[l + h]);
    return p[0];
}

dsv4_status_t idx_k_ref_run(const dsv4_indexer_k_store_desc_t *d, const idx_k_plan_t *plan,
                            const dsv4_indexer_k_store_args_t *a) {
    const int64_t P = d->page_tokens;
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        const int64_t pos = a->positions[t], slot = a->slot_mapping[t];
        if (!idx_k_stored(pos, slot, d->ratio, plan->slots)) continue;
        const uint16_t *k = a->k_pre + t * plan->k_stride_row;
        float x[DSV4_INDEXER_HEAD_DIM];
        uint16_t y[DSV4_INDEXER_HEAD_DIM];
        for (int i = 0; i < DSV4_INDEXER_HEAD_DIM; ++i) x[i] = dsv4_bf16_to_f32(k[i]);
        const float rr = idx_rms_inv(sumsq128(x), d->eps);
        for (int i = 0; i < DSV4_INDEXER_HEAD_DIM; ++i)
            y[i] = dsv4_f32_to_bf16(idx_k_norm(x[i], rr, dsv4_bf16_to_f32(a->gamma[i])));
        const int64_t p = idx_k_rope_pos(pos, d->ratio);
        const int in = idx_pos_in(p, d->max_position);
        for (int i = 0; i < DSV4_INDEXER_ROPE_FIRST_DIM / 2; ++i) {
            const int at = DSV4_INDEXER_ROPE_FIRST_DIM + 2 * i;
            const float c = in ? a->cos_sin[p * 64 + i] : 1.0f, s = in ? a->cos_sin[p * 64 + 32 + i] : 0.0f;
            const uint32_t w = idx_rope_word(y[at] | ((uint32_t)y[at + 1] << 16), c, s);
            y[at] = (uint16_t)w;
            y[at + 1] = (uint16_t)(w >> 16);
        }
        idx_k_state_write(y, a->cache + slot / P * d->page_stride_bytes, P, slot % P);
    }
    return DSV4_STATUS_SUCCESS;
}
