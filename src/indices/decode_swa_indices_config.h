/*
 * Tile sizes of the decode SWA index-list kernel and the host <-> launcher interface.
 * One warp per decode token, DSV4_DSW_WARPS tokens per CTA; lane l writes the 4-column
 * chunks l, l + 32, ... of the row (W = 128: one 16-byte store per lane). No shared memory.
 */
#ifndef DSV4_INDICES_DECODE_SWA_INDICES_CONFIG_H
#define DSV4_INDICES_DECODE_SWA_INDICES_CONFIG_H

#include <stdint.h>

#include "common/launch.h"
#include "dsv4/indices.h"
#include "common/kv_format.h"

#define DSV4_DSW_WARPS 4
#define DSV4_DSW_THREADS (DSV4_DSW_WARPS * 32)

DSV4_SMEM_BUDGET_ASSERT(0, "decode_swa_indices (no shared memory)");

typedef struct dsv4_dsw_params {
    const int32_t *token_to_req; /* [T]                  */
    const int32_t *positions;    /* [T]                  */
    const uint8_t *is_valid;     /* [T]                  */
    const int32_t *table;        /* [R, block_table_stride]    */
    int32_t *out;                /* [T, out_stride]      */
    int32_t *lens;               /* [T]                  */
    int64_t block_table_stride, out_stride;
    int32_t num_tokens, num_reqs, window, page_tokens, block_table_width;
    kv_page_div_t page_div; /* division by page_tokens */
    int32_t vec;            /* 16-byte stores allowed */
} dsv4_dsw_params_t;

typedef struct dsv4_dsw_strides {
    int64_t table, out; /* resolved row strides */
} dsv4_dsw_strides_t;

#ifdef __cplusplus
extern "C" {
#endif
/* Full validation (descriptor, args, pointers), shared by the run call and the reference. */
dsv4_status_t dsv4_dsw_validate(const char *op, const dsv4_decode_swa_indices_desc_t *d,
                                const dsv4_decode_swa_indices_args_t *a, dsv4_dsw_strides_t *s);
dsv4_status_t dsv4_decode_swa_indices_launch(const dsv4_dsw_params_t *p, dsv4_stream_t stream);
#ifdef __cplusplus
}
#endif

#endif /* DSV4_INDICES_DECODE_SWA_INDICES_CONFIG_H */
