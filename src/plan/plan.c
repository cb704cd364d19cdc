/* The capacity planner: validation, per-stage memory, and the choice of a split. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "plan/plan_model.h"

static const char *const OP = "plan";

#define PLAN_MAX_BYTES (INT64_C(1) << 50)
#define PLAN_MAX_TOKENS 1048576

/* The descriptor with its defaults applied, and the model. */
typedef struct plan_ctx {
    plan_model_t m;
    int pp;
    int tp[DSV4_PLAN_MAX_STAGES];
    int draft; /* draft blocks on the last stage */
    int64_t L, T, in_flight, usable;
    int slabs, splits, pad, ring_rows;
    int64_t activation, cudagraph, kv_given;
    int64_t idx_record;
} plan_ctx_t;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* First layer >= c that reads a cache or a top-k list of a layer before c (-1: the cut at
 * c is valid); *src receives that earlier layer. */
static int cut_breaker(const plan_model_t *m, int c, int *src) {
    for (int l = c; l < m->layers; l++) {
        const int s[3] = {m->kv_src[l], m->idx_src[l], m->topk_src[l]};
        for (int k = 0; k < 3; k++)
            if (s[k] >= 0 && s[k] < c) {
                *src = s[k];
                return l;
            }
    }
    return -1;
}

static int valid_cuts(const plan_model_t *m, int32_t *cuts) {
    int n = 0, src;
    for (int c = 1; c < m->layers; c++)
        if (cut_breaker(m, c, &src) < 0) cuts[n++] = c;
    return n;
}

