/*
 * CPU reference of the gates pipeline, shared by dsv4_mhc_gates_ref, dsv4_mhc_pre_ref and
 * dsv4_mhc_seam_ref.
 *
 * Per token: the producer values (post-apply in the contract's fmaf order, the residual,
 * or the broadcast embedding) and their stored bf16 copies; the projection in double
 * over what the planned route reads (the stored bf16 values, or with
 * plan.unrounded_input the fp32 post-apply values), rounded once to fp32; then RMS, gates and
 * Sinkhorn in fp32 in the order include/dsv4/mhc.h fixes (true divisions, sums in index order 0..3);
 * then the collapse (collapse_ref.c) with the incoming pre-mix (V4.1) or the fresh
 * pre (V4).
 */
#include <math.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "mhc/mhc_host.h"

static float mhc_ref_sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

static void mhc_ref_sinkhorn(const float L[16], float eps, int iters, float C[16]) {
    for (int j = 0; j < 4; ++j) {
        const float *l = L + 4 * j;
        const float mx = fmaxf(fmaxf(fmaxf(l[0], l[1]), l[2]), l[3]);
        float ex[4];
        for (int k = 0; k < 4; ++k) ex[k] = expf(l[k] - mx);
        const float s = ((ex[0] + ex[1]) + ex[2]) + ex[3];
        for (int k = 0; k < 4; ++k) C[4 * j + k] = ex[k] / s + eps;
    }
    for (int it = 0; it < iters; ++it) {
        if (it > 0)
            for (int j = 0; j < 4; ++j) {
                float *c = C + 4 * j;
                const float d = (((c[0] + c[1]) + c[2]) + c[3]) + eps;
                for (int k = 0; k < 4; ++k) c[k] = c[k] / d;
            }
        for (int k = 0; k < 4; ++k) {
            const float d = (((C[k] + C[4 + k]) + C[8 + k]) + C[12 + k]) + eps;
            for (int j = 0; j < 4; ++j) C[4 * j + k] = C[4 * j + k] / d;
        }
    }
}

void mhc_gates_ref_token(const float raw[24], float sq, float numel, const float *scale, const float *base,
                         const dsv4_mhc_gate_params_t *g, float post[4], float comb[16], float pre[4], float mix[24]) {
    const float rms = 1.0f / sqrtf(sq / numel + g->rms_eps);
    float m[24], L[16];
    for (int i = 0; i < 24; ++i) {
        m[i] = raw[i] * rms;
        if (mix) mix[i] = m[i];
    }
    for (int j = 0; j < 4; ++j) {
        const float pj = mhc_ref_sigmoid(fmaf(m[j], scale[0], base[j])) + g->pre_eps;
        if (pre) pre[j] = pj;
        post[j] = mhc_ref_sigmoid(fmaf(m[4 + j], scale[1], base[4 + j])) * g->post_mult;
    }
    for (int e = 0; e < 16; ++e) L[e] = fmaf(m[8 + e], scale[2], base[8 + e]);
    mhc_ref_sinkhorn(L, g->sinkhorn_eps, g->sinkhorn_iters, comb);
}

/* The producer's value of stream s at channel h: r (fp32, what the small-T route
 * projects) and its stored bf16 bits rb. */
static void mhc_ref_produce(const mhc_pipe_t *p, int64_t t, int64_t h, float r[4], uint16_t rb[4]) {
    const int64_t H = p->H;
    const uint16_t *R = p->res + t * p->res_stride;
    if (p->prod == MHC_PROD_POST) {
        const float *pc = p->post_in + 4 * t, *cb = p->comb_in + 16 * t;
        const float x = dsv4_bf16_to_f32(p->x[t * p->x_stride + h]);
        for (int k = 0; k < 4; ++k) {
            float acc = pc[k] * x;
            for (int j = 0; j < 4; ++j) acc = fmaf(cb[4 * j + k], dsv4_bf16_to_f32(R[j * H + h]), acc);
            r[k] = acc;
            rb[k] = dsv4_f32_to_bf16(acc);
        }
        return;
    }
    for (int s = 0; s < 4; ++s) {
        rb[s] = p->prod == MHC_PROD_BCAST ? R[h] : R[s * H + h];
        r[s] = dsv4_bf16_to_f32(rb[s]);
    }
}

void mhc_pipe_ref_run(const mhc_pipe_t *p) {
    const int64_t T = p->T, H = p->H;
    const int ns = p->prod == MHC_PROD_BCAST ? 1 : 4;
    const int64_t K = ns * H;
    const int unrounded = p->plan.unrounded_input;
    for (int64_t t = 0; t < T; ++t) {
        double acc[24], sq = 0.0;
        memset(acc, 0, sizeof acc);
        uint16_t *out = p->res_out ? p->res_out + t * p->res_out_stride : NULL;
        for (int64_t h = 0; h < H; ++h) {
            float r[4];
            uint16_t rb[4];
            mhc_ref_produce(p, t, h, r, rb);
            if (out && p->prod != MHC_PROD_RES)
                for (int s = 0; s < 4; ++s) out[s * H + h] = rb[s];
            for (int s = 0; s < ns; ++s) {
                const double X = unrounded ? (double)r[s] : (double)dsv4_bf16_to_f32(rb[s]);
                sq += X * X;
                for (int m = 0; m < 24; ++m) acc[m] += X * (double)p->fn[m * K + s * H + h];
            }
        }
        float raw[24], pre[4];
        for (int m = 0; m < 24; ++m) raw[m] = (float)acc[m];
        const float sqf = p->sqrsum_in ? p->sqrsum_in[t] : (float)sq;
        mhc_gates_ref_token(raw, sqf, (float)p->rms_numel, p->scale, p->base, &p->gate, p->post_out + 4 * t,
                            p->comb_out + 16 * t, pre, p->mix_out ? p->mix_out + 24 * t : NULL);
        if (p->pre_out) memcpy(p->pre_out + 4 * t, pre, sizeof pre);
        if (p->epi == MHC_EPI_GATES) continue;
        const float *pm = p->epi == MHC_EPI_IMMEDIATE ? pre : (p->pre_mix ? p->pre_mix + 4 * t : NULL);
        mhc_collapse_ref_token(p->col_src + t * p->col_src_stride, H, pm, p->norm_w, p->norm_eps, p->sq_rounded,
                               p->li + t * p->li_stride, p->aux ? p->aux + t * p->aux_stride : NULL);
    }
}
