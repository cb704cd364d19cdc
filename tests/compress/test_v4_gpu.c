/*
 * dsv4_compress_v4 GPU tests: the kernels against the CPU reference on the shared random
 * shapes, bit for bit over the whole state and the whole cache (records, unwritten
 * slots' poison, page padding), guard bands checked, inputs unmodified; the records
 * also held to the independent model; a captured graph replayed twice gives the same
 * bytes (the save is idempotent); failing calls write nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "test_compress.h"
#include "test_v4.h"

typedef struct {
    th_buf_t kv, ape, pos, ss, slot, req, bt, gamma, cs, state, cache;
} v4t_dev_t;

static void v4t_upload(const v4t_case_t *c, v4t_dev_t *v) {
    const size_t T = (size_t)c->d.num_tokens;
    v->kv = ct_upload(c->kv, c->kv_elems * 4);
    v->ape = ct_upload(c->ape, (size_t)(c->d.ratio * (c->d.ratio == 4 ? 1024 : 512)) * 4);
    v->pos = ct_upload(c->pos, T * 8), v->ss = ct_upload(c->state_slot, T * 8), v->slot = ct_upload(c->slot, T * 8);
    v->req = ct_upload(c->req, T * 4), v->bt = ct_upload(c->block_table, c->bt_elems * 4);
    v->gamma = ct_upload(c->gamma, DSV4_COMPRESS_DIM * 2), v->cs = ct_upload(c->cos_sin, c->cs_elems * 4);
    v->state = ct_upload(c->state, c->state_elems * 4), v->cache = ct_upload(c->cache, c->cache_bytes);
}

static void v4t_dev_free(v4t_dev_t *v) {
    th_buf_t *all[] = {&v->kv, &v->ape,   &v->pos, &v->ss,    &v->slot, &v->req,
                       &v->bt, &v->gamma, &v->cs,  &v->state, &v->cache};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) th_buf_free(all[i]);
}

static dsv4_compress_v4_args_t v4t_dev_args(v4t_dev_t *v) {
    const dsv4_compress_v4_args_t a = {th_ptr(&v->kv),   th_ptr(&v->ape),   th_ptr(&v->pos),   th_ptr(&v->ss),
                                       th_ptr(&v->req),  th_ptr(&v->bt),    th_ptr(&v->gamma), th_ptr(&v->cs),
                                       th_ptr(&v->slot), th_ptr(&v->state), th_ptr(&v->cache)};
    return a;
}

/* Kernel against reference on one case; graph: two replays of a captured call. */
static void gpu_case(th_ctx_t *t, const v4t_shape_t *s, int graph) {
    v4t_case_t c;
    v4t_dev_t v;
    v4t_case(th_rng(t), s, &c);
    v4t_upload(&c, &v);
    const dsv4_compress_v4_args_t da = v4t_dev_args(&v);
    cudaStream_t st = (cudaStream_t)th_stream_create(t);
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    if (!graph) {
        TH_OK(t, dsv4_compress_v4(&c.d, &da, NULL, 0, DSV4_STREAM(st)));
    } else if (TH_CUDA(t, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal))) {
        TH_OK(t, dsv4_compress_v4(&c.d, &da, NULL, 0, DSV4_STREAM(st)));
        if (TH_CUDA(t, cudaStreamEndCapture(st, &g)) && TH_CUDA(t, cudaGraphInstantiate(&ge, g, 0)))
            TH_CUDA(t, cudaGraphLaunch(ge, st)), TH_CUDA(t, cudaGraphLaunch(ge, st));
    }
    th_stream_sync_destroy(t, st);
    char what[200];
    v4t_name(what, sizeof what, graph ? "gpu graph" : "gpu", s);
    float *state_got = malloc(c.state_elems * 4), *state_ref = malloc(c.state_elems * 4);
    uint8_t *cache_got = malloc(c.cache_bytes), *cache_ref = malloc(c.cache_bytes);
    th_buf_download(&v.state, state_got), th_buf_download(&v.cache, cache_got);
    memcpy(state_ref, c.state, c.state_elems * 4), memcpy(cache_ref, c.cache, c.cache_bytes);
    const dsv4_compress_v4_args_t ha = v4t_args(&c, state_ref, cache_ref);
    TH_OK(t, dsv4_compress_v4_ref(&c.d, &ha));
    th_cmp_bytes(t, "state against the reference", state_got, state_ref, c.state_elems * 4);
    th_cmp_bytes(t, "cache against the reference", cache_got, cache_ref, c.cache_bytes);
    v4t_check(t, what, &c, state_got, cache_got);
    th_buf_guards_ok(t, &v.state, "state"), th_buf_guards_ok(t, &v.cache, "cache");
    ct_expect_unchanged(t, "kv_score", &v.kv, c.kv, c.kv_elems * 4);
    ct_expect_unchanged(t, "block_table", &v.bt, c.block_table, c.bt_elems * 4);
    ct_expect_unchanged(t, "slot_mapping", &v.slot, c.slot, (size_t)c.d.num_tokens * 8);
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    free(state_got), free(state_ref), free(cache_got), free(cache_ref);
    v4t_dev_free(&v);
    v4t_case_free(&c);
}

void test_cmp_gpu_compress_v4(th_ctx_t *t) {
    for (int rep = 0; rep < 4; ++rep)
        for (int k = 0; k < V4T_SHAPES; ++k) gpu_case(t, &v4t_shapes[k], 0);
}

void test_cmp_gpu_compress_v4_graph(th_ctx_t *t) {
    gpu_case(t, &v4t_shapes[0], 1);
    gpu_case(t, &v4t_shapes[3], 1);
    gpu_case(t, &v4t_shapes[6], 1);
}

void test_cmp_gpu_compress_v4_bad_input(th_ctx_t *t) {
    v4t_case_t c;
    v4t_dev_t v;
    v4t_case(th_rng(t), &v4t_shapes[8], &c);
    v4t_upload(&c, &v);
    dsv4_compress_v4_args_t da = v4t_dev_args(&v);
    void *s = th_stream_create(t);
    dsv4_compress_v4_desc_t d = c.d;
    d.ratio = 8;
    TH_EXPECT_STATUS(t, dsv4_compress_v4(&d, &da, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_INVALID_VALUE);
    d = c.d, d.state_stride_row = 1026;
    TH_EXPECT_STATUS(t, dsv4_compress_v4(&d, &da, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_MISALIGNED);
    da.cache = (uint8_t *)th_ptr(&v.cache) + 8;
    TH_EXPECT_STATUS(t, dsv4_compress_v4(&c.d, &da, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_MISALIGNED);
    th_stream_sync_destroy(t, s);
    ct_expect_unchanged(t, "state after failing calls", &v.state, c.state, c.state_elems * 4);
    ct_expect_unchanged(t, "cache after failing calls", &v.cache, c.cache, c.cache_bytes);
    v4t_dev_free(&v);
    v4t_case_free(&c);
}

/* Two closing rows naming one slot: the cache holds one row's whole record (either, as for
 * dsv4_kv_insert), every other byte as the reference leaves it. The reference runs once
 * with each row's slot withdrawn in turn. */
void test_cmp_gpu_compress_v4_duplicate_slots(th_ctx_t *t) {
    for (int k = 0; k < V4T_SHAPES; ++k) {
        v4t_case_t c;
        if (v4t_shapes[k].head_dim == 128) continue; /* indexer states: duplicates are a caller error */
        v4t_case(th_rng(t), &v4t_shapes[k], &c);
        int64_t a = -1, b = -1; /* the first two closing rows with slots */
        for (int64_t row = 0; row < c.d.num_tokens && b < 0; ++row) {
            const int64_t pos = c.pos[row], r = c.d.ratio;
            if (((pos % r) + r) % r != r - 1 || c.slot[row] < 0 || c.slot[row] >= c.d.num_pages * c.d.page_tokens)
                continue;
            if (a < 0) a = row;
            else b = row;
        }
        if (b < 0) {
            v4t_case_free(&c);
            continue;
        }
        c.slot[b] = c.slot[a];
        v4t_dev_t v;
        v4t_upload(&c, &v);
        const dsv4_compress_v4_args_t da = v4t_dev_args(&v);
        void *s = th_stream_create(t);
        TH_OK(t, dsv4_compress_v4(&c.d, &da, NULL, 0, DSV4_STREAM(s)));
        th_stream_sync_destroy(t, s);
        uint8_t *got = malloc(c.cache_bytes), *want[2];
        th_buf_download(&v.cache, got);
        for (int w = 0; w < 2; ++w) { /* w = 0: row b's record stands; 1: row a's */
            float *state = malloc(c.state_elems * 4);
            want[w] = malloc(c.cache_bytes);
            memcpy(state, c.state, c.state_elems * 4), memcpy(want[w], c.cache, c.cache_bytes);
            const int64_t keep = c.slot[w ? b : a];
            c.slot[w ? b : a] = -1;
            const dsv4_compress_v4_args_t ha = v4t_args(&c, state, want[w]);
            TH_OK(t, dsv4_compress_v4_ref(&c.d, &ha));
            c.slot[w ? b : a] = keep;
            free(state);
        }
        const int one = !memcmp(got, want[0], c.cache_bytes) || !memcmp(got, want[1], c.cache_bytes);
        TH_CHECK(t, one, "shape %d: rows %lld and %lld share slot %lld: the cache is neither row's result", k,
                 (long long)a, (long long)b, (long long)c.slot[a]);
        free(got), free(want[0]), free(want[1]);
        v4t_dev_free(&v);
        v4t_case_free(&c);
    }
}
