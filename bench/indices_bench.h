/* Shared helpers of the indices family's benchmark cases (bench/indices*.c). */
#ifndef DSV4_BENCH_INDICES_BENCH_H
#define DSV4_BENCH_INDICES_BENCH_H

#include <stdint.h>

#include "bench.h"
#include "model_cases.h"

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

/* Timing modes of a row, from its case name:
 *   IDXB_COLD      bench_time: 4 x L2 memset before every rep, every input byte from DRAM;
 *   IDXB_WARM      "warm-inputs": bench_time_warm, no flush; inputs AND the previous rep's
 *                  output lines stay in L2 (outputs need not reach DRAM when all fits);
 *   IDXB_WARM_IN   "warm-in-cold-out": bench_time_rotated over copies of the case that share
 *                  the inputs but write their own outputs, rotated over >= 2 x L2 of output
 *                  buffers: the inputs stay L2-resident (as right after their producer), the
 *                  output lines are not in L2 and earlier reps' dirty lines drain to DRAM. */
enum { IDXB_COLD = 0, IDXB_WARM = 1, IDXB_WARM_IN = 2 };
int idxb_timing_mode(const char *case_name);
const char *idxb_timing_name(int mode);
/* Output copies IDXB_WARM_IN rotates over for `out_bytes` of output per run. */
int idxb_rotations(const bench_ctx_t *ctx, double out_bytes);
/* The copies IDXB_WARM_IN times: nrot copies of a case state (`size` bytes at `state`),
 * each after the first with its own two output buffers (the device pointers at byte offsets
 * off[0], off[1] of the state, bytes[0], bytes[1] long); the inputs stay shared. Fills
 * states[0..nrot-1] (nrot <= 64); NULL if an allocation failed. Free with idxb_rot_free. */
void *idxb_rot_alloc(const void *state, size_t size, int nrot, const size_t off[2], const size_t bytes[2],
                     void **states);
void idxb_rot_free(void *rot, size_t size, int nrot, const size_t off[2]);

/* Translation cases, dense or packed by `op`; T, K and the timing from the case name
 * ("T=<tokens> K=<topk> ...", "warm-inputs"). */
int idxb_translate_case(bench_ctx_t *ctx, const char *op, const char *name);
/* Decode SWA cases; T from the case name ("T=<tokens> W=128 P=64"). */
int idxb_decode_swa_case(bench_ctx_t *ctx, const char *op, const char *name);

#endif
