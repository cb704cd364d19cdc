"""Conformance, the indexer's scoring step: the plugin's scoring op (libdsv4's CPU reference through
the binding, reached through DeepInferSparseAttnIndexer with vLLM-shaped metadata) against vLLM
0.33.0's own torch path: fp8_paged_mqa_logits_torch (decode rows and every row) and
fp8_mqa_logits_torch (prefill rows over the gathered keys), the debug `torch` top-k backend of
indexer_topk.py, and the V4.1 candidate stage select_candidate_blocks / apply_candidate_mask
(Triton, run in the interpreter).

Selections are compared as sets with a margin (vLLM's top-k order and its choice among equal logits
are unspecified): with theta the K-th largest reference logit of the row's eligible columns and
delta the bound, every selected column has ref >= theta - delta and every unselected eligible one
ref <= theta + delta. delta = 1e-5 * A (A: the row's largest absolute mass sk_j * sum_h |w_h| *
sum_d |q k_j|, the library's logit tolerance); fp8_mqa_logits_torch rounds each head's dot product to
bf16 (a bf16 einsum), so against it delta grows by 2^-8 * A.

The decode rows use vLLM's padded [B, next_n] layout (pack_seq_triton: a request's tokens first,
then padding slots of context 0), with a request shorter than next_n; the step ends with two
CUDA-graph padding tokens."""
import types

import pytest
import torch
from cases import gen
from conftest import mode

from deepinfer_sm80.vllm import scoring
from deepinfer_sm80.vllm.attention import DeepInferSparseAttnIndexer

pytestmark = mode("interpret")

H, D, K, P = 32, 128, 16, 64
NEXT_N = 3
DECODE_LENS = (3, 3, 2)  # the last request has fewer tokens than next_n: vLLM's padded layout
PREFILL_LEN = 24
PAD_TOKENS = 2
MAX_MODEL_LEN = 640
CAND_BLOCKS = 4  # small, so the source keeps fewer blocks than a long row has


class _Cuda(torch.Tensor):
    """A CPU tensor that passes vLLM's `assert logits.is_cuda` (its Triton kernels run in the interpreter)."""

    @property
    def is_cuda(self):
        return True


def _e4m3_codes(g, *shape):
    """Random e4m3 bytes without the NaN codes 0x7F / 0xFF."""
    c = torch.randint(0, 255, shape, generator=g, dtype=torch.int32)
    c = torch.where((c & 0x7F) == 0x7F, c ^ 0x01, c)
    return c.to(torch.uint8)


