/*
 * The mhc family's tests. CPU: planner, references against known answers and fp64,
 * bad input. GPU: every operator against the references; "_large" tests hold the
 * T = 2048 / 8192 cases (leave them out of sanitizer runs with
 * DSV4_SANITIZER_EXCLUDE=_large).
 */
#include "test_mhc.h"

static const th_test_t tests[] = {
    {"mhc.plan_routing", test_plan_routing, TH_CPU},
    {"mhc.plan_batch_invariant", test_plan_batch_invariant, TH_CPU},
    {"mhc.post_ref_known_answers", test_post_ref_known, TH_CPU},
    {"mhc.post_ref_vs_fp64", test_post_ref_random, TH_CPU},
    {"mhc.collapse_ref", test_collapse_ref, TH_CPU},
    {"mhc.fn_bcast_ref", test_fn_bcast_ref, TH_CPU},
    {"mhc.fn_split_ref", test_fn_split_ref, TH_CPU},
    {"mhc.gates_ref", test_gates_ref, TH_CPU},
    {"mhc.seam_ref", test_seam_ref, TH_CPU},
    {"mhc.seam_ref_small_t_route_gap", test_seam_ref_route_gap, TH_CPU},
    {"mhc.pre_ref", test_pre_ref, TH_CPU},
    {"mhc.bad_input", test_bad_input, TH_CPU},
    {"mhc.zero_tokens", test_zero_tokens, TH_CPU},
    {"mhc.gpu_post", test_post_gpu, TH_GPU},
    {"mhc.gpu_collapse", test_collapse_gpu, TH_GPU},
    {"mhc.gpu_fn_bcast", test_fn_bcast_gpu, TH_GPU},
    {"mhc.gpu_fn_split", test_fn_split_gpu, TH_GPU},
    {"mhc.gpu_fn_split_calls", test_fn_split_calls_gpu, TH_GPU},
    {"mhc.gpu_gates", test_gates_gpu, TH_GPU},
    {"mhc.gpu_gates_batch_invariant", test_gates_batch_invariant_gpu, TH_GPU},
    {"mhc.gpu_gates_stale_tags", test_gates_stale_tags_gpu, TH_GPU},
    {"mhc.gpu_pre", test_pre_gpu, TH_GPU},
    {"mhc.gpu_seam_v41", test_seam_gpu, TH_GPU},
    {"mhc.gpu_seam_v4", test_seam_v4_gpu, TH_GPU},
    {"mhc.gpu_seam_routes", test_seam_routes_gpu, TH_GPU},
    {"mhc.gpu_seam_graph_capture", test_seam_graph_gpu, TH_GPU},
    {"mhc.gpu_bad_input_writes_nothing", test_bad_input_gpu, TH_GPU},
    {"mhc.gpu_post_large", test_post_gpu_large, TH_GPU},
    {"mhc.gpu_seam_large", test_seam_gpu_large, TH_GPU},
};

int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }
