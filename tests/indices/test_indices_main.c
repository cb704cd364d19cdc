/*
 * The indices family's tests (include/dsv4/indices.h); every result must match the CPU
 * reference bit for bit.
 * CPU: known answers on the references, the library's choices, bad input, host planning.
 * GPU: the same known answers through the kernels, then random and model-shaped cases
 * against the references, and bad input writing nothing on the device.
 */
#include "idx_test.h"

static const th_test_t tests[] = {
    {"indices.page_division", test_idx_page_division, TH_CPU},
    {"indices.planning", test_idx_planning, TH_CPU},
    {"indices.kat_translate", test_kat_translate, TH_CPU},
    {"indices.kat_translate_packed", test_kat_translate_packed, TH_CPU},
    {"indices.kat_decode_swa", test_kat_decode_swa, TH_CPU},
    {"indices.kat_combine", test_kat_combine, TH_CPU},
    {"indices.kat_library_choices", test_kat_library_choices, TH_CPU},
    {"indices.bad_input", test_bad_input_cpu, TH_CPU},
    {"indices.gpu_kat", test_kat_gpu, TH_GPU},
    {"indices.gpu_bad_input", test_bad_input_gpu, TH_GPU},
    {"indices.gpu_translate_random", test_translate_gpu_random, TH_GPU},
    {"indices.gpu_translate_model", test_translate_gpu_model, TH_GPU},
    {"indices.gpu_translate_packed", test_translate_packed_gpu, TH_GPU},
    {"indices.gpu_decode_swa", test_decode_swa_gpu_random, TH_GPU},
    {"indices.gpu_combine_warmup", test_combine_gpu_warmup, TH_GPU},
    {"indices.gpu_combine_random", test_combine_gpu_random, TH_GPU},
    {"indices.gpu_combine_requests", test_combine_gpu_requests, TH_GPU},
    {"indices.gpu_translate_grid_stride", test_translate_gpu_grid_stride, TH_GPU},
    {"indices.gpu_combine_grid_stride", test_combine_gpu_grid_stride, TH_GPU},
};

int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }
