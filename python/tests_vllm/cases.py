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
