/* Timing, ceilings and reporting for dsv4_bench. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "bench.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void summarize(double *us, int n, bench_timing_t *out) {
    qsort(us, (size_t)n, sizeof *us, cmp_double);
    out->reps = n;
    out->median_us = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
    out->p10_us = us[(n - 1) / 10];
    out->p90_us = us[(n - 1) - (n - 1) / 10];
}

uint64_t bench_rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float *bench_rotary_table(int64_t rows) {
    float *cs = malloc((size_t)rows * 256);
    for (int64_t n = 0; cs && n < rows; ++n)
        for (int i = 0; i < 32; ++i) {
            const double ang = (double)n * pow(10000.0, -(double)i / 32.0);
            cs[n * 64 + i] = (float)cos(ang), cs[n * 64 + 32 + i] = (float)sin(ang);
        }
    return cs;
}

float bench_uniform(uint64_t *state, float half) {
    return (float)((double)(bench_rng_next(state) >> 40) * 0x1p-24 * 2.0 - 1.0) * half;
}

int64_t *bench_shuffled(uint64_t *state, int64_t first, int64_t n) {
    int64_t *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
    for (int64_t i = 0; a && i < n; ++i) a[i] = first + i;
    for (int64_t i = n - 1; a && i > 0; --i) {
        const int64_t j = (int64_t)(bench_rng_next(state) % (uint64_t)(i + 1)), t = a[i];
        a[i] = a[j], a[j] = t;
    }
    return a;
}

const char *bench_verdict(int checked, int ok) { return !checked ? "skipped" : (ok ? "pass" : "fail"); }

void *bench_dev_alloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        printf("bench: cudaMalloc(%zu) failed\n", bytes);
        return NULL;
    }
    return p;
}
void bench_dev_free(void *p) { cudaFree(p); }
/* Cases launch on a non-blocking stream, which does not order after the legacy stream
 * that cudaMemcpy uses: an upload's DMA may still run when the kernel starts, and a
 * download may start before the kernel ends. Both copies therefore synchronize the
 * device around them. */
int bench_upload(void *dst, const void *src, size_t bytes) {
    return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess
               ? 0
               : -1;
}
void *bench_host_mapped_alloc(size_t bytes, void **dev) {
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocMapped) != cudaSuccess) {
        cudaGetLastError();
        printf("bench: cudaHostAlloc(%zu, mapped) failed\n", bytes);
        return NULL;
    }
    if (cudaHostGetDevicePointer(dev, p, 0) != cudaSuccess) {
        cudaGetLastError();
        cudaFreeHost(p);
        printf("bench: no device address for mapped host memory\n");
        return NULL;
    }
    return p;
}
void bench_host_free(void *p) { cudaFreeHost(p); }

int bench_measure_host_link(bench_ctx_t *ctx) {
    if (ctx->host_link_gbps > 0) return 0;
    const size_t bytes = (size_t)(ctx->quick ? 64 : 256) << 20;
    void *dev = NULL, *host = bench_host_mapped_alloc(bytes, &dev), *dst = bench_dev_alloc(bytes);
    cudaEvent_t a = NULL, b = NULL;
    int rc = -1;
    enum { REPS = 7 };
    double gbps[REPS];
    if (host && dst && cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess) {
        memset(host, 1, bytes);
        rc = 0;
        for (int i = 0; i < REPS && !rc; ++i) {
            float ms = 0;
            rc = cudaEventRecord(a, (cudaStream_t)ctx->stream) != cudaSuccess ||
                 cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, (cudaStream_t)ctx->stream) != cudaSuccess ||
                 cudaEventRecord(b, (cudaStream_t)ctx->stream) != cudaSuccess ||
                 cudaEventSynchronize(b) != cudaSuccess || cudaEventElapsedTime(&ms, a, b) != cudaSuccess;
            gbps[i] = (double)bytes / (ms * 1e6);
        }
    }
    if (!rc) {
        qsort(gbps, REPS, sizeof gbps[0], cmp_double);
        ctx->host_link_gbps = gbps[REPS / 2];
        printf("host link (measured now): %.1f GB/s, pinned host -> device copies of %zu MB\n", ctx->host_link_gbps,
               bytes >> 20);
    } else {
        cudaGetLastError();
        printf("host link measurement failed\n");
    }
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    bench_dev_free(dst);
    if (host) bench_host_free(host);
    return rc;
}

