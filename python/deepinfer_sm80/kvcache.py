"""kvcache family: fp8_ds_mla insert, fused SWA writer, dequantize + gather (include/dsv4/kvcache.h).

A cache is a uint8 tensor whose first dimension is the page: [num_pages, ...] with the bytes of a
page contiguous (for example vLLM's [num_pages, P * 584] or a padded [num_pages, page_stride]);
page_stride_bytes is its stride(0) and num_pages its shape[0]. A flat 1-D byte tensor is accepted
with an explicit page_stride_bytes (num_pages = size // page_stride_bytes).
"""
from . import _structs as S
from ._ops import addr, arg, contiguous, op, shape, side, struct, writable
from .tensors import strides

RECORD = S.DSV4_KV_RECORD_BYTES
DIM = S.DSV4_KV_DIM


def cache_geometry(opname, name, cache, page_tokens, page_stride_bytes=None, record=RECORD):
    """(page_stride_bytes, num_pages) of a cache tensor; checks the tensor holds P*record bytes a
    page (record: 584 for the fp8_ds_mla caches, 132 for the indexer cache)."""
    arg(opname, name, cache, "u8", ndim=None)
    if page_tokens is None:
        raise ValueError(f"{opname}: page_tokens of {name} is required")
    dims, st = shape(cache), strides(cache)
    if len(dims) == 1:
        if page_stride_bytes is None:
            raise ValueError(f"{opname}: {name} is 1-D: pass page_stride_bytes")
        if page_stride_bytes <= 0:
            raise ValueError(f"{opname}: page_stride_bytes {page_stride_bytes} must be positive")
        return int(page_stride_bytes), dims[0] // int(page_stride_bytes)
    page = 1
    for i in range(len(dims) - 1, 0, -1):
        if dims[i] > 1 and st[i] != page:
            raise ValueError(f"{opname}: the bytes of one page of {name} must be contiguous (shape {dims}, strides {st})")
        page *= dims[i]
    if page_stride_bytes is not None and page_stride_bytes != st[0]:
        raise ValueError(f"{opname}: page_stride_bytes {page_stride_bytes} differs from {name}.stride(0) = {st[0]}")
    if page_tokens > 0 and page < page_tokens * record:
        raise ValueError(
            f"{opname}: a page of {name} holds {page} bytes, less than page_tokens*{record} = {page_tokens * record}"
        )
    return st[0] if dims[0] > 1 else max(st[0], page), dims[0]


def kv_insert(k, slot_mapping, cache, *, page_tokens, page_stride_bytes=None, workspace=None):
    """Quantize bf16 rows k[t, :512] and insert them at slot_mapping[t] (negative: skipped).

    k: bf16 [rows >= len(slot_mapping), 512]; slot_mapping: int64 [T]; cache: uint8 pages
    (written in place, and returned)."""
    o = "kv_insert"
    arg(o, "k", k, "bf16", 2, (None, DIM))
    arg(o, "slot_mapping", slot_mapping, "i64", 1)
    writable(o, "cache", cache)
    stride, pages = cache_geometry(o, "cache", cache, page_tokens, page_stride_bytes)
    T = shape(slot_mapping)[0]
    if shape(k)[0] < T:
        raise ValueError(f"{o}: k has {shape(k)[0]} rows, fewer than the {T} entries of slot_mapping")
    anchor = side(o, k=k, slot_mapping=slot_mapping, cache=cache)
    desc = struct("dsv4_kv_insert_desc_t", num_tokens=T, k_stride_row=strides(k)[0], page_tokens=page_tokens,
                  page_stride_bytes=stride, num_pages=pages)
    args = struct("dsv4_kv_insert_args_t", k=addr(k), slot_mapping=addr(slot_mapping), cache=addr(cache))
    op(o)(desc, args, anchor, workspace)
    return cache


def kv_rope_insert(latent, positions, slot_mapping, cos_sin_cache, cache, *, page_tokens, ratio,
                   page_stride_bytes=None, workspace=None):
    """Compressed-cache writer: token t with (positions[t] + 1) % ratio == 0 and a valid
    slot_mapping[t] writes the record of its latent row with dims 448..511 rotated at the
    group's first position (include/dsv4/kvcache.h); other tokens write nothing.

    latent: bf16 [rows >= T, 512]; positions, slot_mapping: int64 [T]; cos_sin_cache: fp32
    [max_position, 64]; cache: uint8 pages (written in place, and returned)."""
    o = "kv_rope_insert"
    arg(o, "latent", latent, "bf16", 2, (None, DIM))
    arg(o, "positions", positions, "i64", 1)
    arg(o, "slot_mapping", slot_mapping, "i64", 1)
    arg(o, "cos_sin_cache", cos_sin_cache, "f32", 2, (None, 64))
    contiguous(o, "cos_sin_cache", cos_sin_cache)
    writable(o, "cache", cache)
    stride, pages = cache_geometry(o, "cache", cache, page_tokens, page_stride_bytes)
    T = shape(slot_mapping)[0]
    if shape(positions)[0] != T:
        raise ValueError(f"{o}: positions has {shape(positions)[0]} entries, slot_mapping {T}")
    if shape(latent)[0] < T:
        raise ValueError(f"{o}: latent has {shape(latent)[0]} rows, fewer than the {T} entries of slot_mapping")
    anchor = side(o, latent=latent, positions=positions, slot_mapping=slot_mapping, cos_sin_cache=cos_sin_cache,
                  cache=cache)
    desc = struct("dsv4_kv_rope_insert_desc_t", num_tokens=T, latent_stride_row=strides(latent)[0],
                  page_tokens=page_tokens, page_stride_bytes=stride, num_pages=pages, ratio=ratio,
                  max_position=shape(cos_sin_cache)[0])
    args = struct("dsv4_kv_rope_insert_args_t", latent=addr(latent), positions=addr(positions),
                  slot_mapping=addr(slot_mapping), cos_sin_cache=addr(cos_sin_cache), cache=addr(cache))
    op(o)(desc, args, anchor, workspace)
    return cache


