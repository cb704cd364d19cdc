/*
 * GPU tests of the seams (V4.1 delayed and V4 fused), both projection routes, the
 * large-T cases and CUDA-graph capture.
 *
 * Per case: R_out bit-exact against dsv4_mhc_post_ref on every token; the layer input
 * and aux against dsv4_mhc_collapse_ref of the kernel's own R_out with the incoming
 * pre-mix (V4.1) or the kernel's fresh pre (V4) on every token (bit-exact, or within
 * MT_ULP_NORM after the norm); the gates on sampled tokens against the fp64 models (mix,
 * gates fed the kernel's mix, comb column sums, and end to end against the unfused
 * pipeline, printed; the bounds are mhc_test.h's tolerance table). On the small-T route
 * every word of the partial records in the (0xFF-poisoned) workspace must be back at 0
 * after the call, so that the next call on the same workspace, or a graph replay, does
 * not see a tagged partial.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "dsv4/numerics.h"
#include "mhc_gpu.h"
#include "mhc_test.h"
#include "test_mhc.h"

void dseam_make(dseam_t *d, const mt_seam_in_t *in, const dsv4_mhc_seam_desc_t *desc, int aux) {
    const int64_t T = in->T, H = in->H;
    memset(d, 0, sizeof *d);
    d->x = mt_dev(in->x, (size_t)(T * in->xs) * 2);
    d->R = mt_dev(in->R, (size_t)(T * in->rs) * 2);
    d->post = mt_dev(in->post, (size_t)(4 * T) * 4);
    d->comb = mt_dev(in->comb, (size_t)(16 * T) * 4);
    d->fn = mt_dev(in->fn, (size_t)(96 * H) * 4);
    d->scale = mt_dev(in->scale, sizeof in->scale);
    d->base = mt_dev(in->base, sizeof in->base);
    d->premix = mt_dev(in->premix, (size_t)(4 * T) * 4);
    d->w = mt_dev(in->w, (size_t)H * 2);
    d->R_out = mt_dev(NULL, (size_t)(T * in->ros) * 2);
    d->post_out = mt_dev(NULL, (size_t)(4 * T) * 4);
    d->comb_out = mt_dev(NULL, (size_t)(16 * T) * 4);
    d->pre_out = mt_dev(NULL, (size_t)(4 * T) * 4);
    d->li = mt_dev(NULL, (size_t)(T * in->lis) * 2);
    d->aux = mt_dev(NULL, (size_t)(T * in->auxs) * 2);
    d->mix = mt_dev(NULL, (size_t)(24 * T) * 4);
    d->ws_bytes = 0;
    dsv4_mhc_seam_workspace_size(desc, &d->ws_bytes);
    d->ws = mt_dev(NULL, d->ws_bytes);
    dsv4_mhc_seam_args_t a = {th_ptr(&d->x),
                              th_ptr(&d->R),
                              th_ptr(&d->post),
                              th_ptr(&d->comb),
                              th_ptr(&d->fn),
                              th_ptr(&d->scale),
                              th_ptr(&d->base),
                              in->premix ? th_ptr(&d->premix) : NULL,
                              in->w ? th_ptr(&d->w) : NULL,
                              th_ptr(&d->R_out),
                              th_ptr(&d->post_out),
                              th_ptr(&d->comb_out),
                              th_ptr(&d->pre_out),
                              th_ptr(&d->li),
                              aux ? th_ptr(&d->aux) : NULL,
                              th_ptr(&d->mix),
                              NULL};
    d->args = a;
}

dsv4_status_t dseam_run(th_ctx_t *t, dseam_t *d, const dsv4_mhc_seam_desc_t *desc) {
    void *s = th_stream_create(t);
    dsv4_status_t st = dsv4_mhc_seam(desc, &d->args, th_ptr(&d->ws), d->ws_bytes, DSV4_STREAM(s));
    th_stream_sync_destroy(t, s);
    return st;
}

void dseam_download(th_ctx_t *t, const dseam_t *d, seam_host_t *o) {
    o->R_out = mt_download(t, &d->R_out, "residual_out");
    o->post = mt_download(t, &d->post_out, "post_out");
    o->comb = mt_download(t, &d->comb_out, "comb_out");
    o->pre = mt_download(t, &d->pre_out, "pre_out");
    o->li = mt_download(t, &d->li, "layer_input");
    o->aux = mt_download(t, &d->aux, "aux");
    o->mix = mt_download(t, &d->mix, "mix");
}

void dseam_inputs_unchanged(th_ctx_t *t, const dseam_t *d, const mt_seam_in_t *in) {
    mt_dev_unchanged(t, "x", &d->x, in->x);
    mt_dev_unchanged(t, "residual", &d->R, in->R);
    mt_dev_unchanged(t, "post", &d->post, in->post);
    mt_dev_unchanged(t, "comb", &d->comb, in->comb);
    mt_dev_unchanged(t, "fn", &d->fn, in->fn);
    mt_dev_unchanged(t, "scale", &d->scale, in->scale);
    mt_dev_unchanged(t, "base", &d->base, in->base);
    if (in->premix) mt_dev_unchanged(t, "pre_mix", &d->premix, in->premix);
    if (in->w) mt_dev_unchanged(t, "norm_weight", &d->w, in->w);
    th_buf_guards_ok(t, &d->ws, "workspace");
}

void dseam_free(dseam_t *d) {
    th_buf_t *b[] = {&d->x,     &d->R,        &d->post,     &d->comb,    &d->fn, &d->scale, &d->base, &d->premix, &d->w,
                     &d->R_out, &d->post_out, &d->comb_out, &d->pre_out, &d->li, &d->aux,   &d->mix,  &d->ws};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; ++i) th_buf_free(b[i]);
}

void seam_host_free(seam_host_t *o) {
    free(o->R_out), free(o->post), free(o->comb), free(o->pre), free(o->li), free(o->aux), free(o->mix);
    memset(o, 0, sizeof *o);
}

/* All the checks of one seam run (see the file comment). */
static void seam_verify(th_ctx_t *t, const char *name, const mt_seam_in_t *in, const dsv4_mhc_seam_desc_t *desc,
                        const seam_host_t *o, int aux, int unrounded) {
    const int64_t T = in->T, H = in->H;
    const int before = th_failed(t);
    uint16_t *R2 = malloc((size_t)(T * in->ros) * 2);
    dsv4_mhc_post_desc_t pd = {T, H, in->xs, in->rs, in->ros};
    dsv4_mhc_post_args_t pa = {in->x, in->R, in->post, in->comb, R2, NULL};
    TH_OK(t, dsv4_mhc_post_ref(&pd, &pa));
    mt_cmp_bf16(t, "residual_out vs post reference", o->R_out, in->ros, R2, in->ros, T, NULL, 4, H, 0);

    uint16_t *li2 = malloc((size_t)(T * in->lis) * 2), *aux2 = malloc((size_t)(T * in->auxs) * 2);
    dsv4_mhc_collapse_desc_t cd = {T, H, desc->variant, desc->norm_eps, in->ros, in->lis, in->auxs};
    dsv4_mhc_collapse_args_t ca = {o->R_out, desc->variant == DSV4_MHC_V4 ? o->pre : in->premix, in->w, li2, aux2};
    TH_OK(t, dsv4_mhc_collapse_ref(&cd, &ca));
    mt_cmp_bf16(t, in->w ? "layer_input vs collapse+norm reference (1 ulp)" : "layer_input vs collapse reference",
                o->li, in->lis, li2, in->lis, T, NULL, 1, H, in->w ? MT_ULP_NORM : 0);
    if (aux) mt_cmp_bf16(t, "aux vs reference", o->aux, in->auxs, aux2, in->auxs, T, NULL, 1, H, 0);

    int64_t ids[64];
    const int64_t n = mt_sample_tokens(th_rng(t), T, ids);
    double *X = malloc((size_t)(n * 4 * H) * sizeof(double)), *Xu = malloc((size_t)(n * 4 * H) * sizeof(double));
    mt_seam_X(in, ids, n, unrounded, X, Xu);
    float gm[64 * 24], gp[64 * 4], gc[64 * 16], gr[64 * 4];
    mt_gather_f32(o->mix, 24, ids, n, gm);
    mt_gather_f32(o->post, 4, ids, n, gp);
    mt_gather_f32(o->comb, 16, ids, n, gc);
    mt_gather_f32(o->pre, 4, ids, n, gr);
    mt_check_gates(t, name, n, ids, X, Xu, 4 * H, 4.0 * H, in->fn, in->scale, in->base, &desc->gate, MT_TOL_MIX, gm, gp,
                   gc, gr);
    if (th_failed(t) != before) th_note(t, "FAILED case: %s", name);
    free(X), free(Xu), free(R2), free(li2), free(aux2);
}

