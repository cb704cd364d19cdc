/*
 * inv_rope kernel: rotate the RoPE dims of the attention output back, in place.
 *
 * Formula (include/dsv4/compress.h): token t, live head h, pair i < 32 of dims 448..511,
 * c = cos_sin[pos * 64 + i], s = cos_sin[pos * 64 + 32 + i] at pos = position_ids[t]
 * ((1, 0) outside [0, max_position)); a = o[t, h, 448 + 2i], b = o[t, h, 449 + 2i]:
 *     o[t, h, 448 + 2i] = bf16(fmaf(a, c, b * s)),  o[t, h, 449 + 2i] = bf16(fmaf(b, c, -(a * s)))
 * Dims 0..447 and padding heads are never read or written.
 *
 * Decomposition: work unit u = one 16-byte segment (4 pairs) of one live head row;
 * row = u / 8 = t * num_heads + h, segment g = u % 8 (dims 448 + 8g .. 448 + 8g + 7).
 * INV_ROPE_THREADS threads per CTA, the grid capped at one resident wave; each thread
 * takes units u, u + nthreads, ... So 8 consecutive lanes cover one row's 128 bytes and a
 * warp 4 rows: one full-line 16-byte load and store per lane. The lane's cos and sin come
 * as two 16-byte read-only loads of the token's table row (shared by the heads of the
 * token, so mostly L1/L2 hits). Index math in 32 bits when every unit index fits, else
 * 64 (a second instantiation). No shared memory, no synchronization.
 *
 * Numerics: inv_rope_word (inv_rope_pair.h), the reference's own function: products
 * rounded by __fmul_rn before __fmaf_rn (no contraction), bf16 by the integer RNE of
 * numerics.h. Bit-exact with the CPU reference.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "compress/compress_common.h"
#include "compress/inv_rope_config.h"
#include "compress/inv_rope_pair.h"

typedef struct {
    uint16_t *o;
    const int64_t *position_ids;
    const float *cos_sin;
    int64_t units, heads, o_stride_token, o_stride_head, max_position;
} inv_rope_params_t;

template <typename Idx>
__global__ void __launch_bounds__(INV_ROPE_THREADS, INV_ROPE_MIN_BLOCKS) inv_rope_kernel(const inv_rope_params_t prm) {
    const Idx units = (Idx)prm.units, heads = (Idx)prm.heads, step = (Idx)gridDim.x * INV_ROPE_THREADS;
    for (Idx u = (Idx)blockIdx.x * INV_ROPE_THREADS + threadIdx.x; u < units; u += step) {
        const Idx row = u / INV_ROPE_SEGS_PER_ROW, t = row / heads, h = row - t * heads;
        const int g = (int)(u % INV_ROPE_SEGS_PER_ROW);
        uint4 *seg = reinterpret_cast<uint4 *>(prm.o + (int64_t)t * prm.o_stride_token +
                                               (int64_t)h * prm.o_stride_head + DSV4_INV_ROPE_FIRST_DIM) +
                     g;
        uint4 w = *seg; /* written back below: not a read-only load */
        const int64_t pos = __ldg(prm.position_ids + t);
        float4 c = make_float4(1.0f, 1.0f, 1.0f, 1.0f), s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (inv_rope_pos_in(pos, prm.max_position)) {
            const float4 *cs = reinterpret_cast<const float4 *>(prm.cos_sin + pos * 64);
            c = __ldg(cs + g);     /* cos of pairs 4g .. 4g + 3 */
            s = __ldg(cs + 8 + g); /* their sin, 32 columns on */
        }
        w.x = inv_rope_word(w.x, c.x, s.x);
        w.y = inv_rope_word(w.y, c.y, s.y);
        w.z = inv_rope_word(w.z, c.z, s.z);
        w.w = inv_rope_word(w.w, c.w, s.w);
        *seg = w;
    }
}

extern "C" dsv4_status_t inv_rope_launch(const dsv4_inv_rope_desc_t *d, const inv_rope_plan_t *plan,
                                         const dsv4_inv_rope_args_t *a, dsv4_stream_t stream) {
    static int smem_narrow, smem_wide;
    /* 32-bit indices while u + step cannot wrap: units < 2^31 and step < 2^31. */
    const bool narrow = plan->units <= INT32_MAX;
    DSV4_TRY(
        dsv4_launch_prepare("inv_rope",
                            narrow ? (const void *)inv_rope_kernel<uint32_t> : (const void *)inv_rope_kernel<uint64_t>,
                            INV_ROPE_SMEM_BYTES, narrow ? &smem_narrow : &smem_wide));
    unsigned blocks = 0;
    DSV4_TRY(cmp_grid("inv_rope", plan->units, INV_ROPE_THREADS, INV_ROPE_CTAS_PER_SM, &blocks));
    const inv_rope_params_t prm = {a->o,         a->position_ids,      a->cos_sin_cache,    plan->units,
                                   d->num_heads, plan->o_stride_token, plan->o_stride_head, d->max_position};
    if (narrow)
        dsv4_launch(inv_rope_kernel<uint32_t>, blocks, INV_ROPE_THREADS, INV_ROPE_SMEM_BYTES, (cudaStream_t)stream,
                    prm);
    else
        dsv4_launch(inv_rope_kernel<uint64_t>, blocks, INV_ROPE_THREADS, INV_ROPE_SMEM_BYTES, (cudaStream_t)stream,
                    prm);
    return dsv4_launch_status("inv_rope");
}
