/* Sparse MLA test data: random caches, workspaces, lists, sinks; the checked comparison. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "mla_case.h"

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        printf("out of host memory\n");
        exit(1);
    }
    return p;
}

void mla_make_list(th_rng_t *r, int T, int width, int64_t valid, int lens_mode, int dups, int32_t *ids, int32_t *lens) {
    for (int t = 0; t < T; ++t) {
        int len = width;
        if (lens_mode == MLA_LENS_RANDOM) {
            /* Mostly long lists (the model's case), sometimes short or empty. */
            const int64_t u = th_rng_range(r, 0, 9);
            len = u == 0 ? 0 : (u < 3 ? (int)th_rng_range(r, 1, width) : (int)th_rng_range(r, width * 3 / 4, width));
        } else if (lens_mode == MLA_LENS_EMPTY) {
            len = (t % 3 == 0) ? -(int)th_rng_range(r, 0, 5) : 0; /* negative lens count as 0 */
        }
        lens[t] = len;
        int32_t *row = ids + (int64_t)t * width;
        for (int j = 0; j < width; ++j) {
            int32_t v;
            if (j >= len) {
                /* Padding past lens: -1 mostly, but also valid ids that must NOT be read. */
                v = (j % 5 == 0 && valid > 0) ? (int32_t)th_rng_range(r, 0, valid - 1) : -1;
            } else if (lens_mode == MLA_LENS_INVALID_ONLY) {
                const int64_t u = th_rng_range(r, 0, 2);
                v = u == 0
                        ? -1
                        : (u == 1 ? (int32_t)(valid + th_rng_range(r, 0, 1000)) : (int32_t)-th_rng_range(r, 2, 1000));
            } else {
                const int64_t u = th_rng_range(r, 0, 99);
                if (u < 3) v = -1;
                else if (u < 5) v = (int32_t)(valid + th_rng_range(r, 0, 64)); /* out of range */
                else if (u < 6) v = INT32_MIN + (int32_t)th_rng_range(r, 0, 9);
                else v = valid > 0 ? (int32_t)th_rng_range(r, 0, valid - 1) : -1;
                if (dups && j > 0 && u >= 90) v = row[th_rng_range(r, 0, j - 1)];
            }
            row[j] = v;
        }
    }
}

void mla_make_chunk_list(th_rng_t *r, int T, int width, int64_t kv_rows, int32_t *ids, int32_t *lens) {
    enum { REQ = MC_CHUNK_REQS, WIN = MC_WINDOW };
    const int per_req = (T + REQ - 1) / REQ, slab = (int)(kv_rows / REQ), comp = slab - per_req - WIN;
    if (width <= WIN || comp < width - WIN) { /* a mistake in the test table */
        printf("mla_make_chunk_list: width %d needs kv_rows >= 4 * (T/4 + width), got %lld\n", width,
               (long long)kv_rows);
        exit(1);
    }
    char *seen = xcalloc((size_t)comp, 1);
    for (int t = 0; t < T; ++t) {
        const int b = t / per_req, pos = t % per_req;
        int32_t *row = ids + (int64_t)t * width;
        memset(seen, 0, (size_t)comp);
        int n = 0;
        while (n < width - WIN) {
            const int v = (int)th_rng_range(r, 0, comp - 1);
            if (!seen[v]) seen[v] = 1, row[n++] = b * slab + v;
        }
        for (int j = 0; j < WIN; ++j) row[n++] = b * slab + comp + pos + j;
        lens[t] = width;
    }
    free(seen);
}

void mla_make_sink(th_rng_t *r, int H, int mode, float *sink) {
    for (int h = 0; h < H; ++h) {
        float v = (float)(th_rng_normal(r) * 2.0);
        if (mode == MLA_SINK_NEG_INF || (mode == MLA_SINK_MIXED && h % 3 == 1)) v = -INFINITY;
        sink[h] = v;
    }
}

/* q ~ N(0, q_scale^2) as bf16, and the sink of `mode` (NULL for none). */
static void make_q_sink(th_rng_t *r, int T, int H, double q_scale, int mode, uint16_t **q, float **sink) {
    *q = xcalloc((size_t)T * H * 512, sizeof(uint16_t));
    th_fill_bf16_normal(r, *q, (size_t)T * H * 512, q_scale);
    *sink = NULL;
    if (mode != MLA_SINK_NONE) {
        *sink = xcalloc((size_t)H, sizeof(float));
        mla_make_sink(r, H, mode, *sink);
    }
}

void mla_decode_row(const uint8_t *cache, int64_t P, int64_t stride, int64_t slot, double *row) {
    const uint8_t *base = cache + (slot / P) * stride;
    const int64_t pos = slot % P;
    const uint8_t *data = base + pos * 576, *scales = base + P * 576 + pos * 8;
    for (int d = 0; d < 448; ++d) {
        const float v = dsv4_bf16_to_f32(dsv4_dequant_e4m3(data[d], dsv4_ue8m0_to_f32(scales[d / 64])));
        row[d] = isnan(v) ? 0.0 : v;
    }
    for (int i = 0; i < 64; ++i) {
        const float v = dsv4_bf16_to_f32((uint16_t)(data[448 + 2 * i] | (data[449 + 2 * i] << 8)));
        row[448 + i] = isnan(v) ? 0.0 : v;
    }
}

/* Random records: codes uniform over the finite e4m3 bytes, scales 2^-10 .. 2^-6 (|K| up
 * to 7), RoPE ~ N(0, 1); unused bytes (pad byte, page padding) random too, so reading
 * them would show. With nan_lanes, a few records get NaN codes or NaN RoPE values. */
static uint8_t *make_cache(th_rng_t *r, int64_t P, int64_t pages, int64_t stride, int nan_lanes, size_t *bytes,
                           double *max_abs) {
    *bytes = (size_t)(pages * stride);
    uint8_t *c = xcalloc(*bytes, 1);
    for (size_t i = 0; i < *bytes; ++i) c[i] = (uint8_t)th_rng_u32(r);
    double row[512];
    for (int64_t pg = 0; pg < pages; ++pg)
        for (int64_t p = 0; p < P; ++p) {
            uint8_t *data = c + pg * stride + p * 576, *sc = c + pg * stride + P * 576 + p * 8;
            for (int d = 0; d < 448; ++d) {
                uint8_t b = (uint8_t)th_rng_u32(r);
                if ((b & 0x7F) == 0x7F) b ^= 1; /* keep codes finite unless asked */
                data[d] = b;
            }
            for (int k = 0; k < 7; ++k) sc[k] = (uint8_t)th_rng_range(r, 117, 121);
            for (int i = 0; i < 64; ++i) {
                const uint16_t h = dsv4_f32_to_bf16((float)th_rng_normal(r));
                data[448 + 2 * i] = (uint8_t)h;
                data[449 + 2 * i] = (uint8_t)(h >> 8);
            }
            if (nan_lanes && th_rng_range(r, 0, 7) == 0) {
                data[th_rng_range(r, 0, 447)] = th_rng_range(r, 0, 1) ? 0x7F : 0xFF;
                const int i = (int)th_rng_range(r, 0, 63);
                data[448 + 2 * i] = 0xC1; /* bf16 0x7FC1: NaN */
                data[449 + 2 * i] = 0x7F;
            }
            mla_decode_row(c, P, stride, pg * P + p, row);
            for (int d = 0; d < 512; ++d)
                if (fabs(row[d]) > *max_abs) *max_abs = fabs(row[d]);
        }
    return c;
}

mla_decode_case_t mla_decode_model_case(int T, int H, int main_pages, int extra_pages, int lens_mode, int sink_mode,
                                        int dups) {
    const mla_decode_case_t c = {.T = T,
                                 .H = H,
                                 .main_width = MC_WINDOW,
                                 .main_P = MC_SWA_PAGE_TOKENS,
                                 .main_pages = main_pages,
                                 .extra_width = MC_TOPK,
                                 .extra_P = MC_V4_PAGE_TOKENS,
                                 .extra_pages = extra_pages,
                                 .lens_mode = lens_mode,
                                 .sink_mode = sink_mode,
                                 .q_scale = 1.0,
                                 .dups = dups};
    return c;
}

void mla_decode_make(th_rng_t *r, const mla_decode_case_t *c, mla_decode_data_t *d) {
    memset(d, 0, sizeof *d);
    d->c = *c;
    dsv4_sparse_mla_decode_desc_t *desc = &d->desc;
    desc->num_tokens = c->T;
    desc->num_heads = c->H;
    MLA_DENSE_QO(desc);
    desc->main.width = c->main_width;
    desc->main.stride = c->main_width;
    desc->main.cache.page_tokens = c->main_P;
    desc->main.cache.page_stride_bytes = c->main_P * 584 + ((c->main_P * 584) % 16 ? 8 : 0) + c->stride_pad;
    desc->main.cache.num_pages = c->main_pages;
    d->main_cache = make_cache(r, c->main_P, c->main_pages, desc->main.cache.page_stride_bytes, c->nan_lanes,
                               &d->main_bytes, &d->max_abs_k);
    d->main_ids = xcalloc((size_t)c->T * c->main_width, sizeof(int32_t));
    d->main_lens = xcalloc((size_t)c->T, sizeof(int32_t));
    mla_make_list(r, c->T, c->main_width, (int64_t)c->main_P * c->main_pages, c->lens_mode, c->dups, d->main_ids,
                  d->main_lens);
    if (c->extra_width > 0) {
        desc->has_extra = 1;
        desc->extra.width = c->extra_width;
        desc->extra.stride = c->extra_width;
        desc->extra.cache.page_tokens = c->extra_P;
        desc->extra.cache.page_stride_bytes = c->extra_P * 584 + ((c->extra_P * 584) % 16 ? 8 : 0) + c->stride_pad;
        desc->extra.cache.num_pages = c->extra_pages;
        d->extra_cache = make_cache(r, c->extra_P, c->extra_pages, desc->extra.cache.page_stride_bytes, c->nan_lanes,
                                    &d->extra_bytes, &d->max_abs_k);
        d->extra_ids = xcalloc((size_t)c->T * c->extra_width, sizeof(int32_t));
        d->extra_lens = xcalloc((size_t)c->T, sizeof(int32_t));
        mla_make_list(r, c->T, c->extra_width, (int64_t)c->extra_P * c->extra_pages, c->lens_mode, c->dups,
                      d->extra_ids, d->extra_lens);
    }
    make_q_sink(r, c->T, c->H, c->q_scale, c->sink_mode, &d->q, &d->sink);
}

void mla_decode_free(mla_decode_data_t *d) {
    free(d->main_cache);
    free(d->extra_cache);
    free(d->main_ids);
    free(d->main_lens);
    free(d->extra_ids);
    free(d->extra_lens);
    free(d->q);
    free(d->sink);
    memset(d, 0, sizeof *d);
}

dsv4_sparse_mla_decode_args_t mla_decode_host_args(const mla_decode_data_t *d) {
    dsv4_sparse_mla_decode_args_t a;
    memset(&a, 0, sizeof a);
    a.q = d->q;
    a.main_cache = d->main_cache;
    a.main_ids = d->main_ids;
    a.main_lens = d->main_lens;
    a.extra_cache = d->extra_cache;
    a.extra_ids = d->extra_ids;
    a.extra_lens = d->extra_lens;
    a.sink = d->sink;
    return a;
}

const char *mla_decode_case_str(const mla_decode_case_t *c, char *buf, size_t n) {
    snprintf(buf, n,
             "T=%d H=%d main(width %d, P %d, pages %d) extra(width %d, P %d, pages %d) lens_mode=%d sink_mode=%d "
             "q_scale=%g dups=%d nan=%d stride_pad=%lld",
             c->T, c->H, c->main_width, c->main_P, c->main_pages, c->extra_width, c->extra_P, c->extra_pages,
             c->lens_mode, c->sink_mode, c->q_scale, c->dups, c->nan_lanes, (long long)c->stride_pad);
    return buf;
}

void mla_prefill_make(th_rng_t *r, const mla_prefill_case_t *c, mla_prefill_data_t *d) {
    memset(d, 0, sizeof *d);
    d->c = *c;
    dsv4_sparse_mla_prefill_desc_t *desc = &d->desc;
    desc->num_tokens = c->T;
    desc->num_heads = c->H;
    desc->kv_rows = c->kv_rows;
    MLA_DENSE_QO(desc);
    const int64_t ks = c->kv_stride ? c->kv_stride : 512; /* a case's 0: dense */
    desc->kv_stride = ks;
    desc->width = c->width;
    desc->ids_stride = c->width;
    d->kv = xcalloc((size_t)(c->kv_rows > 0 ? c->kv_rows : 1) * ks, sizeof(uint16_t));
    th_fill_bf16_normal(r, d->kv, (size_t)(c->kv_rows > 0 ? c->kv_rows : 1) * ks, c->kv_scale);
    for (int64_t i = 0; i < (int64_t)c->kv_rows * ks; ++i) {
        const double v = fabs(dsv4_bf16_to_f32(d->kv[i]));
        if (i % ks < 512 && v > d->max_abs_k) d->max_abs_k = v;
    }
    d->ids = xcalloc((size_t)c->T * c->width, sizeof(int32_t));
    d->lens = xcalloc((size_t)c->T, sizeof(int32_t));
    if (c->lens_mode == MLA_LENS_CHUNK) mla_make_chunk_list(r, c->T, c->width, c->kv_rows, d->ids, d->lens);
    else mla_make_list(r, c->T, c->width, c->kv_rows, c->lens_mode, c->dups, d->ids, d->lens);
    make_q_sink(r, c->T, c->H, c->q_scale, c->sink_mode, &d->q, &d->sink);
}

