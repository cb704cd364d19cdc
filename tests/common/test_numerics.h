/* Tests of include/dsv4/numerics.h: CPU in test_numerics.c, GPU in test_numerics_gpu.cu. */
#ifndef DSV4_TEST_NUMERICS_H
#define DSV4_TEST_NUMERICS_H

#include "harness.h"

#ifdef __cplusplus
extern "C" {
#endif

void test_exhaustive_f32_sweep(th_ctx_t *t);
void test_e4m3_known_answers(th_ctx_t *t);
void test_e4m3_decode_all(th_ctx_t *t);
void test_ue8m0_choice(th_ctx_t *t);
void test_ue8m0_decode_all(th_ctx_t *t);
void test_dequant_all_pairs(th_ctx_t *t);
void test_block_known_answers(th_ctx_t *t);
void test_bf16_known_answers(th_ctx_t *t);

void test_gpu_f32_sweep_vs_hardware(th_ctx_t *t);
void test_gpu_ue8m0_and_decode(th_ctx_t *t);

#ifdef __cplusplus
}
#endif

#endif
