/* Cases of the compress family kept in their own files (bench/compress_*.c), listed in
 * bench/compress.c's case table. */
#ifndef DSV4_BENCH_COMPRESS_BENCH_H
#define DSV4_BENCH_COMPRESS_BENCH_H

#include "bench.h"

/* dsv4_compress_v4; T, r and N from the case name ("T=<rows> r=<4|128>", then " N=128" for the
 * indexer's compressor). */
int bench_run_compress_v4(bench_ctx_t *ctx, const char *op, const char *name);

#endif
