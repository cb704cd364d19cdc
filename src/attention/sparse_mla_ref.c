/*
 * CPU references of sparse MLA decode and prefill: a float64 evaluation of the formula
 * of include/dsv4/attention.h on the same K rows the kernels see (decode: the fp8
 * records dequantized exactly as include/dsv4/kvcache.h says, NaN lanes read as 0;
 * prefill: the bf16 rows). Per (token, head) a float64 online softmax over the list in order (the
 * rescaling is exact to ~1e-16, far below what the tests resolve), then
 *   M = max(m, sink);  out = acc e^(m-M) / (l e^(m-M) + e^(sink-M));  empty -> 0.
 * No allocation: rows are decoded on the fly into a 512-double buffer.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "attention/mla_host.h"
#include "common/error.h"
#include "common/kv_format.h"
#include "dsv4/numerics.h"

/* A source of key rows: up to two lists (the kernels' list description), each with a row
 * fetcher over its own storage. */
typedef struct ref_list {
    mla_list_params_t p;
    int (*fetch)(const mla_list_params_t *l, int32_t id, double *row); /* 0: invalid id */
} ref_list_t;

static int fetch_fp8(const mla_list_params_t *l, int32_t id, double *row) {
    if (id < 0 || (int64_t)id >= l->num_valid) return 0;
    const int64_t page = id / l->page_tokens, pos = id % l->page_tokens;
    uint16_t rec[DSV4_KV_DIM];
    kv_record_decode(l->base + kv_data_offset(page, pos, l->row_bytes),
                     l->base + kv_scale_offset(page, pos, l->page_tokens, l->row_bytes), rec);
    for (int d = 0; d < DSV4_KV_DIM; ++d) {
        const float v = dsv4_bf16_to_f32(rec[d]);
        row[d] = isnan(v) ? 0.0 : (double)v; /* NaN lanes of K read as 0 */
    }
    return 1;
}

static int fetch_bf16(const mla_list_params_t *l, int32_t id, double *row) {
    if (id < 0 || (int64_t)id >= l->num_valid) return 0;
    const uint16_t *r = (const uint16_t *)(l->base + (int64_t)id * l->row_bytes);
    for (int d = 0; d < 512; ++d) row[d] = (double)dsv4_bf16_to_f32(r[d]);
    return 1;
}

typedef struct ref_job {
    int64_t T, H, q_st, q_sh, o_st, o_sh;
    const uint16_t *q;
    const float *sink;
    double scale;
    int nlists;
    ref_list_t list[2];
    uint16_t *out;
    double *ref_out, *ref_lse;
} ref_job_t;

static void ref_head(const ref_job_t *job, int64_t t, int64_t h) {
    double qv[512], row[512], acc[512];
    const uint16_t *qr = job->q + t * job->q_st + h * job->q_sh;
    for (int d = 0; d < 512; ++d) {
        qv[d] = (double)dsv4_bf16_to_f32(qr[d]);
        acc[d] = 0.0;
    }
    double m = -INFINITY, l = 0.0;
    for (int li = 0; li < job->nlists; ++li) {
        const mla_list_params_t *L = &job->list[li].p;
        int64_t len = L->lens[t];
        len = len < 0 ? 0 : (len > L->width ? L->width : len);
        for (int64_t j = 0; j < len; ++j) {
            if (!job->list[li].fetch(L, L->ids[t * L->stride + j], row)) continue;
            double s = 0.0;
            for (int d = 0; d < 512; ++d) s += qv[d] * row[d];
            s *= job->scale;
            if (s > m) { /* rescale the running sums to the new max */
                const double r = exp(m - s);
                l *= r;
                for (int d = 0; d < 512; ++d) acc[d] *= r;
                m = s;
            }
            const double p = s == -INFINITY ? 0.0 : exp(s - m); /* weight 0, also before any finite max */
            l += p;
            for (int d = 0; d < 512; ++d) acc[d] += p * row[d];
        }
    }
    /* A NaN denominator (a NaN score, or a +inf one: e^(inf - inf)) makes the whole row NaN:
     * upstream NaN and Inf stay visible instead of turning into an all-zero row. */
    const int nan_row = isnan(l);
    double w = 0.0, den = 0.0;
    if (l > 0.0) {
        const double sink = job->sink ? (double)job->sink[h] : -INFINITY;
        const double M = sink > m ? sink : m;
        w = exp(m - M);
        den = l * w + (sink == -INFINITY ? 0.0 : exp(sink - M));
    }
    uint16_t *o = job->out + t * job->o_st + h * job->o_sh;
    for (int d = 0; d < 512; ++d) {
        const double v = nan_row ? NAN : l > 0.0 ? acc[d] * w / den : 0.0;
        o[d] = dsv4_f32_to_bf16((float)v);
        if (job->ref_out) job->ref_out[(t * job->H + h) * 512 + d] = v;
    }
    if (job->ref_lse) job->ref_lse[t * job->H + h] = nan_row ? NAN : l > 0.0 ? m + log(l) : -INFINITY;
}

