"""Random inputs shared by the conformance tests (torch CPU tensors, from a test's seed)."""
import torch

from deepinfer_sm80 import ops


def gen(seed):
    return torch.Generator().manual_seed(seed)


def bf16(g, *shape, scale=1.0):
    """bf16 values spanning magnitudes (normal * 2^k, k in [-8, 8]), some exact zeros."""
    x = torch.randn(*shape, generator=g) * torch.exp2(torch.randint(-8, 9, shape, generator=g).float()) * scale
    x[torch.rand(*shape, generator=g) < 0.01] = 0
    return x.to(torch.bfloat16)


def cos_sin(g, max_pos=512):
    """A rotary table [max_pos, 64] fp32: cos of 32 frequencies, then their sin."""
    inv = 1.0 / (10000 ** (torch.arange(32, dtype=torch.float64) / 32))
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cat([ang.cos(), ang.sin()], 1).float()


def paged(g, seq_lens, page_tokens, extra_pages=3):
    """A block table (int32 [R, width]) naming distinct random pages for each request's positions."""
    widths = [(int(n) + page_tokens - 1) // page_tokens for n in seq_lens]
    width = max(max(widths), 1)
    pages = sum(widths) + extra_pages
    perm = torch.randperm(pages, generator=g).to(torch.int32)
    table = torch.full((len(seq_lens), width), -1, dtype=torch.int32)
    at = 0
    for b, w in enumerate(widths):
        table[b, :w] = perm[at:at + w]
        at += w
    return table, pages


def filled_cache(g, pages, page_tokens, stride_pad=0):
    """A fp8_ds_mla cache [pages, P, 584] (page stride P*584 + stride_pad bytes) with every slot
    written by libdsv4's insert from random rows."""
    page = page_tokens * 584 + stride_pad
    flat = torch.full((pages * page,), 0x5A, dtype=torch.uint8)
    cache = flat.as_strided((pages, page_tokens, 584), (page, 584, 1))
    n = pages * page_tokens
    ops.kv_insert(bf16(g, n, 512), torch.arange(n, dtype=torch.int64), cache, page_tokens=page_tokens)
    return cache


# ---- the V4.0 compressor ------------------------------------------------------------------------
# Per ratio, as vLLM lays them out: state rows a block (B), compressed-cache slots a page (P), pages,
# and the requests as (first position of this call, rows); every window a record reads starts inside
# this call or in state rows an earlier call left.
V4_SHAPES = {
    4: dict(B=4, P=64, pages=2, reqs=[(10, 7), (0, 6), (29, 3)]),
    128: dict(B=8, P=2, pages=16, reqs=[(120, 14), (250, 8), (0, 5)]),
}
V4_POISON = 0xA5


def v4_case(g, ratio, page_pad=64):
    """A random call of the V4.0 compressor (torch CPU tensors): three requests (one from position
    0, whose first window at ratio 4 reaches below 0), two padded rows at a closing position (-1 in
    both slot mappings), a block table of distinct state blocks, random earlier state rows, a
    poisoned compressed cache [pages, P, 584] with pages page_pad bytes apart beyond P * 584, and a
    distinct slot for every live row. kv_score, state and ape hold kv then score halves."""
    sh = V4_SHAPES[ratio]
    B, P, pages = sh["B"], sh["P"], sh["pages"]
    width = (2 if ratio == 4 else 1) * 512
    R = len(sh["reqs"])
    max_blocks = max(s + n for s, n in sh["reqs"]) // B + 1
    blocks = R * max_blocks + 3
    table = torch.randperm(blocks, generator=g)[:R * max_blocks].to(torch.int32).reshape(R, max_blocks)
    pos, req = [], []
    for b, (s, n) in enumerate(sh["reqs"]):
        pos += list(range(s, s + n))
        req += [b] * n
    pad_at = [2, len(pos) // 2 + 1]
    for i in pad_at:
        pos.insert(i, ratio - 1)
        req.insert(i, 0)
    positions, req_idx = torch.tensor(pos, dtype=torch.int64), torch.tensor(req, dtype=torch.int32)
    T = len(pos)
    state_slot = table[req_idx.long(), positions // B].to(torch.int64) * B + positions % B
    slot_mapping = torch.randperm(pages * P, generator=g)[:T].to(torch.int64)
    state_slot[pad_at], slot_mapping[pad_at] = -1, -1
    kv_score = torch.cat([torch.randn(T, width, generator=g) * 2, torch.randn(T, width, generator=g) * 1.5], 1)
    state = torch.cat([torch.randn(blocks, B, width, generator=g) * 2,
                       torch.randn(blocks, B, width, generator=g) * 1.5], 2)
    ang = torch.rand(512, 32, generator=g, dtype=torch.float64) * 6.283185307179586
    gamma = (torch.randn(512, generator=g) * 0.3 + 1).to(torch.bfloat16)  # an RMSNorm weight near 1
    page = P * 584 + page_pad
    flat = torch.full((pages * page,), V4_POISON, dtype=torch.uint8)
    return dict(kv_score=kv_score, ape=torch.randn(ratio, width, generator=g), positions=positions,
                state_slot=state_slot, req_idx=req_idx, block_table=table, gamma=gamma,
                cos_sin_cache=torch.cat([ang.cos(), ang.sin()], 1).float(), slot_mapping=slot_mapping, state=state,
                cache=flat.as_strided((pages, P, 584), (page, 584, 1)), flat=flat, page=page, P=P, ratio=ratio)


def v4_record_slots(c):
    """The slots a V4.0 compressor call writes: live rows at positions closing a group."""
    pos, slots = c["positions"], c["slot_mapping"]
    return [int(s) for p, s in zip(pos.tolist(), slots.tolist()) if s >= 0 and p >= 0 and (p + 1) % c["ratio"] == 0]


def v4_decode(flat, page, P, slot):
    """One fp8_ds_mla record as float64: the 448 nope dims (e4m3 code times its block's UE8M0
    scale), the 7 block scales, the 64 bf16 RoPE dims, and the pad byte after the scales."""
    base = (slot // P) * page
    p = slot % P
    data = flat[base + p * 576:base + (p + 1) * 576]
    sc = flat[base + P * 576 + p * 8:base + P * 576 + p * 8 + 8]
    scale = torch.exp2(sc[:7].double() - 127)
    nope = data[:448].view(torch.float8_e4m3fn).double() * scale.repeat_interleave(64)
    rope = data[448:].view(torch.bfloat16).double()
    return nope, scale, rope, int(sc[7])


def v4_out_mask(flat, page, P, slots, data_bytes, scale_bytes):
    """True on the bytes of the given slots' outputs in pages of P slots: data_bytes per slot
    from the page base, then scale_bytes per slot after all the data (576 and 8 for an
    fp8_ds_mla record, 128 and 4 for an indexer state)."""
    m = torch.zeros(flat.numel(), dtype=torch.bool)
    for s in slots:
        base, q = (s // P) * page, s % P
        m[base + q * data_bytes:base + (q + 1) * data_bytes] = True
        m[base + P * data_bytes + q * scale_bytes:base + P * data_bytes + (q + 1) * scale_bytes] = True
    return m


# ---- the V4.0 indexer compressor (head 128) -----------------------------------------------------
def v4_indexer_case(g, ratio):
    """v4_case's call at head 128 (the lightning indexer's own compressor): the same requests, rows,
    block table and slots, kv_score, state and ape of c * 128 floats a half, gamma bf16 [128], and
    a poisoned indexer cache [pages, P, 132] with vLLM's page stride (P * 132 rounded up to a
    multiple of 576 bytes)."""
    c = v4_case(g, ratio)
    T, (blocks, B, _) = c["positions"].numel(), c["state"].shape
    width = (2 if ratio == 4 else 1) * 128
    pages, P = c["cache"].shape[0], c["P"]
    page = (P * 132 + 575) // 576 * 576
    flat = torch.full((pages * page,), V4_POISON, dtype=torch.uint8)
    kv_score = torch.cat([torch.randn(T, width, generator=g) * 2, torch.randn(T, width, generator=g) * 1.5], 1)
    state = torch.cat([torch.randn(blocks, B, width, generator=g) * 2,
                       torch.randn(blocks, B, width, generator=g) * 1.5], 2)
    ape = torch.randn(ratio, width, generator=g)
    gamma = (torch.randn(128, generator=g) * 0.3 + 1).to(torch.bfloat16)
    c.update(kv_score=kv_score, state=state, ape=ape, gamma=gamma, flat=flat, page=page,
             cache=flat.as_strided((pages, P, 132), (page, 132, 1)))
    return c


def v4_state_decode(flat, page, P, slot):
    """One indexer state as float64: the 128 dims (e4m3 code times the state's scale), the fp32
    scale, and the codes."""
    base, q = (slot // P) * page, slot % P
    codes = flat[base + q * 128:base + (q + 1) * 128]
    scale = float(flat[base + P * 128 + q * 4:base + P * 128 + q * 4 + 4].clone().view(torch.float32))
    return codes.view(torch.float8_e4m3fn).double() * scale, scale, codes
