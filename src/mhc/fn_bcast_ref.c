/* CPU reference of dsv4_mhc_fn_bcast: four fp32 adds in stream order 0..3. */
#include "common/error.h"
#include "mhc/mhc_host.h"

dsv4_status_t dsv4_mhc_fn_bcast_ref(const dsv4_mhc_fn_bcast_desc_t *desc, const dsv4_mhc_fn_bcast_args_t *args) {
    DSV4_TRY(mhc_fn_bcast_setup(desc, args, 0));
    const int64_t H = desc->hidden;
    for (int64_t m = 0; m < 24; ++m)
        for (int64_t h = 0; h < H; ++h) {
            const float *f = args->fn + m * 4 * H + h;
            args->fn_bcast[m * H + h] = ((f[0] + f[H]) + f[2 * H]) + f[3 * H];
        }
    return DSV4_STATUS_SUCCESS;
}
