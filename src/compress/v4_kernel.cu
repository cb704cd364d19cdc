/*
 * dsv4_compress_v4 kernels: the state save, then the pooled, normalized, rotated output
 * of every closing row: a 584-byte record (N = 512) or a 132-byte indexer state (N = 128).
 *
 * Formula (include/dsv4/compress.h): step 1 copies kv and score + ape[pos % r] into the
 * row's state slot; step 2, per closing row with a valid cache slot, pools the W window
 * rows dim by dim (m = max score, e = exp(s - m), num = sum kv * e, den = sum e in groups
 * of 8 rows, then a halving tree over groups), x = num / den, rr from the RMS tree, n =
 * (x * rr) * gamma in fp32, y = bf16(n) with the RoPE pairs of the last 64 dims rotated
 * from n, and stores y's record or indexer state.
 *
 * Decomposition. Three launches in stream order: v4_save_kernel (one CTA of 256 threads
 * per row, float4 copies), kvcache's claim kernel at N = 512 (duplicate slots:
 * kv_warp.cuh), then v4_compress_kernel (one CTA per row; rows that do not close or have
 * no slot return at once, uniformly). The separate save launch is what lets a step read
 * rows saved by the same call, from any CTA.
 *
 * v4_compress_kernel<R, N>: thread i of each group of N/4 threads owns dims 4i .. 4i + 3
 * (one 16-byte load per state row half). At ratio 4 one such group reads all 8 rows; at
 * ratio 128 four groups ("quarters") split the 16 row groups, quarter k taking groups
 * k, k + 4, k + 8, k + 12, so that the tree steps +8 and +4 stay inside a thread and
 * only +2 and +1 cross quarters (through shared memory), the reference's order exactly.
 * The window's row offsets are computed once per CTA (threads j < W) into shared
 * memory. Pass 1 takes the maximum score, pass 2 re-reads scores and kv (read-only path:
 * the state was stored by the previous launch) and sums. Quarter 0 then holds x. N = 512:
 * the norm uses latent_block.cuh's one-barrier tree (all threads pass its barrier), the
 * bf16 row y goes through shared memory and warp 0 quantizes and stores it with the
 * kvcache family's record writer (kv_warp_store_record): the same bytes as
 * dsv4_kv_insert. N = 128: quarter 0 is warp 0, which forms rr by an xor butterfly and
 * stores the state from its registers with the indexer's warp writer (idx_k_warp_store):
 * the same bytes as dsv4_indexer_k_store.
 *
 * Numerics: v4_math.h and latent_math.h, the reference's own functions, each operation
 * rounded on its own (__f*_rn), exp by the library's fixed polynomial: bit-exact with
 * the CPU reference.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "compress/latent_block.cuh"
#include "compress/v4_config.h"
#include "compress/v4_plan.h"
#include "kvcache/kv_common.h"
#include "indexer/indexer_k_warp.cuh"
#include "kvcache/kv_warp.cuh"

typedef struct {
    const float *kv_score, *ape, *cos_sin;
    const int64_t *positions, *state_slot, *slot_mapping;
    const int32_t *req_idx;
    const uint16_t *gamma;
    float *state;
    uint8_t *cache;
    v4_rows_t rows;
    int64_t ratio, kv_stride, width, P, page_stride_bytes, num_pages, max_position;
    kv_page_div_t page_div;
    float eps;
} v4_params_t;

__global__ void __launch_bounds__(V4_SAVE_THREADS) v4_save_kernel(const v4_params_t prm) {
    const int64_t t = blockIdx.x;
    const int64_t pos = __ldg(prm.positions + t), s = __ldg(prm.state_slot + t), B = prm.rows.state_block_rows;
    if (pos < 0 || s < 0 || s / B >= prm.rows.state_blocks) return;
    float4 *row =
        reinterpret_cast<float4 *>(prm.state + (s / B) * prm.rows.stride_block + (s % B) * prm.rows.stride_row);
    const float4 *src = reinterpret_cast<const float4 *>(prm.kv_score + t * prm.kv_stride);
    const float4 *ape = reinterpret_cast<const float4 *>(prm.ape + (pos % prm.ratio) * prm.width);
    const int half = (int)(prm.width / 4);
    for (int i = threadIdx.x; i < 2 * half; i += V4_SAVE_THREADS) {
        float4 v = __ldg(src + i);
        if (i >= half) {
            const float4 a = __ldg(ape + i - half);
            v = make_float4(CL_FADD(v.x, a.x), CL_FADD(v.y, a.y), CL_FADD(v.z, a.z), CL_FADD(v.w, a.w));
        }
        row[i] = v;
    }
}

static __device__ __forceinline__ float4 v4_max4(float4 m, float4 s) {
    return make_float4(v4_max_step(m.x, s.x), v4_max_step(m.y, s.y), v4_max_step(m.z, s.z), v4_max_step(m.w, s.w));
}
static __device__ __forceinline__ float4 v4_add4(float4 a, float4 b) {
    return make_float4(CL_FADD(a.x, b.x), CL_FADD(a.y, b.y), CL_FADD(a.z, b.z), CL_FADD(a.w, b.w));
}
/* One row's contribution to a group: den += e, num = fmaf(kv, e, num), e = exp(s - m). */
static __device__ __forceinline__ void v4_accum(float4 &num, float4 &den, float4 kv, float4 s, float4 m) {
    const float4 e = make_float4(v4_exp(CL_FADD(s.x, -m.x)), v4_exp(CL_FADD(s.y, -m.y)), v4_exp(CL_FADD(s.z, -m.z)),
                                 v4_exp(CL_FADD(s.w, -m.w)));
    den = v4_add4(den, e);
    num = make_float4(CL_FMA(kv.x, e.x, num.x), CL_FMA(kv.y, e.y, num.y), CL_FMA(kv.z, e.z, num.z),
                      CL_FMA(kv.w, e.w, num.w));
}
/* x of one dim: num / den, or 0 where no score exceeded -inf. */
static __device__ __forceinline__ float v4_pooled(float num, float den, float m) {
    return m == -INFINITY ? 0.0f : CL_FDIV(num, den);
}

