/*
 * Shared pieces of the mhc tests: the tolerance table, input generators, the fp64 models
 * of the projection and the gates (the "truth" the tolerances are measured against),
 * comparators whose failure lines decode indices into token / stream / channel, and a
 * host "problem" holding one call's inputs with the means to cut out a sub-batch of
 * sampled tokens.
 */
#ifndef DSV4_TEST_MHC_H
#define DSV4_TEST_MHC_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/dsv4.h"
#include "harness.h"
#include "model_cases.h"

/* ---- tolerances ----------------------------------------------------------------------------- */
/* Every bound an mhc test applies in more than one place, with its reason. Whatever is not
 * here is compared bit for bit: R_new, the un-normed collapse, aux, the broadcast copies,
 * fn_bcast, fn_split, outputs with and without fn_split, graph replays. */
/* mix vs fp64, relative to rms * sum_k |X_k fn_k|: both routes accumulate in fp32 (FMA
 * chains; the split-bf16 fn keeps ~2^-18 per term), and the scale by the absolute terms
 * keeps cancellation from failing a correct sum. */
#define MT_TOL_MIX 1e-5
/* pre, post and comb vs fp64 gates fed the kernel's own mix: fp32 sigmoid, expf (not
 * bit-exact with the C library's) and 40 true-division Sinkhorn passes agree to ~1e-6; the
 * kernel's own mix keeps the projection's error out of this bound. */
#define MT_TOL_GATES 1e-5
/* |column sum of comb - 1|: Sinkhorn ends on a column normalisation, so only its fp32
 * rounding and the eps remain. */
#define MT_TOL_COMB_COLSUM 1e-5
/* gates vs fp64 gates of the unfused pipeline (post, store bf16, project): the difference
 * reported for the model's reference fused kernels, which project unrounded values; this
 * library stays near 1e-7 (printed). */
#define MT_TOL_UNFUSED 1.9e-3
/* sqrsum on the GPU vs the CPU reference (a double sum), relative: a tree of <= 4H =
 * 65,536 positive fp32 terms errs ~log2(n) * 2^-24, about 1e-6. */
#define MT_TOL_SQRSUM 1e-5
/* sqrsum of the CPU reference vs fp64, relative: a double sum rounded once to fp32. */
#define MT_TOL_SQRSUM_REF 1e-6
/* RMS-normed layer input, GPU vs the CPU reference, in bf16 ulps: the sum of squares is a
 * tree on the GPU and a double sum on the CPU, which moves rn by a few fp32 ulps and can
 * flip one bf16 rounding. */
#define MT_ULP_NORM 1
/* the reference's normed collapse vs an fp64 model, in bf16 ulps: the model rounds its own
 * yb from an fp64 collapse, which can sit 1 ulp from the reference's fp32-chain yb, and
 * the norm adds MT_ULP_NORM. */
#define MT_ULP_NORM_FP64 2

/* ---- generators ------------------------------------------------------------------------ */
/* bf16 values +-m * 2^e, e uniform in [lo_exp, hi_exp], 7 random mantissa bits; about
 * one in `zero_every` is an exact +0 or -0 (0: none). Integer-only, fast for big tensors. */
void mt_fill_bf16(th_rng_t *r, uint16_t *dst, size_t n, int lo_exp, int hi_exp, int zero_every);
void mt_fill_uniform(th_rng_t *r, float *dst, size_t n, double lo, double hi);
void mt_fill_post(th_rng_t *r, float *post, int64_t T);  /* 2 * sigmoid(N(0, 1))        */
void mt_fill_comb(th_rng_t *r, float *comb, int64_t T);  /* uniform [0, 1)              */
void mt_fill_premix(th_rng_t *r, float *pre, int64_t T); /* sigmoid(N(0, 1)) + 1e-6     */
void mt_fill_fn(th_rng_t *r, float *fn, int64_t K);      /* [24, K], N(0, 1/K)          */
void mt_fill_scale_base(th_rng_t *r, float scale[3], float base[24]);
void mt_fill_norm_weight(th_rng_t *r, uint16_t *w, int64_t H); /* bf16 of U(0.5, 1.5)    */
dsv4_mhc_gate_params_t mt_gate_params(int v4_eps);

/* ---- fp64 models --------------------------------------------------------------------------- */
/* One token: X [K] (the values the projection reads), fn [24, K]. mix = rms * X.fn with
 * rms = 1/sqrt(sum X^2 / numel + eps); bound[m] = rms * sum |X fn[m]|. */
void mt_mix64(const double *X, int64_t K, const float *fn, double numel, double rms_eps, double mix[24],
              double bound[24]);
/* Gates and Sinkhorn in fp64 from a mix vector. */
void mt_gates64(const double mix[24], const float *scale, const float *base, const dsv4_mhc_gate_params_t *g,
                double pre[4], double post[4], double comb[16]);
