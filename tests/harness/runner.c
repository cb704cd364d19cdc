/* Test runner: selection, seeds, pass/fail/skip bookkeeping. */
#define _POSIX_C_SOURCE 199309L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

struct th_ctx {
    const char *name;
    uint64_t seed;
    th_rng_t rng;
    int failures;
    int skipped;
    char skip_why[256];
};

enum { TH_MAX_PRINTED_FAILURES = 12 };

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; ++s) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void th_fail(th_ctx_t *t, const char *file, int line, const char *fmt, ...) {
    if (t->failures++ < TH_MAX_PRINTED_FAILURES) {
        const char *base = strrchr(file, '/');
        fprintf(stdout, "    FAIL %s:%d: ", base ? base + 1 : file, line);
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stdout, fmt, ap);
        va_end(ap);
        fputc('\n', stdout);
    } else if (t->failures == TH_MAX_PRINTED_FAILURES + 1) {
        fprintf(stdout, "    (further failures not printed)\n");
    }
}

int th_failed(const th_ctx_t *t) { return t->failures; }
const char *th_name(const th_ctx_t *t) { return t->name; }
uint64_t th_seed(const th_ctx_t *t) { return t->seed; }
th_rng_t *th_rng(th_ctx_t *t) { return &t->rng; }

void th_skip(th_ctx_t *t, const char *why) {
    t->skipped = 1;
    snprintf(t->skip_why, sizeof t->skip_why, "%s", why);
}

void th_note(th_ctx_t *t, const char *fmt, ...) {
    (void)t;
    fputs("    ", stdout);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
}

static void usage(const char *prog) {
    printf("usage: %s [--seed N] [--filter SUBSTR] [--exclude SUBSTR[,SUBSTR...]] [--cpu-only | --gpu-only] [--list]\n",
           prog);
}

/* --exclude / DSV4_TEST_EXCLUDE: comma-separated substrings; a test matching any is left out. */
static int excluded(const char *name, const char *list) {
    if (!list) return 0;
    char buf[256];
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len > 0 && len < sizeof buf) {
            memcpy(buf, p, len);
            buf[len] = 0;
            if (strstr(name, buf)) return 1;
        }
        p += len + (p[len] == ',');
    }
    return 0;
}

int th_main(int argc, char **argv, const th_test_t *tests, int n) {
    uint64_t seed = 0;
    int have_seed = 0, list = 0, cpu_only = 0, gpu_only = 0;
    const char *filter = NULL, *exclude = getenv("DSV4_TEST_EXCLUDE");
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
            have_seed = 1;
        } else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
            filter = argv[++i];
        } else if (!strcmp(argv[i], "--exclude") && i + 1 < argc) {
            exclude = argv[++i];
        } else if (!strcmp(argv[i], "--list")) {
            list = 1;
        } else if (!strcmp(argv[i], "--cpu-only")) {
            cpu_only = 1;
        } else if (!strcmp(argv[i], "--gpu-only")) {
            gpu_only = 1;
        } else {
            usage(argv[0]);
            return 2;
        }
    }
    if (!have_seed) {
        const char *env = getenv("DSV4_TEST_SEED");
        seed = env ? strtoull(env, NULL, 0) : ((uint64_t)time(NULL) * 2654435761ull) ^ (uint64_t)clock();
    }
    if (list) {
        for (int i = 0; i < n; ++i) printf("%s%s\n", tests[i].name, tests[i].needs_gpu ? " [gpu]" : "");
        return 0;
    }
    printf("seed %llu (rerun with --seed %llu)\n", (unsigned long long)seed, (unsigned long long)seed);
    int gpus = -1;
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < n; ++i) {
        const th_test_t *tc = &tests[i];
        if (filter && !strstr(tc->name, filter)) continue;
        if (excluded(tc->name, exclude)) continue;
        if ((cpu_only && tc->needs_gpu) || (gpu_only && !tc->needs_gpu)) continue;
        th_ctx_t ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.name = tc->name;
        ctx.seed = seed ^ fnv1a(tc->name);
        th_rng_seed(&ctx.rng, ctx.seed);
        if (tc->needs_gpu) {
            if (gpus < 0) gpus = th_gpu_count();
            if (gpus == 0) {
                printf("[ SKIPPED ] %s: no CUDA device\n", tc->name);
                ++skipped;
                continue;
            }
        }
        printf("[ RUN     ] %s\n", tc->name);
        fflush(stdout);
        double t0 = now_s();
        tc->fn(&ctx);
        double dt = now_s() - t0;
        if (ctx.failures) {
            printf("[ FAILED  ] %s (%d failures, %.2f s; rerun with --seed %llu --filter %s)\n", tc->name, ctx.failures,
                   dt, (unsigned long long)seed, tc->name);
            ++failed;
        } else if (ctx.skipped) {
            printf("[ SKIPPED ] %s: %s\n", tc->name, ctx.skip_why);
            ++skipped;
        } else {
            printf("[ PASSED  ] %s (%.2f s)\n", tc->name, dt);
            ++passed;
        }
        fflush(stdout);
    }
    printf("summary: %d passed, %d failed, %d skipped (seed %llu)\n", passed, failed, skipped,
           (unsigned long long)seed);
    if (failed) return 1;
    if (passed == 0 && skipped > 0) return 77;
    return 0;
}
