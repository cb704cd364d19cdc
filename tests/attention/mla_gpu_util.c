/* Device side of the sparse MLA tests: upload a case, run it with poisoned outputs and
 * guard bands, check that inputs are unchanged, download the result. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "mla_case.h"

static th_buf_t up(const void *src, size_t bytes) {
    th_buf_t b = th_buf_device(bytes ? bytes : 16);
    if (src && bytes) th_buf_upload(&b, src);
    return b;
}

void mla_decode_upload(const mla_decode_data_t *d, mla_decode_dev_t *g) {
    const mla_decode_case_t *c = &d->c;
    const size_t qb = (size_t)c->T * c->H * 512 * 2;
    memset(g, 0, sizeof *g);
    g->b[0] = up(d->q, qb);
    g->b[1] = up(NULL, qb);
    g->b[2] = up(d->main_cache, d->main_bytes);
    g->b[3] = up(d->main_ids, (size_t)c->T * c->main_width * 4);
    g->b[4] = up(d->main_lens, (size_t)c->T * 4);
    if (d->desc.has_extra) {
        g->b[5] = up(d->extra_cache, d->extra_bytes);
        g->b[6] = up(d->extra_ids, (size_t)c->T * c->extra_width * 4);
        g->b[7] = up(d->extra_lens, (size_t)c->T * 4);
    }
    if (d->sink) g->b[8] = up(d->sink, (size_t)c->H * 4);
    dsv4_sparse_mla_decode_args_t *a = &g->args;
    memset(a, 0, sizeof *a);
    a->q = th_ptr(&g->b[0]);
    a->out = th_ptr(&g->b[1]);
    a->main_cache = th_ptr(&g->b[2]);
    a->main_ids = th_ptr(&g->b[3]);
    a->main_lens = th_ptr(&g->b[4]);
    if (d->desc.has_extra) {
        a->extra_cache = th_ptr(&g->b[5]);
        a->extra_ids = th_ptr(&g->b[6]);
        a->extra_lens = th_ptr(&g->b[7]);
    }
    a->sink = d->sink ? th_ptr(&g->b[8]) : NULL;
}

void mla_prefill_make_upload(th_rng_t *r, const mla_prefill_case_t *c, mla_prefill_data_t *d, mla_prefill_dev_t *g) {
    mla_prefill_make(r, c, d);
    mla_prefill_upload(d, g);
}

void mla_prefill_upload(const mla_prefill_data_t *d, mla_prefill_dev_t *g) {
    const mla_prefill_case_t *c = &d->c;
    const size_t qb = (size_t)c->T * c->H * 512 * 2;
    const int64_t ks = c->kv_stride ? c->kv_stride : 512;
    memset(g, 0, sizeof *g);
    g->b[0] = up(d->q, qb);
    g->b[1] = up(NULL, qb);
    g->b[2] = up(d->kv, (size_t)(c->kv_rows > 0 ? c->kv_rows : 1) * ks * 2);
    g->b[3] = up(d->ids, (size_t)c->T * c->width * 4);
    g->b[4] = up(d->lens, (size_t)c->T * 4);
    if (d->sink) g->b[5] = up(d->sink, (size_t)c->H * 4);
    dsv4_sparse_mla_prefill_args_t *a = &g->args;
    memset(a, 0, sizeof *a);
    a->q = th_ptr(&g->b[0]);
    a->out = th_ptr(&g->b[1]);
    a->kv = th_ptr(&g->b[2]);
    a->ids = th_ptr(&g->b[3]);
    a->lens = th_ptr(&g->b[4]);
    a->sink = d->sink ? th_ptr(&g->b[5]) : NULL;
}

/* Inputs must come back byte for byte. */
static void inputs_unchanged(th_ctx_t *t, const th_buf_t *b, const void *host, const char *what) {
    if (!b->base || !host) return;
    void *h = malloc(b->bytes);
    th_buf_download(b, h);
    if (memcmp(h, host, b->bytes) != 0) th_fail(t, __FILE__, __LINE__, "input %s was modified", what);
    th_buf_guards_ok(t, b, what);
    free(h);
}

/* Under compute-sanitizer racecheck (DSV4_RACECHECK) the in-launch merge (merge 2) runs as
 * the second launch: its merge CTAs wait on flags of other CTAs, which racecheck slows past
 * the bounded wait (the rows then come out NaN). Returns 0 when a case cannot be moved. */
static int racecheck_merge_route(th_ctx_t *t, dsv4_sparse_mla_decode_desc_t *desc) {
    dsv4_sparse_mla_plan_t p;
    if (!getenv("DSV4_RACECHECK") || dsv4_sparse_mla_decode_plan(desc, &p) != DSV4_STATUS_SUCCESS || p.merge != 2)
        return 1;
    desc->sm_count = 1;
    if (dsv4_sparse_mla_decode_plan(desc, &p) == DSV4_STATUS_SUCCESS && p.merge != 2) return 1;
    th_note(t, "racecheck run: a case that plans the in-launch merge at one SM is left out");
    return 0;
}