/* Post-apply of one channel in the contract's fp32 order (unrounded): what the small-T
 * route projects. */
void mt_post_f32(const float post[4], const float comb[16], float x, const float r[4], float out[4]);

/* ---- comparisons --------------------------------------------------------------------------- */
/* bf16 rows: token i of `want` (stride want_stride) against token ids[i] (or i) of `got`
 * (stride got_stride), `rows` rows of H per token (4 for a residual, 1 otherwise).
 * max_ulp = 0: bit-exact; otherwise |ordered-bits difference| <= max_ulp and NaN
 * positions equal. Prints up to 8 mismatches as (token, stream, channel). Returns the
 * number of mismatching elements. */
size_t mt_cmp_bf16(th_ctx_t *t, const char *what, const uint16_t *got, int64_t got_stride, const uint16_t *want,
                   int64_t want_stride, int64_t n_tokens, const int64_t *ids, int rows, int64_t H, int max_ulp);
/* Same for fp32 tensors [T, width] (bit-exact). */
size_t mt_cmp_f32_exact(th_ctx_t *t, const char *what, const float *got, const float *want, int64_t n_tokens,
                        int width);

/* Everything the gates contract checks for n sampled tokens (ids: their token numbers,
 * for the messages; NULL: 0..n-1). X [n][K] holds what the
 * route projected; Xu [n][K] what the unfused pipeline (post, store bf16, project) would
 * (NULL: the same). got_* are the kernel's outputs at the sampled tokens ([n][..]).
 * Checks: mix within mix_tol * bound; pre/post/comb within MT_TOL_GATES of fp64 gates fed
 * the kernel's own mix; comb columns sum to 1 within MT_TOL_COMB_COLSUM; the end-to-end
 * difference against fp64 gates of the unfused pipeline within MT_TOL_UNFUSED (printed).
 * Returns that difference. */
double mt_check_gates(th_ctx_t *t, const char *what, int64_t n, const int64_t *ids, const double *X, const double *Xu,
                      int64_t K, double numel, const float *fn, const float *scale, const float *base,
                      const dsv4_mhc_gate_params_t *g, double mix_tol, const float *got_mix, const float *got_post,
                      const float *got_comb, const float *got_pre);

/* Token ids to check: all when T <= 64, else 0, T-1 and 46 distinct random ones (sorted). */
int64_t mt_sample_tokens(th_rng_t *r, int64_t T, int64_t *ids /* >= 64 */);

/* Rows of tokens ids[0..n) copied densely (row elements each, stride `stride`). */
void mt_gather_rows(const uint16_t *src, int64_t stride, int64_t row, const int64_t *ids, int64_t n, uint16_t *dst);
void mt_gather_f32(const float *src, int width, const int64_t *ids, int64_t n, float *dst);

/* ---- one seam's inputs (also used for pre / gates / post / collapse) ------------------------- */
typedef struct {
    int64_t T, H;
    int64_t xs, rs, ros, lis, auxs;   /* token strides (dense, or padded when strided) */
    uint16_t *x, *R, *w;              /* w NULL without a norm weight                 */
    float *post, *comb, *fn, *premix; /* premix NULL = stream 0                     */
    float scale[3], base[24];
} mt_seam_in_t;
/* Random inputs; strided pads every token stride; zero_token zeroes token 0's x and R. */
void mt_seam_in_make(th_rng_t *r, mt_seam_in_t *p, int64_t T, int64_t H, int strided, int premix, int norm,
                     int zero_token);
void mt_seam_in_free(mt_seam_in_t *p);
/* fn_bcast [24, H] of p->fn by the CPU reference (malloc'd: free it), for the first-layer
 * (broadcast) projection. */
float *mt_fn_bcast_of(th_ctx_t *t, const mt_seam_in_t *p, int64_t H);
/* The projection inputs of tokens ids[0..n) of a seam: X (what a route with `unrounded`
 * projects: the fp32 post-apply, else its bf16 rounding) and Xu (the bf16 rounding),
 * [n][4H] each, stream-major. */
void mt_seam_X(const mt_seam_in_t *p, const int64_t *ids, int64_t n, int unrounded, double *X, double *Xu);

/* ---- device helpers ------------------------------------------------------------------------ */
/* A device buffer with guard bands holding a copy of `host` (or poisoned with 0xFF when
 * host is NULL: every bf16 and fp32 reads as NaN). */
th_buf_t mt_dev(const void *host, size_t bytes);
/* 1 if the device buffer still equals `host` byte for byte (inputs must not change). */
int mt_dev_unchanged(th_ctx_t *t, const char *what, const th_buf_t *b, const void *host);
void *mt_download(th_ctx_t *t, const th_buf_t *b, const char *what); /* malloc'd copy, guards checked */

#endif