static void cut_list(const plan_model_t *m, char *buf, size_t size) {
    int32_t cuts[DSV4_PLAN_MAX_LAYERS];
    int n = valid_cuts(m, cuts);
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < n && used < size; i++) {
        int w = snprintf(buf + used, size - used, i ? ", %d" : "%d", (int)cuts[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

static dsv4_status_t check_bytes(const char *what, int64_t v) {
    return dsv4_check_range(OP, what, v, 0, PLAN_MAX_BYTES);
}

/* Fails unless cutting before layer c is allowed. */
static dsv4_status_t check_cut(const plan_ctx_t *x, int c, int allow) {
    int src = -1, l = cut_breaker(&x->m, c, &src);
    if (l < 0 || allow) return DSV4_STATUS_SUCCESS;
    char cuts[256];
    cut_list(&x->m, cuts, sizeof cuts);
    return dsv4_fail(DSV4_STATUS_UNSUPPORTED, OP,
                     "stage_layers puts a cut before layer %d, inside a sharing group of %s: layer %d reads layer "
                     "%d's caches or top-k list; valid cuts are before layers %s (allow_group_cuts = 1 plans the "
                     "split with replicated sources)",
                     c, x->m.name, l, src, cuts);
}

static dsv4_status_t setup(const dsv4_plan_desc_t *d, plan_ctx_t *x) {
    DSV4_TRY(dsv4_check_ptr(OP, "desc", d));
    memset(x, 0, sizeof *x);
    if (!plan_model_get(d->model, &x->m))
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, OP,
                         "model = %d is not DSV4_PLAN_V4_FLASH (1), DSV4_PLAN_V4_PRO (2) or DSV4_PLAN_V41_FLASH (3)",
                         (int)d->model);
    const plan_model_t *m = &x->m;
    DSV4_TRY(dsv4_check_range(OP, "pp_size", d->pp_size, 1,
                              m->layers < DSV4_PLAN_MAX_STAGES ? m->layers : DSV4_PLAN_MAX_STAGES));
    x->pp = d->pp_size;
    int64_t gpus = 0;
    for (int s = 0; s < DSV4_PLAN_MAX_STAGES; s++) {
        char what[32];
        if (s >= x->pp) {
            snprintf(what, sizeof what, "stage_tp[%d]", s);
            DSV4_TRY(dsv4_check_range(OP, what, d->stage_tp[s], 0, 0));
            snprintf(what, sizeof what, "stage_layers[%d]", s);
            DSV4_TRY(dsv4_check_range(OP, what, d->stage_layers[s], 0, 0));
            continue;
        }
        int tp = d->stage_tp[s];
        if (tp == 0) {
            DSV4_TRY(dsv4_check_range(OP, "tp_size", d->tp_size, 1, 64));
            tp = d->tp_size;
        } else {
            snprintf(what, sizeof what, "stage_tp[%d]", s);
            DSV4_TRY(dsv4_check_range(OP, what, tp, 1, 64));
        }
        if (m->heads % tp || m->heads / tp < 8)
            return dsv4_fail(DSV4_STATUS_UNSUPPORTED, OP,
                             "TP %d of stage %d does not split the %lld attention heads of %s into equal shares of "
                             "at least 8",
                             tp, s, (long long)m->heads, m->name);
        if (m->inter % tp)
            return dsv4_fail(DSV4_STATUS_UNSUPPORTED, OP, "TP %d does not divide the expert width %lld of %s", tp,
                             (long long)m->inter, m->name);
        x->tp[s] = tp;
        gpus += tp;
    }
    if (d->num_gpus != 0 && d->num_gpus != gpus)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, OP,
                         "num_gpus = %d differs from the %lld GPUs of the stages' TP sizes", (int)d->num_gpus,
                         (long long)gpus);
    DSV4_TRY(dsv4_check_range(OP, "gpu_memory_bytes", d->gpu_memory_bytes, 1, PLAN_MAX_BYTES));
    DSV4_TRY(dsv4_check_range(OP, "max_model_len", d->max_model_len, 1, PLAN_MAX_TOKENS));
    DSV4_TRY(dsv4_check_range(OP, "max_num_batched_tokens", d->max_num_batched_tokens, 0, PLAN_MAX_TOKENS));
    DSV4_TRY(dsv4_check_range(OP, "num_speculative_tokens", d->num_speculative_tokens, 0, 64));
    DSV4_TRY(dsv4_check_range(OP, "max_concurrent_batches", d->max_concurrent_batches, 0, 64));
    DSV4_TRY(dsv4_check_range(OP, "prefill_slabs", d->prefill_slabs, 0, 64));
    DSV4_TRY(dsv4_check_range(OP, "indexer_splits", d->indexer_splits, 0, 1024));
    DSV4_TRY(dsv4_check_range(OP, "expert_pad", d->expert_pad, 0, 4096));
    DSV4_TRY(dsv4_check_range(OP, "allow_group_cuts", d->allow_group_cuts, 0, 1));
    DSV4_TRY(dsv4_check_range(OP, "indexer_format", d->indexer_format, 0, 1));
    DSV4_TRY(dsv4_check_range(OP, "reserved0", d->reserved0, 0, 0));
    DSV4_TRY(check_bytes("activation_bytes", d->activation_bytes));
    DSV4_TRY(check_bytes("cudagraph_bytes", d->cudagraph_bytes));
    DSV4_TRY(check_bytes("kv_cache_memory_bytes", d->kv_cache_memory_bytes));
    const double util = d->gpu_memory_utilization == 0.0 ? 0.9 : d->gpu_memory_utilization;
    if (!(util > 0.0 && util <= 1.0))
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, OP, "gpu_memory_utilization = %g is outside (0, 1]",
                         d->gpu_memory_utilization);

    int any = 0, sum = 0;
    for (int s = 0; s < x->pp; s++) any |= d->stage_layers[s] != 0, sum += d->stage_layers[s];
    if (any) {
        for (int s = 0; s < x->pp; s++) {
            char what[32];
            snprintf(what, sizeof what, "stage_layers[%d]", s);
            DSV4_TRY(dsv4_check_range(OP, what, d->stage_layers[s], 1, m->layers));
        }
        if (sum != m->layers)
            return dsv4_fail(DSV4_STATUS_INVALID_VALUE, OP, "stage_layers sum to %d, but %s has %d layers", sum,
                             m->name, m->layers);
    }

    x->L = d->max_model_len;
    x->T = d->max_num_batched_tokens ? d->max_num_batched_tokens : 8192;
    const int batches = d->max_concurrent_batches ? d->max_concurrent_batches : (x->pp > 2 ? x->pp : 2);
    x->in_flight = batches * x->T;
    x->usable = (int64_t)ceil((double)d->gpu_memory_bytes * util);
    x->draft = d->num_speculative_tokens > 0 ? m->draft_layers : 0;
    x->slabs = d->prefill_slabs ? d->prefill_slabs : (m->ring_ratio ? 1 : 4);
    x->splits = d->indexer_splits ? d->indexer_splits : 16;
    x->pad = d->expert_pad ? d->expert_pad : 128;
    x->activation = d->activation_bytes ? d->activation_bytes : x->T * m->hidden * 32;
    x->cudagraph = d->cudagraph_bytes ? d->cudagraph_bytes : INT64_C(512) << 20;
    x->kv_given = d->kv_cache_memory_bytes;
    x->idx_record = d->indexer_format == DSV4_PLAN_INDEXER_MXFP4 ? 68 : 132;
    /* Ring rows: max(8, next_pow2(num_speculative_tokens + 2)). */
    x->ring_rows = 8;
    while (x->ring_rows < d->num_speculative_tokens + 2) x->ring_rows *= 2;

    if (!any && !d->allow_group_cuts) {
        int32_t cuts[DSV4_PLAN_MAX_LAYERS];
        const int n = valid_cuts(m, cuts);
        if (n < x->pp - 1) {
            char list[256];
            cut_list(m, list, sizeof list);
            return dsv4_fail(DSV4_STATUS_UNSUPPORTED, OP,
                             "pp_size = %d needs %d cuts, but %s has only %d valid ones (before layers %s); give "
                             "stage_layers with allow_group_cuts = 1 to plan a replicated split",
                             x->pp, x->pp - 1, m->name, n, list);
        }
    }
    if (any) {
        int c = 0;
        for (int s = 0; s + 1 < x->pp; s++) {
            c += d->stage_layers[s];
            DSV4_TRY(check_cut(x, c, d->allow_group_cuts));
        }
    }
    return DSV4_STATUS_SUCCESS;
}

