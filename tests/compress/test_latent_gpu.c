/*
 * dsv4_compress GPU tests: the kernels against the CPU reference on the same random
 * cases (ratio 1 bit for bit over the whole latent buffer; ratio 2 against the fp64
 * model within the contract's bound, the ring bit for bit, rows without a latent keeping
 * their poison), guard bands checked, inputs checked unmodified; failing calls write
 * nothing; a captured graph replays.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "test_compress.h"
#include "test_latent.h"

enum { D = DSV4_COMPRESS_DIM };

typedef struct {
    th_buf_t kv, pos, slot, qsl, gamma, ring, latent;
} lt_dev_t;

static void lt_upload(const lt_case_t *c, lt_dev_t *v) {
    const size_t T = (size_t)(c->d.num_tokens ? c->d.num_tokens : 1);
    v->kv = ct_upload(c->kv, c->kv_elems * 4);
    v->pos = ct_upload(c->pos, T * 8);
    v->slot = ct_upload(c->slot, T * 8);
    v->qsl = ct_upload(c->qsl, c->qsl_elems * 4);
    v->gamma = ct_upload(c->gamma, D * 2);
    v->ring = ct_upload(c->ring, c->ring_elems * 4);
    v->latent = th_buf_device(T * D * 2);
    th_buf_poison(&v->latent, (uint8_t)LT_POISON);
}

static void lt_dev_free(lt_dev_t *v) {
    th_buf_free(&v->kv), th_buf_free(&v->pos), th_buf_free(&v->slot), th_buf_free(&v->qsl);
    th_buf_free(&v->gamma), th_buf_free(&v->ring), th_buf_free(&v->latent);
}

static dsv4_compress_args_t lt_dev_args(const lt_case_t *c, lt_dev_t *v) {
    dsv4_compress_args_t a = {.kv_score = th_ptr(&v->kv), .gamma = th_ptr(&v->gamma), .latent = th_ptr(&v->latent)};
    if (c->d.ratio == 1) a.slot = th_ptr(&v->slot);
    else
        a.positions = th_ptr(&v->pos), a.ring_slot = th_ptr(&v->slot), a.query_start_loc = th_ptr(&v->qsl),
        a.ring = th_ptr(&v->ring);
    return a;
}

/* Kernel and reference on one case; graph: run through a captured graph. */
static void gpu_case(th_ctx_t *t, lt_shape_t s, int graph) {
    lt_case_t c;
    lt_model_t m;
    lt_dev_t v;
    lt_case(th_rng(t), &s, &c);
    s.num_tokens = c.d.num_tokens;
    lt_model(&c, &m);
    lt_upload(&c, &v);
    const size_t T = (size_t)(c.d.num_tokens ? c.d.num_tokens : 1);
    const dsv4_compress_args_t da = lt_dev_args(&c, &v);
    cudaStream_t st = (cudaStream_t)th_stream_create(t);
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    if (!graph) {
        TH_OK(t, dsv4_compress(&c.d, &da, NULL, 0, DSV4_STREAM(st)));
    } else if (TH_CUDA(t, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal))) {
        TH_OK(t, dsv4_compress(&c.d, &da, NULL, 0, DSV4_STREAM(st)));
        if (TH_CUDA(t, cudaStreamEndCapture(st, &g)) && TH_CUDA(t, cudaGraphInstantiate(&ge, g, 0)))
            TH_CUDA(t, cudaGraphLaunch(ge, st)); /* one replay: the ring is updated in place */
    }
    th_stream_sync_destroy(t, st);
    uint16_t *got = malloc(T * D * 2), *want = malloc(T * D * 2);
    float *ring_got = c.ring_elems ? malloc(c.ring_elems * 4) : NULL, *ring_ref = NULL;
    th_buf_download(&v.latent, got);
    if (ring_got) th_buf_download(&v.ring, ring_got);
    char what[160];
    lt_name(what, sizeof what, graph ? "gpu graph" : "gpu", &s);
    lt_check(t, what, &c, &m, got, ring_got);
    if (c.d.ratio == 1) { /* bit for bit against the reference */
        memset(want, (uint8_t)LT_POISON, T * D * 2);
        const dsv4_compress_args_t ha = lt_args(&c, NULL, want);
        TH_OK(t, dsv4_compress_ref(&c.d, &ha));
        th_cmp_bytes(t, what, got, want, (size_t)c.d.num_tokens * D * 2);
    } else if (c.ring_elems) { /* the ring against the reference's too */
        ring_ref = malloc(c.ring_elems * 4);
        memcpy(ring_ref, c.ring, c.ring_elems * 4);
        const dsv4_compress_args_t ha = lt_args(&c, ring_ref, want);
        TH_OK(t, dsv4_compress_ref(&c.d, &ha));
        th_cmp_bytes(t, "ring against the reference", ring_got, ring_ref, c.ring_elems * 4);
    }
    th_buf_guards_ok(t, &v.latent, "latent");
    th_buf_guards_ok(t, &v.ring, "ring");
    ct_expect_unchanged(t, "kv_score", &v.kv, c.kv, c.kv_elems * 4);
    ct_expect_unchanged(t, "slots", &v.slot, c.slot, (size_t)c.d.num_tokens * 8);
    ct_expect_unchanged(t, "query_start_loc", &v.qsl, c.qsl, c.qsl_elems * 4);
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    free(got), free(want), free(ring_got), free(ring_ref);
    lt_dev_free(&v);
    lt_model_free(&m);
    lt_case_free(&c);
}

