/*
 * Host-side descriptor fuzzer. Every public operator's _check, _workspace_size and _plan
 * get a valid descriptor with random fields set to adversarial values (0, -1, INT32_MAX,
 * INT64_MIN, huge strides, strides whose product with the sizes overflows, random bits).
 * Each call must return a pinned status, a failure must leave a message naming the op,
 * and the functions must agree on the verdict. The _ref functions of the ops whose
 * buffers follow from the descriptor then run on small accepted descriptors with buffers
 * framed by guard bands, which must stay intact. Built and run under AddressSanitizer and
 * UndefinedBehaviorSanitizer by scripts/sanitize.sh, so an overflow in a check fails too.
 *
 *   DSV4_FUZZ_ITERS   mutated descriptors (default 100000; a fiftieth as many reference
 *                     calls); DSV4_TEST_SEED or --seed sets the seed
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "fuzz_ops.h"
#include "fuzz_ref.h"
#include "harness.h"

static const char sentinel_op[] = "fuzz-sentinel";

static long fz_iters(void) {
    const char *s = getenv("DSV4_FUZZ_ITERS");
    long n = s ? strtol(s, NULL, 0) : 100000;
    return n > 0 ? n : 1;
}

/* Wrapping arithmetic for the generator itself. */
static int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

static int64_t pick(th_rng_t *r, const int64_t *v, int n) { return v[th_rng_u32(r) % (uint32_t)n]; }

/* An adversarial 64-bit value, some of them near `orig` or `other` (another field). */
static int64_t adv_i64(th_rng_t *r, int64_t orig, int64_t other) {
    static const int64_t fixed[] = {0,
                                    -1,
                                    1,
                                    2,
                                    8,
                                    16,
                                    512,
                                    513,
                                    INT32_MAX,
                                    (int64_t)INT32_MAX + 1,
                                    (int64_t)INT32_MAX - 7,
                                    (int64_t)UINT32_MAX,
                                    INT32_MIN,
                                    INT64_MAX,
                                    INT64_MIN,
                                    INT64_MAX - 7,
                                    INT64_MIN + 1,
                                    INT64_C(1) << 20,
                                    (INT64_C(1) << 20) + 1,
                                    INT64_C(1) << 24,
                                    (INT64_C(1) << 24) + 1,
                                    INT64_C(1) << 30,
                                    (INT64_C(1) << 30) + 1,
                                    INT64_C(1) << 31,
                                    INT64_C(1) << 32,
                                    INT64_C(1) << 40,
                                    INT64_C(1) << 62,
                                    INT64_MAX / 2 + 8,
                                    INT64_MAX / 512 + 8,
                                    INT64_MAX / 584 + 16};
    int64_t base = other > 0 ? other : 1;
    switch (th_rng_u32(r) % 12) {
    case 0:
    case 1:
    case 2: return pick(r, fixed, (int)(sizeof fixed / sizeof fixed[0]));
    case 3: return (int64_t)th_rng_u64(r);
    case 4: return (int64_t)(th_rng_u64(r) >> (th_rng_u32(r) % 63));
    case 5: return wadd(orig, th_rng_range(r, -9, 9));
    case 6: return wmul(orig, th_rng_range(r, 2, 1024));
    case 7: return wadd(INT64_MAX / base, th_rng_range(r, -2, 2)); /* its product with `other` overflows */
    case 8: return wmul(INT64_MAX / base / 8 + th_rng_range(r, 0, 2), 8);
    case 9: return th_rng_range(r, 0, 64) * 8;
    case 10: return -th_rng_range(r, 1, INT64_MAX);
    default: return (int64_t)((uint64_t)orig ^ (UINT64_C(1) << (th_rng_u32(r) % 64)));
    }
}

static int32_t adv_i32(th_rng_t *r, int32_t orig) {
    static const int64_t fixed[] = {0, -1, 1, 2, 3, 4, 100, 101, INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1};
    switch (th_rng_u32(r) % 5) {
    case 0:
    case 1: return (int32_t)pick(r, fixed, (int)(sizeof fixed / sizeof fixed[0]));
    case 2: return (int32_t)th_rng_u32(r);
    case 3: return (int32_t)th_rng_range(r, -4, 8);
    default: return orig ^ (int32_t)(UINT32_C(1) << (th_rng_u32(r) % 32));
    }
}

static float adv_f32(th_rng_t *r) {
    static const float fixed[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-20f, 1e-6f, 2.0f, FLT_MIN, FLT_MAX, -FLT_MAX, 1e-45f};
    switch (th_rng_u32(r) % 4) {
    case 0: return fixed[th_rng_u32(r) % (sizeof fixed / sizeof fixed[0])];
    case 1: return (th_rng_u32(r) & 1) ? INFINITY : -INFINITY;
    case 2: return NAN;
    default: {
        uint32_t bits = th_rng_u32(r);
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    }
}

/* Set `n` random fields of d to adversarial values; `log` describes what changed. */
static void fz_mutate(th_rng_t *r, const fz_op_t *op, void *d, int n, char *log, size_t log_bytes) {
    size_t used = 0;
    log[0] = 0;
    for (int i = 0; i < n; ++i) {
        const fz_field_t *f = &op->fields[th_rng_u32(r) % (uint32_t)op->num_fields];
        const fz_field_t *g = &op->fields[th_rng_u32(r) % (uint32_t)op->num_fields];
        char *p = (char *)d + f->off;
        int64_t other = 1;
        if (g->type == FZ_I64) memcpy(&other, (char *)d + g->off, sizeof other);
        int w = 0;
        if (f->type == FZ_I64) {
            int64_t v;
            memcpy(&v, p, sizeof v);
            v = adv_i64(r, v, other);
            memcpy(p, &v, sizeof v);
            w = snprintf(log + used, log_bytes - used, " %s=%lld", f->name, (long long)v);
        } else if (f->type == FZ_I32) {
            int32_t v;
            memcpy(&v, p, sizeof v);
            v = adv_i32(r, v);
            memcpy(p, &v, sizeof v);
            w = snprintf(log + used, log_bytes - used, " %s=%d", f->name, (int)v);
        } else {
            float v = adv_f32(r);
            memcpy(p, &v, sizeof v);
            w = snprintf(log + used, log_bytes - used, " %s=%g", f->name, (double)v);
        }
        if (w > 0 && used + (size_t)w < log_bytes) used += (size_t)w;
    }
}

static int status_pinned(dsv4_status_t st) { return st >= DSV4_STATUS_SUCCESS && st <= DSV4_STATUS_INTERNAL; }

/* A verdict on a descriptor: SUCCESS, or a status a bad descriptor may get. */
static int verdict_ok(dsv4_status_t st, int device_ok) {
    return st == DSV4_STATUS_SUCCESS || st == DSV4_STATUS_INVALID_VALUE || st == DSV4_STATUS_MISALIGNED ||
           st == DSV4_STATUS_UNSUPPORTED || (device_ok && st == DSV4_STATUS_NO_DEVICE);
}

/* Run one host function with the sentinel message set; check its status and message. */
static dsv4_status_t judged(th_ctx_t *t, const fz_op_t *op, const char *fn, dsv4_status_t st, int device_ok,
                            const char *log) {
    TH_CHECK(t, status_pinned(st) && verdict_ok(st, device_ok), "%s%s returned %d (%s) for%s", op->op, fn, (int)st,
             dsv4_status_string(st), log);
    if (st != DSV4_STATUS_SUCCESS) {
        const char *msg = dsv4_last_error();
        size_t n = strlen(op->op);
        TH_CHECK(t,
                 strncmp(msg, op->op, n) == 0 && (msg[n] == ':' || !strncmp(msg + n, "_ref:", 5)) &&
                     strlen(msg) > n + 6,
                 "%s%s returned %s with the message '%s' for%s", op->op, fn, dsv4_status_string(st), msg, log);
    }
    dsv4_fail(DSV4_STATUS_INTERNAL, sentinel_op, "unset");
    return st;
}

static int no_gpu(void) {
    static int n = -1;
    if (n < 0) n = th_gpu_count();
    return n == 0;
}

dsv4_status_t fz_judge(th_ctx_t *t, const fz_op_t *op, const void *d, const char *log) {
    const int device_ok = op->plan_needs_device && no_gpu();
    dsv4_fail(DSV4_STATUS_INTERNAL, sentinel_op, "unset");
    const dsv4_status_t c = judged(t, op, "_check", op->check(d), 0, log);
    size_t bytes = (size_t)0x5A5A5A5A;
    const dsv4_status_t w = judged(t, op, "_workspace_size", op->wsize(d, &bytes), device_ok, log);
    if (w != DSV4_STATUS_SUCCESS)
        TH_CHECK(t, bytes == (size_t)0x5A5A5A5A, "%s_workspace_size wrote %zu and failed for%s", op->op, bytes, log);
    dsv4_status_t p = w;
    if (op->plan) p = judged(t, op, "_plan", op->plan(d), device_ok, log);
    if (op->ref && c != DSV4_STATUS_SUCCESS) {
        /* Every argument names one small poisoned buffer, which a rejected call never reads
         * past its checks nor writes. */
        static _Alignas(256) uint8_t poison[4096];
        const void *args[16];
        memset(poison, 0xA5, sizeof poison);
        for (int i = 0; i < 16; ++i) args[i] = poison;
        const dsv4_status_t f = judged(t, op, "_ref", op->ref(d, args), 0, log);
        TH_CHECK(t, f == c, "%s_check returned %s, _ref %s for%s", op->op, dsv4_status_string(c), dsv4_status_string(f),
                 log);
        int intact = 1;
        for (size_t i = 0; i < sizeof poison; ++i) intact &= poison[i] == 0xA5;
        TH_CHECK(t, intact, "%s_ref wrote into its arguments with a rejected descriptor:%s", op->op, log);
    }
    const dsv4_status_t verdicts[2] = {w, p};
    const char *names[2] = {"_workspace_size", "_plan"};
    for (int i = 0; i < 2; ++i) {
        const dsv4_status_t v = verdicts[i];
        if (device_ok && v == DSV4_STATUS_NO_DEVICE) continue;
        TH_CHECK(t, v == c, "%s_check returned %s, %s %s for%s", op->op, dsv4_status_string(c), names[i],
                 dsv4_status_string(v), log);
    }
    return c;
}

static void test_fuzz_descriptors(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    const long iters = fz_iters();
    th_note(t, "%ld iterations over %d operators (DSV4_FUZZ_ITERS)", iters, fz_num_ops);
    long accepted = 0;
    _Alignas(16) unsigned char d[512];
    char log[1024];
    for (int o = 0; o < fz_num_ops; ++o) {
        TH_CHECK(t, fz_ops[o].desc_bytes <= sizeof d, "%s descriptor too large", fz_ops[o].op);
        TH_CHECK(t, fz_judge(t, &fz_ops[o], fz_ops[o].valid, " the valid descriptor") == DSV4_STATUS_SUCCESS,
                 "%s rejects its valid descriptor", fz_ops[o].op);
    }
    for (long it = 0; it < iters && !th_failed(t); ++it) {
        const fz_op_t *op = &fz_ops[th_rng_u32(r) % (uint32_t)fz_num_ops];
        memcpy(d, op->valid, op->desc_bytes);
        int n = 1;
        while (n < 4 && (th_rng_u32(r) & 1)) ++n;
        fz_mutate(r, op, d, n, log, sizeof log);
        accepted += fz_judge(t, op, d, log) == DSV4_STATUS_SUCCESS;
    }
    th_note(t, "%ld of %ld mutated descriptors accepted", accepted, iters);
}

static void test_fuzz_refs(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    const long iters = fz_iters() / 50 + 1;
    th_note(t, "%ld reference calls tried (DSV4_FUZZ_ITERS / 50)", iters);
    long ran = 0;
    for (long it = 0; it < iters && !th_failed(t); ++it) ran += fz_ref_once(t, r);
    th_note(t, "%ld reference calls ran on accepted descriptors", ran);
}

/* Descriptors that once overflowed in a check: valid ones with these fields set. */
typedef struct {
    const char *op;
    const char *field[3];
    int64_t value[3];
    dsv4_status_t want;
} fz_case_t;

static const fz_case_t regressions[] = {
    /* (T - 1) * out_stride_token in the output-overlap check */
    {"sparse_mla_decode", {"num_tokens", "out_stride_token"}, {INT32_MAX, INT64_C(1) << 38}, DSV4_STATUS_INVALID_VALUE},
    {"sparse_mla_prefill",
     {"num_tokens", "out_stride_token"},
     {INT32_MAX, INT64_C(1) << 40},
     DSV4_STATUS_INVALID_VALUE},
};

static void test_fuzz_regressions(th_ctx_t *t) {
    _Alignas(16) unsigned char d[512];
    for (int i = 0; i < TH_COUNT(regressions); ++i) {
        const fz_case_t *c = &regressions[i];
        const fz_op_t *op = NULL;
        for (int o = 0; o < fz_num_ops; ++o)
            if (!strcmp(fz_ops[o].op, c->op)) op = &fz_ops[o];
        TH_CHECK(t, op != NULL, "no operator %s", c->op);
        if (!op) continue;
        memcpy(d, op->valid, op->desc_bytes);
        char log[256];
        size_t used = 0;
        log[0] = 0;
        for (int k = 0; k < 3 && c->field[k]; ++k) {
            const fz_field_t *f = NULL;
            for (int j = 0; j < op->num_fields; ++j)
                if (!strcmp(op->fields[j].name, c->field[k])) f = &op->fields[j];
            TH_CHECK(t, f && f->type == FZ_I64, "%s has no 64-bit field %s", c->op, c->field[k]);
            if (!f || f->type != FZ_I64) continue;
            memcpy(d + f->off, &c->value[k], sizeof c->value[k]);
            int w = snprintf(log + used, sizeof log - used, " %s=%lld", f->name, (long long)c->value[k]);
            if (w > 0 && used + (size_t)w < sizeof log) used += (size_t)w;
        }
        const dsv4_status_t st = fz_judge(t, op, d, log);
        TH_CHECK(t, st == c->want, "%s_check returned %s, expected %s for%s", c->op, dsv4_status_string(st),
                 dsv4_status_string(c->want), log);
    }
}

/* Strides have no default (dsv4.h): every stride field of a valid descriptor, whose
 * dimensions all have extent > 1, set to 0 fails with INVALID_VALUE naming the field; a
 * stride of 0 on a dimension of extent 1 is accepted (it addresses nothing). */
static void test_fuzz_stride_zero(th_ctx_t *t) {
    _Alignas(16) unsigned char d[512];
    const int64_t zero = 0;
    int tried = 0;
    for (int o = 0; o < fz_num_ops; ++o) {
        const fz_op_t *op = &fz_ops[o];
        for (int j = 0; j < op->num_fields; ++j) {
            const fz_field_t *f = &op->fields[j];
            if (f->type != FZ_I64 || !strstr(f->name, "stride")) continue;
            /* fields the headers document as unused: the packed translation's out_stride, the
             * non-broadcast mhc_pre's residual_out_stride */
            if (!strcmp(op->op, "topk_translate_packed") && !strcmp(f->name, "out_stride")) continue;
            if (!strcmp(op->op, "mhc_pre") && !strcmp(f->name, "residual_out_stride")) continue;
            memcpy(d, op->valid, op->desc_bytes);
            memcpy(d + f->off, &zero, sizeof zero);
            const dsv4_status_t st = op->check(d);
            const char *msg = dsv4_last_error();
            TH_CHECK(t, st == DSV4_STATUS_INVALID_VALUE, "%s: %s = 0 gave %s, expected DSV4_STATUS_INVALID_VALUE",
                     op->op, f->name, dsv4_status_string(st));
            TH_CHECK(t, st == DSV4_STATUS_SUCCESS || (strstr(msg, op->op) == msg && strstr(msg, f->name)),
                     "%s: %s = 0: the message \"%s\" does not name the op and the field", op->op, f->name, msg);
            ++tried;
        }
    }
    th_note(t, "%d stride fields set to 0", tried);
    /* One row: the stride is never used, and 0 is accepted. */
    dsv4_kv_gather_desc_t g = *(const dsv4_kv_gather_desc_t *)fz_ops[3].valid;
    TH_CHECK(t, !strcmp(fz_ops[3].op, "kv_gather"), "fz_ops[3] is %s", fz_ops[3].op);
    g.num_reqs = 1;
    g.out_stride_req = 0;
    g.block_table_stride = 0;
    TH_CHECK(t, dsv4_kv_gather_check(&g) == DSV4_STATUS_SUCCESS, "kv_gather rejects stride 0 on one request: %s",
             dsv4_last_error());
    g.num_reqs = 4; /* four slabs over one: the rows would alias */
    TH_CHECK(t, dsv4_kv_gather_check(&g) == DSV4_STATUS_INVALID_VALUE,
             "kv_gather accepts out_stride_req = 0 with 4 requests");
}

static const th_test_t tests[] = {
    {"fuzz.stride_zero", test_fuzz_stride_zero, TH_CPU},
    {"fuzz.regressions", test_fuzz_regressions, TH_CPU},
    {"fuzz.descriptors", test_fuzz_descriptors, TH_CPU},
    {"fuzz.refs", test_fuzz_refs, TH_CPU},
};

int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }
