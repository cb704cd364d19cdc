/* The compress family's tests: CPU (references, known answers, independent models, bad
 * input, plans) and GPU (kernels against the references, bit for bit). */
#include "test_compress.h"
#include "test_latent.h"
#include "test_v4.h"

static const th_test_t tests[] = {
    {"compress.compress_known_answers", test_compress_known_answers, TH_CPU},
    {"compress.compress_vs_model", test_compress_vs_model, TH_CPU},
    {"compress.compress_ring", test_compress_ring, TH_CPU},
    {"compress.compress_plan", test_compress_plan, TH_CPU},
    {"compress.compress_v4_exp", test_compress_v4_exp, TH_CPU},
    {"compress.compress_v4_known_answers", test_compress_v4_known_answers, TH_CPU},
    {"compress.compress_v4_vs_model", test_compress_v4_vs_model, TH_CPU},
    {"compress.bad_input_compress_v4", test_compress_v4_bad_input, TH_CPU},
    {"compress.bad_input_compress", test_compress_bad_input, TH_CPU},
    {"compress.inv_rope_known_answers", test_inv_rope_known_answers, TH_CPU},
    {"compress.inv_rope_vs_model", test_inv_rope_vs_model, TH_CPU},
    {"compress.inv_rope_strided", test_inv_rope_strided, TH_CPU},
    {"compress.engram_known_answers", test_engram_known_answers, TH_CPU},
    {"compress.engram_vs_model", test_engram_vs_model, TH_CPU},
    {"compress.engram_all_codes_x_enc", test_engram_all_codes_x_enc, TH_CPU},
    {"compress.plans", test_cmp_plans, TH_CPU},
    {"compress.bad_input_inv_rope", test_cmp_bad_input_inv_rope, TH_CPU},
    {"compress.bad_input_engram", test_cmp_bad_input_engram, TH_CPU},
    {"compress.gpu_inv_rope", test_cmp_gpu_inv_rope, TH_GPU},
    {"compress.gpu_engram", test_cmp_gpu_engram, TH_GPU},
    {"compress.gpu_engram_host_mapped", test_cmp_gpu_engram_host_mapped, TH_GPU},
    {"compress.gpu_bad_input_writes_nothing", test_cmp_gpu_bad_input_writes_nothing, TH_GPU},
    {"compress.gpu_graph_capture", test_cmp_gpu_graph_capture, TH_GPU},
    {"compress.gpu_compress", test_cmp_gpu_compress, TH_GPU},
    {"compress.gpu_compress_graph", test_cmp_gpu_compress_graph, TH_GPU},
    {"compress.gpu_compress_bad_input_writes_nothing", test_cmp_gpu_compress_bad_input, TH_GPU},
    {"compress.gpu_compress_v4", test_cmp_gpu_compress_v4, TH_GPU},
    {"compress.gpu_compress_v4_graph", test_cmp_gpu_compress_v4_graph, TH_GPU},
    {"compress.gpu_compress_v4_duplicate_slots", test_cmp_gpu_compress_v4_duplicate_slots, TH_GPU},
    {"compress.gpu_compress_v4_bad_input_writes_nothing", test_cmp_gpu_compress_v4_bad_input, TH_GPU},
};

int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }
