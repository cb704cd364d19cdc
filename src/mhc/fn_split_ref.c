/* CPU reference of dsv4_mhc_fn_split: hi = bf16(fn), lo = bf16(fn - hi) with one fp32
 * subtraction, as mhc_fn_split_kernel computes them. */
#include "common/error.h"
#include "dsv4/numerics.h"
#include "mhc/mhc_host.h"

dsv4_status_t dsv4_mhc_fn_split_ref(const dsv4_mhc_fn_split_desc_t *desc, const dsv4_mhc_fn_split_args_t *args) {
    int64_t K = 0;
    DSV4_TRY(mhc_fn_split_setup(desc, args, 0, &K));
    for (int64_t i = 0; i < 24 * K; ++i) {
        const float f = args->fn[i];
        const uint16_t hi = dsv4_f32_to_bf16(f);
        args->fn_split[i] = hi;
        args->fn_split[24 * K + i] = dsv4_f32_to_bf16(f - dsv4_bf16_to_f32(hi));
    }
    return DSV4_STATUS_SUCCESS;
}