void mla_prefill_free(mla_prefill_data_t *d) {
    free(d->q);
    free(d->kv);
    free(d->ids);
    free(d->lens);
    free(d->sink);
    memset(d, 0, sizeof *d);
}

dsv4_sparse_mla_prefill_args_t mla_prefill_host_args(const mla_prefill_data_t *d) {
    dsv4_sparse_mla_prefill_args_t a;
    memset(&a, 0, sizeof a);
    a.q = d->q;
    a.kv = d->kv;
    a.ids = d->ids;
    a.lens = d->lens;
    a.sink = d->sink;
    return a;
}

static int first_valid(const int32_t *ids, const int32_t *lens, int width, int t, int64_t valid) {
    const int len = lens[t] < 0 ? 0 : (lens[t] > width ? width : lens[t]);
    for (int j = 0; j < len; ++j)
        if (ids[(size_t)t * width + j] >= 0 && ids[(size_t)t * width + j] < valid) return ids[(size_t)t * width + j];
    return -1;
}

int mla_lists_id(const int32_t *ids, const int32_t *lens, int width, int t, int64_t valid, int id) {
    const int len = lens[t] < 0 ? 0 : (lens[t] > width ? width : lens[t]);
    for (int j = 0; j < len; ++j)
        if (ids[(size_t)t * width + j] == id && id >= 0 && id < valid) return 1;
    return 0;
}

int mla_decode_poison(mla_decode_data_t *d, int t0, int h0, int t1) {
    d->q[((size_t)t0 * d->c.H + h0) * 512 + 7] = 0x7FC0;
    const int64_t P = d->c.main_P, stride = d->desc.main.cache.page_stride_bytes;
    const int id = first_valid(d->main_ids, d->main_lens, d->c.main_width, t1, P * d->c.main_pages);
    if (id < 0) return -1;
    uint8_t *rope = d->main_cache + id / P * stride + id % P * 576 + 448; /* dim 448: bf16 +inf */
    rope[0] = 0x80, rope[1] = 0x7F;
    return id;
}

int mla_prefill_poison(mla_prefill_data_t *d, int t0, int h0, int t1) {
    d->q[((size_t)t0 * d->c.H + h0) * 512 + 7] = 0x7FC0;
    const int id = first_valid(d->ids, d->lens, d->c.width, t1, d->c.kv_rows);
    if (id < 0) return -1;
    d->kv[(size_t)id * d->desc.kv_stride + 448] = 0x7F80;
    return id;
}

const char *mla_prefill_case_str(const mla_prefill_case_t *c, char *buf, size_t n) {
    snprintf(buf, n,
             "T=%d H=%d width=%d kv_rows=%d kv_stride=%lld lens_mode=%d sink_mode=%d q_scale=%g kv_scale=%g dups=%d",
             c->T, c->H, c->width, c->kv_rows, (long long)c->kv_stride, c->lens_mode, c->sink_mode, c->q_scale,
             c->kv_scale, c->dups);
    return buf;
}

