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
