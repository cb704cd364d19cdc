"""torch custom ops (namespace `dsv4`) over the binding, for torch.compile and CUDA graphs.

    import deepinfer_sm80.ops as ops          # needs torch; `import deepinfer_sm80` alone does not
    torch.ops.dsv4.kv_gather(cache, seq_lens, block_table, out, page_tokens=64)

Each op is the binding function of the same name (deepinfer_sm80.kvcache / indices / attention /
mhc / compressor / indexer, which the docstrings here follow) in out-argument style: the caller passes every output, the
op writes it (and the in-place inputs: kv_swa_write's q, the caches) and returns None. Those
tensors are declared mutated in the schema; the fake implementations return None and touch no
data, so torch.compile traces the ops without running them. CUDA tensors run the kernels on
torch's current stream, CPU tensors the C references, as in the binding.

topk_translate_packed, sparse_mla_decode, mhc_gates, mhc_pre, mhc_seam and indexer_topk take a `workspace`
(uint8, at least the library's workspace size; `Planner.workspace(device)`), so no op allocates:
the calls can be captured into a CUDA graph. The other ops need none. Outputs and in-place
tensors must not overlap each other or the inputs.

Optional tensors before the last optional output have no default: pass None explicitly. torch's
dispatcher drops trailing arguments equal to their defaults, and torch 2.11's in-place version
bookkeeping then indexes a dropped output argument and fails.

The host reference's fp64 outputs (sparse MLA ref_out / ref_lse) and mhc gate-constant overrides
are left to the binding functions: the ops take the model's constants of `variant`.
"""
from typing import Optional

import torch
from torch import Tensor

from . import attention as _att
from . import compressor as _cmp
from . import indexer as _ixr
from . import indices as _idx
from . import kvcache as _kv
from . import mhc as _mhc
from .planner import Planner

V41, V4 = _mhc.V41, _mhc.V4
ROUTE_AUTO = _mhc.ROUTE_AUTO

__all__ = [
    "Planner", "kv_insert", "kv_swa_write", "kv_rope_insert", "kv_gather", "topk_translate", "topk_translate_packed",
    "combine_topk_swa", "decode_swa_indices", "sparse_mla_decode", "sparse_mla_prefill", "mhc_post", "mhc_collapse",
    "mhc_gates", "mhc_pre", "mhc_seam", "mhc_fn_bcast", "mhc_fn_split", "compress", "compress_v4", "inv_rope",
    "engram_lookup", "indexer_q", "indexer_k_store", "indexer_topk", "indexer_logits",
]


def _no_output(*args, **kwargs):
    """Fake implementation: the ops return nothing, so tracing needs no shapes or data."""
    return None


def _op(*mutates):
    """Register fn as dsv4::<fn name> writing `mutates`, with the fake implementation."""
    def wrap(fn):
        custom = torch.library.custom_op(f"dsv4::{fn.__name__}", mutates_args=mutates)(fn)
        custom.register_fake(_no_output)
        custom.__doc__ = fn.__doc__
        return custom
    return wrap


# ---- kvcache ----------------------------------------------------------------------------------
@_op("cache")
def kv_insert(k: Tensor, slot_mapping: Tensor, cache: Tensor, *, page_tokens: int,
              page_stride_bytes: Optional[int] = None) -> None:
    """Quantize bf16 rows k[t] and write them at slot_mapping[t] of cache (negative: skipped).

    k: bf16 [>= T, 512]; slot_mapping: int64 [T]; cache: uint8 pages [num_pages, ...] (or 1-D
    with page_stride_bytes), written."""
    _kv.kv_insert(k, slot_mapping, cache, page_tokens=page_tokens, page_stride_bytes=page_stride_bytes)


@_op("q", "cache")
def kv_swa_write(q: Tensor, kv: Tensor, position_ids: Tensor, slot_mapping: Tensor, cos_sin_cache: Tensor,
                 cache: Tensor, *, page_tokens: int, eps: Optional[float] = None, num_heads: Optional[int] = None,
                 page_stride_bytes: Optional[int] = None, skip_q_norm: bool = False) -> None:
    """Fused SWA writer: q RMS norm (unless skip_q_norm, DeepSeek-V4.1) + RoPE in place, kv RoPE
    + quantize + insert into cache.

    q: bf16 [N, Hpad, 512], written (heads >= num_heads zeroed); kv: bf16 [>= N_insert, 512];
    position_ids: int64 [N]; slot_mapping: int64 [N_insert <= N]; cos_sin_cache: fp32
    [max_position, 64]; cache: uint8 pages, written; eps: required unless skip_q_norm."""
    _kv.kv_swa_write(q, kv, position_ids, slot_mapping, cos_sin_cache, cache, page_tokens=page_tokens, eps=eps,
                     num_heads=num_heads, page_stride_bytes=page_stride_bytes, skip_q_norm=skip_q_norm)


@_op("cache")
def kv_rope_insert(latent: Tensor, positions: Tensor, slot_mapping: Tensor, cos_sin_cache: Tensor, cache: Tensor, *,
                   page_tokens: int, ratio: int, page_stride_bytes: Optional[int] = None) -> None:
    """Compressed-cache writer: the latent rows of closing tokens ((positions[t] + 1) % ratio == 0,
    valid slot_mapping[t]) rotated at their group's first position, quantized and inserted.

    latent: bf16 [>= T, 512]; positions, slot_mapping: int64 [T]; cos_sin_cache: fp32
    [max_position, 64]; cache: uint8 pages, written."""
    _kv.kv_rope_insert(latent, positions, slot_mapping, cos_sin_cache, cache, page_tokens=page_tokens, ratio=ratio,
                       page_stride_bytes=page_stride_bytes)


@_op("out")
def kv_gather(cache: Tensor, seq_lens: Tensor, block_table: Tensor, out: Tensor, gather_lens: Optional[Tensor] = None,
              *, page_tokens: int, offset: int = 0, max_gather_len: int = 0,
              page_stride_bytes: Optional[int] = None) -> None:
    """Dequantize each request's last G = gather_lens[b] (or seq_lens[b]) positions into
    out[b, offset : offset + G] (other rows untouched).

    cache: uint8 pages; seq_lens, gather_lens: int32 [R]; block_table: int32 [R, width];
    out: bf16 [>= R, M, 512], written."""
    _kv.kv_gather(cache, seq_lens, block_table, out, page_tokens=page_tokens, gather_lens=gather_lens,
                  offset=offset, max_gather_len=max_gather_len, page_stride_bytes=page_stride_bytes)


# ---- indices ----------------------------------------------------------------------------------
@_op("global_indices", "lens")
def topk_translate(topk_indices: Tensor, token_to_req: Tensor, block_table: Tensor, is_valid_token: Tensor,
                   global_indices: Tensor, lens: Tensor, *, page_tokens: int) -> None:
    """Local compressed top-k indices -> global slot ids (-1 invalid) and per-token counts.

    topk_indices: int32 [T, K]; token_to_req: int32 [T]; block_table: int32 [R, width];
    is_valid_token: bool/uint8 [T]; global_indices: int32 [T, K] and lens: int32 [T], written."""
    _idx.topk_translate(topk_indices, token_to_req, block_table, is_valid_token, page_tokens=page_tokens,
                        global_indices=global_indices, lens=lens)


