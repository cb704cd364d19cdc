/*
 * The worked example: V4.1-Flash on six 64 GB Ampere GPUs at max_model_len 1,048,576 with
 * DSpark K = 5, and the figures the model description derives for it (KV bytes per token
 * per stage and topology, valid cuts, weights per GPU, SWA reservations, rings), plus the
 * whole-model KV costs of all three models and the page sizes.
 */
#include <math.h>
#include <string.h>

#include "test_plan.h"

static void expect_bpt(th_ctx_t *t, const char *topo, const dsv4_plan_result_t *r, const double *want, int n) {
    TH_CHECK(t, r->num_stages == n, "%s: %d stages, expected %d", topo, r->num_stages, n);
    for (int s = 0; s < n && s < r->num_stages; s++)
        TH_CHECK(t, r->stages[s].kv_bytes_per_token == want[s], "%s: stage %d costs %.2f B/token, expected %.2f", topo,
                 s, r->stages[s].kv_bytes_per_token, want[s]);
}

static void expect_cuts_ok(th_ctx_t *t, const char *topo, const dsv4_plan_result_t *r, const int *want) {
    int all = 1;
    for (int s = 0; s < r->num_stages; s++) {
        TH_CHECK(t, r->stages[s].cut_ok == want[s], "%s: stage %d (layer %d) cut_ok %d, expected %d", topo, s,
                 r->stages[s].first_layer, r->stages[s].cut_ok, want[s]);
        all &= want[s];
    }
    TH_CHECK(t, r->upstream_ok == all, "%s: upstream_ok %d, expected %d", topo, r->upstream_ok, all);
}

