/*
 * Planner invariants on random descriptors (seeded): more memory or utilization never
 * gives fewer tokens, a longer context never a higher concurrency; the chosen split uses
 * only valid cuts and is at least as good as every valid split; the totals are the
 * minimum over the stages; bad input fails with a message and leaves the result alone.
 */
#include <math.h>
#include <string.h>

#include "test_plan.h"

static const int LAYERS[4] = {0, 43, 61, 40};

/* A random valid descriptor: model, TP from the heads' divisors, PP 1..4, memory 24-96 GiB. */
static dsv4_plan_desc_t random_desc(th_rng_t *g) {
    dsv4_plan_desc_t d;
    memset(&d, 0, sizeof d);
    d.model = (int32_t)th_rng_range(g, 1, 3);
    d.pp_size = (int32_t)th_rng_range(g, 1, d.model == DSV4_PLAN_V41_FLASH ? 3 : 4);
    const int tps[4] = {1, 2, 4, 8};
    d.tp_size = tps[th_rng_range(g, 0, 3)];
    if (th_rng_range(g, 0, 1))
        for (int s = 0; s < d.pp_size; s++) d.stage_tp[s] = tps[th_rng_range(g, 0, 3)];
    d.gpu_memory_bytes = th_rng_range(g, 24, 96) * GIB;
    d.max_model_len = th_rng_range(g, 1, MODEL_LEN);
    d.gpu_memory_utilization = 0.5 + 0.5 * th_rng_unit(g);
    d.max_num_batched_tokens = th_rng_range(g, 256, 16384);
    d.num_speculative_tokens = (int32_t)th_rng_range(g, 0, 7);
    d.indexer_format = (int32_t)th_rng_range(g, 0, 1);
    d.expert_pad = th_rng_range(g, 0, 1) ? 0 : 1;
    return d;
}

static void check_totals(th_ctx_t *t, const dsv4_plan_desc_t *d, const dsv4_plan_result_t *r) {
    double conc = INFINITY;
    int first = 0, fits = 1;
    for (int s = 0; s < r->num_stages; s++) {
        const dsv4_plan_stage_t *st = &r->stages[s];
        TH_CHECK(t, st->first_layer == first && st->num_layers >= 1, "stage %d starts at %d with %d layers", s,
                 st->first_layer, st->num_layers);
        first += st->num_layers;
        /* Independent recomputation of the stage's concurrency from its own fields. */
        const double per_req = (double)st->fixed_bytes_per_request +
                               ceil((double)d->max_model_len / st->block_tokens) * (double)st->kv_block_bytes;
        const double want = st->kv_bytes > 0 ? st->kv_bytes / per_req : 0.0;
        plan_near(t, "stage concurrency", st->concurrency, want, 1e-9 * (1 + want));
        TH_CHECK(t, st->kv_bytes_per_token * st->block_tokens == (double)st->kv_block_bytes, "B/token of stage %d", s);
        conc = st->concurrency < conc ? st->concurrency : conc;
        fits &= st->max_requests >= 1;
    }
    TH_CHECK(t, first == r->num_layers, "stages cover %d of %d layers", first, r->num_layers);
    TH_CHECK(t, r->concurrency == conc && r->fits == fits, "totals: concurrency %g (min %g), fits %d (%d)",
             r->concurrency, conc, r->fits, fits);
    TH_CHECK(t, r->resident_tokens == (int64_t)floor(conc * (double)d->max_model_len), "resident tokens %lld",
             (long long)r->resident_tokens);
}