@_op("lens", "indptr", "packed", "workspace")
def topk_translate_packed(topk_indices: Tensor, token_to_req: Tensor, block_table: Tensor, is_valid_token: Tensor,
                          lens: Tensor, indptr: Tensor, packed: Tensor, workspace: Tensor, *,
                          page_tokens: int) -> None:
    """The ragged form of topk_translate. Inputs as there; lens: int32 [T], indptr: int32
    [T+1], packed: int32 [>= T*K] (entries [0, indptr[T]) written); workspace: uint8
    (Planner.topk_translate_packed)."""
    _idx.topk_translate_packed(topk_indices, token_to_req, block_table, is_valid_token, page_tokens=page_tokens,
                               lens=lens, indptr=indptr, packed=packed, workspace=workspace)


@_op("combined", "combined_lens")
def combine_topk_swa(topk_indices: Optional[Tensor], query_start_loc: Tensor, seq_lens: Tensor, gather_lens: Tensor,
                     combined: Tensor, combined_lens: Tensor, *, topk: int, window: int, ratio: int, slab_rows: int,
                     swa_row0: int, combine_mode: int = _idx.V4_1) -> None:
    """Prefill rows of one chunk: top-k workspace rows, then the sliding window, then -1.

    topk_indices: int32 [T, >= topk] or None (topk == 0 or ratio == 0); query_start_loc: int32
    [R+1]; seq_lens, gather_lens: int32 [R]; combined: int32 [T, >= combine_cols(topk,
    window)] and combined_lens: int32 [T], written. combine_mode is the binding's `mode`
    (indices.V4_1 or V4), renamed because torch's dispatch passes its own `mode` keyword."""
    _idx.combine_topk_swa(topk_indices, query_start_loc, seq_lens, gather_lens, topk=topk, window=window, ratio=ratio,
                          slab_rows=slab_rows, swa_row0=swa_row0, mode=combine_mode, combined=combined,
                          combined_lens=combined_lens)


@_op("swa_indices", "swa_lens")
def decode_swa_indices(token_to_req: Tensor, positions: Tensor, is_valid_token: Tensor, block_table: Tensor,
                       swa_indices: Tensor, swa_lens: Tensor, *, window: int, page_tokens: int) -> None:
    """Decode SWA lists: global slots of positions max(pos-W+1, 0)..pos, then -1.

    token_to_req, positions: int32 [T]; is_valid_token: bool/uint8 [T]; block_table: int32
    [R, width]; swa_indices: int32 [T, >= W] or [T, 1, >= W] and swa_lens: int32 [T], written."""
    _idx.decode_swa_indices(token_to_req, positions, is_valid_token, block_table, window=window,
                            page_tokens=page_tokens, swa_indices=swa_indices, swa_lens=swa_lens)


# ---- attention --------------------------------------------------------------------------------
@_op("out", "workspace")
def sparse_mla_decode(q: Tensor, main_cache: Tensor, main_ids: Tensor, main_lens: Tensor, out: Tensor,
                      workspace: Tensor, extra_cache: Optional[Tensor] = None, extra_ids: Optional[Tensor] = None,
                      extra_lens: Optional[Tensor] = None, sink: Optional[Tensor] = None, *, main_page_tokens: int,
                      extra_page_tokens: Optional[int] = None, scale: float = 0.0, num_splits: int = 0,
                      force_merge: bool = False, config: int = 0, sm_count: int = 0,
                      main_page_stride_bytes: Optional[int] = None,
                      extra_page_stride_bytes: Optional[int] = None) -> None:
    """Sparse MLA decode over the main (SWA) list, then the extra (compressed) list.

    q: bf16 [T, H, 512]; *_cache: uint8 pages; *_ids: int32 [T, width]; *_lens: int32 [T];
    sink: fp32 [H] or None; out: bf16 [T, H, 512], written; workspace: uint8
    (Planner.sparse_mla_decode with the same num_splits / force_merge / config / sm_count)."""
    _att.sparse_mla_decode(q, main_cache, main_ids, main_lens, main_page_tokens=main_page_tokens,
                           extra_cache=extra_cache, extra_ids=extra_ids, extra_lens=extra_lens,
                           extra_page_tokens=extra_page_tokens, sink=sink, out=out, scale=scale,
                           num_splits=num_splits, force_merge=force_merge, config=config, sm_count=sm_count,
                           main_page_stride_bytes=main_page_stride_bytes,
                           extra_page_stride_bytes=extra_page_stride_bytes, workspace=workspace)


@_op("out")
def sparse_mla_prefill(q: Tensor, kv: Tensor, ids: Tensor, lens: Tensor, out: Tensor, sink: Optional[Tensor] = None,
                       *, scale: float = 0.0, config: int = 0) -> None:
    """Sparse MLA prefill over bf16 rows: J(t) = ids[t, :lens[t]] restricted to [0, kv_rows).

    q: bf16 [T, H, 512]; kv: bf16 [rows, >= 512] or [R, M, 512]; ids: int32 [T, C];
    lens: int32 [T]; sink: fp32 [H] or None; out: bf16 [T, H, 512], written."""
    _att.sparse_mla_prefill(q, kv, ids, lens, sink=sink, out=out, scale=scale, config=config)


# ---- mhc ----------------------------------------------------------------------------------------
@_op("residual_out", "sqrsum")
def mhc_post(x: Tensor, residual: Tensor, post: Tensor, comb: Tensor, residual_out: Tensor,
             sqrsum: Optional[Tensor] = None) -> None:
    """R_new[k] = post[k] * x + sum_j comb[j][k] * R[j].

    x: bf16 [T, H]; residual: bf16 [T, 4, H]; post: fp32 [T, 4] or [T, 4, 1]; comb: fp32
    [T, 4, 4]; residual_out: bf16 [T, 4, H] and sqrsum: fp32 [T] (or None), written."""
    _mhc.mhc_post(x, residual, post, comb, residual_out=residual_out, sqrsum=sqrsum)


@_op("out", "aux")
def mhc_collapse(residual: Tensor, out: Tensor, pre_mix: Optional[Tensor],
                 norm_weight: Optional[Tensor], aux: Optional[Tensor], *, variant: int = V41,
                 norm_eps: Optional[float] = None) -> None:
    """out = [RMSNorm](bf16(sum_j p[j] R[j])), p = pre_mix (None: stream 0); aux = stream mean.

    residual: bf16 [T, 4, H]; pre_mix: fp32 [T, 4]; norm_weight: bf16 [H]; out: bf16 [T, H] and
    aux: bf16 [T, H] (or None), written."""
    _mhc.mhc_collapse(residual, pre_mix, norm_weight, variant=variant, norm_eps=norm_eps, out=out, aux=aux)


@_op("post", "comb", "pre", "workspace", "mix")
def mhc_gates(residual: Tensor, fn: Tensor, scale: Tensor, base: Tensor, post: Tensor, comb: Tensor, pre: Tensor,
              workspace: Tensor, sqrsum: Optional[Tensor], mix: Optional[Tensor],
              fn_split: Optional[Tensor] = None, *, variant: int = V41, route: int = ROUTE_AUTO) -> None:
    """Projection + RMS + gates + Sinkhorn with the gate constants of `variant`.

    residual: bf16 [T, 4, H] (fn fp32 [24, 4H]) or the embedding [T, H] (fn_bcast [24, H]);
    scale: fp32 [3]; base: fp32 [24]; sqrsum: fp32 [T]; fn_split: bf16 [48, K] (mhc_fn_split);
    post: fp32 [T, 4], comb: fp32 [T, 4, 4], pre: fp32 [T, 4], mix: fp32 [T, 24] (or None),
    written; workspace: uint8 (Planner.mhc_gates)."""
    _mhc.mhc_gates(residual, fn, scale, base, gate=_mhc.gate_params(variant), route=route, sqrsum=sqrsum, post=post,
                   comb=comb, pre=pre, mix=mix, fn_split=fn_split, workspace=workspace)


