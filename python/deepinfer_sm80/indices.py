"""indices family: top-k translation (dense and packed), top-k + SWA combine, decode SWA lists
(include/dsv4/indices.h). Index tensors are int32 with a contiguous last dimension; row strides
come from the tensors. Outputs not passed are allocated on the inputs' side and returned."""
from ._ops import addr, arg, empty, lib_int64, op, shape, side, struct, writable
from .tensors import strides

V4_1 = 0  # DSV4_COMBINE_V4_1
V4 = 1  # DSV4_COMBINE_V4


def _translate_inputs(o, topk_indices, token_to_req, block_table, is_valid_token):
    arg(o, "topk_indices", topk_indices, "i32", 2)
    T, K = shape(topk_indices)
    arg(o, "token_to_req", token_to_req, "i32", 1, (T,))
    arg(o, "block_table", block_table, "i32", 2)
    arg(o, "is_valid_token", is_valid_token, "mask", 1, (T,))
    return T, K


def _translate_desc(T, K, topk_indices, block_table, page_tokens, out_stride):
    return struct("dsv4_topk_translate_desc_t", num_tokens=T, topk=K, num_reqs=shape(block_table)[0],
                  block_table_width=shape(block_table)[1], page_tokens=page_tokens, topk_stride=strides(topk_indices)[0],
                  block_table_stride=strides(block_table)[0], out_stride=out_stride)


def topk_translate(topk_indices, token_to_req, block_table, is_valid_token, *, page_tokens, global_indices=None,
                   lens=None, workspace=None):
    """Local compressed top-k indices -> global slot ids (-1 invalid) and per-token counts.

    topk_indices: int32 [T, K]; token_to_req: int32 [T]; block_table: int32 [R, width];
    is_valid_token: bool/uint8 [T]. Returns (global_indices int32 [T, K], lens int32 [T])."""
    o = "topk_translate"
    T, K = _translate_inputs(o, topk_indices, token_to_req, block_table, is_valid_token)
    anchor = side(o, topk_indices=topk_indices, token_to_req=token_to_req, block_table=block_table,
                  is_valid_token=is_valid_token, global_indices=global_indices, lens=lens)
    if global_indices is None:
        global_indices = empty(anchor, (T, K), "i32")
    if lens is None:
        lens = empty(anchor, (T,), "i32")
    arg(o, "global_indices", global_indices, "i32", 2, (T, K))
    arg(o, "lens", lens, "i32", 1, (T,))
    writable(o, "global_indices", global_indices), writable(o, "lens", lens)
    desc = _translate_desc(T, K, topk_indices, block_table, page_tokens, strides(global_indices)[0])
    args = struct("dsv4_topk_translate_args_t", topk_indices=addr(topk_indices), token_to_req=addr(token_to_req),
                  block_table=addr(block_table), is_valid_token=addr(is_valid_token),
                  global_indices=addr(global_indices), lens=addr(lens))
    op(o)(desc, args, anchor, workspace)
    return global_indices, lens


def topk_translate_packed(topk_indices, token_to_req, block_table, is_valid_token, *, page_tokens, lens=None,
                          indptr=None, packed=None, workspace=None):
    """The ragged form of topk_translate: lens [T], indptr [T+1] and packed [T*K], of which
    entries [0, indptr[T]) are written. Returns (lens, indptr, packed)."""
    o = "topk_translate_packed"
    T, K = _translate_inputs(o, topk_indices, token_to_req, block_table, is_valid_token)
    anchor = side(o, topk_indices=topk_indices, token_to_req=token_to_req, block_table=block_table,
                  is_valid_token=is_valid_token, lens=lens, indptr=indptr, packed=packed)
    lens = empty(anchor, (T,), "i32") if lens is None else lens
    indptr = empty(anchor, (T + 1,), "i32") if indptr is None else indptr
    packed = empty(anchor, (T * K,), "i32") if packed is None else packed
    arg(o, "lens", lens, "i32", 1, (T,))
    arg(o, "indptr", indptr, "i32", 1, (T + 1,))
    arg(o, "packed", packed, "i32", 1)
    if shape(packed)[0] < T * K:
        raise ValueError(f"{o}: packed has {shape(packed)[0]} entries, needs room for T*K = {T * K}")
    for n, t in (("lens", lens), ("indptr", indptr), ("packed", packed)):
        writable(o, n, t)
    desc = _translate_desc(T, K, topk_indices, block_table, page_tokens, 0)
    args = struct("dsv4_topk_translate_packed_args_t", topk_indices=addr(topk_indices),
                  token_to_req=addr(token_to_req), block_table=addr(block_table),
                  is_valid_token=addr(is_valid_token), lens=addr(lens), indptr=addr(indptr), packed=addr(packed))
    op(o)(desc, args, anchor, workspace)
    return lens, indptr, packed


def combine_cols(topk, window):
    """C = round_up(topk + window, 128): the columns of the combined index rows."""
    return lib_int64("dsv4_combine_topk_swa_cols", topk, window)


