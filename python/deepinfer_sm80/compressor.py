"""The compress family (the module is not named `compress`, the operator is): the V4.1 compressor,
the V4.0 compressor fused with the compressed- or indexer-cache writer, inverse RoPE, Engram lookup
(include/dsv4/compress.h).

bf16 tensors are torch.bfloat16 (or numpy uint16 bit patterns); the formulas, rounding points and
errors are the header's. CUDA tensors run the kernels on torch's current stream, host tensors the
C references.
"""
from . import _structs as S
from ._ops import addr, arg, contiguous, is_torch, op, shape, side, struct, writable
from .kvcache import cache_geometry
from .tensors import is_cuda, strides

DIM = S.DSV4_COMPRESS_DIM


def compress(kv_score, gamma, latent, *, ratio, eps, slot=None, positions=None, ring_slot=None,
             query_start_loc=None, ring=None, ring_cap=None, workspace=None):
    """The V4.1 compressor: fp32 GEMM output -> RMS-normalized bf16 latent rows.

    ratio 1: latent[t] = norm512(kv_score[t, :512]) for every t with slot[t] >= 0.
    ratio 2: a row at an odd position pools itself with the previous position (the previous
    row, or at a request's first row the request's ring block) by a per-dim softmax of the
    scores in columns 512..1023, then norm512; then each request stores the last
    min(rows, ring_cap) rows of its chunk into ring rows ring_slot[t].

    kv_score: fp32 [T, 512 * ratio] (row stride a multiple of 16); gamma: bf16 [512];
    latent: bf16 [>= T, 512] contiguous, written where a latent is due (other rows untouched);
    ratio 1: slot int64 [T]; ratio 2: positions, ring_slot int64 [T], query_start_loc int32
    [R + 1], ring fp32 [blocks * ring_cap, 1024] (updated in place), ring_cap rows per block.
    Returns latent."""
    o = "compress"
    if ratio not in (1, 2):
        raise ValueError(f"{o}: ratio {ratio} must be 1 or 2")
    arg(o, "kv_score", kv_score, "f32", 2, (None, DIM * ratio))
    arg(o, "gamma", gamma, "bf16", 1, (DIM,))
    arg(o, "latent", latent, "bf16", 2, (None, DIM))
    contiguous(o, "latent", latent)
    writable(o, "latent", latent)
    T = shape(kv_score)[0]
    if shape(latent)[0] < T:
        raise ValueError(f"{o}: latent has {shape(latent)[0]} rows for {T} kv_score rows")
    fields = dict(num_tokens=T, ratio=ratio, kv_stride=strides(kv_score)[0], eps=eps)
    if ratio == 1:
        arg(o, "slot", slot, "i64", 1, (T,))
        tensors = dict(kv_score=kv_score, gamma=gamma, slot=slot, latent=latent)
    else:
        arg(o, "positions", positions, "i64", 1, (T,))
        arg(o, "ring_slot", ring_slot, "i64", 1, (T,))
        arg(o, "query_start_loc", query_start_loc, "i32", 1)
        arg(o, "ring", ring, "f32", 2, (None, 2 * DIM))
        writable(o, "ring", ring)
        if ring_cap is None:
            raise ValueError(f"{o}: ring_cap is required at ratio 2")
        fields.update(num_reqs=shape(query_start_loc)[0] - 1, ring_cap=ring_cap, ring_rows=shape(ring)[0],
                      ring_stride=strides(ring)[0])
        tensors = dict(kv_score=kv_score, gamma=gamma, positions=positions, ring_slot=ring_slot,
                       query_start_loc=query_start_loc, ring=ring, latent=latent)
    anchor = side(o, **tensors)
    desc = struct("dsv4_compress_desc_t", **fields)
    args = struct("dsv4_compress_args_t", **{k: addr(v) for k, v in tensors.items()})
    op(o)(desc, args, anchor, workspace)
    return latent


