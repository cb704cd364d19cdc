"""mHC on the host path.

post and collapse against the numpy models of spec_model.py: post, the plain collapse and aux
bit-exact (the header's fp32 order), the norm within 1 bf16 ulp; tests/mhc checks these
references only against fp64, within 1-2 ulps. gates, pre, seam, fn_bcast and fn_split, whose
references tests/mhc checks against its own fp64 models and an independent split, bit for bit
against dsv4_<op>_ref called directly on dense arrays with the model's gate constants written
out: dense and strided tensors, outputs allocated by the binding or passed in.
"""
import numpy as np
import pytest

import deepinfer_sm80 as d
import oracle
import spec_model as sm
from deepinfer_sm80._ops import struct

H = 4096  # V4-Flash hidden size (5120 in the CUDA tests); T small and model-like


def seam_inputs(rng, T, H=H):
    x = sm.rng_bf16(rng, (T, H), -6, 3, zero_every=64)
    R = sm.rng_bf16(rng, (T, 4, H), -6, 3, zero_every=64)
    post = (2.0 / (1.0 + np.exp(-rng.standard_normal((T, 4))))).astype(np.float32)
    comb = rng.uniform(0, 1, (T, 4, 4)).astype(np.float32)
    pre_mix = (1.0 / (1.0 + np.exp(-rng.standard_normal((T, 4)))) + 1e-6).astype(np.float32)
    w = sm.f32_to_bf16(rng.uniform(0.5, 1.5, H).astype(np.float32))
    fn, scale, base = sm.mhc_params(rng, H)
    return dict(x=x, R=R, post=post, comb=comb, pre_mix=pre_mix, w=w, fn=fn, scale=scale, base=base)


def quiet_token(rng, c):
    """Token 0 with |values| near 2^-13, so that the eps of the RMS and of the norm show in the bits."""
    c["x"][0] = sm.rng_bf16(rng, c["x"].shape[1:], -14, -12)
    c["R"][0] = sm.rng_bf16(rng, c["R"].shape[1:], -14, -12)


def assert_ulp(got, want64, what, ulp=1):
    u = sm.ulp_diff_bf16(got, sm.f32_to_bf16(want64.astype(np.float32)))
    assert u.max() <= ulp, f"{what}: {u.max()} bf16 ulps from the float64 model (allowed {ulp})"


GATE41 = dict(rms_eps=1e-20, pre_eps=1e-6, sinkhorn_eps=1e-6, post_mult=2.0, sinkhorn_iters=20)
GATE4 = dict(GATE41, rms_eps=1e-6)
SEAM_OUT = dict(post="post_out", comb="comb_out", pre="pre_out")  # mhc_seam's names of its gate outputs
BF16_OUT = ("layer_input", "aux", "residual_out")


def gate_desc(variant):
    """The variant's gate constants and norm eps (the model's, which the binding defaults to)."""
    gate = GATE4 if variant == 1 else GATE41
    return dict(variant=variant, gate=struct("dsv4_mhc_gate_params_t", **gate), norm_eps=gate["rms_eps"])


def reference_outputs(rng, T, names):
    """Poisoned dense outputs for the reference call, by result name."""
    shapes = dict(post=(T, 4), comb=(T, 4, 4), pre=(T, 4), mix=(T, 24), layer_input=(T, H), aux=(T, H),
                  residual_out=(T, 4, H))
    return {n: oracle.poison(rng, shapes[n], np.uint16 if n in BF16_OUT else np.float32) for n in names}


def strided_view(be, a, fill=0x7E7E):
    """`a` as a strided view: a [T, 4, H] residual as streams 1..4 of [T, 5, H], rows [T, H] padded
    by 64 elements. Returns (view, untouched); untouched() is True while every element around
    the view still holds `fill`."""
    if a.ndim == 3:
        buf = np.full((a.shape[0], 5, a.shape[2]), fill, a.dtype)
        buf[:, 1:] = a
        whole = be.put(buf)
        return whole[:, 1:], lambda: bool((be.get(whole)[:, 0] == fill).all())
    view, whole = oracle.embed(be, a, 64, fill)
    return view, lambda: bool((be.get(whole)[:, a.shape[1]:] == fill).all())


