/* mhc test utilities: generators, fp64 models, decoded comparators, device buffers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "mhc_test.h"

/* ---- generators ------------------------------------------------------------------------ */
void mt_fill_bf16(th_rng_t *r, uint16_t *dst, size_t n, int lo_exp, int hi_exp, int zero_every) {
    const uint64_t span = (uint64_t)(hi_exp - lo_exp + 1);
    for (size_t i = 0; i < n; i += 2) {
        const uint64_t u = th_rng_u64(r);
        for (size_t j = 0; j < 2 && i + j < n; ++j) {
            const uint32_t v = (uint32_t)(u >> (32 * j));
            const uint16_t sign = (uint16_t)((v >> 31) << 15);
            if (zero_every > 0 && (v >> 16) % (uint32_t)zero_every == 0) {
                dst[i + j] = sign; /* +0 or -0 */
                continue;
            }
            const int e = lo_exp + (int)((v & 0xFFFF) % span);
            dst[i + j] = (uint16_t)(sign | (uint16_t)((e + 127) << 7) | (uint16_t)((v >> 20) & 0x7F));
        }
    }
}

void mt_fill_uniform(th_rng_t *r, float *dst, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; ++i) dst[i] = (float)(lo + (hi - lo) * th_rng_unit(r));
}

static double sigmoid64(double z) { return 1.0 / (1.0 + exp(-z)); }

void mt_fill_post(th_rng_t *r, float *post, int64_t T) {
    for (int64_t i = 0; i < 4 * T; ++i) post[i] = (float)(2.0 * sigmoid64(th_rng_normal(r)));
}
void mt_fill_comb(th_rng_t *r, float *comb, int64_t T) { mt_fill_uniform(r, comb, (size_t)(16 * T), 0.0, 1.0); }
void mt_fill_premix(th_rng_t *r, float *pre, int64_t T) {
    for (int64_t i = 0; i < 4 * T; ++i) pre[i] = (float)(sigmoid64(th_rng_normal(r)) + 1e-6);
}
void mt_fill_fn(th_rng_t *r, float *fn, int64_t K) {
    const double s = 1.0 / sqrt((double)K);
    for (int64_t i = 0; i < 24 * K; ++i) fn[i] = (float)(s * th_rng_normal(r));
}
void mt_fill_scale_base(th_rng_t *r, float scale[3], float base[24]) {
    mt_fill_uniform(r, scale, 3, 0.5, 1.5);
    for (int i = 0; i < 24; ++i) base[i] = (float)(0.5 * th_rng_normal(r));
}
void mt_fill_norm_weight(th_rng_t *r, uint16_t *w, int64_t H) {
    for (int64_t h = 0; h < H; ++h) w[h] = dsv4_f32_to_bf16((float)(0.5 + th_rng_unit(r)));
}

dsv4_mhc_gate_params_t mt_gate_params(int v4_eps) {
    dsv4_mhc_gate_params_t delayed = DSV4_MHC_GATE_PARAMS_V41, immediate = DSV4_MHC_GATE_PARAMS_V4;
    return v4_eps ? immediate : delayed;
}

/* ---- fp64 models ------------------------------------------------------------------------- */
void mt_mix64(const double *X, int64_t K, const float *fn, double numel, double rms_eps, double mix[24],
              double bound[24]) {
    double sq = 0.0;
    for (int64_t k = 0; k < K; ++k) sq += X[k] * X[k];
    const double rms = 1.0 / sqrt(sq / numel + rms_eps);
    for (int m = 0; m < 24; ++m) {
        const float *f = fn + m * K;
        double s = 0.0, a = 0.0;
        for (int64_t k = 0; k < K; ++k) {
            const double v = X[k] * (double)f[k];
            s += v;
            a += fabs(v);
        }
        mix[m] = s * rms;
        bound[m] = a * rms;
    }
}

void mt_gates64(const double mix[24], const float *scale, const float *base, const dsv4_mhc_gate_params_t *g,
                double pre[4], double post[4], double comb[16]) {
    for (int j = 0; j < 4; ++j) {
        pre[j] = sigmoid64(mix[j] * scale[0] + base[j]) + (double)g->pre_eps;
        post[j] = sigmoid64(mix[4 + j] * scale[1] + base[4 + j]) * (double)g->post_mult;
    }
    const double eps = g->sinkhorn_eps;
    double C[16];
    for (int j = 0; j < 4; ++j) {
        double L[4], mx = -INFINITY, s = 0.0;
        for (int k = 0; k < 4; ++k) {
            L[k] = mix[8 + 4 * j + k] * scale[2] + base[8 + 4 * j + k];
            mx = fmax(mx, L[k]);
        }
        for (int k = 0; k < 4; ++k) s += exp(L[k] - mx);
        for (int k = 0; k < 4; ++k) C[4 * j + k] = exp(L[k] - mx) / s + eps;
    }
    for (int it = 0; it < g->sinkhorn_iters; ++it) {
        if (it > 0)
            for (int j = 0; j < 4; ++j) {
                const double d = C[4 * j] + C[4 * j + 1] + C[4 * j + 2] + C[4 * j + 3] + eps;
                for (int k = 0; k < 4; ++k) C[4 * j + k] /= d;
            }
        for (int k = 0; k < 4; ++k) {
            const double d = C[k] + C[4 + k] + C[8 + k] + C[12 + k] + eps;
            for (int j = 0; j < 4; ++j) C[4 * j + k] /= d;
        }
    }
    memcpy(comb, C, sizeof C);
}

