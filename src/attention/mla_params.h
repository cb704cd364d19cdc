/*
 * Internal: the flat parameter block the sparse MLA kernels take by value, filled by
 * the host side (sparse_mla_decode.c, sparse_mla_prefill.c) after validation, and the
 * launchers (extern "C", in the *_kernel.cu files).
 */
#ifndef DSV4_ATTENTION_MLA_PARAMS_H
#define DSV4_ATTENTION_MLA_PARAMS_H

#include <stdint.h>

#include "common/kv_format.h"
#include "dsv4/dsv4.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One key list and the rows it points into. */
typedef struct mla_list_params {
    const int32_t *ids;     /* [T, stride] ids                                            */
    const int32_t *lens;    /* [T]                                                        */
    int64_t stride;         /* id row stride (elements)                                   */
    int64_t width;          /* ids read per row: min(lens[t], width)                      */
    const uint8_t *base;    /* decode: the cache pages; prefill: the bf16 kv rows         */
    int64_t page_tokens;    /* decode: P                                                  */
    int64_t row_bytes;      /* decode: page stride; prefill: kv row stride, both in bytes */
    int64_t num_valid;      /* ids in [0, num_valid) are valid (num_pages * P, or kv_rows) */
    uint32_t id_limit;      /* min(num_valid, 2^31): id valid <=> (uint32_t)id < id_limit   */
    kv_page_div_t page_div; /* decode: id / P for 0 <= id < 2^31 (common/kv_format.h)  */
} mla_list_params_t;

typedef struct mla_params {
    const uint16_t *q; /* bf16 [T, H, 512] with the strides below (elements)         */
    int64_t q_st, q_sh;
    uint16_t *out;
    int64_t o_st, o_sh;
    const float *sink; /* [H] or NULL                                                */
    float scale;
    int num_tokens, num_heads, num_splits, num_lists;
    float *part_acc; /* non-NULL: write raw partials here (and part_m, part_l)      */
    float *part_m, *part_l;
    unsigned *part_flags; /* non-NULL (decode, plan.merge == 2): one completion flag per   */
    int attn_ctas;        /*   partial row; merge CTAs follow the attn_ctas attention CTAs */
    unsigned flag_tag;    /* the value the flags carry for this call (common/call_tag.h) */
    mla_list_params_t list[2];
} mla_params_t;

/* Launch the attention kernel of `config` over `ctas` CTAs: T * S * H / HC attention
 * CTAs, then (decode with part_flags) the merge CTAs of mla_merge.cuh. */
dsv4_status_t mla_launch_decode(int config, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream);
dsv4_status_t mla_launch_prefill(int config, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream);
/* ws32 and ws64 (mla_ws.cuh): sparse_mla_prefill_ws_kernel.cu (ws32),
 * sparse_mla_decode_ws_kernel.cu (both). */
dsv4_status_t mla_launch_prefill_ws(const mla_params_t *p, int64_t ctas, dsv4_stream_t stream);
dsv4_status_t mla_launch_decode_ws(int config, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream);
/* Launch the split merge: T * H CTAs reading p->part_*, writing p->out. */
dsv4_status_t mla_launch_merge(const mla_params_t *p, dsv4_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif
