#include <stdlib.h>
#include <string.h>

#include "test_numerics.h"

/* The 2^32 sweep takes about a minute on two cores: it runs where DSV4_LONG_TESTS=1
 * (scripts/gpu_check.sh sets it; CTest's numerics_long entry) and is skipped elsewhere. */
static void test_exhaustive_f32_sweep_long(th_ctx_t *t) {
    const char *on = getenv("DSV4_LONG_TESTS");
    if (!on || strcmp(on, "1") != 0) {
        th_skip(t, "long test: set DSV4_LONG_TESTS=1 to run it");
        return;
    }
    test_exhaustive_f32_sweep(t);
}

static const th_test_t tests[] = {
    {"numerics.bf16_known_answers", test_bf16_known_answers, TH_CPU},
    {"numerics.e4m3_known_answers", test_e4m3_known_answers, TH_CPU},
    {"numerics.e4m3_decode_all_256", test_e4m3_decode_all, TH_CPU},
    {"numerics.ue8m0_choice_all_bf16", test_ue8m0_choice, TH_CPU},
    {"numerics.ue8m0_decode_all_256", test_ue8m0_decode_all, TH_CPU},
    {"numerics.dequant_all_65536_pairs", test_dequant_all_pairs, TH_CPU},
    {"numerics.block_known_answers", test_block_known_answers, TH_CPU},
    {"numerics.bf16_e4m3_all_2^32", test_exhaustive_f32_sweep_long, TH_CPU},
    {"numerics.gpu_all_2^32_vs_hardware", test_gpu_f32_sweep_vs_hardware, TH_GPU},
    {"numerics.gpu_ue8m0_and_decode", test_gpu_ue8m0_and_decode, TH_GPU},
};

int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }
