/* dsv4_indexer_topk and dsv4_indexer_logits: host side (validate, plan, launch).
 * Contract: include/dsv4/indexer.h. */
#include "common/error.h"
#include "indexer/indexer_common.h"
#include "indexer/indexer_config.h"

static const char *const op_topk = "indexer_topk", *const op_logits = "indexer_logits";

#define IDX_MAX_TOPK 2048
#define IDX_MAX_KEYS (1 << 26)
#define IDX_MAX_TOPK_PAGE (1 << 20)

/* The shared geometry: ranges, page layout, block-table stride; col_cap resolved. */
static dsv4_status_t check_src(const char *op, idx_src_t *s) {
    DSV4_TRY(dsv4_check_range(op, "num_rows", s->rows, 0, INT32_MAX));
    if (s->heads != 32 && s->heads != 64)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "num_heads = %lld is not 32 or 64", (long long)s->heads);
    DSV4_TRY(dsv4_check_range(op, "ratio", s->ratio, 1, 2));
    DSV4_TRY(dsv4_check_range(op, "num_reqs", s->num_reqs, 1, INT32_MAX));
    DSV4_TRY(dsv4_check_range(op, "block_table_width", s->bt_width, 1, INT32_MAX));
    DSV4_TRY(dsv4_given_stride(op, "block_table_stride", s->bt_stride, s->num_reqs, s->bt_width, &s->bt_stride));
    DSV4_TRY(dsv4_check_row_stride(op, "block_table_stride", s->bt_stride, s->bt_width, s->num_reqs, 4, 1));
    if (s->page_tokens < 64 || s->page_tokens > IDX_MAX_TOPK_PAGE || s->page_tokens % 64 != 0)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "page_tokens = %lld is not a multiple of 64 in [64, %d] (a 64-state tile never straddles "
                         "a page)",
                         (long long)s->page_tokens, IDX_MAX_TOPK_PAGE);
    DSV4_TRY(dsv4_check_pages(op, s->page_tokens, s->page_stride_bytes, s->num_pages, DSV4_INDEXER_STATE_BYTES));
    DSV4_TRY(dsv4_check_range(op, "max_keys", s->max_keys, 1, IDX_MAX_KEYS));
    /* bt_width < 2^31 and page_tokens <= 2^20: the product fits. */
    const int64_t reach = s->bt_width * s->page_tokens;
    s->col_cap = s->max_keys < reach ? s->max_keys : reach;
    return DSV4_STATUS_SUCCESS;
}

/* The shared geometry of either descriptor (the fields have the same names). */
#define SRC_OF(d)                                                                                                      \
    (idx_src_t) {                                                                                                      \
        (d)->num_rows, (d)->num_heads, (d)->ratio, (d)->num_reqs, (d)->block_table_width, (d)->block_table_stride,     \
            (d)->page_tokens, (d)->page_stride_bytes, (d)->num_pages, (d)->max_keys, 0                                 \
    }

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Rows per pass-A CTA: at most 4 warps' worth of 32-head slices, and a buffer of at
 * least topk + 64 entries per row. */
static int64_t group_rows(int64_t slices, int64_t topk) {
    int64_t r = IDX_TOPK_MAX_ROWS / slices;
    while (r > 1 && IDX_TOPK_BUF_ENTRIES / r < topk + IDX_TILE_KEYS) r /= 2;
    return r;
}

