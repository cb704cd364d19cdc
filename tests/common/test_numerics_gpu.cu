/*
 * GPU tests of include/dsv4/numerics.h compiled as device code.
 *
 * The 2^32 sweep compares the device build of our encoders with the GPU's own
 * conversions: __nv_cvt_float_to_fp8(.., __NV_SATFINITE, __NV_E4M3), which is the
 * hardware cvt.rn.satfinite.e4m3x2.f32 on SM89+ and CUDA's software emulation on SM80/86,
 * and __float2bfloat16_rn (cvt.rn.bf16.f32). Only negative NaN may differ for e4m3 (our
 * encoder drops the sign: include/dsv4/numerics.h); NaN payloads are not compared for bf16.
 */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <stdlib.h>

#include "dsv4/numerics.h"
#include "test_numerics.h"

struct sweep_counts {
    unsigned long long e4m3_bad, e4m3_neg_nan, bf16_bad, bf16_nan_payload;
    unsigned int first_e4m3, first_bf16;
    int hardware_fp8;
};

__global__ void sweep_kernel(sweep_counts *out) {
    unsigned long long e_bad = 0, e_nn = 0, b_bad = 0, b_np = 0;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32);
         i += stride) {
        uint32_t u = (uint32_t)i;
        float f = __uint_as_float(u);
        bool is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
        uint8_t hw8 = (uint8_t)__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
        if (dsv4_f32_to_e4m3(f) != hw8) {
            if (is_nan && (u >> 31)) {
                ++e_nn;
            } else {
                if (e_bad++ == 0) atomicMin(&out->first_e4m3, u);
            }
        }
        uint16_t hw16 = __bfloat16_as_ushort(__float2bfloat16_rn(f));
        if (dsv4_f32_to_bf16(f) != hw16) {
            if (is_nan && (hw16 & 0x7FFF) > 0x7F80) {
                ++b_np;
            } else {
                if (b_bad++ == 0) atomicMin(&out->first_bf16, u);
            }
        }
    }
    if (e_bad) atomicAdd(&out->e4m3_bad, e_bad);
    if (e_nn) atomicAdd(&out->e4m3_neg_nan, e_nn);
    if (b_bad) atomicAdd(&out->bf16_bad, b_bad);
    if (b_np) atomicAdd(&out->bf16_nan_payload, b_np);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    if (blockIdx.x == 0 && threadIdx.x == 0) out->hardware_fp8 = 1;
#endif
}

extern "C" void test_gpu_f32_sweep_vs_hardware(th_ctx_t *t) {
    sweep_counts h = {};
    h.first_e4m3 = h.first_bf16 = 0xFFFFFFFFu;
    sweep_counts *d = NULL;
    if (!TH_CUDA(t, cudaMalloc(&d, sizeof h))) return;
    TH_CUDA(t, cudaMemcpy(d, &h, sizeof h, cudaMemcpyHostToDevice));
    sweep_kernel<<<8192, 256>>>(d);
    TH_CUDA(t, cudaGetLastError());
    TH_CUDA(t, cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    cudaFree(d);
    th_note(t,
            "e4m3 vs %s: %llu mismatches, %llu negative-NaN differences; bf16 vs cvt.rn.bf16.f32: %llu "
            "mismatches, %llu NaN-payload differences",
            h.hardware_fp8 ? "hardware cvt.rn.satfinite.e4m3x2.f32" : "CUDA's software fp8 conversion", h.e4m3_bad,
            h.e4m3_neg_nan, h.bf16_bad, h.bf16_nan_payload);
    TH_CHECK(t, h.e4m3_bad == 0, "e4m3 encoder differs from the GPU at %llu patterns, first 0x%08x", h.e4m3_bad,
             h.first_e4m3);
    TH_CHECK(t, h.bf16_bad == 0, "bf16 rounding differs from the GPU at %llu patterns, first 0x%08x", h.bf16_bad,
             h.first_bf16);
}

__global__ void small_tables_kernel(uint8_t *enc_out, float *decode_out, uint16_t *deq_out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; /* 0 .. 65535 */
    enc_out[i] = dsv4_ue8m0_from_amax(dsv4_bf16_to_f32((uint16_t)i));
    deq_out[i] = dsv4_dequant_e4m3((uint8_t)(i & 255), dsv4_ue8m0_to_f32((uint8_t)(i >> 8)));
    if (i < 256) decode_out[i] = dsv4_e4m3_to_f32((uint8_t)i);
}

extern "C" void test_gpu_ue8m0_and_decode(th_ctx_t *t) {
    uint8_t *d_enc;
    float *d_dec;
    uint16_t *d_deq;
    TH_CUDA(t, cudaMalloc(&d_enc, 65536));
    TH_CUDA(t, cudaMalloc(&d_dec, 256 * sizeof(float)));
    TH_CUDA(t, cudaMalloc(&d_deq, 65536 * sizeof(uint16_t)));
    small_tables_kernel<<<256, 256>>>(d_enc, d_dec, d_deq);
    TH_CUDA(t, cudaGetLastError());
    uint8_t *enc = (uint8_t *)malloc(65536);
    float *dec = (float *)malloc(256 * sizeof(float));
    uint16_t *deq = (uint16_t *)malloc(65536 * sizeof(uint16_t));
    TH_CUDA(t, cudaMemcpy(enc, d_enc, 65536, cudaMemcpyDeviceToHost));
    TH_CUDA(t, cudaMemcpy(dec, d_dec, 256 * sizeof(float), cudaMemcpyDeviceToHost));
    TH_CUDA(t, cudaMemcpy(deq, d_deq, 65536 * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < 65536; ++i) {
        /* NaN amax patterns included: device and host must agree everywhere. */
        if (enc[i] != dsv4_ue8m0_from_amax(dsv4_bf16_to_f32((uint16_t)i)) && bad++ < 4)
            TH_CHECK(t, 0, "ue8m0 of bf16 0x%04x: device %d host %d", i, enc[i],
                     dsv4_ue8m0_from_amax(dsv4_bf16_to_f32((uint16_t)i)));
        uint16_t want = dsv4_dequant_e4m3((uint8_t)(i & 255), dsv4_ue8m0_to_f32((uint8_t)(i >> 8)));
        if (deq[i] != want && bad++ < 4)
            TH_CHECK(t, 0, "dequant(0x%02x, enc %d): device 0x%04x host 0x%04x", i & 255, i >> 8, deq[i], want);
    }
    for (int b = 0; b < 256; ++b) {
        uint32_t g = dsv4_f32_bits(dec[b]), w = dsv4_f32_bits(dsv4_e4m3_to_f32((uint8_t)b));
        if (g != w && bad++ < 8) TH_CHECK(t, 0, "decode(0x%02x): device 0x%08x host 0x%08x", b, g, w);
    }
    TH_CHECK(t, bad == 0, "%d device/host differences", bad);
    free(enc);
    free(dec);
    free(deq);
    cudaFree(d_enc);
    cudaFree(d_dec);
    cudaFree(d_deq);
}
