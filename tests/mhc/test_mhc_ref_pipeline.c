/*
 * CPU tests of the pipeline references (seam, pre, gates with broadcast): each is
 * checked against the standalone references (post, collapse, gates: the fused op must
 * reproduce them) and against the fp64 models of mhc_test.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"
#include "mhc_test.h"
#include "test_mhc.h"

typedef struct {
    uint16_t *R_out, *li, *aux;
    float *post, *comb, *pre, *mix;
} seam_out_t;

static void seam_out_alloc(seam_out_t *o, const mt_seam_in_t *in) {
    o->R_out = malloc((size_t)(in->T * in->ros) * 2);
    o->li = malloc((size_t)(in->T * in->lis) * 2);
    o->aux = malloc((size_t)(in->T * in->auxs) * 2);
    o->post = malloc((size_t)(4 * in->T) * sizeof(float));
    o->comb = malloc((size_t)(16 * in->T) * sizeof(float));
    o->pre = malloc((size_t)(4 * in->T) * sizeof(float));
    o->mix = malloc((size_t)(24 * in->T) * sizeof(float));
}

static void seam_out_free(seam_out_t *o) {
    free(o->R_out);
    free(o->li);
    free(o->aux);
    free(o->post);
    free(o->comb);
    free(o->pre);
    free(o->mix);
}

static void seam_ref_case(th_ctx_t *t, int64_t T, int64_t H, int variant, int route, int premix, int norm, int aux,
                          int strided) {
    th_rng_t *r = th_rng(t);
    mt_seam_in_t in;
    mt_seam_in_make(r, &in, T, H, strided, premix, norm, 1);
    seam_out_t o;
    seam_out_alloc(&o, &in);
    const float norm_eps = variant == DSV4_MHC_V4 ? 1e-6f : 1e-20f;
    dsv4_mhc_seam_desc_t d = {T,     H,      variant, route,  mt_gate_params(variant == DSV4_MHC_V4), norm_eps, in.xs,
                              in.rs, in.ros, in.lis,  in.auxs};
    dsv4_mhc_seam_args_t a = {in.x,    in.R,   in.post, in.comb, in.fn, in.scale,           in.base, in.premix, in.w,
                              o.R_out, o.post, o.comb,  o.pre,   o.li,  aux ? o.aux : NULL, o.mix,   NULL};
    TH_OK(t, dsv4_mhc_seam_ref(&d, &a));
    dsv4_mhc_plan_t pl;
    TH_OK(t, dsv4_mhc_plan(T, H, 0, route, &pl));
    char name[160];
    snprintf(name, sizeof name, "seam ref %s T=%lld H=%lld route=%s premix=%d norm=%d aux=%d strided=%d",
             variant ? "V4" : "V4.1", (long long)T, (long long)H,
             pl.route == DSV4_MHC_ROUTE_SMALL_T ? "small-T" : "tensor-core", premix, norm, aux, strided);
    th_note(t, "%s", name);

    /* R_out is the standalone post, bit for bit */
    uint16_t *R2 = malloc((size_t)(T * in.ros) * 2);
    dsv4_mhc_post_desc_t pd = {T, H, in.xs, in.rs, in.ros};
    dsv4_mhc_post_args_t pa = {in.x, in.R, in.post, in.comb, R2, NULL};
    TH_OK(t, dsv4_mhc_post_ref(&pd, &pa));
    mt_cmp_bf16(t, "seam R_out vs post", o.R_out, in.ros, R2, in.ros, T, NULL, 4, H, 0);

    /* layer input and aux are the standalone collapse of R_out with the incoming pre-mix
     * (V4.1) or the fresh pre (V4), bit for bit */
    uint16_t *li2 = malloc((size_t)(T * H) * 2), *aux2 = malloc((size_t)(T * H) * 2);
    dsv4_mhc_collapse_desc_t cd = {T, H, variant, norm_eps, in.ros, H, H};
    dsv4_mhc_collapse_args_t ca = {R2, variant == DSV4_MHC_V4 ? o.pre : in.premix, in.w, li2, aux2};
    TH_OK(t, dsv4_mhc_collapse_ref(&cd, &ca));
    mt_cmp_bf16(t, "seam layer_input vs collapse", o.li, in.lis, li2, H, T, NULL, 1, H, 0);
    if (aux) mt_cmp_bf16(t, "seam aux vs collapse aux", o.aux, in.auxs, aux2, H, T, NULL, 1, H, 0);

    /* gates: the route's own projection input against fp64, and the unfused pipeline */
    double *X = malloc((size_t)(T * 4 * H) * sizeof(double)), *Xu = malloc((size_t)(T * 4 * H) * sizeof(double));
    mt_seam_X(&in, NULL, T, pl.unrounded_input, X, Xu);
    mt_check_gates(t, name, T, NULL, X, Xu, 4 * H, 4.0 * H, in.fn, in.scale, in.base, &d.gate, MT_TOL_MIX, o.mix,
                   o.post, o.comb, o.pre);
    if (pl.route == DSV4_MHC_ROUTE_TENSOR_CORE) {
        /* same input (the stored R_out), same reference: the gates op gives identical bits */
        seam_out_t g;
        seam_out_alloc(&g, &in);
        dsv4_mhc_gates_desc_t gd = {T, H, 0, DSV4_MHC_ROUTE_TENSOR_CORE, d.gate, in.ros};
        dsv4_mhc_gates_args_t ga = {R2, in.fn, in.scale, in.base, NULL, g.post, g.comb, g.pre, g.mix, NULL};
        TH_OK(t, dsv4_mhc_gates_ref(&gd, &ga));
        mt_cmp_f32_exact(t, "seam post_out vs gates(R_out)", o.post, g.post, T, 4);
        mt_cmp_f32_exact(t, "seam comb_out vs gates(R_out)", o.comb, g.comb, T, 16);
        mt_cmp_f32_exact(t, "seam pre_out vs gates(R_out)", o.pre, g.pre, T, 4);
        mt_cmp_f32_exact(t, "seam mix vs gates(R_out)", o.mix, g.mix, T, 24);
        seam_out_free(&g);
    }
    free(X);
    free(Xu);
    free(R2);
    free(li2);
    free(aux2);
    seam_out_free(&o);
    mt_seam_in_free(&in);
}