int mla_decode_gpu(th_ctx_t *t, const mla_decode_data_t *d, mla_decode_dev_t *g,
                   const dsv4_sparse_mla_decode_desc_t *desc_in, uint16_t *out, float **ws_host, size_t *ws_bytes) {
    dsv4_sparse_mla_decode_desc_t eff = *desc_in;
    const dsv4_sparse_mla_decode_desc_t *desc = &eff;
    if (!racecheck_merge_route(t, &eff)) return 0;
    size_t need = 0;
    TH_OK(t, dsv4_sparse_mla_decode_workspace_size(desc, &need));
    th_buf_t ws = th_buf_device(need ? need : 16);
    th_buf_poison(&ws, 0xFF);      /* NaN floats: an unwritten partial shows */
    th_buf_poison(&g->b[1], 0xFF); /* bf16 0xFFFF: NaN */
    void *s = th_stream_create(t);
    const dsv4_status_t st = dsv4_sparse_mla_decode(desc, &g->args, need ? th_ptr(&ws) : NULL, need, DSV4_STREAM(s));
    TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "dsv4_sparse_mla_decode: %s (%s)", dsv4_status_string(st),
             dsv4_last_error());
    th_stream_sync_destroy(t, s);
    TH_CUDA(t, cudaGetLastError());
    th_buf_download(&g->b[1], out);
    th_buf_guards_ok(t, &g->b[1], "out");
    th_buf_guards_ok(t, &ws, "workspace");
    dsv4_sparse_mla_plan_t p;
    TH_OK(t, dsv4_sparse_mla_decode_plan(desc, &p));
    if (p.merge && st == DSV4_STATUS_SUCCESS) {
        /* The flag words after the partials: the merge CTAs (merge 2) leave every one at 0
         * for the next call; the second-launch merge (merge 1) does not touch them. */
        const size_t rows = (size_t)desc->num_tokens * (size_t)p.num_splits * (size_t)desc->num_heads;
        uint32_t *h = malloc(need);
        th_buf_download(&ws, h);
        const uint32_t *flags = h + rows * (DSV4_MLA_DIM + 2), want = p.merge == 2 ? 0u : 0xFFFFFFFFu;
        size_t bad = 0, first = 0;
        for (size_t r = 0; r < rows; ++r)
            if (flags[r] != want && bad++ == 0) first = r;
        TH_CHECK(t, bad == 0, "merge %d: %zu of %zu completion flags are not 0x%08x afterwards, first [%zu] = 0x%08x",
                 p.merge, bad, rows, want, first, bad ? flags[first] : 0u);
        free(h);
    }
    inputs_unchanged(t, &g->b[0], d->q, "q");
    inputs_unchanged(t, &g->b[2], d->main_cache, "main_cache");
    inputs_unchanged(t, &g->b[3], d->main_ids, "main_ids");
    inputs_unchanged(t, &g->b[4], d->main_lens, "main_lens");
    inputs_unchanged(t, &g->b[5], d->extra_cache, "extra_cache");
    inputs_unchanged(t, &g->b[6], d->extra_ids, "extra_ids");
    inputs_unchanged(t, &g->b[7], d->extra_lens, "extra_lens");
    inputs_unchanged(t, &g->b[8], d->sink, "sink");
    if (ws_host) {
        *ws_host = malloc(need ? need : 16);
        th_buf_download(&ws, *ws_host);
        *ws_bytes = need;
    }
    th_buf_free(&ws);
    return st == DSV4_STATUS_SUCCESS;
}

int mla_prefill_gpu(th_ctx_t *t, const mla_prefill_data_t *d, mla_prefill_dev_t *g,
                    const dsv4_sparse_mla_prefill_desc_t *desc, uint16_t *out) {
    th_buf_poison(&g->b[1], 0xFF);
    void *s = th_stream_create(t);
    const dsv4_status_t st = dsv4_sparse_mla_prefill(desc, &g->args, NULL, 0, DSV4_STREAM(s));
    TH_CHECK(t, st == DSV4_STATUS_SUCCESS, "dsv4_sparse_mla_prefill: %s (%s)", dsv4_status_string(st),
             dsv4_last_error());
    th_stream_sync_destroy(t, s);
    TH_CUDA(t, cudaGetLastError());
    th_buf_download(&g->b[1], out);
    th_buf_guards_ok(t, &g->b[1], "out");
    inputs_unchanged(t, &g->b[0], d->q, "q");
    inputs_unchanged(t, &g->b[2], d->kv, "kv");
    inputs_unchanged(t, &g->b[3], d->ids, "ids");
    inputs_unchanged(t, &g->b[4], d->lens, "lens");
    inputs_unchanged(t, &g->b[5], d->sink, "sink");
    return st == DSV4_STATUS_SUCCESS;
}

void mla_decode_dev_free(mla_decode_dev_t *g) {
    for (int i = 0; i < 9; ++i) th_buf_free(&g->b[i]);
}
void mla_prefill_dev_free(mla_prefill_dev_t *g) {
    for (int i = 0; i < 6; ++i) th_buf_free(&g->b[i]);
}
