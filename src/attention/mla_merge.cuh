/*
 * The split merge of one (token, head) row (spec/sparse-mla.md section 5), by 128
 * threads with 4 dims each, and its two homes:
 *   - mla_merge_kernel (sparse_mla_decode_kernel.cu): a second launch, one CTA per row;
 *   - merge CTAs appended to the attention launch (mla_tile.cuh), when the plan says so
 *     (plan.merge == 2): each waits for the completion flags of the S attention CTAs
 *     of its row (prim/grid_flag.cuh), which have lower block indices, so the merge
 *     overlaps the last splits instead of waiting for a second launch.
 * Both run the same operations in the same order: the same bits.
 *
 * The S (m, l) pairs are loaded once, in parallel (one thread per split, which in the
 * appended form first waits for that split's flag and resets it), then every thread
 * combines them in split order (the same bits in every thread); the acc rows are read 8
 * splits at a time (unrolled, so the loads overlap) and summed in split order; the sink
 * is added exactly once, through the same functions as the direct path
 * (mla_softmax.cuh). The partials are read through L2 (__ldcg): another CTA of this
 * launch wrote them.
 */
#ifndef DSV4_ATTENTION_MLA_MERGE_CUH
#define DSV4_ATTENTION_MLA_MERGE_CUH

#include <stdint.h>

#include "attention/mla_params.h"
#include "attention/mla_softmax.cuh"
#include "dsv4/attention.h"
#include "prim/grid_flag.cuh"
#include "prim/mma.cuh"

#define MLA_MERGE_THREADS 128
static_assert(DSV4_MLA_MAX_SPLITS <= MLA_MERGE_THREADS, "one thread per split loads (m, l)");

/* Thread lt (0..127) of the 128 that merge row (t, h); sm_m, sm_l: S floats each, this
 * row's own. WAIT: wait for (and reset) each split's flag first. Every thread of the CTA
 * must call it (it contains a __syncthreads). */
template <bool WAIT>
static __device__ __forceinline__ void mla_merge_row(const mla_params_t &p, int t, int h, int lt, float *sm_m,
                                                     float *sm_l) {
    const int H = p.num_heads, S = p.num_splits;
    const int64_t row0 = (int64_t)t * S * H + h; /* [t, s = 0, h]; split stride H */
    if (lt < S) {
        const int64_t r = row0 + (int64_t)lt * H;
        if (WAIT) { /* flags [t, h, s]: a row's S flags share a line */
            unsigned *flag = p.part_flags + ((int64_t)t * H + h) * S + lt;
            while (!dsv4_grid_flag_is_set(flag)) __nanosleep(64);
            __threadfence(); /* the partials published before the flag */
            *flag = 0u;      /* for the next call on this workspace */
        }
        sm_m[lt] = __ldcg(p.part_m + r);
        sm_l[lt] = __ldcg(p.part_l + r);
    }
    __syncthreads();
    float M = sm_m[0];
    for (int s = 1; s < S; ++s) M = fmaxf(M, sm_m[s]);
    M = mla_sink_max(M, p.sink, h);
    float w = mla_rescale(sm_m[0], M);
    float L = __fmul_rn(w, sm_l[0]);
    const float4 *pa = (const float4 *)(p.part_acc + row0 * 512) + lt;
    float4 a = __ldcg(pa);
    float x0 = __fmul_rn(w, a.x), x1 = __fmul_rn(w, a.y), x2 = __fmul_rn(w, a.z), x3 = __fmul_rn(w, a.w);
#pragma unroll 8 /* independent loads of 8 splits in flight; the sums stay in split order */
    for (int s = 1; s < S; ++s) {
        w = mla_rescale(sm_m[s], M);
        L = __fadd_rn(L, __fmul_rn(w, sm_l[s]));
        a = __ldcg(pa + (int64_t)s * H * 128);
        x0 = __fadd_rn(x0, __fmul_rn(w, a.x));
        x1 = __fadd_rn(x1, __fmul_rn(w, a.y));
        x2 = __fadd_rn(x2, __fmul_rn(w, a.z));
        x3 = __fadd_rn(x3, __fmul_rn(w, a.w));
    }
    L = mla_add_sink(L, p.sink, h, M);
    uint16_t *dst = p.out + (int64_t)t * p.o_st + (int64_t)h * p.o_sh + 4 * lt;
    *(uint2 *)dst = make_uint2(dsv4_pack_bf16x2(mla_normalize(x0, L), mla_normalize(x1, L)),
                               dsv4_pack_bf16x2(mla_normalize(x2, L), mla_normalize(x3, L)));
}

/* Rows merged by one CTA of `threads` threads (128 per row). */
static __host__ __device__ __forceinline__ int mla_merge_rows_per_cta(int threads) {
    return threads / MLA_MERGE_THREADS;
}

#endif