@_op("post", "comb", "pre", "layer_input", "workspace", "residual_out", "aux", "mix")
def mhc_pre(residual: Tensor, fn: Tensor, scale: Tensor, base: Tensor, post: Tensor, comb: Tensor, pre: Tensor,
            layer_input: Tensor, workspace: Tensor, pre_mix: Optional[Tensor],
            norm_weight: Optional[Tensor], residual_out: Optional[Tensor], aux: Optional[Tensor],
            mix: Optional[Tensor], fn_split: Optional[Tensor] = None, *, variant: int = V41,
            norm_eps: Optional[float] = None, route: int = ROUTE_AUTO) -> None:
    """Gates of a residual plus the sublayer input (V4 mhc_pre, V4.1 mhc_pre_delayed).

    Inputs as mhc_gates, plus pre_mix: fp32 [T, 4] and norm_weight: bf16 [H]; written:
    post, comb, pre, layer_input: bf16 [T, H], residual_out: bf16 [T, 4, H] (required with the
    embedding [T, H] as residual, else None), aux: bf16 [T, H], mix: fp32 [T, 24] (or None);
    workspace: uint8 (Planner.mhc_pre)."""
    _mhc.mhc_pre(residual, fn, scale, base, variant=variant, norm_eps=norm_eps, pre_mix=pre_mix,
                 norm_weight=norm_weight, route=route, post=post, comb=comb, pre=pre, layer_input=layer_input,
                 residual_out=residual_out, aux=aux, mix=mix, fn_split=fn_split, workspace=workspace)


@_op("residual_out", "post_out", "comb_out", "pre_out", "layer_input", "workspace", "aux", "mix")
def mhc_seam(x: Tensor, residual: Tensor, post: Tensor, comb: Tensor, fn: Tensor, scale: Tensor, base: Tensor,
             residual_out: Tensor, post_out: Tensor, comb_out: Tensor, pre_out: Tensor, layer_input: Tensor,
             workspace: Tensor, pre_mix: Optional[Tensor], norm_weight: Optional[Tensor],
             aux: Optional[Tensor], mix: Optional[Tensor], fn_split: Optional[Tensor] = None, *,
             variant: int = V41, norm_eps: Optional[float] = None, route: int = ROUTE_AUTO) -> None:
    """Post of this sublayer fused with the pre of the next site.

    x: bf16 [T, H]; residual: bf16 [T, 4, H]; post: fp32 [T, 4]; comb: fp32 [T, 4, 4]; fn:
    fp32 [24, 4H]; others as mhc_pre. Written: residual_out bf16 [T, 4, H], the next site's
    post_out / comb_out / pre_out, layer_input, aux and mix (or None); workspace: uint8
    (Planner.mhc_seam)."""
    _mhc.mhc_seam(x, residual, post, comb, fn, scale, base, variant=variant, norm_eps=norm_eps, pre_mix=pre_mix,
                  norm_weight=norm_weight, route=route, residual_out=residual_out, post_out=post_out,
                  comb_out=comb_out, pre_out=pre_out, layer_input=layer_input, aux=aux, mix=mix, fn_split=fn_split,
                  workspace=workspace)


@_op("out")
def mhc_fn_bcast(fn: Tensor, out: Tensor) -> None:
    """out[m][h] = ((fn[m][h] + fn[m][H+h]) + fn[m][2H+h]) + fn[m][3H+h].

    fn: fp32 [24, 4H]; out: fp32 [24, H], written."""
    _mhc.mhc_fn_bcast(fn, out=out)


@_op("out")
def mhc_fn_split(fn: Tensor, out: Tensor, *, broadcast: bool = False) -> None:
    """fn's two-term bf16 split for the tensor-core route: rows 0..23 bf16(fn), 24..47 the rest.

    fn: fp32 [24, 4H] (or fn_bcast [24, H] with broadcast=True); out: bf16 [48, K], written."""
    _mhc.mhc_fn_split(fn, broadcast=broadcast, out=out)


