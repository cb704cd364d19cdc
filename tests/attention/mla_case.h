/*
 * Sparse MLA test cases: random fp8_ds_mla caches, bf16 workspaces, index lists with
 * padding, out-of-range ids, duplicates and NaN lanes; the comparison against the fp64
 * reference with the error's worst position decoded into (token, head, dim).
 */
#ifndef DSV4_TEST_MLA_CASE_H
#define DSV4_TEST_MLA_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/attention.h"
#include "harness.h"
#include "model_cases.h"

/* Dense q and out ([T, H, 512] rows): strides have no default. */
#define MLA_DENSE_QO(d)                                                                                                \
    ((d)->q_stride_token = (d)->num_heads * 512, (d)->q_stride_head = 512,                                             \
     (d)->out_stride_token = (d)->num_heads * 512, (d)->out_stride_head = 512)

#ifdef __cplusplus
extern "C" {
#endif

/* How the lens and ids of a list are drawn. MLA_LENS_CHUNK (prefill only): a chunk of
 * 4 requests as the model builds it and the benchmark times it (mla_make_chunk_list). */
enum { MLA_LENS_RANDOM = 0, MLA_LENS_FULL, MLA_LENS_EMPTY, MLA_LENS_INVALID_ONLY, MLA_LENS_CHUNK };
/* Sink: none, finite per head, -inf everywhere, a mix of finite and -inf. */
enum { MLA_SINK_NONE = 0, MLA_SINK_FINITE, MLA_SINK_NEG_INF, MLA_SINK_MIXED };

typedef struct {
    int T, H;
    int main_width, main_P, main_pages;    /* main (SWA) list and cache                */
    int extra_width, extra_P, extra_pages; /* extra_width 0: no compressed list         */
    int lens_mode, sink_mode;
    double q_scale;     /* q ~ N(0, q_scale^2): 1 typical, 40 for huge/tiny scores       */
    int dups;           /* 1: repeat some ids inside a list                              */
    int nan_lanes;      /* 1: some records carry NaN codes / NaN RoPE values             */
    int64_t stride_pad; /* extra bytes per page beyond P*584 (multiple of 16)             */
} mla_decode_case_t;

/* Host data of a decode case (everything the ref needs, plus copies to upload). */
typedef struct {
    mla_decode_case_t c;
    dsv4_sparse_mla_decode_desc_t desc;
    uint8_t *main_cache, *extra_cache;
    size_t main_bytes, extra_bytes;
    int32_t *main_ids, *main_lens, *extra_ids, *extra_lens;
    uint16_t *q;
    float *sink;
    double max_abs_k; /* max |K| over every slot of both caches (NaN lanes read as 0) */
} mla_decode_data_t;

/* A case over the model's caches and lists (model_cases.h): MC_WINDOW ids into SWA pages of
 * MC_SWA_PAGE_TOKENS slots and MC_TOPK ids into compressed pages of MC_V4_PAGE_TOKENS; q at
 * scale 1, no NaN lanes, no page padding. */
mla_decode_case_t mla_decode_model_case(int T, int H, int main_pages, int extra_pages, int lens_mode, int sink_mode,
                                        int dups);
void mla_decode_make(th_rng_t *r, const mla_decode_case_t *c, mla_decode_data_t *d);
void mla_decode_free(mla_decode_data_t *d);
/* Host args pointing into d (out / ref pointers left NULL). */
dsv4_sparse_mla_decode_args_t mla_decode_host_args(const mla_decode_data_t *d);
/* The K row of slot `slot` of a cache as the reference reads it (0 for NaN lanes). */
void mla_decode_row(const uint8_t *cache, int64_t P, int64_t stride, int64_t slot, double *row);
const char *mla_decode_case_str(const mla_decode_case_t *c, char *buf, size_t n);

typedef struct {
    int T, H, width, kv_rows;
    int lens_mode, sink_mode;
    double q_scale, kv_scale;
    int dups;
    int64_t kv_stride; /* 0: 512 */
} mla_prefill_case_t;

typedef struct {
    mla_prefill_case_t c;
    dsv4_sparse_mla_prefill_desc_t desc;
    uint16_t *q, *kv;
    int32_t *ids, *lens;
    float *sink;
    double max_abs_k;
} mla_prefill_data_t;

void mla_prefill_make(th_rng_t *r, const mla_prefill_case_t *c, mla_prefill_data_t *d);
void mla_prefill_free(mla_prefill_data_t *d);
dsv4_sparse_mla_prefill_args_t mla_prefill_host_args(const mla_prefill_data_t *d);
const char *mla_prefill_case_str(const mla_prefill_case_t *c, char *buf, size_t n);

/* NaN and Inf inputs: q[t0, h0, 7] = NaN, and +inf at dim 448 of the first valid row that
 * token t1 lists (decode: its main-cache record's RoPE value; prefill: its kv row). Returns
 * that row's id, or -1 when t1 lists none. max_abs_k keeps its finite value. */
int mla_decode_poison(mla_decode_data_t *d, int t0, int h0, int t1);
int mla_prefill_poison(mla_prefill_data_t *d, int t0, int h0, int t1);
/* 1 when token t lists row `id` among its valid entries. */
int mla_lists_id(const int32_t *ids, const int32_t *lens, int width, int t, int64_t valid, int id);

/* Random ids for a [T, width] list over `valid` rows/slots: -1 padding past lens,
 * sprinkled -1, out-of-range ids (>= valid, or negative) and, with dups, repeats. */
void mla_make_list(th_rng_t *r, int T, int width, int64_t valid, int lens_mode, int dups, int32_t *ids, int32_t *lens);
void mla_make_sink(th_rng_t *r, int H, int mode, float *sink);
/* Full lists of a 4-request prefill chunk over kv_rows rows (4 slabs): token t of request
 * b lists width - 128 distinct random compressed rows of slab b, then the 128 window rows
 * ending at its position, which neighbouring tokens share. */
void mla_make_chunk_list(th_rng_t *r, int T, int width, int64_t kv_rows, int32_t *ids, int32_t *lens);

/*
 * Compare bf16 outputs [T, H, 512] (token stride H*512) with the fp64 reference on the
 * `ntok` tokens listed (tokens NULL: all T): NaN/inf positions, max abs <=
 * DSV4_MLA_TOL_MAX_ABS * max|K|, relative L2 <= DSV4_MLA_TOL_REL_L2 (the accuracy
 * contract of include/dsv4/attention.h). On failure the worst element is
 * printed as (token, head, dim) with both values. Returns the max abs error.
 */
double mla_check_out(th_ctx_t *t, const char *what, const uint16_t *got, const double *ref, int T, int H,
                     const int *tokens, int ntok, double max_abs_k);

/* Up to n distinct tokens of [0, T): the first, the last and random ones, sorted. */
int mla_sample_tokens(th_rng_t *r, int T, int n, int *tokens);

/* fp64 references of the listed tokens (NULL: all) into ref [T, H, 512] (and lse). */
void mla_decode_ref_tokens(th_ctx_t *t, const mla_decode_data_t *d, const int *tokens, int ntok, double *ref,
                           double *lse);
void mla_prefill_ref_tokens(th_ctx_t *t, const mla_prefill_data_t *d, const int *tokens, int ntok, double *ref);

/* ---- device side (mla_gpu_util.c) ---- */
typedef struct {
    th_buf_t b[9]; /* q, out, main_cache, main_ids, main_lens, extra_cache, extra_ids, extra_lens, sink */
    dsv4_sparse_mla_decode_args_t args;
} mla_decode_dev_t;
typedef struct {
    th_buf_t b[6]; /* q, out, kv, ids, lens, sink */
    dsv4_sparse_mla_prefill_args_t args;
} mla_prefill_dev_t;

void mla_decode_upload(const mla_decode_data_t *d, mla_decode_dev_t *g);
void mla_prefill_upload(const mla_prefill_data_t *d, mla_prefill_dev_t *g);
/* mla_prefill_make then mla_prefill_upload. */
void mla_prefill_make_upload(th_rng_t *r, const mla_prefill_case_t *c, mla_prefill_data_t *d, mla_prefill_dev_t *g);
/* Run with a poisoned output (and workspace, kept in *ws_host when non-NULL, sized
 * *ws_bytes), check the guard bands and that the inputs are unchanged, download out.
 * Returns 0 if the call failed (already reported). */
int mla_decode_gpu(th_ctx_t *t, const mla_decode_data_t *d, mla_decode_dev_t *g,
                   const dsv4_sparse_mla_decode_desc_t *desc, uint16_t *out, float **ws_host, size_t *ws_bytes);
int mla_prefill_gpu(th_ctx_t *t, const mla_prefill_data_t *d, mla_prefill_dev_t *g,
                    const dsv4_sparse_mla_prefill_desc_t *desc, uint16_t *out);
void mla_decode_dev_free(mla_decode_dev_t *g);
void mla_prefill_dev_free(mla_prefill_dev_t *g);

#ifdef __cplusplus
}
#endif

#endif
