/*
 * GPU tests: each kernel against its CPU reference on the same random model-shaped
 * inputs, bit for bit over the whole output buffer (elements the contract leaves alone
 * must keep their input bits), guard bands checked, inputs checked unmodified. Engram
 * tables in device memory and in mapped pinned host memory. Also: failing calls write
 * nothing on the device, and both operators replay from a captured CUDA graph.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "test_compress.h"

static th_buf_t dev_from(const void *host, size_t n) {
    th_buf_t b = th_buf_device(n);
    th_buf_upload(&b, host);
    return b;
}

/* A device buffer still holds `host`, byte for byte, inside intact guards. */
static void expect_unchanged(th_ctx_t *t, const char *what, const th_buf_t *b, const void *host) {
    uint8_t *now = malloc(b->bytes);
    th_buf_download(b, now);
    th_cmp_bytes(t, what, now, host, b->bytes);
    th_buf_guards_ok(t, b, what);
    free(now);
}

/* ---- inv_rope -------------------------------------------------------------------------- */
typedef struct {
    dsv4_inv_rope_desc_t d;
    uint16_t *o; /* host input */
    int64_t *pos;
    float *cs;
    size_t o_elems;
} ir_case_t;

static void ir_case(th_rng_t *r, dsv4_inv_rope_desc_t d, ir_case_t *c) {
    const int64_t hp = d.num_heads_padded ? d.num_heads_padded : d.num_heads;
    const int64_t sh = d.o_stride_head ? d.o_stride_head : 512, st = d.o_stride_token ? d.o_stride_token : hp * sh;
    c->d = d;
    c->o_elems = (size_t)((d.num_tokens ? d.num_tokens - 1 : 0) * st + hp * sh);
    c->o = malloc(c->o_elems * 2);
    c->pos = malloc((size_t)(d.num_tokens ? d.num_tokens : 1) * 8);
    c->cs = malloc((size_t)d.max_position * 256);
    for (size_t i = 0; i < c->o_elems; ++i) c->o[i] = ct_bf16(r, 1);
    th_rotary_table(c->cs, d.max_position);
    for (int64_t i = 0; i < d.num_tokens; ++i) /* prefill positions, some outside the table */
        c->pos[i] =
            th_rng_range(r, 0, 19) ? th_rng_range(r, 0, d.max_position - 1) : th_rng_range(r, -2, 2 * d.max_position);
}

static void ir_case_free(ir_case_t *c) { free(c->o), free(c->pos), free(c->cs); }

static void gpu_ir_case(th_ctx_t *t, dsv4_inv_rope_desc_t shape) {
    ir_case_t c;
    ir_case(th_rng(t), shape, &c);
    th_buf_t dob = dev_from(c.o, c.o_elems * 2),
             dpos = dev_from(c.pos, (size_t)(shape.num_tokens ? shape.num_tokens : 1) * 8);
    th_buf_t dcs = dev_from(c.cs, (size_t)shape.max_position * 256);
    const dsv4_inv_rope_args_t ha = {c.o, c.pos, c.cs}, da = {th_ptr(&dob), th_ptr(&dpos), th_ptr(&dcs)};
    void *s = th_stream_create(t);
    TH_OK(t, dsv4_inv_rope(&c.d, &da, NULL, 0, DSV4_STREAM(s)));
    th_stream_sync_destroy(t, s);
    TH_OK(t, dsv4_inv_rope_ref(&c.d, &ha));
    uint16_t *got = malloc(c.o_elems * 2);
    th_buf_download(&dob, got);
    char what[128];
    snprintf(what, sizeof what, "inv_rope T=%lld H=%lld of %lld strides %lld/%lld", (long long)shape.num_tokens,
             (long long)shape.num_heads, (long long)shape.num_heads_padded, (long long)shape.o_stride_token,
             (long long)shape.o_stride_head);
    ct_cmp_bf16(t, what, got, c.o, c.o_elems, 512);
    th_buf_guards_ok(t, &dob, "o");
    expect_unchanged(t, "position_ids", &dpos, c.pos);
    expect_unchanged(t, "cos_sin_cache", &dcs, c.cs);
    th_buf_free(&dob), th_buf_free(&dpos), th_buf_free(&dcs);
    free(got);
    ir_case_free(&c);
}