static void ref_run(const ref_job_t *job) {
    for (int64_t t = 0; t < job->T; ++t)
        for (int64_t h = 0; h < job->H; ++h) ref_head(job, t, h);
}

/* The part of a job both ops share; the caller has checked the descriptor. */
static dsv4_status_t job_init(ref_job_t *job, const char *op, int64_t T, int64_t H, int64_t q_st, int64_t q_sh,
                              int64_t o_st, int64_t o_sh, float scale, int64_t config, const void *q, const float *sink,
                              void *out, double *ref_out, double *ref_lse) {
    DSV4_TRY(dsv4_check_ptr(op, "q", q));
    DSV4_TRY(dsv4_check_ptr(op, "out", out));
    mla_qo_geom_t g;
    DSV4_TRY(mla_check_common(op, T, H, q_st, q_sh, o_st, o_sh, scale, config, &g));
    memset(job, 0, sizeof *job);
    job->T = T, job->H = H;
    job->q_st = g.q_st, job->q_sh = g.q_sh, job->o_st = g.o_st, job->o_sh = g.o_sh;
    job->q = (const uint16_t *)q;
    job->sink = sink;
    job->scale = (double)mla_scale_or_default(scale);
    job->nlists = 1;
    job->out = (uint16_t *)out;
    job->ref_out = ref_out, job->ref_lse = ref_lse;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_sparse_mla_decode_ref(const dsv4_sparse_mla_decode_desc_t *desc,
                                         const dsv4_sparse_mla_decode_args_t *a) {
    static const char *op = "sparse_mla_decode_ref";
    DSV4_TRY(dsv4_sparse_mla_decode_check(desc));
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    ref_job_t job;
    DSV4_TRY(job_init(&job, op, desc->num_tokens, desc->num_heads, desc->q_stride_token, desc->q_stride_head,
                      desc->out_stride_token, desc->out_stride_head, desc->scale, desc->config, a->q, a->sink, a->out,
                      a->ref_out, a->ref_lse));
    DSV4_TRY(dsv4_check_ptr(op, "main_cache", a->main_cache));
    DSV4_TRY(dsv4_check_ptr(op, "main_ids", a->main_ids));
    DSV4_TRY(dsv4_check_ptr(op, "main_lens", a->main_lens));
    if (desc->has_extra) {
        DSV4_TRY(dsv4_check_ptr(op, "extra_cache", a->extra_cache));
        DSV4_TRY(dsv4_check_ptr(op, "extra_ids", a->extra_ids));
        DSV4_TRY(dsv4_check_ptr(op, "extra_lens", a->extra_lens));
    }
    job.nlists = desc->has_extra ? 2 : 1;
    job.list[0] = (ref_list_t){mla_decode_list(&desc->main, a->main_cache, a->main_ids, a->main_lens), fetch_fp8};
    if (desc->has_extra)
        job.list[1] =
            (ref_list_t){mla_decode_list(&desc->extra, a->extra_cache, a->extra_ids, a->extra_lens), fetch_fp8};
    ref_run(&job);
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_sparse_mla_prefill_ref(const dsv4_sparse_mla_prefill_desc_t *desc,
                                          const dsv4_sparse_mla_prefill_args_t *a) {
    static const char *op = "sparse_mla_prefill_ref";
    DSV4_TRY(dsv4_sparse_mla_prefill_check(desc));
    DSV4_TRY(dsv4_check_ptr(op, "args", a));
    ref_job_t job;
    DSV4_TRY(job_init(&job, op, desc->num_tokens, desc->num_heads, desc->q_stride_token, desc->q_stride_head,
                      desc->out_stride_token, desc->out_stride_head, desc->scale, desc->config, a->q, a->sink, a->out,
                      a->ref_out, a->ref_lse));
    DSV4_TRY(dsv4_check_ptr(op, "kv", a->kv));
    DSV4_TRY(dsv4_check_ptr(op, "ids", a->ids));
    DSV4_TRY(dsv4_check_ptr(op, "lens", a->lens));
    job.list[0] = (ref_list_t){mla_prefill_list(desc, a->kv, a->ids, a->lens), fetch_bf16};
    ref_run(&job);
    return DSV4_STATUS_SUCCESS;
}
