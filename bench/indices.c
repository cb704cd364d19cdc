/* Benchmark cases of the indices family (none yet: the family has not landed). */
#include "bench.h"

const bench_case_t bench_indices_cases[] = {{NULL, NULL, NULL}};
const int bench_indices_count = 0;
