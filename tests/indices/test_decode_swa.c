/*
 * Decode SWA index lists on the GPU against the CPU reference: whole [T, W] rows (and row
 * padding) and the lens, bit-exact. Positions below the window, negative positions,
 * requests outside the table, pages past the table width, invalid tokens, W = 128 and odd
 * windows (element path), page sizes 1 .. 256, misaligned output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idx_test.h"

int dsw_gpu(th_ctx_t *t, const char *name, const dsv4_decode_swa_indices_desc_t *d,
            const dsv4_decode_swa_indices_args_t *h, size_t out_off) {
    const int64_t T = d->num_tokens, R = d->num_reqs;
    const int64_t bst = d->block_table_stride ? d->block_table_stride : d->block_table_width,
                  os = d->out_stride ? d->out_stride : d->window;
    idx_dev_t t2r = idx_dev_in(h->token_to_req, (size_t)T * 4, 0, "token_to_req");
    idx_dev_t pos = idx_dev_in(h->positions, (size_t)T * 4, 0, "positions");
    idx_dev_t val = idx_dev_in(h->is_valid_token, (size_t)T, 0, "is_valid_token");
    idx_dev_t tab = idx_dev_in(h->block_table, (size_t)(R * bst) * 4, 0, "block_table");
    idx_dev_t out = idx_dev_out((size_t)(T * os) * 4, out_off, "swa_indices");
    idx_dev_t lens = idx_dev_out((size_t)T * 4, 0, "swa_lens");
    dsv4_decode_swa_indices_args_t a = {idx_dev_ptr(&t2r), idx_dev_ptr(&pos), idx_dev_ptr(&val),
                                        idx_dev_ptr(&tab), idx_dev_ptr(&out), idx_dev_ptr(&lens)};
    void *s = th_stream_create(t);
    const int ok = idx_sync_status(t, name, dsv4_decode_swa_indices(d, &a, NULL, 0, DSV4_STREAM(s)), s);
    idx_dev_get(t, &out, h->swa_indices);
    idx_dev_get(t, &lens, h->swa_lens);
    idx_dev_t *const ins[] = {&t2r, &pos, &val, &tab}, *const outs[] = {&out, &lens};
    idx_dev_finish(t, ins, 4, outs, 2);
    return ok;
}

static void dsw_case(th_ctx_t *t, int64_t T, int64_t R, int64_t W, int64_t P, int64_t width, int pad, size_t out_off) {
    th_rng_t *r = th_rng(t);
    const int64_t bst = pad ? width + 2 : width, os = pad ? W + 3 : W;
    dsv4_decode_swa_indices_desc_t d = {T, R, W, P, width, bst, os};
    int32_t *t2r = malloc((size_t)(T + 1) * 4), *pos = malloc((size_t)(T + 1) * 4);
    int32_t *table = malloc((size_t)(R * bst) * 4);
    uint8_t *valid = malloc((size_t)T + 1);
    for (int64_t i = 0; i < R * bst; ++i) table[i] = (int32_t)th_rng_range(r, 0, 1 << 22);
    const int64_t reach = width * P + P; /* some windows run past the table */
    for (int64_t i = 0; i < T; ++i) {
        const int64_t k = th_rng_range(r, 0, 99);
        t2r[i] = k < 3 ? (int32_t)(k == 0 ? -1 : R) : (int32_t)th_rng_range(r, 0, R - 1);
        const int64_t p = th_rng_range(r, 0, 99);
        pos[i] = p < 25   ? (int32_t)th_rng_range(r, 0, W - 1) /* below the window */
                 : p < 28 ? (int32_t)th_rng_range(r, INT32_MIN, -1)
                 : p < 29 ? INT32_MAX
                          : (int32_t)th_rng_range(r, 0, reach < INT32_MAX ? reach : INT32_MAX);
        valid[i] = th_rng_range(r, 0, 9) == 0 ? 0 : 1;
    }
    char name[300];
    snprintf(name, sizeof name, "T=%lld R=%lld W=%lld P=%lld width=%lld pad=%d out_off=%zu seed=%llu", (long long)T,
             (long long)R, (long long)W, (long long)P, (long long)width, pad, out_off, (unsigned long long)th_seed(t));
    int32_t *want = idx_poisoned_i32((size_t)(T * os)), *got = idx_poisoned_i32((size_t)(T * os));
    int32_t *want_l = idx_poisoned_i32((size_t)T), *got_l = idx_poisoned_i32((size_t)T);
    dsv4_decode_swa_indices_args_t ref = {t2r, pos, valid, table, want, want_l};
    dsv4_decode_swa_indices_args_t gpu = {t2r, pos, valid, table, got, got_l};
    TH_OK(t, dsv4_decode_swa_indices_ref(&d, &ref));
    if (dsw_gpu(t, name, &d, &gpu, out_off)) {
        idx_cmp_i32(t, name, "swa_indices", got, want, (size_t)(T * os), os);
        idx_cmp_i32(t, name, "swa_lens", got_l, want_l, (size_t)T, 0);
    }
    free(want);
    free(got);
    free(want_l);
    free(got_l);
    free(t2r);
    free(pos);
    free(table);
    free(valid);
}

void test_decode_swa_gpu_random(th_ctx_t *t) {
    /* the model's window, pages and block-table width (model_cases.h), 4096 requests */
    dsw_case(t, 8192, 4096, MC_WINDOW, MC_V4_PAGE_TOKENS, MC_MAX_MODEL_LEN / MC_V4_PAGE_TOKENS, 0, 0);
    static const struct {
        int64_t T, R, W, P, width;
        int pad;
        size_t out_off;
    } shapes[] = {
        {1, 1, 128, 64, 4, 0, 0},     {777, 100, 128, 256, 40, 0, 0}, {500, 50, 128, 1, 300, 0, 0},
        {500, 50, 128, 3, 100, 1, 0}, {300, 7, 4, 4, 9, 0, 0},        {300, 7, 5, 16, 9, 0, 0},
        {300, 7, 100, 16, 9, 0, 4},   {128, 3, 128, 64, 16, 0, 4},    {0, 1, 128, 64, 4, 0, 0},
        {64, 2, 300, 7, 200, 1, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !th_failed(t); ++i)
        dsw_case(t, shapes[i].T, shapes[i].R, shapes[i].W, shapes[i].P, shapes[i].width, shapes[i].pad,
                 shapes[i].out_off);
}