/* Routed experts of n layers with e experts, per GPU at TP tp (MXFP4: 17/32 B/param). */
static int64_t expert_bytes(const plan_ctx_t *x, int64_t n, int64_t e, int tp) {
    const int64_t w = ceil_div(x->m.inter / tp, x->pad) * x->pad;
    return n * e * 3 * x->m.hidden * w * 17 / 32;
}

/* Attention, shared expert and router of one block, per GPU: wq_a, wkv and the router are
 * replicated, the rest split by TP; fp8 except wo_a (bf16 on SM8x) and the bf16 router. */
static int64_t dense_bytes(const plan_model_t *m, int64_t experts, int tp) {
    const int64_t H = m->hidden, D = PLAN_HEAD_DIM;
    const int64_t replicated = H * m->q_lora + H * D + experts * H * 2;
    const int64_t split =
        m->q_lora * m->heads * D + m->heads * D * m->o_lora * 2 + m->o_groups * m->o_lora * H + 3 * H * m->inter;
    return replicated + split / tp;
}

static void plan_stage(const plan_ctx_t *x, int s, int a, int b, dsv4_plan_stage_t *st) {
    const plan_model_t *m = &x->m;
    const int tp = x->tp[s], last = b == m->layers, draft = last ? x->draft : 0;
    memset(st, 0, sizeof *st);
    st->first_layer = a, st->num_layers = b - a, st->num_draft_layers = draft, st->tp_size = tp;
    int src = -1;
    st->cut_ok = a == 0 || cut_breaker(m, a, &src) < 0;
    st->block_tokens = m->block_tokens;

    /* Weights. */
    st->expert_bytes = expert_bytes(x, b - a, m->experts, tp) + expert_bytes(x, draft, m->draft_experts, tp);
    int64_t w =
        st->expert_bytes + (b - a) * dense_bytes(m, m->experts, tp) + draft * dense_bytes(m, m->draft_experts, tp);
    const int64_t embed = m->vocab * m->hidden * 2 / tp;
    if (a == 0) w += embed;
    if (last) w += embed;
    st->weights_bytes = w;

    /* Caches held: compressed caches read by the stage's layers, indexer keys read by its
     * index sources; those of layers outside [a, b) are replicas. */
    int comp[DSV4_PLAN_MAX_LAYERS] = {0}, idx[DSV4_PLAN_MAX_LAYERS] = {0};
    int64_t n_slab = 0;
    int has_idx = 0, has_topk = 0, has_cand = 0;
    for (int l = a; l < b; l++) {
        if (m->kv_src[l] >= 0) {
            comp[m->kv_src[l]] = 1;
            const int64_t n = ceil_div(x->L, m->ratio[l]);
            if (n > n_slab) n_slab = n;
        }
        if (m->idx_src[l] >= 0) idx[m->idx_src[l]] = 1, has_idx = 1;
        has_topk |= m->topk_src[l] >= 0;
        has_cand |= m->candidate[l];
    }
    int64_t blk = 0, ring = 0;
    for (int l = 0; l < m->layers; l++) {
        const int64_t states = m->ratio[l] ? m->block_tokens / m->ratio[l] : 0;
        if (comp[l]) {
            blk += plan_page_bytes(states, PLAN_RECORD_BYTES);
            if (l >= a && l < b) st->owned_sources++;
            else st->replicated_sources++;
            if (m->ring_ratio && m->ratio[l] == m->ring_ratio) ring += (int64_t)x->ring_rows * PLAN_RING_ROW_BYTES;
        }
        if (idx[l]) blk += plan_page_bytes(states, x->idx_record);
    }
    st->kv_block_bytes = blk;
    st->kv_bytes_per_token = (double)blk / m->block_tokens;

    /* Per request: SWA pages reserved at admission on every layer, plus the rings. */
    const int64_t span = PLAN_WINDOW - 1 + x->in_flight < x->L ? PLAN_WINDOW - 1 + x->in_flight : x->L;
    const int64_t pages = ceil_div(span, m->swa_page_tokens) + 1;
    st->swa_bytes_per_request = (b - a + draft) * pages * plan_page_bytes(m->swa_page_tokens, PLAN_RECORD_BYTES);
    st->ring_bytes_per_request = ring;
    st->fixed_bytes_per_request = st->swa_bytes_per_request + ring;

    /* Reservations. */
    st->prefill_slab_rows = n_slab + PLAN_WINDOW + x->T;
    st->prefill_slab_bytes = x->slabs * st->prefill_slab_rows * PLAN_HEAD_DIM * 2;
    st->indexer_workspace_bytes = has_idx ? x->T * x->splits * m->index_topk * 8 : 0;
    st->index_buffer_bytes = (has_topk ? x->T * m->index_topk * 4 : 0) + (has_cand ? x->T * PLAN_CANDIDATES * 4 : 0);
    st->activation_bytes = x->activation;
    st->cudagraph_bytes = x->cudagraph;
    st->usable_bytes = x->usable;
    st->kv_bytes = x->kv_given ? x->kv_given
                               : x->usable - w - st->prefill_slab_bytes - st->indexer_workspace_bytes -
                                     st->index_buffer_bytes - st->activation_bytes - st->cudagraph_bytes;

    const double per_request = (double)st->fixed_bytes_per_request + (double)ceil_div(x->L, m->block_tokens) * blk;
    st->concurrency = st->kv_bytes > 0 ? (double)st->kv_bytes / per_request : 0.0;
    st->resident_tokens = (int64_t)floor(st->concurrency * (double)x->L);
    st->max_requests = (int64_t)floor(st->concurrency);
}

