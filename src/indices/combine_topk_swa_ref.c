/* CPU reference of the top-k + SWA combine (include/dsv4/indices.h, section 2): the
 * header's loop over requests and their tokens, in 64-bit arithmetic truncated to int32 at
 * the store. */
#include "common/error.h"
#include "dsv4/indices.h"
#include "indices/combine_topk_swa_config.h"

static int32_t wrap32(int64_t x) { return (int32_t)(uint32_t)(uint64_t)x; }

dsv4_status_t dsv4_combine_topk_swa_ref(const dsv4_combine_topk_swa_desc_t *desc,
                                        const dsv4_combine_topk_swa_args_t *args) {
    dsv4_cmb_layout_t l;
    DSV4_TRY(dsv4_cmb_validate("combine_topk_swa_ref", desc, args, &l));
    const int64_t T = desc->num_tokens, W = desc->window, r = desc->ratio, TOP_K = desc->topk;
    const int64_t M = desc->slab_rows, N = desc->swa_row0;
    const int v4 = desc->mode == DSV4_COMBINE_V4;
    const int32_t *qsl = args->query_start_loc;
    /* Every column is written: -1 first, then each request's rows (rows no request covers
     * stay -1 with lens 0). */
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t j = 0; j < l.cols; ++j) args->combined[t * l.out_stride + j] = -1;
        args->combined_lens[t] = 0;
    }
    for (int64_t b = 0; b < desc->num_reqs; ++b) {
        const int64_t q0 = (int64_t)qsl[b] - qsl[0], q1 = (int64_t)qsl[b + 1] - qsl[0];
        const int64_t L = args->seq_lens[b], G = args->gather_lens[b], gs = L - G;
        for (int64_t t = q0 < 0 ? 0 : q0; t < q1 && t < T; ++t) {
            const int64_t pos = L - (q1 - q0) + (t - q0);
            const int64_t np1 = pos + 1 > 0 ? pos + 1 : 0;
            int64_t topk_len = 0, swa_len, swa_start;
            if (r != 0) topk_len = np1 / r < TOP_K ? np1 / r : TOP_K;
            if (v4) {
                swa_len = np1 < W ? np1 : W;
                swa_start = pos - swa_len + 1;
            } else {
                swa_start = pos - W + 1 > 0 ? pos - W + 1 : 0;
                if (swa_start < gs) swa_start = gs; /* clamp at the gather start */
                swa_len = pos - swa_start + 1 > 0 ? pos - swa_start + 1 : 0;
            }
            int32_t *row = args->combined + t * l.out_stride;
            for (int64_t j = 0; j < topk_len; ++j) {
                const int64_t v = args->topk_indices[t * l.topk_stride + j];
                row[j] = (v4 || (v >= 0 && v < N)) ? wrap32(v + M * b) : -1;
            }
            for (int64_t j = 0; j < swa_len; ++j) row[topk_len + j] = wrap32(M * b + N + (swa_start - gs) + j);
            args->combined_lens[t] = (int32_t)(topk_len + swa_len);
        }
    }
    return DSV4_STATUS_SUCCESS;
}
