/* Shared pieces of the planner tests. */
#ifndef DSV4_TEST_PLAN_H
#define DSV4_TEST_PLAN_H

#include "dsv4/dsv4.h"
#include "harness.h"

#define GIB (INT64_C(1) << 30)
#define MODEL_LEN 1048576

/* V4.1-Flash on 64 GiB GPUs at max_model_len 1M with DSpark K = 5 and the given TP/PP. */
dsv4_plan_desc_t plan_desc_64g(int tp, int pp);
/* dsv4_plan that fails the test on a non-success status; returns the status. */
dsv4_status_t plan_run(th_ctx_t *t, const dsv4_plan_desc_t *d, dsv4_plan_result_t *r);
/* |got - want| <= tol, with a message naming what. */
void plan_near(th_ctx_t *t, const char *what, double got, double want, double tol);

void test_plan_worked_example(th_ctx_t *t);
void test_plan_pages(th_ctx_t *t);
void test_plan_weights(th_ctx_t *t);
void test_plan_requests(th_ctx_t *t);
void test_plan_monotone(th_ctx_t *t);
void test_plan_splits(th_ctx_t *t);
void test_plan_bad_input(th_ctx_t *t);

#endif