/* A stage's score for the split search: its concurrency, negative when the pool is. */
static double stage_score(const plan_ctx_t *x, int s, int a, int b) {
    dsv4_plan_stage_t st;
    plan_stage(x, s, a, b, &st);
    const double per_request =
        (double)st.fixed_bytes_per_request + (double)ceil_div(x->L, x->m.block_tokens) * (double)st.kv_block_bytes;
    return (double)st.kv_bytes / per_request;
}

/* The split into x->pp stages at the positions pos[0] = 0 < pos[1..n-1] that maximises the
 * smallest stage score (dynamic programming over (stage, first layer)). */
static void best_split(const plan_ctx_t *x, const int *pos, int n, int32_t *layers) {
    static const double NONE = -HUGE_VAL;
    double best[DSV4_PLAN_MAX_STAGES][DSV4_PLAN_MAX_LAYERS];
    int next[DSV4_PLAN_MAX_STAGES][DSV4_PLAN_MAX_LAYERS];
    const int L = x->m.layers, P = x->pp;
    for (int s = P - 1; s >= 0; s--)
        for (int i = 0; i < n; i++) {
            best[s][i] = NONE, next[s][i] = -1;
            if (s == P - 1) {
                best[s][i] = stage_score(x, s, pos[i], L);
                continue;
            }
            for (int j = i + 1; j < n; j++) {
                if (best[s + 1][j] == NONE) continue;
                const double a = stage_score(x, s, pos[i], pos[j]);
                const double v = a < best[s + 1][j] ? a : best[s + 1][j];
                if (v > best[s][i]) best[s][i] = v, next[s][i] = j;
            }
        }
    for (int s = 0, i = 0; s < P; s++) {
        const int j = s == P - 1 ? -1 : next[s][i];
        layers[s] = (j < 0 ? L : pos[j]) - pos[i];
        i = j;
    }
}

