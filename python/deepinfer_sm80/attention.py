"""attention family: sparse MLA decode over paged fp8 caches and sparse MLA prefill over bf16
workspace rows (include/dsv4/attention.h). q and out are bf16 [T, H, 512] with any token/head
strides; H is a multiple of 16 in [16, 128] (the library checks). On the host path the fp64
reference can also return its unrounded output (ref_out, float64 [T, H, 512]) and log-sum-exp
(ref_lse, float64 [T, H])."""
import ctypes

from ._lib import check, proto
from ._ops import addr, arg, as_dict, contiguous, empty, op, shape, side, struct, writable
from ._structs import DSV4_MLA_DEFAULT_SCALE, DSV4_MLA_DIM
from .kvcache import cache_geometry
from .tensors import is_cuda, strides

DIM = DSV4_MLA_DIM
DEFAULT_SCALE = DSV4_MLA_DEFAULT_SCALE  # 512^-0.5


def _qo(o, q, out, anchor):
    arg(o, "q", q, "bf16", 3, (None, None, DIM))
    T, H = shape(q)[0], shape(q)[1]
    if out is None:
        out = empty(anchor, (T, H, DIM), "bf16")
    arg(o, "out", out, "bf16", 3, (T, H, DIM))
    writable(o, "out", out)
    return T, H, out


def _ref_outputs(o, T, H, anchor, ref_out, ref_lse):
    if (ref_out is not None or ref_lse is not None) and is_cuda(anchor):
        raise ValueError(f"{o}: ref_out / ref_lse are outputs of the host reference only")
    arg(o, "ref_out", ref_out, "f64", 3, (T, H, DIM), optional=True)
    arg(o, "ref_lse", ref_lse, "f64", 2, (T, H), optional=True)
    for n, t in (("ref_out", ref_out), ("ref_lse", ref_lse)):
        if t is not None:
            contiguous(o, n, t)
            writable(o, n, t)


def _list(o, which, T, cache, ids, lens, page_tokens, page_stride_bytes):
    arg(o, f"{which}_ids", ids, "i32", 2, (T, None))
    arg(o, f"{which}_lens", lens, "i32", 1, (T,))
    stride, pages = cache_geometry(o, f"{which}_cache", cache, page_tokens, page_stride_bytes)
    c = struct("dsv4_sparse_mla_cache_t", page_tokens=page_tokens, page_stride_bytes=stride, num_pages=pages)
    return struct("dsv4_sparse_mla_list_t", width=shape(ids)[1], stride=strides(ids)[0], cache=c)


def _decode(q, main_cache, main_ids, main_lens, main_page_tokens, extra_cache, extra_ids, extra_lens,
            extra_page_tokens, sink, out, scale, num_splits, force_merge, config, sm_count, main_page_stride_bytes,
            extra_page_stride_bytes, ref_out, ref_lse, batch_invariant=False):
    o = "sparse_mla_decode"
    has_extra = extra_ids is not None or extra_cache is not None or extra_lens is not None
    anchor = side(o, q=q, main_cache=main_cache, main_ids=main_ids, main_lens=main_lens, extra_cache=extra_cache,
                  extra_ids=extra_ids, extra_lens=extra_lens, sink=sink, out=out)
    T, H, out = _qo(o, q, out, anchor)
    _ref_outputs(o, T, H, anchor, ref_out, ref_lse)
    arg(o, "sink", sink, "f32", 1, (H,), optional=True)
    main = _list(o, "main", T, main_cache, main_ids, main_lens, main_page_tokens, main_page_stride_bytes)
    if has_extra:
        if extra_ids is None or extra_cache is None or extra_lens is None:
            raise ValueError(f"{o}: the extra list needs extra_cache, extra_ids and extra_lens together")
        extra = _list(o, "extra", T, extra_cache, extra_ids, extra_lens, extra_page_tokens, extra_page_stride_bytes)
    else:
        extra = struct("dsv4_sparse_mla_list_t")
    desc = struct(
        "dsv4_sparse_mla_decode_desc_t", num_tokens=T, num_heads=H, q_stride_token=strides(q)[0],
        q_stride_head=strides(q)[1], out_stride_token=strides(out)[0], out_stride_head=strides(out)[1], main=main,
        has_extra=int(has_extra), extra=extra, scale=scale, num_splits=num_splits, force_merge=int(force_merge),
        config=config, sm_count=sm_count, batch_invariant=int(bool(batch_invariant)))
    args = struct(
        "dsv4_sparse_mla_decode_args_t", q=addr(q), main_cache=addr(main_cache), main_ids=addr(main_ids),
        main_lens=addr(main_lens), extra_cache=addr(extra_cache), extra_ids=addr(extra_ids),
        extra_lens=addr(extra_lens), sink=addr(sink), out=addr(out), ref_out=addr(ref_out), ref_lse=addr(ref_lse))
    return desc, args, anchor, out


def sparse_mla_decode(q, main_cache, main_ids, main_lens, *, main_page_tokens, extra_cache=None, extra_ids=None,
                      extra_lens=None, extra_page_tokens=None, sink=None, out=None, scale=0.0, num_splits=0,
                      force_merge=False, config=0, sm_count=0, main_page_stride_bytes=None,
                      extra_page_stride_bytes=None, ref_out=None, ref_lse=None, workspace=None,
                      batch_invariant=False):
    """Sparse MLA decode: per token, softmax attention (with the optional sink) over the valid
    slots of the main (SWA) list, then of the extra (compressed) list, K = V = the cached row.

    q: bf16 [T, H, 512]; *_cache: uint8 pages; *_ids: int32 [T, width] global slot ids;
    *_lens: int32 [T]; sink: fp32 [H] or None; config: a dsv4_mla_config_t value
    (_structs.DSV4_MLA_CONFIG_*, 0 = auto); batch_invariant: a row's bits independent of
    the rest of the batch (include/dsv4/attention.h). Returns out bf16 [T, H, 512]."""
    desc, args, anchor, out = _decode(q, main_cache, main_ids, main_lens, main_page_tokens, extra_cache, extra_ids,
                                      extra_lens, extra_page_tokens, sink, out, scale, num_splits, force_merge,
                                      config, sm_count, main_page_stride_bytes, extra_page_stride_bytes, ref_out,
                                      ref_lse, batch_invariant)
    op("sparse_mla_decode")(desc, args, anchor, workspace)
    return out


def _plan(name, desc):
    plan = struct("dsv4_sparse_mla_plan_t")
    check(proto(f"dsv4_{name}_plan")(ctypes.byref(desc), ctypes.byref(plan)))
    return as_dict(plan)


def sparse_mla_decode_plan(q, main_cache, main_ids, main_lens, *, main_page_tokens, extra_cache=None, extra_ids=None,
                           extra_lens=None, extra_page_tokens=None, sink=None, scale=0.0, num_splits=0,
                           force_merge=False, config=0, sm_count=0, main_page_stride_bytes=None,
                           extra_page_stride_bytes=None, batch_invariant=False):
    """What sparse_mla_decode would run for these inputs (config, splits, merge, workspace)."""
    desc, _, _, _ = _decode(q, main_cache, main_ids, main_lens, main_page_tokens, extra_cache, extra_ids, extra_lens,
                            extra_page_tokens, sink, q, scale, num_splits, force_merge, config, sm_count,
                            main_page_stride_bytes, extra_page_stride_bytes, None, None, batch_invariant)
    return _plan("sparse_mla_decode", desc)


def _prefill(q, kv, ids, lens, sink, out, scale, config, ref_out, ref_lse):
    o = "sparse_mla_prefill"
    anchor = side(o, q=q, kv=kv, ids=ids, lens=lens, sink=sink, out=out)
    T, H, out = _qo(o, q, out, anchor)
    _ref_outputs(o, T, H, anchor, ref_out, ref_lse)
    arg(o, "kv", kv, "bf16", (2, 3))
    if len(kv.shape) == 3:  # the [R, M, row] workspace, flattened to R*M rows when that is a plain view
        R, M, W = shape(kv)
        if R > 1 and strides(kv)[0] != M * strides(kv)[1]:
            raise ValueError(f"{o}: a 3-D kv must be a [R, M, 512] workspace whose slabs are adjacent "
                             f"(strides {strides(kv)})")
        kv_rows, kv_stride, width = R * M, strides(kv)[1], W
    else:
        (kv_rows, width), kv_stride = shape(kv), strides(kv)[0]
    if width < DIM:
        raise ValueError(f"{o}: kv rows have {width} elements, need at least 512")
    arg(o, "ids", ids, "i32", 2, (T, None))
    arg(o, "lens", lens, "i32", 1, (T,))
    arg(o, "sink", sink, "f32", 1, (H,), optional=True)
    desc = struct(
        "dsv4_sparse_mla_prefill_desc_t", num_tokens=T, num_heads=H, q_stride_token=strides(q)[0],
        q_stride_head=strides(q)[1], out_stride_token=strides(out)[0], out_stride_head=strides(out)[1],
        kv_rows=kv_rows, kv_stride=kv_stride, width=shape(ids)[1], ids_stride=strides(ids)[0], scale=scale,
        config=config)
    args = struct("dsv4_sparse_mla_prefill_args_t", q=addr(q), kv=addr(kv), ids=addr(ids), lens=addr(lens),
                  sink=addr(sink), out=addr(out), ref_out=addr(ref_out), ref_lse=addr(ref_lse))
    return desc, args, anchor, out


def sparse_mla_prefill(q, kv, ids, lens, *, sink=None, out=None, scale=0.0, config=0, ref_out=None, ref_lse=None,
                       workspace=None):
    """Sparse MLA prefill over bf16 rows: J(t) = ids[t, :lens[t]] restricted to [0, kv_rows).

    q: bf16 [T, H, 512]; kv: bf16 [rows, >= 512] or the [R, M, 512] workspace; ids: int32
    [T, C] (the combined lists); lens: int32 [T]; sink: fp32 [H] or None; config: as for
    sparse_mla_decode. Returns out."""
    desc, args, anchor, out = _prefill(q, kv, ids, lens, sink, out, scale, config, ref_out, ref_lse)
    op("sparse_mla_prefill")(desc, args, anchor, workspace)
    return out


def sparse_mla_prefill_plan(q, kv, ids, lens, *, sink=None, scale=0.0, config=0):
    """What sparse_mla_prefill would run for these inputs."""
    desc, _, _, _ = _prefill(q, kv, ids, lens, sink, q, scale, config, None, None)
    return _plan("sparse_mla_prefill", desc)