def _step(g, ratio):
    """A step: 3 decode requests (DECODE_LENS tokens), 1 prefill request, padding tokens; the paged
    indexer cache; the SWA metadata vLLM builds (token_to_req_indices, seq_lens, query_start_loc,
    is_valid_token)."""
    from vllm.v1.attention.backends.mla.sparse_swa import DeepseekSparseSWAMetadata

    qlens = list(DECODE_LENS) + [PREFILL_LEN]
    seq = [int(x) for x in torch.randint(40 * ratio, 280 * ratio, (3,), generator=g)]
    # The prefill request starts short: its first rows have n_t <= K (every column, no logits needed).
    seq.append(int(torch.randint(4 * ratio, 12 * ratio, (1,), generator=g)) + PREFILL_LEN)
    R = len(seq)
    states = [s // ratio for s in seq]
    width = max((n + P - 1) // P for n in states)
    pages = sum((n + P - 1) // P for n in states) + 2
    perm = torch.randperm(pages, generator=g).to(torch.int32)
    table = torch.zeros((R, width + 1), dtype=torch.int32)
    at = 0
    for b, n in enumerate(states):
        w = (n + P - 1) // P
        table[b, :w] = perm[at:at + w]
        at += w
    flat = torch.empty((pages, P * 132), dtype=torch.uint8)
    flat[:, :P * 128] = _e4m3_codes(g, pages, P * 128)
    scales = torch.exp2(torch.randint(-10, 1, (pages, P), generator=g).float())
    flat[:, P * 128:] = scales.view(torch.uint8).view(pages, P * 4)
    cache = flat.view(pages, P, 132)
    T = sum(qlens) + PAD_TOKENS
    req = [b for b, n in enumerate(qlens) for _ in range(n)] + [R - 1] * PAD_TOKENS
    pos = [seq[b] - qlens[b] + i for b, n in enumerate(qlens) for i in range(n)] + [0] * PAD_TOKENS
    qsl = torch.tensor([0] + list(torch.tensor(qlens).cumsum(0)), dtype=torch.int32)
    swa = DeepseekSparseSWAMetadata(
        block_table=torch.zeros((R, 1), dtype=torch.int32), slot_mapping=torch.zeros(T, dtype=torch.int64),
        block_size=32, seq_lens=torch.tensor(seq, dtype=torch.int32), query_start_loc=qsl,
        query_start_loc_cpu=qsl.clone(), is_valid_token=torch.arange(T) < T - PAD_TOKENS,
        token_to_req_indices=torch.tensor(req, dtype=torch.int32), num_decodes=3, num_decode_tokens=sum(DECODE_LENS),
        num_prefills=1, num_prefill_tokens=PREFILL_LEN)
    q8 = _e4m3_codes(g, T, H, D)
    w = torch.randn(T, H, generator=g) * torch.exp2(torch.randint(-4, 3, (T, H), generator=g).float())
    return types.SimpleNamespace(seq=seq, qlens=qlens, table=table, cache=cache, T=T, req=req, pos=pos, swa=swa,
                                 q8=q8, w=w, ratio=ratio, n=[(p + 1) // ratio if t < T - PAD_TOKENS else 0
                                                             for t, p in enumerate(pos)])


def _ours(monkeypatch, s, cand=None, write=False):
    """The plugin's scoring op on the step -> (top-k [T, K], candidate buffer or None)."""
    from vllm.config import VllmConfig
    from vllm.forward_context import set_forward_context

    layer = DeepInferSparseAttnIndexer.__new__(DeepInferSparseAttnIndexer)
    torch.nn.Module.__init__(layer)
    layer.k_cache = types.SimpleNamespace(prefix="model.layers.20.attn.indexer.k_cache", kv_cache=s.cache)
    layer.swa_prefix = "model.layers.20.attn.swa_cache"
    layer.topk_tokens, layer.compress_ratio, layer.max_model_len = K, s.ratio, MAX_MODEL_LEN // s.ratio
    layer.topk_indices_buffer = torch.full((s.T + 5, K), -7, dtype=torch.int32)
    layer.candidate_blocks = None if cand is None else cand.clone()
    layer.candidate_block_size, layer.candidate_write = 8, write
    monkeypatch.setattr(scoring, "workspace", lambda n: torch.empty(max(n, 1), dtype=torch.uint8))
    meta = types.SimpleNamespace(block_table=s.table)
    with set_forward_context({layer.k_cache.prefix: meta, layer.swa_prefix: s.swa}, VllmConfig()):
        out = layer.forward_cuda(torch.empty(s.T, 8), s.q8.view(torch.float8_e4m3fn), None, s.w)
    assert out is layer.topk_indices_buffer
    assert torch.equal(out[s.T:], torch.full((5, K), -7, dtype=torch.int32)), "rows past the step written"
    return out[:s.T], layer.candidate_blocks


def _slots(s):
    """vLLM's decode rows (padded [B, NEXT_N] layout: token slot or None) then the prefill rows, with
    their request and context length."""
    rows, t = [], 0
    for b, n in enumerate(DECODE_LENS):
        for i in range(NEXT_N):
            rows.append((t + i if i < n else None, b, s.n[t + i] if i < n else 0))
        t += n
    for i in range(PREFILL_LEN):
        rows.append((t + i, 3, s.n[t + i]))
    return rows


def _keys(s, b, n):
    """Request b's first n index keys from the paged cache: e4m3 [n, 128] and fp32 scales [n]."""
    flat = s.cache.view(s.cache.shape[0], -1)
    cols = torch.arange(n)
    page = s.table[b, cols // P].long().unsqueeze(1)
    k = flat[page, (cols % P).unsqueeze(1) * 128 + torch.arange(128)].view(torch.float8_e4m3fn)
    sk = flat[page, P * 128 + (cols % P).unsqueeze(1) * 4 + torch.arange(4)].contiguous().view(torch.float32)
    return k, sk.view(-1)


def _paged_logits(s, rows):
    """vLLM's fp8_paged_mqa_logits_torch over `rows` (flattened to next_n = 1, one block-table row
    each, as vLLM's flattening path passes them), and the absolute mass A per row."""
    from vllm.v1.attention.ops.rocm_aiter_mla_sparse import fp8_paged_mqa_logits_torch

    W = MAX_MODEL_LEN // s.ratio
    idx = [t if t is not None else 0 for t, _, _ in rows]
    q = s.q8[idx].view(torch.float8_e4m3fn).view(len(rows), 1, H, D)
    ctx = torch.tensor([[n] for _, _, n in rows], dtype=torch.int32)
    tables = s.table[[b for _, b, _ in rows]]
    logits = fp8_paged_mqa_logits_torch(q, s.cache, s.w[idx], ctx, tables, W)
    mass = []
    for (t, b, n), i in zip(rows, idx):
        if n == 0:
            mass.append(0.0)
            continue
        k, sk = _keys(s, b, n)
        sk = sk.double()
        qd = s.q8[i].view(torch.float8_e4m3fn).double()
        a = torch.einsum("hd,nd->hn", qd.abs(), k.double().abs())
        mass.append(float((sk * (s.w[i].double().abs()[:, None] * a).sum(0)).max()))
    return logits, torch.tensor(mass, dtype=torch.float64)


def _check_set(chosen, ref, eligible, delta, what):
    """The margin rule for one row -> the number of columns that differ from the exact reference
    top-k set (ties and near-ties)."""
    chosen = set(chosen)
    el = sorted(eligible)
    kk = min(K, len(el))
    assert len(chosen) == kk and chosen <= set(el), f"{what}: {sorted(chosen)} is not {kk} eligible columns"
    if kk == 0:
        return 0
    vals = ref[el].double()
    theta = float(vals.topk(kk).values[-1])
    for j in el:
        v = float(ref[j])
        if j in chosen:
            assert v >= theta - delta, f"{what}: selected {j} ({v}) below theta {theta} - {delta}"
        else:
            assert v <= theta + delta, f"{what}: left out {j} ({v}) above theta {theta} + {delta}"
    exact = set(vals.topk(kk).indices.tolist())
    return len(chosen ^ {el[i] for i in exact}) // 2


def _vllm_topk(logits, ends):
    """vLLM's debug `torch` top-k backend (mask past each row's end, topk, -1 past the row length)."""
    from vllm.model_executor.layers.indexer_topk import SparseIndexerTopk

    out = torch.empty((logits.shape[0], K), dtype=torch.int32)
    SparseIndexerTopk("torch").forward(logits, ends.to(torch.int32), 1, out, K, int(ends.max()))
    return out


@pytest.mark.parametrize("ratio", [1, 2])
def test_topk_against_vllm(seed, monkeypatch, ratio):
    """Mode 0 (no candidates): decode (padded next_n layout) and prefill rows."""
    g = gen(seed)
    s = _step(g, ratio)
    ours, _ = _ours(monkeypatch, s)
    rows = _slots(s)
    logits, mass = _paged_logits(s, rows)
    ends = torch.tensor([n for _, _, n in rows])
    theirs = _vllm_topk(logits, ends)
    near = theirs_near = compared = 0
    for r, (t, b, n) in enumerate(rows):
        delta = 1e-5 * float(mass[r])
        if t is None:
            continue
        row = ours[t].tolist()
        sel = [j for j in row if j >= 0]
        assert row == sorted(sel) + [-1] * (K - len(sel)), f"row {t}: not ascending then -1: {row}"
        if n <= K:  # what vLLM's short-context fill writes
            assert row == list(range(n)) + [-1] * (K - n), f"short row {t}: {row}"
        near += _check_set(sel, logits[r], range(n), delta, f"ours row {t}")
        theirs_near += _check_set([j for j in theirs[r].tolist() if j >= 0], logits[r], range(n), delta,
                                  f"vLLM row {t}")
        compared += 1
    for t in range(s.T - PAD_TOKENS, s.T):
        assert ours[t].tolist() == [-1] * K, "padding row"
    # Prefill rows against fp8_mqa_logits_torch over the request's gathered keys (bf16 head dots).
    from vllm.v1.attention.ops.rocm_aiter_mla_sparse import fp8_mqa_logits_torch

    first = sum(DECODE_LENS)
    pre = list(range(first, first + PREFILL_LEN))
    k, sk = _keys(s, 3, s.seq[3] // ratio)
    ke = torch.tensor([s.n[t] for t in pre], dtype=torch.int32)
    plog = fp8_mqa_logits_torch(s.q8[pre].view(torch.float8_e4m3fn), (k, sk), s.w[pre],
                                torch.zeros(PREFILL_LEN, dtype=torch.int32), ke)
    pnear = 0
    for i, t in enumerate(pre):
        r = [x[0] for x in rows].index(t)
        delta = (1e-5 + 2.0 ** -8) * float(mass[r])
        pnear += _check_set([j for j in ours[t].tolist() if j >= 0], plog[i], range(s.n[t]), delta, f"prefill {t}")
    long_rows = sum(1 for n in s.n if n > K)
    print(f"ratio {ratio}: {compared} rows ({long_rows} longer than K={K}), ours {near} / vLLM {theirs_near} columns "
          f"off the exact reference set within the margin; prefill vs fp8_mqa_logits_torch: {pnear}")
    assert sum(DECODE_LENS) <= long_rows < compared, "rows of both kinds (n_t > K and n_t <= K) expected"


def test_candidates_against_vllm(seed, monkeypatch):
    """Mode 1 (the source writes its candidate blocks) against select_candidate_blocks, and mode 2
    (a consumer scores only them) against apply_candidate_mask + the torch top-k."""
    from vllm.model_executor.kernels.attention.dsa import candidate_blocks as cb

    g = gen(seed)
    s = _step(g, 1)
    rows = _slots(s)
    logits, mass = _paged_logits(s, rows)
    ends = torch.tensor([n for _, _, n in rows], dtype=torch.int32)
    token_rows = [(r, t, n) for r, (t, _, n) in enumerate(rows) if t is not None]
    # mode 1
    init = torch.full((s.T, CAND_BLOCKS), -9, dtype=torch.int32)
    ours, cand = _ours(monkeypatch, s, cand=init, write=True)
    theirs = torch.full((len(rows), CAND_BLOCKS), -9, dtype=torch.int32)
    monkeypatch.setattr(cb, "has_deep_select", lambda: False)
    cb.select_candidate_blocks(logits.clone().as_subclass(_Cuda), None, ends, CAND_BLOCKS, 8, theirs)
    near = 0
    for r, t, n in token_rows:
        _check_set([j for j in ours[t].tolist() if j >= 0], logits[r], range(n), 1e-5 * float(mass[r]),
                   f"ours mode 1 top-k row {t}")  # the source's own selection is unrestricted
        nb = (n + 7) // 8
        score = torch.stack([logits[r, 8 * b:min(8 * b + 8, n)].max() for b in range(nb)]) if nb else torch.empty(0)
        if nb:
            score[-1] = float("inf")  # the newest block is pinned
        ours_row = cand[t].tolist()
        sel = [x for x in ours_row if x >= 0]
        assert ours_row == sorted(sel) + [-1] * (CAND_BLOCKS - len(sel)), f"candidates of row {t}: {ours_row}"
        theirs_sel = [x for x in theirs[r].tolist() if x >= 0]
        kk = min(CAND_BLOCKS, nb)
        assert len(sel) == kk and len(theirs_sel) == kk
        if kk:
            theta = float(score.topk(kk).values[-1])
            delta = 1e-5 * float(mass[r])
            for who, chosen in (("ours", set(sel)), ("vLLM", set(theirs_sel))):
                for blk in range(nb):
                    v = float(score[blk])
                    if blk in chosen:
                        assert v >= theta - delta, f"{who} row {t}: block {blk} ({v}) below {theta}"
                    else:
                        assert v <= theta + delta, f"{who} row {t}: block {blk} ({v}) above {theta}"
            near += len(set(sel) ^ set(theirs_sel)) // 2
    assert sum(1 for _, _, n in token_rows if (n + 7) // 8 > CAND_BLOCKS) >= 8
    # mode 2: random candidate lists (the newest block always listed, as the source pins it; -1 and
    # duplicates mixed in), the same list for vLLM's logits row and our token row.
    lists = torch.full((len(rows), CAND_BLOCKS), -1, dtype=torch.int32)
    for r, t, n in token_rows:
        nb = (n + 7) // 8
        if nb == 0:
            continue
        ids = torch.randperm(nb, generator=g)[:CAND_BLOCKS - 2].tolist()
        ids = list(dict.fromkeys(ids + [nb - 1]))
        ids += [ids[0]] * (CAND_BLOCKS - 1 - len(ids)) + [-1]
        lists[r] = torch.tensor(ids[:CAND_BLOCKS], dtype=torch.int32)[torch.randperm(CAND_BLOCKS, generator=g)]
    by_token = torch.full((s.T, CAND_BLOCKS), -1, dtype=torch.int32)
    for r, t, n in token_rows:
        by_token[t] = lists[r]
    ours2, cand2 = _ours(monkeypatch, s, cand=by_token, write=False)
    assert torch.equal(cand2, by_token), "mode 2 wrote its candidates"
    masked = logits.clone().as_subclass(_Cuda)
    cb.apply_candidate_mask(masked, None, ends, lists, 8)
    masked = masked.as_subclass(torch.Tensor)
    theirs2 = _vllm_topk(masked, ends)
    near2 = restricted = 0
    for r, t, n in token_rows:
        blocks = {b for b in lists[r].tolist() if 0 <= b < (n + 7) // 8}
        el = [j for j in range(n) if j // 8 in blocks]
        assert torch.isinf(masked[r, [j for j in range(n) if j // 8 not in blocks]]).all()
        delta = 1e-5 * float(mass[r])
        near2 += _check_set([j for j in ours2[t].tolist() if j >= 0], logits[r], el, delta, f"ours mode 2 row {t}")
        vl = [j for j in theirs2[r].tolist() if j >= 0 and j in set(el)]  # vLLM pads short sets with masked columns
        _check_set(vl, logits[r], el, delta, f"vLLM mode 2 row {t}")
        restricted += len(el) < n
    print(f"candidates: {len(token_rows)} rows, mode 1 blocks differing from vLLM within the margin: {near}; "
          f"mode 2: {restricted} rows restricted, {near2} columns off the exact set within the margin")
    assert restricted >= 8