def compress_v4(kv_score, ape, positions, state_slot, req_idx, block_table, gamma, cos_sin_cache, slot_mapping,
                state, cache, *, ratio, eps, page_tokens, head_dim=512, page_stride_bytes=None, workspace=None):
    """The V4.0 compressor (ratio 4 with overlapping windows, ratio 128), fused with the cache
    writer: save each row's state, then pool, normalize, rotate and store one latent of N =
    head_dim dims per row that closes a group of `ratio` positions: N = 512 (the attention
    compressor) as a fp8_ds_mla record, N = 128 (the lightning indexer's own compressor) as a
    132-byte indexer state.

    With c = 2 at ratio 4 and 1 at ratio 128: kv_score: fp32 [T, 2*c*N] (kv, then score; row
    stride a multiple of 4); ape: fp32 [ratio, c*N] contiguous; positions, state_slot,
    slot_mapping: int64 [T] (-1: not saved / nothing stored); req_idx: int32 [T]; block_table:
    int32 [R, max_blocks], the state blocks of each request's positions; gamma: bf16 [N];
    cos_sin_cache: fp32 [max_position, 64] contiguous; state: fp32 [blocks, B, 2*c*N] (B rows a
    block, any block/row strides that are multiples of 4), rows of this call written in place;
    cache: uint8 pages of P = page_tokens slots, N = 512 the compressed cache (as kv_insert), N =
    128 the indexer cache (as indexer_k_store), only the written records or states change.
    Returns (state, cache)."""
    o = "compress_v4"
    if ratio not in (4, 128):
        raise ValueError(f"{o}: ratio {ratio} must be 4 or 128")
    if head_dim not in (128, DIM):
        raise ValueError(f"{o}: head_dim {head_dim} must be 128 or {DIM}")
    width = (2 if ratio == 4 else 1) * head_dim
    arg(o, "kv_score", kv_score, "f32", 2, (None, 2 * width))
    T = shape(kv_score)[0]
    arg(o, "ape", ape, "f32", 2, (ratio, width))
    contiguous(o, "ape", ape)
    for name, x in (("positions", positions), ("state_slot", state_slot), ("slot_mapping", slot_mapping)):
        arg(o, name, x, "i64", 1, (T,))
    arg(o, "req_idx", req_idx, "i32", 1, (T,))
    arg(o, "block_table", block_table, "i32", 2)
    arg(o, "gamma", gamma, "bf16", 1, (head_dim,))
    arg(o, "cos_sin_cache", cos_sin_cache, "f32", 2, (None, 64))
    contiguous(o, "cos_sin_cache", cos_sin_cache)
    arg(o, "state", state, "f32", 3, (None, None, 2 * width))
    writable(o, "state", state), writable(o, "cache", cache)
    record = S.DSV4_KV_RECORD_BYTES if head_dim == DIM else S.DSV4_INDEXER_STATE_BYTES
    stride, pages = cache_geometry(o, "cache", cache, page_tokens, page_stride_bytes, record=record)
    tensors = dict(kv_score=kv_score, ape=ape, positions=positions, state_slot=state_slot, req_idx=req_idx,
                   block_table=block_table, gamma=gamma, cos_sin_cache=cos_sin_cache, slot_mapping=slot_mapping,
                   state=state, cache=cache)
    anchor = side(o, **tensors)
    st_state, bt_dims = strides(state), shape(block_table)
    desc = struct(
        "dsv4_compress_v4_desc_t", num_tokens=T, ratio=ratio, head_dim=head_dim, kv_stride=strides(kv_score)[0],
        state_block_rows=shape(state)[1], state_blocks=shape(state)[0], state_stride_block=st_state[0],
        state_stride_row=st_state[1], num_reqs=bt_dims[0], max_blocks=bt_dims[1],
        block_table_stride=strides(block_table)[0], page_tokens=page_tokens, page_stride_bytes=stride,
        num_pages=pages, max_position=shape(cos_sin_cache)[0], eps=eps)
    args = struct("dsv4_compress_v4_args_t", **{k: addr(v) for k, v in tensors.items()})
    op(o)(desc, args, anchor, workspace)
    return state, cache


