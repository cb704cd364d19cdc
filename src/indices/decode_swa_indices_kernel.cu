/*
 * Decode SWA index lists (include/dsv4/indices.h, section 3).
 *
 * Formula, per decode token t (req = token_to_req[t], pos = positions[t]):
 *     len = (req in [0, R) and pos >= 0) ? min(pos + 1, W) : 0,   start = pos - len + 1
 *     out[t, j] = j < len and (start + j) / P < width
 *               ? table[req, (start + j) / P] * P + (start + j) % P     (int32, wraps)
 *               : -1                                                    for j < W
 *     lens[t] = is_valid[t] ? len : 0
 * The division by P is the cache format's multiply-high (common/kv_format.h).
 *
 * Decomposition: grid ceil(T / 4) CTAs of 4 warps; warp w of CTA b owns row 4b + w; lane l
 * owns the 4-column chunks l + 32k (one 16-byte streaming store per lane for W = 128, or
 * element stores when the row layout does not allow 16-byte stores). Every element has
 * exactly one writer. The window's positions are consecutive, so the lanes' table reads
 * fall on at most ceil(W / P) + 1 entries of one row and hit the cache.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "indices/decode_swa_indices_config.h"
#include "indices/index_device.cuh"

template <bool VEC> __global__ void __launch_bounds__(DSV4_DSW_THREADS) dsw_kernel(const dsv4_dsw_params_t p) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t t = (int64_t)blockIdx.x * DSV4_DSW_WARPS + warp;
    if (t >= p.num_tokens) return; /* whole warps; no CTA barrier in this kernel */
    const int req = __ldg(p.token_to_req + t);
    const int pos = __ldg(p.positions + t);
    const bool valid = __ldg(p.is_valid + t) != 0;
    const bool rok = (unsigned)req < (unsigned)p.num_reqs;
    /* min(pos + 1, W) written so that pos = 2^31 - 1 does not overflow. */
    const int len = (rok && pos >= 0) ? min(pos, p.window - 1) + 1 : 0;
    /* Unsigned: pos = 2^31-1 with len = 0 must not overflow; used only when len > 0 (then >= 0). */
    const uint32_t start = (uint32_t)pos - (uint32_t)len + 1u;
    const int32_t *tab = p.table + (int64_t)(rok ? req : 0) * p.block_table_stride;
    int32_t *row = p.out + t * p.out_stride;
    const uint32_t P = (uint32_t)p.page_tokens;
    for (int c = lane; 4 * c < p.window; c += 32) {
        int o[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int j = 4 * c + e;
            o[e] = -1;
            if (j < len) {
                const uint32_t q = start + (uint32_t)j;
                const uint32_t page = kv_page_div(q, p.page_div.magic, p.page_div.shift);
                if (page < (uint32_t)p.block_table_width)
                    o[e] = (int)((uint32_t)__ldg(tab + page) * P + (q - page * P));
            }
        }
        dsv4_idx_store4<VEC>(row, c, o, p.window);
    }
    if (lane == 0) p.lens[t] = valid ? len : 0;
}

extern "C" dsv4_status_t dsv4_decode_swa_indices_launch(const dsv4_dsw_params_t *p, dsv4_stream_t stream) {
    static const char *op = "decode_swa_indices";
    static int smem[2];
    if (p->num_tokens == 0) return DSV4_STATUS_SUCCESS;
    const void *k = p->vec ? (const void *)dsw_kernel<true> : (const void *)dsw_kernel<false>;
    DSV4_TRY(dsv4_launch_prepare(op, k, 0, &smem[p->vec != 0]));
    const unsigned grid = (unsigned)(((int64_t)p->num_tokens + DSV4_DSW_WARPS - 1) / DSV4_DSW_WARPS);
    if (p->vec) dsv4_launch(dsw_kernel<true>, grid, DSV4_DSW_THREADS, 0, (cudaStream_t)stream, *p);
    else dsv4_launch(dsw_kernel<false>, grid, DSV4_DSW_THREADS, 0, (cudaStream_t)stream, *p);
    return dsv4_launch_status(op);
}
