"""Conformance, indexer query prep and key store: libdsv4's CPU path against vLLM 0.33.0's Triton
kernels in the interpreter with GPU float semantics (gpu_semantics.py)."""
import types

import pytest
import torch
from cases import bf16, cos_sin, gen
from conftest import mode

from deepinfer_sm80 import ops

pytestmark = mode("interpret")


@pytest.mark.parametrize("heads", [64, 32])
def test_indexer_q(seed, monkeypatch, heads):
    """fused_indexer_q_rope_quant (fp8 path): e4m3 codes and folded weights, bit-exact."""
    from vllm.models.deepseek_v4.common.ops import fused_indexer_q as m

    monkeypatch.setattr(m, "has_cutedsl", lambda: False)  # its CuTe-DSL kernel needs sm_90+
    # The Triton branch, as on a CUDA platform (vLLM's CPU platform has a C++ kernel of its own).
    monkeypatch.setattr(m, "current_platform", types.SimpleNamespace(
        fp8_dtype=lambda: torch.float8_e4m3fn, is_xpu=lambda: False, is_cpu=lambda: False, is_cuda=lambda: False,
        is_rocm=lambda: False))
    g = gen(seed)
    T = 9
    q = bf16(g, T, heads, 128)
    q[2, 3] = 0
    w_raw = bf16(g, T, heads)
    positions = torch.randint(0, 500, (T,), generator=g, dtype=torch.int64)
    table = cos_sin(g)
    want_q, want_w = m.fused_indexer_q_rope_quant(positions, q, table, w_raw, 128 ** -0.5, heads ** -0.5)
    q8 = torch.full((T, heads, 128), 0xEE, dtype=torch.uint8)
    w = torch.full((T, heads), float("nan"))
    ops.indexer_q(q, w_raw, positions, table, q8, w, softmax_scale=128 ** -0.5, head_scale=heads ** -0.5)
    assert torch.equal(want_q.view(torch.uint8), q8)
    assert torch.equal(want_w.view(torch.int32), w.view(torch.int32))


@pytest.mark.parametrize("ratio", [1, 2])
def test_indexer_k_store(seed, monkeypatch, ratio):
    """indexer_k_norm_rope_store (fp8 cache), every byte of every page. Bound: untouched bytes and the
    fp32 scales equal; an e4m3 code may differ by one step (same sign) and in at most 2% of the
    codes. Reason: the RMS factor (reduction order; the GPU's rsqrt.approx against numpy's exact
    1/sqrt in the interpreter) moves by a few fp32 ulps, which can flip the bf16 rounding of the
    normalized key and then its code. A zero element may be stored as +0 (0x00) by vLLM and -0
    (0x80) by libdsv4: vLLM's kernel runs its RoPE formula over the NoPE dims too (cos 1, sin 0),
    and -0 - (-0) = +0; libdsv4 passes those dims through. Both decode to zero."""
    from vllm.models.deepseek_v41.common.ops import indexer_k_store as m

    monkeypatch.setattr(m, "mqa_logits_use_mx_scales", lambda: False)  # a DeepGEMM SM100 option
    g = gen(seed)
    T, P, pages = 30, 64, 3
    k_pre = bf16(g, T, 128)
    gamma = bf16(g, 128)
    positions = torch.randint(0, 400, (T,), generator=g, dtype=torch.int64)
    slots = torch.randperm(pages * P, generator=g)[:T].to(torch.int64)
    slots[torch.rand(T, generator=g) < 0.2] = -1
    table = cos_sin(g)
    page = 8640  # vLLM's page: 64 * 132 rounded up to a multiple of 576
    want = torch.full((pages, page), 0x3C, dtype=torch.uint8)
    have = want.clone()
    cache_want = want.as_strided((pages, P, 132), (page, 132, 1))
    cache_have = have.as_strided((pages, P, 132), (page, 132, 1))
    m.indexer_k_norm_rope_store(k_pre, positions, table, gamma, 1e-6, cache_want, slots, ratio, False)
    ops.indexer_k_store(k_pre, gamma, positions, slots, table, cache_have, page_tokens=P, ratio=ratio, eps=1e-6)
    assert (want != 0x3C).any()
    codes_w, codes_h = want[:, :P * 128].reshape(-1), have[:, :P * 128].reshape(-1)
    assert torch.equal(want[:, P * 128:], have[:, P * 128:]), "scales or bytes past the codes differ"
    diff = codes_w != codes_h
    step = ((codes_w.int() & 0x7F) - (codes_h.int() & 0x7F)).abs()
    same_sign = ((codes_w ^ codes_h) & 0x80) == 0
    zeros = ((codes_w & 0x7F) == 0) & ((codes_h & 0x7F) == 0)  # +0 / -0: see below
    ok = (~diff) | ((step == 1) & same_sign) | zeros
    bad = (~ok).nonzero().flatten()[:8]
    assert bool(ok.all()), f"codes more than one step apart at {bad.tolist()}: {codes_w[bad].tolist()} vs {codes_h[bad].tolist()}"
    written = int((want[:, :P * 128] != 0x3C).sum())
    steps = int((diff & ~zeros).sum())
    print(f"k_store ratio {ratio}: {steps} of {written} codes one step apart, {int((diff & zeros).sum())} signed zeros")
    assert steps <= 0.02 * written
