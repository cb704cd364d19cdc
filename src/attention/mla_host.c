/* Host-side helpers shared by sparse MLA decode and prefill (mla_host.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "attention/mla_host.h"
#include "attention/sparse_mla_config.h"
#include "common/error.h"

static dsv4_status_t check_stride(const char *op, const char *what, int64_t v, int64_t min) {
    DSV4_TRY(dsv4_check_range(op, what, v, min, INT64_C(1) << 40));
    if (v % 8 != 0)
        return dsv4_fail(DSV4_STATUS_MISALIGNED, op, "%s = %lld is not a multiple of 8 elements (16 bytes)", what,
                         (long long)v);
    return DSV4_STATUS_SUCCESS;
}

/* (n - 1) * stride + 512 for n >= 1 and a positive stride, saturating at INT64_MAX:
 * 2^31 tokens of a 2^40 stride overflow. */
static int64_t row_span(int64_t n, int64_t stride) {
    if (n - 1 > (INT64_MAX - DSV4_MLA_DIM) / stride) return INT64_MAX;
    return (n - 1) * stride + DSV4_MLA_DIM;
}

dsv4_status_t mla_check_common(const char *op, int64_t T, int64_t H, int64_t q_st, int64_t q_sh, int64_t o_st,
                               int64_t o_sh, float scale, int64_t config, mla_qo_geom_t *geom) {
    DSV4_TRY(dsv4_check_range(op, "num_tokens", T, 0, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "num_heads", H, 16, 128));
    if (H % 16 != 0)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "num_heads = %lld is not a multiple of 16", (long long)H);
    DSV4_TRY(dsv4_given_stride(op, "q_stride_head", q_sh, H, DSV4_MLA_DIM, &geom->q_sh));
    DSV4_TRY(dsv4_given_stride(op, "q_stride_token", q_st, T, H * DSV4_MLA_DIM, &geom->q_st));
    DSV4_TRY(dsv4_given_stride(op, "out_stride_head", o_sh, H, DSV4_MLA_DIM, &geom->o_sh));
    DSV4_TRY(dsv4_given_stride(op, "out_stride_token", o_st, T, H * DSV4_MLA_DIM, &geom->o_st));
    /* Heads of one token must not overlap (512 elements each); tokens may not overlap
     * within the output either (the kernels write every (t, h) row). */
    DSV4_TRY(check_stride(op, "q_stride_head", geom->q_sh, DSV4_MLA_DIM));
    DSV4_TRY(check_stride(op, "q_stride_token", geom->q_st, 0));
    DSV4_TRY(check_stride(op, "out_stride_head", geom->o_sh, DSV4_MLA_DIM));
    DSV4_TRY(check_stride(op, "out_stride_token", geom->o_st, 0));
    /* Output rows must not overlap: heads nested in tokens, or tokens nested in heads. */
    const int64_t span_h = (H - 1) * geom->o_sh + DSV4_MLA_DIM, span_t = row_span(T, geom->o_st);
    if (T > 1 && geom->o_st < span_h && geom->o_sh < span_t)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "out_stride_token = %lld and out_stride_head = %lld make output rows overlap",
                         (long long)geom->o_st, (long long)geom->o_sh);
    if (!isfinite(scale)) return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "scale = %g is not finite", (double)scale);
    DSV4_TRY(dsv4_check_range(op, "config", config, 0, DSV4_MLA_NUM_CONFIGS));
    if (config && H % MLA_CFG_HC(config) != 0)
        return dsv4_fail(DSV4_STATUS_UNSUPPORTED, op,
                         "config %s runs %d heads per CTA, which does not divide num_heads = %lld",
                         dsv4_mla_config_name(config), MLA_CFG_HC(config), (long long)H);
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t mla_check_list_shape(const char *op, const char *width_name, int64_t width, const char *stride_name,
                                   int64_t stride, int64_t rows) {
    DSV4_TRY(dsv4_check_range(op, width_name, width, 1, INT64_C(1) << 20));
    DSV4_TRY(dsv4_given_stride(op, stride_name, stride, rows, width, &stride));
    DSV4_TRY(dsv4_check_range(op, stride_name, stride, width, INT64_C(1) << 40));
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t mla_check_ptr16(const char *op, const char *what, const void *p) {
    DSV4_TRY(dsv4_check_ptr(op, what, p));
    return dsv4_check_align(op, what, p, 16);
}

dsv4_status_t mla_check_args_qo(const char *op, const void *args, const void *q, const void *out) {
    DSV4_TRY(dsv4_check_ptr(op, "args", args));
    DSV4_TRY(mla_check_ptr16(op, "q", q));
    return mla_check_ptr16(op, "out", out);
}

dsv4_status_t mla_check_ptr4(const char *op, const char *what, const void *p, int required) {
    if (!p && !required) return DSV4_STATUS_SUCCESS;
    DSV4_TRY(dsv4_check_ptr(op, what, p));
    return dsv4_check_align(op, what, p, 4);
}

const char *dsv4_mla_config_name(int64_t config) {
#define MLA_CONFIG_NAME(unused, id, name, hc, mt, wd, warps, ws, dec, cps, minb)                                       \
    if (config == (id)) return name;
    MLA_CONFIG_TABLE(MLA_CONFIG_NAME, 0)
#undef MLA_CONFIG_NAME
    return config == DSV4_MLA_CONFIG_AUTO ? "auto" : NULL;
}

int64_t mla_pick_config(int decode, int64_t T, int64_t H) {
    if (!decode) return H % 32 == 0 ? DSV4_MLA_CONFIG_WS32 : DSV4_MLA_CONFIG_H16W4;
    if (H % 64 == 0 && T >= MLA_DECODE_WS64_MIN_T) return DSV4_MLA_CONFIG_WS64;
    if (T <= MLA_DECODE_H16W8_MAX_T) return DSV4_MLA_CONFIG_H16W8;
    if (H % 32 != 0) return DSV4_MLA_CONFIG_H16W4;
    return T < MLA_DECODE_WS32_MIN_T ? DSV4_MLA_CONFIG_H32W4 : DSV4_MLA_CONFIG_WS32;
}

dsv4_status_t mla_check_grid(const char *op, int decode, int64_t T, int64_t H, int64_t config, int64_t splits) {
    const int64_t hc = MLA_CFG_HC(config ? config : mla_pick_config(decode, T, H));
    const int64_t grid = T * (H / hc) * splits; /* T < 2^31, H / hc <= 8, splits <= 32 */
    if (grid > INT32_MAX)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "num_tokens = %lld with %lld heads and %lld splits needs %lld CTAs, over 2^31-1", (long long)T,
                         (long long)H, (long long)splits, (long long)grid);
    return DSV4_STATUS_SUCCESS;
}

void mla_plan_config(int64_t config, dsv4_sparse_mla_plan_t *plan) {
    plan->config = config;
    plan->heads_per_cta = MLA_CFG_HC(config);
    plan->warps = MLA_CFG_WARPS(config);
    plan->rows_per_tile = MLA_N;
}

/* Tiles of the longest split: each list is cut into S chunks of ceil(width / S). */
static int64_t mla_split_tiles(int64_t main_width, int64_t extra_width, int64_t S) {
    return ((main_width + S - 1) / S + (extra_width + S - 1) / S + MLA_N - 1) / MLA_N;
}

int64_t mla_auto_splits(int64_t T, int64_t head_groups, int64_t main_width, int64_t extra_width, int64_t sm_count,
                        int64_t ctas_per_sm) {
    const int64_t units = T * head_groups;
    if (units == 0 || units >= sm_count) return 1;
    /* Up to one wave of resident CTAs (a partial second wave costs as much as a full
     * one); within it the fewest tiles per CTA, which is the CTA's serial chain (a tile
     * of one key costs nearly a full one), with the fewest splits, which is the merge's
     * work. */
    int64_t cap = sm_count * ctas_per_sm / units;
    if (cap > DSV4_MLA_MAX_SPLITS) cap = DSV4_MLA_MAX_SPLITS;
    int64_t best = 1, best_tiles = mla_split_tiles(main_width, extra_width, 1);
    for (int64_t s = 2; s <= cap; ++s) {
        const int64_t tiles = mla_split_tiles(main_width, extra_width, s);
        if (tiles < best_tiles) best = s, best_tiles = tiles;
    }
    return best;
}

int64_t mla_merge_ctas(int64_t T, int64_t H, int64_t warps) { return T * H / (warps * 32 / MLA_MERGE_THREADS); }

int64_t mla_current_sm_count(void) {
    enum { MAX_DEV = 64 };
    static int cache[MAX_DEV]; /* 0: not asked yet; racing writers store the same value */
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) {
        cudaGetLastError();
        return 0;
    }
    if (dev < MAX_DEV && cache[dev] > 0) return cache[dev];
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    if (dev < MAX_DEV) cache[dev] = n;
    return n;
}

float mla_scale_or_default(float scale) { return scale == 0.0f ? DSV4_MLA_DEFAULT_SCALE : scale; }

void mla_params_init(mla_params_t *k, const mla_qo_geom_t *g, const void *q, void *out, const float *sink, float scale,
                     int64_t T, int64_t H, int64_t S, int num_lists) {
    memset(k, 0, sizeof *k);
    k->q = (const uint16_t *)q;
    k->q_st = g->q_st;
    k->q_sh = g->q_sh;
    k->out = (uint16_t *)out;
    k->o_st = g->o_st;
    k->o_sh = g->o_sh;
    k->sink = sink;
    k->scale = mla_scale_or_default(scale);
    k->num_tokens = (int)T;
    k->num_heads = (int)H;
    k->num_splits = (int)S;
    k->num_lists = num_lists;
}

/* One list's parameters; page_tokens = 1 for prefill's unpaged rows. */
static mla_list_params_t mla_list(const int32_t *ids, const int32_t *lens, int64_t stride, int64_t width,
                                  const void *base, int64_t page_tokens, int64_t row_bytes, int64_t num_valid) {
    mla_list_params_t lp;
    lp.ids = ids;
    lp.lens = lens;
    lp.stride = stride ? stride : width;
    lp.width = width;
    lp.base = (const uint8_t *)base;
    lp.page_tokens = page_tokens;
    lp.row_bytes = row_bytes;
    lp.num_valid = num_valid;
    /* int32 ids: a negative one is >= 2^31 as uint32_t, so one unsigned compare tests both ends */
    lp.id_limit = num_valid > INT32_MAX ? UINT32_C(0x80000000) : (uint32_t)num_valid;
    lp.page_div = kv_page_div_make(page_tokens);
    return lp;
}

mla_list_params_t mla_decode_list(const dsv4_sparse_mla_list_t *l, const void *cache, const int32_t *ids,
                                  const int32_t *lens) {
    return mla_list(ids, lens, l->stride, l->width, cache, l->cache.page_tokens, l->cache.page_stride_bytes,
                    l->cache.num_pages * l->cache.page_tokens);
}

mla_list_params_t mla_prefill_list(const dsv4_sparse_mla_prefill_desc_t *d, const void *kv, const int32_t *ids,
                                   const int32_t *lens) {
    return mla_list(ids, lens, d->ids_stride, d->width, kv, 1, (d->kv_stride ? d->kv_stride : DSV4_MLA_DIM) * 2,
                    d->kv_rows);
}
