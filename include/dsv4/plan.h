/*
 * The plan family: a capacity planner for serving DeepSeek-V4-Flash, V4-Pro and V4.1-Flash
 * with vLLM on Ampere GPUs. Host arithmetic only: no device, no allocation. The model of
 * memory, its assumptions and tables for common machines: docs/planner.md.
 *
 *   dsv4_plan_check  is the descriptor valid (model, GPUs, TP/PP, split, limits)?
 *   dsv4_plan        per pipeline stage: layers, weights, KV bytes per token, workspace
 *                    reservations, resident KV tokens; the valid pipeline cuts
 *
 * ---------------------------------------------------------------------------------
 * What a stage's GPU holds (every GPU of a stage holds the same; bytes per GPU)
 * ---------------------------------------------------------------------------------
 *   weights     routed experts (MXFP4: 0.53125 B/param, each rank's slice of the expert
 *               intermediate size padded up to expert_pad, as the Marlin MXFP4 path does:
 *               V4.1 inter 2304 at TP4 is 576 -> 640), the attention and shared-expert
 *               weights of its layers (fp8, wo_a bf16; split by TP except wq_a, wkv and
 *               the router), the embedding (first stage) and LM head (last stage) in bf16
 *               split by TP, and the draft blocks (last stage) when speculative decoding
 *               is on. Engram tables (V4.1) stay in host memory.
 *   reservations  prefill slab: prefill_slabs * M rows * 512 bf16, M = N + 128 +
 *               max_num_batched_tokens, N = ceil(max_model_len / r) for the smallest
 *               ratio r of a compressed cache the stage reads (0 if none);
 *               indexer top-k workspace: max_num_batched_tokens * indexer_splits *
 *               index_topk * 8 bytes on stages with an indexer (there is no logits
 *               matrix and no 512 MiB logits reservation); the top-k index buffer (and the
 *               V4.1 candidate-block buffer) int32 per batched token; activations and CUDA
 *               graphs (estimates unless given).
 *   KV pool     usable = ceil(gpu_memory_bytes * gpu_memory_utilization), minus weights
 *               and reservations (or kv_cache_memory_bytes when given).
 *
 * KV memory: the MLA latent has one KV head, so KV is NOT split by TP; pipeline stages
 * split the layers and with them the caches. A page is round_up(states * record, 576)
 * bytes with records of 584 bytes (SWA and compressed caches) and 132 bytes (FP8 indexer
 * keys; MXFP4 68).
 *   linear (grows with context): each compressed cache costs 584 * (states per page) padded,
 *     per (block_tokens) tokens, i.e. 585 / r B/token for V4.1 at block 128 (r = 2: 292.5;
 *     r = 1: 585) and 146.25 (C4A) or 6.75 (C128A) for V4 at block 256; the FP8 indexer
 *     135 / r (C4A: 33.75). V4.1-Flash owns caches only on its kv-source layers 2, 8, 14
 *     (r = 2) and 20 (r = 1): 1,800 B/token for the whole model (1,642.5 with MXFP4).
 *     V4-Flash: 3,915 (3,584); V4-Pro: 5,609.25 (5,136.75).
 *   per request (bounded): every layer's SWA cache (also draft blocks) reserves
 *     ceil(min(127 + in_flight, max_model_len) / P) + 1 pages at admission, P = 32 tokens
 *     per 19,008-byte page (V4.1) or 64 per 37,440 (V4), in_flight = max_concurrent_batches
 *     * max_num_batched_tokens; each V4.1 ratio-2 source keeps a compressor ring of
 *     max(8, next_pow2(num_speculative_tokens + 2)) rows of 4,096 bytes.
 *   A stage's concurrency is kv_bytes / (fixed_bytes_per_request + ceil(max_model_len /
 *   block_tokens) * kv_block_bytes), and resident_tokens = floor(concurrency *
 *   max_model_len): vLLM's "GPU KV cache size" figure, which counts every request's
 *   bounded reservation. The engine runs at the smallest concurrency over all stages.
 *
 * Pipeline cuts: a stage may begin at layer c only if no layer at or after c reads a
 * compressed cache, indexer keys or a top-k list of a layer before c (V4.1's YOCO sharing
 * groups {2-7}, {8-13}, {14-19}, {20-39}: valid cuts 1, 2, 8, 14, 20; V4: every layer).
 * vLLM refuses any other cut. With allow_group_cuts = 1 such a split is planned as if the
 * sources were replicated onto every stage that reads them (each replica pays its cache's
 * B/token again) and result->upstream_ok is 0; with 0 it fails with DSV4_STATUS_UNSUPPORTED.
 *
 * Errors: NULL desc or result -> NULL_POINTER; a field out of range -> INVALID_VALUE; a
 * TP size that does not divide the attention heads (TP 3, 6) or the expert width, or a
 * group cut without allow_group_cuts -> UNSUPPORTED. dsv4_last_error() names the field and
 * value. Nothing is written to *result on failure. A plan whose weights or reservations
 * do not fit is still a success: result->fits = 0 and the stages say where.
 */