def kv_swa_write(q, kv, position_ids, slot_mapping, cos_sin_cache, cache, *, page_tokens, eps=None, num_heads=None,
                 page_stride_bytes=None, workspace=None, skip_q_norm=False):
    """Fused SWA writer: q RMS norm + q RoPE in place, kv RoPE + quantize + insert.

    q: bf16 [N, Hpad, 512] (heads >= num_heads are zeroed); kv: bf16 [>= N_insert, 512];
    position_ids: int64 [N]; slot_mapping: int64 [N_insert <= N]; cos_sin_cache: fp32
    [max_position, 64]; cache: uint8 pages. Returns (q, cache), both modified in place.
    skip_q_norm=True (DeepSeek-V4.1): q is only rotated (dims 448..511; dims < 448 are not
    written) and eps is optional (unused, 0 when omitted)."""
    o = "kv_swa_write"
    if eps is None:
        if not skip_q_norm:
            raise ValueError(f"{o}: eps is required unless skip_q_norm=True")
        eps = 0.0
    arg(o, "q", q, "bf16", 3, (None, None, DIM))
    arg(o, "kv", kv, "bf16", 2, (None, DIM))
    arg(o, "position_ids", position_ids, "i64", 1)
    arg(o, "slot_mapping", slot_mapping, "i64", 1)
    arg(o, "cos_sin_cache", cos_sin_cache, "f32", 2, (None, 64))
    contiguous(o, "cos_sin_cache", cos_sin_cache)
    writable(o, "q", q), writable(o, "cache", cache)
    stride, pages = cache_geometry(o, "cache", cache, page_tokens, page_stride_bytes)
    N, Hpad = shape(q)[0], shape(q)[1]
    n_ins = shape(slot_mapping)[0]
    if shape(position_ids)[0] != N:
        raise ValueError(f"{o}: position_ids has {shape(position_ids)[0]} entries, q has {N} tokens")
    if shape(kv)[0] < n_ins:
        raise ValueError(f"{o}: kv has {shape(kv)[0]} rows, fewer than the {n_ins} entries of slot_mapping")
    anchor = side(o, q=q, kv=kv, position_ids=position_ids, slot_mapping=slot_mapping,
                  cos_sin_cache=cos_sin_cache, cache=cache)
    desc = struct(
        "dsv4_kv_swa_write_desc_t", num_tokens=N, num_insert=n_ins, num_heads=Hpad if num_heads is None else num_heads,
        num_heads_padded=Hpad, q_stride_token=strides(q)[0], q_stride_head=strides(q)[1], kv_stride_row=strides(kv)[0],
        max_position=shape(cos_sin_cache)[0], page_tokens=page_tokens, page_stride_bytes=stride, num_pages=pages,
        eps=eps, skip_q_norm=1 if skip_q_norm else 0)
    args = struct("dsv4_kv_swa_write_args_t", q=addr(q), kv=addr(kv), position_ids=addr(position_ids),
                  slot_mapping=addr(slot_mapping), cos_sin_cache=addr(cos_sin_cache), cache=addr(cache))
    op(o)(desc, args, anchor, workspace)
    return q, cache


def kv_gather(cache, seq_lens, block_table, out, *, page_tokens, gather_lens=None, offset=0, max_gather_len=0,
              page_stride_bytes=None, workspace=None):
    """Dequantize each request's last G = gather_lens[b] (or seq_lens[b]) positions into
    out[b, offset : offset + G, :] (bf16). Other rows of out are left as they were.

    cache: uint8 pages; seq_lens, gather_lens: int32 [R]; block_table: int32 [R, width];
    out: bf16 [>= R, M, 512] (any request/row strides). Returns out."""
    o = "kv_gather"
    stride, pages = cache_geometry(o, "cache", cache, page_tokens, page_stride_bytes)
    arg(o, "seq_lens", seq_lens, "i32", 1)
    R = shape(seq_lens)[0]
    arg(o, "gather_lens", gather_lens, "i32", 1, (R,), optional=True)
    arg(o, "block_table", block_table, "i32", 2)
    arg(o, "out", out, "bf16", 3, (None, None, DIM))
    writable(o, "out", out)
    if shape(block_table)[0] < R:
        raise ValueError(f"{o}: block_table has {shape(block_table)[0]} rows for {R} requests")
    if shape(out)[0] < R:
        raise ValueError(f"{o}: out has {shape(out)[0]} request slabs for {R} requests")
    anchor = side(o, cache=cache, seq_lens=seq_lens, gather_lens=gather_lens, block_table=block_table, out=out)
    desc = struct(
        "dsv4_kv_gather_desc_t", num_reqs=R, block_table_width=shape(block_table)[1],
        block_table_stride=strides(block_table)[0], out_rows=shape(out)[1], out_stride_req=strides(out)[0],
        out_stride_row=strides(out)[1], offset=offset, max_gather_len=max_gather_len, page_tokens=page_tokens,
        page_stride_bytes=stride, num_pages=pages)
    args = struct("dsv4_kv_gather_args_t", cache=addr(cache), seq_lens=addr(seq_lens), gather_lens=addr(gather_lens),
                  block_table=addr(block_table), out=addr(out))
    op(o)(desc, args, anchor, workspace)
    return out
