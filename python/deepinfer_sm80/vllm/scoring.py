"""The indexer's scoring step on SM8x: fp8 logits of each token's index query against the paged
index keys, then the top-k of the causal candidates, written into the shared top-k buffer.

vLLM 0.33.0 does this with DeepGEMM (fp8_fp4_mqa_logits / fp8_fp4_paged_mqa_logits) and its
top-k kernels, none of which run on SM8x; its torch fallback (fp8_paged_mqa_logits_torch, a
ROCm reference) loops over requests on the host and has no V4.1 candidate blocks. libdsv4's fused
logits + top-k kernel has no Python binding yet, so a step that reaches this op (a context longer
than index_topk * compress_ratio tokens, or CUDA-graph capture) raises NotImplementedError.
Shorter contexts never get here: the indexer selects every candidate itself.
"""
from vllm.forward_context import get_forward_context

MISSING = ("deepinfer_sm80: the indexer scoring op (libdsv4 dsv4_indexer_topk, fused fp8 logits + top-k) has no "
           "Python binding in this build; contexts longer than index_topk * compress_ratio tokens and CUDA-graph "
           "capture need it (serve with --enforce-eager and max_model_len <= index_topk * compress_ratio meanwhile)")


def indexer_topk(layer, q_quant, weights):
    """Scoring for DeepInferSparseAttnIndexer `layer`: q_quant e4m3 [T, n_head, 128], weights fp32
    [T, n_head] (the query scale folded in) -> layer.topk_indices_buffer[:T, :index_topk] (request-
    local indices, -1 padded) and, for the candidate source, layer.candidate_blocks[:T]."""
    attn_metadata = get_forward_context().attn_metadata
    if not isinstance(attn_metadata, dict):
        return layer.topk_indices_buffer  # profile run: nothing to score
    raise NotImplementedError(MISSING)
