/*
 * dsv4_plan: the capacity planner (include/dsv4/plan.h) on the command line.
 *
 *   dsv4_plan --model v4.1-flash --mem 64GiB --tp 2 --pp 3 --layers 14,14,12 --allow-group-cuts
 *   dsv4_plan --model v4.1-flash --mem 64GiB --pp 2 --stage-tp 2,4 --json
 *
 * Prints one table row per pipeline stage (or one JSON object with --json). Exit status:
 * 0 on a plan (also one that does not fit), 1 when the library rejects the input, 2 on a
 * usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/dsv4.h"

static const char *const USAGE =
    "usage: dsv4_plan --model v4.1-flash|v4-flash|v4-pro --mem BYTES [options]\n"
    "  --mem BYTES             memory per GPU: 64GiB, 80GB, 24G (G/GiB = 2^30, GB = 10^9)\n"
    "  --tp N --pp N           TP of every stage, pipeline stages (default 1, 1)\n"
    "  --stage-tp A,B,...      TP per stage (sets --pp): TP2+TP4 is --stage-tp 2,4\n"
    "  --gpus N                GPU count (checked against the stages' TP sizes)\n"
    "  --layers A,B,...        backbone layers per stage (default: the best valid split)\n"
    "  --allow-group-cuts      plan cuts inside sharing groups as replicated sources\n"
    "  --max-model-len N       tokens per request (default 1048576)\n"
    "  --util F                gpu memory utilization (default 0.9)\n"
    "  --batch-tokens N        max_num_batched_tokens (default 8192)\n"
    "  --spec-tokens N         speculative tokens (draft blocks on the last stage when > 0)\n"
    "  --concurrent-batches N  batches in flight (default max(pp, 2))\n"
    "  --mxfp4-indexer         68-byte indexer keys instead of FP8\n"
    "  --prefill-slabs N       prefill slabs reserved (default 1 for V4.1, 4 for V4)\n"
    "  --indexer-splits N      column splits of the top-k workspace (default 16)\n"
    "  --expert-pad N          per-rank expert width multiple (default 128; 1 = none)\n"
    "  --activation BYTES      activations per GPU (default batch_tokens * hidden * 32)\n"
    "  --cudagraph BYTES       CUDA graphs per GPU (default 512MiB)\n"
    "  --kv-cache-memory BYTES KV pool per GPU, as vLLM's --kv-cache-memory-bytes\n"
    "  --json                  one JSON object instead of the table\n";

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "dsv4_plan: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", USAGE);
    return 2;
}

/* "64GiB", "80GB", "24G", "512MiB", "1e9" -> bytes; -1 if malformed. */
static long long parse_bytes(const char *s) {
    char *end;
    errno = 0;
    const double v = strtod(s, &end);
    if (errno || end == s || v < 0) return -1;
    static const struct {
        const char *suffix;
        double scale;
    } units[] = {{"", 1},
                 {"B", 1},
                 {"K", 1024.0},
                 {"KiB", 1024.0},
                 {"KB", 1e3},
                 {"M", 1048576.0},
                 {"MiB", 1048576.0},
                 {"MB", 1e6},
                 {"G", 1073741824.0},
                 {"GiB", 1073741824.0},
                 {"GB", 1e9},
                 {"T", 1099511627776.0},
                 {"TiB", 1099511627776.0},
                 {"TB", 1e12}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].suffix) == 0) return (long long)(v * units[i].scale + 0.5);
    return -1;
}

static int parse_int(const char *s, long long *out) {
    char *end;
    errno = 0;
    *out = strtoll(s, &end, 10);
    return !errno && end != s && *end == 0;
}

/* "2,4" -> list; the count, or -1 if malformed. */
static int parse_list(const char *s, int32_t *out, int cap) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        const long v = strtol(p, &end, 10);
        if (errno || end == p || n == cap || v < 0 || v > 1 << 20) return -1;
        out[n++] = (int32_t)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        p = end;
    }
    return n;
}

static const char *model_name(int32_t m) {
    return m == DSV4_PLAN_V4_FLASH ? "V4-Flash" : m == DSV4_PLAN_V4_PRO ? "V4-Pro" : "V4.1-Flash";
}

static double gib(long long b) { return (double)b / 1073741824.0; }

