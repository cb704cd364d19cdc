/*
 * dsv4_compress kernels: pooled, RMS-normalized bf16 latent rows, and the ratio-2 ring
 * update.
 *
 * Formula (include/dsv4/compress.h): x = kv_score[t, 0:512] (ratio 1, rows with
 * slot >= 0) or, at ratio 2 for a row at an odd position with a ring slot, the per-dim
 * softmax pooling of P (row t - 1, or the ring row of position p - 1 for a request's
 * first row) and Q = row t:
 *     pooled[d] = P[d] * ep / (ep + eq) + Q[d] * eq / (ep + eq),  ep, eq = exp(score - max)
 *     p_l = fmaf(x[4l], x[4l], x[4l+1]^2) + fmaf(x[4l+2], x[4l+2], x[4l+3]^2),  l < 128
 *     ssq = halving tree of p (+64, +32, ..., +1);  rr = 1 / sqrtf(ssq / 512 + eps)
 *     latent[t, d] = bf16((x[d] * rr) * gamma[d])
 * Then each request stores the last min(rows, cap) rows of its chunk into the ring.
 *
 * Decomposition. latent_kernel: grid = num_tokens CTAs, one per kv_score row, of
 * LATENT_THREADS = 128 threads; a row that gets no latent returns at once (the test is
 * uniform over the CTA). Thread i owns dims 4i .. 4i + 3: one 16-byte load of each half
 * row it needs (kv and, at ratio 2, score of P and Q), so a warp reads 512 contiguous
 * bytes per load. Its partial p_i goes through latent_block.cuh's one-barrier tree to
 * rr, which every thread ends with. One 8-byte load of gamma and one
 * 8-byte store of 4 bf16 per thread. The request of a ratio-2 row comes from a binary
 * search of query_start_loc (the same addresses for the whole CTA: L1 broadcasts).
 * latent_ring_kernel: grid = num_reqs CTAs of 256 threads, one per request; each copies
 * its chunk's last min(rows, cap) rows, one float4 per thread per row.
 *
 * Ordering. The first row of a request reads one ring row; a chunk of >= cap rows stores
 * over that same row. The stores are a second launch on the same stream, so stream order
 * puts every read of the first launch before any store, across all CTAs, and a captured
 * graph keeps the edge. (One kernel would need a grid-wide barrier or an argument that
 * the reading CTA itself performs the conflicting store; two launches cost one launch
 * latency and no assumption on the positions.)
 *
 * Numerics: latent_math.h, the reference's own functions: each product, sum, the square
 * root and the divisions rounded on their own (__f*_rn: no contraction), bf16 by
 * numerics.h's integer RNE. Ratio 1 is bit-exact with the CPU reference; ratio 2 differs
 * only through expf (device vs host C library), inside the contract's tolerance. The
 * ring copies are exact.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "compress/latent_block.cuh"
#include "compress/latent_config.h"
#include "compress/latent_math.h"
#include "compress/latent_plan.h"

typedef struct {
    const float *kv_score;
    const int64_t *positions, *slot, *ring_slot;
    const int32_t *qsl;
    const uint16_t *gamma;
    float *ring;
    uint16_t *latent;
    int64_t num_tokens, kv_stride, num_reqs, ring_cap, ring_rows, ring_stride;
    float eps;
} latent_params_t;

template <int RATIO>
__global__ void __launch_bounds__(LATENT_THREADS, LATENT_MIN_BLOCKS) latent_kernel(const latent_params_t prm) {
    __shared__ float part[LATENT_THREADS];
    const int64_t t = blockIdx.x;
    const int i = threadIdx.x;
    const float4 *q = reinterpret_cast<const float4 *>(prm.kv_score + t * prm.kv_stride);
    float4 x = __ldg(q + i);
    if (RATIO == 1) {
        if (__ldg(prm.slot + t) < 0) return;
    } else {
        const int64_t pos = __ldg(prm.positions + t), rs = __ldg(prm.ring_slot + t);
        if (!cl_closes(pos, rs, prm.ring_rows)) return;
        const int64_t b = cl_request_of(prm.qsl, prm.num_reqs, t);
        if (b < 0) return;
        /* The ring is written by the second launch: plain loads, not the read-only path. */
        const float4 *p =
            t == cl_first_row(prm.qsl, b)
                ? reinterpret_cast<const float4 *>(prm.ring + cl_prev_ring_row(rs, pos, prm.ring_cap) * prm.ring_stride)
                : reinterpret_cast<const float4 *>(prm.kv_score + (t - 1) * prm.kv_stride);
        const float4 pk = p[i], ps = p[LATENT_THREADS + i], qs = __ldg(q + LATENT_THREADS + i);
        x = make_float4(cl_pool(pk.x, x.x, ps.x, qs.x), cl_pool(pk.y, x.y, ps.y, qs.y), cl_pool(pk.z, x.z, ps.z, qs.z),
                        cl_pool(pk.w, x.w, ps.w, qs.w));
    }
    const float rr = cl_block_rms_inv(part, i, true, x, prm.eps);
    const uint2 g = __ldg(reinterpret_cast<const uint2 *>(prm.gamma) + i);
    uint2 y;
    y.x = (uint32_t)cl_out(x.x, rr, (uint16_t)g.x) | ((uint32_t)cl_out(x.y, rr, (uint16_t)(g.x >> 16)) << 16);
    y.y = (uint32_t)cl_out(x.z, rr, (uint16_t)g.y) | ((uint32_t)cl_out(x.w, rr, (uint16_t)(g.y >> 16)) << 16);
    reinterpret_cast<uint2 *>(prm.latent + t * DSV4_COMPRESS_DIM)[i] = y;
}

