/* The planner's tests (host only). */
#include <math.h>
#include <string.h>

#include "test_plan.h"

dsv4_plan_desc_t plan_desc_64g(int tp, int pp) {
    dsv4_plan_desc_t d;
    memset(&d, 0, sizeof d);
    d.model = DSV4_PLAN_V41_FLASH;
    d.gpu_memory_bytes = 64 * GIB;
    d.tp_size = tp, d.pp_size = pp;
    d.max_model_len = MODEL_LEN;
    d.num_speculative_tokens = 5;
    return d;
}

dsv4_status_t plan_run(th_ctx_t *t, const dsv4_plan_desc_t *d, dsv4_plan_result_t *r) {
    const dsv4_status_t st = dsv4_plan(d, r);
    TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "dsv4_plan: %s (%s)", dsv4_status_string(st), dsv4_last_error());
    return st;
}

void plan_near(th_ctx_t *t, const char *what, double got, double want, double tol) {
    TH_CHECK(t, fabs(got - want) <= tol, "%s = %.6g, expected %.6g +- %.3g", what, got, want, tol);
}

static const th_test_t tests[] = {
    {"plan.worked_example", test_plan_worked_example, TH_CPU},
    {"plan.pages", test_plan_pages, TH_CPU},
    {"plan.weights", test_plan_weights, TH_CPU},
    {"plan.requests", test_plan_requests, TH_CPU},
    {"plan.monotone", test_plan_monotone, TH_CPU},
    {"plan.splits", test_plan_splits, TH_CPU},
    {"plan.bad_input", test_plan_bad_input, TH_CPU},
};

int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }
