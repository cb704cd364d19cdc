"""Conformance, data movement and quantization: libdsv4's CPU path against vLLM 0.33.0's own Triton
kernels run in the interpreter with GPU float semantics (gpu_semantics.py). All bit-exact."""
import pytest
import torch
from cases import bf16, cos_sin, filled_cache, gen, paged
from conftest import mode

from deepinfer_sm80 import ops

pytestmark = mode("interpret")

POISON = -7


@pytest.mark.parametrize("swa", [False, True], ids=["compressed", "swa"])
@pytest.mark.parametrize("page_tokens,pad", [(64, 0), (32, 320), (128, 64)])
def test_kv_gather(seed, swa, page_tokens, pad):
    """vLLM's dequantize_and_gather_k_cache (its Triton path; the CuTe-DSL one is sm_90+)."""
    from vllm.models.deepseek_v41.common.ops.cache_utils import dequantize_and_gather_k_cache_triton

    g = gen(seed)
    R = 3
    seq_lens = torch.randint(1, 3 * page_tokens, (R,), generator=g, dtype=torch.int32)
    table, pages = paged(g, seq_lens.tolist(), page_tokens)
    cache = filled_cache(g, pages, page_tokens, pad)
    gather = None
    offset = 0
    if swa:
        gather = torch.minimum(seq_lens, torch.randint(1, 200, (R,), generator=g, dtype=torch.int32))
        offset = 5
    M = int(seq_lens.max()) + offset + 3
    want = torch.full((R, M, 512), POISON, dtype=torch.bfloat16)
    have = want.clone()
    dequantize_and_gather_k_cache_triton(want, cache, seq_lens, gather, table, page_tokens, offset)
    ops.kv_gather(cache, seq_lens, table, have, gather, page_tokens=page_tokens, offset=offset)
    assert (want != POISON).any()
    assert torch.equal(want.view(torch.int16), have.view(torch.int16))


@pytest.mark.parametrize("ratio", [1, 2])
@pytest.mark.parametrize("page_tokens,pad", [(64, 0), (128, 64)])
def test_kv_rope_insert(seed, ratio, page_tokens, pad):
    """vLLM's rope_quant_insert (the compressor's writer): every byte of every page."""
    from vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache import rope_quant_insert

    g = gen(seed)
    pages, T = 4, 40
    latent = bf16(g, T + 2, 512)
    latent[3] = 0  # a block below the 1e-4 floor
    latent[4, :64] = torch.tensor(1e-5).to(torch.bfloat16)
    positions = torch.randint(0, 500, (T,), generator=g, dtype=torch.int64)
    slots = torch.randperm(pages * page_tokens, generator=g)[:T].to(torch.int64)
    slots[torch.rand(T, generator=g) < 0.2] = -1
    table = cos_sin(g)
    page = page_tokens * 584 + pad
    flat = torch.full((pages * page,), 0xA5, dtype=torch.uint8)
    want = flat.as_strided((pages, page_tokens, 584), (page, 584, 1))
    have_flat = flat.clone()
    have = have_flat.as_strided((pages, page_tokens, 584), (page, 584, 1))
    rope_quant_insert(latent, positions, table, want, slots, ratio)
    ops.kv_rope_insert(latent, positions, slots, table, have, page_tokens=page_tokens, ratio=ratio)
    assert (flat != 0xA5).any()
    assert torch.equal(flat, have_flat), (flat != have_flat).nonzero()[:8]


def test_topk_translate(seed):
    """vLLM's compute_global_topk_indices_and_lens (decode)."""
    from vllm.models.deepseek_v41.common.ops.cache_utils import compute_global_topk_indices_and_lens

    g = gen(seed)
    T, R, K, P = 12, 4, 96, 32
    seq_lens = torch.randint(1, 8 * P, (R,), generator=g)
    table, _ = paged(g, seq_lens.tolist(), P)
    req = torch.randint(0, R, (T,), generator=g, dtype=torch.int32)
    topk = torch.full((T, K), -1, dtype=torch.int32)
    for t in range(T):
        n = int(seq_lens[req[t]])
        k = int(torch.randint(0, min(n, K) + 1, (1,), generator=g))
        topk[t, :k] = torch.randperm(n, generator=g)[:k].to(torch.int32)
    valid = torch.rand(T, generator=g) > 0.2
    want_ids, want_lens = compute_global_topk_indices_and_lens(topk, req, table, P, valid)
    ids = torch.full((T, K), POISON, dtype=torch.int32)
    lens = torch.full((T,), POISON, dtype=torch.int32)
    ops.topk_translate(topk, req, table, valid, ids, lens, page_tokens=P)
    assert torch.equal(want_lens, lens)
    assert torch.equal(want_ids, ids)


@pytest.mark.parametrize("ratio", [0, 1, 2])
def test_combine_topk_swa(seed, ratio):
    """vLLM's combine_topk_swa_indices (prefill), one chunk of a batch whose qsl does not start at 0."""
    from vllm.models.deepseek_v41.common.ops.cache_utils import combine_topk_swa_indices

    g = gen(seed)
    R, W, K = 3, 128, 64 if ratio else 0
    qlen = torch.randint(1, 40, (R,), generator=g, dtype=torch.int32)
    prefix = torch.randint(0, 300, (R,), generator=g, dtype=torch.int32)
    seq_lens = prefix + qlen
    gather = qlen + torch.minimum(prefix, torch.tensor(W - 1, dtype=torch.int32))
    qsl = torch.cat([torch.tensor([17], dtype=torch.int32), 17 + torch.cumsum(qlen, 0).to(torch.int32)])
    T = int(qlen.sum())
    N = (int(seq_lens.max()) // ratio) if ratio else 0
    M = N + W + T
    topk = torch.randint(-1, max(N, 1) + 4, (T, max(K, 1)), generator=g, dtype=torch.int32)
    cols = (K + W + 127) // 128 * 128
    want = combine_topk_swa_indices(topk, qsl, seq_lens, gather, W, ratio, K, M, N)
    have = torch.full((T, cols), POISON, dtype=torch.int32)
    lens = torch.full((T,), POISON, dtype=torch.int32)
    ops.combine_topk_swa(topk if ratio else None, qsl, seq_lens, gather, have, lens, topk=K, window=W, ratio=ratio,
                         slab_rows=M, swa_row0=N)
    assert torch.equal(want[1], lens)
    assert torch.equal(want[0], have)
