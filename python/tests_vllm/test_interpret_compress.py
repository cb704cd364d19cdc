"""Conformance, compressor (V4.1 and V4.0), inverse RoPE, Engram lookup and mHC: libdsv4's CPU path
against vLLM 0.33.0's Triton kernels (interpreter, gpu_semantics.py) or its PyTorch references."""
import pytest
import torch
from cases import (V4_POISON, bf16, cos_sin, gen, v4_case, v4_decode, v4_indexer_case, v4_out_mask,
                   v4_record_slots, v4_state_decode)
from conftest import mode

from deepinfer_sm80 import mhc as dmhc
from deepinfer_sm80 import ops

pytestmark = mode("interpret")


def _bf16_ulps(a, b):
    """Per-element distance in bf16 units in the last place (same-sign ordering of the bits)."""
    def key(x):
        i = x.view(torch.int16).int()
        return torch.where(i < 0, -(i & 0x7FFF), i)
    return (key(a) - key(b)).abs()


def test_compress_ratio1(seed):
    """fused_save_compress_norm, ratio 1. Bound: <= 1 bf16 ulp per latent element (the RMS factor's
    reduction order and rsqrt); untouched rows keep their poison."""
    from vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache import fused_save_compress_norm

    g = gen(seed)
    T = 24
    kv = torch.randn(T, 512, generator=g) * 3
    gamma = bf16(g, 512)
    slots = torch.arange(T, dtype=torch.int64)
    slots[torch.rand(T, generator=g) < 0.25] = -1
    positions = torch.arange(T, dtype=torch.int64)
    want = torch.full((T, 512), -3.0, dtype=torch.bfloat16)
    have = want.clone()
    fused_save_compress_norm(kv, positions, None, slots, None, None, gamma, 1e-6, 1, want)
    ops.compress(kv, gamma, have, slots, None, None, None, None, ratio=1, eps=1e-6)
    ulps = _bf16_ulps(want, have)
    print(f"compress ratio 1: max {int(ulps.max())} bf16 ulp, {int((ulps > 0).sum())} of {ulps.numel()} differ")
    assert int(ulps.max()) <= 1


def test_compress_ratio2(seed):
    """fused_save_compress_norm, ratio 2 with its fp32 ring: latent within 1 bf16 ulp, ring bit-exact."""
    from vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache import fused_save_compress_norm

    g = gen(seed)
    cap, blocks = 8, 4
    qlen = [5, 1, 6]
    start = [3, 10, 0]
    positions = torch.cat([torch.arange(s, s + n) for s, n in zip(start, qlen)]).to(torch.int64)
    T = positions.numel()
    qsl = torch.tensor([0, 5, 6, 12], dtype=torch.int32)
    req = torch.repeat_interleave(torch.arange(3, dtype=torch.int32), torch.tensor(qlen))
    block_of = torch.tensor([1, 3, 2])
    ring_slot = (block_of[req.long()] * cap + positions % cap).to(torch.int64)
    kv = torch.randn(T, 1024, generator=g) * 2
    gamma = bf16(g, 512)
    ring_w = torch.randn(blocks, cap, 1024, generator=g)
    ring_h = ring_w.clone()
    want = torch.full((T, 512), -3.0, dtype=torch.bfloat16)
    have = want.clone()
    fused_save_compress_norm(kv, positions, ring_w, ring_slot, qsl, req, gamma, 1e-6, 2, want)
    ops.compress(kv, gamma, have, None, positions, ring_slot, qsl, ring_h.view(-1, 1024), ratio=2, eps=1e-6,
                 ring_cap=cap)
    ulps = _bf16_ulps(want, have)
    print(f"compress ratio 2: max {int(ulps.max())} bf16 ulp, {int((ulps > 0).sum())} of {ulps.numel()} differ")
    assert int(ulps.max()) <= 1
    assert torch.equal(ring_w, ring_h)


