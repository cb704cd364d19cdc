/* Benchmark cases of the kvcache family (none yet: the family has not landed). */
#include "bench.h"

const bench_case_t bench_kvcache_cases[] = {{NULL, NULL, NULL}};
const int bench_kvcache_count = 0;
