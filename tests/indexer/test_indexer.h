/* The indexer family's tests (test_indexer_main.c lists them) and their helpers. */
#ifndef DSV4_TEST_INDEXER_H
#define DSV4_TEST_INDEXER_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/indexer.h"
#include "harness.h"

/* ---- helpers (idx_test_util.c) --------------------------------------------------------- */
/* A random head or key row of 128 bf16 values: a magnitude band drawn from 2^-30 .. 2^40,
 * sometimes an all-zero row, a row whose amax sits at 1.75 * 2^k, or (specials) a NaN or
 * an infinity among the values. */
void it_row(th_rng_t *r, uint16_t *x, int specials);

/* ---- independent models: double arithmetic, rounding to fp32 by round-to-odd, e4m3 by
 *      nearest-value search over the 127 codes ---------------------------------------- */
/* One RoPE pair: y_a, y_b as bf16. */
void it_model_rope(uint16_t a, uint16_t b, float c, float s, uint16_t *ya, uint16_t *yb);
/* The scale exponent for a row's maximum |y| (NaN left out by the caller): 128 for inf. */
int it_model_exp(double amax);
/* e4m3 code of the exact value v: nearest, ties to the even code, beyond 448 -> +-448,
 * NaN -> nan_code. */
uint8_t it_model_e4m3(double v, uint8_t nan_code);
/* dsv4_indexer_q for one row: codes and the head weight. */
void it_model_q_row(const uint16_t *q, int64_t pos, int64_t max_position, const float *cs, uint16_t w_raw, float ss,
                    float hs, uint8_t *codes, float *w);
/* dsv4_indexer_k_store for one stored row: codes and the scale's fp32 bits. */
void it_model_k_row(const uint16_t *k, const uint16_t *gamma, float eps, int64_t rope_row, int64_t max_position,
                    const float *cs, uint8_t *codes, uint32_t *scale_bits);

/* ---- a random k_store problem on host memory (the GPU tests upload it) ---------------- */
typedef struct {
    dsv4_indexer_k_store_desc_t d;
    uint16_t *k, *gamma;
    int64_t *pos, *slot;
    float *cs;
    size_t k_elems, cache_bytes;
} it_k_case_t;
/* T rows at ratio r, P states per page, stride; rows of consecutive positions from a
 * random start, some slots -1 or beyond the cache, distinct slots otherwise. */
void it_k_case(th_rng_t *r, int64_t T, int64_t ratio, int64_t P, int64_t stride, int64_t k_stride, it_k_case_t *c);
void it_k_case_free(it_k_case_t *c);

/* ---- a random q problem ---------------------------------------------------------------- */
typedef struct {
    dsv4_indexer_q_desc_t d;
    uint16_t *q, *w_raw;
    int64_t *pos;
    float *cs;
    size_t q_elems, w_elems;
} it_q_case_t;
void it_q_case(th_rng_t *r, const dsv4_indexer_q_desc_t *shape, it_q_case_t *c);
void it_q_case_free(it_q_case_t *c);

/* ---- a random logits + top-k problem (idx_topk_util.c) ---------------------------------- */
typedef struct {
    int64_t heads, topk, ratio, page_tokens, page_stride, reqs;
    int64_t ctx_min, ctx_max; /* states per request                                   */
    int64_t next_n;           /* decode rows per request: 1 .. next_n (mixed)         */
    int64_t prefill_rows;     /* rows per request at random positions of it           */
    int64_t pad_rows;         /* invalid rows: row_valid 0, request or position bad   */
    int64_t bt_pad, keys_pad; /* block_table_stride - width; max_keys - longest       */
    int64_t mode, cand_count, splits;
    int specials;   /* NaN key codes and a NaN query head                   */
    int bad_page;   /* one request's first page entry out of range          */
    int ties;       /* keys drawn from 4 rows (equal logits), zero-w rows   */
    int full_lists; /* mode 2: even rows list blocks C-1 .. 0 (every block of a row with at
                     * most C), odd rows random lists                      */
} it_topk_shape_t;
typedef struct {
    dsv4_indexer_topk_desc_t d;
    uint8_t *q8, *cache, *valid;
    float *w;
    int64_t *pos;
    int32_t *req, *bt, *cand;
    size_t q8_bytes, cache_bytes, bt_elems, cand_elems;
} it_topk_case_t;
void it_topk_case(th_rng_t *r, const it_topk_shape_t *shape, it_topk_case_t *c);
void it_topk_case_free(it_topk_case_t *c);
dsv4_indexer_topk_args_t it_topk_args(const it_topk_case_t *c, int32_t *topk, int32_t *cand);
dsv4_indexer_logits_desc_t it_logits_desc(const dsv4_indexer_topk_desc_t *d, int64_t out_cols);
/* n_t of row t (0 for invalid rows), from the header's rule. */
int64_t it_model_cols(const it_topk_case_t *c, int64_t t);
/* The logit in double (products and sums exact up to double rounding); *mass = A[t, j]. */
double it_model_logit(const it_topk_case_t *c, int64_t t, int64_t j, double *mass);
/* The selection of a row with logits v[0 .. n) by a full sort (topk[0 .. K)); mode 1 also
 * writes cand[0 .. C), mode 2 reads it. */
void it_model_select(const float *v, int64_t n, int64_t K, int mode, int64_t C, int32_t *cand, int32_t *topk);
/* Row r's selection got[0 .. K) against the fp64 logits as a set with the margin 1e-5 * the
 * row's largest mass (rows with a NaN logit are skipped); returns 1 if checked. */
int it_check_margin(th_ctx_t *t, const it_topk_case_t *c, int64_t r, const int32_t *got);
/* Logits lg[T, stride] (W columns) against the model: within 1e-5 * mass, NaN and inf at
 * the model's places, -inf past each row's columns. */
void it_check_logits(th_ctx_t *t, const char *what, const it_topk_case_t *c, const float *lg, int64_t stride,
                     int64_t W);

/* ---- tests ------------------------------------------------------------------------------ */
void test_idx_q_known_answers(th_ctx_t *t);
void test_idx_q_vs_model(th_ctx_t *t);
void test_idx_q_strided(th_ctx_t *t);
void test_idx_k_known_answers(th_ctx_t *t);
void test_idx_k_vs_model(th_ctx_t *t);
void test_idx_k_pages(th_ctx_t *t);
void test_idx_plans(th_ctx_t *t);
void test_idx_bad_input_q(th_ctx_t *t);
void test_idx_bad_input_k(th_ctx_t *t);
void test_idx_gpu_q(th_ctx_t *t);
void test_idx_gpu_k(th_ctx_t *t);
void test_idx_gpu_bad_input_writes_nothing(th_ctx_t *t);
void test_idx_gpu_graph_capture(th_ctx_t *t);
void test_idx_topk_known_answers(th_ctx_t *t);
void test_idx_topk_select_vs_model(th_ctx_t *t);
void test_idx_logits_vs_model(th_ctx_t *t);
void test_idx_topk_ref_vs_model(th_ctx_t *t);
void test_idx_topk_plans(th_ctx_t *t);
void test_idx_bad_input_topk(th_ctx_t *t);
void test_idx_bad_input_logits(th_ctx_t *t);
void test_idx_gpu_mma_pairs(th_ctx_t *t);
void test_idx_gpu_logits(th_ctx_t *t);
void test_idx_gpu_topk(th_ctx_t *t);
void test_idx_gpu_topk_candidates(th_ctx_t *t);

#endif
