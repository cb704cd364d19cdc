/* Sparse MLA tests: CPU in test_mla_cpu.c and test_mla_bad.c, GPU in test_mla_gpu.c. */
#ifndef DSV4_TEST_MLA_H
#define DSV4_TEST_MLA_H

#include "harness.h"

void test_bad_input_decode(th_ctx_t *t);
void test_bad_input_prefill(th_ctx_t *t);
void test_gpu_bad_input(th_ctx_t *t);

void test_gpu_decode_random(th_ctx_t *t);
void test_gpu_decode_edges(th_ctx_t *t);
void test_gpu_decode_splits(th_ctx_t *t);
void test_gpu_decode_partials(th_ctx_t *t);
void test_gpu_decode_direct_equals_merge(th_ctx_t *t);
void test_gpu_decode_large_t(th_ctx_t *t);
void test_gpu_prefill_random(th_ctx_t *t);
void test_gpu_prefill_unit_scale(th_ctx_t *t);
void test_gpu_prefill_large_t(th_ctx_t *t);
void test_gpu_prefill_out_strides(th_ctx_t *t);
void test_gpu_model_shapes(th_ctx_t *t);
void test_gpu_determinism(th_ctx_t *t);
void test_gpu_nan_inf(th_ctx_t *t);
void test_gpu_batch_invariant(th_ctx_t *t);
void test_gpu_workspace_flags(th_ctx_t *t);

#endif
