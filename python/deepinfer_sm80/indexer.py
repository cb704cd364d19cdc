"""indexer family: the lightning indexer's query preparation and key store (include/dsv4/indexer.h).

The indexer cache is a uint8 tensor of pages, [num_pages, ...] with a page's bytes contiguous
(vLLM's [num_pages, P * 132] padded to a multiple of 576 bytes, for example); a page of P states
holds the P * 128 code bytes, then the P fp32 scales. Formulas and errors are the header's.
"""
from . import _structs as S
from ._ops import addr, arg, contiguous, op, shape, side, struct, writable
from .kvcache import cache_geometry
from .tensors import strides

DIM = S.DSV4_INDEXER_HEAD_DIM
STATE = S.DSV4_INDEXER_STATE_BYTES


def indexer_q(q, w_raw, positions, cos_sin, q8, w, *, softmax_scale=0.0, head_scale=0.0, workspace=None):
    """Index queries: RoPE on dims 64..127 at positions[t], e4m3 codes with a power-of-two scale
    per (token, head), and the head weight with that scale folded in:
    w = ((w_raw * scale) * softmax_scale) * head_scale.

    q: bf16 [T, H, 128] (token/head strides multiples of 8); w_raw: bf16 [T, H]; positions:
    int64 [T]; cos_sin: fp32 [max_position, 64] contiguous; q8: uint8 [T, H, 128] contiguous,
    written; w: fp32 [T, H] contiguous, written. softmax_scale 0 means 128^-0.5, head_scale 0
    means H^-0.5. Returns (q8, w)."""
    o = "indexer_q"
    arg(o, "q", q, "bf16", 3, (None, None, DIM))
    T, H = shape(q)[0], shape(q)[1]
    arg(o, "w_raw", w_raw, "bf16", 2, (T, H))
    arg(o, "positions", positions, "i64", 1, (T,))
    arg(o, "cos_sin", cos_sin, "f32", 2, (None, 64))
    arg(o, "q8", q8, "u8", 3, (T, H, DIM))
    arg(o, "w", w, "f32", 2, (T, H))
    for name, t in (("cos_sin", cos_sin), ("q8", q8), ("w", w)):
        contiguous(o, name, t)
    writable(o, "q8", q8), writable(o, "w", w)
    anchor = side(o, q=q, w_raw=w_raw, positions=positions, cos_sin=cos_sin, q8=q8, w=w)
    st = strides(q)
    desc = struct("dsv4_indexer_q_desc_t", num_tokens=T, num_heads=H, q_stride_token=st[0], q_stride_head=st[1],
                  w_stride_token=strides(w_raw)[0], max_position=shape(cos_sin)[0], softmax_scale=softmax_scale,
                  head_scale=head_scale)
    args = struct("dsv4_indexer_q_args_t", q=addr(q), w_raw=addr(w_raw), positions=addr(positions),
                  cos_sin=addr(cos_sin), q8=addr(q8), w=addr(w))
    op(o)(desc, args, anchor, workspace)
    return q8, w


def indexer_k_store(k_pre, gamma, positions, slot_mapping, cos_sin, cache, *, page_tokens, ratio, eps,
                    page_stride_bytes=None, workspace=None):
    """Index keys: RMSNorm (weight gamma), RoPE at the group's first position (pos / ratio) * ratio,
    e4m3 with a power-of-two scale, stored at slot_mapping[t] for the rows that close their group
    ((positions[t] + 1) % ratio == 0) and name a slot inside the cache; other rows write nothing.

    k_pre: bf16 [T, 128] (row stride a multiple of 8); gamma: bf16 [128]; positions,
    slot_mapping: int64 [T]; cos_sin: fp32 [max_position, 64] contiguous; cache: uint8 pages
    (page_stride_bytes >= page_tokens * 132, a multiple of 16), written in place. Returns cache."""
    o = "indexer_k_store"
    arg(o, "k_pre", k_pre, "bf16", 2, (None, DIM))
    T = shape(k_pre)[0]
    arg(o, "gamma", gamma, "bf16", 1, (DIM,))
    arg(o, "positions", positions, "i64", 1, (T,))
    arg(o, "slot_mapping", slot_mapping, "i64", 1, (T,))
    arg(o, "cos_sin", cos_sin, "f32", 2, (None, 64))
    contiguous(o, "cos_sin", cos_sin)
    writable(o, "cache", cache)
    stride, pages = cache_geometry(o, "cache", cache, page_tokens, page_stride_bytes, record=STATE)
    anchor = side(o, k_pre=k_pre, gamma=gamma, positions=positions, slot_mapping=slot_mapping, cos_sin=cos_sin,
                  cache=cache)
    desc = struct("dsv4_indexer_k_store_desc_t", num_tokens=T, k_stride_row=strides(k_pre)[0], ratio=ratio,
                  max_position=shape(cos_sin)[0], page_tokens=page_tokens, page_stride_bytes=stride,
                  num_pages=pages, eps=eps)
    args = struct("dsv4_indexer_k_store_args_t", k_pre=addr(k_pre), gamma=addr(gamma), positions=addr(positions),
                  slot_mapping=addr(slot_mapping), cos_sin=addr(cos_sin), cache=addr(cache))
    op(o)(desc, args, anchor, workspace)
    return cache


