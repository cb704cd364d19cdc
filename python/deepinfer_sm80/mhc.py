"""mhc family: hyper-connection post, collapse, gates, pre, seam, fn_bcast, fn_split and the route plan
(include/dsv4/mhc.h; H here is the hidden size).

Layouts: residual bf16 [T, 4, H] (the 4 streams of a token contiguous, any token stride); the
first layer's broadcast input is the embedding bf16 [T, H]; x, layer_input, aux bf16 [T, H]; post
fp32 [T, 4] (or [T, 4, 1]); comb fp32 [T, 4, 4]; pre, pre_mix fp32 [T, 4]; mix fp32 [T, 24];
sqrsum fp32 [T]; fn fp32 [24, 4H] (fn_bcast [24, H]); scale fp32 [3]; base fp32 [24];
norm_weight bf16 [H]. Gate constants default to the model's (DSV4_MHC_GATE_PARAMS_V41 / _V4 in
include/dsv4/mhc.h): V4.1 rms_eps 1e-20, V4 1e-6, pre/sinkhorn eps 1e-6, post_mult 2, 20 Sinkhorn
iterations; norm_eps defaults to the variant's rms_norm_eps (1e-20 V4.1, 1e-6 V4).
"""
import ctypes

from . import _structs as S
from ._lib import check, proto
from ._ops import addr, arg, as_dict, contiguous, empty, op, shape, side, struct, writable
from .tensors import strides

V41 = S.DSV4_MHC_V41
V4 = S.DSV4_MHC_V4
ROUTE_AUTO = S.DSV4_MHC_ROUTE_AUTO
ROUTE_SMALL_T = S.DSV4_MHC_ROUTE_SMALL_T
ROUTE_TENSOR_CORE = S.DSV4_MHC_ROUTE_TENSOR_CORE
ROUTE_BATCH_INVARIANT = S.DSV4_MHC_ROUTE_BATCH_INVARIANT
_MODEL_GATES = {
    V41: dict(rms_eps=1e-20, pre_eps=1e-6, sinkhorn_eps=1e-6, post_mult=2.0, sinkhorn_iters=20),
    V4: dict(rms_eps=1e-6, pre_eps=1e-6, sinkhorn_eps=1e-6, post_mult=2.0, sinkhorn_iters=20),
}
_MODEL_NORM_EPS = {V41: 1e-20, V4: 1e-6}


def gate_params(variant=V41, **overrides):
    """dsv4_mhc_gate_params_t with the model's constants of `variant`, fields overridable."""
    fields = dict(_MODEL_GATES[variant])
    fields.update(overrides)
    return struct("dsv4_mhc_gate_params_t", **fields)


def _gate(gate, variant):
    if gate is None:
        return gate_params(variant)
    if isinstance(gate, dict):
        return gate_params(variant, **gate)
    if isinstance(gate, S.dsv4_mhc_gate_params_t):
        return gate
    raise TypeError("gate must be None, a dict of overrides or a dsv4_mhc_gate_params_t")


def _norm_eps(norm_eps, variant):
    return _MODEL_NORM_EPS[variant] if norm_eps is None else norm_eps


def _residual(o, name, r, T=None, H=None):
    """[T, 4, H] with the streams of a token contiguous -> (T, H, token stride)."""
    arg(o, name, r, "bf16", 3, (T, 4, H))
    t, _, h = shape(r)
    if t and strides(r)[1] != h:
        raise ValueError(f"{o}: the 4 streams of a token of {name} must be contiguous (strides {strides(r)})")
    return t, h, strides(r)[0]


def _rows(o, name, x, T, H, optional=False):
    """[T, H] bf16 rows with any token stride."""
    if arg(o, name, x, "bf16", 2, (T, H), optional=optional) is None:
        return H  # an absent tensor's field still holds a valid stride (the library has no default)
    return strides(x)[0]


def _dense(o, name, x, kind, dims, optional=False, alt_dims=None):
    if x is None and optional:
        return None
    nd = (len(dims),) if alt_dims is None else (len(dims), len(alt_dims))
    arg(o, name, x, kind, nd)
    want = dims if len(x.shape) == len(dims) else alt_dims
    if shape(x) != tuple(want):
        raise ValueError(f"{o}: {name} has shape {shape(x)}, expected {tuple(dims)}")
    return contiguous(o, name, x)


