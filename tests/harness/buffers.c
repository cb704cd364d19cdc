/* Host and device buffers framed by canary guard bands. The canary is a pseudo-random
 * byte stream (not a constant), so a kernel that writes a constant pattern out of bounds
 * cannot match it by accident. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "harness.h"

enum { TH_GUARD = 4096 }; /* multiple of 256 keeps the payload 256-byte aligned */

static uint64_t canary_counter = 0x5EEDC0FFEEull;

static void canary_bytes(uint64_t seed, uint8_t *dst, size_t n) {
    th_rng_t r;
    th_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = th_rng_u64(&r);
        for (size_t j = 0; j < 8 && i + j < n; ++j) dst[i + j] = (uint8_t)(v >> (8 * j));
    }
}

static void die(const char *what) {
    fprintf(stdout, "harness: %s\n", what);
    exit(1); /* a test binary, not the library */
}

static th_buf_t make(size_t bytes, int on_device) {
    th_buf_t b = {0};
    b.bytes = bytes;
    b.guard = TH_GUARD;
    b.on_device = on_device;
    b.canary = canary_counter++;
    size_t total = bytes + 2 * b.guard;
    uint8_t *g = malloc(2 * b.guard);
    if (!g) die("out of host memory");
    canary_bytes(b.canary, g, 2 * b.guard);
    if (on_device) {
        if (cudaMalloc((void **)&b.base, total) != cudaSuccess) die("cudaMalloc failed");
        if (cudaMemcpy(b.base, g, b.guard, cudaMemcpyHostToDevice) != cudaSuccess ||
            cudaMemcpy(b.base + b.guard + bytes, g + b.guard, b.guard, cudaMemcpyHostToDevice) != cudaSuccess)
            die("cudaMemcpy of canaries failed");
    } else {
        b.base = th_aligned_alloc(256, total);
        if (!b.base) die("out of host memory");
        memcpy(b.base, g, b.guard);
        memcpy(b.base + b.guard + bytes, g + b.guard, b.guard);
    }
    free(g);
    return b;
}

th_buf_t th_buf_host(size_t bytes) { return make(bytes, 0); }
th_buf_t th_buf_device(size_t bytes) { return make(bytes, 1); }
void *th_ptr(const th_buf_t *b) { return b->base + b->guard; }

/* Tests launch on non-blocking streams, which do not order after the legacy stream of
 * cudaMemcpy/cudaMemset: every transfer here synchronizes the device around itself. */
void th_buf_upload(th_buf_t *b, const void *src) {
    if (b->on_device) {
        if (cudaMemcpy(th_ptr(b), src, b->bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
            cudaDeviceSynchronize() != cudaSuccess)
            die("upload failed");
    } else {
        memcpy(th_ptr(b), src, b->bytes);
    }
}

void th_buf_download(const th_buf_t *b, void *dst) {
    if (b->on_device) {
        if (cudaDeviceSynchronize() != cudaSuccess ||
            cudaMemcpy(dst, th_ptr(b), b->bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
            die("download failed");
    } else {
        memcpy(dst, th_ptr(b), b->bytes);
    }
}

void th_buf_poison(th_buf_t *b, uint8_t byte) {
    if (b->on_device) {
        if (cudaMemset(th_ptr(b), byte, b->bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
            die("cudaMemset failed");
    } else {
        memset(th_ptr(b), byte, b->bytes);
    }
}

int th_buf_guards_ok(th_ctx_t *t, const th_buf_t *b, const char *what) {
    uint8_t *want = malloc(2 * b->guard), *got = malloc(2 * b->guard);
    if (!want || !got) die("out of host memory");
    canary_bytes(b->canary, want, 2 * b->guard);
    if (b->on_device) {
        if (cudaDeviceSynchronize() != cudaSuccess ||
            cudaMemcpy(got, b->base, b->guard, cudaMemcpyDeviceToHost) != cudaSuccess ||
            cudaMemcpy(got + b->guard, b->base + b->guard + b->bytes, b->guard, cudaMemcpyDeviceToHost) != cudaSuccess)
            die("canary download failed");
    } else {
        memcpy(got, b->base, b->guard);
        memcpy(got + b->guard, b->base + b->guard + b->bytes, b->guard);
    }
    int ok = 1;
    for (size_t i = 0; i < 2 * b->guard; ++i) {
        if (got[i] != want[i]) {
            /* offset relative to the payload: negative before it, >= bytes after it */
            long long off = i < b->guard ? -(long long)(b->guard - i) : (long long)(b->bytes + i - b->guard);
            th_fail(t, __FILE__, __LINE__, "%s: canary damaged at payload offset %lld", what, off);
            ok = 0;
            break;
        }
    }
    free(want);
    free(got);
    return ok;
}

void th_buf_free(th_buf_t *b) {
    if (!b->base) return;
    if (b->on_device) cudaFree(b->base);
    else free(b->base);
    b->base = NULL;
}

int th_gpu_count(void) {
    int n = 0;
    if (dsv4_device_count(&n) != DSV4_STATUS_SUCCESS) return 0;
    return n;
}

int th_cuda_ok(th_ctx_t *t, int err, const char *call, const char *file, int line) {
    if (err == 0) return 1;
    th_fail(t, file, line, "%s: %s", call, cudaGetErrorString((cudaError_t)err));
    return 0;
}

void *th_stream_create(th_ctx_t *t) {
    cudaStream_t s = NULL;
    TH_CUDA(t, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return (void *)s;
}

void th_stream_sync_destroy(th_ctx_t *t, void *stream) {
    TH_CUDA(t, cudaStreamSynchronize((cudaStream_t)stream));
    TH_CUDA(t, cudaStreamDestroy((cudaStream_t)stream));
}
