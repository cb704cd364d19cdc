/* The kvcache family's tests: CPU (references, known answers, bad input, plans) and GPU
 * (kernels against the references, bit for bit; q of the SWA writer within 1 ulp). */
#include "test_kvcache.h"

static const th_test_t tests[] = {
    {"kvcache.quant_elem_all_bf16_x_enc", test_kv_quant_elem_all, TH_CPU},
    {"kvcache.insert_known_answers", test_kv_insert_known_answers, TH_CPU},
    {"kvcache.insert_random_vs_model", test_kv_insert_random_vs_model, TH_CPU},
    {"kvcache.insert_gather_roundtrip", test_kv_insert_gather_roundtrip, TH_CPU},
    {"kvcache.swa_known_answers", test_kv_swa_known_answers, TH_CPU},
    {"kvcache.swa_kv_equals_insert", test_kv_swa_kv_equals_insert, TH_CPU},
    {"kvcache.swa_q_vs_fp64", test_kv_swa_q_vs_fp64, TH_CPU},
    {"kvcache.swa_skip_q_norm_known_answers", test_kv_swa_skip_q_norm_known_answers, TH_CPU},
    {"kvcache.swa_skip_q_norm_random", test_kv_swa_skip_q_norm_random, TH_CPU},
    {"kvcache.gather_known_answers", test_kv_gather_known_answers, TH_CPU},
    {"kvcache.gather_random_vs_model", test_kv_gather_random_vs_model, TH_CPU},
    {"kvcache.plans", test_kv_plans, TH_CPU},
    {"kvcache.bad_input_insert", test_kv_bad_input_insert, TH_CPU},
    {"kvcache.bad_input_swa", test_kv_bad_input_swa, TH_CPU},
    {"kvcache.bad_input_gather", test_kv_bad_input_gather, TH_CPU},
    {"kvcache.rope_insert_known_answers", test_kv_rope_insert_known_answers, TH_CPU},
    {"kvcache.rope_insert_form_t", test_kv_rope_insert_form_t, TH_CPU},
    {"kvcache.rope_insert_random_vs_model", test_kv_rope_insert_random_vs_model, TH_CPU},
    {"kvcache.bad_input_rope_insert", test_kv_bad_input_rope_insert, TH_CPU},
    {"kvcache.gpu_quant_all_bf16_x_enc", test_kv_gpu_quant_all, TH_GPU},
    {"kvcache.gpu_insert", test_kv_gpu_insert, TH_GPU},
    {"kvcache.gpu_swa", test_kv_gpu_swa, TH_GPU},
    {"kvcache.gpu_gather", test_kv_gpu_gather, TH_GPU},
    {"kvcache.gpu_big_offset", test_kv_gpu_big_offset, TH_GPU},
    {"kvcache.gpu_bad_input_writes_nothing", test_kv_gpu_bad_input_writes_nothing, TH_GPU},
    {"kvcache.gpu_graph_capture", test_kv_gpu_graph_capture, TH_GPU},
    {"kvcache.gpu_rope_insert", test_kv_gpu_rope_insert, TH_GPU},
    {"kvcache.duplicate_slots_ref", test_kv_duplicate_slots_ref, TH_CPU},
    {"kvcache.gpu_duplicate_slots", test_kv_gpu_duplicate_slots, TH_GPU},
};

int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }
