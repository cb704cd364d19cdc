/* GPU half of the API tests: device query, the run-time shared-memory gate, probes. */
#include <cuda_runtime.h>

#include <math.h>
#include <string.h>

#include "common/launch.h"
#include "test_api.h"

extern "C" void test_api_gpu_device_query(th_ctx_t *t) {
    dsv4_device_info_t info;
    TH_OK(t, dsv4_device_query(0, &info));
    th_note(t, "device 0: %s, sm_%d, %d SMs, %lld B smem/block (opt-in %lld), L2 %lld B", info.name, info.arch,
            info.sm_count, (long long)info.smem_per_block, (long long)info.smem_per_block_optin,
            (long long)info.l2_bytes);
    TH_CHECK(t, info.arch >= 80 && info.supported == 1, "arch %d", info.arch);
    TH_CHECK(t, info.sm_count > 0 && info.name[0] != 0, "sm_count %d name '%s'", info.sm_count, info.name);
    TH_CHECK(t, info.smem_per_block >= DSV4_MAX_SMEM_PER_CTA, "smem per block %lld", (long long)info.smem_per_block);
}

/* 40 KB of static shared memory: legal alone, over the limit with 16 KB dynamic. */
__global__ void gate_static_40k(float *out) {
    __shared__ float s[10240];
    s[threadIdx.x] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = s[(threadIdx.x + 1) % 10240];
}
__global__ void gate_dynamic_only(float *out) {
    extern __shared__ float dyn[];
    dyn[threadIdx.x] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = dyn[threadIdx.x ^ 1];
}

extern "C" void test_api_gpu_smem_gate(th_ctx_t *t) {
    static int cache_a, cache_b;
    TH_OK(t, dsv4_launch_prepare("gate_test", (const void *)gate_static_40k, 8192, &cache_a));
    TH_EXPECT_STATUS(t, dsv4_launch_prepare("gate_test", (const void *)gate_static_40k, 16384, &cache_a),
                     DSV4_STATUS_UNSUPPORTED);
    TH_CHECK(t, strstr(dsv4_last_error(), "40960 static") != NULL, "message: %s", dsv4_last_error());
    TH_OK(t, dsv4_launch_prepare("gate_test", (const void *)gate_dynamic_only, 49152, &cache_b));
    TH_EXPECT_STATUS(t, dsv4_launch_prepare("gate_test", (const void *)gate_dynamic_only, 49153, &cache_b),
                     DSV4_STATUS_UNSUPPORTED);
}

extern "C" void test_api_gpu_probes(th_ctx_t *t) {
    dsv4_device_info_t info;
    TH_OK(t, dsv4_device_query(0, &info));
    void *s = th_stream_create(t);
    float *sink = NULL;
    int blocks = info.sm_count * 2;
    TH_CUDA(t, cudaMalloc(&sink, blocks * sizeof(float)));
    TH_CUDA(t, cudaMemset(sink, 0xFF, blocks * sizeof(float))); /* NaN poison */
    TH_OK(t, dsv4_probe_empty(DSV4_STREAM(s)));
    TH_OK(t, dsv4_probe_mma_bf16(blocks, 16, sink, DSV4_STREAM(s)));
    th_stream_sync_destroy(t, s);
    float *h = (float *)malloc(blocks * sizeof(float));
    TH_CUDA(t, cudaMemcpy(h, sink, blocks * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < blocks; ++i) TH_CHECK(t, isfinite(h[i]) && h[i] != 0.0f, "sink[%d] = %g", i, h[i]);
    free(h);
    cudaFree(sink);

    /* the read probe xors every word of its buffer into the sink: an odd word count and a
     * grid smaller than the buffer, so the grid-stride loop and the tail are covered */
    th_rng_t *rng = th_rng(t);
    const size_t words = 4 * 100003;
    uint32_t *hb = (uint32_t *)malloc(words * sizeof(uint32_t)), want = 0;
    for (size_t i = 0; i < words; ++i) want ^= hb[i] = th_rng_u32(rng);
    uint32_t *db = NULL;
    unsigned *dsink = NULL, got = 0;
    TH_CUDA(t, cudaMalloc(&db, words * sizeof(uint32_t)));
    TH_CUDA(t, cudaMalloc(&dsink, sizeof(unsigned)));
    TH_CUDA(t, cudaMemcpy(db, hb, words * sizeof(uint32_t), cudaMemcpyHostToDevice));
    TH_CUDA(t, cudaMemset(dsink, 0, sizeof(unsigned)));
    s = th_stream_create(t);
    TH_OK(t, dsv4_probe_read(db, words * sizeof(uint32_t), 3, dsink, DSV4_STREAM(s)));
    th_stream_sync_destroy(t, s);
    TH_CUDA(t, cudaMemcpy(&got, dsink, sizeof(unsigned), cudaMemcpyDeviceToHost));
    TH_CHECK(t, got == want, "read probe xor 0x%08x, expected 0x%08x", got, want);
    free(hb);
    cudaFree(db);
    cudaFree(dsink);
}

/* Too many threads per block: a launch error (not sticky; its name varies by driver) that the
 * test leaves pending. */
__global__ void launch_status_noop(int *p) {
    if (p) p[threadIdx.x] = 0;
}

/* An unrelated failed launch left pending before our call: the call succeeds, reports
 * nothing of it, and leaves it pending for its owner. */
extern "C" void test_api_gpu_launch_status(th_ctx_t *t) {
    cudaGetLastError();
    launch_status_noop<<<1, 4096>>>(nullptr);
    const cudaError_t pending = cudaPeekAtLastError();
    TH_CHECK(t, pending != cudaSuccess, "the bad launch left %s", cudaGetErrorName(pending));
    void *s = th_stream_create(t);
    TH_OK(t, dsv4_probe_empty(DSV4_STREAM(s)));
    TH_CHECK(t, cudaPeekAtLastError() == pending, "our call turned the pending %s into %s", cudaGetErrorName(pending),
             cudaGetErrorName(cudaPeekAtLastError()));
    cudaGetLastError();
    th_stream_sync_destroy(t, s);
}
