"""Sparse MLA on the host path: the fp64 reference against a float64 numpy model of the
formula in include/dsv4/attention.h (gather, scores, softmax with the sink, weighted sum)."""
import numpy as np
import pytest

import deepinfer_sm80 as d
import spec_model as sm
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


def test_prefill_strided_q_out_and_kv(rng):
    """q and out as head slices of wider tensors, kv rows padded to 520 elements."""
    c = prefill_case(rng, T=6, H=16, C=64)
    want, _ = prefill_model(c)
    qbig = np.zeros((6, 32, 512), np.uint16)
    qbig[:, 8:24] = c["q"]
    kvp = np.zeros((c["kv"].shape[0] * c["kv"].shape[1], 520), np.uint16)
    kvp[:, :512] = c["kv"].reshape(-1, 512)
    obig = np.full((6, 32, 512), 0x1234, np.uint16)
    d.sparse_mla_prefill(qbig[:, 8:24], kvp[:, :512], c["ids"], c["lens"], sink=c["sink"], out=obig[:, 8:24])
    ulps = sm.ulp_diff_bf16(obig[:, 8:24], sm.f32_to_bf16(want.astype(np.float32)))
    assert ulps.max() <= 1 and (obig[:, :8] == 0x1234).all() and (obig[:, 24:] == 0x1234).all()
