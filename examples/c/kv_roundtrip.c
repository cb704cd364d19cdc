/*
 * libdsv4 from C, on the CPU reference path (no GPU needed): quantize four bf16 latent
 * rows into a small paged fp8 cache with dsv4_kv_insert_ref, read them back with
 * dsv4_kv_gather_ref, and check the round trip.
 *
 *   cc -std=c11 kv_roundtrip.c $(pkg-config --cflags --libs dsv4) -o kv_roundtrip
 *
 * The GPU calls dsv4_kv_insert / dsv4_kv_gather take the same descriptors and device
 * pointers, plus a workspace and a stream.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dsv4/dsv4.h>
#include <dsv4/numerics.h>

enum { PAGE_TOKENS = 4, NUM_PAGES = 2, ROWS = 4 };

static int fail(const char *what, dsv4_status_t st) {
    fprintf(stderr, "%s: %s (%s)\n", what, dsv4_status_string(st), dsv4_last_error());
    return 1;
}

int main(void) {
    printf("libdsv4 %s\n", dsv4_version_string());

    /* Row t holds (d - 256) / 64 + t in dim d: every 64-dim block gets its own scale. */
    static uint16_t k[ROWS * DSV4_KV_DIM];
    for (int t = 0; t < ROWS; ++t)
        for (int d = 0; d < DSV4_KV_DIM; ++d) k[t * DSV4_KV_DIM + d] = dsv4_f32_to_bf16((float)(d - 256) / 64.0f + t);

    /* Rows 0..3 go to slots 5, 6, 7, 0 (slot / PAGE_TOKENS: pages 1, 1, 1, 0). */
    const int64_t slots[ROWS] = {5, 6, 7, 0};
    const int64_t page_stride = PAGE_TOKENS * DSV4_KV_RECORD_BYTES;
    uint8_t *cache = calloc((size_t)(NUM_PAGES * page_stride), 1);
    const dsv4_kv_insert_desc_t ins = {.num_tokens = ROWS,
                                       .page_tokens = PAGE_TOKENS,
                                       .page_stride_bytes = page_stride,
                                       .num_pages = NUM_PAGES,
                                       .k_stride_row = 512};
    const dsv4_kv_insert_args_t ins_args = {.k = k, .slot_mapping = slots, .cache = cache};
    dsv4_status_t st = dsv4_kv_insert_ref(&ins, &ins_args);
    if (st != DSV4_STATUS_SUCCESS) return fail("dsv4_kv_insert_ref", st);

    /* One request of 5 tokens whose block table maps logical pages 0, 1 to physical pages
     * 1, 0; gathering its last 4 positions (1..4) reads slots 5, 6, 7, 0: the rows above. */
    const int32_t seq_lens[1] = {5}, gather_lens[1] = {4}, block_table[2] = {1, 0};
    static uint16_t out[ROWS * DSV4_KV_DIM];
    const dsv4_kv_gather_desc_t gat = {.num_reqs = 1,
                                       .block_table_width = 2,
                                       .out_rows = ROWS,
                                       .page_tokens = PAGE_TOKENS,
                                       .page_stride_bytes = page_stride,
                                       .num_pages = NUM_PAGES,
                                       .block_table_stride = 2,
                                       .out_stride_req = ROWS * 512,
                                       .out_stride_row = 512};
    const dsv4_kv_gather_args_t gat_args = {
        .cache = cache, .seq_lens = seq_lens, .gather_lens = gather_lens, .block_table = block_table, .out = out};
    st = dsv4_kv_gather_ref(&gat, &gat_args);
    if (st != DSV4_STATUS_SUCCESS) return fail("dsv4_kv_gather_ref", st);

    /* The RoPE dims (448..511) come back bit for bit; the fp8 dims within e4m3's rounding
     * error (half a step: at most 2^-4 of the value) of the input. */
    int bad = 0;
    double worst = 0.0;
    for (int t = 0; t < ROWS; ++t) {
        for (int d = 0; d < DSV4_KV_DIM; ++d) {
            const uint16_t want = k[t * DSV4_KV_DIM + d], got = out[t * DSV4_KV_DIM + d];
            if (d >= DSV4_KV_NOPE_DIM) {
                bad += got != want;
                continue;
            }
            const double x = dsv4_bf16_to_f32(want), y = dsv4_bf16_to_f32(got), err = fabs(y - x);
            if (err > worst) worst = err;
            bad += err > fabs(x) / 16.0;
        }
        printf("row %d: in %8.4f %8.4f %8.4f ... out %8.4f %8.4f %8.4f ...\n", t, dsv4_bf16_to_f32(k[t * DSV4_KV_DIM]),
               dsv4_bf16_to_f32(k[t * DSV4_KV_DIM + 100]), dsv4_bf16_to_f32(k[t * DSV4_KV_DIM + 500]),
               dsv4_bf16_to_f32(out[t * DSV4_KV_DIM]), dsv4_bf16_to_f32(out[t * DSV4_KV_DIM + 100]),
               dsv4_bf16_to_f32(out[t * DSV4_KV_DIM + 500]));
    }
    free(cache);
    printf("%d rows round-tripped, largest fp8 error %.4g, %d value(s) out of bounds\n", ROWS, worst, bad);
    if (bad) {
        printf("FAILED\n");
        return 1;
    }
    printf("OK\n");
    return 0;
}
