/* The operators the descriptor fuzzer drives: valid descriptors (those of the families'
 * bad-input tests) and their fields. */
#include "fuzz_ops.h"

#include "dsv4/attention.h"
#include "dsv4/compress.h"
#include "dsv4/indexer.h"
#include "dsv4/indices.h"
#include "dsv4/kvcache.h"
#include "dsv4/mhc.h"

#define F64(T, f)                                                                                                      \
    { #f, offsetof(T, f), FZ_I64 }
#define F32I(T, f)                                                                                                     \
    { #f, offsetof(T, f), FZ_I32 }
#define F32F(T, f)                                                                                                     \
    { #f, offsetof(T, f), FZ_F32 }
#define NF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* check / workspace_size wrappers over a void descriptor. */
#define WRAP(name, D)                                                                                                  \
    static dsv4_status_t name##_chk(const void *d) { return dsv4_##name##_check((const D *)d); }                       \
    static dsv4_status_t name##_ws(const void *d, size_t *b) { return dsv4_##name##_workspace_size((const D *)d, b); }
#define OP(name, D, valid, fields, plan, dev)                                                                          \
    { #name, sizeof(D), &(valid), fields, NF(fields), name##_chk, name##_ws, plan, dev, NULL }
/* An op whose _ref the fuzzer also calls on rejected descriptors. */
#define REF(name, D, A)                                                                                                \
    static dsv4_status_t name##_rf(const void *d, const void *a) {                                                     \
        return dsv4_##name##_ref((const D *)d, (const A *)a);                                                          \
    }
#define OPR(name, D, valid, fields)                                                                                    \
    { #name, sizeof(D), &(valid), fields, NF(fields), name##_chk, name##_ws, NULL, 0, name##_rf }

/* ---- kvcache ------------------------------------------------------------------------- */
typedef dsv4_kv_insert_desc_t KI;
static const KI ki_valid = {4, 512, 64, 37440, 2};
static const fz_field_t ki_fields[] = {F64(KI, num_tokens), F64(KI, k_stride_row), F64(KI, page_tokens),
                                       F64(KI, page_stride_bytes), F64(KI, num_pages)};
WRAP(kv_insert, KI)
REF(kv_insert, KI, dsv4_kv_insert_args_t)

typedef dsv4_kv_rope_insert_desc_t KR;
static const KR kr_valid = {4, 512, 64, 37440, 2, 2, 4};
static const fz_field_t kr_fields[] = {F64(KR, num_tokens),        F64(KR, latent_stride_row), F64(KR, page_tokens),
                                       F64(KR, page_stride_bytes), F64(KR, num_pages),         F64(KR, ratio),
                                       F64(KR, max_position)};
WRAP(kv_rope_insert, KR)

typedef dsv4_kv_swa_write_desc_t KS;
static const KS ks_valid = {.num_tokens = 4,
                            .num_insert = 4,
                            .num_heads = 2,
                            .num_heads_padded = 3,
                            .q_stride_token = 3 * 512,
                            .q_stride_head = 512,
                            .kv_stride_row = 512,
                            .max_position = 8,
                            .page_tokens = 32,
                            .page_stride_bytes = 19008,
                            .num_pages = 1,
                            .eps = 1e-6f};
static const fz_field_t ks_fields[] = {F64(KS, num_tokens),        F64(KS, num_insert),     F64(KS, num_heads),
                                       F64(KS, num_heads_padded),  F64(KS, q_stride_token), F64(KS, q_stride_head),
                                       F64(KS, kv_stride_row),     F64(KS, max_position),   F64(KS, page_tokens),
                                       F64(KS, page_stride_bytes), F64(KS, num_pages),      F32F(KS, eps),
                                       F32I(KS, skip_q_norm)};
WRAP(kv_swa_write, KS)

typedef dsv4_kv_gather_desc_t KG;
static const KG kg_valid = {.num_reqs = 2,
                            .block_table_width = 1,
                            .block_table_stride = 1,
                            .out_rows = 8,
                            .out_stride_req = 8 * 512,
                            .out_stride_row = 512,
                            .page_tokens = 64,
                            .page_stride_bytes = 37440,
                            .num_pages = 2};
static const fz_field_t kg_fields[] = {F64(KG, num_reqs),
                                       F64(KG, block_table_width),
                                       F64(KG, block_table_stride),
                                       F64(KG, out_rows),
                                       F64(KG, out_stride_req),
                                       F64(KG, out_stride_row),
                                       F64(KG, offset),
                                       F64(KG, max_gather_len),
                                       F64(KG, page_tokens),
                                       F64(KG, page_stride_bytes),
                                       F64(KG, num_pages)};
WRAP(kv_gather, KG)
REF(kv_gather, KG, dsv4_kv_gather_args_t)

/* ---- indices ------------------------------------------------------------------------- */
typedef dsv4_topk_translate_desc_t TT;
static const TT tt_valid = {4, 8, 2, 4, 16, 8, 4, 8};
static const fz_field_t tt_fields[] = {F64(TT, num_tokens),         F64(TT, topk),        F64(TT, num_reqs),
                                       F64(TT, block_table_width),  F64(TT, page_tokens), F64(TT, topk_stride),
                                       F64(TT, block_table_stride), F64(TT, out_stride)};
WRAP(topk_translate, TT)
REF(topk_translate, TT, dsv4_topk_translate_args_t)
WRAP(topk_translate_packed, TT)
REF(topk_translate_packed, TT, dsv4_topk_translate_packed_args_t)

typedef dsv4_combine_topk_swa_desc_t CB;
static const CB cb_valid = {4, 2, 4, 8, 8, 4, 1, 64, 16, 128, DSV4_COMBINE_V4_1};
static const fz_field_t cb_fields[] = {F64(CB, num_tokens),  F64(CB, num_reqs),   F64(CB, topk),  F64(CB, topk_cols),
                                       F64(CB, topk_stride), F64(CB, window),     F64(CB, ratio), F64(CB, slab_rows),
                                       F64(CB, swa_row0),    F64(CB, out_stride), F64(CB, mode)};
WRAP(combine_topk_swa, CB)
REF(combine_topk_swa, CB, dsv4_combine_topk_swa_args_t)

typedef dsv4_decode_swa_indices_desc_t DS;
static const DS ds_valid = {4, 2, 128, 16, 4, 4, 128};
static const fz_field_t ds_fields[] = {F64(DS, num_tokens),  F64(DS, num_reqs),          F64(DS, window),
                                       F64(DS, page_tokens), F64(DS, block_table_width), F64(DS, block_table_stride),
                                       F64(DS, out_stride)};
WRAP(decode_swa_indices, DS)
REF(decode_swa_indices, DS, dsv4_decode_swa_indices_args_t)

/* ---- attention ----------------------------------------------------------------------- */
typedef dsv4_sparse_mla_decode_desc_t MD;
static const MD md_valid = {.num_tokens = 4,
                            .num_heads = 64,
                            .q_stride_token = 64 * 512,
                            .q_stride_head = 512,
                            .out_stride_token = 64 * 512,
                            .out_stride_head = 512,
                            .main = {128, 128, {32, 19008, 2}},
                            .has_extra = 1,
                            .extra = {128, 128, {32, 19008, 2}},
                            .num_splits = 2,
                            .sm_count = 132};
static const fz_field_t md_fields[] = {F64(MD, num_tokens),
                                       F64(MD, num_heads),
                                       F64(MD, q_stride_token),
                                       F64(MD, q_stride_head),
                                       F64(MD, out_stride_token),
                                       F64(MD, out_stride_head),
                                       F64(MD, main.width),
                                       F64(MD, main.stride),
                                       F64(MD, main.cache.page_tokens),
                                       F64(MD, main.cache.page_stride_bytes),
                                       F64(MD, main.cache.num_pages),
                                       F32I(MD, has_extra),
                                       F64(MD, extra.width),
                                       F64(MD, extra.stride),
                                       F64(MD, extra.cache.page_tokens),
                                       F64(MD, extra.cache.page_stride_bytes),
                                       F64(MD, extra.cache.num_pages),
                                       F32F(MD, scale),
                                       F64(MD, num_splits),
                                       F32I(MD, force_merge),
                                       F64(MD, config),
                                       F64(MD, sm_count),
                                       F32I(MD, batch_invariant)};
WRAP(sparse_mla_decode, MD)
static dsv4_status_t md_plan(const void *d) {
    dsv4_sparse_mla_plan_t p;
    return dsv4_sparse_mla_decode_plan((const MD *)d, &p);
}

typedef dsv4_sparse_mla_prefill_desc_t MP;
static const MP mp_valid = {.num_tokens = 4,
                            .num_heads = 64,
                            .q_stride_token = 64 * 512,
                            .q_stride_head = 512,
                            .out_stride_token = 64 * 512,
                            .out_stride_head = 512,
                            .kv_rows = 64,
                            .kv_stride = 512,
                            .width = 128,
                            .ids_stride = 128};
static const fz_field_t mp_fields[] = {F64(MP, num_tokens),    F64(MP, num_heads),        F64(MP, q_stride_token),
                                       F64(MP, q_stride_head), F64(MP, out_stride_token), F64(MP, out_stride_head),
                                       F64(MP, kv_rows),       F64(MP, kv_stride),        F64(MP, width),
                                       F64(MP, ids_stride),    F32F(MP, scale),           F64(MP, config)};
WRAP(sparse_mla_prefill, MP)
static dsv4_status_t mp_plan(const void *d) {
    dsv4_sparse_mla_plan_t p;
    return dsv4_sparse_mla_prefill_plan((const MP *)d, &p);
}

/* ---- mhc ------------------------------------------------------------------------------- */
typedef dsv4_mhc_post_desc_t HP;
static const HP hp_valid = {16, 4096, 4096, 4 * 4096, 4 * 4096};
static const fz_field_t hp_fields[] = {F64(HP, tokens), F64(HP, hidden), F64(HP, x_stride), F64(HP, residual_stride),
                                       F64(HP, residual_out_stride)};
WRAP(mhc_post, HP)

typedef dsv4_mhc_collapse_desc_t HC;
static const HC hc_valid = {3, 7168, DSV4_MHC_V41, 1e-20f, 4 * 7168, 7168, 7168};
static const fz_field_t hc_fields[] = {F64(HC, tokens),    F64(HC, hidden),          F32I(HC, variant),
                                       F32F(HC, norm_eps), F64(HC, residual_stride), F64(HC, out_stride),
                                       F64(HC, aux_stride)};
WRAP(mhc_collapse, HC)

#define GATE_FIELDS(T)                                                                                                 \
    F32F(T, gate.rms_eps), F32F(T, gate.pre_eps), F32F(T, gate.sinkhorn_eps), F32F(T, gate.post_mult),                 \
        F32I(T, gate.sinkhorn_iters)
typedef dsv4_mhc_gates_desc_t HG;
static const HG hg_valid = {20, 4096, 0, 0, DSV4_MHC_GATE_PARAMS_V4, 4 * 4096};
static const fz_field_t hg_fields[] = {F64(HG, tokens), F64(HG, hidden), F32I(HG, broadcast),
                                       F32I(HG, route), GATE_FIELDS(HG), F64(HG, residual_stride)};
WRAP(mhc_gates, HG)

typedef dsv4_mhc_pre_desc_t HR;
static const HR hr_valid = {6,      5120,     DSV4_MHC_V41, 0,    0,   DSV4_MHC_GATE_PARAMS_V41,
                            1e-20f, 4 * 5120, 4 * 5120,     5120, 5120};
static const fz_field_t hr_fields[] = {F64(HR, tokens),
                                       F64(HR, hidden),
                                       F32I(HR, variant),
                                       F32I(HR, broadcast),
                                       F32I(HR, route),
                                       GATE_FIELDS(HR),
                                       F32F(HR, norm_eps),
                                       F64(HR, residual_stride),
                                       F64(HR, residual_out_stride),
                                       F64(HR, layer_input_stride),
                                       F64(HR, aux_stride)};
WRAP(mhc_pre, HR)

typedef dsv4_mhc_seam_desc_t HS;
static const HS hs_valid = {4,        4096,     DSV4_MHC_V41, 0,   DSV4_MHC_GATE_PARAMS_V41, 1e-20f, 4096,
                            4 * 4096, 4 * 4096, 4096,         4096};
static const fz_field_t hs_fields[] = {F64(HS, tokens),
                                       F64(HS, hidden),
                                       F32I(HS, variant),
                                       F32I(HS, route),
                                       GATE_FIELDS(HS),
                                       F32F(HS, norm_eps),
                                       F64(HS, x_stride),
                                       F64(HS, residual_stride),
                                       F64(HS, residual_out_stride),
                                       F64(HS, layer_input_stride),
                                       F64(HS, aux_stride)};
WRAP(mhc_seam, HS)

typedef dsv4_mhc_fn_bcast_desc_t HB;
static const HB hb_valid = {5120};
static const fz_field_t hb_fields[] = {F64(HB, hidden)};
WRAP(mhc_fn_bcast, HB)

typedef dsv4_mhc_fn_split_desc_t HF;
static const HF hf_valid = {5120, 0};
static const fz_field_t hf_fields[] = {F64(HF, hidden), F32I(HF, broadcast)};
WRAP(mhc_fn_split, HF)

/* dsv4_mhc_plan's arguments as a descriptor; it has no check of its own. */
typedef struct {
    int64_t tokens, hidden;
    int32_t broadcast, route;
} HL;
static const HL hl_valid = {6, 5120, 0, 0};
static const fz_field_t hl_fields[] = {F64(HL, tokens), F64(HL, hidden), F32I(HL, broadcast), F32I(HL, route)};
static dsv4_status_t mhc_plan_chk(const void *d) {
    const HL *h = d;
    dsv4_mhc_plan_t p;
    return dsv4_mhc_plan(h->tokens, h->hidden, h->broadcast, h->route, &p);
}
static dsv4_status_t mhc_plan_ws(const void *d, size_t *b) {
    const HL *h = d;
    dsv4_mhc_plan_t p;
    dsv4_status_t st = dsv4_mhc_plan(h->tokens, h->hidden, h->broadcast, h->route, &p);
    if (st == DSV4_STATUS_SUCCESS) *b = p.workspace_bytes;
    return st;
}

/* ---- compress -------------------------------------------------------------------------- */
typedef dsv4_compress_desc_t CP;
static const CP cp_valid = {.num_tokens = 3,
                            .ratio = 2,
                            .kv_stride = 1024,
                            .num_reqs = 1,
                            .ring_cap = 16,
                            .ring_rows = 64,
                            .ring_stride = 1024,
                            .eps = 1e-6f};
static const fz_field_t cp_fields[] = {F64(CP, num_tokens), F64(CP, ratio),     F64(CP, kv_stride),   F64(CP, num_reqs),
                                       F64(CP, ring_cap),   F64(CP, ring_rows), F64(CP, ring_stride), F32F(CP, eps)};
WRAP(compress, CP)

typedef dsv4_inv_rope_desc_t IR;
static const IR ir_valid = {.num_tokens = 4,
                            .num_heads = 2,
                            .num_heads_padded = 3,
                            .o_stride_token = 3 * 512,
                            .o_stride_head = 512,
                            .max_position = 8};
static const fz_field_t ir_fields[] = {F64(IR, num_tokens),     F64(IR, num_heads),     F64(IR, num_heads_padded),
                                       F64(IR, o_stride_token), F64(IR, o_stride_head), F64(IR, max_position)};
WRAP(inv_rope, IR)
REF(inv_rope, IR, dsv4_inv_rope_args_t)

typedef dsv4_engram_lookup_desc_t EL;
static const EL el_valid = {.num_tokens = 4,
                            .n_cols = 4,
                            .head_start = 2,
                            .local_heads = 2,
                            .head_dim = 256,
                            .ids_stride_token = 4,
                            .ids_stride_head = 1,
                            .vocab_end = 16,
                            .values_stride_bytes = 256,
                            .scales_stride_bytes = 8};
static const fz_field_t el_fields[] = {F64(EL, num_tokens),         F64(EL, n_cols),
                                       F64(EL, head_start),         F64(EL, local_heads),
                                       F64(EL, head_dim),           F64(EL, ids_stride_token),
                                       F64(EL, ids_stride_head),    F64(EL, vocab_start),
                                       F64(EL, vocab_end),          F64(EL, values_stride_bytes),
                                       F64(EL, scales_stride_bytes)};
WRAP(engram_lookup, EL)
REF(engram_lookup, EL, dsv4_engram_lookup_args_t)

/* ---- indexer --------------------------------------------------------------------------- */
typedef dsv4_indexer_q_desc_t IQ;
static const IQ iq_valid = {.num_tokens = 4,
                            .num_heads = 32,
                            .q_stride_token = 32 * 128,
                            .q_stride_head = 128,
                            .w_stride_token = 32,
                            .max_position = 16};
static const fz_field_t iq_fields[] = {F64(IQ, num_tokens),     F64(IQ, num_heads),      F64(IQ, q_stride_token),
                                       F64(IQ, q_stride_head),  F64(IQ, w_stride_token), F64(IQ, max_position),
                                       F32F(IQ, softmax_scale), F32F(IQ, head_scale)};
WRAP(indexer_q, IQ)

typedef dsv4_indexer_k_store_desc_t IK;
static const IK ik_valid = {.num_tokens = 4,
                            .k_stride_row = 128,
                            .ratio = 1,
                            .max_position = 16,
                            .page_tokens = 64,
                            .page_stride_bytes = 8448,
                            .num_pages = 2,
                            .eps = 1e-6f};
static const fz_field_t ik_fields[] = {F64(IK, num_tokens),   F64(IK, k_stride_row), F64(IK, ratio),
                                       F64(IK, max_position), F64(IK, page_tokens),  F64(IK, page_stride_bytes),
                                       F64(IK, num_pages),    F32F(IK, eps)};
WRAP(indexer_k_store, IK)
typedef dsv4_indexer_topk_desc_t IT;
static const IT it_valid = {.num_rows = 4,
                            .num_heads = 32,
                            .topk = 8,
                            .ratio = 1,
                            .num_reqs = 2,
                            .block_table_width = 2,
                            .block_table_stride = 2,
                            .page_tokens = 64,
                            .page_stride_bytes = 8448,
                            .num_pages = 2,
                            .topk_stride = 8,
                            .max_keys = 100,
                            .candidate_mode = 1,
                            .candidate_count = 16,
                            .candidate_block = 8,
                            .candidate_stride = 16};
static const fz_field_t it_fields[] = {F64(IT, num_rows),
                                       F64(IT, num_heads),
                                       F64(IT, topk),
                                       F64(IT, ratio),
                                       F64(IT, num_reqs),
                                       F64(IT, block_table_width),
                                       F64(IT, block_table_stride),
                                       F64(IT, page_tokens),
                                       F64(IT, page_stride_bytes),
                                       F64(IT, num_pages),
                                       F64(IT, topk_stride),
                                       F64(IT, max_keys),
                                       F64(IT, candidate_mode),
                                       F64(IT, candidate_count),
                                       F64(IT, candidate_block),
                                       F64(IT, candidate_stride),
                                       F64(IT, num_splits)};
WRAP(indexer_topk, IT)

typedef dsv4_indexer_logits_desc_t IL;
static const IL il_valid = {.num_rows = 4,
                            .num_heads = 64,
                            .ratio = 2,
                            .num_reqs = 2,
                            .block_table_width = 2,
                            .block_table_stride = 2,
                            .page_tokens = 128,
                            .page_stride_bytes = 17280,
                            .num_pages = 2,
                            .max_keys = 100,
                            .out_cols = 120,
                            .out_stride = 120};
static const fz_field_t il_fields[] = {F64(IL, num_rows),    F64(IL, num_heads),         F64(IL, ratio),
                                       F64(IL, num_reqs),    F64(IL, block_table_width), F64(IL, block_table_stride),
                                       F64(IL, page_tokens), F64(IL, page_stride_bytes), F64(IL, num_pages),
                                       F64(IL, max_keys),    F64(IL, out_cols),          F64(IL, out_stride)};
WRAP(indexer_logits, IL)

const fz_op_t fz_ops[] = {
    OPR(kv_insert, KI, ki_valid, ki_fields),
    OP(kv_rope_insert, KR, kr_valid, kr_fields, NULL, 0),
    OP(kv_swa_write, KS, ks_valid, ks_fields, NULL, 0),
    OPR(kv_gather, KG, kg_valid, kg_fields),
    OPR(topk_translate, TT, tt_valid, tt_fields),
    OPR(topk_translate_packed, TT, tt_valid, tt_fields),
    OPR(combine_topk_swa, CB, cb_valid, cb_fields),
    OPR(decode_swa_indices, DS, ds_valid, ds_fields),
    OP(sparse_mla_decode, MD, md_valid, md_fields, md_plan, 1),
    OP(sparse_mla_prefill, MP, mp_valid, mp_fields, mp_plan, 0),
    OP(mhc_post, HP, hp_valid, hp_fields, NULL, 0),
    OP(mhc_collapse, HC, hc_valid, hc_fields, NULL, 0),
    OP(mhc_gates, HG, hg_valid, hg_fields, NULL, 0),
    OP(mhc_pre, HR, hr_valid, hr_fields, NULL, 0),
    OP(mhc_seam, HS, hs_valid, hs_fields, NULL, 0),
    OP(mhc_fn_bcast, HB, hb_valid, hb_fields, NULL, 0),
    OP(mhc_fn_split, HF, hf_valid, hf_fields, NULL, 0),
    OP(mhc_plan, HL, hl_valid, hl_fields, NULL, 0),
    OP(compress, CP, cp_valid, cp_fields, NULL, 0),
    OPR(inv_rope, IR, ir_valid, ir_fields),
    OPR(engram_lookup, EL, el_valid, el_fields),
    OP(indexer_q, IQ, iq_valid, iq_fields, NULL, 0),
    OP(indexer_k_store, IK, ik_valid, ik_fields, NULL, 0),
    OP(indexer_topk, IT, it_valid, it_fields, NULL, 0),
    OP(indexer_logits, IL, il_valid, il_fields, NULL, 0),
};
const int fz_num_ops = NF(fz_ops);