#ifndef DSV4_PLAN_H
#define DSV4_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/dsv4.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSV4_PLAN_MAX_STAGES 64 /* pipeline stages a plan may have                  */
#define DSV4_PLAN_MAX_LAYERS 64 /* backbone layers of the largest model (V4-Pro 61) */

typedef enum dsv4_plan_model {
    DSV4_PLAN_V4_FLASH = 1, /* 43 layers (+1 MTP), hidden 4096                                 */
    DSV4_PLAN_V4_PRO = 2,   /* 61 layers (+1 MTP), hidden 7168                                 */
    DSV4_PLAN_V41_FLASH = 3 /* 40 layers (+3 DSpark draft blocks), hidden 5120, YOCO sharing   */
} dsv4_plan_model_t;

typedef enum dsv4_plan_indexer_format {
    DSV4_PLAN_INDEXER_FP8 = 0,  /* 132-byte key records: the SM80 default */
    DSV4_PLAN_INDEXER_MXFP4 = 1 /* 68-byte key records                    */
} dsv4_plan_indexer_format_t;

typedef struct dsv4_plan_desc {
    int32_t model;                              /* dsv4_plan_model_t                                         */
    int32_t num_gpus;                           /* must equal the sum of the stages' TP sizes (0: that sum)  */
    int64_t gpu_memory_bytes;                   /* memory of each GPU, e.g. 64 GiB = 68719476736             */
    int32_t tp_size;                            /* TP of every stage whose stage_tp entry is 0               */
    int32_t pp_size;                            /* pipeline stages, 1..DSV4_PLAN_MAX_STAGES                  */
    int32_t stage_tp[DSV4_PLAN_MAX_STAGES];     /* per-stage TP (first pp_size; 0: tp_size): TP2+TP4 is
                                               pp_size 2, stage_tp {2, 4}                                */
    int32_t stage_layers[DSV4_PLAN_MAX_STAGES]; /* backbone layers per stage (first pp_size), summing to
                                                   the model's layers; all 0: the planner picks the valid
                                                   split with the most resident tokens                   */
    int32_t allow_group_cuts;                   /* 1: plan splits inside a sharing group (see above)         */
    int32_t indexer_format;                     /* dsv4_plan_indexer_format_t                                */
    int64_t max_model_len;                      /* tokens per request, 1..1048576                            */
    double gpu_memory_utilization;              /* (0, 1]; 0: 0.9                                            */
    int64_t max_num_batched_tokens;             /* tokens per step, 1..1048576; 0: 8192                      */
    int32_t num_speculative_tokens;             /* draft tokens per step, 0..64; > 0 puts the draft blocks
                                               (V4.1 DSpark, V4 MTP) on the last stage                   */
    int32_t max_concurrent_batches;             /* batches in flight; 0: pp_size, at least 2 (async)         */
    int32_t prefill_slabs;                      /* max_model_len slabs reserved for prefill; 0: 1 for V4.1
                                               (chunks planned by area), 4 for V4                        */
    int32_t indexer_splits;                     /* column splits S of the top-k workspace; 0: 16             */
    int32_t expert_pad;                         /* per-rank expert width multiple; 0: 128; 1: no padding     */
    int32_t reserved0;                          /* must be 0                                                 */
    int64_t activation_bytes;                   /* per GPU; 0: max_num_batched_tokens * hidden * 32          */
    int64_t cudagraph_bytes;                    /* per GPU; 0: 512 MiB                                       */
    int64_t kv_cache_memory_bytes;              /* per GPU KV pool as vLLM's --kv-cache-memory-bytes; 0: from
                                               the memory model                                          */
} dsv4_plan_desc_t;