void test_plan_worked_example(th_ctx_t *t) {
    static dsv4_plan_result_t r;
    /* TP2 x PP3 with the product's 14/14/12 split: 720, 1,080, 720 (a replica of layer 20's
     * caches on stage 2); the cut at 28 is inside group 20-39, so upstream refuses it. */
    dsv4_plan_desc_t d = plan_desc_64g(2, 3);
    d.stage_layers[0] = 14, d.stage_layers[1] = 14, d.stage_layers[2] = 12;
    TH_EXPECT_STATUS(t, dsv4_plan(&d, &r), DSV4_STATUS_UNSUPPORTED);
    th_expect_error(t, "TP2xPP3 14/14/12 without allow_group_cuts", "plan", "layer 28", "layer 20");
    d.allow_group_cuts = 1;
    if (plan_run(t, &d, &r)) return;
    expect_bpt(t, "TP2xPP3", &r, (const double[]){720, 1080, 720}, 3);
    expect_cuts_ok(t, "TP2xPP3", &r, (const int[]){1, 1, 0});
    TH_CHECK(t, r.bottleneck_stage == 1, "TP2xPP3: bottleneck stage %d, expected 1", r.bottleneck_stage);
    TH_CHECK(t, r.stages[2].owned_sources == 0 && r.stages[2].replicated_sources == 1,
             "TP2xPP3 stage 2 owns %d and replicates %d sources, expected 0 and 1", r.stages[2].owned_sources,
             r.stages[2].replicated_sources);
    TH_CHECK(t, r.stages[2].num_draft_layers == 3 && r.stages[0].num_draft_layers == 0,
             "the 3 DSpark blocks belong on the last stage");
    /* Stage 1: experts 7.22 GB x 14 / 2, about 52-53 GB of weights per GPU in all; 64 GiB x
     * 0.9 = 61.8 GB usable. */
    plan_near(t, "stage 1 experts (GB)", r.stages[1].expert_bytes / 1e9, 7.2194 * 14 / 2, 0.01);
    plan_near(t, "stage 1 weights (GB)", r.stages[1].weights_bytes / 1e9, 52.5, 0.6);
    plan_near(t, "usable (GB)", r.stages[1].usable_bytes / 1e9, 61.85, 0.01);
    /* With 3-4 GB of activations, graphs and workspaces, 5-6 GB are left for KV: about
     * 4.6-5.5 M tokens at 1,080 B/token before the per-request reservations, fewer after. */
    const dsv4_plan_stage_t *s1 = &r.stages[1];
    const double reserved = (double)(s1->prefill_slab_bytes + s1->indexer_workspace_bytes + s1->index_buffer_bytes +
                                     s1->activation_bytes + s1->cudagraph_bytes);
    TH_CHECK(t, reserved >= 3e9 && reserved <= 4e9, "stage 1 reserves %.2f GB besides weights, expected 3-4",
             reserved / 1e9);
    TH_CHECK(t, s1->kv_bytes >= 5.0e9 && s1->kv_bytes <= 6.5e9, "stage 1 KV pool %.2f GB, expected about 5-6",
             s1->kv_bytes / 1e9);
    const double linear_tokens = s1->kv_bytes / s1->kv_bytes_per_token;
    TH_CHECK(t, linear_tokens >= 4.6e6 && linear_tokens <= 6.0e6, "stage 1 linear capacity %.3g tokens", linear_tokens);
    TH_CHECK(t, r.resident_tokens < linear_tokens && r.resident_tokens > 0.8 * linear_tokens,
             "resident tokens %lld against %.0f without the per-request SWA reservations", (long long)r.resident_tokens,
             linear_tokens);
    /* The product's 4,648,480 tokens = 4.433 x 1,048,576 need 5.02 GB (4.68 GiB) at 1,080 B/token. */
    plan_near(t, "4,648,480 / max_model_len", 4648480.0 / MODEL_LEN, 4.433, 0.0005);
    plan_near(t, "4,648,480 tokens on stage 1 (GB)", 4648480.0 * s1->kv_bytes_per_token / 1e9, 5.02, 0.005);
    plan_near(t, "4,648,480 tokens on stage 1 (GiB)", 4648480.0 * s1->kv_bytes_per_token / GIB, 4.68, 0.005);
    /* Per request on a 14-layer stage at chunk 8,192 and PP3: 773 SWA pages per layer, 14.7 MB
     * per layer, about 206 MB in all. */
    plan_near(t, "stage 1 SWA per layer per request (MB)", r.stages[1].swa_bytes_per_request / 14 / 1e6, 14.7, 0.05);
    TH_CHECK(t, r.stages[1].swa_bytes_per_request == INT64_C(14) * 773 * 19008, "stage 1 SWA %lld B per request",
             (long long)r.stages[1].swa_bytes_per_request);
    plan_near(t, "stage 1 per request (MB)", r.stages[1].fixed_bytes_per_request / 1e6, 206, 0.5);

    /* PP6, 7/7/7/7/6/6: 360; 360 + 292.5 (layer 7 reads source 2's compressed cache); 1,080;
     * 720 three times (replicas of layer 20); the cuts at 7, 21, 28, 34 are inside groups. */
    d = plan_desc_64g(1, 6);
    d.allow_group_cuts = 1;
    const int pp6[6] = {7, 7, 7, 7, 6, 6};
    memcpy(d.stage_layers, pp6, sizeof pp6);
    if (plan_run(t, &d, &r)) return;
    expect_bpt(t, "PP6", &r, (const double[]){360, 652.5, 1080, 720, 720, 720}, 6);
    expect_cuts_ok(t, "PP6", &r, (const int[]){1, 0, 1, 0, 0, 0});
    plan_near(t, "PP6 stage 2 weights (GB)", r.stages[2].weights_bytes / 1e9, 52.5, 1.0);

    /* TP2 + TP4: the planner's choice is the cut at 14 (a group boundary): 720 on TP2, 1,080
     * on TP4 with 26 layers of experts at 46.9 GB per GPU unpadded. */
    d = plan_desc_64g(0, 2);
    d.stage_tp[0] = 2, d.stage_tp[1] = 4, d.num_gpus = 6, d.expert_pad = 1;
    if (plan_run(t, &d, &r)) return;
    expect_bpt(t, "TP2+TP4", &r, (const double[]){720, 1080}, 2);
    expect_cuts_ok(t, "TP2+TP4", &r, (const int[]){1, 1});
    TH_CHECK(t, r.stages[1].first_layer == 14, "TP2+TP4 cuts at %d, expected 14", r.stages[1].first_layer);
    plan_near(t, "TP4 stage experts without draft (GB)",
              (r.stages[1].expert_bytes - INT64_C(3) * 128 * 3 * 5120 * 576 * 17 / 32) / 1e9, 46.9, 0.05);
    /* With the Marlin padding 576 -> 640 the same experts take 11% more memory. */
    d.expert_pad = 0;
    static dsv4_plan_result_t padded;
    if (plan_run(t, &d, &padded)) return;
    plan_near(t, "TP4 expert padding", (double)padded.stages[1].expert_bytes / r.stages[1].expert_bytes, 640.0 / 576,
              1e-9);

    /* Layers 20-39 on one stage: 72.2 GB per GPU at TP2 (does not fit 64 GB), 36.1 at TP4. */
    d = plan_desc_64g(2, 2);
    d.stage_layers[0] = 20, d.stage_layers[1] = 20, d.num_speculative_tokens = 0, d.expert_pad = 1;
    if (plan_run(t, &d, &r)) return;
    plan_near(t, "layers 20-39 experts at TP2 (GB)", r.stages[1].expert_bytes / 1e9, 72.19, 0.01);
    TH_CHECK(t, !r.fits && r.stages[1].kv_bytes < 0, "layers 20-39 at TP2 must not fit (KV pool %lld)",
             (long long)r.stages[1].kv_bytes);
    d.tp_size = 4;
    if (plan_run(t, &d, &r)) return;
    plan_near(t, "layers 20-39 experts at TP4 (GB)", r.stages[1].expert_bytes / 1e9, 36.1, 0.01);
    /* Hence TP2 x PP3 with valid cuts only cannot fit on 64 GB. */
    d = plan_desc_64g(2, 3);
    if (plan_run(t, &d, &r)) return;
    TH_CHECK(t, !r.fits && r.upstream_ok, "TP2xPP3 at valid cuts: fits %d upstream_ok %d", r.fits, r.upstream_ok);
    TH_CHECK(t, r.stages[2].first_layer == 20, "the last stage starts at %d, expected 20", r.stages[2].first_layer);
    /* 64 heads do not divide by 3 or 6. */
    for (int tp = 3; tp <= 6; tp += 3) {
        d = plan_desc_64g(tp, 1);
        TH_EXPECT_STATUS(t, dsv4_plan(&d, &r), DSV4_STATUS_UNSUPPORTED);
        th_expect_error(t, "TP 3 / 6", "plan", "64 attention heads", NULL);
    }
}

/* One backbone layer's caches: a stage holding only layer l (the split l / 1 / rest). */
static int64_t block_of_layer(th_ctx_t *t, int model, int layer, int fmt, int *block_tokens) {
    static dsv4_plan_result_t r;
    dsv4_plan_desc_t d = plan_desc_64g(1, 3);
    d.model = model, d.allow_group_cuts = 1, d.indexer_format = fmt;
    const int n = model == DSV4_PLAN_V41_FLASH ? 40 : model == DSV4_PLAN_V4_FLASH ? 43 : 61;
    d.stage_layers[0] = layer, d.stage_layers[1] = 1, d.stage_layers[2] = n - layer - 1;
    if (plan_run(t, &d, &r)) return -1;
    *block_tokens = r.stages[1].block_tokens;
    return r.stages[1].kv_block_bytes;
}

void test_plan_pages(th_ctx_t *t) {
    static const struct {
        int model, layer, fmt;
        int64_t block;
        int tokens;
    } cases[] = {
        /* V4.1 at block 128: r = 2 sources 37,440 + 8,640; layer 20 (r = 1) 74,880 + 17,280. */
        {DSV4_PLAN_V41_FLASH, 2, 0, 37440 + 8640, 128},
        {DSV4_PLAN_V41_FLASH, 20, 0, 74880 + 17280, 128},
        {DSV4_PLAN_V41_FLASH, 20, 1, 74880 + 9216, 128},
        {DSV4_PLAN_V41_FLASH, 8, 1, 37440 + 4608, 128},
        {DSV4_PLAN_V41_FLASH, 1, 0, 0, 128},
        /* V4 at block 256: C4A 37,440 + 8,640 (MXFP4 4,608), C128A 1,728. */
        {DSV4_PLAN_V4_FLASH, 2, 0, 37440 + 8640, 256},
        {DSV4_PLAN_V4_FLASH, 4, 1, 37440 + 4608, 256},
        {DSV4_PLAN_V4_FLASH, 3, 0, 1728, 256},
        {DSV4_PLAN_V4_PRO, 1, 0, 1728, 256},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int tokens = 0;
        const int64_t got = block_of_layer(t, cases[i].model, cases[i].layer, cases[i].fmt, &tokens);
        TH_CHECK(t, got == cases[i].block && tokens == cases[i].tokens,
                 "model %d layer %d format %d: %lld B per %d-token block, expected %lld per %d", cases[i].model,
                 cases[i].layer, cases[i].fmt, (long long)got, tokens, (long long)cases[i].block, cases[i].tokens);
    }
    /* Whole models: 1,800 / 1,642.5 (V4.1-Flash), 3,915 / 3,584.25 (V4-Flash), 5,609.25 /
     * 5,136.75 (V4-Pro) B/token with the FP8 / MXFP4 indexer. */
    static const struct {
        int model;
        double fp8, mxfp4;
    } whole[] = {{DSV4_PLAN_V41_FLASH, 1800, 1642.5},
                 {DSV4_PLAN_V4_FLASH, 3915, 3584.25},
                 {DSV4_PLAN_V4_PRO, 5609.25, 5136.75}};
    static dsv4_plan_result_t r;
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        for (int fmt = 0; fmt < 2; fmt++) {
            dsv4_plan_desc_t d = plan_desc_64g(8, 1);
            d.model = whole[i].model, d.indexer_format = fmt;
            if (plan_run(t, &d, &r)) return;
            const double want = fmt ? whole[i].mxfp4 : whole[i].fp8;
            TH_CHECK(t, r.model_kv_bytes_per_token == want && r.stages[0].kv_bytes_per_token == want,
                     "model %d format %d: %.2f (stage %.2f) B/token, expected %.2f", whole[i].model, fmt,
                     r.model_kv_bytes_per_token, r.stages[0].kv_bytes_per_token, want);
        }
}