void test_cmp_gpu_inv_rope(th_ctx_t *t) {
    gpu_ir_case(t, (dsv4_inv_rope_desc_t){.num_tokens = 300,
                                          .num_heads = 64,
                                          .max_position = 4096,
                                          .o_stride_token = 64 * 512,
                                          .o_stride_head = 512});
    gpu_ir_case(t, (dsv4_inv_rope_desc_t){.num_tokens = 300,
                                          .num_heads = 64,
                                          .num_heads_padded = 72,
                                          .max_position = 4096,
                                          .o_stride_token = 72 * 512,
                                          .o_stride_head = 512}); /* padding */
    gpu_ir_case(t, (dsv4_inv_rope_desc_t){.num_tokens = 300,
                                          .num_heads = 32,
                                          .num_heads_padded = 40,
                                          .o_stride_head = 520,
                                          .o_stride_token = 40 * 520 + 64,
                                          .max_position = 1024}); /* strided */
    gpu_ir_case(t, (dsv4_inv_rope_desc_t){.num_tokens = 1,
                                          .num_heads = 1,
                                          .max_position = 1,
                                          .o_stride_token = 1 * 512,
                                          .o_stride_head = 512});
    gpu_ir_case(t, (dsv4_inv_rope_desc_t){.num_tokens = 0,
                                          .num_heads = 16,
                                          .max_position = 8,
                                          .o_stride_token = 16 * 512,
                                          .o_stride_head = 512}); /* no-op */
}

/* ---- engram ------------------------------------------------------------------------------ */
/* Tables from host memory: device copies, or mapped pinned host memory. */
static void gpu_eg_case(th_ctx_t *t, dsv4_engram_lookup_desc_t shape, int host_mapped) {
    ct_engram_case_t c;
    ct_engram_case(th_rng(t), &shape, &c);
    th_buf_t dv = {0}, ds = {0}, di = dev_from(c.ids, c.ids_elems * 4), dout = th_buf_device(c.out_elems * 2 + 2);
    uint8_t *hv = NULL, *hs = NULL;
    void *pv = NULL, *ps = NULL;
    if (host_mapped) {
        if (!TH_CUDA(t, cudaHostAlloc((void **)&hv, c.values_bytes, cudaHostAllocMapped)) ||
            !TH_CUDA(t, cudaHostAlloc((void **)&hs, c.scales_bytes, cudaHostAllocMapped)) ||
            !TH_CUDA(t, cudaHostGetDevicePointer(&pv, hv, 0)) || !TH_CUDA(t, cudaHostGetDevicePointer(&ps, hs, 0)))
            goto done;
        memcpy(hv, c.values, c.values_bytes), memcpy(hs, c.scales, c.scales_bytes);
    } else {
        dv = dev_from(c.values, c.values_bytes), ds = dev_from(c.scales, c.scales_bytes);
        pv = th_ptr(&dv), ps = th_ptr(&ds);
    }
    th_buf_poison(&dout, 0xA7);
    {
        uint16_t *want = malloc(c.out_elems * 2 + 2), *got = malloc(c.out_elems * 2 + 2);
        const dsv4_engram_lookup_args_t da = {pv, ps, th_ptr(&di), th_ptr(&dout)};
        const dsv4_engram_lookup_args_t ha = {c.values, c.scales, c.ids, want};
        void *s = th_stream_create(t);
        TH_OK(t, dsv4_engram_lookup(&c.d, &da, NULL, 0, DSV4_STREAM(s)));
        th_stream_sync_destroy(t, s);
        TH_OK(t, dsv4_engram_lookup_ref(&c.d, &ha));
        th_buf_download(&dout, got);
        char what[160];
        ct_engram_name(what, sizeof what, host_mapped ? "host-mapped" : "device", &shape);
        ct_cmp_bf16(t, what, got, want, c.out_elems, (size_t)shape.head_dim);
        th_buf_guards_ok(t, &dout, "out");
        expect_unchanged(t, "ids", &di, c.ids);
        if (!host_mapped) expect_unchanged(t, "values", &dv, c.values), expect_unchanged(t, "scales", &ds, c.scales);
        else
            TH_CHECK(t, !memcmp(hv, c.values, c.values_bytes) && !memcmp(hs, c.scales, c.scales_bytes),
                     "host-mapped table modified");
        free(want), free(got);
    }
done:
    if (hv) cudaFreeHost(hv);
    if (hs) cudaFreeHost(hs);
    if (!host_mapped) th_buf_free(&dv), th_buf_free(&ds);
    th_buf_free(&di), th_buf_free(&dout);
    ct_engram_case_free(&c);
}

/* T=100, 8 heads x 256, 4 padding columns */
static const dsv4_engram_lookup_desc_t *const eg_model = &ct_engram_shapes[0];

void test_cmp_gpu_engram(th_ctx_t *t) {
    for (int i = 0; i < CT_ENGRAM_SHAPES; ++i) gpu_eg_case(t, ct_engram_shapes[i], 0);
    dsv4_engram_lookup_desc_t d = *eg_model;
    /* 524,672 units: more than two per thread of a resident wave (202,752 threads on an
     * H200), an odd count left over */
    d.num_tokens = 4099;
    gpu_eg_case(t, d, 0);
    d.num_tokens = 0; /* validates, launches nothing */
    gpu_eg_case(t, d, 0);
}

void test_cmp_gpu_engram_host_mapped(th_ctx_t *t) {
    gpu_eg_case(t, ct_engram_shapes[0], 1);
    gpu_eg_case(t, ct_engram_shapes[1], 1); /* strided tables */
}

/* ---- failing calls and graph capture ------------------------------------------------------ */
void test_cmp_gpu_bad_input_writes_nothing(th_ctx_t *t) {
    ir_case_t c;
    ir_case(th_rng(t),
            (dsv4_inv_rope_desc_t){
                .num_tokens = 64, .num_heads = 8, .max_position = 128, .o_stride_token = 8 * 512, .o_stride_head = 512},
            &c);
    th_buf_t dob = dev_from(c.o, c.o_elems * 2), dpos = dev_from(c.pos, 64 * 8), dcs = dev_from(c.cs, 128 * 256);
    dsv4_inv_rope_args_t da = {th_ptr(&dob), th_ptr(&dpos), th_ptr(&dcs)};
    void *s = th_stream_create(t);
    dsv4_inv_rope_desc_t d = c.d;
    d.o_stride_head = 516;
    TH_EXPECT_STATUS(t, dsv4_inv_rope(&d, &da, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_MISALIGNED);
    d = c.d, d.num_heads_padded = 4;
    TH_EXPECT_STATUS(t, dsv4_inv_rope(&d, &da, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_INVALID_VALUE);
    da.cos_sin_cache = (const float *)((const char *)th_ptr(&dcs) + 4);
    TH_EXPECT_STATUS(t, dsv4_inv_rope(&c.d, &da, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_MISALIGNED);
    th_stream_sync_destroy(t, s);
    expect_unchanged(t, "o after failing calls", &dob, c.o);
    th_buf_free(&dob), th_buf_free(&dpos), th_buf_free(&dcs);
    ir_case_free(&c);

    ct_engram_case_t e;
    ct_engram_case(th_rng(t), eg_model, &e);
    th_buf_t dv = dev_from(e.values, e.values_bytes), dsc = dev_from(e.scales, e.scales_bytes);
    th_buf_t di = dev_from(e.ids, e.ids_elems * 4), dout = th_buf_device(e.out_elems * 2);
    th_buf_poison(&dout, 0x3C);
    uint16_t *poison = malloc(e.out_elems * 2);
    memset(poison, 0x3C, e.out_elems * 2);
    dsv4_engram_lookup_args_t ea = {th_ptr(&dv), th_ptr(&dsc), th_ptr(&di), th_ptr(&dout)};
    s = th_stream_create(t);
    dsv4_engram_lookup_desc_t ed = e.d;
    ed.head_dim = 48;
    TH_EXPECT_STATUS(t, dsv4_engram_lookup(&ed, &ea, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_INVALID_VALUE);
    ed = e.d, ed.values_stride_bytes = 264;
    TH_EXPECT_STATUS(t, dsv4_engram_lookup(&ed, &ea, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_MISALIGNED);
    ea.values = (const uint8_t *)th_ptr(&dv) + 8;
    TH_EXPECT_STATUS(t, dsv4_engram_lookup(&e.d, &ea, NULL, 0, DSV4_STREAM(s)), DSV4_STATUS_MISALIGNED);
    th_stream_sync_destroy(t, s);
    expect_unchanged(t, "out after failing calls", &dout, poison);
    th_buf_free(&dv), th_buf_free(&dsc), th_buf_free(&di), th_buf_free(&dout);
    free(poison);
    ct_engram_case_free(&e);
}

void test_cmp_gpu_graph_capture(th_ctx_t *t) {
    ir_case_t c;
    ir_case(th_rng(t),
            (dsv4_inv_rope_desc_t){.num_tokens = 128,
                                   .num_heads = 16,
                                   .max_position = 256,
                                   .o_stride_token = 16 * 512,
                                   .o_stride_head = 512},
            &c);
    ct_engram_case_t e;
    ct_engram_case(th_rng(t), eg_model, &e);
    th_buf_t dob = dev_from(c.o, c.o_elems * 2), dpos = dev_from(c.pos, 128 * 8), dcs = dev_from(c.cs, 256 * 256);
    th_buf_t dv = dev_from(e.values, e.values_bytes), dsc = dev_from(e.scales, e.scales_bytes);
    th_buf_t di = dev_from(e.ids, e.ids_elems * 4), dout = th_buf_device(e.out_elems * 2);
    const dsv4_inv_rope_args_t ia = {th_ptr(&dob), th_ptr(&dpos), th_ptr(&dcs)};
    const dsv4_engram_lookup_args_t ea = {th_ptr(&dv), th_ptr(&dsc), th_ptr(&di), th_ptr(&dout)};
    cudaStream_t s = (cudaStream_t)th_stream_create(t);
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    if (TH_CUDA(t, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal))) {
        TH_OK(t, dsv4_inv_rope(&c.d, &ia, NULL, 0, DSV4_STREAM(s)));
        TH_OK(t, dsv4_engram_lookup(&e.d, &ea, NULL, 0, DSV4_STREAM(s)));
        if (TH_CUDA(t, cudaStreamEndCapture(s, &g)) && TH_CUDA(t, cudaGraphInstantiate(&ge, g, 0)))
            TH_CUDA(t, cudaGraphLaunch(ge, s)); /* one replay: inv_rope is in place */
    }
    th_stream_sync_destroy(t, s);
    uint16_t *got_o = malloc(c.o_elems * 2), *got_e = malloc(e.out_elems * 2), *want_e = malloc(e.out_elems * 2);
    const dsv4_inv_rope_args_t ih = {c.o, c.pos, c.cs};
    const dsv4_engram_lookup_args_t eh = {e.values, e.scales, e.ids, want_e};
    TH_OK(t, dsv4_inv_rope_ref(&c.d, &ih));
    TH_OK(t, dsv4_engram_lookup_ref(&e.d, &eh));
    th_buf_download(&dob, got_o), th_buf_download(&dout, got_e);
    ct_cmp_bf16(t, "inv_rope from a graph", got_o, c.o, c.o_elems, 512);
    ct_cmp_bf16(t, "engram_lookup from a graph", got_e, want_e, e.out_elems, 256);
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    th_buf_free(&dob), th_buf_free(&dpos), th_buf_free(&dcs), th_buf_free(&dv), th_buf_free(&dsc);
    th_buf_free(&di), th_buf_free(&dout);
    free(got_o), free(got_e), free(want_e);
    ir_case_free(&c);
    ct_engram_case_free(&e);
}
