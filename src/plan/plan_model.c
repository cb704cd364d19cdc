/* The planner's model tables: configurations and the role of every layer. */
#include "plan/plan_model.h"

#include <string.h>

int64_t plan_page_bytes(int64_t states, int64_t record) {
    return (states * record + PLAN_PAGE_ALIGN - 1) / PLAN_PAGE_ALIGN * PLAN_PAGE_ALIGN;
}

/* The largest member of src[0..n) that is <= layer, or -1. */
static int latest(const int *src, int n, int layer) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (src[i] <= layer) best = src[i];
    return best;
}

/* V4.1-Flash: YOCO sharing. Only kv-source layers own compressed and indexer caches; the
 * other layers read the latest source at or below them. */
static void roles_v41(plan_model_t *m) {
    static const int kv_sources[] = {2, 8, 14, 20};
    static const int index_sources[] = {2, 8, 14, 20, 24, 28, 32, 36};
    for (int l = 0; l < m->layers; l++) {
        m->ratio[l] = l < 2 ? 0 : l < 20 ? 2 : 1;
        m->kv_src[l] = m->ratio[l] ? latest(kv_sources, 4, l) : -1;
        m->topk_src[l] = m->ratio[l] ? latest(index_sources, 8, l) : -1;
        /* An index source scores its queries against its kv source's indexer keys. */
        m->idx_src[l] = m->topk_src[l] == l ? m->kv_src[l] : -1;
        /* Layer 20 writes the candidate blocks; index sources 24..36 read them. */
        m->candidate[l] = m->topk_src[l] == l && l >= 20;
    }
}

/* V4: every compressed layer owns its caches. C4A (ratio 4) has an indexer and a top-k
 * list; C128A (ratio 128) attends to every compressed entry. */
static void roles_v4(plan_model_t *m, int pro) {
    for (int l = 0; l < m->layers; l++) {
        int r = l < 2 ? (pro ? 128 : 0) : (l % 2 == 0 ? 4 : 128);
        m->ratio[l] = r;
        m->kv_src[l] = r ? l : -1;
        m->idx_src[l] = r == 4 ? l : -1;
        m->topk_src[l] = r == 4 ? l : -1;
        m->candidate[l] = 0;
    }
}

int plan_model_get(int32_t model, plan_model_t *m) {
    memset(m, 0, sizeof *m);
    m->vocab = 129280;
    m->o_lora = 1024;
    switch (model) {
    case DSV4_PLAN_V4_FLASH:
        m->name = "V4-Flash";
        m->layers = 43, m->draft_layers = 1;
        m->hidden = 4096, m->heads = 64, m->q_lora = 1024, m->o_groups = 8;
        m->experts = 256, m->draft_experts = 256, m->inter = 2048, m->index_topk = 512;
        m->block_tokens = 256, m->swa_page_tokens = 64;
        roles_v4(m, 0);
        return 1;
    case DSV4_PLAN_V4_PRO:
        m->name = "V4-Pro";
        m->layers = 61, m->draft_layers = 1;
        m->hidden = 7168, m->heads = 128, m->q_lora = 1536, m->o_groups = 16;
        m->experts = 384, m->draft_experts = 384, m->inter = 3072, m->index_topk = 1024;
        m->block_tokens = 256, m->swa_page_tokens = 64;
        roles_v4(m, 1);
        return 1;
    case DSV4_PLAN_V41_FLASH:
        m->name = "V4.1-Flash";
        m->layers = 40, m->draft_layers = 3;
        m->hidden = 5120, m->heads = 64, m->q_lora = 1280, m->o_groups = 8;
        m->experts = 384, m->draft_experts = 128, m->inter = 2304, m->index_topk = 512;
        m->block_tokens = 128, m->swa_page_tokens = 32;
        m->ring_ratio = 2;
        m->host_bytes = INT64_C(202760000000); /* Engram tables of the release */
        roles_v41(m);
        return 1;
    }
    return 0;
}
