/* The indexer family's tests: CPU (references, known answers, independent models, bad
 * input, plans) and GPU (kernels against the references, bit for bit). */
#include "test_indexer.h"

static const th_test_t tests[] = {
    {"indexer.q_known_answers", test_idx_q_known_answers, TH_CPU},
    {"indexer.q_vs_model", test_idx_q_vs_model, TH_CPU},
    {"indexer.q_strided", test_idx_q_strided, TH_CPU},
    {"indexer.k_store_known_answers", test_idx_k_known_answers, TH_CPU},
    {"indexer.k_store_vs_model", test_idx_k_vs_model, TH_CPU},
    {"indexer.k_store_pages", test_idx_k_pages, TH_CPU},
    {"indexer.plans", test_idx_plans, TH_CPU},
    {"indexer.bad_input_q", test_idx_bad_input_q, TH_CPU},
    {"indexer.bad_input_k_store", test_idx_bad_input_k, TH_CPU},
    {"indexer.topk_known_answers", test_idx_topk_known_answers, TH_CPU},
    {"indexer.topk_select_vs_model", test_idx_topk_select_vs_model, TH_CPU},
    {"indexer.logits_vs_model", test_idx_logits_vs_model, TH_CPU},
    {"indexer.topk_ref_vs_model", test_idx_topk_ref_vs_model, TH_CPU},
    {"indexer.topk_plans", test_idx_topk_plans, TH_CPU},
    {"indexer.bad_input_topk", test_idx_bad_input_topk, TH_CPU},
    {"indexer.bad_input_logits", test_idx_bad_input_logits, TH_CPU},
    {"indexer.gpu_q", test_idx_gpu_q, TH_GPU},
    {"indexer.gpu_k_store", test_idx_gpu_k, TH_GPU},
    {"indexer.gpu_bad_input_writes_nothing", test_idx_gpu_bad_input_writes_nothing, TH_GPU},
    {"indexer.gpu_graph_capture", test_idx_gpu_graph_capture, TH_GPU},
    {"indexer.gpu_mma_pairs", test_idx_gpu_mma_pairs, TH_GPU},
    {"indexer.gpu_logits", test_idx_gpu_logits, TH_GPU},
    {"indexer.gpu_topk", test_idx_gpu_topk, TH_GPU},
    {"indexer.gpu_topk_candidates", test_idx_gpu_topk_candidates, TH_GPU},
};

int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }
