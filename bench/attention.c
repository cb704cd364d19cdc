/* Benchmark cases of the attention family (none yet: the family has not landed). */
#include "bench.h"

const bench_case_t bench_attention_cases[] = {{NULL, NULL, NULL}};
const int bench_attention_count = 0;