void test_seam_ref(th_ctx_t *t) {
    seam_ref_case(t, 5, 1024, DSV4_MHC_V41, DSV4_MHC_ROUTE_AUTO, 1, 1, 1, 1);
    seam_ref_case(t, 3, 1024, DSV4_MHC_V41, DSV4_MHC_ROUTE_AUTO, 0, 0, 0, 0);
    seam_ref_case(t, 16, 1024, DSV4_MHC_V41, DSV4_MHC_ROUTE_AUTO, 0, 1, 0, 0);
    seam_ref_case(t, 5, 1152, DSV4_MHC_V41, DSV4_MHC_ROUTE_AUTO, 1, 0, 1, 0); /* no tiling: tensor-core */
    seam_ref_case(t, 3, 1024, DSV4_MHC_V4, DSV4_MHC_ROUTE_AUTO, 0, 1, 1, 0);
    seam_ref_case(t, 3, 1024, DSV4_MHC_V4, DSV4_MHC_ROUTE_TENSOR_CORE, 0, 0, 0, 1);
}

/* Model-shaped small-T seam: how far the small-T route's gates sit from the unfused
 * pipeline (projection of the stored bf16). ~1e-7 when the route projects the stored
 * values; up to ~3e-3 with MHC_SMALL_T_UNROUNDED (the model reference's numerics). */
void test_seam_ref_route_gap(th_ctx_t *t) {
    seam_ref_case(t, 12, MC_MHC_HIDDEN, DSV4_MHC_V41, DSV4_MHC_ROUTE_AUTO, 1, 1, 0, 0);
}

/* ---- pre: V4.1 / V4, plain and first-layer broadcast ------------------------------------------- */
static void pre_ref_case(th_ctx_t *t, int64_t T, int64_t H, int variant, int bc, int premix) {
    th_rng_t *r = th_rng(t);
    mt_seam_in_t in;
    mt_seam_in_make(r, &in, T, H, 0, premix, 1, 0);
    const int64_t row = bc ? H : 4 * H;
    uint16_t *e = bc ? in.x : in.R; /* the embedding is x-shaped */
    float *fnb = mt_fn_bcast_of(t, &in, H);
    seam_out_t o;
    seam_out_alloc(&o, &in);
    const float norm_eps = variant == DSV4_MHC_V4 ? 1e-6f : 1e-20f;
    dsv4_mhc_pre_desc_t d = {T, H, variant, bc, 0, mt_gate_params(variant == DSV4_MHC_V4), norm_eps, row, 4 * H, H, H};
    dsv4_mhc_pre_args_t a = {e,    bc ? fnb : in.fn,    in.scale, in.base, in.premix, in.w, o.post, o.comb, o.pre,
                             o.li, bc ? o.R_out : NULL, o.aux,    o.mix,   NULL};
    TH_OK(t, dsv4_mhc_pre_ref(&d, &a));
    char name[128];
    snprintf(name, sizeof name, "pre ref %s T=%lld H=%lld broadcast=%d premix=%d", variant ? "V4" : "V4.1",
             (long long)T, (long long)H, bc, premix);
    const uint16_t *Rsrc = in.R;
    if (bc) {
        for (int s = 0; s < 4; ++s) mt_cmp_bf16(t, "broadcast copy", o.R_out + s * H, 4 * H, e, H, T, NULL, 1, H, 0);
        Rsrc = o.R_out;
    }
    /* layer input = the standalone collapse */
    uint16_t *li2 = malloc((size_t)(T * H) * 2), *aux2 = malloc((size_t)(T * H) * 2);
    dsv4_mhc_collapse_desc_t cd = {T, H, variant, norm_eps, 4 * H, H, H};
    dsv4_mhc_collapse_args_t ca = {Rsrc, variant == DSV4_MHC_V4 ? o.pre : in.premix, in.w, li2, aux2};
    TH_OK(t, dsv4_mhc_collapse_ref(&cd, &ca));
    mt_cmp_bf16(t, "pre layer_input vs collapse", o.li, H, li2, H, T, NULL, 1, H, 0);
    mt_cmp_bf16(t, "pre aux vs collapse aux", o.aux, H, aux2, H, T, NULL, 1, H, 0);
    /* gates against fp64 of what was projected: e with fn_bcast (K = H), or R */
    const int64_t K = bc ? H : 4 * H;
    double *X = malloc((size_t)(T * K) * sizeof(double));
    for (int64_t i = 0; i < T * K; ++i) X[i] = dsv4_bf16_to_f32(e[i]);
    mt_check_gates(t, name, T, NULL, X, NULL, K, (double)K, bc ? fnb : in.fn, in.scale, in.base, &d.gate, MT_TOL_MIX,
                   o.mix, o.post, o.comb, o.pre);
    if (bc) {
        /* the broadcast projection equals the full one on the 4 copies (same rms; fn_bcast
         * rounds each sum once) */
        double *Xf = malloc((size_t)(T * 4 * H) * sizeof(double));
        for (int64_t i = 0; i < T; ++i)
            for (int s = 0; s < 4; ++s)
                for (int64_t h = 0; h < H; ++h) Xf[i * 4 * H + s * H + h] = dsv4_bf16_to_f32(e[i * H + h]);
        mt_check_gates(t, "broadcast gates vs the full projection of the copies", T, NULL, Xf, NULL, 4 * H, 4.0 * H,
                       in.fn, in.scale, in.base, &d.gate, MT_TOL_MIX, o.mix, o.post, o.comb, o.pre);
        free(Xf);
    }
    free(X);
    free(li2);
    free(aux2);
    free(fnb);
    seam_out_free(&o);
    mt_seam_in_free(&in);
}

void test_pre_ref(th_ctx_t *t) {
    pre_ref_case(t, 4, 1024, DSV4_MHC_V41, 0, 1);
    pre_ref_case(t, 4, 1024, DSV4_MHC_V41, 0, 0);
    pre_ref_case(t, 17, 1024, DSV4_MHC_V4, 0, 0);
    pre_ref_case(t, 4, 1024, DSV4_MHC_V41, 1, 0);
    pre_ref_case(t, 20, 1152, DSV4_MHC_V4, 1, 0);
}
