/*
 * indexer_q kernel: query preparation of the lightning indexer.
 *
 * Formula (include/dsv4/indexer.h): per (token t, head h) row of 128 bf16 dims, the 32
 * RoPE pairs of dims 64..127 rotated at positions[t]; amax over the 128 values with NaN
 * left out; e the smallest integer with 448 * 2^e >= max(amax, 1e-4); codes
 * e4m3(x / 2^e) (saturating, no clamp); w = ((w_raw * 2^e) * softmax_scale) * head_scale.
 *
 * Decomposition: 16 lanes per row (IDX_Q_LANES_PER_ROW), lane j of the half-warp owning
 * dims 8j .. 8j + 7: one 16-byte load of q, one 8-byte store of codes, so a half-warp
 * reads the row's 256 bytes and writes its 128 code bytes as whole lines. Lanes 8..15
 * hold the RoPE dims (pairs 4(j-8) .. 4(j-8) + 3) and load their cos and sin as two
 * 16-byte read-only loads of the token's table row (shared by the token's heads, so
 * mostly cache hits). The row maximum is a 4-step xor butterfly inside the half-warp;
 * lane 0 of the row loads w_raw and stores w. A warp takes rows 2k and 2k + 1 and strides
 * over the grid; both halves stay in the loop together, so the full-warp shuffles are
 * legal when the row count is odd. No shared memory, no synchronization.
 *
 * Numerics: indexer_math.h, the reference's own functions: products rounded by __fmul_rn
 * before __fmaf_rn (no contraction), bf16 and e4m3 by the integer converters of
 * numerics.h, the exponent by the IEEE division of dsv4_ue8m0_from_amax. Bit-exact with
 * the CPU reference.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "indexer/indexer_common.h"
#include "indexer/indexer_config.h"
#include "indexer/indexer_math.h"

typedef struct {
    const uint16_t *q, *w_raw;
    const int64_t *positions;
    const float *cos_sin;
    uint8_t *q8;
    float *w;
    int64_t rows, heads, q_stride_token, q_stride_head, w_stride_token, max_position;
    float softmax_scale, head_scale;
} idx_q_params_t;

static __device__ __forceinline__ float bf_lo(uint32_t w) { return dsv4_bf16_to_f32((uint16_t)w); }
static __device__ __forceinline__ float bf_hi(uint32_t w) { return dsv4_bf16_to_f32((uint16_t)(w >> 16)); }

static __device__ __forceinline__ uint32_t pack4(float inv, float a, float b, float c, float d) {
    return (uint32_t)idx_q_code(a, inv) | ((uint32_t)idx_q_code(b, inv) << 8) | ((uint32_t)idx_q_code(c, inv) << 16) |
           ((uint32_t)idx_q_code(d, inv) << 24);
}

__global__ void __launch_bounds__(IDX_Q_THREADS, IDX_Q_MIN_BLOCKS) idx_q_kernel(const idx_q_params_t prm) {
    const int j = threadIdx.x % IDX_Q_LANES_PER_ROW;
    const int64_t half = threadIdx.x / IDX_Q_LANES_PER_ROW % 2;
    const int64_t warp = ((int64_t)blockIdx.x * IDX_Q_THREADS + threadIdx.x) / 32;
    const int64_t nwarps = (int64_t)gridDim.x * (IDX_Q_THREADS / 32);
    for (int64_t pair = warp; 2 * pair < prm.rows; pair += nwarps) {
        const int64_t row = 2 * pair + half;
        const bool live = row < prm.rows;
        const int64_t t = row / prm.heads, h = row - t * prm.heads;
        uint4 v = make_uint4(0, 0, 0, 0);
        int64_t pos = -1;
        if (live) {
            v = __ldg(reinterpret_cast<const uint4 *>(prm.q + t * prm.q_stride_token + h * prm.q_stride_head) + j);
            pos = __ldg(prm.positions + t);
        }
        if (j >= 8) { /* RoPE dims: pairs 4(j - 8) .. 4(j - 8) + 3 */
            float4 c = make_float4(1.0f, 1.0f, 1.0f, 1.0f), s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (live && idx_pos_in(pos, prm.max_position)) {
                const float4 *cs = reinterpret_cast<const float4 *>(prm.cos_sin + pos * 64);
                c = __ldg(cs + (j - 8));
                s = __ldg(cs + 8 + (j - 8));
            }
            v.x = idx_rope_word(v.x, c.x, s.x);
            v.y = idx_rope_word(v.y, c.y, s.y);
            v.z = idx_rope_word(v.z, c.z, s.z);
            v.w = idx_rope_word(v.w, c.w, s.w);
        }
        const float x[8] = {bf_lo(v.x), bf_hi(v.x), bf_lo(v.y), bf_hi(v.y),
                            bf_lo(v.z), bf_hi(v.z), bf_lo(v.w), bf_hi(v.w)};
        float amax = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) amax = idx_absmax(amax, x[i]);
#pragma unroll
        for (int o = IDX_Q_LANES_PER_ROW / 2; o > 0; o >>= 1)
            amax = idx_absmax(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        if (!live) continue;
        const uint8_t enc = dsv4_ue8m0_from_amax(amax);
        const float inv = dsv4_ue8m0_inv_scale(enc);
        const uint2 codes = make_uint2(pack4(inv, x[0], x[1], x[2], x[3]), pack4(inv, x[4], x[5], x[6], x[7]));
        reinterpret_cast<uint2 *>(prm.q8 + row * DSV4_INDEXER_HEAD_DIM)[j] = codes;
        if (j == 0)
            prm.w[row] = idx_q_weight(dsv4_bf16_to_f32(__ldg(prm.w_raw + t * prm.w_stride_token + h)),
                                      dsv4_ue8m0_to_f32(enc), prm.softmax_scale, prm.head_scale);
    }
}

extern "C" dsv4_status_t idx_q_launch(const dsv4_indexer_q_desc_t *d, const idx_q_plan_t *plan,
                                      const dsv4_indexer_q_args_t *a, dsv4_stream_t stream) {
    static int smem;
    DSV4_TRY(dsv4_launch_prepare("indexer_q", (const void *)idx_q_kernel, IDX_SMEM_BYTES, &smem));
    const idx_q_params_t prm = {a->q,
                                a->w_raw,
                                a->positions,
                                a->cos_sin,
                                a->q8,
                                a->w,
                                plan->rows,
                                d->num_heads,
                                plan->q_stride_token,
                                plan->q_stride_head,
                                plan->w_stride_token,
                                d->max_position,
                                plan->softmax_scale,
                                plan->head_scale};
    dsv4_launch(idx_q_kernel, plan->blocks, IDX_Q_THREADS, IDX_SMEM_BYTES, (cudaStream_t)stream, prm);
    return dsv4_launch_status("indexer_q");
}