void test_plan_monotone(th_ctx_t *t) {
    th_rng_t *g = th_rng(t);
    static dsv4_plan_result_t a, b;
    int planned = 0;
    for (int it = 0; it < 300; it++) {
        dsv4_plan_desc_t d = random_desc(g);
        if (dsv4_plan(&d, &a) != DSV4_STATUS_SUCCESS) continue; /* e.g. a TP that leaves < 8 heads */
        planned++;
        check_totals(t, &d, &a);
        /* Same split, more memory (or a higher utilization): no stage loses tokens. */
        dsv4_plan_desc_t more = d;
        for (int s = 0; s < a.num_stages; s++) more.stage_layers[s] = a.stages[s].num_layers;
        more.allow_group_cuts = 1;
        if (th_rng_range(g, 0, 1)) more.gpu_memory_bytes += th_rng_range(g, 1, 16) * GIB;
        else more.gpu_memory_utilization = d.gpu_memory_utilization + (1.0 - d.gpu_memory_utilization) * 0.5;
        if (plan_run(t, &more, &b)) return;
        for (int s = 0; s < a.num_stages; s++)
            TH_CHECK(t, b.stages[s].resident_tokens >= a.stages[s].resident_tokens,
                     "more memory: stage %d %lld < %lld tokens", s, (long long)b.stages[s].resident_tokens,
                     (long long)a.stages[s].resident_tokens);
        /* With the split free as well, the total cannot drop either. */
        dsv4_plan_desc_t free_split = d;
        free_split.gpu_memory_bytes = more.gpu_memory_bytes,
        free_split.gpu_memory_utilization = more.gpu_memory_utilization;
        if (plan_run(t, &free_split, &b)) return;
        TH_CHECK(t, b.resident_tokens >= a.resident_tokens, "more memory: %lld < %lld tokens",
                 (long long)b.resident_tokens, (long long)a.resident_tokens);
        /* A longer context: concurrency never rises. */
        dsv4_plan_desc_t longer = more;
        longer.gpu_memory_bytes = d.gpu_memory_bytes, longer.gpu_memory_utilization = d.gpu_memory_utilization;
        longer.max_model_len = d.max_model_len + th_rng_range(g, 1, MODEL_LEN - d.max_model_len + 1) - 1;
        if (longer.max_model_len > MODEL_LEN) longer.max_model_len = MODEL_LEN;
        if (plan_run(t, &longer, &b)) return;
        TH_CHECK(t, b.concurrency <= a.concurrency * (1 + 1e-12), "longer context: concurrency %g > %g", b.concurrency,
                 a.concurrency);
    }
    TH_CHECK(t, planned > 100, "only %d of 300 random descriptors planned", planned);
}

/* Every split of n layers into k stages at positions from cuts[] (ascending). */
static double best_by_enumeration(th_ctx_t *t, dsv4_plan_desc_t d, const int32_t *cuts, int n) {
    static dsv4_plan_result_t r;
    double best = -1;
    for (unsigned mask = 0; mask < (1u << n); mask++) {
        if (__builtin_popcount(mask) != d.pp_size - 1) continue;
        int prev = 0, s = 0;
        for (int i = 0; i < n; i++)
            if (mask >> i & 1) d.stage_layers[s++] = cuts[i] - prev, prev = cuts[i];
        d.stage_layers[s] = LAYERS[d.model] - prev;
        if (plan_run(t, &d, &r)) return -1;
        TH_CHECK(t, r.upstream_ok, "a split at valid cuts is reported refused");
        if (r.concurrency > best) best = r.concurrency;
    }
    return best;
}