dsv4_status_t idx_topk_plan(const dsv4_indexer_topk_desc_t *d, idx_topk_plan_t *p) {
    DSV4_TRY(dsv4_check_ptr(op_topk, "desc", d));
    idx_src_t s = SRC_OF(d);
    DSV4_TRY(check_src(op_topk, &s));
    DSV4_TRY(dsv4_check_range(op_topk, "topk", d->topk, 1, IDX_MAX_TOPK));
    int64_t ts, cs = 0;
    DSV4_TRY(dsv4_given_stride(op_topk, "topk_stride", d->topk_stride, s.rows, d->topk, &ts));
    DSV4_TRY(dsv4_check_row_stride(op_topk, "topk_stride", ts, d->topk, s.rows, 4, 1));
    DSV4_TRY(dsv4_check_range(op_topk, "candidate_mode", d->candidate_mode, 0, 2));
    const int64_t cb = d->candidate_block ? d->candidate_block : 8;
    if (cb != 8)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op_topk, "candidate_block = %lld is not 8 (the model's block)",
                         (long long)d->candidate_block);
    const int64_t cc = d->candidate_count ? d->candidate_count : 2048;
    DSV4_TRY(dsv4_check_range(op_topk, "candidate_count", cc, 1, IDX_TOPK_MAX_CAND));
    if (d->candidate_mode) { /* mode 0 never addresses cand */
        DSV4_TRY(dsv4_given_stride(op_topk, "candidate_stride", d->candidate_stride, s.rows, cc, &cs));
        DSV4_TRY(dsv4_check_row_stride(op_topk, "candidate_stride", cs, cc, s.rows, 4, 1));
    }
    DSV4_TRY(dsv4_check_range(op_topk, "num_splits", d->num_splits, 0, IDX_TOPK_MAX_SPLITS));
    /* Mode 2 splits a row's listed columns, at most 8 per candidate, not its whole range. */
    const int64_t span = d->candidate_mode == 2 && 8 * cc < s.max_keys ? 8 * cc : s.max_keys;
    const int64_t s_min = cdiv(span, IDX_TOPK_MAX_SPLIT_COLS);
    if (d->num_splits && d->num_splits < s_min)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op_topk,
                         "num_splits = %lld leaves splits longer than 65536 columns for %lld columns (at least "
                         "%lld)",
                         (long long)d->num_splits, (long long)span, (long long)s_min);
    p->src = s;
    p->topk = d->topk, p->topk_stride = ts, p->mode = d->candidate_mode;
    p->cand_count = cc, p->cand_stride = cs;
    p->slices = s.heads / 32;
    p->group_rows = group_rows(p->slices, d->topk);
    p->cap = IDX_TOPK_BUF_ENTRIES / p->group_rows;
    p->groups = cdiv(s.rows, p->group_rows);
    int64_t sp = d->num_splits;
    if (!sp) { /* pass A CTAs: groups x S, in mode 2 rows x S */
        const int64_t most = cdiv(span, IDX_TOPK_MIN_SPLIT_COLS), units = p->mode == 2 ? s.rows : p->groups;
        sp = units ? cdiv(IDX_TOPK_TARGET_CTAS, units) : 1;
        sp = sp < most ? sp : most;
        sp = sp > s_min ? sp : s_min;
    }
    p->splits = sp;
    p->split_len = cdiv(cdiv(span, sp), IDX_TILE_KEYS) * IDX_TILE_KEYS;
    /* rows < 2^31, splits <= 2^12, topk <= 2^11, max_keys <= 2^26: no product overflows. */
    p->ws_pairs = (size_t)s.rows * (size_t)sp * (size_t)d->topk * 8;
    /* mode 1: the block scores; mode 2: the sorted candidate lists and (count, |E_t|) per row */
    p->ws_scores = p->mode == 1   ? (size_t)s.rows * (size_t)cdiv(s.max_keys, 8) * 4
                   : p->mode == 2 ? (size_t)s.rows * (size_t)(cc + 2) * 4
                                  : 0;
    p->ws_pairs = (p->ws_pairs + 255) / 256 * 256;
    p->ws_bytes = p->ws_pairs + p->ws_scores;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t idx_logits_plan(const dsv4_indexer_logits_desc_t *d, idx_logits_plan_t *p) {
    DSV4_TRY(dsv4_check_ptr(op_logits, "desc", d));
    idx_src_t s = SRC_OF(d);
    DSV4_TRY(check_src(op_logits, &s));
    DSV4_TRY(dsv4_check_range(op_logits, "out_cols", d->out_cols, 0, INT32_MAX));
    int64_t os;
    DSV4_TRY(dsv4_given_stride(op_logits, "out_stride", d->out_stride, s.rows, d->out_cols, &os));
    DSV4_TRY(dsv4_check_row_stride(op_logits, "out_stride", os, d->out_cols, s.rows, 4, 4));
    p->src = s;
    p->out_cols = d->out_cols, p->out_stride = os;
    p->group_rows = IDX_TOPK_MAX_ROWS / (s.heads / 32);
    p->groups = cdiv(s.rows, p->group_rows);
    p->chunks = cdiv(d->out_cols, IDX_LOGITS_CHUNK);
    return DSV4_STATUS_SUCCESS;
}

/* ---- public calls -------------------------------------------------------------------------- */
static dsv4_status_t check_src_args(const char *op, const idx_src_args_t *a) {
    DSV4_TRY(dsv4_check_ptr(op, "q8", a->q8));
    DSV4_TRY(dsv4_check_ptr(op, "w", a->w));
    DSV4_TRY(dsv4_check_ptr(op, "positions", a->positions));
    DSV4_TRY(dsv4_check_ptr(op, "row_req", a->row_req));
    DSV4_TRY(dsv4_check_ptr(op, "block_table", a->block_table));
    DSV4_TRY(dsv4_check_ptr(op, "cache", a->cache));
    DSV4_TRY(dsv4_check_align(op, "q8", a->q8, 16));
    DSV4_TRY(dsv4_check_align(op, "w", a->w, 4));
    DSV4_TRY(dsv4_check_align(op, "positions", a->positions, 8));
    DSV4_TRY(dsv4_check_align(op, "row_req", a->row_req, 4));
    DSV4_TRY(dsv4_check_align(op, "block_table", a->block_table, 4));
    return dsv4_check_align(op, "cache", a->cache, 16);
}