typedef struct {
    int64_t T, H;
    int variant, route, premix, norm, aux, v4eps, strided, zero;
} seam_case_t;

static void case_name(char *buf, size_t n, const seam_case_t *c, int route) {
    snprintf(buf, n, "seam %s T=%lld H=%lld route=%s%s premix=%d norm=%d aux=%d eps=%s strided=%d zero_token=%d",
             c->variant ? "V4" : "V4.1", (long long)c->T, (long long)c->H,
             route == DSV4_MHC_ROUTE_SMALL_T ? "small-T" : "tensor-core", c->route ? " (forced)" : "", c->premix,
             c->norm, c->aux, c->v4eps ? "V4" : "V4.1", c->strided, c->zero);
}

static dsv4_mhc_seam_desc_t case_desc(const seam_case_t *c, const mt_seam_in_t *in) {
    dsv4_mhc_seam_desc_t d = {
        c->T,   c->H,    c->variant, c->route, mt_gate_params(c->v4eps), c->v4eps ? 1e-6f : 1e-20f, in->xs,
        in->rs, in->ros, in->lis,    in->auxs};
    return d;
}

/* Runs one case; leaves the downloaded outputs in *keep when given (caller frees). */
static void gpu_seam_case(th_ctx_t *t, const seam_case_t *c, const mt_seam_in_t *given, seam_host_t *keep) {
    mt_seam_in_t own;
    const mt_seam_in_t *in = given;
    if (!in) {
        mt_seam_in_make(th_rng(t), &own, c->T, c->H, c->strided, c->premix && c->variant == DSV4_MHC_V41, c->norm,
                        c->zero);
        in = &own;
    }
    const dsv4_mhc_seam_desc_t desc = case_desc(c, in);
    dsv4_mhc_plan_t pl;
    TH_OK(t, dsv4_mhc_plan(c->T, c->H, 0, c->route, &pl));
    char name[256];
    case_name(name, sizeof name, c, pl.route);
    dseam_t d;
    dseam_make(&d, in, &desc, c->aux);
    const dsv4_status_t st = dseam_run(t, &d, &desc);
    if (st != DSV4_STATUS_SUCCESS) {
        TH_CHECK(t, 0, "%s: %s (%s)", name, dsv4_status_string(st), dsv4_last_error());
    } else {
        seam_host_t o;
        dseam_download(t, &d, &o);
        dseam_inputs_unchanged(t, &d, in);
        if (pl.route == DSV4_MHC_ROUTE_SMALL_T) { /* every record word is back at 0 */
            const uint32_t *ws = mt_download(t, &d.ws, "workspace");
            const int64_t nwords = c->T * 4 * pl.splits * 8 * 2; /* 32-bit halves */
            int64_t bad = 0;
            for (int64_t i = 0; i < nwords; ++i) bad += ws[i] != 0;
            TH_CHECK(t, bad == 0, "%s: %lld of %lld workspace record words not reset", name, (long long)bad,
                     (long long)nwords);
            free((void *)ws);
        }
        seam_verify(t, name, in, &desc, &o, c->aux, pl.unrounded_input);
        if (!c->aux)
            for (int64_t e = 0; e < c->T * in->auxs; ++e)
                if (o.aux[e] != 0xFFFF) {
                    TH_CHECK(t, 0, "%s: aux written without a pointer", name);
                    break;
                }
        if (keep) *keep = o;
        else seam_host_free(&o);
    }
    dseam_free(&d);
    if (!given) mt_seam_in_free(&own);
}