def combine_topk_swa(topk_indices, query_start_loc, seq_lens, gather_lens, *, topk, window, ratio, slab_rows,
                     swa_row0, mode=V4_1, num_tokens=None, combined=None, combined_lens=None, workspace=None):
    """Prefill rows of one chunk: top-k workspace rows, then the sliding window, then -1.

    topk_indices: int32 [T, K_w >= topk] or None (topk == 0 or ratio == 0; then give num_tokens
    or combined); query_start_loc: int32 [R+1] (batch-global, rebased); seq_lens, gather_lens:
    int32 [R]. Returns (combined int32 [T, C], combined_lens int32 [T]), C = combine_cols(topk, window)."""
    o = "combine_topk_swa"
    arg(o, "topk_indices", topk_indices, "i32", 2, optional=True)
    arg(o, "query_start_loc", query_start_loc, "i32", 1)
    R = shape(query_start_loc)[0] - 1
    arg(o, "seq_lens", seq_lens, "i32", 1, (R,))
    arg(o, "gather_lens", gather_lens, "i32", 1, (R,))
    arg(o, "combined", combined, "i32", 2, optional=True)
    candidates = [("num_tokens", num_tokens)]
    if topk_indices is not None:
        candidates.append(("topk_indices.shape[0]", shape(topk_indices)[0]))
    if combined is not None:
        candidates.append(("combined.shape[0]", shape(combined)[0]))
    given = [(n, v) for n, v in candidates if v is not None]
    if not given:
        raise ValueError(f"{o}: without topk_indices or combined, pass num_tokens")
    T = given[0][1]
    for n, v in given:
        if v != T:
            raise ValueError(f"{o}: {n} = {v} disagrees with {given[0][0]} = {T}")
    C = combine_cols(topk, window)
    anchor = side(o, topk_indices=topk_indices, query_start_loc=query_start_loc, seq_lens=seq_lens,
                  gather_lens=gather_lens, combined=combined, combined_lens=combined_lens)
    if combined is None:
        if C < 0:
            raise ValueError(f"{o}: topk {topk} and window {window} give no column count")
        combined = empty(anchor, (T, C), "i32")
    if combined_lens is None:
        combined_lens = empty(anchor, (T,), "i32")
    arg(o, "combined_lens", combined_lens, "i32", 1, (T,))
    if shape(combined)[1] < C:
        raise ValueError(f"{o}: combined has {shape(combined)[1]} columns, fewer than C = {C}")
    writable(o, "combined", combined), writable(o, "combined_lens", combined_lens)
    desc = struct(
        "dsv4_combine_topk_swa_desc_t", num_tokens=T, num_reqs=R, topk=topk,
        topk_cols=shape(topk_indices)[1] if topk_indices is not None else topk,
        topk_stride=strides(topk_indices)[0] if topk_indices is not None else topk, window=window, ratio=ratio,
        slab_rows=slab_rows, swa_row0=swa_row0, out_stride=strides(combined)[0], mode=mode)
    args = struct("dsv4_combine_topk_swa_args_t", topk_indices=addr(topk_indices),
                  query_start_loc=addr(query_start_loc), seq_lens=addr(seq_lens), gather_lens=addr(gather_lens),
                  combined=addr(combined), combined_lens=addr(combined_lens))
    op(o)(desc, args, anchor, workspace)
    return combined, combined_lens


def decode_swa_indices(token_to_req, positions, is_valid_token, block_table, *, window, page_tokens,
                       swa_indices=None, swa_lens=None, workspace=None):
    """Decode SWA lists: global slots of positions max(pos-W+1, 0)..pos, then -1.

    token_to_req, positions: int32 [T]; is_valid_token: bool/uint8 [T]; block_table: int32
    [R, width]. swa_indices may be [T, W] or vLLM's [T, 1, W]. Returns (swa_indices, swa_lens)."""
    o = "decode_swa_indices"
    arg(o, "token_to_req", token_to_req, "i32", 1)
    T = shape(token_to_req)[0]
    arg(o, "positions", positions, "i32", 1, (T,))
    arg(o, "is_valid_token", is_valid_token, "mask", 1, (T,))
    arg(o, "block_table", block_table, "i32", 2)
    anchor = side(o, token_to_req=token_to_req, positions=positions, is_valid_token=is_valid_token,
                  block_table=block_table, swa_indices=swa_indices, swa_lens=swa_lens)
    if swa_indices is None:
        swa_indices = empty(anchor, (T, window), "i32")
    if swa_lens is None:
        swa_lens = empty(anchor, (T,), "i32")
    arg(o, "swa_indices", swa_indices, "i32", (2, 3))
    if len(swa_indices.shape) == 3 and shape(swa_indices)[1] != 1:
        raise ValueError(f"{o}: a 3-D swa_indices must be [T, 1, W], got {shape(swa_indices)}")
    if shape(swa_indices)[0] != T or shape(swa_indices)[-1] < window:
        raise ValueError(f"{o}: swa_indices has shape {shape(swa_indices)}, expected [{T}, >= {window}]")
    arg(o, "swa_lens", swa_lens, "i32", 1, (T,))
    writable(o, "swa_indices", swa_indices), writable(o, "swa_lens", swa_lens)
    desc = struct("dsv4_decode_swa_indices_desc_t", num_tokens=T, num_reqs=shape(block_table)[0], window=window,
                  page_tokens=page_tokens, block_table_width=shape(block_table)[1], block_table_stride=strides(block_table)[0],
                  out_stride=strides(swa_indices)[0])
    args = struct("dsv4_decode_swa_indices_args_t", token_to_req=addr(token_to_req), positions=addr(positions),
                  is_valid_token=addr(is_valid_token), block_table=addr(block_table),
                  swa_indices=addr(swa_indices), swa_lens=addr(swa_lens))
    op(o)(desc, args, anchor, workspace)
    return swa_indices, swa_lens