/* The RMS factor of the pooled row, every thread ending with it: N = 512 through
 * latent_block.cuh (a barrier every thread passes; quarter 0 holds the row), N = 128 by the
 * indexer's warp butterfly (quarter 0 is warp 0; the other warps' value is unused). */
template <int N> static __device__ __forceinline__ float v4_rr(float *part, int i, bool active, float4 x, float eps) {
    if constexpr (N == 512) {
        return cl_block_rms_inv(part, i, active, x, eps);
    } else {
        return idx_k_warp_rms_inv(x.x, x.y, x.z, x.w, eps);
    }
}

template <int R, int N>
__global__ void __launch_bounds__(V4_THREADS(R, N), V4_MIN_BLOCKS(R, N)) v4_compress_kernel(const v4_params_t prm) {
    constexpr int Q = V4_QUARTERS(R), DT = V4_DIM_THREADS(N), W = V4_WINDOW(R), GPT = W / V4_GROUP / Q;
    constexpr int64_t WIDTH = V4_COFF(R) * N;
    __shared__ int64_t off[W];
    __shared__ float4 xch[2 * Q][DT];
    __shared__ float part[CL_PARTIALS];
    __shared__ __align__(16) uint16_t ybuf[N];

    const int64_t t = blockIdx.x;
    const int64_t pos = __ldg(prm.positions + t);
    int64_t first, page, p;
    if (!kv_group_closes(pos, R, &first) ||
        !kv_slot_locate(__ldg(prm.slot_mapping + t), prm.P, prm.page_div, prm.num_pages, &page, &p))
        return;
    const int tid = threadIdx.x, i = tid % DT, k = tid / DT;
    if (tid < W) off[tid] = v4_row(&prm.rows, R, pos, __ldg(prm.req_idx + t), tid);
    __syncthreads();

    /* pass 1: the maximum score of each dim over this thread's rows, then over quarters */
    const float4 *st = reinterpret_cast<const float4 *>(prm.state) + i;
    float4 m = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
#pragma unroll
    for (int g = 0; g < GPT; ++g) {
#pragma unroll
        for (int r = 0; r < V4_GROUP; ++r) {
            const int64_t o = off[(k + g * Q) * V4_GROUP + r];
            if (o >= 0) m = v4_max4(m, __ldg(st + (o + WIDTH) / 4));
        }
    }
    if (Q > 1) {
        xch[k][i] = m;
        __syncthreads();
        m = xch[0][i];
#pragma unroll
        for (int q = 1; q < Q; ++q) m = v4_max4(m, xch[q][i]);
        __syncthreads();
    }

    /* pass 2: group sums in row order, the tree steps inside the thread, then across quarters */
    float4 num[GPT], den[GPT];
#pragma unroll
    for (int g = 0; g < GPT; ++g) {
        num[g] = den[g] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int r = 0; r < V4_GROUP; ++r) {
            const int64_t o = off[(k + g * Q) * V4_GROUP + r];
            if (o >= 0) v4_accum(num[g], den[g], __ldg(st + o / 4), __ldg(st + (o + WIDTH) / 4), m);
        }
    }
#pragma unroll
    for (int h = GPT / 2; h >= 1; h /= 2) {
#pragma unroll
        for (int g = 0; g < h; ++g) num[g] = v4_add4(num[g], num[g + h]), den[g] = v4_add4(den[g], den[g + h]);
    }
    if (Q > 1) {
        xch[k][i] = num[0], xch[Q + k][i] = den[0];
        __syncthreads();
        if (k == 0) {
            float4 n[Q], d[Q];
#pragma unroll
            for (int q = 0; q < Q; ++q) n[q] = xch[q][i], d[q] = xch[Q + q][i];
#pragma unroll
            for (int h = Q / 2; h >= 1; h /= 2) {
#pragma unroll
                for (int q = 0; q < h; ++q) n[q] = v4_add4(n[q], n[q + h]), d[q] = v4_add4(d[q], d[q + h]);
            }
            num[0] = n[0], den[0] = d[0];
        }
    }
    const float4 x = make_float4(v4_pooled(num[0].x, den[0].x, m.x), v4_pooled(num[0].y, den[0].y, m.y),
                                 v4_pooled(num[0].z, den[0].z, m.z), v4_pooled(num[0].w, den[0].w, m.w));

    /* the norm, y (quarter 0: dims 4i .. 4i + 3), then the record or the indexer state */
    const float rr = v4_rr<N>(part, i, k == 0, x, prm.eps);
    uint2 y = make_uint2(0u, 0u);
    if (k == 0) {
        const uint2 g2 = __ldg(reinterpret_cast<const uint2 *>(prm.gamma) + i);
        const float n0 = cl_norm(x.x, rr, (uint16_t)g2.x), n1 = cl_norm(x.y, rr, (uint16_t)(g2.x >> 16));
        const float n2 = cl_norm(x.z, rr, (uint16_t)g2.y), n3 = cl_norm(x.w, rr, (uint16_t)(g2.y >> 16));
        if (4 * i < N - DSV4_KV_ROPE_DIM) {
            y.x = dsv4_f32_to_bf16(n0) | ((uint32_t)dsv4_f32_to_bf16(n1) << 16);
            y.y = dsv4_f32_to_bf16(n2) | ((uint32_t)dsv4_f32_to_bf16(n3) << 16);
        } else { /* RoPE pairs 2i - (N - 64) / 2 and the next, from the unrounded values */
            const int pr = (4 * i - (N - DSV4_KV_ROPE_DIM)) / 2;
            float c0, s0, c1, s1;
            kv_rope_coeff(prm.cos_sin, first, prm.max_position, pr, &c0, &s0);
            kv_rope_coeff(prm.cos_sin, first, prm.max_position, pr + 1, &c1, &s1);
            y.x = v4_rope(n0, n1, c0, s0);
            y.y = v4_rope(n2, n3, c1, s1);
        }
    }
    if constexpr (N == 128) { /* warp 0 holds the whole key */
        if (k == 0) idx_k_warp_store(y.x, y.y, i, prm.cache + page * prm.page_stride_bytes, prm.P, p);
    } else {
        if (k == 0) reinterpret_cast<uint2 *>(ybuf)[i] = y;
        __syncthreads();
        if (tid < 32) {
            uint32_t w[8];
            kv_row_load<false>(ybuf, tid, w);
            kv_warp_store_record(w, tid, prm.cache + kv_data_offset(page, p, prm.page_stride_bytes),
                                 prm.cache + kv_scale_offset(page, p, prm.P, prm.page_stride_bytes), t);
        }
    }
}

