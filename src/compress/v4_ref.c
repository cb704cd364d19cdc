/*
 * CPU reference of dsv4_compress_v4: plain loops. Every state row of step 1 is stored
 * before any record of step 2 reads the state, as the kernels' launches order them.
 * Per closing row: the window's row offsets (v4_row), per dim the maximum, the group
 * sums and their halving tree, then the RMS factor, the normalized row, its bf16 row y
 * with the RoPE pairs rotated from the unrounded values, and y's record (N = 512:
 * kvcache's kv_quant_row, dsv4_kv_insert's rules; duplicate slots: the last row's record
 * stands) or indexer state (N = 128: indexer_math.h's idx_k_state_write).
 */
#include <math.h>
#include <string.h>

#include "compress/v4_math.h"
#include "compress/v4_plan.h"
#include "indexer/indexer_math.h"

enum { D = DSV4_COMPRESS_DIM, MAX_GROUPS = V4_MAX_WINDOW / V4_GROUP };

static void save_rows(const dsv4_compress_v4_desc_t *d, const v4_plan_t *pl, const dsv4_compress_v4_args_t *a) {
    const int64_t B = d->state_block_rows, width = pl->width;
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        const int64_t pos = a->positions[t], s = a->state_slot[t];
        if (pos < 0 || s < 0 || s / B >= d->state_blocks) continue;
        float *row = a->state + (s / B) * pl->state_stride_block + (s % B) * pl->state_stride_row;
        const float *src = a->kv_score + t * pl->kv_stride, *ape = a->ape + (pos % d->ratio) * width;
        memcpy(row, src, (size_t)width * sizeof(float));
        for (int64_t i = 0; i < width; ++i) row[width + i] = CL_FADD(src[width + i], ape[i]);
    }
}

void v4_ref_pool(const float *state, const int64_t *off, int64_t W, int64_t width, int64_t N, float *x) {
    for (int64_t dd = 0; dd < N; ++dd) {
        float m = -INFINITY;
        for (int64_t j = 0; j < W; ++j)
            if (off[j] >= 0) m = v4_max_step(m, state[off[j] + width + dd]);
        if (m == -INFINITY) {
            x[dd] = 0.0f;
            continue;
        }
        float num[MAX_GROUPS], den[MAX_GROUPS];
        const int64_t groups = W / V4_GROUP;
        for (int64_t g = 0; g < groups; ++g) {
            num[g] = den[g] = 0.0f;
            for (int64_t j = g * V4_GROUP; j < (g + 1) * V4_GROUP; ++j) {
                if (off[j] < 0) continue;
                const float e = v4_exp(CL_FADD(state[off[j] + width + dd], -m));
                den[g] = CL_FADD(den[g], e);
                num[g] = CL_FMA(state[off[j] + dd], e, num[g]);
            }
        }
        for (int64_t h = groups / 2; h >= 1; h /= 2)
            for (int64_t g = 0; g < h; ++g) num[g] = CL_FADD(num[g], num[g + h]), den[g] = CL_FADD(den[g], den[g + h]);
        x[dd] = CL_FDIV(num[0], den[0]);
    }
}

/* y of the pooled row x (N dims): bf16 of the normalized values, the 32 RoPE pairs of the
 * last 64 dims rotated at first. */
static void latent_row(const dsv4_compress_v4_desc_t *d, const dsv4_compress_v4_args_t *a, const float *x, int N,
                       int64_t first, uint16_t *y) {
    const float rr = cl_row_rms_inv(x, N, d->eps);
    float n[D];
    for (int i = 0; i < N; ++i) n[i] = cl_norm(x[i], rr, a->gamma[i]);
    for (int i = 0; i < N - DSV4_KV_ROPE_DIM; ++i) y[i] = dsv4_f32_to_bf16(n[i]);
    for (int i = 0; i < DSV4_KV_ROPE_DIM / 2; ++i) {
        float c, s;
        kv_rope_coeff(a->cos_sin_cache, first, d->max_position, i, &c, &s);
        const int k = N - DSV4_KV_ROPE_DIM + 2 * i;
        const uint32_t w = v4_rope(n[k], n[k + 1], c, s);
        y[k] = (uint16_t)w, y[k + 1] = (uint16_t)(w >> 16);
    }
}

dsv4_status_t v4_ref_run(const dsv4_compress_v4_desc_t *d, const v4_plan_t *pl, const dsv4_compress_v4_args_t *a) {
    save_rows(d, pl, a);
    const v4_rows_t rows = v4_rows_make(d, pl, a->block_table);
    const int64_t P = d->page_tokens;
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        const int64_t slot = a->slot_mapping[t], pos = a->positions[t];
        int64_t first;
        if (slot < 0 || slot / P >= d->num_pages || !kv_group_closes(pos, d->ratio, &first)) continue;
        int64_t off[V4_MAX_WINDOW];
        for (int64_t j = 0; j < pl->window; ++j) off[j] = v4_row(&rows, d->ratio, pos, a->req_idx[t], j);
        float x[D];
        uint16_t y[D];
        v4_ref_pool(a->state, off, pl->window, pl->width, pl->head, x);
        latent_row(d, a, x, (int)pl->head, first, y);
        if (pl->head == 128) idx_k_state_write(y, a->cache + slot / P * d->page_stride_bytes, P, slot % P);
        else
            kv_quant_row(y, a->cache + kv_data_offset(slot / P, slot % P, d->page_stride_bytes),
                         a->cache + kv_scale_offset(slot / P, slot % P, P, d->page_stride_bytes));
    }
    return DSV4_STATUS_SUCCESS;
}