def binding_outputs(be, want, layout, names=None):
    """What the binding is handed: nothing (it allocates) for "dense"; for "strided" poisoned
    copies of `want`, bf16 ones as strided views, post as [T, 4, 1]. Returns (keyword
    arguments, the untouched() checks of the views); names renames keywords."""
    if layout == "dense":
        return {}, []
    kw, checks = {}, []
    for n, w in want.items():
        if n in BF16_OUT:
            kw[n], ok = strided_view(be, w)
            checks.append(ok)
        else:
            kw[n] = be.put(w[..., None] if n == "post" else w)
    return {(names or {}).get(n, n): v for n, v in kw.items()}, checks


def assert_reference(be, res, want, checks, what):
    for n, w in want.items():
        oracle.assert_bits(be.get(res[n]).reshape(w.shape), w, f"{what} {n}")
    assert all(ok() for ok in checks), f"{what}: an element around a strided output was written"


@pytest.mark.parametrize("T,layout", [(1, "dense"), (6, "dense"), (6, "strided")])
def test_post_bit_exact_and_sqrsum(be, rng, T, layout):
    c = seam_inputs(rng, T)
    want = sm.post_model(c["x"], c["R"], c["post"], c["comb"])
    kw, untouched = {}, []
    if layout == "strided":
        (x, _), (R, _) = strided_view(be, c["x"]), strided_view(be, c["R"])
        kw["residual_out"], ok = strided_view(be, oracle.poison(rng, c["R"].shape, np.uint16))
        untouched.append(ok)
    else:
        x, R = be.put(c["x"]), be.put(c["R"])
    out = d.mhc_post(x, R, be.put(c["post"]), be.put(c["comb"]), **kw)
    oracle.assert_bits(be.get(out), want, "mhc_post")
    out, sq = d.mhc_post(x, R, be.put(c["post"][:, :, None]), be.put(c["comb"]), with_sqrsum=True, **kw)
    oracle.assert_bits(be.get(out), want, "mhc_post with sqrsum")
    ref = (sm.bf16_to_f32(want).astype(np.float64) ** 2).reshape(T, -1).sum(1)
    assert np.allclose(be.get(sq), ref, rtol=1e-5, atol=0)
    assert all(ok() for ok in untouched), "an element around residual_out was written"


@pytest.mark.parametrize("variant,pre_mix,norm,layout", [(0, True, True, "dense"), (0, False, True, "dense"),
                                                         (1, True, True, "strided"), (0, True, False, "strided")])
def test_collapse(be, rng, variant, pre_mix, norm, layout):
    T = 5
    c = seam_inputs(rng, T)
    eps = 1e-20 if variant == 0 else 1e-6
    yb, normed, aux = sm.collapse_model(c["R"], c["pre_mix"] if pre_mix else None, c["w"] if norm else None, eps,
                                        v4=variant == 1)
    R = strided_view(be, c["R"])[0] if layout == "strided" else be.put(c["R"])
    kw, checks = {}, []
    if layout == "strided":
        for n in ("out", "aux"):
            kw[n], ok = strided_view(be, oracle.poison(rng, (T, H), np.uint16))
            checks.append(ok)
    out, got_aux = d.mhc_collapse(R, be.put(c["pre_mix"]) if pre_mix else None, be.put(c["w"]) if norm else None,
                                  variant=variant, with_aux=True, **kw)
    oracle.assert_bits(be.get(got_aux), aux, "aux")
    if norm:
        assert_ulp(be.get(out), normed, "collapse + RMSNorm")
    else:
        oracle.assert_bits(be.get(out), yb, "collapse")
    assert all(ok() for ok in checks), "an element around out or aux was written"