static int64_t choose(int64_t n, int64_t k) {
    if (k < 0 || k > n) return 0;
    int64_t c = 1;
    for (int64_t i = 1; i <= k; i++) c = c * (n - k + i) / i;
    return c;
}

dsv4_status_t dsv4_plan_check(const dsv4_plan_desc_t *desc) {
    plan_ctx_t x;
    return setup(desc, &x);
}

dsv4_status_t dsv4_plan(const dsv4_plan_desc_t *desc, dsv4_plan_result_t *result) {
    plan_ctx_t x;
    DSV4_TRY(setup(desc, &x));
    DSV4_TRY(dsv4_check_ptr(OP, "result", result));
    const plan_model_t *m = &x.m;
    dsv4_plan_result_t r;
    memset(&r, 0, sizeof r);
    r.num_valid_cuts = valid_cuts(m, r.valid_cuts);

    int32_t layers[DSV4_PLAN_MAX_STAGES] = {0};
    int auto_split = 1;
    for (int s = 0; s < x.pp; s++) auto_split &= desc->stage_layers[s] == 0;
    if (auto_split) {
        int pos[DSV4_PLAN_MAX_LAYERS], n = 0;
        pos[n++] = 0;
        for (int c = 1; c < m->layers; c++) {
            int ok = 0;
            for (int i = 0; i < r.num_valid_cuts; i++) ok |= r.valid_cuts[i] == c;
            if (ok || desc->allow_group_cuts) pos[n++] = c;
        }
        best_split(&x, pos, n, layers);
    } else {
        memcpy(layers, desc->stage_layers, sizeof(int32_t) * (size_t)x.pp);
    }

    r.num_stages = x.pp;
    r.num_layers = m->layers;
    r.num_draft_layers = x.draft;
    r.num_valid_splits = choose(r.num_valid_cuts, x.pp - 1);
    r.upstream_ok = 1;
    r.fits = 1;
    for (int s = 0, a = 0; s < x.pp; a += layers[s], s++) {
        dsv4_plan_stage_t *st = &r.stages[s];
        plan_stage(&x, s, a, a + layers[s], st);
        r.upstream_ok &= st->cut_ok;
        r.fits &= st->max_requests >= 1;
        if (s == 0 || st->concurrency < r.concurrency) r.concurrency = st->concurrency, r.bottleneck_stage = s;
    }
    r.resident_tokens = (int64_t)floor(r.concurrency * (double)x.L);
    r.max_requests = (int64_t)floor(r.concurrency);

    /* The whole model as one TP1 stage without padding or draft: the unsplit figures. */
    plan_ctx_t whole = x;
    whole.pp = 1, whole.tp[0] = 1, whole.pad = 1, whole.draft = 0;
    dsv4_plan_stage_t all;
    plan_stage(&whole, 0, 0, m->layers, &all);
    r.model_kv_bytes_per_token = all.kv_bytes_per_token;
    r.expert_bytes_per_layer = expert_bytes(&whole, 1, m->experts, 1);
    whole.draft = m->draft_layers;
    plan_stage(&whole, 0, 0, m->layers, &all);
    r.model_weights_bytes = all.weights_bytes;
    r.host_bytes = m->host_bytes;
    *result = r;
    return DSV4_STATUS_SUCCESS;
}