void test_plan_splits(th_ctx_t *t) {
    static dsv4_plan_result_t r;
    /* V4.1: cuts only before 1, 2, 8, 14, 20; V4: before every layer. */
    dsv4_plan_desc_t d = plan_desc_64g(8, 1);
    if (plan_run(t, &d, &r)) return;
    static const int32_t v41[5] = {1, 2, 8, 14, 20};
    TH_CHECK(t, r.num_valid_cuts == 5 && !memcmp(r.valid_cuts, v41, sizeof v41), "V4.1 valid cuts: %d of them",
             r.num_valid_cuts);
    for (int m = DSV4_PLAN_V4_FLASH; m <= DSV4_PLAN_V4_PRO; m++) {
        d.model = m;
        if (plan_run(t, &d, &r)) return;
        int ok = r.num_valid_cuts == LAYERS[m] - 1;
        for (int i = 0; ok && i < r.num_valid_cuts; i++) ok = r.valid_cuts[i] == i + 1;
        TH_CHECK(t, ok, "model %d: %d valid cuts, expected every layer", m, r.num_valid_cuts);
    }
    /* Every explicit V4.1 split: accepted exactly when its cuts are valid. */
    th_rng_t *g = th_rng(t);
    for (int it = 0; it < 200; it++) {
        d = plan_desc_64g(8, (int)th_rng_range(g, 2, 4));
        int left = 40;
        for (int s = 0; s < d.pp_size - 1; s++) {
            d.stage_layers[s] = (int32_t)th_rng_range(g, 1, left - (d.pp_size - 1 - s));
            left -= d.stage_layers[s];
        }
        d.stage_layers[d.pp_size - 1] = left;
        int valid = 1;
        for (int s = 0, c = 0; s + 1 < d.pp_size; s++) {
            c += d.stage_layers[s];
            int hit = 0;
            for (int i = 0; i < 5; i++) hit |= v41[i] == c;
            valid &= hit;
        }
        const dsv4_status_t st = dsv4_plan(&d, &r);
        TH_CHECK(t, st == (valid ? DSV4_STATUS_SUCCESS : DSV4_STATUS_UNSUPPORTED), "split %d/%d/%d...: %s",
                 d.stage_layers[0], d.stage_layers[1], d.stage_layers[2], dsv4_status_string(st));
        d.allow_group_cuts = 1;
        if (plan_run(t, &d, &r)) return;
        TH_CHECK(t, r.upstream_ok == valid, "split validity %d reported as %d", valid, r.upstream_ok);
    }
    /* The planner's own split uses valid cuts and is the best of all valid splits. */
    for (int it = 0; it < 12; it++) {
        d = plan_desc_64g(0, (int)th_rng_range(g, 2, 4));
        for (int s = 0; s < d.pp_size; s++) d.stage_tp[s] = (int32_t[]){1, 2, 4, 8}[th_rng_range(g, 0, 3)];
        d.gpu_memory_bytes = th_rng_range(g, 40, 160) * GIB;
        if (plan_run(t, &d, &r)) return;
        TH_CHECK(t, r.upstream_ok, "the chosen split cuts a sharing group");
        TH_CHECK(t,
                 r.num_valid_splits == (d.pp_size == 2   ? 5
                                        : d.pp_size == 3 ? 10
                                                         : 10),
                 "%lld valid splits", (long long)r.num_valid_splits);
        const double best = best_by_enumeration(t, d, v41, 5);
        TH_CHECK(t, r.concurrency >= best, "chosen split %.4f below the best %.4f", r.concurrency, best);
    }
}

/* desc -> status with a message naming `field` (and `value`), *result untouched. */
static void expect_bad(th_ctx_t *t, const dsv4_plan_desc_t *d, dsv4_status_t want, const char *field,
                       const char *value) {
    static dsv4_plan_result_t r, poison;
    memset(&r, 0xA5, sizeof r);
    memcpy(&poison, &r, sizeof r);
    TH_EXPECT_STATUS(t, dsv4_plan_check(d), want);
    th_expect_error(t, field, "plan", field, value);
    TH_EXPECT_STATUS(t, dsv4_plan(d, &r), want);
    th_expect_error(t, field, "plan", field, value);
    TH_CHECK(t, !memcmp(&r, &poison, sizeof r), "[%s] dsv4_plan wrote its result on failure", field);
}

