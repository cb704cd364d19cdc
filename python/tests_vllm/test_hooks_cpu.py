"""The attention subclass's hooks run on CPU tensors (libdsv4's references) with vLLM-shaped
metadata: the plumbing (slices, page geometry, lists, sink, scale) against the same ops called
with explicit arguments, and the output projection against its formula."""
import types

import pytest
import torch
import torch.nn as nn
from cases import bf16, cos_sin, filled_cache, gen, paged
from conftest import mode

import deepinfer_sm80 as d
from deepinfer_sm80.vllm.attention import DeepInferV41Attention

pytestmark = mode("default")


def _layer(**attrs):
    layer = DeepInferV41Attention.__new__(DeepInferV41Attention)
    nn.Module.__init__(layer)
    for k, v in attrs.items():
        setattr(layer, k, v)
    return layer


@pytest.mark.parametrize("ratio", [0, 2])
def test_forward_decode(seed, ratio):
    g = gen(seed)
    T, R, H, K = 5, 3, 16, 64
    seq = torch.randint(20, 200, (R,), generator=g)
    swa_table, swa_pages = paged(g, seq.tolist(), 32)
    swa_cache = filled_cache(g, swa_pages, 32, 64)
    req = torch.tensor([0, 1, 1, 2, 2], dtype=torch.int32)
    pos = (seq[req.long()] - torch.tensor([1, 2, 1, 2, 1])).to(torch.int32)
    swa_ids = torch.full((T, 1, 128), -1, dtype=torch.int32)
    swa_lens = torch.empty(T, dtype=torch.int32)
    d.decode_swa_indices(req, pos, torch.ones(T, dtype=torch.bool), swa_table, window=128, page_tokens=32,
                         swa_indices=swa_ids, swa_lens=swa_lens)
    valid = torch.tensor([True, True, False, True, True])
    swa_meta = types.SimpleNamespace(num_decode_tokens=T, num_decodes=R, token_to_req_indices=req,
                                     is_valid_token=valid, decode_swa_indices=swa_ids, decode_swa_lens=swa_lens)
    sink = torch.randn(H, generator=g)
    sink[12:] = float("-inf")
    q = bf16(g, T, H, 512)
    layer = _layer(compress_ratio=ratio, swa_cache_layer=types.SimpleNamespace(kv_cache=swa_cache), attn_sink=sink,
                   scale=512 ** -0.5, padded_heads=H)
    layer._decode_workspace = lambda n, reserve=False: torch.empty(1, dtype=torch.uint8)
    extra, attn_meta, cache = {}, None, None
    if ratio:
        P = 64
        table, pages = paged(g, (seq // ratio).tolist(), P)
        cache = filled_cache(g, pages, P, 576)
        topk = torch.full((T + 3, K), -1, dtype=torch.int32)
        for t in range(T):
            n = int(seq[req[t]]) // ratio
            topk[t, :min(n, K)] = torch.randperm(n, generator=g)[:K].to(torch.int32)
        layer.topk_indices_buffer = topk
        attn_meta = types.SimpleNamespace(block_table=table, block_size=P * ratio)
        ids, lens = d.topk_translate(topk[:T], req, table, valid, page_tokens=P)
        extra = dict(extra_cache=cache, extra_ids=ids, extra_lens=lens, extra_page_tokens=P)
    out = torch.full((T, H, 512), 3.0, dtype=torch.bfloat16)
    layer._forward_decode(q, cache, swa_meta, attn_meta, ratio == 0, out)
    want = d.sparse_mla_decode(q, swa_cache, swa_ids.view(T, 128), swa_lens, main_page_tokens=32, sink=sink,
                               scale=512 ** -0.5, **extra)
    assert torch.equal(out.view(torch.int16), want.view(torch.int16))


@pytest.mark.parametrize("ratio", [0, 2])
def test_forward_prefill(seed, ratio, monkeypatch):
    """A decode request, then prefill requests (fresh, short context, context past the window) in
    vLLM's chunk plan (two chunks): per chunk the slab (compressed rows, SWA rows from N), the
    combined matrix and the attention, against the same ops called with explicit arguments."""
    from vllm.v1.attention.backends.mla.sparse_swa import DeepseekSparseSWAMetadata

    import deepinfer_sm80.vllm.attention as A

    g = gen(seed)
    H, K, W, nd, chunk = 16, 64, 128, 1, 1
    reqs = [(int(torch.randint(20, 200, (1,), generator=g)), 1), (0, 9),
            (int(torch.randint(5, 60, (1,), generator=g)), 6), (int(torch.randint(140, 300, (1,), generator=g)), 11)]
    seq = torch.tensor([c + n for c, n in reqs], dtype=torch.int32)
    qlen = torch.tensor([n for _, n in reqs], dtype=torch.int32)
    qsl = torch.cat([torch.zeros(1, dtype=torch.int32), qlen.cumsum(0).to(torch.int32)])
    Td, Tp = nd, int(qlen[nd:].sum())
    pseq, pq = seq[nd:], qlen[nd:]
    gather = pq + torch.clamp(pseq - pq, max=W - 1)
    swa_table, swa_pages = paged(g, seq.tolist(), 32)
    swa_cache = filled_cache(g, swa_pages, 32, 64)
    swa_meta = DeepseekSparseSWAMetadata(
        block_table=swa_table, slot_mapping=torch.zeros(0), block_size=32, seq_lens=seq, query_start_loc=qsl,
        query_start_loc_cpu=qsl, num_decodes=nd, num_prefills=len(reqs) - nd, num_decode_tokens=Td,
        num_prefill_tokens=Tp, prefill_seq_lens=pseq, prefill_seq_lens_cpu=pseq, prefill_gather_lens=gather,
        prefill_query_lens_cpu=pq, prefill_window_size=W, prefill_max_model_len=512,
        prefill_max_num_batched_tokens=Td + Tp)
    plan = swa_meta.get_prefill_chunk_plan(compress_ratio=ratio, prefill_chunk_size=chunk, has_compressed=ratio > 0)
    assert len(plan) == 2, plan
    sink = torch.randn(H, generator=g)
    sink[12:] = float("-inf")
    q = bf16(g, Tp, H, 512)
    topk, comp_cache, table, attn_meta, P = None, None, None, None, 64
    if ratio:
        table, pages = paged(g, (seq // ratio).tolist(), P)
        comp_cache = filled_cache(g, pages, P, 576)
        topk = torch.full((Td + Tp + 3, K), -1, dtype=torch.int32)
        for b in range(nd, len(reqs)):
            for i in range(int(qlen[b])):
                n = (int(seq[b] - qlen[b]) + i + 1) // ratio  # causal bound of the row's position
                topk[qsl[b] + i, :min(n, K)] = torch.randperm(n, generator=g)[:K].to(torch.int32)
        attn_meta = types.SimpleNamespace(block_table=table)
    layer = _layer(compress_ratio=ratio, topk_indices_buffer=topk, window_size=W, PREFILL_CHUNK_SIZE=chunk,
                   max_num_batched_tokens=Td + Tp, attn_sink=sink, scale=512 ** -0.5)

    def poisoned(*specs):
        return [torch.full(s, float("nan") if dt.is_floating_point else 7, dtype=dt) for s, dt in specs]

    monkeypatch.setattr(A, "current_workspace_manager", lambda: types.SimpleNamespace(get_simultaneous=poisoned))
    out = torch.full((Tp, H, 512), 3.0, dtype=torch.bfloat16)
    layer._forward_prefill(q, None, comp_cache, swa_cache, out, attn_meta, swa_meta)
    want = torch.full((Tp, H, 512), 3.0, dtype=torch.bfloat16)
    kk = K if ratio else 0
    for start, end, N, M in plan:
        slab = poisoned(((end - start, M, 512), torch.bfloat16))[0]
        if ratio:
            d.kv_gather(comp_cache, pseq[start:end] // ratio, table[nd + start:nd + end], slab, page_tokens=P)
        d.kv_gather(swa_cache, pseq[start:end], swa_table[nd + start:nd + end], slab, gather_lens=gather[start:end],
                    page_tokens=32, offset=N)
        q0, q1 = int(qsl[nd + start]) - Td, int(qsl[nd + end]) - Td
        ids = torch.full((q1 - q0, d.combine_cols(kk, W)), 7, dtype=torch.int32)
        lens = torch.empty(q1 - q0, dtype=torch.int32)
        d.combine_topk_swa(topk[Td + q0:Td + q1] if ratio else None, qsl[nd + start:nd + end + 1], pseq[start:end],
                           gather[start:end], topk=kk, window=W, ratio=ratio, slab_rows=M, swa_row0=N, combined=ids,
                           combined_lens=lens)
        d.sparse_mla_prefill(q[q0:q1], slab, ids, lens, sink=sink, out=want[q0:q1], scale=512 ** -0.5)
    assert not want.isnan().any()
    assert torch.equal(out.view(torch.int16), want.view(torch.int16))


def test_o_proj(seed):
    g = gen(seed)
    T, Hp, H, G, rank, hidden = 4, 16, 12, 3, 64, 96
    attn_out = bf16(g, T, Hp, 512)
    positions = torch.randint(0, 500, (T,), generator=g, dtype=torch.int64)
    table = cos_sin(g)
    wo_a = (torch.randn(G * rank, H // G * 512, generator=g) * 0.02).to(torch.bfloat16)
    wo_b = (torch.randn(hidden, G * rank, generator=g) * 0.02).to(torch.bfloat16)
    layer = _layer(n_local_heads=H, n_local_groups=G, o_lora_rank=rank, wo_a=types.SimpleNamespace(weight=wo_a),
                   rotary_emb=types.SimpleNamespace(cos_sin_cache=table))
    layer._wo_b_proj = lambda z: z @ wo_b.t()
    rotated = d.inv_rope(attn_out.clone(), positions, table, num_heads=H)
    o = rotated[:, :H].reshape(T, G, -1).float()
    z = torch.einsum("tgk,grk->tgr", o, wo_a.float().view(G, rank, -1)).to(torch.bfloat16)
    want = z.flatten(1) @ wo_b.t()
    got = layer._o_proj(attn_out, positions)
    assert torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2)
    assert torch.equal(attn_out[:, :H].view(torch.int16), rotated[:, :H].view(torch.int16))  # rotated in place
    layer.wo_a = types.SimpleNamespace(weight=wo_a.float())
    with pytest.raises(NotImplementedError, match="bf16 wo_a"):
        layer._o_proj(attn_out, positions)


@pytest.mark.parametrize("decode_lens", [(2, 2, 2), (3, 1, 2)])
def test_scoring_rows(seed, decode_lens):
    """The scoring op's rows from vLLM's SWA metadata (decode requests, a prefill request, padding
    tokens naming a request out of range): request, position and validity per token, and the causal
    bound (pos + 1) // r against the per-token context lengths vLLM's indexer metadata builder
    computes for the same decode rows (_prepare_decode_tensors: native [B, next_n] for a uniform
    batch, flattened per token otherwise)."""
    from vllm.v1.attention.backends.mla.indexer import DeepseekV32IndexerMetadataBuilder as Builder
    from vllm.v1.attention.backends.mla.sparse_swa import DeepseekSparseSWAMetadata

    from deepinfer_sm80.vllm.scoring import step_rows

    g = gen(seed)
    qlens = list(decode_lens) + [7]
    R, pad = len(qlens), 3
    seq = [int(x) + n for x, n in zip(torch.randint(1, 300, (R,), generator=g), qlens)]
    T = sum(qlens) + pad
    qsl = torch.tensor([0] + torch.tensor(qlens).cumsum(0).tolist(), dtype=torch.int32)
    req = torch.repeat_interleave(torch.arange(R, dtype=torch.int32), torch.tensor(qlens))
    req = torch.cat([req, torch.tensor([R + 5, 0, -1], dtype=torch.int32)])
    valid = torch.arange(T) < T - pad
    valid[1] = False  # a token without a slot inside the batch
    swa = DeepseekSparseSWAMetadata(block_table=torch.zeros((R, 1), dtype=torch.int32), slot_mapping=torch.zeros(T),
                                    block_size=32, seq_lens=torch.tensor(seq, dtype=torch.int32), query_start_loc=qsl,
                                    query_start_loc_cpu=qsl, is_valid_token=valid, token_to_req_indices=req)
    rows = T + 4  # CUDA-graph padding past the metadata's tokens
    got_req, got_pos, got_valid = step_rows(swa, rows, torch.device("cpu"))
    want_pos = [seq[b] - qlens[b] + i for b in range(R) for i in range(qlens[b])]
    n_tok = T - pad
    assert got_pos[:n_tok].tolist() == want_pos
    assert got_req[:T].tolist() == req.tolist() and got_req[T:].tolist() == [-1] * 4
    assert got_valid.tolist() == valid.to(torch.uint8).tolist() + [0] * 4
    assert got_req.dtype == torch.int32 and got_pos.dtype == torch.int64 and got_valid.dtype == torch.uint8
    # vLLM's decode context lengths for the same tokens (uncompressed; the builder then divides by r).
    nd, nt = 3, sum(decode_lens)
    cap = 64
    fake = types.SimpleNamespace(vllm_config=types.SimpleNamespace(speculative_config=None), supports_varlen=False,
                                 decode_seq_lens_buffer=torch.zeros(cap, dtype=torch.int32),
                                 offsets_buffer=torch.arange(max(decode_lens), dtype=torch.int32),
                                 decode_lens_buffer=torch.zeros(cap, dtype=torch.int32),
                                 expanded_block_table_buffer=torch.zeros((cap, 4), dtype=torch.int32),
                                 arange_buffer=torch.arange(cap, dtype=torch.int32))
    uniform = len(set(decode_lens)) == 1
    lens = torch.tensor(decode_lens, dtype=torch.int32)
    ctx = Builder._prepare_decode_tensors(fake, torch.tensor(seq[:nd], dtype=torch.int32),
                                          torch.zeros((nd, 4), dtype=torch.int32), lens, lens, qsl[:nd], nd, nt,
                                          uniform, max(decode_lens), max(decode_lens))[0]
    for ratio in (1, 2):
        assert ((ctx.reshape(-1) // ratio)[:nt]).tolist() == ((got_pos[:nt] + 1) // ratio).tolist()
