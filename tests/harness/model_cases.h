/*
 * Model-shaped geometry and shape lists that the tests and dsv4_bench share, so that both
 * exercise the shapes a DeepSeek-V4.1 (and V4) deployment produces. Plain constants over the
 * public headers; each family's tests and benchmark cases build their inputs from these, and
 * the benchmark's case parsers check the shapes their names carry against the lists. Tests
 * that want small or odd sizes for coverage write those themselves.
 */
#ifndef DSV4_TESTS_MODEL_CASES_H
#define DSV4_TESTS_MODEL_CASES_H

#include <stdint.h>

#include "dsv4/kvcache.h"

#define MC_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* 1 when v is one of the n values of list (the benchmark's check of a case name's shape). */
static inline int mc_listed(int64_t v, const int64_t *list, int n) {
    for (int i = 0; i < n; ++i)
        if (list[i] == v) return 1;
    return 0;
}

/* ---- caches ------------------------------------------------------------------------------ */

/* vLLM's page stride for P fp8_ds_mla slots: P * 584 bytes rounded up to a multiple of 576. */
#define MC_PAGE_STRIDE(P)                                                                                              \
    (((P)*DSV4_KV_RECORD_BYTES + DSV4_KV_DATA_BYTES - 1) / DSV4_KV_DATA_BYTES * DSV4_KV_DATA_BYTES)

#define MC_SWA_PAGE_TOKENS 32 /* V4.1's SWA cache: 32 slots per page (stride 19,008 B)         */
#define MC_V4_PAGE_TOKENS 64  /* V4's SWA and ratio-4 compressed pages (stride 37,440 B)       */
#define MC_C128_PAGE_TOKENS 2 /* V4's ratio-128 compressed page (stride 1,728 B)               */

/* ---- model geometry ---------------------------------------------------------------------- */

#define MC_WINDOW 128          /* sliding window of every DeepSeek-V4 model                     */
#define MC_TOPK 512            /* index_topk of V4-Flash and V4.1: compressed keys per token    */
#define MC_TOPK_PRO 1024       /* index_topk of V4-Pro                                          */
#define MC_HEADS_TP1 64        /* query heads per rank of V4-Flash and V4.1 at TP 1 ...         */
#define MC_HEADS_TP2 32        /* ... at TP 2                                                   */
#define MC_HEADS_TP4 16        /* ... at TP 4                                                   */
#define MC_MHC_HIDDEN 5120     /* V4.1-Flash hidden size (the mHC residual width per stream)    */
#define MC_MHC_HIDDEN_V4 4096  /* V4-Flash hidden size                                          */
#define MC_MHC_HIDDEN_PRO 7168 /* V4-Pro hidden size                                           */
#define MC_RATIO 4             /* compression ratio of the top-k layers' cache                  */
#define MC_BLOCK_TOKENS 64     /* tokens one block-table entry covers                           */

/* ---- batches ----------------------------------------------------------------------------- */

#define MC_CHUNK_REQS 4         /* requests per prefill chunk                                    */
#define MC_CHUNK_T 1536         /* prefill chunk tokens: the product's benchmark chunk           */
#define MC_CHUNK_T_MAX 8192     /* prefill chunk tokens: a typical max_num_batched_tokens        */
#define MC_DECODE_T_MAX 384     /* decode tokens: 64 requests x (1 + 5 speculative tokens)       */
#define MC_MAX_MODEL_LEN 131072 /* the context the index cases size block tables and slabs for */
#define MC_DECODE_CTX_MIN 1024  /* decode contexts the index cases draw: 1K ...                */
#define MC_DECODE_CTX_MAX 65536 /* ... to 64K tokens                                           */

/* Prefixes (tokens already cached) of the requests of a prefill chunk: a fresh prompt, then
 * short, medium and long contexts. */
static const int64_t mc_chunk_prefixes[MC_CHUNK_REQS] = {0, 3000, 20000, 100000};

/* ---- sparse MLA ---------------------------------------------------------------------------- */

#define MC_MLA_WIDTH (MC_TOPK + MC_WINDOW)         /* keys per token: top-k + window (640)    */
#define MC_MLA_WIDTH_PRO (MC_TOPK_PRO + MC_WINDOW) /* V4-Pro (1,152)                          */
#define MC_MLA_PREFILL_T_MAX 4096                  /* the longest chunk the prefill rows time */

static const int64_t mc_mla_heads[3] = {MC_HEADS_TP1, MC_HEADS_TP2, MC_HEADS_TP4};
static const int64_t mc_mla_prefill_T[2] = {MC_CHUNK_T, MC_MLA_PREFILL_T_MAX};
static const int64_t mc_mla_prefill_widths[2] = {MC_MLA_WIDTH, MC_MLA_WIDTH_PRO};

/* A decode batch: T tokens of H heads, each listing w_main window keys and w_extra top-k keys. */
typedef struct {
    int T, H, w_main, w_extra;
} mc_mla_decode_shape_t;

/* The decode batches timed with the model's lists: T = 1 (latency), 4 - 16 (a few requests
 * with speculative tokens), 64 (64 requests), 384 (64 requests x 6). */
static const mc_mla_decode_shape_t mc_mla_decode_shapes[] = {
    {1, MC_HEADS_TP1, MC_WINDOW, MC_TOPK},  {4, MC_HEADS_TP1, MC_WINDOW, MC_TOPK},
    {8, MC_HEADS_TP2, MC_WINDOW, MC_TOPK},  {8, MC_HEADS_TP1, MC_WINDOW, MC_TOPK},
    {12, MC_HEADS_TP1, MC_WINDOW, MC_TOPK}, {16, MC_HEADS_TP1, MC_WINDOW, MC_TOPK},
    {64, MC_HEADS_TP1, MC_WINDOW, MC_TOPK}, {MC_DECODE_T_MAX, MC_HEADS_TP1, MC_WINDOW, MC_TOPK},
};

/* ---- indices ------------------------------------------------------------------------------- */

static const int64_t mc_chunk_T[2] = {MC_CHUNK_T, MC_CHUNK_T_MAX};
static const int64_t mc_topks[2] = {MC_TOPK, MC_TOPK_PRO};

/* ---- mHC ----------------------------------------------------------------------------------- */

/* V4-Flash, V4.1-Flash, V4-Pro. */
static const int64_t mc_mhc_hiddens[3] = {MC_MHC_HIDDEN_V4, MC_MHC_HIDDEN, MC_MHC_HIDDEN_PRO};

/* Seam batches: decode steps (1 - 64 tokens, both sides of the auto route's T < 16) and
 * prefill chunks (512 - 8192). */
static const int64_t mc_mhc_seam_T[] = {1, 6, 12, 16, 64, 512, 2048, MC_CHUNK_T_MAX};
/* The forced-route sweep: both sides of the auto boundary and of the routes' crossover. */
static const int64_t mc_mhc_route_T[] = {6, 12, 16, 24, 32, 48, 64};

#endif /* DSV4_TESTS_MODEL_CASES_H */