void test_plan_bad_input(th_ctx_t *t) {
    const dsv4_plan_desc_t good = plan_desc_64g(2, 1);
    static dsv4_plan_result_t r;
    TH_OK(t, dsv4_plan_check(&good));
    TH_EXPECT_STATUS(t, dsv4_plan_check(NULL), DSV4_STATUS_NULL_POINTER);
    th_expect_error(t, "NULL desc", "plan", "desc", NULL);
    TH_EXPECT_STATUS(t, dsv4_plan(NULL, &r), DSV4_STATUS_NULL_POINTER);
    TH_EXPECT_STATUS(t, dsv4_plan(&good, NULL), DSV4_STATUS_NULL_POINTER);
    th_expect_error(t, "NULL result", "plan", "result", NULL);

    dsv4_plan_desc_t d;
#define BAD(stmt, status, field, value) (d = good, stmt, expect_bad(t, &d, status, field, value))
    BAD(d.model = 0, DSV4_STATUS_INVALID_VALUE, "model", "0");
    BAD(d.model = 4, DSV4_STATUS_INVALID_VALUE, "model", "4");
    BAD(d.pp_size = 0, DSV4_STATUS_INVALID_VALUE, "pp_size", "0");
    BAD(d.pp_size = 41, DSV4_STATUS_INVALID_VALUE, "pp_size", "41");
    BAD(d.tp_size = 0, DSV4_STATUS_INVALID_VALUE, "tp_size", "0");
    BAD(d.tp_size = 6, DSV4_STATUS_UNSUPPORTED, "TP 6", "64 attention heads");
    BAD(d.tp_size = 16, DSV4_STATUS_UNSUPPORTED, "TP 16", "at least 8");
    BAD((d.pp_size = 2, d.stage_tp[1] = 3), DSV4_STATUS_UNSUPPORTED, "TP 3", "stage 1");
    BAD(d.stage_tp[5] = 2, DSV4_STATUS_INVALID_VALUE, "stage_tp[5]", "2");
    BAD(d.stage_layers[1] = 3, DSV4_STATUS_INVALID_VALUE, "stage_layers[1]", "3");
    BAD(d.num_gpus = 3, DSV4_STATUS_INVALID_VALUE, "num_gpus", "3");
    BAD(d.gpu_memory_bytes = 0, DSV4_STATUS_INVALID_VALUE, "gpu_memory_bytes", "0");
    BAD(d.max_model_len = 0, DSV4_STATUS_INVALID_VALUE, "max_model_len", "0");
    BAD(d.max_model_len = MODEL_LEN + 1, DSV4_STATUS_INVALID_VALUE, "max_model_len", "1048577");
    BAD(d.max_num_batched_tokens = -1, DSV4_STATUS_INVALID_VALUE, "max_num_batched_tokens", "-1");
    BAD(d.gpu_memory_utilization = 1.5, DSV4_STATUS_INVALID_VALUE, "gpu_memory_utilization", "1.5");
    BAD(d.gpu_memory_utilization = -0.1, DSV4_STATUS_INVALID_VALUE, "gpu_memory_utilization", "-0.1");
    BAD(d.gpu_memory_utilization = NAN, DSV4_STATUS_INVALID_VALUE, "gpu_memory_utilization", "nan");
    BAD(d.num_speculative_tokens = 65, DSV4_STATUS_INVALID_VALUE, "num_speculative_tokens", "65");
    BAD(d.allow_group_cuts = 2, DSV4_STATUS_INVALID_VALUE, "allow_group_cuts", "2");
    BAD(d.indexer_format = 2, DSV4_STATUS_INVALID_VALUE, "indexer_format", "2");
    BAD(d.reserved0 = 1, DSV4_STATUS_INVALID_VALUE, "reserved0", "1");
    BAD(d.activation_bytes = -1, DSV4_STATUS_INVALID_VALUE, "activation_bytes", "-1");
    BAD(d.kv_cache_memory_bytes = -5, DSV4_STATUS_INVALID_VALUE, "kv_cache_memory_bytes", "-5");
    BAD((d.pp_size = 2, d.stage_layers[0] = 20, d.stage_layers[1] = 19), DSV4_STATUS_INVALID_VALUE, "stage_layers",
        "39");
    BAD((d.pp_size = 2, d.stage_layers[0] = 40, d.stage_layers[1] = 0), DSV4_STATUS_INVALID_VALUE, "stage_layers[1]",
        "0");
    BAD((d.pp_size = 2, d.stage_layers[0] = 24, d.stage_layers[1] = 16), DSV4_STATUS_UNSUPPORTED, "layer 24",
        "layer 20");
    BAD((d.pp_size = 7, d.tp_size = 1), DSV4_STATUS_UNSUPPORTED, "pp_size = 7", "allow_group_cuts");
#undef BAD
}
