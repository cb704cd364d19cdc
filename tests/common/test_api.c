/* The public API core: version, pinned status codes, thread-local errors, device query,
 * and bad-input handling of the foundation's own entry points. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "common/call_tag.h"
#include "common/launch.h"
#include "dsv4/dsv4.h"
#include "harness.h"
#include "test_api.h"

static void test_version(th_ctx_t *t) {
    TH_CHECK(t, dsv4_version_number() == DSV4_VERSION_NUMBER, "library %u, header %d", dsv4_version_number(),
             DSV4_VERSION_NUMBER);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", DSV4_VERSION_MAJOR, DSV4_VERSION_MINOR, DSV4_VERSION_PATCH);
    TH_CHECK(t, strcmp(dsv4_version_string(), want) == 0, "version string %s, want %s", dsv4_version_string(), want);
}

static void test_status_codes_pinned(th_ctx_t *t) {
    /* The numbers are ABI: bindings in other languages hard-code them. */
    static const struct {
        dsv4_status_t s;
        int value;
        const char *name;
    } pinned[] = {{DSV4_STATUS_SUCCESS, 0, "DSV4_STATUS_SUCCESS"},
                  {DSV4_STATUS_NULL_POINTER, 1, "DSV4_STATUS_NULL_POINTER"},
                  {DSV4_STATUS_INVALID_VALUE, 2, "DSV4_STATUS_INVALID_VALUE"},
                  {DSV4_STATUS_MISALIGNED, 3, "DSV4_STATUS_MISALIGNED"},
                  {DSV4_STATUS_UNSUPPORTED, 4, "DSV4_STATUS_UNSUPPORTED"},
                  {DSV4_STATUS_WORKSPACE_TOO_SMALL, 5, "DSV4_STATUS_WORKSPACE_TOO_SMALL"},
                  {DSV4_STATUS_NO_DEVICE, 6, "DSV4_STATUS_NO_DEVICE"},
                  {DSV4_STATUS_CUDA_ERROR, 7, "DSV4_STATUS_CUDA_ERROR"},
                  {DSV4_STATUS_INTERNAL, 8, "DSV4_STATUS_INTERNAL"}};
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; ++i) {
        TH_CHECK(t, (int)pinned[i].s == pinned[i].value, "%s = %d", pinned[i].name, (int)pinned[i].s);
        TH_CHECK(t, strcmp(dsv4_status_string(pinned[i].s), pinned[i].name) == 0, "string of %d is %s", pinned[i].value,
                 dsv4_status_string(pinned[i].s));
    }
    TH_CHECK(t, strcmp(dsv4_status_string((dsv4_status_t)99), "unknown status") == 0, "unknown status string");
}

static void *other_thread(void *arg) {
    char *out = arg;
    /* A fresh thread starts with an empty message, then gets its own. */
    snprintf(out, 256, "[%s]", dsv4_last_error());
    dsv4_device_query(0, NULL);
    snprintf(out + strlen(out), 256 - strlen(out), "%s", dsv4_last_error());
    return NULL;
}

static void test_last_error_thread_local(th_ctx_t *t) {
    TH_EXPECT_STATUS(t, dsv4_probe_mma_bf16(-3, 1, NULL, NULL), DSV4_STATUS_INVALID_VALUE);
    char mine[512];
    snprintf(mine, sizeof mine, "%s", dsv4_last_error());
    TH_CHECK(t, strstr(mine, "probe_mma_bf16") && strstr(mine, "blocks") && strstr(mine, "-3"),
             "message should name the op, the field and the value: '%s'", mine);
    char theirs[256] = {0};
    pthread_t th;
    pthread_create(&th, NULL, other_thread, theirs);
    pthread_join(th, NULL);
    TH_CHECK(t, strncmp(theirs, "[]", 2) == 0, "new thread saw a message: '%s'", theirs);
    TH_CHECK(t, strstr(theirs, "device_query") && strstr(theirs, "info"), "other thread's message: '%s'", theirs);
    TH_CHECK(t, strcmp(mine, dsv4_last_error()) == 0, "this thread's message changed to '%s'", dsv4_last_error());
}

/* Every foundation entry point: NULL where a pointer is required, negative sizes. */
static void test_bad_input(th_ctx_t *t) {
    float sink_host[1];
    dsv4_stream_t fake_stream = DSV4_STREAM((void *)0x1); /* checks run before any use */
    TH_EXPECT_STATUS(t, dsv4_device_count(NULL), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_device_query(0, NULL), DSV4_STATUS_NULL_POINTER);
    dsv4_device_info_t info;
    TH_EXPECT_STATUS(t, dsv4_device_query(-1, &info), DSV4_STATUS_NO_DEVICE);
    TH_EXPECT_STATUS(t, dsv4_probe_empty(NULL), DSV4_STATUS_NULL_POINTER);
    TH_CHECK(t, strstr(dsv4_last_error(), "stream is NULL") != NULL, "stream message: %s", dsv4_last_error());
    TH_EXPECT_STATUS(t, dsv4_probe_mma_bf16(0, 1, sink_host, fake_stream), DSV4_STATUS_INVALID_VALUE);
    TH_EXPECT_STATUS(t, dsv4_probe_mma_bf16(1, -1, sink_host, fake_stream), DSV4_STATUS_INVALID_VALUE);
    TH_EXPECT_STATUS(t, dsv4_probe_mma_bf16(1, 1, NULL, fake_stream), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_probe_mma_bf16(1, 1, sink_host, NULL), DSV4_STATUS_NULL_POINTER);
    unsigned usink[1];
    uint32_t buf[8] __attribute__((aligned(16)));
    TH_EXPECT_STATUS(t, dsv4_probe_read(NULL, 16, 1, usink, fake_stream), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_probe_read(buf, 16, 1, NULL, fake_stream), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_probe_read(buf, 16, 0, usink, fake_stream), DSV4_STATUS_INVALID_VALUE);
    TH_EXPECT_STATUS(t, dsv4_probe_read(buf, 16, 1, usink, NULL), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_probe_read(buf + 1, 16, 1, usink, fake_stream), DSV4_STATUS_MISALIGNED);
    TH_EXPECT_STATUS(t, dsv4_probe_read(buf, 12, 1, usink, fake_stream), DSV4_STATUS_MISALIGNED);
}

static void test_device_count(th_ctx_t *t) {
    int n = -1;
    TH_OK(t, dsv4_device_count(&n));
    TH_CHECK(t, n >= 0, "count %d", n);
    th_note(t, "%d CUDA device(s)", n);
    dsv4_device_info_t info;
    TH_EXPECT_STATUS(t, dsv4_device_query(n, &info), DSV4_STATUS_NO_DEVICE);
}

/* A run call's launch status is its own launches' only: an error the caller left pending
 * (here: selecting a device ordinal that does not exist) is neither reported nor cleared. */
static void test_launch_status_keeps_others(th_ctx_t *t) {
    int n = 0;
    cudaGetDeviceCount(&n);
    cudaGetLastError();
    cudaSetDevice(n + 7);
    const cudaError_t pending = cudaPeekAtLastError();
    if (pending == cudaSuccess) {
        th_note(t, "this CUDA runtime keeps no error for a bad device ordinal; nothing to check");
        return;
    }
    TH_OK(t, dsv4_launch_status("launch_test"));
    TH_CHECK(t, cudaPeekAtLastError() == pending, "the pending error %d became %d", (int)pending,
             (int)cudaPeekAtLastError());
    cudaGetLastError();
    if (n > 0) cudaSetDevice(0);
}

/* The tag of a call's cross-CTA flags (common/call_tag.h): a quiet-NaN pattern other
 * than the canonical NaN, the same for the same call, different when any input differs. */
static void test_call_tag(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    for (int i = 0; i < 10000; ++i) {
        const uintptr_t o = (uintptr_t)(((uint64_t)th_rng_u32(r) << 20) | (th_rng_u32(r) & ~15u));
        const uintptr_t w = (uintptr_t)(((uint64_t)th_rng_u32(r) << 20) | (th_rng_u32(r) & ~255u));
        const void *out = (const void *)o, *ws = (const void *)w;
        const int64_t a = th_rng_range(r, 0, 1 << 20), b = th_rng_range(r, 1, 32);
        const unsigned tag = dsv4_call_tag(out, ws, a, b);
        TH_CHECK(t, (tag & 0xFFC00000u) == 0x7FC00000u && tag != 0x7FFFFFFFu, "tag 0x%08x is not a quiet NaN payload",
                 tag);
        TH_CHECK(t, tag == dsv4_call_tag(out, ws, a, b), "the tag is not a function of its inputs");
        const unsigned other[4] = {dsv4_call_tag((const void *)(o + 16), ws, a, b),
                                   dsv4_call_tag(out, (const void *)(w + 256), a, b), dsv4_call_tag(out, ws, a + 1, b),
                                   dsv4_call_tag(out, ws, a, b + 1)};
        int same = 0;
        for (int k = 0; k < 4; ++k) same += other[k] == tag;
        TH_CHECK(t, same <= 1, "0x%08x: %d of 4 changed inputs keep the tag", tag, same); /* 2^-22 each */
        if (th_failed(t)) return;
    }
}

static const th_test_t tests[] = {
    {"api.version", test_version, TH_CPU},
    {"api.status_codes_pinned", test_status_codes_pinned, TH_CPU},
    {"api.last_error_thread_local", test_last_error_thread_local, TH_CPU},
    {"api.bad_input", test_bad_input, TH_CPU},
    {"api.device_count", test_device_count, TH_CPU},
    {"api.launch_status_keeps_others", test_launch_status_keeps_others, TH_CPU},
    {"api.call_tag", test_call_tag, TH_CPU},
    {"api.gpu_launch_status_keeps_others", test_api_gpu_launch_status, TH_GPU},
    {"api.gpu_device_query", test_api_gpu_device_query, TH_GPU},
    {"api.gpu_smem_gate", test_api_gpu_smem_gate, TH_GPU},
    {"api.gpu_probes", test_api_gpu_probes, TH_GPU},
};

int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }
