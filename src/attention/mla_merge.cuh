/*
 * The split merge of one (token, head) row (include/dsv4/attention.h, Finalisation), by
 * 128 threads with 4 dims each, and its two homes:
 *   - mla_merge_kernel (sparse_mla_decode_kernel.cu): a second launch, one CTA per row;
 *   - merge CTAs appended to the attention launch (mla_tile.cuh), when the plan says so
 *     (plan.merge == 2): each waits for the completion flags of the S attention CTAs
 *     of its row (prim/grid_flag.cuh), which have lower block indices, so the merge
 *     overlaps the last splits instead of waiting for a second launch.
 * Both run the same operations in the same order: the same bits.
 *
 * Each warp of the 128 works alone (no shared memory, no CTA barrier before the
 * output): lane s < S loads split s's (m, l) while every lane issues its acc loads
 * (4 dims, B splits at a time, all in flight), so a row costs one L2 round trip per
 * batch of B: 32 (all splits) in the merge CTAs of h16w4 and h32w4, 8 in those of the
 * 8-warp configs (h32w8's 128-register cap spills with more); the second-launch
 * kernel uses 2 or 8 (sparse_mla_decode_kernel.cu says why). M is a warp max (exact in
 * any order: no m is NaN), then the sums run in split order with w_s and l_s shuffled
 * from lane s; the sink is added exactly once, through the same functions as the
 * direct path (mla_softmax.cuh). The partials are read through L2 (__ldcg): another
 * CTA of this launch may have written them.
 */
#ifndef DSV4_ATTENTION_MLA_MERGE_CUH
#define DSV4_ATTENTION_MLA_MERGE_CUH

#include <float.h>
#include <stdint.h>

#include "attention/mla_params.h"
#include "attention/mla_softmax.cuh"
#include "attention/sparse_mla_config.h"
#include "dsv4/attention.h"
#include "prim/grid_flag.cuh"
#include "prim/mma.cuh"

#ifndef MLA_MERGE_POLL_NS /* back-off between two looks at a row's flags (shorter: no faster) */
#define MLA_MERGE_POLL_NS 64
#endif
static_assert(DSV4_MLA_MAX_SPLITS <= 32, "one lane per split holds (m, l)");

/* Thread lt (0..127) of the 128 that merge row (t, h). WAIT: each warp first waits for
 * the row's S flags, and after a CTA barrier the first S threads reset them. Every
 * thread of the CTA must call it when WAIT (it contains a __syncthreads). */
template <bool WAIT, int B>
static __device__ __forceinline__ void mla_merge_row(const mla_params_t &p, int t, int h, int lt) {
    const int H = p.num_heads, S = p.num_splits, lane = lt & 31;
    const int64_t row0 = (int64_t)t * S * H + h;                                   /* [t, s = 0, h]; split stride H */
    unsigned *flag = WAIT ? p.part_flags + ((int64_t)t * H + h) * S + lane : NULL; /* [t, h, s] */
    bool lost = false; /* the flags did not come (another call in flight on this workspace) */
    if (WAIT) {
        unsigned looks = 0;
        while (!__all_sync(0xffffffffu, lane >= S || dsv4_grid_flag_is_set(flag, p.flag_tag))) {
            if (++looks == DSV4_GRID_WAIT_POLLS) {
                lost = true;
                break;
            }
            __nanosleep(MLA_MERGE_POLL_NS);
        }
        __threadfence(); /* the partials published before the flags */
    }
    const float4 *pa = (const float4 *)(p.part_acc + row0 * 512) + lt;
    float4 a[B];
    const auto load_batch = [&](int s0) { /* splits s0 .. s0 + B - 1, all in flight */
#pragma unroll
                                          for (int i = 0; i < B; ++i)
                                              if (s0 + i < S) a[i] = __ldcg(pa + (int64_t)(s0 + i) * H * 128);
    };
    load_batch(0); /* before the (m, l) loads: both round trips overlap */
    const mla_row_sink sink = mla_load_row_sink(p.sink, h);
    float m = -FLT_MAX, l = 0.0f; /* lane s: split s */
    if (lane < S) {
        m = __ldcg(p.part_m + row0 + (int64_t)lane * H);
        l = __ldcg(p.part_l + row0 + (int64_t)lane * H);
    }
    float M = m;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, off));
    M = mla_sink_max(M, sink);
    const float w_lane = mla_rescale(m, M);
    float L = 0.0f, x0 = 0.0f, x1 = 0.0f, x2 = 0.0f, x3 = 0.0f;
    for (int s0 = 0; s0 < S; s0 += B) {
        if (s0 > 0) load_batch(s0);
#pragma unroll
        for (int i = 0; i < B; ++i) {
            if (s0 + i >= S) break;
            const float w = __shfl_sync(0xffffffffu, w_lane, s0 + i), ls = __shfl_sync(0xffffffffu, l, s0 + i);
            if (s0 + i == 0) { /* w_0 * x_0: no "0 +" step (mla_softmax.cuh) */
                L = __fmul_rn(w, ls);
                x0 = __fmul_rn(w, a[i].x), x1 = __fmul_rn(w, a[i].y), x2 = __fmul_rn(w, a[i].z),
                x3 = __fmul_rn(w, a[i].w);
            } else {
                L = __fadd_rn(L, __fmul_rn(w, ls));
                x0 = __fadd_rn(x0, __fmul_rn(w, a[i].x));
                x1 = __fadd_rn(x1, __fmul_rn(w, a[i].y));
                x2 = __fadd_rn(x2, __fmul_rn(w, a[i].z));
                x3 = __fadd_rn(x3, __fmul_rn(w, a[i].w));
            }
        }
    }
    L = mla_add_sink(L, sink, M);
    uint16_t *dst = p.out + (int64_t)t * p.o_st + (int64_t)h * p.o_sh + 4 * lt;
    if (WAIT && lost) L = __int_as_float(0x7FFFFFFF); /* NaN dims: the failure shows (attention.h) */
    *(uint2 *)dst = make_uint2(dsv4_pack_bf16x2(mla_normalize(x0, L), mla_normalize(x1, L)),
                               dsv4_pack_bf16x2(mla_normalize(x2, L), mla_normalize(x3, L)));
    if (WAIT) {
        __syncthreads();        /* every warp of the row has seen the flags */
        if (lt < S) *flag = 0u; /* for the next call on this workspace */
    }
}

#endif