static void print_table(const dsv4_plan_desc_t *d, const dsv4_plan_result_t *r) {
    printf("%s, max_model_len %lld: %d stage(s); model KV %.2f B/token; weights %.1f GiB on the GPUs",
           model_name(d->model), (long long)d->max_model_len, r->num_stages, r->model_kv_bytes_per_token,
           gib(r->model_weights_bytes));
    if (r->host_bytes) printf(" + %.1f GiB in host memory", gib(r->host_bytes));
    printf("\nvalid cuts (a stage may begin at layer):");
    for (int i = 0; i < r->num_valid_cuts; i++) printf(i ? ", %d" : " %d", (int)r->valid_cuts[i]);
    printf("\n\n");
    printf("%-5s %-8s %-4s %-4s %9s %9s %8s %8s %8s %8s %9s %9s %7s %11s %5s\n", "stage", "layers", "tp", "cut",
           "weights", "experts", "KV B/tok", "fix/req", "slab", "indexer", "act+graph", "KV pool", "conc", "tokens",
           "reqs");
    printf("%-5s %-8s %-4s %-4s %9s %9s %8s %8s %8s %8s %9s %9s %7s %11s %5s\n", "", "", "", "", "GiB", "GiB", "",
           "MiB", "GiB", "GiB", "GiB", "GiB", "", "", "");
    for (int s = 0; s < r->num_stages; s++) {
        const dsv4_plan_stage_t *t = &r->stages[s];
        char layers[32];
        snprintf(layers, sizeof layers, "%d-%d%s", t->first_layer, t->first_layer + t->num_layers - 1,
                 t->num_draft_layers ? "+d" : "");
        printf("%-5d %-8s %-4d %-4s %9.2f %9.2f %8.1f %8.1f %8.2f %8.3f %9.2f %9.2f %7.3f %11lld %5lld%s\n", s, layers,
               t->tp_size, t->cut_ok ? "ok" : "GRP", gib(t->weights_bytes), gib(t->expert_bytes), t->kv_bytes_per_token,
               (double)t->fixed_bytes_per_request / 1048576.0, gib(t->prefill_slab_bytes),
               gib(t->indexer_workspace_bytes + t->index_buffer_bytes), gib(t->activation_bytes + t->cudagraph_bytes),
               gib(t->kv_bytes), t->concurrency, (long long)t->resident_tokens, (long long)t->max_requests,
               s == r->bottleneck_stage ? "  <- bottleneck" : "");
    }
    printf("\nresident KV tokens: %lld (%.3f x max_model_len; %lld full-length requests)%s%s\n",
           (long long)r->resident_tokens, r->concurrency, (long long)r->max_requests,
           r->fits ? "" : "; DOES NOT FIT: a stage cannot hold one max_model_len request",
           r->upstream_ok ? "" : "; a cut (GRP) is inside a sharing group: vLLM refuses this split");
}

static void print_json(const dsv4_plan_desc_t *d, const dsv4_plan_result_t *r) {
    printf(
        "{\"model\": \"%s\", \"max_model_len\": %lld, \"num_stages\": %d, \"num_layers\": %d, "
        "\"num_draft_layers\": %d, \"upstream_ok\": %d, \"fits\": %d, \"bottleneck_stage\": %d, \"valid_cuts\": [",
        model_name(d->model), (long long)d->max_model_len, r->num_stages, r->num_layers, r->num_draft_layers,
        r->upstream_ok, r->fits, r->bottleneck_stage);
    for (int i = 0; i < r->num_valid_cuts; i++) printf(i ? ", %d" : "%d", (int)r->valid_cuts[i]);
    printf(
        "], \"num_valid_splits\": %lld, \"model_kv_bytes_per_token\": %.4f, \"expert_bytes_per_layer\": %lld, "
        "\"model_weights_bytes\": %lld, \"host_bytes\": %lld, \"resident_tokens\": %lld, \"concurrency\": %.6f, "
        "\"max_requests\": %lld, \"stages\": [",
        (long long)r->num_valid_splits, r->model_kv_bytes_per_token, (long long)r->expert_bytes_per_layer,
        (long long)r->model_weights_bytes, (long long)r->host_bytes, (long long)r->resident_tokens, r->concurrency,
        (long long)r->max_requests);
    for (int s = 0; s < r->num_stages; s++) {
        const dsv4_plan_stage_t *t = &r->stages[s];
        printf(
            "%s{\"first_layer\": %d, \"num_layers\": %d, \"num_draft_layers\": %d, \"tp_size\": %d, "
            "\"cut_ok\": %d, \"owned_sources\": %d, \"replicated_sources\": %d, \"block_tokens\": %d, "
            "\"expert_bytes\": %lld, \"weights_bytes\": %lld, \"kv_block_bytes\": %lld, "
            "\"kv_bytes_per_token\": %.4f, \"swa_bytes_per_request\": %lld, \"ring_bytes_per_request\": %lld, "
            "\"fixed_bytes_per_request\": %lld, \"prefill_slab_rows\": %lld, \"prefill_slab_bytes\": %lld, "
            "\"indexer_workspace_bytes\": %lld, \"index_buffer_bytes\": %lld, \"activation_bytes\": %lld, "
            "\"cudagraph_bytes\": %lld, \"usable_bytes\": %lld, \"kv_bytes\": %lld, \"concurrency\": %.6f, "
            "\"resident_tokens\": %lld, \"max_requests\": %lld}",
            s ? ", " : "", t->first_layer, t->num_layers, t->num_draft_layers, t->tp_size, t->cut_ok, t->owned_sources,
            t->replicated_sources, t->block_tokens, (long long)t->expert_bytes, (long long)t->weights_bytes,
            (long long)t->kv_block_bytes, t->kv_bytes_per_token, (long long)t->swa_bytes_per_request,
            (long long)t->ring_bytes_per_request, (long long)t->fixed_bytes_per_request,
            (long long)t->prefill_slab_rows, (long long)t->prefill_slab_bytes, (long long)t->indexer_workspace_bytes,
            (long long)t->index_buffer_bytes, (long long)t->activation_bytes, (long long)t->cudagraph_bytes,
            (long long)t->usable_bytes, (long long)t->kv_bytes, t->concurrency, (long long)t->resident_tokens,
            (long long)t->max_requests);
    }
    printf("]}\n");
}

