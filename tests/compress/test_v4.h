/* dsv4_compress_v4 tests (test_compress_main.c lists them): a random-case generator, the
 * independent model the CPU tests hold the reference to, and the GPU tests' helpers. */
#ifndef DSV4_TEST_V4_H
#define DSV4_TEST_V4_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/compress.h"
#include "harness.h"

#define V4T_POISON 0xA7 /* every cache byte before a call */

/* A compress_v4 problem on host memory (the GPU tests upload it): the state and the
 * cache as they are before the call. */
typedef struct {
    dsv4_compress_v4_desc_t d;
    float *kv, *ape, *state, *cos_sin;
    int64_t *pos, *state_slot, *slot;
    int32_t *req, *block_table;
    uint16_t *gamma;
    uint8_t *cache;
    size_t kv_elems, state_elems, bt_elems, cs_elems, cache_bytes;
} v4t_case_t;

/* Shape of a random case: ratio, requests, rows per state block, extra elements on each
 * stride (0 = dense), slots per cache page, head_dim (0: 512, records; 128: indexer states). */
typedef struct {
    int64_t ratio, num_reqs, block_rows, kv_pad, row_pad, block_pad, bt_pad, page_tokens, head_dim;
} v4t_shape_t;

/* R requests of random lengths at random start positions (windows reaching below
 * position 0 included), each position's state row in its own block of the request's
 * block table (a few table entries invalid), a few rows not saved, padding rows after
 * the last request (one at position -1 with a slot), distinct cache slots on the
 * closing rows (a few -1 or past the cache), a rotary table that some closing positions
 * pass. */
void v4t_case(th_rng_t *r, const v4t_shape_t *s, v4t_case_t *c);
void v4t_case_free(v4t_case_t *c);
dsv4_compress_v4_args_t v4t_args(const v4t_case_t *c, float *state, uint8_t *cache);
void v4t_name(char *buf, size_t n, const char *where, const v4t_shape_t *s);

/* The shapes the CPU and GPU tests share. */
#define V4T_SHAPES 9
extern const v4t_shape_t v4t_shapes[V4T_SHAPES];

/* The model's state after step 1 (copies and fp32 adds: exact). */
void v4t_model_state(const v4t_case_t *c, float *state);

/* Reference outputs (state, cache after dsv4_compress_v4_ref) against the model: the state
 * bit for bit; per closing row with a slot, the pooled values of the reference's pooling
 * on the model's window rows within the contract's bound, the record's RoPE dims within
 * 1 bf16 ulp plus the propagated bound and its NoPE dims within the quantization step (at
 * N = 128 every dim of the indexer state within the quantization step); every other
 * cache byte still poison. Returns the number of mismatches. */
size_t v4t_check(th_ctx_t *t, const char *what, const v4t_case_t *c, const float *state, const uint8_t *cache);

void test_compress_v4_exp(th_ctx_t *t);
void test_compress_v4_known_answers(th_ctx_t *t);
void test_compress_v4_vs_model(th_ctx_t *t);
void test_compress_v4_bad_input(th_ctx_t *t);
void test_cmp_gpu_compress_v4(th_ctx_t *t);
void test_cmp_gpu_compress_v4_graph(th_ctx_t *t);
void test_cmp_gpu_compress_v4_bad_input(th_ctx_t *t);
void test_cmp_gpu_compress_v4_duplicate_slots(th_ctx_t *t);

#endif
