"""The compress family (the module is not named `compress`, the operator is): the V4.1 compressor,
inverse RoPE, Engram lookup (include/dsv4/compress.h).

bf16 tensors are torch.bfloat16 (or numpy uint16 bit patterns); the formulas, rounding points and
errors are the header's. CUDA tensors run the kernels on torch's current stream, host tensors the
C references.
"""
from . import _structs as S
from ._ops import addr, arg, contiguous, is_torch, op, shape, side, struct, writable
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
