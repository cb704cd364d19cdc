/*
 * CPU reference of dsv4_kv_swa_write, plain loops over the
 * functions of kv_record.h.
 *
 * Q side: the sum of squares is taken in the kernel's order (kv_record.h, "lane layout":
 * 32 partial sums of 16 elements, then a butterfly), and rq with correctly rounded fp32
 * operations, as the kernel does. The contract leaves this order open and checks q within
 * 1 bf16 ulp; pinning it makes the kernel's q equal to this reference bit for bit,
 * which keeps the 1-ulp check meaningful even for rotated dims that cancel (where an
 * rq a few ulp off could move the result by more than an ulp).
 *
 * skip_q_norm: no sum and no rq; the NoPE dims are not touched and the RoPE dims are
 * rotated with scale 1, as the kv side (bit-exact by construction).
 *
 * KV side: r = bf16(RoPE(kv row)), then kv_quant_row(r): the same bytes dsv4_kv_insert
 * writes for r.
 */
#include <string.h>

#include "kvcache/kv_common.h"
#include "kvcache/kv_record.h"

static uint32_t word_at(const uint16_t *x, int i) { return x[2 * i] | ((uint32_t)x[2 * i + 1] << 16); }
static void word_put(uint16_t *x, int i, uint32_t w) {
    x[2 * i] = (uint16_t)w;
    x[2 * i + 1] = (uint16_t)(w >> 16);
}

static float sumsq_kernel_order(const uint16_t *x) {
    float part[32], next[32];
    for (int l = 0; l < 32; ++l) {
        float s = 0.0f;
        for (int i = 0; i < 8; ++i) s = kv_sumsq_step(s, dsv4_bf16_to_f32(x[8 * l + i]));
        for (int i = 0; i < 8; ++i) s = kv_sumsq_step(s, dsv4_bf16_to_f32(x[256 + 8 * l + i]));
        part[l] = s;
    }
    for (int o = 16; o > 0; o >>= 1) {
        for (int l = 0; l < 32; ++l) next[l] = part[l] + part[l ^ o];
        memcpy(part, next, sizeof part);
    }
    return part[0];
}

/* Dims 448..511 of x (pairs i = 0..31) rotated at pos after scaling by `scale`. */
static void rope_row(uint16_t *x, float scale, const float *cos_sin, int64_t pos, int64_t max_position) {
    for (int i = 0; i < DSV4_KV_ROPE_DIM / 2; ++i) {
        float c, s;
        kv_rope_coeff(cos_sin, pos, max_position, i, &c, &s);
        const int wi = DSV4_KV_NOPE_DIM / 2 + i;
        word_put(x, wi, kv_rope_word(word_at(x, wi), scale, c, s));
    }
}

dsv4_status_t kv_swa_ref_run(const dsv4_kv_swa_write_desc_t *d, const kv_swa_plan_t *plan,
                             const dsv4_kv_swa_write_args_t *a) {
    uint16_t r[DSV4_KV_DIM];
    for (int64_t n = 0; n < d->num_tokens; ++n) {
        const int64_t pos = a->position_ids[n];
        for (int64_t h = 0; h < plan->heads_padded; ++h) {
            uint16_t *row = a->q + n * plan->q_stride_token + h * plan->q_stride_head;
            if (h >= d->num_heads) { /* head padding */
                memset(row, 0, DSV4_KV_DIM * sizeof *row);
                continue;
            }
            if (d->skip_q_norm) {
                rope_row(row, 1.0f, a->cos_sin_cache, pos, d->max_position);
                continue;
            }
            const float rq = kv_rms_inv(sumsq_kernel_order(row), d->eps);
            for (int i = 0; i < DSV4_KV_NOPE_DIM / 2; ++i) word_put(row, i, kv_qnorm_word(word_at(row, i), rq));
            rope_row(row, rq, a->cos_sin_cache, pos, d->max_position);
        }
    }
    const int64_t P = d->page_tokens;
    for (int64_t t = 0; t < d->num_insert; ++t) {
        const int64_t slot = a->slot_mapping[t];
        if (slot < 0 || slot / P >= d->num_pages) continue;
        const int64_t page = slot / P, p = slot % P;
        memcpy(r, a->kv + t * plan->kv_stride_row, sizeof r);
        rope_row(r, 1.0f, a->cos_sin_cache, a->position_ids[t], d->max_position);
        kv_quant_row(r, a->cache + kv_data_offset(page, p, d->page_stride_bytes),
                     a->cache + kv_scale_offset(page, p, P, d->page_stride_bytes));
    }
    return DSV4_STATUS_SUCCESS;
}