static dsv4_status_t check_topk_args(const idx_topk_plan_t *p, const dsv4_indexer_topk_args_t *a) {
    DSV4_TRY(dsv4_check_ptr(op_topk, "args", a));
    const idx_src_args_t s = {a->q8, a->w, a->positions, a->row_req, a->row_valid, a->block_table, a->cache};
    DSV4_TRY(check_src_args(op_topk, &s));
    DSV4_TRY(dsv4_check_ptr(op_topk, "topk", a->topk));
    DSV4_TRY(dsv4_check_align(op_topk, "topk", a->topk, 4));
    if (p->mode == 0) return DSV4_STATUS_SUCCESS;
    DSV4_TRY(dsv4_check_ptr(op_topk, "cand", a->cand));
    return dsv4_check_align(op_topk, "cand", a->cand, 4);
}

dsv4_status_t dsv4_indexer_topk_check(const dsv4_indexer_topk_desc_t *desc) {
    idx_topk_plan_t plan;
    return idx_topk_plan(desc, &plan);
}

dsv4_status_t dsv4_indexer_topk_workspace_size(const dsv4_indexer_topk_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(op_topk, "bytes", bytes));
    idx_topk_plan_t plan;
    DSV4_TRY(idx_topk_plan(desc, &plan));
    *bytes = plan.ws_bytes;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_indexer_topk(const dsv4_indexer_topk_desc_t *desc, const dsv4_indexer_topk_args_t *args,
                                void *workspace, size_t workspace_bytes, dsv4_stream_t stream) {
    idx_topk_plan_t plan;
    DSV4_TRY(idx_topk_plan(desc, &plan));
    DSV4_TRY(check_topk_args(&plan, args));
    DSV4_TRY(dsv4_check_stream(op_topk, stream));
    DSV4_TRY(dsv4_check_workspace(op_topk, plan.ws_bytes, workspace, workspace_bytes));
    DSV4_TRY(dsv4_check_align(op_topk, "workspace", workspace, 256));
    if (desc->num_rows == 0) return DSV4_STATUS_SUCCESS;
    return idx_topk_launch(&plan, args, workspace, stream);
}

dsv4_status_t dsv4_indexer_topk_ref(const dsv4_indexer_topk_desc_t *desc, const dsv4_indexer_topk_args_t *args) {
    idx_topk_plan_t plan;
    DSV4_TRY(idx_topk_plan(desc, &plan));
    DSV4_TRY(check_topk_args(&plan, args));
    return idx_topk_ref_run(&plan, args);
}

static dsv4_status_t check_logits_args(const dsv4_indexer_logits_args_t *a) {
    DSV4_TRY(dsv4_check_ptr(op_logits, "args", a));
    const idx_src_args_t s = {a->q8, a->w, a->positions, a->row_req, a->row_valid, a->block_table, a->cache};
    DSV4_TRY(check_src_args(op_logits, &s));
    DSV4_TRY(dsv4_check_ptr(op_logits, "out", a->out));
    return dsv4_check_align(op_logits, "out", a->out, 16);
}

dsv4_status_t dsv4_indexer_logits_check(const dsv4_indexer_logits_desc_t *desc) {
    idx_logits_plan_t plan;
    return idx_logits_plan(desc, &plan);
}

dsv4_status_t dsv4_indexer_logits_workspace_size(const dsv4_indexer_logits_desc_t *desc, size_t *bytes) {
    DSV4_TRY(dsv4_check_ptr(op_logits, "bytes", bytes));
    DSV4_TRY(dsv4_indexer_logits_check(desc));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_indexer_logits(const dsv4_indexer_logits_desc_t *desc, const dsv4_indexer_logits_args_t *args,
                                  void *workspace, size_t workspace_bytes, dsv4_stream_t stream) {
    idx_logits_plan_t plan;
    DSV4_TRY(idx_logits_plan(desc, &plan));
    DSV4_TRY(check_logits_args(args));
    DSV4_TRY(idx_check_run(op_logits, stream, workspace, workspace_bytes));
    if (desc->num_rows == 0 || desc->out_cols == 0) return DSV4_STATUS_SUCCESS;
    return idx_logits_launch(&plan, args, stream);
}

dsv4_status_t dsv4_indexer_logits_ref(const dsv4_indexer_logits_desc_t *desc, const dsv4_indexer_logits_args_t *args) {
    idx_logits_plan_t plan;
    DSV4_TRY(idx_logits_plan(desc, &plan));
    DSV4_TRY(check_logits_args(args));
    return idx_logits_ref_run(&plan, args);
}
