"""The indexer's scoring step on SM8x: fp8 logits of each token's index query against the paged
index keys, then the top-k of the causal candidates, written into the shared top-k buffer.

vLLM 0.33.0 does this with DeepGEMM (fp8_fp4_mqa_logits / fp8_fp4_paged_mqa_logits), a K gather
for prefill, a materialized logits matrix and its top-k kernels, none of which run on SM8x.
libdsv4's indexer_topk reads the paged cache directly and never writes the logits; one call
covers decode rows (speculative rows included) and prefill rows alike, a row being a token:

  row t       token t of the step (decode first, as vLLM orders the batch); rows past the
              step's tokens (CUDA-graph padding) are padding
  request     the SWA metadata's token_to_req_indices[t] (a row of the indexer's block table)
  position    seq_lens[req] - (query_start_loc[req + 1] - t): the library derives the causal
              bound n_t = (position + 1) // ratio itself, so neither vLLM's [B, next_n] decode
              lengths, its flattening nor the indexer's own decode/prefill split matter
  validity    is_valid_token[t] (a slot was assigned); padding rows come out all -1
  candidates  the V4.1 candidate source writes candidate_blocks[t] (mode 1), the layers after it
              score only those blocks (mode 2), other index layers use none (mode 0)

Rows with n_t <= index_topk come out as 0, 1, .., n_t - 1, then -1: what vLLM's short-context
fill (_fill_short_context_topk_indices) writes, so a layer that takes that branch and one that
reaches this op agree. Every column of the rows scored is written (no -1 pre-fill needed).

The workspace is planned once per geometry and reserved in the profile run through vLLM's
workspace manager, so no call allocates it (CUDA-graph capture included). Rows are scored in
calls of at most plan()'s row count, which keeps the workspace within
VLLM_SPARSE_INDEXER_MAX_LOGITS_MB (the budget vLLM sizes its logits by).
"""
import torch
from vllm import envs
from vllm.forward_context import get_forward_context

from .. import ops
from ..planner import Planner

CANDIDATE_BLOCK = 8  # compressed positions per candidate block (libdsv4's only block size)
_PLANS = {}


def candidate_mode(layer):
    """0 without candidate blocks, 1 for the layer that writes them, 2 for the layers that read them."""
    if layer.candidate_blocks is None:
        return 0
    if layer.candidate_block_size != CANDIDATE_BLOCK:
        raise NotImplementedError(f"deepinfer_sm80: candidate blocks of {layer.candidate_block_size} positions "
                                  f"(libdsv4 scores blocks of {CANDIDATE_BLOCK})")
    return 1 if layer.candidate_write else 2


def plan(layer, heads):
    """(rows per call, workspace bytes) of `layer`'s scoring for `heads` index heads: the most rows
    of the top-k buffer whose workspace fits the logits budget (at least one)."""
    mode = candidate_mode(layer)
    count = layer.candidate_blocks.shape[1] if mode else 2048
    max_rows = layer.topk_indices_buffer.shape[0]
    budget = envs.VLLM_SPARSE_INDEXER_MAX_LOGITS_MB << 20
    key = (heads, layer.topk_tokens, layer.compress_ratio, layer.max_model_len, mode, count, max_rows, budget)
    if key not in _PLANS:
        rows = max(max_rows, 1)
        while True:
            # The size depends on rows, heads, topk, max_keys and the candidate mode, not on pages.
            need = Planner().indexer_topk(range(1, rows + 1), heads, layer.topk_tokens, ratio=layer.compress_ratio,
                                          max_keys=layer.max_model_len, page_tokens=64, candidate_mode=mode,
                                          candidate_count=count)
            if need <= budget or rows == 1:
                break
            rows = (rows + 1) // 2
        _PLANS[key] = (rows, need)
    return _PLANS[key]


