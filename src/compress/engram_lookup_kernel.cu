/*
 * engram_lookup kernel: fetch Engram table rows by id and dequantize them to bf16.
 *
 * Formula (include/dsv4/compress.h): output row r = t * local_heads + j, column
 * h = head_start + j, id = ids[t * stride_token + h * stride_head] (h < n_cols); when
 * vocab_start <= id < vocab_end, with k = id - vocab_start,
 *     out[r, d] = bf16(e4m3(values[k, d]) * 2^(scales[k, d / 32] - 127))   (shift decode)
 * else out[r, d] = 0.
 *
 * Decomposition: work unit u = one 16-dim piece of one output row; row = u / (D / 16),
 * piece g = u % (D / 16). ENGRAM_THREADS threads per CTA, the grid capped at one resident
 * wave, each thread taking units u, u + nthreads, ... The output of unit u sits at
 * out + 16u whatever the row, so a warp stores 1 KiB contiguously (two 16-byte stores per
 * lane); the codes come as one plain 16-byte global load per lane (rows of D bytes,
 * contiguous for consecutive pieces), the scale as one byte (two pieces share it), the id
 * as a 4-byte load that the pieces of a row share (one broadcast). Plain loads for the
 * table, never cp.async or read-only-cache loads, so it may live in device memory or in
 * mapped pinned host memory alike. Unowned rows store zeros without reading the table.
 * Index math in 32 bits when every unit index fits, else 64 (a second instantiation).
 *
 * Numerics: dsv4_dequant_e4m3 of numerics.h per element, the reference's own function:
 * integer e4m3 decode, the scale as enc << 23 (enc 0 -> +0, 255 -> +inf), one fp32
 * product, integer RNE to bf16 (NaN -> 0x7FFF), no flush to zero. Bit-exact.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "compress/compress_common.h"
#include "compress/engram_lookup_config.h"
#include "dsv4/numerics.h"

typedef struct {
    const uint8_t *values, *scales;
    const int32_t *ids;
    uint16_t *out;
    int64_t units, pieces, local_heads, head_start, n_cols;
    int64_t ids_stride_token, ids_stride_head, vocab_start, vocab_end, values_stride_bytes, scales_stride_bytes;
} engram_params_t;

/* bf16 of the 4 codes of word c at scale sc, as two bf16x2 words. */
static __device__ __forceinline__ uint2 engram_dequant4(uint32_t c, float sc) {
    uint2 r;
    r.x = dsv4_dequant_e4m3((uint8_t)c, sc) | ((uint32_t)dsv4_dequant_e4m3((uint8_t)(c >> 8), sc) << 16);
    r.y = dsv4_dequant_e4m3((uint8_t)(c >> 16), sc) | ((uint32_t)dsv4_dequant_e4m3((uint8_t)(c >> 24), sc) << 16);
    return r;
}

template <typename Idx>
__global__ void __launch_bounds__(ENGRAM_THREADS, ENGRAM_MIN_BLOCKS) engram_kernel(const engram_params_t prm) {
    const Idx units = (Idx)prm.units, pieces = (Idx)prm.pieces, local = (Idx)prm.local_heads;
    const Idx step = (Idx)gridDim.x * ENGRAM_THREADS;
    for (Idx u = (Idx)blockIdx.x * ENGRAM_THREADS + threadIdx.x; u < units; u += step) {
        const Idx row = u / pieces, g = u - row * pieces, t = row / local;
        const int64_t h = prm.head_start + (int64_t)(row - t * local);
        uint4 lo = make_uint4(0, 0, 0, 0), hi = make_uint4(0, 0, 0, 0);
        if (h < prm.n_cols) {
            const int64_t id = __ldg(prm.ids + (int64_t)t * prm.ids_stride_token + h * prm.ids_stride_head);
            if (id >= prm.vocab_start && id < prm.vocab_end) {
                const int64_t k = id - prm.vocab_start;
                const uint4 c =
                    *reinterpret_cast<const uint4 *>(prm.values + k * prm.values_stride_bytes + (int64_t)g * 16);
                const float sc =
                    dsv4_ue8m0_to_f32(prm.scales[k * prm.scales_stride_bytes + (int64_t)(g / 2)]); /* 32 dims a byte */
                const uint2 a = engram_dequant4(c.x, sc), b = engram_dequant4(c.y, sc);
                const uint2 e = engram_dequant4(c.z, sc), f = engram_dequant4(c.w, sc);
                lo = make_uint4(a.x, a.y, b.x, b.y);
                hi = make_uint4(e.x, e.y, f.x, f.y);
            }
        }
        uint4 *o = reinterpret_cast<uint4 *>(prm.out + (int64_t)u * ENGRAM_PIECE);
        o[0] = lo;
        o[1] = hi;
    }
}

extern "C" dsv4_status_t engram_launch(const dsv4_engram_lookup_desc_t *d, const engram_plan_t *plan,
                                       const dsv4_engram_lookup_args_t *a, dsv4_stream_t stream) {
    static int smem_narrow, smem_wide;
    /* 32-bit indices while u + step cannot wrap: units < 2^31 and step < 2^31. */
    const bool narrow = plan->units <= INT32_MAX;
    DSV4_TRY(dsv4_launch_prepare("engram_lookup",
                                 narrow ? (const void *)engram_kernel<uint32_t> : (const void *)engram_kernel<uint64_t>,
                                 ENGRAM_SMEM_BYTES, narrow ? &smem_narrow : &smem_wide));
    unsigned blocks = 0;
    DSV4_TRY(cmp_grid("engram_lookup", plan->units, ENGRAM_THREADS, ENGRAM_CTAS_PER_SM, &blocks));
    const engram_params_t prm = {a->values,
                                 a->scales,
                                 a->ids,
                                 a->out,
                                 plan->units,
                                 d->head_dim / ENGRAM_PIECE,
                                 d->local_heads,
                                 d->head_start,
                                 d->n_cols,
                                 plan->ids_stride_token,
                                 plan->ids_stride_head,
                                 d->vocab_start,
                                 d->vocab_end,
                                 plan->values_stride_bytes,
                                 plan->scales_stride_bytes};
    if (narrow)
        dsv4_launch(engram_kernel<uint32_t>, blocks, ENGRAM_THREADS, ENGRAM_SMEM_BYTES, (cudaStream_t)stream, prm);
    else dsv4_launch(engram_kernel<uint64_t>, blocks, ENGRAM_THREADS, ENGRAM_SMEM_BYTES, (cudaStream_t)stream, prm);
    return dsv4_launch_status("engram_lookup");
}
