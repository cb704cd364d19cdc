"""mHC on the host path against the numpy models of spec_model.py: post and collapse bit-exact
(fmaf order), aux, fn_bcast and fn_split bit-exact, norms within 1 bf16 ulp, projection within
1e-5 * rms * sum|X fn|, gates within 1e-5 of a float64 epilogue fed the reference's mix."""
import numpy as np
import pytest

import deepinfer_sm80 as d
import spec_model as sm

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


def assert_bits(got, want, what):
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{what}: {len(bad)} elements differ, first at {bad[0].tolist()}"


def assert_ulp(got, want64, what, ulp=1):
    u = sm.ulp_diff_bf16(got, sm.f32_to_bf16(want64.astype(np.float32)))
    assert u.max() <= ulp, f"{what}: {u.max()} bf16 ulps from the float64 model (allowed {ulp})"


def check_gates(res, X, fn, scale, base, gate, sqrsum=None, what="gates"):
    mix_want, bound = sm.projection_model(X, fn, gate["rms_eps"], sqrsum)
    mix = res["mix"]
    assert (np.abs(mix - mix_want) <= 1e-5 * bound + 1e-30).all(), (
        f"{what}: mix off by {np.abs(mix - mix_want).max():.3e} (bound {1e-5 * bound.min():.3e})")
    pre, post, comb = sm.gates_epilogue(mix, scale, base, gate["pre_eps"], gate["sinkhorn_eps"], gate["post_mult"],
                                        gate["sinkhorn_iters"])
    for name, want in (("pre", pre), ("post", post), ("comb", comb)):
        err = np.abs(res[name].reshape(want.shape) - want).max()
        assert err <= 1e-5, f"{what}: {name} off by {err:.3e} from the float64 epilogue (tolerance 1e-5)"


GATE41 = dict(rms_eps=1e-20, pre_eps=1e-6, sinkhorn_eps=1e-6, post_mult=2.0, sinkhorn_iters=20)
GATE4 = dict(GATE41, rms_eps=1e-6)


@pytest.mark.parametrize("T", [1, 6])
def test_post_bit_exact_and_sqrsum(be, rng, T):
    c = seam_inputs(rng, T)
    want = sm.post_model(c["x"], c["R"], c["post"], c["comb"])
    out = d.mhc_post(be.put(c["x"]), be.put(c["R"]), be.put(c["post"]), be.put(c["comb"]))
    assert_bits(be.get(out), want, "mhc_post")
    out, sq = d.mhc_post(be.put(c["x"]), be.put(c["R"]), be.put(c["post"][:, :, None]), be.put(c["comb"]),
                         with_sqrsum=True)
    assert_bits(be.get(out), want, "mhc_post with sqrsum")
    ref = (sm.bf16_to_f32(want).astype(np.float64) ** 2).reshape(T, -1).sum(1)
    assert np.allclose(be.get(sq), ref, rtol=1e-5, atol=0)


@pytest.mark.parametrize("variant,pre_mix,norm", [(0, True, True), (0, False, True), (1, True, True),
                                                  (0, True, False)])
def test_collapse(be, rng, variant, pre_mix, norm):
    c = seam_inputs(rng, 5)
    eps = 1e-20 if variant == 0 else 1e-6
    yb, normed, aux = sm.collapse_model(c["R"], c["pre_mix"] if pre_mix else None, c["w"] if norm else None, eps,
                                        v4=variant == 1)
    out, got_aux = d.mhc_collapse(be.put(c["R"]), be.put(c["pre_mix"]) if pre_mix else None,
                                  be.put(c["w"]) if norm else None, variant=variant, with_aux=True)
    assert_bits(be.get(got_aux), aux, "aux")
    if norm:
        assert_ulp(be.get(out), normed, "collapse + RMSNorm")
    else:
        assert_bits(be.get(out), yb, "collapse")


def test_fn_bcast_bit_exact(be, rng):
    fn, _, _ = sm.mhc_params(rng, H)
    want = ((fn[:, :H] + fn[:, H:2 * H]) + fn[:, 2 * H:3 * H]) + fn[:, 3 * H:]
    assert_bits(be.get(d.mhc_fn_bcast(be.put(fn))), want, "fn_bcast")


def fn_split_model(fn):
    """hi = bf16(fn), lo = bf16(fn - hi) with one fp32 subtraction (include/dsv4/mhc.h)."""
    hi = sm.f32_to_bf16(fn)
    with np.errstate(invalid="ignore"):  # inf - inf: lo = NaN, as the header says
        lo = sm.f32_to_bf16((fn - sm.bf16_to_f32(hi)).astype(np.float32))
    return np.concatenate([hi, lo], axis=0)


@pytest.mark.parametrize("broadcast", [False, True])
def test_fn_split_bit_exact(be, rng, broadcast):
    fn, _, _ = sm.mhc_params(rng, H)
    if broadcast:
        fn = np.ascontiguousarray(fn[:, :H])
    # zeros, infinities, a subnormal, the largest bf16, a finite value that rounds to inf, NaN
    fn[0, :8] = np.array([0.0, -0.0, np.inf, -np.inf, 1e-40, 3.3895314e38, 3.4028235e38, np.nan], np.float32)
    assert_bits(be.get(d.mhc_fn_split(be.put(fn), broadcast=broadcast)), fn_split_model(fn), "fn_split")