# ---- compress ---------------------------------------------------------------------------------
@_op("latent", "ring")
def compress(kv_score: Tensor, gamma: Tensor, latent: Tensor, slot: Optional[Tensor],
             positions: Optional[Tensor], ring_slot: Optional[Tensor],
             query_start_loc: Optional[Tensor], ring: Optional[Tensor], *, ratio: int, eps: float,
             ring_cap: Optional[int] = None) -> None:
    """The V4.1 compressor: RMS-normalized bf16 latent rows from the fp32 GEMM output.

    kv_score: fp32 [T, 512 * ratio]; gamma: bf16 [512]; latent: bf16 [>= T, 512], written where a
    latent is due; ratio 1: slot int64 [T]; ratio 2: positions, ring_slot int64 [T],
    query_start_loc int32 [R + 1], ring fp32 [blocks * ring_cap, 1024] (updated)."""
    _cmp.compress(kv_score, gamma, latent, ratio=ratio, eps=eps, slot=slot, positions=positions,
                  ring_slot=ring_slot, query_start_loc=query_start_loc, ring=ring, ring_cap=ring_cap)


@_op("state", "cache")
def compress_v4(kv_score: Tensor, ape: Tensor, positions: Tensor, state_slot: Tensor, req_idx: Tensor,
                block_table: Tensor, gamma: Tensor, cos_sin_cache: Tensor, slot_mapping: Tensor, state: Tensor,
                cache: Tensor, *, ratio: int, eps: float, page_tokens: int, head_dim: int = 512,
                page_stride_bytes: Optional[int] = None) -> None:
    """The V4.0 compressor (ratio 4 or 128) fused with the cache writer: state rows saved, then
    one latent of N = head_dim dims per row closing a group of `ratio` positions, stored as a
    fp8_ds_mla record (N = 512) or an indexer state (N = 128).

    With c = 2 at ratio 4, 1 at ratio 128: kv_score: fp32 [T, 2*c*N]; ape: fp32 [ratio, c*N];
    positions, state_slot, slot_mapping: int64 [T]; req_idx: int32 [T]; block_table: int32
    [R, max_blocks]; gamma: bf16 [N]; cos_sin_cache: fp32 [max_position, 64]; state: fp32
    [blocks, B, 2*c*N], written; cache: uint8 pages (compressed cache at N = 512, indexer cache
    at N = 128), written."""
    _cmp.compress_v4(kv_score, ape, positions, state_slot, req_idx, block_table, gamma, cos_sin_cache, slot_mapping,
                     state, cache, ratio=ratio, eps=eps, page_tokens=page_tokens, head_dim=head_dim,
                     page_stride_bytes=page_stride_bytes)


@_op("o_heads")
def inv_rope(o_heads: Tensor, position_ids: Tensor, cos_sin_cache: Tensor, *, num_heads: Optional[int] = None) -> None:
    """Rotate dims 448..511 of the live heads back by each token's position, in place.

    o_heads: bf16 [T, Hpad, 512], written; position_ids: int64 [T]; cos_sin_cache: fp32
    [max_position, 64]."""
    _cmp.inv_rope(o_heads, position_ids, cos_sin_cache, num_heads=num_heads)


@_op("out")
def engram_lookup(values: Tensor, scales: Tensor, ids: Tensor, out: Tensor, *, head_start: int = 0,
                  vocab_start: int = 0, vocab_end: Optional[int] = None) -> None:
    """Engram rows ids[t, head_start + h] of this rank's table, dequantized to bf16 (zeros where
    the rank owns no row).

    values: uint8 [rows, D] (or pinned host memory); scales: uint8 [rows, D / 32]; ids: int32
    [T, n_cols]; out: bf16 [T, local_heads, D], written."""
    _cmp.engram_lookup(values, scales, ids, out, head_start=head_start, vocab_start=vocab_start,
                       vocab_end=vocab_end)


# ---- indexer ----------------------------------------------------------------------------------
@_op("q8", "w")
def indexer_q(q: Tensor, w_raw: Tensor, positions: Tensor, cos_sin: Tensor, q8: Tensor, w: Tensor, *,
              softmax_scale: float = 0.0, head_scale: float = 0.0) -> None:
    """Index queries: RoPE, e4m3 codes with a power-of-two scale, the scale folded into w.

    q: bf16 [T, H, 128]; w_raw: bf16 [T, H]; positions: int64 [T]; cos_sin: fp32
    [max_position, 64]; q8: uint8 [T, H, 128] and w: fp32 [T, H], written."""
    _ixr.indexer_q(q, w_raw, positions, cos_sin, q8, w, softmax_scale=softmax_scale, head_scale=head_scale)


@_op("cache")
def indexer_k_store(k_pre: Tensor, gamma: Tensor, positions: Tensor, slot_mapping: Tensor, cos_sin: Tensor,
                    cache: Tensor, *, page_tokens: int, ratio: int, eps: float,
                    page_stride_bytes: Optional[int] = None) -> None:
    """Index keys: RMSNorm, RoPE at the group's first position, e4m3, stored into the paged
    indexer cache for the rows that close their group.

    k_pre: bf16 [T, 128]; gamma: bf16 [128]; positions, slot_mapping: int64 [T]; cos_sin: fp32
    [max_position, 64]; cache: uint8 pages (P * 132 bytes and more a page), written."""
    _ixr.indexer_k_store(k_pre, gamma, positions, slot_mapping, cos_sin, cache, page_tokens=page_tokens,
                         ratio=ratio, eps=eps, page_stride_bytes=page_stride_bytes)


@_op("topk", "cand", "workspace")
def indexer_topk(q8: Tensor, w: Tensor, positions: Tensor, row_req: Tensor, block_table: Tensor, cache: Tensor,
                 topk: Tensor, workspace: Tensor, row_valid: Optional[Tensor], cand: Optional[Tensor], *,
                 ratio: int, page_tokens: int, max_keys: int, candidate_mode: int = 0, num_splits: int = 0,
                 page_stride_bytes: Optional[int] = None) -> None:
    """Fused indexer logits + top-k: each row's best topk.shape[1] request-local compressed columns,
    ascending, -1 padded; candidate_mode 1 also writes cand (the best blocks of 8 columns),
    mode 2 scores only the blocks cand lists.

    q8: uint8 [T, H, 128]; w: fp32 [T, H]; positions: int64 [T]; row_req: int32 [T]; block_table:
    int32 [R, width]; cache: uint8 indexer pages; topk: int32 [T, K], written; workspace: uint8
    (Planner.indexer_topk); row_valid: uint8/bool [T]; cand: int32 [T, C]."""
    _ixr.indexer_topk(q8, w, positions, row_req, block_table, cache, topk, ratio=ratio, page_tokens=page_tokens,
                      max_keys=max_keys, row_valid=row_valid, cand=cand, candidate_mode=candidate_mode,
                      num_splits=num_splits, page_stride_bytes=page_stride_bytes, workspace=workspace)


@_op("out")
def indexer_logits(q8: Tensor, w: Tensor, positions: Tensor, row_req: Tensor, block_table: Tensor, cache: Tensor,
                   out: Tensor, row_valid: Optional[Tensor] = None, *, ratio: int, page_tokens: int, max_keys: int,
                   page_stride_bytes: Optional[int] = None) -> None:
    """The logits indexer_topk selects from, materialized: out fp32 [T, N], -inf past each row's
    columns. Inputs as indexer_topk."""
    _ixr.indexer_logits(q8, w, positions, row_req, block_table, cache, out, ratio=ratio, page_tokens=page_tokens,
                        max_keys=max_keys, row_valid=row_valid, page_stride_bytes=page_stride_bytes)
