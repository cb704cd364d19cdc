/*
 * The kernels' e4m3 step on the GPU for every input: kv_warp.cuh's kv_quant_word2 (bf16
 * pairs) of every bf16 x at every enc, for test_kv_gpu_quant_all (test_kv_gpu.c) to
 * compare with dsv4_e4m3_quantize on the host.
 */
#include <cuda_runtime.h>

#include "kvcache/kv_warp.cuh"
#include "test_kvcache.h"

/* codes[enc * 65536 + x]: thread i of block (., enc) quantizes x = 4i .. 4i+3. */
__global__ void quant_all_kernel(uint8_t *codes) {
    const uint32_t enc = blockIdx.y, h = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    const uint32_t w0 = h | ((h + 1) << 16), w1 = (h + 2) | ((h + 3) << 16);
    *reinterpret_cast<uint32_t *>(codes + enc * 65536 + h) = kv_quant_word2(w0, w1, kv_inv_scale_bf16x2(enc));
}

extern "C" int kvt_gpu_quant_all(uint8_t *dev_codes) {
    quant_all_kernel<<<dim3(64, 256), 256>>>(dev_codes);
    return (int)cudaGetLastError();
}
