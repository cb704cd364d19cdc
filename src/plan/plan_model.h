/* Internal: the planner's model tables (configuration, layer roles, page sizes). */
#ifndef DSV4_PLAN_MODEL_H
#define DSV4_PLAN_MODEL_H

#include <stdint.h>

#include "dsv4/plan.h"

#define PLAN_RECORD_BYTES 584    /* SWA and compressed-cache record (fp8_ds_mla)      */
#define PLAN_PAGE_ALIGN 576      /* every cache page is a multiple of this            */
#define PLAN_WINDOW 128          /* sliding window                                    */
#define PLAN_HEAD_DIM 512        /* latent width of a prefill slab row (bf16)         */
#define PLAN_RING_ROW_BYTES 4096 /* one compressor ring row: 1024 fp32                */
#define PLAN_CANDIDATES 2048     /* V4.1 candidate blocks per row                     */

typedef struct plan_model {
    const char *name;
    int layers;       /* backbone layers                                        */
    int draft_layers; /* draft blocks (V4.1 DSpark, V4 MTP)                     */
    int64_t hidden, heads, q_lora, o_lora, o_groups;
    int64_t experts, draft_experts, inter, index_topk, vocab;
    int block_tokens;    /* compressed/indexer block on SM8x                      */
    int swa_page_tokens; /* SWA page                                              */
    int ring_ratio;      /* sources of this ratio keep a compressor ring (0: none) */
    int64_t host_bytes;  /* tables kept in host memory                            */
    /* Per backbone layer: compression ratio (0: SWA only), the layer whose compressed
     * cache it reads, whose indexer keys it reads, whose top-k list it uses (-1: none),
     * and whether it uses the candidate-block buffer. */
    int ratio[DSV4_PLAN_MAX_LAYERS];
    int kv_src[DSV4_PLAN_MAX_LAYERS];
    int idx_src[DSV4_PLAN_MAX_LAYERS];
    int topk_src[DSV4_PLAN_MAX_LAYERS];
    int candidate[DSV4_PLAN_MAX_LAYERS];
} plan_model_t;

/* Fills *m for a dsv4_plan_model_t value; 0 if the value names no model. */
int plan_model_get(int32_t model, plan_model_t *m);

/* round_up(states * record, 576) */
int64_t plan_page_bytes(int64_t states, int64_t record);

#endif