int bench_download(void *dst, const void *src, size_t bytes) {
    return cudaDeviceSynchronize() == cudaSuccess && cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) == cudaSuccess
               ? 0
               : -1;
}

/* The timing loop behind bench_time, bench_time_warm and bench_time_rotated: per rep,
 * an optional L2 flush, then `per_rep` launches (cycling through the states) between two
 * events; the time per launch goes into the statistics. */
static dsv4_status_t time_reps(bench_ctx_t *ctx, bench_launch_fn fn, void *const *states, int nstates, int per_rep,
                               int flush, bench_timing_t *out) {
    cudaStream_t s = (cudaStream_t)ctx->stream;
    for (int i = 0; i < 3 * nstates; ++i) {
        dsv4_status_t st = fn(ctx, states[i % nstates]);
        if (st != DSV4_STATUS_SUCCESS) return st;
    }
    int n = ctx->reps;
    cudaEvent_t *ev = malloc(2 * (size_t)n * sizeof *ev);
    double *us = malloc((size_t)n * sizeof *us);
    for (int i = 0; i < 2 * n; ++i) cudaEventCreate(&ev[i]);
    dsv4_status_t st = DSV4_STATUS_SUCCESS;
    for (int i = 0; i < n && st == DSV4_STATUS_SUCCESS; ++i) {
        /* Evict the operator's inputs from L2 so every rep reads them from memory. */
        if (flush && ctx->flush) {
            cudaMemsetAsync(ctx->flush, i & 0xFF, ctx->flush_bytes, s);
            /* --flush clean: the memset left L2 full of dirty lines, whose write-back the
             * timed run would otherwise pay as it allocates; reading the buffer back
             * leaves clean lines (docs/results.md says how rows are measured). */
            if (ctx->flush_clean && dsv4_probe_read(ctx->flush, ctx->flush_bytes, 4 * ctx->dev.sm_count,
                                                    ctx->flush_sink, DSV4_STREAM(ctx->stream)) != DSV4_STATUS_SUCCESS)
                st = DSV4_STATUS_CUDA_ERROR;
        }
        cudaEventRecord(ev[2 * i], s);
        for (int k = 0; k < per_rep && st == DSV4_STATUS_SUCCESS; ++k)
            st = fn(ctx, states[(i * per_rep + k) % nstates]);
        cudaEventRecord(ev[2 * i + 1], s);
    }
    if (cudaStreamSynchronize(s) != cudaSuccess) st = DSV4_STATUS_CUDA_ERROR;
    for (int i = 0; i < n && st == DSV4_STATUS_SUCCESS; ++i) {
        float ms = 0;
        cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]);
        us[i] = 1e3 * ms / per_rep;
    }
    if (st == DSV4_STATUS_SUCCESS) summarize(us, n, out);
    for (int i = 0; i < 2 * n; ++i) cudaEventDestroy(ev[i]);
    free(ev);
    free(us);
    return st;
}

int bench_run_once(bench_ctx_t *ctx, bench_launch_fn fn, void *state) {
    if (fn(ctx, state) == DSV4_STATUS_SUCCESS && cudaStreamSynchronize((cudaStream_t)ctx->stream) == cudaSuccess)
        return 0;
    printf("bench: checked run failed: %s\n", dsv4_last_error());
    return -1;
}

dsv4_status_t bench_time(bench_ctx_t *ctx, bench_launch_fn fn, void *state, bench_timing_t *out) {
    return time_reps(ctx, fn, &state, 1, 1, 1, out);
}

dsv4_status_t bench_time_warm(bench_ctx_t *ctx, bench_launch_fn fn, void *state, bench_timing_t *out) {
    return time_reps(ctx, fn, &state, 1, 1, 0, out);
}