int main(int argc, char **argv) {
    dsv4_plan_desc_t d;
    memset(&d, 0, sizeof d);
    d.tp_size = 1, d.pp_size = 1, d.max_model_len = 1048576;
    int json = 0, n_stage_tp = 0, n_layers = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!strcmp(a, "--allow-group-cuts")) {
            d.allow_group_cuts = 1;
            continue;
        }
        if (!strcmp(a, "--mxfp4-indexer")) {
            d.indexer_format = DSV4_PLAN_INDEXER_MXFP4;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (i + 1 >= argc) return usage_error("%s needs a value", a);
        const char *v = argv[++i];
        long long n = 0;
        if (!strcmp(a, "--model")) {
            if (!strcmp(v, "v4.1-flash")) d.model = DSV4_PLAN_V41_FLASH;
            else if (!strcmp(v, "v4-flash")) d.model = DSV4_PLAN_V4_FLASH;
            else if (!strcmp(v, "v4-pro")) d.model = DSV4_PLAN_V4_PRO;
            else return usage_error("unknown model %s", v);
        } else if (!strcmp(a, "--mem") || !strcmp(a, "--activation") || !strcmp(a, "--cudagraph") ||
                   !strcmp(a, "--kv-cache-memory")) {
            const long long b = parse_bytes(v);
            if (b < 0) return usage_error("cannot read the byte count %s", v);
            if (!strcmp(a, "--mem")) d.gpu_memory_bytes = b;
            else if (!strcmp(a, "--activation")) d.activation_bytes = b;
            else if (!strcmp(a, "--cudagraph")) d.cudagraph_bytes = b;
            else d.kv_cache_memory_bytes = b;
        } else if (!strcmp(a, "--util")) {
            char *end;
            d.gpu_memory_utilization = strtod(v, &end);
            if (end == v || *end) return usage_error("cannot read the utilization %s", v);
        } else if (!strcmp(a, "--stage-tp") || !strcmp(a, "--layers")) {
            int32_t *dst = !strcmp(a, "--stage-tp") ? d.stage_tp : d.stage_layers;
            const int c = parse_list(v, dst, DSV4_PLAN_MAX_STAGES);
            if (c < 1) return usage_error("cannot read the list %s", v);
            if (dst == d.stage_tp) n_stage_tp = c;
            else n_layers = c;
        } else if (parse_int(v, &n) && n >= 0 && n <= (1LL << 40)) {
            if (!strcmp(a, "--tp")) d.tp_size = (int32_t)n;
            else if (!strcmp(a, "--pp")) d.pp_size = (int32_t)n;
            else if (!strcmp(a, "--gpus")) d.num_gpus = (int32_t)n;
            else if (!strcmp(a, "--max-model-len")) d.max_model_len = n;
            else if (!strcmp(a, "--batch-tokens")) d.max_num_batched_tokens = n;
            else if (!strcmp(a, "--spec-tokens")) d.num_speculative_tokens = (int32_t)n;
            else if (!strcmp(a, "--concurrent-batches")) d.max_concurrent_batches = (int32_t)n;
            else if (!strcmp(a, "--prefill-slabs")) d.prefill_slabs = (int32_t)n;
            else if (!strcmp(a, "--indexer-splits")) d.indexer_splits = (int32_t)n;
            else if (!strcmp(a, "--expert-pad")) d.expert_pad = (int32_t)n;
            else return usage_error("unknown option %s", a);
        } else {
            return usage_error("cannot read the number %s", v);
        }
    }
    if (!d.model) return usage_error("%s", "--model is required");
    if (!d.gpu_memory_bytes) return usage_error("%s", "--mem is required");
    if (n_stage_tp) {
        if (n_layers && n_layers != n_stage_tp) return usage_error("%s", "--stage-tp and --layers differ in length");
        d.pp_size = n_stage_tp;
    } else if (n_layers) {
        d.pp_size = n_layers;
    }
    static dsv4_plan_result_t r;
    const dsv4_status_t st = dsv4_plan(&d, &r);
    if (st != DSV4_STATUS_SUCCESS) {
        fprintf(stderr, "dsv4_plan: %s: %s\n", dsv4_status_string(st), dsv4_last_error());
        return 1;
    }
    if (json) print_json(&d, &r);
    else print_table(&d, &r);
    return 0;
}