void mt_post_f32(const float post[4], const float comb[16], float x, const float r[4], float out[4]) {
    for (int k = 0; k < 4; ++k) {
        float acc = post[k] * x;
        for (int j = 0; j < 4; ++j) acc = fmaf(comb[4 * j + k], r[j], acc);
        out[k] = acc;
    }
}

/* ---- comparisons --------------------------------------------------------------------------- */
static int32_t ordered(uint16_t b) { return (b & 0x8000) ? -(int32_t)(b & 0x7FFF) : (int32_t)(b & 0x7FFF); }
static int is_nan16(uint16_t b) { return (b & 0x7FFF) > 0x7F80; }

size_t mt_cmp_bf16(th_ctx_t *t, const char *what, const uint16_t *got, int64_t got_stride, const uint16_t *want,
                   int64_t want_stride, int64_t n_tokens, const int64_t *ids, int rows, int64_t H, int max_ulp) {
    size_t bad = 0;
    for (int64_t i = 0; i < n_tokens; ++i) {
        const int64_t tok = ids ? ids[i] : i;
        const uint16_t *g = got + tok * got_stride, *w = want + i * want_stride;
        for (int64_t e = 0; e < rows * H; ++e) {
            int ok;
            if (max_ulp == 0) ok = g[e] == w[e];
            else if (is_nan16(g[e]) || is_nan16(w[e])) ok = is_nan16(g[e]) && is_nan16(w[e]);
            else ok = llabs((long long)ordered(g[e]) - ordered(w[e])) <= max_ulp;
            if (ok) continue;
            if (bad < 8)
                th_fail(t, __FILE__, __LINE__,
                        "%s: token %lld stream %lld channel %lld: got 0x%04x (%.9g), want 0x%04x (%.9g)%s", what,
                        (long long)tok, (long long)(e / H), (long long)(e % H), g[e], (double)dsv4_bf16_to_f32(g[e]),
                        w[e], (double)dsv4_bf16_to_f32(w[e]), max_ulp ? " (beyond the ulp bound)" : "");
            ++bad;
        }
    }
    if (bad)
        th_fail(t, __FILE__, __LINE__, "%s: %zu of %lld elements differ (%s)", what, bad,
                (long long)(n_tokens * rows * H), max_ulp ? "ulp bound" : "bit-exact");
    return bad;
}

size_t mt_cmp_f32_exact(th_ctx_t *t, const char *what, const float *got, const float *want, int64_t n_tokens,
                        int width) {
    size_t bad = 0;
    for (int64_t i = 0; i < n_tokens * width; ++i) {
        if (dsv4_f32_bits(got[i]) == dsv4_f32_bits(want[i])) continue;
        if (bad < 8)
            th_fail(t, __FILE__, __LINE__, "%s: token %lld entry %lld: got %.9g (0x%08x), want %.9g (0x%08x)", what,
                    (long long)(i / width), (long long)(i % width), (double)got[i], dsv4_f32_bits(got[i]),
                    (double)want[i], dsv4_f32_bits(want[i]));
        ++bad;
    }
    if (bad) th_fail(t, __FILE__, __LINE__, "%s: %zu values differ", what, bad);
    return bad;
}

static const char *gate_name(int q) { return q < 4 ? "pre" : (q < 8 ? "post" : "comb"); }