void test_seam_gpu(th_ctx_t *t) {
    static const int64_t Ts[9] = {1, 5, 6, 12, 15, 16, 17, 64, 512};
    int i = 0;
    for (int hi = 0; hi < 3; ++hi)
        for (int ti = 0; ti < 9; ++ti, ++i) {
            seam_case_t c = {Ts[ti],     mc_mhc_hiddens[hi], DSV4_MHC_V41, DSV4_MHC_ROUTE_AUTO, i % 2,
                             i % 3 != 2, i % 4 == 1,         (i / 2) % 2,  i % 5 == 3,          i % 7 == 0};
            gpu_seam_case(t, &c, NULL, NULL);
        }
}

void test_seam_v4_gpu(th_ctx_t *t) {
    static const int64_t Ts[4] = {1, 6, 16, 64};
    int i = 0;
    for (int hi = 0; hi < 3; ++hi)
        for (int ti = 0; ti < 4; ++ti, ++i) {
            seam_case_t c = {Ts[ti],     mc_mhc_hiddens[hi], DSV4_MHC_V4, DSV4_MHC_ROUTE_AUTO, 0,
                             i % 2 == 0, i % 3 == 0,         1,           i % 5 == 2,          i % 6 == 1};
            gpu_seam_case(t, &c, NULL, NULL);
        }
}