typedef struct dsv4_plan_stage {
    int32_t first_layer; /* backbone layers [first_layer, first_layer + num_layers)      */
    int32_t num_layers;
    int32_t num_draft_layers; /* draft blocks hosted (last stage, speculative decoding on)    */
    int32_t tp_size;
    int32_t cut_ok;                  /* 1: the cut before first_layer is at a group boundary        */
    int32_t owned_sources;           /* compressed caches owned (kv-source layers)                  */
    int32_t replicated_sources;      /* caches of other stages' layers it must hold a replica of    */
    int32_t block_tokens;            /* tokens per KV block (128 V4.1 on SM8x, 256 V4)              */
    int64_t expert_bytes;            /* routed experts per GPU (padded)                             */
    int64_t weights_bytes;           /* all weights per GPU, expert_bytes included                  */
    int64_t kv_block_bytes;          /* compressed + indexer pages per block: the linear KV cost     */
    double kv_bytes_per_token;       /* kv_block_bytes / block_tokens (V4.1: 720, 1,080 ...)         */
    int64_t swa_bytes_per_request;   /* SWA pages reserved per request, all layers of the stage      */
    int64_t ring_bytes_per_request;  /* compressor rings per request                                */
    int64_t fixed_bytes_per_request; /* the two above                                               */
    int64_t prefill_slab_rows;       /* M                                                           */
    int64_t prefill_slab_bytes;      /* prefill_slabs * M * 1024                                    */
    int64_t indexer_workspace_bytes; /* fused top-k workspace                                       */
    int64_t index_buffer_bytes;      /* top-k index and candidate-block buffers                     */
    int64_t activation_bytes;        /* activations (estimate or given)                             */
    int64_t cudagraph_bytes;         /* CUDA graphs (estimate or given)                             */
    int64_t usable_bytes;            /* ceil(gpu_memory_bytes * utilization)                        */
    int64_t kv_bytes;                /* KV pool: usable minus weights and reservations (may be < 0) */
    double concurrency;              /* max_model_len requests the pool holds (0 if kv_bytes <= 0)  */
    int64_t resident_tokens;         /* floor(concurrency * max_model_len)                           */
    int64_t max_requests;            /* floor(concurrency)                                          */
} dsv4_plan_stage_t;

typedef struct dsv4_plan_result {
    int32_t num_stages;
    int32_t num_layers;       /* backbone layers of the model                            */
    int32_t num_draft_layers; /* draft blocks on the GPU (0 without speculative tokens)  */
    int32_t upstream_ok;      /* 1: every cut is at a sharing-group boundary             */
    int32_t fits;             /* 1: every stage holds at least one max_model_len request */
    int32_t bottleneck_stage; /* the stage with the smallest concurrency                 */
    int32_t num_valid_cuts;
    int32_t valid_cuts[DSV4_PLAN_MAX_LAYERS]; /* layers a stage may begin at, ascending               */
    int32_t reserved0;
    int64_t num_valid_splits;        /* splits into pp_size stages using only valid cuts        */
    double model_kv_bytes_per_token; /* whole model, no replicas (V4.1-Flash FP8: 1,800)        */
    int64_t expert_bytes_per_layer;  /* one backbone layer's routed experts, unsplit            */
    int64_t model_weights_bytes;     /* whole model on the GPU, unsplit, no padding             */
    int64_t host_bytes;              /* tables kept in host memory (V4.1 Engram)               */
    int64_t resident_tokens;         /* min over stages: vLLM's "GPU KV cache size"            */
    double concurrency;              /* min over stages                                        */
    int64_t max_requests;            /* floor(concurrency)                                     */
    dsv4_plan_stage_t stages[DSV4_PLAN_MAX_STAGES];
} dsv4_plan_result_t;

/* Validates the descriptor (and the split it names); touches nothing else. */
dsv4_status_t dsv4_plan_check(const dsv4_plan_desc_t *desc);

/* Fills *result (every field; stages beyond num_stages are zero). */
dsv4_status_t dsv4_plan(const dsv4_plan_desc_t *desc, dsv4_plan_result_t *result);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_PLAN_H */
