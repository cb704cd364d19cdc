/* CPU reference of dsv4_mhc_post: the fp32 operation order of the
 * contract, with fmaf written out; sqrsum accumulated in double over the stored values. */
#include <math.h>

#include "dsv4/numerics.h"
#include "mhc/mhc_host.h"

void mhc_post_ref_run(const dsv4_mhc_post_args_t *a, int64_t T, int64_t H, int64_t xs, int64_t rs, int64_t ros) {
    for (int64_t t = 0; t < T; ++t) {
        const float *pc = a->post + 4 * t, *cb = a->comb + 16 * t;
        const uint16_t *x = a->x + t * xs, *R = a->residual + t * rs;
        uint16_t *out = a->residual_out + t * ros;
        double sq = 0.0;
        for (int64_t h = 0; h < H; ++h) {
            const float xv = dsv4_bf16_to_f32(x[h]);
            for (int k = 0; k < 4; ++k) {
                float acc = pc[k] * xv;
                for (int j = 0; j < 4; ++j) acc = fmaf(cb[4 * j + k], dsv4_bf16_to_f32(R[j * H + h]), acc);
                out[k * H + h] = dsv4_f32_to_bf16(acc);
                const double v = dsv4_bf16_to_f32(out[k * H + h]);
                sq += v * v;
            }
        }
        if (a->sqrsum) a->sqrsum[t] = (float)sq;
    }
}
