/*
 * CPU reference of dsv4_compress: plain loops over rows, each row through latent_math.h
 * (pooling, the 128 partial sums, the halving tree, rr, the output rounding). At
 * ratio 2 every latent is computed first and the ring stores follow, as the kernels'
 * two launches do, so a chunk's first row reads the ring before its own chunk
 * overwrites it.
 */
#include <string.h>

#include "compress/latent_math.h"
#include "compress/latent_plan.h"

/* norm512 of x into out. */
static void norm_row(const float *x, const uint16_t *gamma, float eps, uint16_t *out) {
    const float rr = cl_row_rms_inv(x, DSV4_COMPRESS_DIM, eps);
    for (int d = 0; d < DSV4_COMPRESS_DIM; ++d) out[d] = cl_out(x[d], rr, gamma[d]);
}

dsv4_status_t latent_ref_run(const dsv4_compress_desc_t *d, const latent_plan_t *plan, const dsv4_compress_args_t *a) {
    enum { D = DSV4_COMPRESS_DIM };
    float pooled[D];
    for (int64_t t = 0; t < d->num_tokens; ++t) {
        const float *q = a->kv_score + t * plan->kv_stride;
        uint16_t *out = a->latent + t * D;
        if (d->ratio == 1) {
            if (a->slot[t] >= 0) norm_row(q, a->gamma, d->eps, out);
            continue;
        }
        const int64_t pos = a->positions[t], rs = a->ring_slot[t];
        if (!cl_closes(pos, rs, d->ring_rows)) continue;
        const int64_t b = cl_request_of(a->query_start_loc, d->num_reqs, t);
        if (b < 0) continue;
        const float *p = t == cl_first_row(a->query_start_loc, b)
                             ? a->ring + cl_prev_ring_row(rs, pos, d->ring_cap) * plan->ring_stride
                             : q - plan->kv_stride;
        for (int i = 0; i < D; ++i) pooled[i] = cl_pool(p[i], q[i], p[D + i], q[D + i]);
        norm_row(pooled, a->gamma, d->eps, out);
    }
    if (d->ratio == 1) return DSV4_STATUS_SUCCESS;
    for (int64_t b = 0; b < d->num_reqs; ++b) {
        int64_t lo, hi;
        cl_store_rows(a->query_start_loc, b, d->num_tokens, d->ring_cap, &lo, &hi);
        for (int64_t t = lo; t < hi; ++t) {
            const int64_t rs = a->ring_slot[t];
            if (rs >= 0 && rs < d->ring_rows)
                memcpy(a->ring + rs * plan->ring_stride, a->kv_score + t * plan->kv_stride, 2 * D * sizeof(float));
        }
    }
    return DSV4_STATUS_SUCCESS;
}