def _out(o, name, x, anchor, dims, kind):
    if x is None:
        x = empty(anchor, dims, kind)
    writable(o, name, x)
    return x


def _params(o, fn, scale, base, K, fn_split=None):
    _dense(o, "fn", fn, "f32", (24, K))
    _dense(o, "scale", scale, "f32", (3,))
    _dense(o, "base", base, "f32", (24,))
    _dense(o, "fn_split", fn_split, "bf16", (48, K), optional=True)


def _gate_outputs(o, anchor, T, post, comb, pre, mix, with_mix):
    post = _out(o, "post", post, anchor, (T, 4), "f32")
    comb = _out(o, "comb", comb, anchor, (T, 4, 4), "f32")
    pre = _out(o, "pre", pre, anchor, (T, 4), "f32")
    mix = _out(o, "mix", mix, anchor, (T, 24), "f32") if (with_mix or mix is not None) else None
    _dense(o, "post", post, "f32", (T, 4), alt_dims=(T, 4, 1))
    _dense(o, "comb", comb, "f32", (T, 4, 4))
    _dense(o, "pre", pre, "f32", (T, 4))
    _dense(o, "mix", mix, "f32", (T, 24), optional=True)
    return post, comb, pre, mix


def mhc_post(x, residual, post, comb, *, residual_out=None, sqrsum=None, with_sqrsum=False, workspace=None):
    """R_new[k] = post[k] * x + sum_j comb[j][k] * R[j] (bit-exact fmaf order), bf16.
    Returns residual_out, or (residual_out, sqrsum) with with_sqrsum or a given sqrsum."""
    o = "mhc_post"
    T, H, rs = _residual(o, "residual", residual)
    xs = _rows(o, "x", x, T, H)
    _dense(o, "post", post, "f32", (T, 4), alt_dims=(T, 4, 1))
    _dense(o, "comb", comb, "f32", (T, 4, 4))
    anchor = side(o, x=x, residual=residual, post=post, comb=comb, residual_out=residual_out, sqrsum=sqrsum)
    residual_out = _out(o, "residual_out", residual_out, anchor, (T, 4, H), "bf16")
    _, _, ros = _residual(o, "residual_out", residual_out, T, H)
    want_sq = with_sqrsum or sqrsum is not None
    if want_sq:
        sqrsum = _out(o, "sqrsum", sqrsum, anchor, (T,), "f32")
        _dense(o, "sqrsum", sqrsum, "f32", (T,))
    desc = struct("dsv4_mhc_post_desc_t", tokens=T, hidden=H, x_stride=xs, residual_stride=rs, residual_out_stride=ros)
    args = struct("dsv4_mhc_post_args_t", x=addr(x), residual=addr(residual), post=addr(post), comb=addr(comb),
                  residual_out=addr(residual_out), sqrsum=addr(sqrsum))
    op(o)(desc, args, anchor, workspace)
    return (residual_out, sqrsum) if want_sq else residual_out


def mhc_collapse(residual, pre_mix=None, norm_weight=None, *, variant=V41, norm_eps=None, out=None, aux=None,
                 with_aux=False, workspace=None):
    """out = [RMSNorm](bf16(sum_j p[j] R[j])) with p = pre_mix (None: stream 0); aux = the
    stream mean. Returns out, or (out, aux) with with_aux or a given aux."""
    o = "mhc_collapse"
    T, H, rs = _residual(o, "residual", residual)
    _dense(o, "pre_mix", pre_mix, "f32", (T, 4), optional=True)
    _dense(o, "norm_weight", norm_weight, "bf16", (H,), optional=True)
    anchor = side(o, residual=residual, pre_mix=pre_mix, norm_weight=norm_weight, out=out, aux=aux)
    out = _out(o, "out", out, anchor, (T, H), "bf16")
    os_ = _rows(o, "out", out, T, H)
    want_aux = with_aux or aux is not None
    aux = _out(o, "aux", aux, anchor, (T, H), "bf16") if want_aux else None
    as_ = _rows(o, "aux", aux, T, H, optional=True)
    desc = struct("dsv4_mhc_collapse_desc_t", tokens=T, hidden=H, variant=variant,
                  norm_eps=_norm_eps(norm_eps, variant), residual_stride=rs, out_stride=os_, aux_stride=as_)
    args = struct("dsv4_mhc_collapse_args_t", residual=addr(residual), pre_mix=addr(pre_mix),
                  norm_weight=addr(norm_weight), out=addr(out), aux=addr(aux))
    op(o)(desc, args, anchor, workspace)
    return (out, aux) if want_aux else out