def inv_rope(o_heads, position_ids, cos_sin_cache, *, num_heads=None, workspace=None):
    """Rotate dims 448..511 of every live head back by each token's position, in place.

    o_heads: bf16 [T, Hpad, 512] (any token/head strides, multiples of 8), heads < num_heads
    (default Hpad) rewritten; position_ids: int64 [T]; cos_sin_cache: fp32 [max_position, 64]
    contiguous. Returns o_heads."""
    o = "inv_rope"
    arg(o, "o", o_heads, "bf16", 3, (None, None, S.DSV4_INV_ROPE_HEAD_DIM))
    arg(o, "position_ids", position_ids, "i64", 1, (shape(o_heads)[0],))
    arg(o, "cos_sin_cache", cos_sin_cache, "f32", 2, (None, 64))
    contiguous(o, "cos_sin_cache", cos_sin_cache)
    writable(o, "o", o_heads)
    T, Hpad = shape(o_heads)[0], shape(o_heads)[1]
    anchor = side(o, o=o_heads, position_ids=position_ids, cos_sin_cache=cos_sin_cache)
    st = strides(o_heads)
    desc = struct("dsv4_inv_rope_desc_t", num_tokens=T, num_heads=Hpad if num_heads is None else num_heads,
                  num_heads_padded=Hpad, o_stride_token=st[0], o_stride_head=st[1],
                  max_position=shape(cos_sin_cache)[0])
    args = struct("dsv4_inv_rope_args_t", o=addr(o_heads), position_ids=addr(position_ids),
                  cos_sin_cache=addr(cos_sin_cache))
    op(o)(desc, args, anchor, workspace)
    return o_heads


def _table_side(o, ids, values, scales):
    """Where the lookup runs. The table may be pinned host memory while ids and out are on a
    GPU: the kernel then reads it over the bus (CUDA's unified addressing gives a pinned
    tensor's host address to the device as is)."""
    if is_cuda(ids) and is_torch(values) and not is_cuda(values):
        for name, t in (("values", values), ("scales", scales)):
            if is_cuda(t) or not t.is_pinned():
                raise ValueError(f"{o}: {name} must be a CUDA tensor or pinned host memory when ids is on a GPU")
        return True
    return False


def engram_lookup(values, scales, ids, out, *, head_start=0, vocab_start=0, vocab_end=None, workspace=None):
    """Gather Engram table rows and dequantize them (e4m3 codes times UE8M0 per-32 scales) to bf16.

    values: uint8 [vocab_end - vocab_start, D] (row stride a multiple of 16); scales: uint8
    [rows, D / 32]; ids: int32 [T, n_cols] absolute row ids; out: bf16 [T, local_heads, D]
    contiguous, every element written (zeros where this rank owns no row: column padding,
    ids outside [vocab_start, vocab_end)). values and scales may be pinned host tensors while
    ids and out are on the GPU. Returns out."""
    o = "engram_lookup"
    arg(o, "values", values, "u8", 2)
    arg(o, "scales", scales, "u8", 2)
    arg(o, "ids", ids, "i32", 2, inner_contiguous=False)
    arg(o, "out", out, "bf16", 3)
    contiguous(o, "out", out)
    writable(o, "out", out)
    rows, D = shape(values)
    if shape(scales)[0] < rows or shape(scales)[1] * S.DSV4_ENGRAM_BLOCK < D:
        raise ValueError(f"{o}: scales has shape {shape(scales)}, values {shape(values)} (one scale per 32 dims)")
    if vocab_end is None:
        vocab_end = vocab_start + rows
    elif vocab_end - vocab_start > rows:
        raise ValueError(f"{o}: vocab [{vocab_start}, {vocab_end}) spans more than the {rows} rows of values")
    T, n_cols = shape(ids)
    if shape(out)[0] != T or shape(out)[2] != D:
        raise ValueError(f"{o}: out has shape {shape(out)}, expected [{T}, local_heads, {D}]")
    if _table_side(o, ids, values, scales):
        anchor = side(o, ids=ids, out=out)
    else:
        anchor = side(o, values=values, scales=scales, ids=ids, out=out)
    desc = struct("dsv4_engram_lookup_desc_t", num_tokens=T, n_cols=n_cols, head_start=head_start,
                  local_heads=shape(out)[1], head_dim=D, ids_stride_token=strides(ids)[0],
                  ids_stride_head=strides(ids)[1], vocab_start=vocab_start, vocab_end=vocab_end,
                  values_stride_bytes=strides(values)[0], scales_stride_bytes=strides(scales)[0])
    args = struct("dsv4_engram_lookup_args_t", values=addr(values), scales=addr(scales), ids=addr(ids), out=addr(out))
    op(o)(desc, args, anchor, workspace)
    return out