@pytest.mark.parametrize("T,broadcast,use_sqrsum", [(3, False, False), (17, False, True), (2, True, False)])
def test_gates(be, rng, T, broadcast, use_sqrsum):
    c = seam_inputs(rng, T)
    X = c["x"] if broadcast else c["R"]
    fn = ((c["fn"][:, :H] + c["fn"][:, H:2 * H]) + c["fn"][:, 2 * H:3 * H]) + c["fn"][:, 3 * H:] if broadcast else c["fn"]
    sq = (sm.bf16_to_f32(X).astype(np.float64) ** 2).reshape(T, -1).sum(1).astype(np.float32) if use_sqrsum else None
    res = d.mhc_gates(be.put(X), be.put(fn), be.put(c["scale"]), be.put(c["base"]),
                      sqrsum=None if sq is None else be.put(sq), with_mix=True)
    res = {k: be.get(v) for k, v in res.items()}
    check_gates(res, X, fn, c["scale"], c["base"], GATE41, sq)
    assert np.allclose(res["comb"].sum(1), 1, atol=1e-5), "comb columns must sum to 1"


@pytest.mark.parametrize("variant", [0, 1])
def test_pre(be, rng, variant):
    T = 4
    c = seam_inputs(rng, T)
    gate = GATE41 if variant == 0 else GATE4
    pre_mix = c["pre_mix"] if variant == 0 else None
    res = d.mhc_pre(be.put(c["R"]), be.put(c["fn"]), be.put(c["scale"]), be.put(c["base"]), variant=variant,
                    pre_mix=None if pre_mix is None else be.put(pre_mix), norm_weight=be.put(c["w"]), with_aux=True,
                    with_mix=True)
    res = {k: be.get(v) for k, v in res.items()}
    check_gates(res, c["R"], c["fn"], c["scale"], c["base"], gate, what="mhc_pre gates")
    p = pre_mix if variant == 0 else res["pre"]  # V4.1 collapses with the incoming pre-mix, V4 with the fresh pre
    _, normed, aux = sm.collapse_model(c["R"], p, c["w"], gate["rms_eps"], v4=variant == 1)
    assert_ulp(res["layer_input"], normed, "mhc_pre layer_input")
    assert_bits(res["aux"], aux, "mhc_pre aux")


def test_pre_broadcast_first_layer(be, rng):
    T = 3
    c = seam_inputs(rng, T)
    fnb = d.mhc_fn_bcast(c["fn"])
    res = d.mhc_pre(be.put(c["x"]), be.put(fnb), be.put(c["scale"]), be.put(c["base"]), norm_weight=be.put(c["w"]),
                    with_mix=True)
    res = {k: be.get(v) for k, v in res.items()}
    assert_bits(res["residual_out"], np.repeat(c["x"][:, None], 4, axis=1), "broadcast copy")
    check_gates(res, c["x"], fnb, c["scale"], c["base"], GATE41, what="broadcast gates")
    _, normed, _ = sm.collapse_model(res["residual_out"], None, c["w"], 1e-20)
    assert_ulp(res["layer_input"], normed, "first-layer layer_input = norm(e)")


@pytest.mark.parametrize("variant,T", [(0, 6), (0, 16), (1, 3)])
def test_seam(be, rng, variant, T):
    c = seam_inputs(rng, T)
    gate = GATE41 if variant == 0 else GATE4
    pre_mix = c["pre_mix"] if variant == 0 else None
    res = d.mhc_seam(*(be.put(c[k]) for k in ("x", "R", "post", "comb", "fn", "scale", "base")), variant=variant,
                     pre_mix=None if pre_mix is None else be.put(pre_mix), norm_weight=be.put(c["w"]), with_aux=True,
                     with_mix=True)
    res = {k: be.get(v) for k, v in res.items()}
    r_new = sm.post_model(c["x"], c["R"], c["post"], c["comb"])
    assert_bits(res["residual_out"], r_new, "seam residual_out (= mhc_post)")
    check_gates(res, r_new, c["fn"], c["scale"], c["base"], gate, what="seam gates")
    p = pre_mix if variant == 0 else res["pre"]
    _, normed, aux = sm.collapse_model(r_new, p, c["w"], gate["rms_eps"], v4=variant == 1)
    assert_ulp(res["layer_input"], normed, "seam layer_input")
    assert_bits(res["aux"], aux, "seam aux")


def test_plan():
    small = d.mhc_plan(6, 5120)
    # include/dsv4/mhc.h: the small-T geometry (tile_n, split_k, threads) = (6, H/256, 256)
    assert small["route"] == d.mhc.ROUTE_SMALL_T and small["tile_n"] == 6
    assert small["splits"] == 5120 // 256 and small["threads"] == 256
    big = d.mhc_plan(64, 5120)
    assert big["route"] == d.mhc.ROUTE_TENSOR_CORE and big["workspace_bytes"] >= big["splits"] * 64 * 26 * 4
    assert d.mhc_plan(6, 5120, route=d.mhc.ROUTE_TENSOR_CORE)["route"] == d.mhc.ROUTE_TENSOR_CORE