/* Both routes on the same inputs: each passes its checks, and R_out and the un-normed
 * layer input are identical between them; the gate differences are printed. T = 33 and 64
 * force the small-T route past one wave of CTAs (626 and 1,168 at H = 5120 on 264 slots of
 * the H200), where its gate CTAs wait on producers dispatched waves earlier. */
void test_seam_routes_gpu(th_ctx_t *t) {
    static const int64_t cases[][2] = {{1, MC_MHC_HIDDEN},     {6, MC_MHC_HIDDEN},  {12, MC_MHC_HIDDEN},
                                       {15, MC_MHC_HIDDEN},    {16, MC_MHC_HIDDEN}, {17, MC_MHC_HIDDEN},
                                       {33, MC_MHC_HIDDEN},    {64, MC_MHC_HIDDEN}, {6, MC_MHC_HIDDEN_V4},
                                       {12, MC_MHC_HIDDEN_PRO}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        const int64_t T = cases[k][0], H = cases[k][1];
        mt_seam_in_t in;
        mt_seam_in_make(th_rng(t), &in, T, H, 0, 1, 0, 0);
        seam_host_t o[2];
        for (int r = 0; r < 2; ++r) {
            seam_case_t c = {T, H, DSV4_MHC_V41, r ? DSV4_MHC_ROUTE_TENSOR_CORE : DSV4_MHC_ROUTE_SMALL_T, 1, 0, 1, 0,
                             0, 0};
            memset(&o[r], 0, sizeof o[r]);
            gpu_seam_case(t, &c, &in, &o[r]);
        }
        if (o[0].R_out && o[1].R_out) {
            mt_cmp_bf16(t, "residual_out small-T vs tensor-core", o[0].R_out, 4 * H, o[1].R_out, 4 * H, T, NULL, 4, H,
                        0);
            mt_cmp_bf16(t, "layer_input small-T vs tensor-core", o[0].li, H, o[1].li, H, T, NULL, 1, H, 0);
            double dmax = 0.0;
            for (int64_t e = 0; e < 16 * T; ++e) {
                const double dd = (double)o[0].comb[e] - o[1].comb[e];
                dmax = dd > dmax ? dd : (-dd > dmax ? -dd : dmax);
            }
            for (int64_t e = 0; e < 4 * T; ++e) {
                const double d1 = (double)o[0].post[e] - o[1].post[e], d2 = (double)o[0].pre[e] - o[1].pre[e];
                dmax = d1 > dmax ? d1 : (-d1 > dmax ? -d1 : dmax);
                dmax = d2 > dmax ? d2 : (-d2 > dmax ? -d2 : dmax);
            }
            th_note(t, "T=%lld H=%lld: gates small-T vs tensor-core max |diff| %.3e (summation order only)",
                    (long long)T, (long long)H, dmax);
        }
        seam_host_free(&o[0]);
        seam_host_free(&o[1]);
        mt_seam_in_free(&in);
    }
}