double mla_check_out(th_ctx_t *t, const char *what, const uint16_t *got, const double *ref, int T, int H,
                     const int *tokens, int ntok, double max_abs_k) {
    if (!tokens) ntok = T;
    const size_t row = (size_t)H * 512, n = (size_t)ntok * row;
    double *g = malloc(n * sizeof(double)), *r = malloc(n * sizeof(double));
    if (!g || !r) {
        printf("out of host memory\n");
        exit(1);
    }
    for (int k = 0; k < ntok; ++k) {
        const size_t tk = (size_t)(tokens ? tokens[k] : k);
        th_bf16_to_f64(got + tk * row, g + k * row, row);
        memcpy(r + k * row, ref + tk * row, row * sizeof(double));
    }
    const th_err_t e = th_err_f64(g, r, n);
    const double tol = DSV4_MLA_TOL_MAX_ABS * (max_abs_k > 0 ? max_abs_k : 1.0);
    if (!th_check_err(t, what, e, tol, DSV4_MLA_TOL_REL_L2)) {
        const size_t i = e.worst_abs;
        th_note(t, "%s: worst abs error at token %d head %zu dim %zu: got %.6g ref %.6g (max|K| %.4g, tol %.3g)", what,
                tokens ? tokens[i / row] : (int)(i / row), (i / 512) % (size_t)H, i % 512, g[i], r[i], max_abs_k, tol);
        int shown = 0;
        for (size_t k = 0; k < n && shown < 4; ++k)
            if (isnan(g[k]) != isnan(r[k]) || isinf(g[k]) != isinf(r[k])) {
                th_note(t, "%s: NaN/inf mismatch at token %d head %zu dim %zu: got %g ref %g", what,
                        tokens ? tokens[k / row] : (int)(k / row), (k / 512) % (size_t)H, k % 512, g[k], r[k]);
                ++shown;
            }
        /* Per-head summary of the first failing token: which heads / dim ranges are off. */
        const size_t tk0 = i / row;
        for (int h = 0; h < H && h < 128; h += 16) {
            double worst = 0;
            for (int hh = h; hh < h + 16 && hh < H; ++hh)
                for (int dd = 0; dd < 512; ++dd) {
                    const size_t k = tk0 * row + (size_t)hh * 512 + dd;
                    if (fabs(g[k] - r[k]) > worst) worst = fabs(g[k] - r[k]);
                }
            th_note(t, "%s:   heads %d..%d of that token: max abs error %.3e", what, h, h + 15, worst);
        }
    }
    free(g);
    free(r);
    return e.max_abs;
}

int mla_sample_tokens(th_rng_t *r, int T, int n, int *tokens) {
    if (n >= T) {
        for (int i = 0; i < T; ++i) tokens[i] = i;
        return T;
    }
    int k = 0;
    tokens[k++] = 0;
    tokens[k++] = T - 1;
    while (k < n) {
        const int v = (int)th_rng_range(r, 1, T - 2);
        int dup = 0;
        for (int i = 0; i < k; ++i) dup |= tokens[i] == v;
        if (!dup) tokens[k++] = v;
    }
    for (int i = 1; i < k; ++i) /* insertion sort */
        for (int j = i; j > 0 && tokens[j - 1] > tokens[j]; --j) {
            const int x = tokens[j];
            tokens[j] = tokens[j - 1];
            tokens[j - 1] = x;
        }
    return k;
}

void mla_decode_ref_tokens(th_ctx_t *t, const mla_decode_data_t *d, const int *tokens, int ntok, double *ref,
                           double *lse) {
    const int T = d->c.T, H = d->c.H;
    if (!tokens) ntok = T;
    uint16_t *out = malloc((size_t)H * 512 * 2);
    for (int k = 0; k < ntok; ++k) {
        const int tk = tokens ? tokens[k] : k;
        dsv4_sparse_mla_decode_desc_t one = d->desc;
        one.num_tokens = 1;
        dsv4_sparse_mla_decode_args_t a = mla_decode_host_args(d);
        a.q = d->q + (size_t)tk * H * 512;
        a.main_ids = d->main_ids + (size_t)tk * d->desc.main.width;
        a.main_lens = d->main_lens + tk;
        if (d->desc.has_extra) {
            a.extra_ids = d->extra_ids + (size_t)tk * d->desc.extra.width;
            a.extra_lens = d->extra_lens + tk;
        }
        a.out = out;
        a.ref_out = ref + (size_t)tk * H * 512;
        a.ref_lse = lse ? lse + (size_t)tk * H : NULL;
        TH_OK(t, dsv4_sparse_mla_decode_ref(&one, &a));
    }
    free(out);
}

void mla_prefill_ref_tokens(th_ctx_t *t, const mla_prefill_data_t *d, const int *tokens, int ntok, double *ref) {
    const int T = d->c.T, H = d->c.H;
    if (!tokens) ntok = T;
    uint16_t *out = malloc((size_t)H * 512 * 2);
    for (int k = 0; k < ntok; ++k) {
        const int tk = tokens ? tokens[k] : k;
        dsv4_sparse_mla_prefill_desc_t one = d->desc;
        one.num_tokens = 1;
        dsv4_sparse_mla_prefill_args_t a = mla_prefill_host_args(d);
        a.q = d->q + (size_t)tk * H * 512;
        a.ids = d->ids + (size_t)tk * d->desc.width;
        a.lens = d->lens + tk;
        a.out = out;
        a.ref_out = ref + (size_t)tk * H * 512;
        TH_OK(t, dsv4_sparse_mla_prefill_ref(&one, &a));
    }
    free(out);
}
