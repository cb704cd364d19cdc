/* Shared helpers of the indices family's benchmark cases (bench/indices*.c). */
#ifndef DSV4_BENCH_INDICES_BENCH_H
#define DSV4_BENCH_INDICES_BENCH_H

#include <stdint.h>

#include "bench.h"

int64_t idxb_range(uint64_t *s, int64_t lo, int64_t hi); /* uniform in [lo, hi] */
void *idxb_upload(const void *host, size_t bytes);       /* device copy, NULL on failure */
/* free() each host pointer and bench_dev_free() each device pointer (NULLs allowed). */
void idxb_free_all(const void *const host[], int n_host, const void *const dev[], int n_dev);
/* Waits for ctx->stream (non-blocking: downloads on the legacy stream do not wait for it);
 * 0 on success. */
int idxb_same(const char *what, const int32_t *got, const int32_t *want, size_t n);
/* bench_report with the write floor, its ratio and the launch comparison in the config. */
void idxb_report(bench_ctx_t *ctx, const char *op, const char *name, const char *shape, const bench_timing_t *tm,
                 double bytes, double write_bytes, bench_ceiling_t ceiling, const char *check);

/* bench_time_warm when `warm` (no L2 flush: the inputs, and the previous rep's output
 * lines, stay in L2), else bench_time; and the tag the row's config carries. */
dsv4_status_t idxb_time(bench_ctx_t *ctx, int warm, bench_launch_fn fn, void *state, bench_timing_t *tm);
const char *idxb_timing_name(int warm);

/* Translation cases, dense or packed by `op`; T, K and the timing from the case name
 * ("T=<tokens> K=<topk> ...", "warm-inputs"). */
int idxb_translate_case(bench_ctx_t *ctx, const char *op, const char *name);
int idxb_decode_swa_2048(bench_ctx_t *ctx, const char *op, const char *name);

#endif