def _score_fields(o, q8, w, positions, row_req, block_table, cache, page_tokens, page_stride_bytes, ratio, max_keys):
    """Checks and descriptor fields shared by indexer_topk and indexer_logits."""
    arg(o, "q8", q8, "u8", 3, (None, None, DIM))
    T, H = shape(q8)[0], shape(q8)[1]
    arg(o, "w", w, "f32", 2, (T, H))
    arg(o, "positions", positions, "i64", 1, (T,))
    arg(o, "row_req", row_req, "i32", 1, (T,))
    arg(o, "block_table", block_table, "i32", 2)
    contiguous(o, "q8", q8), contiguous(o, "w", w)
    stride, pages = cache_geometry(o, "cache", cache, page_tokens, page_stride_bytes, record=STATE)
    return dict(num_rows=T, num_heads=H, ratio=ratio, num_reqs=shape(block_table)[0],
                block_table_width=shape(block_table)[1], block_table_stride=strides(block_table)[0],
                page_tokens=page_tokens, page_stride_bytes=stride, num_pages=pages, max_keys=max_keys)


def _score_args(q8, w, positions, row_req, row_valid, block_table, cache):
    return dict(q8=addr(q8), w=addr(w), positions=addr(positions), row_req=addr(row_req), row_valid=addr(row_valid),
                block_table=addr(block_table), cache=addr(cache))


def indexer_topk(q8, w, positions, row_req, block_table, cache, topk, *, ratio, page_tokens, max_keys,
                 row_valid=None, cand=None, candidate_mode=0, num_splits=0, page_stride_bytes=None, workspace=None):
    """Fused indexer logits + top-k: for each row (query token) t of request row_req[t], the
    topk.shape[1] request-local compressed columns j < n_t = (positions[t] + 1) // ratio with the
    largest logits sk_j * sum_h w[t, h] * relu(q8[t, h] . k_j), written ascending, then -1 (ties
    to the lower j; NaN ranks first; rows with n_t <= 0 or row_valid 0 all -1). The logits never
    reach memory.

    q8: uint8 e4m3 [T, H, 128] and w: fp32 [T, H] (indexer_q's outputs); positions: int64 [T];
    row_req: int32 [T]; block_table: int32 [R, width]; cache: the uint8 indexer cache pages;
    topk: int32 [T, K] (row stride any), written; row_valid: uint8/bool [T] or None; cand: int32
    [T, C] candidate blocks of 8 columns, written (candidate_mode 1) or read (2, the consumer
    layers: only those blocks are scored); max_keys: the largest n_t (e.g. max_model_len //
    ratio), it sizes the workspace; num_splits 0 = chosen by the library. Returns topk."""
    o = "indexer_topk"
    fields = _score_fields(o, q8, w, positions, row_req, block_table, cache, page_tokens, page_stride_bytes, ratio,
                           max_keys)
    T = fields["num_rows"]
    arg(o, "topk", topk, "i32", 2)
    arg(o, "row_valid", row_valid, "mask", 1, (T,), optional=True)
    arg(o, "cand", cand, "i32", 2, optional=candidate_mode == 0)
    writable(o, "topk", topk)
    if shape(topk)[0] < T:
        raise ValueError(f"{o}: topk has {shape(topk)[0]} rows for {T} query rows")
    if cand is not None and shape(cand)[0] < T:
        raise ValueError(f"{o}: cand has {shape(cand)[0]} rows for {T} query rows")
    anchor = side(o, q8=q8, w=w, positions=positions, row_req=row_req, row_valid=row_valid, block_table=block_table,
                  cache=cache, topk=topk, cand=cand)
    fields.update(topk=shape(topk)[1], topk_stride=strides(topk)[0], candidate_mode=candidate_mode,
                  num_splits=num_splits)
    if cand is not None:
        writable(o, "cand", cand)
        fields.update(candidate_count=shape(cand)[1], candidate_block=8, candidate_stride=strides(cand)[0])
    desc = struct("dsv4_indexer_topk_desc_t", **fields)
    args = struct("dsv4_indexer_topk_args_t", topk=addr(topk), cand=addr(cand),
                  **_score_args(q8, w, positions, row_req, row_valid, block_table, cache))
    op(o)(desc, args, anchor, workspace)
    return topk


def indexer_logits(q8, w, positions, row_req, block_table, cache, out, *, ratio, page_tokens, max_keys,
                   row_valid=None, page_stride_bytes=None):
    """The logits indexer_topk selects from, materialized (for tests and debugging): out[t, j] for
    j < min(n_t, out.shape[1]), -inf beyond. Inputs as indexer_topk; out: fp32 [T, N] (row
    stride a multiple of 4), written. Returns out."""
    o = "indexer_logits"
    fields = _score_fields(o, q8, w, positions, row_req, block_table, cache, page_tokens, page_stride_bytes, ratio,
                           max_keys)
    arg(o, "out", out, "f32", 2)
    arg(o, "row_valid", row_valid, "mask", 1, (fields["num_rows"],), optional=True)
    writable(o, "out", out)
    if shape(out)[0] < fields["num_rows"]:
        raise ValueError(f"{o}: out has {shape(out)[0]} rows for {fields['num_rows']} query rows")
    anchor = side(o, q8=q8, w=w, positions=positions, row_req=row_req, row_valid=row_valid, block_table=block_table,
                  cache=cache, out=out)
    fields.update(out_cols=shape(out)[1], out_stride=strides(out)[0])
    desc = struct("dsv4_indexer_logits_desc_t", **fields)
    args = struct("dsv4_indexer_logits_args_t", out=addr(out),
                  **_score_args(q8, w, positions, row_req, row_valid, block_table, cache))
    op(o)(desc, args, anchor)
    return out