void test_cmp_gpu_compress(th_ctx_t *t) {
    gpu_case(t, (lt_shape_t){.ratio = 1, .num_tokens = 2000}, 0);
    gpu_case(t, (lt_shape_t){.ratio = 1, .num_tokens = 37, .kv_stride = 528}, 0);
    gpu_case(t, (lt_shape_t){.ratio = 1, .num_tokens = 0}, 0);
    gpu_case(t, (lt_shape_t){.ratio = 2, .num_reqs = 64, .ring_cap = 8}, 0);
    gpu_case(t, (lt_shape_t){.ratio = 2, .num_reqs = 17, .ring_cap = 16, .kv_stride = 1040, .ring_stride = 1056}, 0);
    gpu_case(t, (lt_shape_t){.ratio = 2, .num_reqs = 1, .ring_cap = 8}, 0);
    gpu_case(t, (lt_shape_t){.ratio = 2, .num_reqs = 0, .ring_cap = 8}, 0);
}

void test_cmp_gpu_compress_graph(th_ctx_t *t) {
    gpu_case(t, (lt_shape_t){.ratio = 1, .num_tokens = 100}, 1);
    gpu_case(t, (lt_shape_t){.ratio = 2, .num_reqs = 8, .ring_cap = 8}, 1);
}

void test_cmp_gpu_compress_bad_input(th_ctx_t *t) {
    lt_case_t c;
    lt_dev_t v;
    lt_case(th_rng(t), &(lt_shape_t){.ratio = 2, .num_reqs = 6, .ring_cap = 8}, &c);
    lt_upload(&c, &v);
    const size_t T = (size_t)(c.d.num_tokens ? c.d.num_tokens : 1);
    uint16_t *poison = malloc(T * D * 2);
    memset(poison, (uint8_t)LT_POISON, T * D * 2);
    dsv4_compress_args_t da = lt_dev_args(&c, &v);
    void *s = th_stream_create(t);
    dsv4_compress_desc_t d = c.d;
    d.ring_cap = 12;
    TH_EXPECT_STATUS(t, dsv4_compress(&d, &da, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_INVALID_VALUE);
    d = c.d, d.kv_stride = 1032;
    TH_EXPECT_STATUS(t, dsv4_compress(&d, &da, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_MISALIGNED);
    da.ring = (float *)((char *)th_ptr(&v.ring) + 8);
    TH_EXPECT_STATUS(t, dsv4_compress(&c.d, &da, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_MISALIGNED);
    th_stream_sync_destroy(t, s);
    ct_expect_unchanged(t, "latent after failing calls", &v.latent, poison, T * D * 2);
    ct_expect_unchanged(t, "ring after failing calls", &v.ring, c.ring, c.ring_elems * 4);
    free(poison);
    lt_dev_free(&v);
    lt_case_free(&c);
}