def workspace(nbytes):
    """uint8 [nbytes] from vLLM's workspace manager (shared with the attention's scratch: the
    indexer's use ends before attention starts on the same stream)."""
    from vllm.v1.worker.workspace import current_workspace_manager

    return current_workspace_manager().get_simultaneous(((max(nbytes, 1),), torch.uint8))[0]


def step_rows(swa, num_rows, device):
    """(row_req int32, positions int64, row_valid uint8), each [num_rows], of the step whose SWA
    metadata is `swa` (DeepseekSparseSWAMetadata: token_to_req_indices, seq_lens, query_start_loc,
    is_valid_token). Rows past the metadata's tokens are padding: request -1, invalid."""
    req = torch.full((num_rows,), -1, dtype=torch.int32, device=device)
    pos = torch.full((num_rows,), -1, dtype=torch.int64, device=device)
    valid = torch.zeros((num_rows,), dtype=torch.uint8, device=device)
    n = min(num_rows, swa.token_to_req_indices.shape[0], swa.is_valid_token.shape[0])
    reqs = min(swa.seq_lens.shape[0], swa.query_start_loc.shape[0] - 1)
    if n == 0 or reqs <= 0:
        return req, pos, valid
    req[:n] = swa.token_to_req_indices[:n]
    r = req[:n].long().clamp(0, reqs - 1)  # padding tokens may name any request; they stay invalid
    t = torch.arange(n, dtype=torch.int64, device=device)
    pos[:n] = swa.seq_lens[r].long() - (swa.query_start_loc[r + 1].long() - t)
    valid[:n] = swa.is_valid_token[:n].to(torch.uint8)
    return req, pos, valid


def _cached_rows(swa, num_rows, device):
    """step_rows once per forward pass (every index layer of the step shares it)."""
    extra = getattr(get_forward_context(), "additional_kwargs", None)
    if extra is None:
        return step_rows(swa, num_rows, device)
    key = ("deepinfer", "indexer_rows", id(swa), num_rows)
    if key not in extra:
        extra[key] = step_rows(swa, num_rows, device)
    return extra[key]


def indexer_topk(layer, q_quant, weights):
    """Scoring for DeepInferSparseAttnIndexer `layer`: q_quant e4m3 [T, n_head, 128], weights fp32
    [T, n_head] (the query scale folded in) -> layer.topk_indices_buffer[:T, :index_topk] (request-
    local indices ascending, -1 padded) and, for the candidate source, layer.candidate_blocks[:T]."""
    attn_metadata = get_forward_context().attn_metadata
    heads = q_quant.shape[1]
    rows, need = plan(layer, heads)
    if not isinstance(attn_metadata, dict):
        workspace(need)  # profile run: reserve the scratch before the KV pool is sized
        return layer.topk_indices_buffer
    T = q_quant.shape[0]
    if T == 0:
        return layer.topk_indices_buffer
    if layer.swa_prefix is None:
        raise RuntimeError("deepinfer_sm80: the indexer scoring op was built outside DeepInferV41Attention (no SWA "
                           "metadata to take each token's request and position from)")
    meta = attn_metadata[layer.k_cache.prefix]
    swa = attn_metadata[layer.swa_prefix]
    out = layer.topk_indices_buffer[:T, :layer.topk_tokens]
    if meta.block_table is None:  # a step without tokens for this group
        out.fill_(-1)
        return layer.topk_indices_buffer
    req, pos, valid = _cached_rows(swa, T, q_quant.device)
    mode = candidate_mode(layer)
    cache = layer.k_cache.kv_cache
    q8 = q_quant.view(torch.uint8)
    ws = workspace(need)
    for s in range(0, T, rows):
        e = min(T, s + rows)
        ops.indexer_topk(q8[s:e], weights[s:e], pos[s:e], req[s:e], meta.block_table, cache, out[s:e], ws,
                         valid[s:e], layer.candidate_blocks[s:e] if mode else None, ratio=layer.compress_ratio,
                         page_tokens=cache.shape[1], max_keys=layer.max_model_len, candidate_mode=mode)
    return layer.topk_indices_buffer
