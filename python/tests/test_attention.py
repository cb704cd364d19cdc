"""Sparse MLA on the host path: the fp64 reference against a float64 numpy model of the
formula in include/dsv4/attention.h (gather, scores, softmax with the sink, weighted sum), kept
because tests/attention pins that reference only by small known answers and invariants; and
strided tensors against the reference on the dense layout, bit for bit."""
import numpy as np
import pytest

import deepinfer_sm80 as d
import oracle
import spec_model as sm
from deepinfer_sm80._ops import struct
from deepinfer_sm80._structs import DSV4_MLA_CONFIG_H32W4, DSV4_MLA_DEFAULT_SCALE

SCALE = DSV4_MLA_DEFAULT_SCALE


def _sink(rng, H, mode):
    if mode == "none":
        return None
    s = rng.normal(0, 2, H).astype(np.float32)
    s[1] = -np.inf
    return s


def _ids(rng, T, width, valid_hi, dup=True):
    ids = rng.integers(-3, valid_hi + 40, size=(T, width)).astype(np.int32)  # some invalid either side
    if dup:
        ids[:, 1] = ids[:, 0]  # a duplicate counts twice
    lens = rng.integers(0, width + 5, T).astype(np.int32)
    lens[0] = 0  # an empty main list
    return ids, lens


def decode_case(rng, T=4, H=64, sink_mode="sink", extra=True):
    P_s, P_c, pages_s, pages_c = 32, 64, 6, 10
    q = sm.rng_bf16(rng, (T, H, 512), -3, 1)
    cs, cc = sm.random_cache(rng, pages_s, P_s, scales=(118, 122)), sm.random_cache(rng, pages_c, P_c, scales=(118, 122))
    mi, ml = _ids(rng, T, 128, pages_s * P_s)
    ei, el = _ids(rng, T, 512, pages_c * P_c) if extra else (None, None)
    return dict(q=q, cs=cs, cc=cc if extra else None, mi=mi, ml=ml, ei=ei, el=el, P_s=P_s, P_c=P_c,
                sink=_sink(rng, H, sink_mode))


def decode_model(c):
    rows = []
    for t in range(c["q"].shape[0]):
        r = [sm.decode_rows(c["cs"], c["P_s"], c["mi"][t], c["ml"][t])]
        if c["ei"] is not None:
            r.append(sm.decode_rows(c["cc"], c["P_c"], c["ei"][t], c["el"][t]))
        rows.append(np.concatenate(r))
    return sm.attention_model(c["q"], rows, SCALE, c["sink"]), rows


def run_decode(be, c, **kw):
    extra = {}
    if c["ei"] is not None:
        extra = dict(extra_cache=be.put(c["cc"]), extra_ids=be.put(c["ei"]), extra_lens=be.put(c["el"]),
                     extra_page_tokens=c["P_c"])
    return d.sparse_mla_decode(be.put(c["q"]), be.put(c["cs"]), be.put(c["mi"]), be.put(c["ml"]),
                               main_page_tokens=c["P_s"], sink=None if c["sink"] is None else be.put(c["sink"]),
                               **extra, **kw)


def check_close(got_bf16, ref64, rows, what):
    """The header's tolerance (DSV4_MLA_TOL_MAX_ABS and DSV4_MLA_TOL_REL_L2 of
    include/dsv4/attention.h), with max|K| taken over the rows the tokens listed."""
    maxk = max((np.abs(r).max() for r in rows if len(r)), default=1.0)
    sm.assert_attention_close(got_bf16, ref64, maxk, what)


@pytest.mark.parametrize("H,sink_mode,extra", [(64, "sink", True), (16, "none", True), (32, "sink", False)])
def test_decode_reference_matches_numpy(be, rng, H, sink_mode, extra):
    c = decode_case(rng, H=H, sink_mode=sink_mode, extra=extra)
    want, rows = decode_model(c)
    ref_out = np.zeros(want.shape) if be.name == "numpy" else be.put(np.zeros(want.shape))
    ref_lse = np.zeros(want.shape[:2]) if be.name == "numpy" else be.put(np.zeros(want.shape[:2]))
    out = run_decode(be, c, ref_out=ref_out, ref_lse=ref_lse)
    r = be.get(ref_out)
    assert np.allclose(r, want, rtol=1e-9, atol=1e-12), f"fp64 reference differs: max {np.abs(r - want).max():.3e}"
    assert not want[0].any(), "token 0 has an empty main list and must come out as zeros"
    ulps = sm.ulp_diff_bf16(be.get(out), sm.f32_to_bf16(want.astype(np.float32)))
    assert ulps.max() <= 1, f"bf16 output {ulps.max()} ulps from the rounded fp64 model"
    check_close(be.get(out), want, rows, "decode")


def test_decode_plan_and_struct_fields(rng):
    c = decode_case(rng, T=64, H=64)
    plan = d.sparse_mla_decode_plan(c["q"], c["cs"], c["mi"], c["ml"], main_page_tokens=c["P_s"],
                                    extra_cache=c["cc"], extra_ids=c["ei"], extra_lens=c["el"],
                                    extra_page_tokens=c["P_c"], sm_count=132, num_splits=4,
                                    config=DSV4_MLA_CONFIG_H32W4)
    assert plan["config"] == DSV4_MLA_CONFIG_H32W4 and plan["num_splits"] == 4 and plan["merge"] == 1
    assert plan["workspace_bytes"] == 64 * 4 * 64 * 515 * 4, plan


def test_decode_plan_batch_invariant(rng):
    """batch_invariant reaches the library: a batch of any size plans the request's alone."""
    plans = []
    for T in (1, 9, 64):
        c = decode_case(rng, T=T, H=64)
        kw = dict(main_page_tokens=c["P_s"], extra_cache=c["cc"], extra_ids=c["ei"], extra_lens=c["el"],
                  extra_page_tokens=c["P_c"], sm_count=132)
        auto = d.sparse_mla_decode_plan(c["q"], c["cs"], c["mi"], c["ml"], **kw)
        inv = d.sparse_mla_decode_plan(c["q"], c["cs"], c["mi"], c["ml"], batch_invariant=True, **kw)
        plans.append(((auto["config"], auto["num_splits"]), (inv["config"], inv["num_splits"])))
    assert len({p[1] for p in plans}) == 1 and plans[0][1][1] == 1, plans
    assert len({p[0] for p in plans}) > 1, plans  # the auto plan does depend on the batch


def prefill_case(rng, T=24, H=32, R=3, M=200, C=256, sink_mode="sink"):
    q = sm.rng_bf16(rng, (T, H, 512), -3, 1)
    kv = sm.rng_bf16(rng, (R, M, 512), -4, 2)
    ids, lens = _ids(rng, T, C, R * M)
    return dict(q=q, kv=kv, ids=ids, lens=lens, sink=_sink(rng, H, sink_mode))


def prefill_model(c):
    kvf = sm.bf16_to_f32(c["kv"].reshape(-1, 512)).astype(np.float64)
    rows = []
    for t in range(c["q"].shape[0]):
        n = min(max(int(c["lens"][t]), 0), c["ids"].shape[1])
        sel = [i for i in c["ids"][t, :n] if 0 <= i < len(kvf)]
        rows.append(kvf[sel].reshape(-1, 512))
    return sm.attention_model(c["q"], rows, SCALE, c["sink"]), rows


@pytest.mark.parametrize("H,sink_mode", [(32, "sink"), (64, "none"), (16, "sink")])
def test_prefill_reference_matches_numpy(be, rng, H, sink_mode):
    c = prefill_case(rng, H=H, sink_mode=sink_mode)
    want, rows = prefill_model(c)
    ref_out = be.put(np.zeros(want.shape))
    out = d.sparse_mla_prefill(be.put(c["q"]), be.put(c["kv"]), be.put(c["ids"]), be.put(c["lens"]),
                               sink=None if c["sink"] is None else be.put(c["sink"]), ref_out=ref_out)
    assert np.allclose(be.get(ref_out), want, rtol=1e-9, atol=1e-12)
    check_close(be.get(out), want, rows, "prefill")
    plan = d.sparse_mla_prefill_plan(c["q"], c["kv"], c["ids"], c["lens"])
    assert plan["num_splits"] == 1 and plan["merge"] == 0 and plan["workspace_bytes"] == 0


def _cache_desc(cache, P):
    return struct("dsv4_sparse_mla_cache_t", page_tokens=P, page_stride_bytes=cache.shape[1], num_pages=cache.shape[0])


def _heads_view(be, a, fill):
    """[T, H, 512] `a` as heads 4..4+H of a [T, H + 8, 520] tensor filled with `fill`: (view, whole)."""
    T, H, _ = a.shape
    buf = np.full((T, H + 8, 520), fill, a.dtype)
    buf[:, 4:4 + H, :512] = a
    whole = be.put(buf)
    return whole[:, 4:4 + H, :512], whole, buf


@pytest.mark.parametrize("extra", [True, False])
def test_decode_strided_against_reference(be, rng, extra):
    """q and out as head slices of wider tensors, id lists with padded rows, caches with padded
    pages, a non-default scale: out, ref_out and ref_lse bit-exact against the reference on
    the dense layout; the elements around out keep their poison."""
    c = decode_case(rng, T=5, H=16, extra=extra)
    T, H, scale = 5, 16, 0.75 * SCALE
    want = oracle.poison(rng, (T, H, 512), np.uint16)
    out = want.copy()
    want_ref, want_lse = np.zeros((T, H, 512)), np.zeros((T, H))
    lists = dict(main=struct("dsv4_sparse_mla_list_t", width=c["mi"].shape[1], cache=_cache_desc(c["cs"], c["P_s"])))
    if extra:
        lists.update(has_extra=1, extra=struct("dsv4_sparse_mla_list_t", width=c["ei"].shape[1],
                                               cache=_cache_desc(c["cc"], c["P_c"])))
    oracle.ref("sparse_mla_decode", dict(num_tokens=T, num_heads=H, scale=scale, **lists), q=c["q"],
               main_cache=c["cs"], main_ids=c["mi"], main_lens=c["ml"], extra_cache=c["cc"], extra_ids=c["ei"],
               extra_lens=c["el"], sink=c["sink"], out=want, ref_out=want_ref, ref_lse=want_lse)
    qt = _heads_view(be, c["q"], 0)[0]
    ot, whole, buf = _heads_view(be, out, 0x1234)
    kw = {}
    if extra:
        kw = dict(extra_cache=oracle.embed(be, c["cc"], 32, 0xA5)[0], extra_ids=oracle.embed(be, c["ei"], 3, -1)[0],
                  extra_lens=be.put(c["el"]), extra_page_tokens=c["P_c"])
    ref_out, ref_lse = be.put(np.zeros((T, H, 512))), be.put(np.zeros((T, H)))
    got = d.sparse_mla_decode(qt, oracle.embed(be, c["cs"], 16, 0xA5)[0], oracle.embed(be, c["mi"], 5, -1)[0],
                              be.put(c["ml"]), main_page_tokens=c["P_s"], sink=be.put(c["sink"]), out=ot, scale=scale,
                              ref_out=ref_out, ref_lse=ref_lse, **kw)
    assert got is ot
    oracle.assert_bits(be.get(ot), want, "decode out")
    oracle.assert_bits(be.get(ref_out), want_ref, "decode ref_out")
    oracle.assert_bits(be.get(ref_lse), want_lse, "decode ref_lse")
    buf[:, 4:4 + H, :512] = want
    oracle.assert_bits(be.get(whole), buf, "out with the elements around it (those must stay)")


@pytest.mark.parametrize("kv_layout", ["rows", "slabs"])
def test_prefill_strided_against_reference(be, rng, kv_layout):
    """q and out as head slices of wider tensors, kv rows padded to 520 elements (as [rows, 520]
    or as the [R, M, 520] workspace), ids with padded rows, a non-default scale: bit-exact
    against the reference on the dense layout."""
    c = prefill_case(rng, T=6, H=16, C=64)
    T, H, scale = 6, 16, 1.5 * SCALE
    R, M, _ = c["kv"].shape
    want = oracle.poison(rng, (T, H, 512), np.uint16)
    out = want.copy()
    want_ref, want_lse = np.zeros((T, H, 512)), np.zeros((T, H))
    oracle.ref("sparse_mla_prefill", dict(num_tokens=T, num_heads=H, kv_rows=R * M, width=c["ids"].shape[1],
                                          scale=scale),
               q=c["q"], kv=c["kv"], ids=c["ids"], lens=c["lens"], sink=c["sink"], out=want, ref_out=want_ref,
               ref_lse=want_lse)
    kv = c["kv"] if kv_layout == "slabs" else c["kv"].reshape(R * M, 512)
    qt = _heads_view(be, c["q"], 0)[0]
    ot, whole, buf = _heads_view(be, out, 0x1234)
    ref_out, ref_lse = be.put(np.zeros((T, H, 512))), be.put(np.zeros((T, H)))
    d.sparse_mla_prefill(qt, oracle.embed(be, kv, 8, 0x7E7E)[0], oracle.embed(be, c["ids"], 3, -1)[0],
                         be.put(c["lens"]), sink=be.put(c["sink"]), out=ot, scale=scale, ref_out=ref_out,
                         ref_lse=ref_lse)
    oracle.assert_bits(be.get(ot), want, "prefill out")
    oracle.assert_bits(be.get(ref_out), want_ref, "prefill ref_out")
    oracle.assert_bits(be.get(ref_lse), want_lse, "prefill ref_lse")
    buf[:, 4:4 + H, :512] = want
    oracle.assert_bits(be.get(whole), buf, "out with the elements around it (those must stay)")