/* The compress kernel of a (ratio, N) pair and its threads per CTA. */
template <int R, int N> static void v4_compress_launch(unsigned grid, cudaStream_t s, const v4_params_t &prm) {
    dsv4_launch(v4_compress_kernel<R, N>, grid, V4_THREADS(R, N), 0, s, prm);
}

extern "C" dsv4_status_t v4_launch(const dsv4_compress_v4_desc_t *d, const v4_plan_t *pl,
                                   const dsv4_compress_v4_args_t *a, dsv4_stream_t stream) {
    static const char *const op = "compress_v4";
    static int smem_save, smem_kernel[4];
    const int which = (d->ratio == 4 ? 0 : 1) + (pl->head == 128 ? 2 : 0);
    static const void *const kernels[4] = {(const void *)v4_compress_kernel<4, 512>,
                                           (const void *)v4_compress_kernel<128, 512>,
                                           (const void *)v4_compress_kernel<4, 128>,
                                           (const void *)v4_compress_kernel<128, 128>};
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)v4_save_kernel, 0, &smem_save));
    DSV4_TRY(dsv4_launch_prepare(op, kernels[which], 0, &smem_kernel[which]));
    const v4_params_t prm = {
        a->kv_score,
        a->ape,
        a->cos_sin_cache,
        a->positions,
        a->state_slot,
        a->slot_mapping,
        a->req_idx,
        a->gamma,
        a->state,
        a->cache,
        v4_rows_make(d, pl, a->block_table),
        d->ratio,
        pl->kv_stride,
        pl->width,
        d->page_tokens,
        d->page_stride_bytes,
        d->num_pages,
        d->max_position,
        kv_page_div_make(d->page_tokens),
        d->eps,
    };
    const cudaStream_t s = (cudaStream_t)stream;
    const unsigned grid = (unsigned)d->num_tokens;
    dsv4_launch(v4_save_kernel, grid, V4_SAVE_THREADS, 0, s, prm);
    if (pl->head == 512) { /* duplicate slots: one row's whole record (kv_warp.cuh) */
        const kv_claim_params_t claims = {a->slot_mapping,
                                          a->positions,
                                          a->cache,
                                          d->num_tokens,
                                          d->page_tokens,
                                          d->page_stride_bytes,
                                          d->num_pages,
                                          d->ratio,
                                          kv_page_div_make(d->page_tokens),
                                          kv_page_div_make(d->ratio)};
        DSV4_TRY(kv_claim_launch(op, claims, s));
    }
    switch (which) {
    case 0: v4_compress_launch<4, 512>(grid, s, prm); break;
    case 1: v4_compress_launch<128, 512>(grid, s, prm); break;
    case 2: v4_compress_launch<4, 128>(grid, s, prm); break;
    default: v4_compress_launch<128, 128>(grid, s, prm); break;
    }
    return dsv4_launch_status(op);
}
