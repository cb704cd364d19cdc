/*
 * CPU reference of dsv4_engram_lookup: plain loops over output rows and dims, each owned
 * element through numerics.h's dsv4_dequant_e4m3 (e4m3 decode, one fp32 product with the
 * shift-decoded scale, RNE to bf16); rows not owned are zeros.
 */
#include <string.h>

#include "compress/compress_common.h"
#include "dsv4/numerics.h"

dsv4_status_t engram_ref_run(const dsv4_engram_lookup_desc_t *d, const engram_plan_t *plan,
                             const dsv4_engram_lookup_args_t *a) {
    const int64_t D = d->head_dim;
    for (int64_t r = 0; r < plan->rows; ++r) {
        const int64_t t = r / d->local_heads, h = d->head_start + r % d->local_heads;
        const int64_t id = h < d->n_cols ? a->ids[t * plan->ids_stride_token + h * plan->ids_stride_head] : -1;
        uint16_t *out = a->out + r * D;
        if (h >= d->n_cols || id < d->vocab_start || id >= d->vocab_end) {
            memset(out, 0, (size_t)D * sizeof *out);
            continue;
        }
        const uint8_t *v = a->values + (id - d->vocab_start) * plan->values_stride_bytes;
        const uint8_t *s = a->scales + (id - d->vocab_start) * plan->scales_stride_bytes;
        for (int64_t i = 0; i < D; ++i) out[i] = dsv4_dequant_e4m3(v[i], dsv4_ue8m0_to_f32(s[i / DSV4_ENGRAM_BLOCK]));
    }
    return DSV4_STATUS_SUCCESS;
}
