/*
 * dsv4_bench: the benchmark and verification suite.
 *
 *   dsv4_bench [--list] [--op OP] [--case NAME] [--check] [--json FILE] [--commit HASH]
 *              [--reps N] [--quick] [--flush write|clean] [--cpu]
 *
 * With a GPU: measures the ceilings (copy bandwidth, mma.sync bf16 throughput, empty
 * launch), then runs every selected case: optional check against the CPU reference,
 * timing, one JSON line per case (--json). Without a GPU: says so, and runs each case's
 * CPU reference on a smaller input of the same kind with its checks; the table then names
 * the GPU case each row stands for, not the shape that ran. Nothing is written without
 * --json. --cpu takes the no-GPU path on any machine (the CPU check that CTest runs).
 * --op names an operator or a whole family; --case selects the cases of that name, or, when
 * no selected case has exactly that name, those whose name contains it ('T=8192 r=1' is one
 * case, not also 'T=8192 r=128').
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "bench.h"

typedef struct {
    const char *name;
    const bench_case_t *cases;
    const int *count;
} family_t;

static const family_t families[] = {
#define BENCH_FAMILY(name) {#name, bench_##name##_cases, &bench_##name##_count},
#include "families.def"
#undef BENCH_FAMILY
    {NULL, NULL, NULL}};

int bench_measure_ceilings(bench_ctx_t *ctx);

static void usage(void) {
    printf(
        "usage: dsv4_bench [--list] [--op OP] [--case NAME] [--check] [--json FILE] [--commit HASH] "
        "[--reps N] [--quick] [--flush write|clean] [--cpu]\n");
}

int main(int argc, char **argv) {
    bench_ctx_t ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.reps = 30;
    ctx.commit = "unknown";
    ctx.argv0 = argv[0];
    const char *op_filter = NULL, *case_filter = NULL, *json_path = NULL;
    int list = 0, cpu = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--list")) list = 1;
        else if (!strcmp(a, "--check")) ctx.check = 1;
        else if (!strcmp(a, "--quick")) ctx.quick = 1;
        else if (!strcmp(a, "--cpu")) cpu = 1;
        else if (!strcmp(a, "--op") && v) op_filter = argv[++i];
        else if (!strcmp(a, "--case") && v) case_filter = argv[++i];
        else if (!strcmp(a, "--json") && v) json_path = argv[++i];
        else if (!strcmp(a, "--commit") && v) ctx.commit = argv[++i];
        else if (!strcmp(a, "--reps") && v) ctx.reps = atoi(argv[++i]);
        else if (!strcmp(a, "--flush") && v && (!strcmp(v, "write") || !strcmp(v, "clean")))
            ctx.flush_clean = !strcmp(argv[++i], "clean");
        else {
            usage();
            return 2;
        }
    }
    if (ctx.reps < 3) ctx.reps = 3;
    if (ctx.quick && ctx.reps > 10) ctx.reps = 10;

    if (list) {
        for (const family_t *f = families; f->name; ++f)
            for (int i = 0; i < *f->count; ++i) printf("%-22s %s\n", f->cases[i].op, f->cases[i].name);
        return 0;
    }

    int ngpu = 0;
    if (!cpu) dsv4_device_count(&ngpu);
    ctx.have_gpu = ngpu > 0 && dsv4_device_query(0, &ctx.dev) == DSV4_STATUS_SUCCESS && ctx.dev.supported;
    printf("libdsv4 %s, commit %s\n", dsv4_version_string(), ctx.commit);
    if (json_path) {
        ctx.json = fopen(json_path, "w");
        if (!ctx.json) {
            printf("cannot open %s for writing\n", json_path);
            return 2;
        }
    }
    if (ctx.have_gpu) {
        printf("device: %s (sm_%d, %d SMs, L2 %.0f MB)\n", ctx.dev.name, ctx.dev.arch, ctx.dev.sm_count,
               ctx.dev.l2_bytes / 1e6);
        if (bench_measure_ceilings(&ctx)) return 1;
    } else {
        printf(
            "NO GPU FOUND: no CUDA device with compute capability >= 8.0 is visible.\n"
            "Running the CPU references with their checks, each on a smaller input of the same kind as\n"
            "its GPU case (column 'ran on the CPU'); times are the references'.\n");
    }

    if (ctx.have_gpu)
        printf("\n%-16s %-34s %10s %10s %10s %12s %8s %6s\n", "op", "case", "median_us", "p10_us", "p90_us",
               "throughput", "%ceil", "check");
    else
        printf("\n%-16s %-34s %10s %10s %10s  %-30s %6s\n", "op", "case", "median_us", "p10_us", "p90_us",
               "ran on the CPU", "check");
    int ran = 0, exact = 0;
    for (const family_t *f = families; f->name && case_filter; ++f)
        for (int i = 0; i < *f->count; ++i)
            exact |= (!op_filter || !strcmp(op_filter, f->cases[i].op) || !strcmp(op_filter, f->name)) &&
                     !strcmp(case_filter, f->cases[i].name);
    for (const family_t *f = families; f->name; ++f) {
        if (*f->count == 0) {
            if (!op_filter) printf("%-16s not implemented yet\n", f->name);
            continue;
        }
        for (int i = 0; i < *f->count; ++i) {
            const bench_case_t *c = &f->cases[i];
            if (op_filter && strcmp(op_filter, c->op) && strcmp(op_filter, f->name)) continue;
            if (case_filter && (exact ? strcmp(c->name, case_filter) != 0 : !strstr(c->name, case_filter))) continue;
            if (c->run(&ctx, c->op, c->name)) ctx.failures++;
            ++ran;
        }
    }
    if (ctx.json) fclose(ctx.json);
    if (ctx.flush) bench_dev_free(ctx.flush);
    if (ctx.flush_sink) bench_dev_free(ctx.flush_sink);
    if (ctx.stream) cudaStreamDestroy((cudaStream_t)ctx.stream);
    printf("\n%d case(s) run, %d failed%s\n", ran, ctx.failures, ctx.have_gpu ? "" : " (CPU references only: no GPU)");
    return ctx.failures ? 1 : 0;
}
