/*
 * The benchmark binary's shared machinery. Each operator family contributes a table of
 * cases (bench/<family>.c, listed in bench/families.def); a case sets up its inputs,
 * optionally checks the kernel against the CPU reference (--check), times the shipped
 * kernel through the public API with bench_time, and reports one JSON line with
 * bench_report. Without a GPU, a case runs its CPU reference on a small model-shaped
 * input instead, checks it, and reports with bench_report_cpu.
 */
#ifndef DSV4_BENCH_H
#define DSV4_BENCH_H

#include <stdint.h>
#include <stdio.h>

#include "dsv4/dsv4.h"

typedef struct bench_ctx {
    int have_gpu;
    dsv4_device_info_t dev;
    void *stream;          /* cudaStream_t created for the run                      */
    double copy_gbps;      /* device copy bandwidth, bytes read + written per second */
    double mma_tflops;     /* mma.sync bf16 throughput                              */
    double empty_us;       /* event-timed empty kernel                              */
    double host_link_gbps; /* pinned host -> device copy, measured by the first case
                              that reads host memory (bench_measure_host_link)      */
    int check;             /* --check: verify each case before timing               */
    int reps;              /* timed repetitions per case                            */
    int quick;             /* --quick: fewer repetitions, smaller ceiling runs       */
    FILE *json;            /* --json FILE (NULL: none)                              */
    const char *commit;    /* --commit (git hash), "unknown" otherwise               */
    const char *argv0;
    void *flush; /* device buffer written before each rep to evict L2      */
    size_t flush_bytes;
    int flush_clean;      /* --flush clean: read the buffer back after writing it   */
    unsigned *flush_sink; /* dsv4_probe_read's sink                                 */
    int failures;         /* cases whose check failed                              */
} bench_ctx_t;

typedef struct {
    double median_us, p10_us, p90_us;
    int reps;
} bench_timing_t;

/* Enqueue one run of the operator on ctx->stream; return its status. */
typedef dsv4_status_t (*bench_launch_fn)(bench_ctx_t *ctx, void *state);

/* Warm up, then time ctx->reps runs, each after an L2 flush, with CUDA events. */
dsv4_status_t bench_time(bench_ctx_t *ctx, bench_launch_fn fn, void *state, bench_timing_t *out);
/* As bench_time without the flush: inputs stay where the previous run left them (in L2
 * when they fit), as when the producing kernel ran just before. Rows timed this way must
 * say so in their case name or config. */
dsv4_status_t bench_time_warm(bench_ctx_t *ctx, bench_launch_fn fn, void *state, bench_timing_t *out);
/* Back-to-back timing over rotated input sets: each timed rep launches `per_rep` runs,
 * cycling through `nstates` states whose buffers together exceed L2 (so each run reads
 * cold inputs without a flush in between), and reports the time per run. This amortizes
 * the event pair over several launches, as a serving engine's stream of kernels does. */
dsv4_status_t bench_time_rotated(bench_ctx_t *ctx, bench_launch_fn fn, void *const *states, int nstates, int per_rep,
                                 bench_timing_t *out);
/* One run for a --check: launch, then wait for the case's stream so that its errors
 * surface here. 0 on success; on failure prints the library's message. */
int bench_run_once(bench_ctx_t *ctx, bench_launch_fn fn, void *state);
/* Host timing of a CPU reference call (the no-GPU path), median of `reps`: returns the first
 * status other than success (and prints the library's message), so a refused call fails
 * the case instead of timing the refusal. */
dsv4_status_t bench_time_cpu(dsv4_status_t (*fn)(void *), void *state, int reps, bench_timing_t *out);

/* Which ceiling a case is measured against. */
typedef enum { BENCH_CEIL_COPY, BENCH_CEIL_MMA, BENCH_CEIL_LAUNCH, BENCH_CEIL_HOST_LINK } bench_ceiling_t;

/* One JSON line plus one table row. `check` is "pass", "fail" or "skipped". */
void bench_report(bench_ctx_t *ctx, const char *op, const char *case_name, const char *config, const bench_timing_t *tm,
                  double bytes, double flops, bench_ceiling_t ceiling, const char *check);
/* The no-GPU row: `ran` is the smaller shape the reference computed for `case_name`, in
 * the same key=value grammar. */
void bench_report_cpu(bench_ctx_t *ctx, const char *op, const char *case_name, const char *ran,
                      const bench_timing_t *tm, const char *check);

/* A case: returns 0 on success (check passed or not requested), nonzero on failure. */
typedef struct {
    const char *op;
    const char *name;
    int (*run)(bench_ctx_t *ctx, const char *op, const char *name);
} bench_case_t;

/* splitmix64: deterministic case inputs (the benchmark does not link the test harness). */
uint64_t bench_rng_next(uint64_t *state);
/* A GPT-J rotary table [rows, 64] (malloc'ed): cos of pair i at position n in column i, sin in
 * 32 + i, theta 10000 over 32 pairs (the model's). */
float *bench_rotary_table(int64_t rows);
/* Uniform in [-half, half) from 24 random bits. */
float bench_uniform(uint64_t *state, float half);
/* first .. first + n - 1 in random order (Fisher-Yates), malloc'ed. */
int64_t *bench_shuffled(uint64_t *state, int64_t first, int64_t n);
/* A case's check column: "skipped" without --check, else "pass" or "fail". */
const char *bench_verdict(int checked, int ok);

/* Device helpers for cases: allocation that reports failure instead of exiting. */
/* "write" (the default: the flush buffer is memset before each rep) or "clean" (--flush
 * clean: then read back, so L2 holds clean lines); in every JSON row. */
const char *bench_flush_name(const bench_ctx_t *ctx);
void *bench_dev_alloc(size_t bytes);
void bench_dev_free(void *p);
int bench_upload(void *dst, const void *src, size_t bytes);
int bench_download(void *dst, const void *src, size_t bytes);
/* Pinned host memory mapped into the device (*dev: its device address), or NULL. */
void *bench_host_mapped_alloc(size_t bytes, void **dev);
void bench_host_free(void *p);
/* The host-link ceiling of the run: event-timed copies of pinned host memory to the device,
 * the median of several; measured once, then kept in ctx->host_link_gbps. 0 on success. */
int bench_measure_host_link(bench_ctx_t *ctx);

#define BENCH_FAMILY(name)                                                                                             \
    extern const bench_case_t bench_##name##_cases[];                                                                  \
    extern const int bench_##name##_count;
#include "families.def"
#undef BENCH_FAMILY

#endif /* DSV4_BENCH_H */