def _source(o, residual):
    """Broadcast (first layer) when the input is the embedding [T, H]; else a residual [T, 4, H]."""
    if residual is not None and len(residual.shape) == 2:
        arg(o, "residual", residual, "bf16", 2)
        T, H = shape(residual)
        return T, H, strides(residual)[0], 1
    T, H, rs = _residual(o, "residual", residual)
    return T, H, rs, 0


def mhc_gates(residual, fn, scale, base, *, gate=None, route=ROUTE_AUTO, sqrsum=None, post=None, comb=None,
              pre=None, mix=None, with_mix=False, fn_split=None, workspace=None):
    """Projection + RMS + gates + Sinkhorn. residual [T, 4, H] (or the embedding [T, H] with
    fn_bcast [24, H]: the first layer's broadcast). fn_split: mhc_fn_split(fn) made once after
    loading (the tensor-core route then skips its per-call split; same bits). Returns a dict
    post, comb, pre (+ mix)."""
    o = "mhc_gates"
    T, H, rs, bc = _source(o, residual)
    _params(o, fn, scale, base, H if bc else 4 * H, fn_split)
    _dense(o, "sqrsum", sqrsum, "f32", (T,), optional=True)
    anchor = side(o, residual=residual, fn=fn, scale=scale, base=base, sqrsum=sqrsum, post=post, comb=comb, pre=pre,
                  mix=mix, fn_split=fn_split)
    post, comb, pre, mix = _gate_outputs(o, anchor, T, post, comb, pre, mix, with_mix)
    desc = struct("dsv4_mhc_gates_desc_t", tokens=T, hidden=H, broadcast=bc, route=route, gate=_gate(gate, V41),
                  residual_stride=rs)
    args = struct("dsv4_mhc_gates_args_t", residual=addr(residual), fn=addr(fn), scale=addr(scale), base=addr(base),
                  sqrsum=addr(sqrsum), post=addr(post), comb=addr(comb), pre=addr(pre), mix=addr(mix),
                  fn_split=addr(fn_split))
    op(o)(desc, args, anchor, workspace)
    res = dict(post=post, comb=comb, pre=pre)
    if mix is not None:
        res["mix"] = mix
    return res


def mhc_pre(residual, fn, scale, base, *, variant=V41, gate=None, norm_eps=None, pre_mix=None, norm_weight=None,
            route=ROUTE_AUTO, post=None, comb=None, pre=None, layer_input=None, residual_out=None, aux=None, mix=None,
            with_aux=False, with_mix=False, fn_split=None, workspace=None):
    """Gates of a residual plus the sublayer input (V4 mhc_pre, V4.1 mhc_pre_delayed). With the
    embedding [T, H] as residual (first layer), the [T, 4, H] copy is written to residual_out.
    fn_split as in mhc_gates. Returns a dict post, comb, pre, layer_input (+ residual_out, aux,
    mix)."""
    o = "mhc_pre"
    T, H, rs, bc = _source(o, residual)
    _params(o, fn, scale, base, H if bc else 4 * H, fn_split)
    _dense(o, "pre_mix", pre_mix, "f32", (T, 4), optional=True)
    _dense(o, "norm_weight", norm_weight, "bf16", (H,), optional=True)
    anchor = side(o, residual=residual, fn=fn, scale=scale, base=base, pre_mix=pre_mix, norm_weight=norm_weight,
                  post=post, comb=comb, pre=pre, layer_input=layer_input, residual_out=residual_out, aux=aux, mix=mix,
                  fn_split=fn_split)
    post, comb, pre, mix = _gate_outputs(o, anchor, T, post, comb, pre, mix, with_mix)
    layer_input = _out(o, "layer_input", layer_input, anchor, (T, H), "bf16")
    ls = _rows(o, "layer_input", layer_input, T, H)
    ros = 0
    if bc:
        residual_out = _out(o, "residual_out", residual_out, anchor, (T, 4, H), "bf16")
        _, _, ros = _residual(o, "residual_out", residual_out, T, H)
    elif residual_out is not None:
        raise ValueError(f"{o}: residual_out is only written by the broadcast (first-layer) call")
    want_aux = with_aux or aux is not None
    aux = _out(o, "aux", aux, anchor, (T, H), "bf16") if want_aux else None
    as_ = _rows(o, "aux", aux, T, H, optional=True)
    desc = struct("dsv4_mhc_pre_desc_t", tokens=T, hidden=H, variant=variant, broadcast=bc, route=route,
                  gate=_gate(gate, variant), norm_eps=_norm_eps(norm_eps, variant), residual_stride=rs,
                  residual_out_stride=ros, layer_input_stride=ls, aux_stride=as_)
    args = struct("dsv4_mhc_pre_args_t", residual=addr(residual), fn=addr(fn), scale=addr(scale), base=addr(base),
                  pre_mix=addr(pre_mix), norm_weight=addr(norm_weight), post=addr(post), comb=addr(comb),
                  pre=addr(pre), layer_input=addr(layer_input), residual_out=addr(residual_out), aux=addr(aux),
                  mix=addr(mix), fn_split=addr(fn_split))
    op(o)(desc, args, anchor, workspace)
    res = dict(post=post, comb=comb, pre=pre, layer_input=layer_input)
    for k, v in (("residual_out", residual_out if bc else None), ("aux", aux), ("mix", mix)):
        if v is not None:
            res[k] = v
    return res


def mhc_seam(x, residual, post, comb, fn, scale, base, *, variant=V41, gate=None, norm_eps=None, pre_mix=None,
             norm_weight=None, route=ROUTE_AUTO, residual_out=None, post_out=None, comb_out=None, pre_out=None,
             layer_input=None, aux=None, mix=None, with_aux=False, with_mix=False, fn_split=None, workspace=None):
    """Post of this sublayer fused with the pre of the next site (V4 mhc_fused_post_pre, V4.1
    mhc_fused_post_pre_delayed). fn_split as in mhc_gates. Returns a dict residual_out, post,
    comb, pre, layer_input (+ aux, mix); post/comb/pre are the next site's gates."""
    o = "mhc_seam"
    T, H, rs = _residual(o, "residual", residual)
    xs = _rows(o, "x", x, T, H)
    _dense(o, "post", post, "f32", (T, 4), alt_dims=(T, 4, 1))
    _dense(o, "comb", comb, "f32", (T, 4, 4))
    _params(o, fn, scale, base, 4 * H, fn_split)
    _dense(o, "pre_mix", pre_mix, "f32", (T, 4), optional=True)
    _dense(o, "norm_weight", norm_weight, "bf16", (H,), optional=True)
    anchor = side(o, x=x, residual=residual, post=post, comb=comb, fn=fn, scale=scale, base=base, pre_mix=pre_mix,
                  norm_weight=norm_weight, residual_out=residual_out, post_out=post_out, comb_out=comb_out,
                  pre_out=pre_out, layer_input=layer_input, aux=aux, mix=mix, fn_split=fn_split)
    residual_out = _out(o, "residual_out", residual_out, anchor, (T, 4, H), "bf16")
    _, _, ros = _residual(o, "residual_out", residual_out, T, H)
    post_out, comb_out, pre_out, mix = _gate_outputs(o, anchor, T, post_out, comb_out, pre_out, mix, with_mix)
    layer_input = _out(o, "layer_input", layer_input, anchor, (T, H), "bf16")
    ls = _rows(o, "layer_input", layer_input, T, H)
    want_aux = with_aux or aux is not None
    aux = _out(o, "aux", aux, anchor, (T, H), "bf16") if want_aux else None
    as_ = _rows(o, "aux", aux, T, H, optional=True)
    desc = struct("dsv4_mhc_seam_desc_t", tokens=T, hidden=H, variant=variant, route=route, gate=_gate(gate, variant),
                  norm_eps=_norm_eps(norm_eps, variant), x_stride=xs, residual_stride=rs, residual_out_stride=ros,
                  layer_input_stride=ls, aux_stride=as_)
    args = struct("dsv4_mhc_seam_args_t", x=addr(x), residual=addr(residual), post=addr(post), comb=addr(comb),
                  fn=addr(fn), scale=addr(scale), base=addr(base), pre_mix=addr(pre_mix),
                  norm_weight=addr(norm_weight), residual_out=addr(residual_out), post_out=addr(post_out),
                  comb_out=addr(comb_out), pre_out=addr(pre_out), layer_input=addr(layer_input), aux=addr(aux),
                  mix=addr(mix), fn_split=addr(fn_split))
    op(o)(desc, args, anchor, workspace)
    res = dict(residual_out=residual_out, post=post_out, comb=comb_out, pre=pre_out, layer_input=layer_input)
    for k, v in (("aux", aux), ("mix", mix)):
        if v is not None:
            res[k] = v
    return res