dsv4_status_t bench_time_rotated(bench_ctx_t *ctx, bench_launch_fn fn, void *const *states, int nstates, int per_rep,
                                 bench_timing_t *out) {
    return time_reps(ctx, fn, states, nstates, per_rep, 0, out);
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

dsv4_status_t bench_time_cpu(dsv4_status_t (*fn)(void *), void *state, int reps, bench_timing_t *out) {
    double *us = malloc((size_t)reps * sizeof *us);
    dsv4_status_t st = fn(state);
    for (int i = 0; i < reps; ++i) {
        double t0 = now_us();
        const dsv4_status_t s = fn(state);
        us[i] = now_us() - t0;
        if (st == DSV4_STATUS_SUCCESS) st = s;
    }
    summarize(us, reps, out);
    free(us);
    if (st != DSV4_STATUS_SUCCESS) printf("CPU reference refused the case: %s\n", dsv4_last_error());
    return st;
}

/* The ceilings, timed exactly as the cases are (bench_time: queued back to back behind
 * an L2 flush, so host launch overhead stays hidden): device copy bandwidth
 * (cudaMemcpyAsync device to device, bytes read + written), the mma.sync bf16
 * throughput probe, and an empty kernel (the launch floor every small case pays). */
typedef struct {
    void *a, *b;
    size_t bytes;
    int blocks, iters;
    float *sink;
} ceiling_state_t;

static dsv4_status_t launch_copy(bench_ctx_t *ctx, void *p) {
    ceiling_state_t *c = p;
    return cudaMemcpyAsync(c->b, c->a, c->bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)ctx->stream) == cudaSuccess
               ? DSV4_STATUS_SUCCESS
               : DSV4_STATUS_CUDA_ERROR;
}
static dsv4_status_t launch_mma(bench_ctx_t *ctx, void *p) {
    ceiling_state_t *c = p;
    return dsv4_probe_mma_bf16(c->blocks, c->iters, c->sink, DSV4_STREAM(ctx->stream));
}
static dsv4_status_t launch_empty(bench_ctx_t *ctx, void *p) {
    (void)p;
    return dsv4_probe_empty(DSV4_STREAM(ctx->stream));
}

int bench_measure_ceilings(bench_ctx_t *ctx) {
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return 1;
    ctx->stream = s;
    ctx->flush_bytes = (size_t)(ctx->dev.l2_bytes > 0 ? 4 * ctx->dev.l2_bytes : (256 << 20));
    ctx->flush = bench_dev_alloc(ctx->flush_bytes);
    ctx->flush_sink = bench_dev_alloc(sizeof(unsigned));
    ceiling_state_t c = {0};
    c.bytes = ctx->quick ? (256u << 20) : (1024u << 20);
    c.a = bench_dev_alloc(c.bytes);
    c.b = bench_dev_alloc(c.bytes);
    c.blocks = ctx->dev.sm_count * 8;
    c.iters = ctx->quick ? 512 : 2048;
    c.sink = bench_dev_alloc((size_t)c.blocks * sizeof(float));
    if (!ctx->flush || !ctx->flush_sink || !c.a || !c.b || !c.sink) return 1;
    cudaMemsetAsync(c.a, 1, c.bytes, s);
    bench_timing_t copy = {0}, mma = {0}, empty = {0};
    if (bench_time(ctx, launch_copy, &c, &copy) || bench_time(ctx, launch_mma, &c, &mma) ||
        bench_time(ctx, launch_empty, &c, &empty)) {
        printf("ceiling measurement failed: %s\n", dsv4_last_error());
        return 1;
    }
    ctx->copy_gbps = 2.0 * (double)c.bytes / (copy.median_us * 1e3);
    ctx->mma_tflops = dsv4_probe_mma_flops(c.blocks, c.iters) / (mma.median_us * 1e6);
    ctx->empty_us = empty.median_us;
    bench_dev_free(c.a);
    bench_dev_free(c.b);
    bench_dev_free(c.sink);
    printf(
        "ceilings (measured now, L2 flush %s): copy %.1f GB/s (read+write), mma.sync bf16 %.1f TFLOP/s, empty "
        "launch %.2f us (p10 %.2f, p90 %.2f)\n",
        bench_flush_name(ctx), ctx->copy_gbps, ctx->mma_tflops, ctx->empty_us, empty.p10_us, empty.p90_us);
    if (ctx->json) {
        fprintf(ctx->json,
                "{\"lib\":\"%s\",\"commit\":\"%s\",\"device\":\"%s\",\"arch\":%d,\"sm_count\":%d,\"op\":\"ceilings\","
                "\"copy_gbps\":%.2f,\"mma_bf16_tflops\":%.2f,\"empty_launch_us\":%.3f,\"copy_bytes\":%zu,"
                "\"mma_blocks\":%d,\"mma_iters\":%d,\"reps\":%d,\"flush\":\"%s\"}\n",
                dsv4_version_string(), ctx->commit, ctx->dev.name, ctx->dev.arch, ctx->dev.sm_count, ctx->copy_gbps,
                ctx->mma_tflops, ctx->empty_us, c.bytes, c.blocks, c.iters, ctx->reps, bench_flush_name(ctx));
        fflush(ctx->json);
    }
    return 0;
}

