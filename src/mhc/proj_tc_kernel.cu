/*
 * K0 and K1 of the tensor-core route (spec/mhc.md 6.3): K0 splits fn into bf16 hi / lo
 * rows, K1 runs the producer and the mma projection (proj_tc.cuh says how) in a grid of
 * (ceil(T / 32), S) CTAs.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "mhc/proj_tc.cuh"

/* K0: fn [24][K] fp32 -> hi / lo bf16 rows [48][K] (hi = bf16(fn), lo = bf16(fn - hi), the
 * difference exact in fp32). mhc_pack2 (cvt.rn.bf16x2.f32) gives the bits of
 * dsv4_f32_to_bf16, NaN -> 0x7FFF and subnormals kept, and __fsub_rn does not flush
 * subnormals, so dsv4_mhc_fn_split_ref is bit-exact with this kernel. A thread converts
 * K0_VECS float4 a grid apart, all loads issued first: at K = 20480 120 CTAs hold the whole
 * of fn in flight in one round trip (one float4 per thread took 3.3 us under ncu at 0.23
 * warps issued per scheduler). */
constexpr int K0_VECS = 4;
__global__ void __launch_bounds__(256) mhc_fn_split_kernel(const float *__restrict__ fn, uint16_t *__restrict__ hl,
                                                            uint32_t K) {
    const uint32_t n4 = 6 * K, stride = gridDim.x * blockDim.x; /* 24 K / 4 float4 */
    const uint32_t i0 = blockIdx.x * blockDim.x + threadIdx.x;
    float4 f[K0_VECS];
#pragma unroll
    for (int j = 0; j < K0_VECS; ++j)
        if (i0 + j * stride < n4) f[j] = __ldg(reinterpret_cast<const float4 *>(fn) + i0 + j * stride);
#pragma unroll
    for (int j = 0; j < K0_VECS; ++j) {
        const uint32_t i = 4 * (i0 + j * stride);
        if (i >= 24 * K) break;
        const uint32_t h01 = mhc_pack2(f[j].x, f[j].y), h23 = mhc_pack2(f[j].z, f[j].w);
        const uint32_t l01 = mhc_pack2(__fsub_rn(f[j].x, mhc_bf16_lo(h01)), __fsub_rn(f[j].y, mhc_bf16_hi(h01)));
        const uint32_t l23 = mhc_pack2(__fsub_rn(f[j].z, mhc_bf16_lo(h23)), __fsub_rn(f[j].w, mhc_bf16_hi(h23)));
        const uint32_t n = i / K, k = i % K; /* K % 4 == 0: the 4 values share a row */
        dsv4_st_v2(hl + n * K + k, h01, h23);
        dsv4_st_v2(hl + (24 + n) * K + k, l01, l23);
    }
}

template <int PROD, int MODE>
__global__ void __launch_bounds__(MHC_TC_THREADS, MHC_TC_MIN_CTAS) mhc_proj_tc_kernel(const mhc_pipe_t p) {
    __shared__ __align__(16) uint16_t sA[BM * LDS];
    __shared__ __align__(16) uint16_t sB[48 * LDS];
    __shared__ __align__(16) float s_coef[BM][MHC_TC_COEF_PITCH];
    tc_proj_cta<PROD, MODE, false>(p, blockIdx.x, blockIdx.y, sA, sB, s_coef);
}

template <int PROD, int MODE> static dsv4_status_t launch(const mhc_pipe_t *p, cudaStream_t s) {
    static const char *op = "mhc_proj_tc";
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mhc_proj_tc_kernel<PROD, MODE>, 0, &smem_cache));
    dim3 grid((unsigned)((p->T + BM - 1) / BM), (unsigned)p->plan.splits);
    mhc_proj_tc_kernel<PROD, MODE><<<grid, MHC_TC_THREADS, 0, s>>>(*p);
    return dsv4_launch_status(op);
}

/* The instantiations a call can need: collapse (with or without a pre-mix) or none, aux or
 * not; the broadcast embedding has no pre-mix (its collapse is the identity). */
template <int PROD> static dsv4_status_t launch_mode(const mhc_pipe_t *p, cudaStream_t s) {
    const int coll = p->collapse_k1 ? (PROD != MHC_PROD_BCAST && p->pre_mix ? TC_COLL | TC_PMIX : TC_COLL) : 0;
    switch (coll | (p->aux ? TC_AUX : 0)) {
    case 0: return launch<PROD, 0>(p, s);
    case TC_COLL: return launch<PROD, TC_COLL>(p, s);
    case TC_AUX: return launch<PROD, TC_AUX>(p, s);
    case TC_COLL | TC_AUX: return launch<PROD, TC_COLL | TC_AUX>(p, s);
    case TC_COLL | TC_PMIX: return launch<PROD, PROD == MHC_PROD_BCAST ? TC_COLL : TC_COLL | TC_PMIX>(p, s);
    default: return launch<PROD, PROD == MHC_PROD_BCAST ? TC_COLL | TC_AUX : TC_COLL | TC_PMIX | TC_AUX>(p, s);
    }
}

/* K0 for dsv4_mhc_fn_split and for a tensor-core call without fn_split. K <= 4 x 16384, so
 * 24 K fits the kernel's 32-bit indices. */
extern "C" dsv4_status_t mhc_launch_fn_split(const float *fn, uint16_t *hl, int64_t K, dsv4_stream_t stream) {
    static const char *op = "mhc_fn_split";
    static int smem_cache;
    const uint32_t k = (uint32_t)K;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mhc_fn_split_kernel, 0, &smem_cache));
    mhc_fn_split_kernel<<<(6 * k + 256 * K0_VECS - 1) / (256 * K0_VECS), 256, 0, (cudaStream_t)stream>>>(fn, hl, k);
    return dsv4_launch_status(op);
}

extern "C" dsv4_status_t mhc_launch_proj_tc(const mhc_pipe_t *p, dsv4_stream_t stream) {
    cudaStream_t s = (cudaStream_t)stream;
    const int64_t cw = MHC_TC_CHUNK_CHANNELS(p->prod == MHC_PROD_BCAST);
    if (p->plan.splits < 1 || (p->H / cw) % p->plan.splits != 0)
        return dsv4_fail(DSV4_STATUS_INTERNAL, "mhc_proj_tc", "split count %d does not divide %lld chunks",
                         (int)p->plan.splits, (long long)(p->H / cw));
    switch (p->prod) {
    case MHC_PROD_POST: return launch_mode<MHC_PROD_POST>(p, s);
    case MHC_PROD_RES: return launch_mode<MHC_PROD_RES>(p, s);
    default: return launch_mode<MHC_PROD_BCAST>(p, s);
    }
}