def mhc_fn_bcast(fn, out=None, workspace=None):
    """fn_bcast[m][h] = ((fn[m][h] + fn[m][H+h]) + fn[m][2H+h]) + fn[m][3H+h]; fn fp32 [24, 4H]."""
    o = "mhc_fn_bcast"
    arg(o, "fn", fn, "f32", 2, (24, None))
    contiguous(o, "fn", fn)
    K = shape(fn)[1]
    if K % 4:
        raise ValueError(f"{o}: fn has {K} columns, not a multiple of 4 (expected [24, 4H])")
    anchor = side(o, fn=fn, out=out)
    out = _out(o, "out", out, anchor, (24, K // 4), "f32")
    _dense(o, "out", out, "f32", (24, K // 4))
    desc = struct("dsv4_mhc_fn_bcast_desc_t", hidden=K // 4)
    args = struct("dsv4_mhc_fn_bcast_args_t", fn=addr(fn), fn_bcast=addr(out))
    op(o)(desc, args, anchor, workspace)
    return out


def mhc_fn_split(fn, broadcast=False, out=None, workspace=None):
    """fn's two-term bf16 split for the tensor-core route, made once after loading (fn is a
    weight): out bf16 [48, K], rows 0..23 hi = bf16(fn), 24..47 lo = bf16(fn - hi). fn fp32
    [24, 4H], or fn_bcast [24, H] with broadcast=True. Pass it as fn_split= to mhc_gates,
    mhc_pre and mhc_seam."""
    o = "mhc_fn_split"
    arg(o, "fn", fn, "f32", 2, (24, None))
    contiguous(o, "fn", fn)
    K = shape(fn)[1]
    if not broadcast and K % 4:
        raise ValueError(f"{o}: fn has {K} columns, not a multiple of 4 (expected [24, 4H])")
    anchor = side(o, fn=fn, out=out)
    out = _out(o, "out", out, anchor, (48, K), "bf16")
    _dense(o, "out", out, "bf16", (48, K))
    desc = struct("dsv4_mhc_fn_split_desc_t", hidden=K if broadcast else K // 4, broadcast=int(bool(broadcast)))
    args = struct("dsv4_mhc_fn_split_args_t", fn=addr(fn), fn_split=addr(out))
    op(o)(desc, args, anchor, workspace)
    return out


def mhc_plan(tokens, hidden, broadcast=False, route=ROUTE_AUTO):
    """The projection route and split geometry a gates / pre / seam call will use (host only)."""
    plan = struct("dsv4_mhc_plan_t")
    check(proto("dsv4_mhc_plan")(tokens, hidden, int(bool(broadcast)), route, ctypes.byref(plan)))
    return as_dict(plan)