@pytest.mark.parametrize("heads,groups", [(16, 2), (8, 1)])
def test_inv_rope(seed, heads, groups):
    """fused_inv_rope_fp8_quant with quantize=False (the bf16 wo_a path). Bound: <= 1 bf16 ulp, and
    bit-exact against the same formula with the GPU's contraction: ptxas fuses x*cos + p*sin into
    fma(x, cos, p*sin), which the interpreter evaluates with two roundings."""
    from vllm.models.deepseek_v4.common.ops.fused_inv_rope_fp8_quant import fused_inv_rope_fp8_quant

    g = gen(seed)
    T, pad = 7, 16
    o = bf16(g, T, pad, 512)
    positions = torch.randint(0, 500, (T,), generator=g, dtype=torch.int64)
    table = cos_sin(g)
    want, _ = fused_inv_rope_fp8_quant(o[:, :heads], positions, table, n_groups=groups,
                                       heads_per_group=heads // groups, quantize=False)
    have = o.clone()
    ops.inv_rope(have, positions, table, num_heads=heads)
    assert torch.equal(have[:, heads:].view(torch.int16), o[:, heads:].view(torch.int16))  # padding untouched
    ulps = _bf16_ulps(want.reshape(T, heads, 512), have[:, :heads])
    print(f"inv_rope: max {int(ulps.max())} bf16 ulp, {int((ulps > 0).sum())} of {ulps.numel()} differ")
    assert int(ulps.max()) <= 1
    # vLLM's formula, contracted: a' = fma(a, c, b*s), b' = fma(b, c, -(a*s)) (fp64 holds a*c exactly).
    a, b = o[:, :heads, 448::2].double(), o[:, :heads, 449::2].double()
    c, s_ = (table[positions, None, :32].double(), table[positions, None, 32:].double())
    bs, as_ = (b * s_).float().double(), (a * s_).float().double()
    fused = torch.stack([(a * c + bs).float(), (b * c - as_).float()], -1).flatten(-2).to(torch.bfloat16)
    assert torch.equal(fused.view(torch.int16), have[:, :heads, 448:].view(torch.int16))


def test_engram_lookup_through_vllm_launch(seed):
    """vLLM's _engram_lookup_kernel against the plugin's override launched the way vLLM launches it."""
    from vllm.models.deepseek_v41.common import engram

    from deepinfer_sm80.vllm.hooks import engram_lookup_impl

    g = gen(seed)
    rows, D, T, total, local, head_start = 50, 256, 6, 6, 4, 1
    values = (torch.randn(rows, D, generator=g) * 4).clamp(-448, 448).to(torch.float8_e4m3fn)
    scales = torch.randint(110, 135, (rows, D // 32), generator=g, dtype=torch.uint8)
    ids = torch.randint(90, 90 + rows + 10, (T, total), generator=g, dtype=torch.int32)  # some not owned
    args = (values, scales, ids, ids, None, 90, 90 + rows, T * local, ids.stride(0), ids.stride(1))
    kw = dict(HEAD_START=head_start, LOCAL_HEADS=local, TOTAL_HEADS=total, DIM=D, QUANT_BLOCK=32, BLOCK_R=16,
              GRID=2, SORTED=False, PACKED=False, OUT_STRIDE=local * D, PEER_ROWS=0)
    want = torch.full((T, local, D), 5.0, dtype=torch.bfloat16)
    have = want.clone()
    kernel = getattr(engram._engram_lookup_kernel, "_impl", None)
    assert kernel is None, "the kernel is already overridden in this process"
    engram._engram_lookup_kernel[(2,)](*args[:4], want, *args[5:], **kw)
    engram_lookup_impl(*args[:4], have, *args[5:], **kw)
    assert torch.equal(want.view(torch.int16), have.view(torch.int16))
    with pytest.raises(NotImplementedError, match="SORTED"):
        engram_lookup_impl(*args[:4], have, *args[5:], **{**kw, "SORTED": True})


def _mhc_inputs(g, T=5, H=256):
    residual = bf16(g, T, 4, H)
    x = bf16(g, T, H)
    post = torch.rand(T, 4, 1, generator=g) * 2
    comb = torch.rand(T, 4, 4, generator=g)
    pre = torch.rand(T, 4, generator=g)
    return residual, x, post, comb, pre


def test_mhc_post(seed):
    """mhc_post_torch (vLLM's reference of mhc_post_tilelang). Bound: <= 1 bf16 ulp: the reference
    sums the four streams with einsum and adds post*x last; libdsv4 fixes an fmaf order."""
    from vllm.model_executor.kernels.mhc.torch import mhc_post_torch

    residual, x, post, comb, _ = _mhc_inputs(gen(seed))
    want = mhc_post_torch(x, residual, post, comb)
    have = dmhc.mhc_post(x, residual, post, comb)
    ulps = _bf16_ulps(want, have)
    print(f"mhc_post: max {int(ulps.max())} bf16 ulp, {int((ulps > 0).sum())} of {ulps.numel()} differ")
    assert int(ulps.max()) <= 1


def test_hc_collapse(seed):
    """hc_collapse_triton (Triton, interpreter): bf16(sum_j pre[j] x[j]), bit-exact."""
    from vllm.model_executor.kernels.mhc.triton import hc_collapse_triton

    residual, _, _, _, pre = _mhc_inputs(gen(seed))
    want = hc_collapse_triton(residual, pre)
    have = dmhc.mhc_collapse(residual, pre)
    ulps = _bf16_ulps(want, have)
    print(f"hc_collapse: max {int(ulps.max())} bf16 ulp, {int((ulps > 0).sum())} of {ulps.numel()} differ")
    assert int(ulps.max()) == 0


def test_mhc_pre_delayed(seed):
    """mhc_pre_delayed_torch (vLLM's reference): post/comb/next pre-mix within 1e-5 absolute,
    layer input (no norm) within 1 bf16 ulp. The reference projects in fp32 with torch's matmul
    order; libdsv4 with its own split order (tolerances as in the library's gate tests)."""
    from vllm.model_executor.kernels.mhc.torch import mhc_pre_delayed_torch

    g = gen(seed)
    residual, _, _, _, pre_mix = _mhc_inputs(g)
    H = residual.shape[-1]
    fn = torch.randn(24, 4 * H, generator=g) * 0.02
    scale = torch.rand(3, generator=g) + 0.5
    base = torch.randn(24, generator=g) * 0.1
    consts = (1e-20, 1e-6, 1e-6, 2.0, 20)
    post, comb, layer_input, pre = mhc_pre_delayed_torch(residual, fn, scale, base, *consts, pre_mix=pre_mix)
    r = dmhc.mhc_pre(residual, fn, scale, base, variant=dmhc.V41, pre_mix=pre_mix,
                     gate=dict(rms_eps=1e-20, pre_eps=1e-6, sinkhorn_eps=1e-6, post_mult=2.0, sinkhorn_iters=20))
    errs = {k: float((a.reshape(b.shape) - b).abs().max()) for k, a, b in
            (("post", r["post"], post), ("comb", r["comb"], comb), ("pre", r["pre"], pre))}
    ulps = _bf16_ulps(layer_input, r["layer_input"])
    print(f"mhc_pre: {errs}, layer input max {int(ulps.max())} bf16 ulp")
    assert max(errs.values()) <= 1e-5
    assert int(ulps.max()) <= 1


# ---- the V4.0 compressor (ratio 4 and 128) -------------------------------------------------------
_V4_INPUTS = ("kv_score", "ape", "positions", "state_slot", "req_idx", "block_table", "gamma", "cos_sin_cache",
              "slot_mapping")


def _v4_upstream(c):
    """vLLM's two launches on copies of the state and cache: SavePartialStatesKernel.kernel, then
    one program per token of _fused_kv_compress_norm_rope_insert_sparse_attn as
    compress_norm_rope_store_triton launches it at head 512 (fp8_ds_mla records), or of
    _fused_kv_compress_norm_rope_insert_indexer_attn as
    _FUSED_KV_COMPRESS_NORM_ROPE_INSERT_INDEXER_TRITON_KERNEL launches it at head 128 without
    MXFP4 (one 128-dim quant block, fp32 scale: indexer states)."""
    from vllm.models.deepseek_v4.common.ops.fused_compress_quant_cache import (
        _fused_kv_compress_norm_rope_insert_indexer_attn as indexer_kernel)
    from vllm.models.deepseek_v4.common.ops.fused_compress_quant_cache import (
        _fused_kv_compress_norm_rope_insert_sparse_attn as compress_kernel)
    from vllm.models.deepseek_v4.common.ops.save_partial_states import SavePartialStatesKernel

    state, flat = c["state"].clone(), c["flat"].clone()
    cache = flat.as_strided(c["cache"].shape, c["cache"].stride())
    ratio, width, B, N = c["ratio"], c["ape"].shape[1], state.shape[1], c["gamma"].numel()
    kv, score = c["kv_score"].split([width, width], dim=-1)
    T = kv.shape[0]
    SavePartialStatesKernel.kernel[(T,)](
        kv, kv.stride(0), score, score.stride(0), c["ape"], c["ape"].stride(0), c["positions"], state,
        state.stride(0), state.stride(1), c["state_slot"], B, HEAD_SIZE=width, TRITON_BLOCK_SIZE=width,
        STATE_WIDTH=width, COMPRESS_RATIO=ratio)
    args = (state, state.stride(0), state.stride(1), c["req_idx"], c["positions"], c["state_slot"], c["block_table"],
            c["block_table"].stride(0), B, c["gamma"], 1e-6, c["cos_sin_cache"], c["cos_sin_cache"].stride(0), cache,
            c["slot_mapping"], cache.shape[1])
    common = dict(HEAD_SIZE=N, TRITON_BLOCK_SIZE=N, STATE_WIDTH=width, COMPRESS_RATIO=ratio, OVERLAP=ratio == 4,
                  ROPE_HEAD_DIM=64, FP8_MAX=448.0, KV_BLOCK_STRIDE=cache.stride(0))
    if N == 512:
        compress_kernel[(T,)](*args, QUANT_BLOCK=64, TOKEN_STRIDE=576, SCALE_DIM=8, SANITIZE_CACHE_NANS=False,
                              num_warps=4, **common)
    else:
        indexer_kernel[(T,)](*args, QUANT_BLOCK=128, TOKEN_STRIDE=128, SCALE_DIM=4, MX_SCALE=False, num_warps=1,
                             **common)
    return state, flat


def _v4_ours(c, between=None, **swap):
    """ops.compress_v4 on copies of the state and cache. swap replaces inputs; between(state), when
    given, edits the state after the save step and before the records (then two calls: no record
    slots, then no state slots), to stand in for a kernel that reads the wrong rows."""
    a = {k: swap.get(k, c[k]) for k in _V4_INPUTS}
    state, flat = c["state"].clone(), c["flat"].clone()
    cache = flat.as_strided(c["cache"].shape, c["cache"].stride())
    kw = dict(ratio=c["ratio"], eps=1e-6, page_tokens=c["P"], head_dim=c["gamma"].numel())
    if between is None:
        ops.compress_v4(*(a[k] for k in _V4_INPUTS), state, cache, **kw)
        return state, flat
    none = torch.full_like(c["slot_mapping"], -1)
    ops.compress_v4(*(a[k] for k in _V4_INPUTS[:-1]), none, state, cache, **kw)
    between(state)
    ops.compress_v4(*({**a, "state_slot": none}[k] for k in _V4_INPUTS), state, cache, **kw)
    return state, flat


def _e4m3_step(v, scale):
    """The spacing of decoded e4m3 values around v under its block's scale (scale [7])."""
    s = scale.repeat_interleave(64)
    m = (v.abs() / s).clamp_min(2.0**-6)
    return torch.exp2(torch.floor(torch.log2(m)) - 3) * s


def _bf16_ulp(v):
    return torch.exp2(torch.floor(torch.log2(v.abs().clamp_min(2.0**-126))) - 7)


def _v4_deviation(c, up, ours):
    """Our records against upstream's, per element in units of the bound: a nope dim within one e4m3
    step at its magnitude under its block's scale (the larger of the two records' steps), a RoPE
    dim within one bf16 ulp plus 2^-14 of its pair's norm (the fp32 evaluation orders). Returns the
    worst (inf for a non-finite value or a differing pad byte), the elements that differ at all,
    and the elements compared."""
    worst, differ, total = 0.0, 0, 0
    for s in v4_record_slots(c):
        un, us, ur, upad = v4_decode(up, c["page"], c["P"], s)
        on, os, orr, opad = v4_decode(ours, c["page"], c["P"], s)
        pair = (ur[0::2] ** 2 + ur[1::2] ** 2).sqrt().repeat_interleave(2)
        dev = torch.cat([(un - on).abs() / torch.maximum(_e4m3_step(un, us), _e4m3_step(on, os)),
                         (ur - orr).abs() / (_bf16_ulp(torch.maximum(ur.abs(), orr.abs())) + 2.0**-14 * pair)])
        dev = torch.where(torch.isfinite(dev), dev, torch.inf)
        worst = max(worst, float(dev.max()) if upad == opad else float("inf"))
        differ += int((torch.cat([un, ur]) != torch.cat([on, orr])).sum())
        total += 512
    return worst, differ, total


def _v4_bugs(c):
    """Bugs the bound must reject, each stood in for by what our call is given: swapped inputs, or a
    state edited between the save step and the records (_v4_ours)."""
    ratio, B, table, N = c["ratio"], c["state"].shape[1], c["block_table"], c["gamma"].numel()
    cs = c["cos_sin_cache"]
    at_index = cs.clone()
    for p in c["positions"].tolist():
        if p >= 0 and (p + 1) % ratio == 0:
            at_index[p + 1 - ratio] = cs[(p + 1 - ratio) // ratio]

    def older_row(state):  # window rows one position early
        src = state.clone()
        for b in range(table.shape[0]):
            for q in range(table.shape[1] * B - 1, 0, -1):
                state[table[b, q // B], q % B] = src[table[b, (q - 1) // B], (q - 1) % B]

    def older_half(state):  # the newer half of an overlapping window read from the older half
        state[..., N:2 * N] = state[..., 0:N]
        state[..., 3 * N:4 * N] = state[..., 2 * N:3 * N]

    bugs = {
        "ape row (pos + 1) % ratio": dict(ape=c["ape"].roll(-1, 0)),
        "no ape": dict(ape=torch.zeros_like(c["ape"])),
        "RoPE at pos": dict(cos_sin_cache=cs.roll(-(ratio - 1), 0)),
        "RoPE at pos // ratio": dict(cos_sin_cache=at_index),
        "window one row early": dict(between=older_row),
    }
    if ratio == 4:
        bugs["older half for j >= ratio"] = dict(between=older_half)
    return bugs


@pytest.mark.parametrize("ratio", [4, 128])
def test_compress_v4(seed, ratio):
    """SavePartialStatesKernel.kernel then _fused_kv_compress_norm_rope_insert_sparse_attn (the
    V4.0 compressor, head 512, fp8_ds_mla records) against ops.compress_v4: the state cache
    bit-identical; every record within the bound of _v4_deviation (upstream's tl.softmax, exp and
    rsqrt and its summation order against the library's fixed ones), at most 1% of its elements
    differing at all; every other byte of the cache keeps its poison. Then the bound must reject
    each bug of _v4_bugs."""
    c = v4_case(gen(seed), ratio)
    up, ours = _v4_upstream(c), _v4_ours(c)
    slots = v4_record_slots(c)
    assert len(slots) >= 2
    outside = ~v4_out_mask(c["flat"], c["page"], c["P"], slots, 576, 8)
    for name, (_, flat) in (("upstream", up), ("libdsv4", ours)):
        assert (flat[outside] == V4_POISON).all(), f"{name} wrote bytes outside the records"
        for s in slots:
            nope, _, rope, _ = v4_decode(flat, c["page"], c["P"], s)
            assert torch.isfinite(nope).all() and torch.isfinite(rope).all(), f"{name}: slot {s}"
    assert not torch.equal(up[0], c["state"])
    assert torch.equal(up[0].view(torch.int32), ours[0].view(torch.int32)), "state cache differs"
    worst, differ, total = _v4_deviation(c, up[1], ours[1])
    print(f"compress_v4 ratio {ratio}: {len(slots)} records, max deviation {worst:.3f} of the bound, "
          f"{differ} of {total} elements differ")
    assert worst <= 1 and differ <= total // 100
    for what, kw in _v4_bugs(c).items():
        bad, _, _ = _v4_deviation(c, up[1], _v4_ours(c, **kw)[1])
        print(f"  stand-in bug '{what}': max deviation {bad:.1f} of the bound")
        assert bad > 1, f"the bound accepts the bug '{what}'"


# ---- the V4.0 indexer compressor (head 128, indexer states) -------------------------------------
def _e4m3_step_at(v, scale):
    """The spacing of decoded e4m3 values at magnitude |v| under one power-of-two scale."""
    m = (v.abs() / scale).clamp_min(2.0**-6)
    return torch.exp2(torch.floor(torch.log2(m)) - 3) * scale


def _v4_state_deviation(c, up, ours):
    """Our indexer states against upstream's. Scales: equal, or a factor 2 apart only where the row's
    absmax sits at the boundary 448 * 2^e of the smaller scale (both rows' decoded absmax within one
    e4m3 step of 448 * smaller scale: the two bf16 rows' absmax one bf16 ulp apart across it). Each
    element within one e4m3 step at the larger of the two scales and the larger magnitude (one
    rounding flipped: a bf16 value one ulp apart from fp32 evaluation orders straddling an e4m3
    midpoint, or the two scales). Returns the worst deviation in units of that step (inf for a
    non-finite value or scales apart otherwise), the elements that differ in value, the signed
    zeros (+0 against -0, the same value), the scale flips, and the elements compared."""
    worst, differ, zeros, flips, total = 0.0, 0, 0, 0, 0
    for s in v4_record_slots(c):
        uv, us, uc = v4_state_decode(up, c["page"], c["P"], s)
        ov, os, oc = v4_state_decode(ours, c["page"], c["P"], s)
        lo, hi = min(us, os), max(us, os)
        if us != os:
            at_boundary = all(abs(float(v.abs().max()) / (448 * lo) - 1) <= 1 / 14 for v in (uv, ov))
            flips += 1
            if hi != 2 * lo or not at_boundary:
                worst = float("inf")
        dev = (uv - ov).abs() / _e4m3_step_at(torch.maximum(uv.abs(), ov.abs()), hi)
        dev = torch.where(torch.isfinite(dev), dev, torch.inf)
        worst = max(worst, float(dev.max()))
        differ += int((uv != ov).sum())
        zeros += int(((uc != oc) & (uv == 0) & (ov == 0)).sum())
        total += 128
    return worst, differ, zeros, flips, total


@pytest.mark.parametrize("ratio", [4, 128])
def test_compress_v4_indexer(seed, ratio):
    """SavePartialStatesKernel.kernel then _fused_kv_compress_norm_rope_insert_indexer_attn (the V4.0
    lightning indexer's compressor, head 128, fp8 indexer states with an fp32 scale) against
    ops.compress_v4 with head_dim 128: the state cache bit-identical; every indexer state within the
    bound of _v4_state_deviation (upstream's tl.softmax, exp and rsqrt, its summation order and its
    unfused RoPE products against the library's fixed ones move a value by fp32 ulps, which can flip
    a bf16 rounding and then a code), at most 1% of its elements differing in value; every other
    byte of the cache (page padding included) keeps its poison in both. Ratio 4 is the model's case
    (the indexer exists on ratio-4 layers); ratio 128 runs the same kernel unchanged. Upstream
    passes the NoPE dims through its rotation with (cos, sin) = (1, 0) where the library copies
    them: the same values, a zero may differ in sign. Then the bound must reject each bug of
    _v4_bugs."""
    c = v4_indexer_case(gen(seed), ratio)
    up, ours = _v4_upstream(c), _v4_ours(c)
    slots = v4_record_slots(c)
    assert len(slots) >= 2
    outside = ~v4_out_mask(c["flat"], c["page"], c["P"], slots, 128, 4)
    for name, (_, flat) in (("upstream", up), ("libdsv4", ours)):
        assert (flat[outside] == V4_POISON).all(), f"{name} wrote bytes outside the indexer states"
        for s in slots:
            v, scale, _ = v4_state_decode(flat, c["page"], c["P"], s)
            assert torch.isfinite(v).all() and scale > 0, f"{name}: slot {s}"
    assert not torch.equal(up[0], c["state"])
    assert torch.equal(up[0].view(torch.int32), ours[0].view(torch.int32)), "state cache differs"
    worst, differ, zeros, flips, total = _v4_state_deviation(c, up[1], ours[1])
    print(f"compress_v4 head 128 ratio {ratio}: {len(slots)} states, max deviation {worst:.3f} e4m3 steps, "
          f"{differ} of {total} elements differ, {zeros} signed zeros, {flips} scale flips")
    assert worst <= 1 and differ <= total // 100
    bugs = {**_v4_bugs(c), "gamma one dim off": dict(gamma=c["gamma"].roll(1))}
    for what, kw in bugs.items():
        bad = _v4_state_deviation(c, up[1], _v4_ours(c, **kw)[1])[0]
        print(f"  stand-in bug '{what}': max deviation {bad:.1f} e4m3 steps")
        assert bad > 1, f"the bound accepts the bug '{what}'"