double mt_check_gates(th_ctx_t *t, const char *what, int64_t n, const int64_t *ids, const double *X, const double *Xu,
                      int64_t K, double numel, const float *fn, const float *scale, const float *base,
                      const dsv4_mhc_gate_params_t *g, double mix_tol, const float *got_mix, const float *got_post,
                      const float *got_comb, const float *got_pre) {
    double worst_mix = 0.0, worst_own = 0.0, worst_e2e = 0.0, worst_col = 0.0;
    int printed = 0;
    for (int64_t i = 0; i < n; ++i) {
        const long long tok = ids ? (long long)ids[i] : (long long)i;
        double mix[24], bound[24], gm[24], pre[4], post[4], comb[16];
        mt_mix64(X + i * K, K, fn, numel, g->rms_eps, mix, bound);
        for (int m = 0; m < 24; ++m) {
            const double d = fabs((double)got_mix[24 * i + m] - mix[m]), lim = mix_tol * bound[m];
            if (bound[m] > 0 && d / bound[m] > worst_mix) worst_mix = d / bound[m];
            if (!(d <= lim) && printed++ < 8)
                th_fail(t, __FILE__, __LINE__, "%s: token %lld mix[%d] = %.9g, fp64 %.9g: |diff| %.3e > %.1e * %.3e",
                        what, tok, m, (double)got_mix[24 * i + m], mix[m], d, mix_tol, bound[m]);
            gm[m] = got_mix[24 * i + m];
        }
        /* the gates fed the kernel's own mix */
        mt_gates64(gm, scale, base, g, pre, post, comb);
        double ref[24], got[24];
        for (int j = 0; j < 4; ++j) {
            ref[j] = pre[j], got[j] = got_pre[4 * i + j];
            ref[4 + j] = post[j], got[4 + j] = got_post[4 * i + j];
        }
        for (int e = 0; e < 16; ++e) ref[8 + e] = comb[e], got[8 + e] = got_comb[16 * i + e];
        for (int q = 0; q < 24; ++q) {
            const double d = fabs(got[q] - ref[q]);
            if (d > worst_own || d != d) worst_own = d;
            if (!(d <= MT_TOL_GATES) && printed++ < 8)
                th_fail(t, __FILE__, __LINE__, "%s: token %lld %s[%d] = %.9g, fp64 from its own mix %.9g (|diff| %.3e)",
                        what, tok, gate_name(q), q < 8 ? q % 4 : q - 8, got[q], ref[q], d);
        }
        /* end to end against the unfused pipeline in fp64 */
        if (Xu) mt_mix64(Xu + i * K, K, fn, numel, g->rms_eps, mix, bound);
        mt_gates64(mix, scale, base, g, pre, post, comb);
        for (int j = 0; j < 4; ++j) ref[j] = pre[j], ref[4 + j] = post[j];
        for (int e = 0; e < 16; ++e) ref[8 + e] = comb[e];
        for (int q = 0; q < 24; ++q) {
            const double d = fabs(got[q] - ref[q]);
            if (d > worst_e2e || d != d) worst_e2e = d;
        }
        for (int k = 0; k < 4; ++k) {
            double s = 0.0;
            for (int j = 0; j < 4; ++j) s += got_comb[16 * i + 4 * j + k];
            const double d = fabs(s - 1.0);
            if (d > worst_col || d != d) worst_col = d;
            if (!(d <= MT_TOL_COMB_COLSUM) && printed++ < 8)
                th_fail(t, __FILE__, __LINE__, "%s: token %lld comb column %d sums to %.9g", what, tok, k, s);
        }
    }
    th_note(t,
            "%s: %lld tokens: mix max |err|/bound %.2e (tol %.0e); gates vs fp64 of own mix %.2e (tol %.0e); "
            "comb column sums within %.2e of 1; gates vs fp64 unfused pipeline max |diff| %.3e (bound %.1e)",
            what, (long long)n, worst_mix, mix_tol, worst_own, MT_TOL_GATES, worst_col, worst_e2e, MT_TOL_UNFUSED);
    TH_CHECK(t, worst_e2e <= MT_TOL_UNFUSED, "%s: gates differ from the fp64 unfused pipeline by %.3e > %.1e", what,
             worst_e2e, MT_TOL_UNFUSED);
    return worst_e2e;
}

int64_t mt_sample_tokens(th_rng_t *r, int64_t T, int64_t *ids) {
    if (T <= 64) {
        for (int64_t i = 0; i < T; ++i) ids[i] = i;
        return T;
    }
    int64_t n = 0;
    ids[n++] = 0;
    ids[n++] = T - 1;
    while (n < 48) {
        const int64_t v = th_rng_range(r, 1, T - 2);
        int dup = 0;
        for (int64_t i = 0; i < n; ++i) dup |= ids[i] == v;
        if (!dup) ids[n++] = v;
    }
    for (int64_t i = 1; i < n; ++i) /* insertion sort */
        for (int64_t j = i; j > 0 && ids[j - 1] > ids[j]; --j) {
            const int64_t tmp = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = tmp;
        }
    return n;
}

void mt_gather_rows(const uint16_t *src, int64_t stride, int64_t row, const int64_t *ids, int64_t n, uint16_t *dst) {
    for (int64_t i = 0; i < n; ++i) memcpy(dst + i * row, src + ids[i] * stride, (size_t)row * 2);
}

