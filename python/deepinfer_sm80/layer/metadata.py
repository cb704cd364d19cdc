"""The per-step metadata a layer is handed (what vLLM builds once per step), the caches of a
layer, and a synthetic step builder for tests and benchmarks.

Tokens are ordered decode first. Page layouts: the SWA cache has swa_page_tokens (32) slots a
page; the compressed and indexer caches of every kv source share one block table of
block_tokens-token (128) blocks, block_tokens // ratio states a page; page 0 is vLLM's null page.
"""
import math
from dataclasses import dataclass

import torch

from .config import HEAD_DIM

RECORD = 584            # fp8_ds_mla record bytes (448 e4m3 + 64 bf16 + 7 scales + pad)
INDEXER_STATE = 132     # 128 e4m3 codes + one fp32 scale


def page_bytes(page_tokens, record=RECORD):
    """vLLM's page size: page_tokens * record rounded up to a multiple of 576 bytes."""
    return -(-page_tokens * record // 576) * 576


@dataclass
class StepMetadata:
    """One step's metadata, shared by every attention layer (tensors on one device).

    positions int64 [T]; query_start_loc int32 [R+1]; seq_lens int32 [R] (context plus this
    step's tokens); token_to_req int32 [T]; is_valid_token bool [T]; swa_block_table int32
    [R, w_swa]; swa_slot_mapping int64 [T]; comp_block_table int32 [R, w_c]; comp_slot_mapping
    {ratio: int64 [T]} (the slot of the state a token closes, else -1); ring_slot int64 [T]
    (ratio-2 compressor ring, -1 none); topk_buffer int32 [>= T, index_topk] and
    candidate_buffer int32 [>= T, candidate_blocks] (shared across layers). Host values:
    num_decodes, num_decode_tokens, query_start_loc_cpu and seq_lens_cpu (lists),
    prefill_chunks [(first request, end request)] of at most 4 prefill requests each."""
    num_decodes: int
    num_decode_tokens: int
    positions: torch.Tensor
    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    token_to_req: torch.Tensor
    is_valid_token: torch.Tensor
    swa_block_table: torch.Tensor
    swa_slot_mapping: torch.Tensor
    comp_block_table: torch.Tensor
    comp_slot_mapping: dict
    ring_slot: torch.Tensor
    topk_buffer: torch.Tensor
    candidate_buffer: torch.Tensor
    query_start_loc_cpu: list
    seq_lens_cpu: list
    prefill_chunks: list

    @property
    def num_tokens(self):
        return self.positions.shape[0]

    @property
    def num_reqs(self):
        return len(self.seq_lens_cpu)


@dataclass
class LayerCaches:
    """A layer's caches. swa: uint8 [pages, page_bytes(32)]; kv sources also own comp (uint8
    [pages, page_bytes(P_c)]), idx (uint8 [pages, page_bytes(P_c, 132)]) and, at ratio 2,
    ring (fp32 [blocks * ring_cap, 1024])."""
    swa: torch.Tensor
    comp: torch.Tensor = None
    idx: torch.Tensor = None
    ring: torch.Tensor = None


def _page_pool(gen, n, device):
    """Physical pages 1..n in random order (0 stays the null page)."""
    return (1 + torch.randperm(n, generator=gen)).to(torch.int32)


def synthetic_step(cfg, requests, *, num_decodes, device="cpu", max_tokens=None, gen=None):
    """StepMetadata for requests [(context_len, query_len)] (decode requests first) with shuffled
    pages, and the pool sizes {'swa_pages', 'comp_pages', 'ring_blocks'} the caches need.
    SWA pages exist only for the window the step reads (older entries map to the null page)."""
    gen = gen or torch.Generator().manual_seed(0)
    W, Ps, Bt = cfg.window, cfg.swa_page_tokens, cfg.block_tokens
    R = len(requests)
    lens = [c + q for c, q in requests]
    T = sum(q for _, q in requests)
    w_swa = max(math.ceil(L / Ps) for L in lens)
    w_c = max(math.ceil(L / Bt) for L in lens)
    swa_need = [(max(0, c - W + 1) // Ps, math.ceil((c + q) / Ps)) for c, q in requests]
    n_swa = sum(b - a for a, b in swa_need)
    n_comp = sum(math.ceil(L / Bt) for L in lens)
    swa_pool, comp_pool = _page_pool(gen, n_swa, device).tolist(), _page_pool(gen, n_comp, device).tolist()
    swa_bt = torch.zeros(R, w_swa, dtype=torch.int32)
    comp_bt = torch.zeros(R, w_c, dtype=torch.int32)
    for b, ((a, e), L) in enumerate(zip(swa_need, lens)):
        for i in range(a, e):
            swa_bt[b, i] = swa_pool.pop()
        for i in range(math.ceil(L / Bt)):
            comp_bt[b, i] = comp_pool.pop()
    pos, t2r, qsl = [], [], [0]
    for b, (c, q) in enumerate(requests):
        pos += range(c, c + q)
        t2r += [b] * q
        qsl.append(qsl[-1] + q)
    pos_t, t2r_t = torch.tensor(pos, dtype=torch.int64), torch.tensor(t2r, dtype=torch.int64)
    swa_slot = swa_bt[t2r_t, pos_t // Ps].long() * Ps + pos_t % Ps
    comp_slot = {}
    for r in sorted(set(cfg.compress_ratios) - {0}):
        P = cfg.comp_page_tokens(r)
        slot = comp_bt[t2r_t, pos_t // Bt].long() * P + (pos_t // r) % P
        comp_slot[r] = torch.where((pos_t + 1) % r == 0, slot, -1)
    ring_slot = (1 + t2r_t) * cfg.ring_cap + pos_t % cfg.ring_cap
    rows = max_tokens or T
    dev = torch.device(device)
    prefill = list(range(num_decodes, R))
    meta = StepMetadata(
        num_decodes=num_decodes, num_decode_tokens=qsl[num_decodes], positions=pos_t.to(dev),
        query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=dev),
        seq_lens=torch.tensor(lens, dtype=torch.int32, device=dev), token_to_req=t2r_t.to(torch.int32).to(dev),
        is_valid_token=(swa_slot >= 0).to(dev), swa_block_table=swa_bt.to(dev), swa_slot_mapping=swa_slot.to(dev),
        comp_block_table=comp_bt.to(dev), comp_slot_mapping={r: s.to(dev) for r, s in comp_slot.items()},
        ring_slot=ring_slot.to(dev),
        topk_buffer=torch.full((rows, cfg.index_topk), -1, dtype=torch.int32, device=dev),
        candidate_buffer=torch.full((rows, cfg.candidate_blocks), -1, dtype=torch.int32, device=dev),
        query_start_loc_cpu=qsl, seq_lens_cpu=lens,
        prefill_chunks=[(prefill[i], prefill[min(i + 4, len(prefill)) - 1] + 1) for i in range(0, len(prefill), 4)])
    return meta, dict(swa_pages=n_swa + 1, comp_pages=n_comp + 1, ring_blocks=R + 1)


def random_caches(cfg, role, sizes, *, device="cpu", gen=None):
    """LayerCaches of `role` (made on gen's device, then moved to `device`) with random valid
    content: finite e4m3 codes, UE8M0 scales 118..122 (so |K| <= ~14, a few on average), bf16
    RoPE values, power-of-two indexer scales, an fp32 ring. The prior context of a step."""
    gen = gen or torch.Generator().manual_seed(1)
    swa = _random_records(sizes["swa_pages"], cfg.swa_page_tokens, gen)
    caches = LayerCaches(swa=swa)
    if role.owns_kv:
        P = cfg.comp_page_tokens(role.ratio)
        caches.comp = _random_records(sizes["comp_pages"], P, gen)
        caches.idx = _random_indexer(sizes["comp_pages"], P, gen)
        if role.ratio == 2:
            caches.ring = torch.randn(sizes["ring_blocks"] * cfg.ring_cap, 2 * HEAD_DIM, generator=gen,
                                      device=gen.device)
    for name in ("swa", "comp", "idx", "ring"):
        t = getattr(caches, name)
        if t is not None:
            setattr(caches, name, t.to(device))
    return caches


def _random_codes(shape, gen):
    c = torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8, device=gen.device)
    return torch.where((c & 0x7F) == 0x7F, c ^ 1, c)  # no NaN codes (writers never emit them)


def _random_records(pages, P, gen):
    cache = torch.zeros(pages, page_bytes(P), dtype=torch.uint8, device=gen.device)
    data = cache[:, :P * 576].view(pages, P, 576)
    data[:, :, :448] = _random_codes((pages, P, 448), gen)
    rope = torch.randn(pages, P, 64, generator=gen, device=gen.device).to(torch.bfloat16)
    data[:, :, 448:] = rope.view(torch.uint8).view(pages, P, 128)
    scales = cache[:, P * 576:P * 584].view(pages, P, 8)
    enc = torch.randint(118, 123, (pages, P, 7), generator=gen, dtype=torch.int32, device=gen.device)
    scales[:, :, :7] = enc.to(torch.uint8)
    return cache


def _random_indexer(pages, P, gen):
    cache = torch.zeros(pages, page_bytes(P, INDEXER_STATE), dtype=torch.uint8, device=gen.device)
    cache[:, :P * 128] = _random_codes((pages, P * 128), gen)
    e = torch.randint(-9, -5, (pages, P), generator=gen, device=gen.device).float()
    cache[:, P * 128:P * 132] = torch.exp2(e).view(torch.uint8).view(pages, P * 4)
    return cache