void test_plan_weights(th_ctx_t *t) {
    static dsv4_plan_result_t r;
    dsv4_plan_desc_t d = plan_desc_64g(8, 1);
    if (plan_run(t, &d, &r)) return;
    /* One layer's experts: 384 x 3 x 5120 x 2304 params x 0.53125 B = 7.219 GB; all experts
     * with the draft blocks 296.00 GB; the whole GPU-resident model near the release's
     * 307.53 GB (11.53 GB non-expert + 296.00 GB experts); 202.76 GB of Engram on the host. */
    TH_CHECK(t, r.expert_bytes_per_layer == INT64_C(7219445760), "expert bytes per layer %lld",
             (long long)r.expert_bytes_per_layer);
    plan_near(t, "experts with draft (GB)", (40 * 7219445760.0 + 3.0 * 128 * 3 * 5120 * 2304 * 0.53125) / 1e9, 296.0,
              0.01);
    plan_near(t, "model weights / release", r.model_weights_bytes / 307.53e9, 1.0, 0.01);
    plan_near(t, "host tables (GB)", r.host_bytes / 1e9, 202.76, 0.005);
    /* TP8 pads each rank's 288-wide slice to 384. */
    plan_near(t, "TP8 experts per GPU / unpadded",
              r.stages[0].expert_bytes / ((40 * 7219445760.0 + 3 * 7219445760.0 / 3) / 8), 384.0 / 288, 1e-9);
}

void test_plan_requests(th_ctx_t *t) {
    static dsv4_plan_result_t r;
    /* Stage 0 of TP2 x PP3 14/14/12 owns the ratio-2 sources 2 and 8: two rings of 8 rows x
     * 4 KB at K = 5 (5 + 2 rounds to 8), 16 rows at K = 7. */
    dsv4_plan_desc_t d = plan_desc_64g(2, 3);
    d.stage_layers[0] = 14, d.stage_layers[1] = 14, d.stage_layers[2] = 12, d.allow_group_cuts = 1;
    if (plan_run(t, &d, &r)) return;
    TH_CHECK(t, r.stages[0].ring_bytes_per_request == 2 * 8 * 4096 && r.stages[2].ring_bytes_per_request == 0,
             "rings %lld / %lld B per request", (long long)r.stages[0].ring_bytes_per_request,
             (long long)r.stages[2].ring_bytes_per_request);
    d.num_speculative_tokens = 7;
    if (plan_run(t, &d, &r)) return;
    TH_CHECK(t, r.stages[0].ring_bytes_per_request == 2 * 16 * 4096, "rings at K = 7: %lld",
             (long long)r.stages[0].ring_bytes_per_request);
    /* The draft blocks keep SWA caches of their own: 12 + 3 layers of 773 pages. */
    TH_CHECK(t, r.stages[2].swa_bytes_per_request == INT64_C(15) * 773 * 19008, "stage 2 SWA %lld",
             (long long)r.stages[2].swa_bytes_per_request);
    /* PP1 keeps 2 batches in flight (async scheduling): ceil((127 + 16,384) / 32) + 1 = 517 pages. */
    d = plan_desc_64g(8, 1);
    d.gpu_memory_bytes = 80 * GIB;
    if (plan_run(t, &d, &r)) return;
    TH_CHECK(t, r.stages[0].swa_bytes_per_request == INT64_C(43) * 517 * 19008, "PP1 SWA %lld",
             (long long)r.stages[0].swa_bytes_per_request);
    /* A short max_model_len bounds the SWA reservation: ceil(4,096 / 32) + 1 = 129 pages. */
    d.max_model_len = 4096;
    if (plan_run(t, &d, &r)) return;
    TH_CHECK(t, r.stages[0].swa_bytes_per_request == INT64_C(43) * 129 * 19008, "short SWA %lld",
             (long long)r.stages[0].swa_bytes_per_request);
}