@pytest.mark.parametrize("passed", [False, True])
def test_fn_bcast(be, rng, passed):
    fn, _, _ = sm.mhc_params(rng, H)
    want = oracle.poison(rng, (24, H), np.float32)
    kw = dict(out=be.put(want)) if passed else {}
    oracle.ref("mhc_fn_bcast", dict(hidden=H), fn=fn, fn_bcast=want)
    got = d.mhc_fn_bcast(be.put(fn), **kw)
    assert not passed or got is kw["out"]
    oracle.assert_bits(be.get(got), want, "fn_bcast")


@pytest.mark.parametrize("broadcast,passed", [(False, False), (True, True)])
def test_fn_split(be, rng, broadcast, passed):
    fn, _, _ = sm.mhc_params(rng, H)
    if broadcast:
        fn = np.ascontiguousarray(fn[:, :H])
    # zeros, infinities, a subnormal, the largest bf16, a finite value that rounds to inf, NaN
    fn[0, :8] = np.array([0.0, -0.0, np.inf, -np.inf, 1e-40, 3.3895314e38, 3.4028235e38, np.nan], np.float32)
    want = oracle.poison(rng, (48, fn.shape[1]), np.uint16)
    kw = dict(out=be.put(want)) if passed else {}
    oracle.ref("mhc_fn_split", dict(hidden=H, broadcast=int(broadcast)), fn=fn, fn_split=want)
    got = d.mhc_fn_split(be.put(fn), broadcast=broadcast, **kw)
    assert not passed or got is kw["out"]
    oracle.assert_bits(be.get(got), want, "fn_split")


@pytest.mark.parametrize("T,broadcast,use_sqrsum,layout", [(3, False, False, "dense"), (17, False, True, "strided"),
                                                           (2, True, False, "strided")])
def test_gates(be, rng, T, broadcast, use_sqrsum, layout):
    c = seam_inputs(rng, T)
    quiet_token(rng, c)
    X = c["x"] if broadcast else c["R"]
    fn = d.mhc_fn_bcast(c["fn"]) if broadcast else c["fn"]
    sq = (sm.bf16_to_f32(X).astype(np.float64) ** 2).reshape(T, -1).sum(1).astype(np.float32) if use_sqrsum else None
    want = reference_outputs(rng, T, ("post", "comb", "pre", "mix"))
    oracle.ref("mhc_gates", dict(tokens=T, hidden=H, broadcast=int(broadcast), gate=gate_desc(0)["gate"]),
               residual=X, fn=fn, scale=c["scale"], base=c["base"], sqrsum=sq, **want)
    kw, checks = binding_outputs(be, want, layout)
    Xt = strided_view(be, X)[0] if layout == "strided" else be.put(X)
    res = d.mhc_gates(Xt, be.put(fn), be.put(c["scale"]), be.put(c["base"]), sqrsum=None if sq is None else be.put(sq),
                      with_mix=True, **kw)
    assert_reference(be, res, want, checks, "gates")


@pytest.mark.parametrize("variant,layout", [(0, "dense"), (1, "strided"), (0, "strided")])
def test_pre(be, rng, variant, layout):
    T = 4
    c = seam_inputs(rng, T)
    quiet_token(rng, c)
    pre_mix = c["pre_mix"] if variant == 0 else None
    want = reference_outputs(rng, T, ("post", "comb", "pre", "layer_input", "aux", "mix"))
    oracle.ref("mhc_pre", dict(tokens=T, hidden=H, **gate_desc(variant)), residual=c["R"], fn=c["fn"],
               scale=c["scale"], base=c["base"], pre_mix=pre_mix, norm_weight=c["w"], **want)
    kw, checks = binding_outputs(be, want, layout)
    R = strided_view(be, c["R"])[0] if layout == "strided" else be.put(c["R"])
    res = d.mhc_pre(R, be.put(c["fn"]), be.put(c["scale"]), be.put(c["base"]), variant=variant,
                    pre_mix=None if pre_mix is None else be.put(pre_mix), norm_weight=be.put(c["w"]), with_aux=True,
                    with_mix=True, **kw)
    assert_reference(be, res, want, checks, "mhc_pre")


