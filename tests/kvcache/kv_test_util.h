/*
 * Helpers of the kvcache tests: cache geometry, row generators for the known-answer cases,
 * slot lists, an independent model of the record (written from the contract with double
 * arithmetic and numerics.h's converters, not with src/kvcache), and comparators whose
 * failure messages say where a byte sits (page, slot, region, dim) so one log is enough
 * to diagnose a GPU failure.
 */
#ifndef DSV4_TEST_KV_TEST_UTIL_H
#define DSV4_TEST_KV_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/kvcache.h"
#include "harness.h"
#include "model_cases.h"

typedef struct {
    int64_t P, stride, num_pages;
} kvt_geom_t;

static inline size_t kvt_cache_bytes(kvt_geom_t g) { return (size_t)(g.num_pages * g.stride); }

/* Descriptors of an insert of T rows into cache g and of the gather of those T rows back
 * (one request whose block table covers every page of g). */
void kvt_roundtrip_descs(kvt_geom_t g, int64_t T, dsv4_kv_insert_desc_t *di, dsv4_kv_gather_desc_t *dg);
/* Row kinds for the quantizer cases (every amax regime a 64-block can be in). */
typedef enum {
    KVT_ROW_LOGMAG,      /* per block a random scale 2^-30..2^40, elements over 12 binades below it */
    KVT_ROW_ZERO,        /* all zeros, some -0.0                                                   */
    KVT_ROW_BELOW_FLOOR, /* every |x| < 1e-4                                                       */
    KVT_ROW_TIES,        /* elements on e4m3 rounding ties after the block scale                    */
    KVT_ROW_NORMAL,      /* gaussian, model-like                                                    */
    KVT_ROW_SPECIAL,     /* NaN and +-inf in NoPE and RoPE dims                                     */
    KVT_ROW_KINDS
} kvt_row_kind_t;
const char *kvt_row_kind_name(kvt_row_kind_t k);
void kvt_fill_row(th_rng_t *r, kvt_row_kind_t kind, uint16_t *row);
/* n rows, stride `stride` elements, kinds cycling through the first `kinds` kinds in a
 * shuffled order; kinds_out[i] (optional) receives each row's kind. */
void kvt_fill_rows(th_rng_t *r, uint16_t *rows, int64_t n, int64_t stride, int kinds, int *kinds_out);

/* n slot ids: mostly distinct valid slots in random pages, with about 1/8 skipped ones
 * (-1, other negatives, and slots >= num_pages * P) when with_skips. */
void kvt_make_slots(th_rng_t *r, kvt_geom_t g, int64_t n, int with_skips, int64_t *slots);

/* ---- independent model of the record -------------------------------------------------- */
/* enc of a block by the definition: smallest e with 448 * 2^e >= max(amax, 1e-4f). */
int kvt_model_enc(const uint16_t *block64);
/* Record of one bf16 row by the contract, into the page image `cache` at `slot`. */
void kvt_model_insert(kvt_geom_t g, uint8_t *cache, int64_t slot, const uint16_t *row);
/* bf16 of a dequantized code, by the definition (double arithmetic). */
uint16_t kvt_model_dequant(uint8_t code, uint8_t enc);

/* ---- comparators ----------------------------------------------------------------------- */
/* Every byte of the cache image; mismatches are reported as page/slot/region/dim. Returns
 * the number of differing bytes. */
size_t kvt_cmp_cache(th_ctx_t *t, const char *what, kvt_geom_t g, const uint8_t *got, const uint8_t *want);
/* bf16 arrays of `rows` rows of `cols` elements; mismatches reported as (row, col). */
size_t kvt_cmp_bf16_exact(th_ctx_t *t, const char *what, const uint16_t *got, const uint16_t *want, int64_t rows,
                          int64_t cols);
/* Distance in bf16 ulps (ordered integers; NaN vs NaN = 0, NaN vs number = huge). */
uint32_t kvt_bf16_ulp_diff(uint16_t a, uint16_t b);

/* After a failed cache comparison of an insert: the token whose record holds the first
 * differing byte, its row kind, its model encs and the bf16 input of that block. */
void kvt_explain_insert(th_ctx_t *t, kvt_geom_t g, const uint8_t *got, const uint8_t *want, const int64_t *slots,
                        int64_t T, const int *kinds, const uint16_t *k, int64_t kst);

/* Fails if the text of dsv4_last_error() lacks any of the given substrings (NULL ends). */
void kvt_expect_message(th_ctx_t *t, const char *call, ...);

/* ---- device helpers (GPU tests) -------------------------------------------------------- */
/* Device buffer with guards, filled from host (n bytes). */
th_buf_t kvt_dev_from(const void *host, size_t n);

#endif
