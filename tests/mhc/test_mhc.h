/* The mhc tests (one function each), registered in test_mhc_main.c. */
#ifndef DSV4_TEST_MHC_CASES_H
#define DSV4_TEST_MHC_CASES_H

#include "harness.h"

/* CPU */
void test_plan_routing(th_ctx_t *t);
void test_plan_batch_invariant(th_ctx_t *t);
void test_gates_batch_invariant_gpu(th_ctx_t *t);
void test_gates_stale_tags_gpu(th_ctx_t *t);
void test_post_ref_known(th_ctx_t *t);
void test_post_ref_random(th_ctx_t *t);
void test_collapse_ref(th_ctx_t *t);
void test_fn_bcast_ref(th_ctx_t *t);
void test_fn_split_ref(th_ctx_t *t);
void test_gates_ref(th_ctx_t *t);
void test_seam_ref(th_ctx_t *t);
void test_seam_ref_route_gap(th_ctx_t *t);
void test_pre_ref(th_ctx_t *t);
void test_bad_input(th_ctx_t *t);
void test_zero_tokens(th_ctx_t *t);
/* GPU */
void test_post_gpu(th_ctx_t *t);
void test_post_gpu_large(th_ctx_t *t);
void test_collapse_gpu(th_ctx_t *t);
void test_fn_bcast_gpu(th_ctx_t *t);
void test_fn_split_gpu(th_ctx_t *t);
void test_fn_split_calls_gpu(th_ctx_t *t);
void test_gates_gpu(th_ctx_t *t);
void test_pre_gpu(th_ctx_t *t);
void test_seam_gpu(th_ctx_t *t);
void test_seam_v4_gpu(th_ctx_t *t);
void test_seam_routes_gpu(th_ctx_t *t);
void test_seam_gpu_large(th_ctx_t *t);
void test_seam_graph_gpu(th_ctx_t *t);
void test_bad_input_gpu(th_ctx_t *t);

#endif