__global__ void __launch_bounds__(LATENT_RING_THREADS) latent_ring_kernel(const latent_params_t prm) {
    int64_t lo, hi;
    cl_store_rows(prm.qsl, blockIdx.x, prm.num_tokens, prm.ring_cap, &lo, &hi);
    for (int64_t t = lo; t < hi; ++t) {
        const int64_t rs = __ldg(prm.ring_slot + t);
        if (rs < 0 || rs >= prm.ring_rows) continue;
        const float4 v = __ldg(reinterpret_cast<const float4 *>(prm.kv_score + t * prm.kv_stride) + threadIdx.x);
        reinterpret_cast<float4 *>(prm.ring + rs * prm.ring_stride)[threadIdx.x] = v;
    }
}

extern "C" dsv4_status_t latent_launch(const dsv4_compress_desc_t *d, const latent_plan_t *plan,
                                       const dsv4_compress_args_t *a, dsv4_stream_t stream) {
    static int smem_r1, smem_r2, smem_ring;
    const bool r1 = d->ratio == 1;
    DSV4_TRY(dsv4_launch_prepare("compress", r1 ? (const void *)latent_kernel<1> : (const void *)latent_kernel<2>, 0,
                                 r1 ? &smem_r1 : &smem_r2));
    const latent_params_t prm = {a->kv_score, a->positions, a->slot,      a->ring_slot,      a->query_start_loc,
                                 a->gamma,    a->ring,      a->latent,    d->num_tokens,     plan->kv_stride,
                                 d->num_reqs, d->ring_cap,  d->ring_rows, plan->ring_stride, d->eps};
    const cudaStream_t s = (cudaStream_t)stream;
    if (r1) dsv4_launch(latent_kernel<1>, (unsigned)d->num_tokens, LATENT_THREADS, 0, s, prm);
    else dsv4_launch(latent_kernel<2>, (unsigned)d->num_tokens, LATENT_THREADS, 0, s, prm);
    DSV4_TRY(dsv4_launch_status("compress"));
    if (r1 || d->num_reqs == 0) return DSV4_STATUS_SUCCESS;
    DSV4_TRY(dsv4_launch_prepare("compress", (const void *)latent_ring_kernel, 0, &smem_ring));
    dsv4_launch(latent_ring_kernel, (unsigned)d->num_reqs, LATENT_RING_THREADS, 0, s, prm);
    return dsv4_launch_status("compress");
}