void mt_gather_f32(const float *src, int width, const int64_t *ids, int64_t n, float *dst) {
    for (int64_t i = 0; i < n; ++i) memcpy(dst + i * width, src + ids[i] * width, (size_t)width * sizeof(float));
}

/* ---- one seam's inputs ------------------------------------------------------------------ */
void mt_seam_in_make(th_rng_t *r, mt_seam_in_t *p, int64_t T, int64_t H, int strided, int premix, int norm,
                     int zero_token) {
    memset(p, 0, sizeof *p);
    p->T = T;
    p->H = H;
    p->xs = H + (strided ? 64 : 0);
    p->rs = 4 * H + (strided ? 128 : 0);
    p->ros = 4 * H + (strided ? 8 : 0);
    p->lis = H + (strided ? 16 : 0);
    p->auxs = H + (strided ? 24 : 0);
    const int64_t TT = T > 0 ? T : 1;
    p->x = malloc((size_t)(TT * p->xs) * 2);
    p->R = malloc((size_t)(TT * p->rs) * 2);
    p->post = malloc((size_t)(4 * TT) * sizeof(float));
    p->comb = malloc((size_t)(16 * TT) * sizeof(float));
    p->fn = malloc((size_t)(24 * 4 * H) * sizeof(float));
    mt_fill_bf16(r, p->x, (size_t)(TT * p->xs), -6, 3, 64);
    mt_fill_bf16(r, p->R, (size_t)(TT * p->rs), -6, 3, 64);
    mt_fill_post(r, p->post, TT);
    mt_fill_comb(r, p->comb, TT);
    mt_fill_fn(r, p->fn, 4 * H);
    mt_fill_scale_base(r, p->scale, p->base);
    if (premix) {
        p->premix = malloc((size_t)(4 * TT) * sizeof(float));
        mt_fill_premix(r, p->premix, TT);
    }
    if (norm) {
        p->w = malloc((size_t)H * 2);
        mt_fill_norm_weight(r, p->w, H);
    }
    if (zero_token && T > 0) {
        memset(p->x, 0, (size_t)H * 2);
        memset(p->R, 0, (size_t)(4 * H) * 2);
    }
}

float *mt_fn_bcast_of(th_ctx_t *t, const mt_seam_in_t *p, int64_t H) {
    float *fnb = malloc((size_t)(24 * H) * sizeof(float));
    dsv4_mhc_fn_bcast_desc_t fd = {H};
    dsv4_mhc_fn_bcast_args_t fa = {p->fn, fnb};
    TH_OK(t, dsv4_mhc_fn_bcast_ref(&fd, &fa));
    return fnb;
}

void mt_seam_in_free(mt_seam_in_t *p) {
    free(p->x);
    free(p->R);
    free(p->post);
    free(p->comb);
    free(p->fn);
    free(p->premix);
    free(p->w);
    memset(p, 0, sizeof *p);
}

void mt_seam_X(const mt_seam_in_t *p, const int64_t *ids, int64_t n, int unrounded, double *X, double *Xu) {
    const int64_t H = p->H;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t t = ids ? ids[i] : i;
        const uint16_t *x = p->x + t * p->xs, *R = p->R + t * p->rs;
        for (int64_t h = 0; h < H; ++h) {
            float r[4], o[4];
            for (int s = 0; s < 4; ++s) r[s] = dsv4_bf16_to_f32(R[s * H + h]);
            mt_post_f32(p->post + 4 * t, p->comb + 16 * t, dsv4_bf16_to_f32(x[h]), r, o);
            for (int s = 0; s < 4; ++s) {
                const double rounded = dsv4_round_bf16(o[s]);
                X[i * 4 * H + s * H + h] = unrounded ? (double)o[s] : rounded;
                if (Xu) Xu[i * 4 * H + s * H + h] = rounded;
            }
        }
    }
}

/* ---- device helpers ------------------------------------------------------------------------ */
th_buf_t mt_dev(const void *host, size_t bytes) {
    th_buf_t b = th_buf_device(bytes ? bytes : 16);
    if (host && bytes) th_buf_upload(&b, host);
    else th_buf_poison(&b, 0xFF);
    return b;
}

int mt_dev_unchanged(th_ctx_t *t, const char *what, const th_buf_t *b, const void *host) {
    void *copy = malloc(b->bytes);
    th_buf_download(b, copy);
    const int same = memcmp(copy, host, b->bytes) == 0;
    if (!same) th_fail(t, __FILE__, __LINE__, "input %s was modified by the kernel", what);
    free(copy);
    th_buf_guards_ok(t, b, what);
    return same;
}

void *mt_download(th_ctx_t *t, const th_buf_t *b, const char *what) {
    void *copy = malloc(b->bytes);
    th_buf_download(b, copy);
    th_buf_guards_ok(t, b, what);
    return copy;
}
