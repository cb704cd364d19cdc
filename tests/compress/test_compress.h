/* The compress family's tests (test_compress_main.c lists them) and their helpers. */
#ifndef DSV4_TEST_COMPRESS_H
#define DSV4_TEST_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/compress.h"
#include "harness.h"

/* ---- helpers (cmp_test_util.c) ------------------------------------------------------- */
/* Random bf16 bits: mostly finite values of magnitude 2^-8 .. 2^8, sometimes a special
 * (NaN, +-inf, +-0, a subnormal) when `specials`. */
uint16_t ct_bf16(th_rng_t *r, int specials);

/* ---- independent models (double arithmetic, numerics.h's converters for the final
 *      bf16 rounding) ------------------------------------------------------------------ */
/* One inv_rope pair (a, b) at (c, s): the two bf16 results. */
void ct_model_inv_rope_pair(uint16_t a, uint16_t b, float c, float s, uint16_t *ya, uint16_t *yb);
/* One Engram element: bf16 of the e4m3 code times 2^(enc - 127) (0 for enc 0, inf for 255). */
uint16_t ct_model_engram(uint8_t code, uint8_t enc);

/* A random Engram problem on host memory (the GPU tests upload it). */
typedef struct {
    dsv4_engram_lookup_desc_t d;
    uint8_t *values, *scales; /* 16-byte aligned */
    int32_t *ids;
    size_t values_bytes, scales_bytes, ids_elems, out_elems;
} ct_engram_case_t;
void ct_engram_case(th_rng_t *r, const dsv4_engram_lookup_desc_t *shape, ct_engram_case_t *c);
void ct_engram_case_free(ct_engram_case_t *c);
/* out of the case by the contract, element by element through ct_model_engram. */
void ct_engram_model(const ct_engram_case_t *c, uint16_t *out);

/* Engram shapes the CPU and GPU tests share: model-like, strided, transposed ids, several
 * D, an empty shard. */
#define CT_ENGRAM_SHAPES 6
extern const dsv4_engram_lookup_desc_t ct_engram_shapes[CT_ENGRAM_SHAPES];
/* "engram <where> T=.. cols ..": a case's name for failure messages. */
void ct_engram_name(char *buf, size_t n, const char *where, const dsv4_engram_lookup_desc_t *s);

/* bf16 arrays compared bit for bit; the first mismatches reported as (row, col) of rows of
 * `cols`. Returns the count. */
size_t ct_cmp_bf16(th_ctx_t *t, const char *what, const uint16_t *got, const uint16_t *want, size_t n, size_t cols);

/* ---- GPU helpers ---------------------------------------------------------------------- */
/* A device buffer in guard bands holding the n bytes at host (64 bytes when n is 0). */
th_buf_t ct_upload(const void *host, size_t n);
/* The device buffer b still holds the n bytes at host, inside intact guards. */
void ct_expect_unchanged(th_ctx_t *t, const char *what, const th_buf_t *b, const void *host, size_t n);

/* ---- tests ------------------------------------------------------------------------------ */
void test_inv_rope_known_answers(th_ctx_t *t);
void test_inv_rope_vs_model(th_ctx_t *t);
void test_inv_rope_strided(th_ctx_t *t);
void test_engram_known_answers(th_ctx_t *t);
void test_engram_vs_model(th_ctx_t *t);
void test_engram_all_codes_x_enc(th_ctx_t *t);
void test_cmp_plans(th_ctx_t *t);
void test_cmp_bad_input_inv_rope(th_ctx_t *t);
void test_cmp_bad_input_engram(th_ctx_t *t);
void test_cmp_gpu_inv_rope(th_ctx_t *t);
void test_cmp_gpu_engram(th_ctx_t *t);
void test_cmp_gpu_engram_host_mapped(th_ctx_t *t);
void test_cmp_gpu_bad_input_writes_nothing(th_ctx_t *t);
void test_cmp_gpu_graph_capture(th_ctx_t *t);

#endif
