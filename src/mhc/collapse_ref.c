/*
 * CPU reference of the collapse: y = p0*R0, then fmaf(p_j, R_j, y) for
 * j = 1..3 (or y = R0 exactly without a pre-mix), yb = bf16(y); aux = bf16 of the
 * stream sum in order times 0.25; RMSNorm with ss accumulated in double over the fp32
 * squares (rounded yb for V4.1, fp32 y for V4), rn = 1 / sqrtf(ss / H + eps),
 * out = bf16((yb * rn) * w).
 */
#include <math.h>

#include "dsv4/numerics.h"
#include "mhc/mhc_host.h"

static float mhc_ref_collapse_channel(const uint16_t *R, int64_t H, int64_t h, const float *p) {
    if (!p) return dsv4_bf16_to_f32(R[h]);
    float y = p[0] * dsv4_bf16_to_f32(R[h]);
    for (int j = 1; j < 4; ++j) y = fmaf(p[j], dsv4_bf16_to_f32(R[j * H + h]), y);
    return y;
}

void mhc_collapse_ref_token(const uint16_t *R, int64_t H, const float *p, const uint16_t *w, float norm_eps,
                            int sq_rounded, uint16_t *out, uint16_t *aux) {
    double ss = 0.0;
    for (int64_t h = 0; h < H; ++h) {
        const float y = mhc_ref_collapse_channel(R, H, h, p);
        const uint16_t yb = dsv4_f32_to_bf16(y);
        const double q = sq_rounded ? (double)dsv4_bf16_to_f32(yb) : (double)y;
        ss += q * q;
        if (!w) out[h] = yb;
        if (aux) {
            float s = dsv4_bf16_to_f32(R[h]);
            for (int j = 1; j < 4; ++j) s = s + dsv4_bf16_to_f32(R[j * H + h]);
            aux[h] = dsv4_f32_to_bf16(s * 0.25f);
        }
    }
    if (!w) return;
    const float rn = 1.0f / sqrtf((float)ss / (float)H + norm_eps);
    for (int64_t h = 0; h < H; ++h) {
        const float yb = dsv4_round_bf16(mhc_ref_collapse_channel(R, H, h, p));
        out[h] = dsv4_f32_to_bf16((yb * rn) * dsv4_bf16_to_f32(w[h]));
    }
}
