/* indexer_topk / indexer_logits launchers: the kernels are not built yet. */
#include "common/error.h"
#include "indexer/indexer_common.h"

extern "C" dsv4_status_t idx_topk_launch(const idx_topk_plan_t *, const dsv4_indexer_topk_args_t *, void *,
                                         dsv4_stream_t) {
    return dsv4_fail(DSV4_STATUS_UNSUPPORTED, "indexer_topk", "the kernel is not built yet");
}
extern "C" dsv4_status_t idx_logits_launch(const idx_logits_plan_t *, const dsv4_indexer_logits_args_t *,
                                           dsv4_stream_t) {
    return dsv4_fail(DSV4_STATUS_UNSUPPORTED, "indexer_logits", "the kernel is not built yet");
}
