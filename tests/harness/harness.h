/*
 * Test harness: a runner with named tests and printed seeds, a seeded RNG, buffers with
 * canary guard bands (host or device), output poisoning, and comparators.
 *
 *   static void test_x(th_ctx_t *t) {
 *       th_rng_t *r = th_rng(t);                      // seeded from --seed and the name
 *       TH_CHECK(t, got == want, "got %d want %d", got, want);
 *   }
 *   static const th_test_t tests[] = {{"fam.x", test_x, TH_CPU}, {"fam.x_gpu", ..., TH_GPU}};
 *   int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }
 *
 * Exit status: 0 when every selected test passed, 1 when any failed, 77 (CTest's
 * SKIP_RETURN_CODE) when every selected test was skipped. GPU tests are skipped, and
 * reported as SKIPPED, where no CUDA device exists; the same binary runs them where one
 * does. Flags: --seed N, --filter SUBSTR, --exclude SUBSTR (or DSV4_TEST_EXCLUDE), --cpu-only,
 * --gpu-only, --list. DSV4_TEST_SEED sets the seed when --seed is absent.
 */
#ifndef DSV4_TEST_HARNESS_H
#define DSV4_TEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "dsv4/dsv4.h"

/* aligned_alloc with the size rounded up to a multiple of the alignment, which C11 requires
 * (sanitizers reject other sizes). */
static inline void *th_aligned_alloc(size_t align, size_t size) {
    return aligned_alloc(align, (size + align - 1) / align * align);
}

#ifdef __cplusplus
extern "C" {
#endif

/* ---- runner ------------------------------------------------------------------------- */
typedef struct th_ctx th_ctx_t;
typedef void (*th_fn_t)(th_ctx_t *t);
enum { TH_CPU = 0, TH_GPU = 1 };
typedef struct {
    const char *name;
    th_fn_t fn;
    int needs_gpu;
} th_test_t;
#define TH_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

int th_main(int argc, char **argv, const th_test_t *tests, int n);

/* Record a failure (test goes on; the first few messages are printed). */
void th_fail(th_ctx_t *t, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
#define TH_CHECK(t, cond, ...)                                                                                         \
    do {                                                                                                               \
        if (!(cond)) th_fail((t), __FILE__, __LINE__, __VA_ARGS__);                                                    \
    } while (0)
/* Check a library call's status. */
#define TH_EXPECT_STATUS(t, call, want)                                                                                \
    do {                                                                                                               \
        dsv4_status_t th_st_ = (call);                                                                                 \
        if (th_st_ != (want))                                                                                          \
            th_fail((t), __FILE__, __LINE__, "%s returned %s, expected %s (last error: %s)", #call,                    \
                    dsv4_status_string(th_st_), dsv4_status_string(want), dsv4_last_error());                          \
    } while (0)
#define TH_OK(t, call) TH_EXPECT_STATUS(t, call, DSV4_STATUS_SUCCESS)

int th_failed(const th_ctx_t *t);               /* failures so far in this test */
void th_skip(th_ctx_t *t, const char *why);     /* mark skipped (when nothing failed) */
void th_note(th_ctx_t *t, const char *fmt, ...) /* an informational line */
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
const char *th_name(const th_ctx_t *t);
uint64_t th_seed(const th_ctx_t *t);

/* ---- RNG (xoshiro256**) ---------------------------------------------------------------- */
typedef struct {
    uint64_t s[4];
} th_rng_t;
th_rng_t *th_rng(th_ctx_t *t); /* this test's generator */
void th_rng_seed(th_rng_t *r, uint64_t seed);
uint64_t th_rng_u64(th_rng_t *r);
uint32_t th_rng_u32(th_rng_t *r);
int64_t th_rng_range(th_rng_t *r, int64_t lo, int64_t hi); /* uniform in [lo, hi] */
double th_rng_unit(th_rng_t *r);                           /* uniform in [0, 1) */
double th_rng_normal(th_rng_t *r);
/* +-m * 2^e with m uniform in [1, 2) and e uniform in [lo_exp, hi_exp). */
double th_rng_logmag(th_rng_t *r, double lo_exp, double hi_exp);
void th_rng_shuffle_i32(th_rng_t *r, int32_t *a, int64_t n);

/* ---- buffers with guard bands ---------------------------------------------------------- */
typedef struct {
    uint8_t *base; /* allocation start (host or device)            */
    size_t bytes;  /* payload size                                 */
    size_t guard;  /* canary bytes on each side                    */
    int on_device;
    uint64_t canary; /* seed of the canary byte stream               */
} th_buf_t;

th_buf_t th_buf_host(size_t bytes);
th_buf_t th_buf_device(size_t bytes);                    /* cudaMalloc; guards written with cudaMemcpy */
void *th_ptr(const th_buf_t *b);                         /* payload (256-byte aligned)                  */
void th_buf_upload(th_buf_t *b, const void *host_src);   /* whole payload */
void th_buf_download(const th_buf_t *b, void *host_dst); /* whole payload */
void th_buf_poison(th_buf_t *b, uint8_t byte);
/* 1 if both canaries are intact; on damage records a failure naming `what`. */
int th_buf_guards_ok(th_ctx_t *t, const th_buf_t *b, const char *what);
void th_buf_free(th_buf_t *b);

/* ---- comparators ----------------------------------------------------------------------- */
/* Number of differing bytes; the first few are reported as failures with their offset. */
size_t th_cmp_bytes(th_ctx_t *t, const char *what, const void *got, const void *want, size_t n);

typedef struct {
    size_t n;
    size_t nan_mismatch, inf_mismatch; /* positions where NaN / inf-ness differ     */
    double max_abs, max_rel;           /* over positions where both are finite      */
    size_t worst_abs, worst_rel;       /* their indices                             */
    double rel_l2;                     /* ||got - ref|| / ||ref||                    */
    double nmse;                       /* ||got - ref||^2 / ||ref||^2               */
    double max_ref;                    /* max |ref| over finite positions           */
} th_err_t;
th_err_t th_err_f64(const double *got, const double *ref, size_t n);
/* Fails unless NaN/inf positions match, max_abs <= abs_tol and rel_l2 <= rel_l2_tol.
 * Always notes the measured errors. Returns 1 on pass. */
int th_check_err(th_ctx_t *t, const char *what, th_err_t e, double abs_tol, double rel_l2_tol);

/* Converters for comparisons. */
void th_bf16_to_f64(const uint16_t *src, double *dst, size_t n);
void th_f32_to_f64(const float *src, double *dst, size_t n);

/* ---- GPU --------------------------------------------------------------------------------- */
int th_gpu_count(void); /* CUDA devices usable (0 where none) */
/* Fail the test (and return 0) if a CUDA runtime call failed. */
int th_cuda_ok(th_ctx_t *t, int cuda_error, const char *call, const char *file, int line);
#define TH_CUDA(t, call) th_cuda_ok((t), (int)(call), #call, __FILE__, __LINE__)
void *th_stream_create(th_ctx_t *t); /* a non-blocking created stream, as cudaStream_t */
void th_stream_sync_destroy(th_ctx_t *t, void *stream);

/* Fill helpers. */
void th_fill_bf16_logmag(th_rng_t *r, uint16_t *dst, size_t n, double lo_exp, double hi_exp);
void th_fill_bf16_normal(th_rng_t *r, uint16_t *dst, size_t n, double scale);

#ifdef __cplusplus
}
#endif

/* The last error message names each of op, field and value (NULL: not checked); `call`
 * labels the failure. */
void th_expect_error(th_ctx_t *t, const char *call, const char *op, const char *field, const char *value);
/* A GPT-J rotary table [max_position, 64]: cos of pair i in column i, sin in 32 + i, with
 * theta 10000 over 32 pairs (the model's). */
void th_rotary_table(float *cs, int64_t max_position);

#endif /* DSV4_TEST_HARNESS_H */