const char *bench_flush_name(const bench_ctx_t *ctx) { return ctx->flush_clean ? "clean" : "write"; }

static const char *ceiling_name(bench_ceiling_t c) {
    return c == BENCH_CEIL_COPY        ? "copy"
           : c == BENCH_CEIL_MMA       ? "mma"
           : c == BENCH_CEIL_HOST_LINK ? "host_link"
                                       : "launch";
}

void bench_report(bench_ctx_t *ctx, const char *op, const char *case_name, const char *config, const bench_timing_t *tm,
                  double bytes, double flops, bench_ceiling_t ceiling, const char *check) {
    double gbps = bytes / (tm->median_us * 1e3), tflops = flops / (tm->median_us * 1e6);
    double frac = ceiling == BENCH_CEIL_COPY        ? gbps / ctx->copy_gbps
                  : ceiling == BENCH_CEIL_MMA       ? tflops / ctx->mma_tflops
                  : ceiling == BENCH_CEIL_HOST_LINK ? gbps / ctx->host_link_gbps
                                                    : ctx->empty_us / tm->median_us;
    char thr[32];
    if (ceiling == BENCH_CEIL_MMA) snprintf(thr, sizeof thr, "%.1f TF/s", tflops);
    else snprintf(thr, sizeof thr, "%.1f GB/s", gbps);
    printf("%-16s %-34s %10.2f %10.2f %10.2f %12s %7.1f%% %6s\n", op, case_name, tm->median_us, tm->p10_us, tm->p90_us,
           thr, 100.0 * frac, check);
    fflush(stdout);
    if (!ctx->json) return;
    fprintf(ctx->json,
            "{\"lib\":\"%s\",\"commit\":\"%s\",\"device\":\"%s\",\"arch\":%d,\"sm_count\":%d,\"op\":\"%s\","
            "\"case\":\"%s\",\"config\":\"%s\",\"median_us\":%.3f,\"p10_us\":%.3f,\"p90_us\":%.3f,\"reps\":%d,"
            "\"bytes\":%.0f,\"flops\":%.0f,\"gbps\":%.2f,\"tflops\":%.3f,\"ceiling\":\"%s\",\"copy_gbps\":%.2f,"
            "\"mma_bf16_tflops\":%.2f,\"empty_launch_us\":%.3f,\"host_link_gbps\":%.2f,\"fraction_of_ceiling\":%.4f,"
            "\"check\":\"%s\","
            "\"flush\":\"%s\",\"command\":\"dsv4_bench --op %s --case '%s'%s%s\"}\n",
            dsv4_version_string(), ctx->commit, ctx->dev.name, ctx->dev.arch, ctx->dev.sm_count, op, case_name,
            config ? config : "", tm->median_us, tm->p10_us, tm->p90_us, tm->reps, bytes, flops, gbps, tflops,
            ceiling_name(ceiling), ctx->copy_gbps, ctx->mma_tflops, ctx->empty_us, ctx->host_link_gbps, frac, check,
            bench_flush_name(ctx), op, case_name, ctx->check ? " --check" : "",
            ctx->flush_clean ? " --flush clean" : "");
    fflush(ctx->json);
}

void bench_report_cpu(bench_ctx_t *ctx, const char *op, const char *case_name, const char *ran,
                      const bench_timing_t *tm, const char *check) {
    printf("%-16s %-34s %10.1f %10.1f %10.1f  %-30s %6s\n", op, case_name, tm->median_us, tm->p10_us, tm->p90_us, ran,
           check);
    fflush(stdout);
    if (!ctx->json) return;
    fprintf(ctx->json,
            "{\"lib\":\"%s\",\"commit\":\"%s\",\"device\":\"cpu (no GPU)\",\"op\":\"%s\",\"case\":\"%s\","
            "\"cpu_shape\":\"%s\",\"median_us\":%.3f,\"p10_us\":%.3f,\"p90_us\":%.3f,\"reps\":%d,\"check\":\"%s\","
            "\"command\":\"dsv4_bench --op %s --case '%s'\"}\n",
            dsv4_version_string(), ctx->commit, op, case_name, ran, tm->median_us, tm->p10_us, tm->p90_us, tm->reps,
            check, op, case_name);
    fflush(ctx->json);
}