void test_seam_gpu_large(th_ctx_t *t) {
    for (int hi = 0; hi < 3; ++hi) {
        seam_case_t c = {2048, mc_mhc_hiddens[hi], DSV4_MHC_V41, 0, 1, 1, hi == 1, 0, 0, 0};
        gpu_seam_case(t, &c, NULL, NULL);
        c.T = 8192;
        c.aux = 1;
        c.strided = hi == 2;
        gpu_seam_case(t, &c, NULL, NULL);
    }
    seam_case_t immediate = {8192, MC_MHC_HIDDEN_PRO, DSV4_MHC_V4, 0, 0, 1, 0, 1, 0, 0};
    gpu_seam_case(t, &immediate, NULL, NULL);
}

/* Captured into a CUDA graph and replayed: the same bits as a direct run (the op neither
 * allocates nor synchronises, so capture must succeed). */
void test_seam_graph_gpu(th_ctx_t *t) {
    static const int64_t Ts[2] = {12, 64};
    for (int k = 0; k < 2; ++k) {
        mt_seam_in_t in;
        mt_seam_in_make(th_rng(t), &in, Ts[k], MC_MHC_HIDDEN, 0, 1, 1, 0);
        seam_case_t c = {Ts[k], MC_MHC_HIDDEN, DSV4_MHC_V41, 0, 1, 1, 1, 0, 0, 0};
        const dsv4_mhc_seam_desc_t desc = case_desc(&c, &in);
        dseam_t d;
        dseam_make(&d, &in, &desc, 1);
        TH_OK(t, dseam_run(t, &d, &desc));
        seam_host_t direct, replay;
        dseam_download(t, &d, &direct);
        th_buf_t *outs[] = {&d.R_out, &d.post_out, &d.comb_out, &d.pre_out, &d.li, &d.aux, &d.mix};
        for (int i = 0; i < 7; ++i) th_buf_poison(outs[i], 0xFF);
        cudaStream_t s = (cudaStream_t)th_stream_create(t);
        cudaGraph_t graph = NULL;
        cudaGraphExec_t exec = NULL;
        if (TH_CUDA(t, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal))) {
            dsv4_status_t st = dsv4_mhc_seam(&desc, &d.args, th_ptr(&d.ws), d.ws_bytes, DSV4_STREAM(s));
            TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "T=%lld: seam during capture: %s (%s)", (long long)Ts[k],
                     dsv4_status_string(st), dsv4_last_error());
            if (TH_CUDA(t, cudaStreamEndCapture(s, &graph)) && TH_CUDA(t, cudaGraphInstantiate(&exec, graph, 0)))
                TH_CUDA(t, cudaGraphLaunch(exec, s));
        }
        th_stream_sync_destroy(t, s);
        dseam_download(t, &d, &replay);
        const int64_t T = Ts[k], H = MC_MHC_HIDDEN;
        mt_cmp_bf16(t, "graph replay residual_out", replay.R_out, 4 * H, direct.R_out, 4 * H, T, NULL, 4, H, 0);
        mt_cmp_bf16(t, "graph replay layer_input", replay.li, H, direct.li, H, T, NULL, 1, H, 0);
        mt_cmp_bf16(t, "graph replay aux", replay.aux, H, direct.aux, H, T, NULL, 1, H, 0);
        mt_cmp_f32_exact(t, "graph replay post_out", replay.post, direct.post, T, 4);
        mt_cmp_f32_exact(t, "graph replay comb_out", replay.comb, direct.comb, T, 16);
        mt_cmp_f32_exact(t, "graph replay pre_out", replay.pre, direct.pre, T, 4);
        mt_cmp_f32_exact(t, "graph replay mix", replay.mix, direct.mix, T, 24);
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
        seam_host_free(&direct);
        seam_host_free(&replay);
        dseam_free(&d);
        mt_seam_in_free(&in);
    }
}