@pytest.mark.parametrize("layout", ["dense", "strided"])
def test_pre_broadcast_first_layer(be, rng, layout):
    T = 3
    c = seam_inputs(rng, T)
    quiet_token(rng, c)
    fnb = d.mhc_fn_bcast(c["fn"])
    want = reference_outputs(rng, T, ("post", "comb", "pre", "layer_input", "residual_out", "mix"))
    oracle.ref("mhc_pre", dict(tokens=T, hidden=H, broadcast=1, **gate_desc(0)), residual=c["x"], fn=fnb,
               scale=c["scale"], base=c["base"], norm_weight=c["w"], **want)
    kw, checks = binding_outputs(be, want, layout)
    x = strided_view(be, c["x"])[0] if layout == "strided" else be.put(c["x"])
    res = d.mhc_pre(x, be.put(fnb), be.put(c["scale"]), be.put(c["base"]), norm_weight=be.put(c["w"]), with_mix=True,
                    **kw)
    assert_reference(be, res, want, checks, "first-layer mhc_pre")


@pytest.mark.parametrize("variant,T,layout,split", [(0, 6, "dense", False), (0, 16, "strided", True),
                                                    (1, 3, "strided", False)])
def test_seam(be, rng, variant, T, layout, split):
    """split: fn_split made once and passed (the header: the same bits as without)."""
    c = seam_inputs(rng, T)
    quiet_token(rng, c)
    pre_mix = c["pre_mix"] if variant == 0 else None
    want = reference_outputs(rng, T, ("residual_out", "post", "comb", "pre", "layer_input", "aux", "mix"))
    oracle.ref("mhc_seam", dict(tokens=T, hidden=H, **gate_desc(variant)), x=c["x"], residual=c["R"], post=c["post"],
               comb=c["comb"], fn=c["fn"], scale=c["scale"], base=c["base"], pre_mix=pre_mix, norm_weight=c["w"],
               **{SEAM_OUT.get(n, n): w for n, w in want.items()})
    kw, checks = binding_outputs(be, want, layout, SEAM_OUT)
    if layout == "strided":
        (x, _), (R, _), post = strided_view(be, c["x"]), strided_view(be, c["R"]), be.put(c["post"][:, :, None])
    else:
        x, R, post = be.put(c["x"]), be.put(c["R"]), be.put(c["post"])
    fn = be.put(c["fn"])
    res = d.mhc_seam(x, R, post, be.put(c["comb"]), fn, be.put(c["scale"]), be.put(c["base"]), variant=variant,
                     pre_mix=None if pre_mix is None else be.put(pre_mix), norm_weight=be.put(c["w"]), with_aux=True,
                     with_mix=True, fn_split=d.mhc_fn_split(fn) if split else None, **kw)
    assert_reference(be, res, want, checks, "seam")


def test_plan():
    small = d.mhc_plan(6, 5120)
    # include/dsv4/mhc.h: the small-T geometry (tile_n, split_k, threads) = (6, H/256, 256)
    assert small["route"] == d.mhc.ROUTE_SMALL_T and small["tile_n"] == 6
    assert small["splits"] == 5120 // 256 and small["threads"] == 256
    big = d.mhc_plan(64, 5120)
    assert big["route"] == d.mhc.ROUTE_TENSOR_CORE and big["workspace_bytes"] >= big["splits"] * 64 * 26 * 4
    assert d.mhc_plan(6, 5120, route=d.mhc.ROUTE_TENSOR_CORE)["route"] == d.mhc.ROUTE_TENSOR_CORE
