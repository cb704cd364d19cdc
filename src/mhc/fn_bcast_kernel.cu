/*
 * fn_bcast[m][h] = ((fn[m][h] + fn[m][H + h]) + fn[m][2H + h]) + fn[m][3H + h]
 *
 * One thread per 4 consecutive outputs (float4 in, float4 out), 256 threads per CTA,
 * 24 * H / 4 threads in all. Runs once after the weights are loaded. fp32 adds in
 * stream order with __fadd_rn: bit-exact with the C reference.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "mhc/mhc_host.h"

__global__ void __launch_bounds__(256) mhc_fn_bcast_kernel(const float4 *fn, float4 *out, int64_t H) {
    const int64_t q4 = H / 4, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 24 * q4) return;
    const int64_t m = i / q4, q = i % q4;
    const float4 *src = fn + m * 4 * q4 + q;
    float4 a = __ldg(src);
#pragma unroll
    for (int s = 1; s < 4; ++s) {
        const float4 b = __ldg(src + s * q4);
        a.x = __fadd_rn(a.x, b.x), a.y = __fadd_rn(a.y, b.y), a.z = __fadd_rn(a.z, b.z), a.w = __fadd_rn(a.w, b.w);
    }
    out[i] = a;
}

extern "C" dsv4_status_t mhc_launch_fn_bcast(const float *fn, float *out, int64_t H, dsv4_stream_t stream) {
    static const char *op = "mhc_fn_bcast";
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mhc_fn_bcast_kernel, 0, &smem_cache));
    const int64_t n = 24 * H / 4;
    dsv4_launch(mhc_fn_bcast_kernel, (unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream,
                reinterpret_cast<const float4 *>(fn), reinterpret_cast<float4 *>(out), H);
    return dsv4_launch_status(op);
}
