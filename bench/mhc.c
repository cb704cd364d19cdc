/* Benchmark cases of the mhc family (none yet: the family has not landed). */
#include "bench.h"

const bench_case_t bench_mhc_cases[] = {{NULL, NULL, NULL}};
const int bench_mhc_count = 0;
