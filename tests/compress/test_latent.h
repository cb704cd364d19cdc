/* dsv4_compress tests (test_compress_main.c lists them): a random-case generator and the
 * independent fp64 model the CPU and GPU tests share. */
#ifndef DSV4_TEST_LATENT_H
#define DSV4_TEST_LATENT_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/compress.h"
#include "harness.h"

/* A compress problem on host memory (the GPU tests upload it). Latent starts as poison. */
typedef struct {
    dsv4_compress_desc_t d;
    float *kv, *ring; /* ring: the contents before the call (ratio 2) */
    int64_t *pos, *slot;
    int32_t *qsl;
    uint16_t *gamma;
    size_t kv_elems, ring_elems, qsl_elems;
} lt_case_t;

#define LT_POISON 0xA7A7u /* bf16 bits of every latent element before a call */

/* Shape of a random case: T rows, requests R, ring_cap, strides (0 = dense). */
typedef struct {
    int64_t ratio, num_tokens, num_reqs, ring_cap, kv_stride, ring_stride;
} lt_shape_t;

/* Ratio 1: rows with random slots (some -1). Ratio 2: R requests of random lengths (0 ..
 * 2 cap + 3) at random start positions (odd or even), each in its own ring block or in
 * none (ring_slot -1), a few -1 rows inside requests, padding rows after the last
 * request; scores in [-8, 8], some pairs equal. */
void lt_case(th_rng_t *r, const lt_shape_t *s, lt_case_t *c);
void lt_case_free(lt_case_t *c);

/* The model's answer: for each row whether it gets a latent (has[t]), the fp64 latent
 * ref and its tolerance bound per element, and the ring after the call (a copy, bit
 * exact). Arrays of num_tokens rows; ring_after of ring_elems floats. */
typedef struct {
    uint8_t *has;
    double *ref, *bound;
    float *ring_after;
} lt_model_t;
void lt_model(const lt_case_t *c, lt_model_t *m);
void lt_model_free(lt_model_t *m);

/* latent (host) against the model: rows without a latent keep LT_POISON bit for bit, the
 * others within the bound (NaN where ref is NaN); ring (NULL at ratio 1) bit for bit.
 * Returns the number of mismatches. */
size_t lt_check(th_ctx_t *t, const char *what, const lt_case_t *c, const lt_model_t *m, const uint16_t *latent,
                const float *ring);
/* The args of c on host memory: latent an output buffer, ring a writable copy. */
dsv4_compress_args_t lt_args(const lt_case_t *c, float *ring, uint16_t *latent);
void lt_name(char *buf, size_t n, const char *where, const lt_shape_t *s);

void test_compress_known_answers(th_ctx_t *t);
void test_compress_vs_model(th_ctx_t *t);
void test_compress_ring(th_ctx_t *t);
void test_compress_bad_input(th_ctx_t *t);
void test_compress_plan(th_ctx_t *t);
void test_cmp_gpu_compress(th_ctx_t *t);
void test_cmp_gpu_compress_bad_input(th_ctx_t *t);
void test_cmp_gpu_compress_graph(th_ctx_t *t);

#endif
