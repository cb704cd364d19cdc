"""A pure-PyTorch model of the attention block (block.py), for tests: every GEMM, norm,
softmax and logit in fp32 or fp64, independent of the library's kernels and references, with
tensors rounded to the formats the block stores them in (bf16 activations, fp8_ds_mla cache
records, e4m3 index codes). Caches are held dequantized: slot -> fp32 row.

    ref = ReferenceState.from_caches(cfg, caches)         # before the step writes anything
    out = reference_block(cfg, layer, weights, meta, io, ref)   # layers in model order
"""
import torch

from .config import CANDIDATE_RESTRICT, CANDIDATE_WRITE
from .metadata import INDEXER_STATE

SCALE = 512 ** -0.5


def bf16r(x):
    """Round to bf16 (nearest even) and back to fp32."""
    return x.float().to(torch.bfloat16).float()


def _pow2_exponent(amax):
    """Smallest integer e with 448 * 2^e >= max(amax, 1e-4)."""
    q = torch.clamp(amax, min=1e-4) / 448.0
    m, ex = torch.frexp(q)
    return torch.where(m == 0.5, ex - 1, ex).float()


def _e4m3(x, e):
    """x quantized to e4m3 codes at scale 2^e, dequantized."""
    s = torch.exp2(e)
    return torch.clamp(x / s, -448, 448).to(torch.float8_e4m3fn).float() * s


def record(y):
    """A bf16-valued row [.., 512] through the 584-byte record: 7 NoPE blocks of 64 in e4m3 with
    a power-of-two scale each, the RoPE dims kept."""
    nope = y[..., :448].reshape(*y.shape[:-1], 7, 64)
    e = _pow2_exponent(nope.abs().amax(-1, keepdim=True))
    return torch.cat([_e4m3(nope, e).reshape(*y.shape[:-1], 448), y[..., 448:]], -1)


def _rope(x, cs, inverse=False):
    """GPT-J rotation of the last 64 dims of x [N, .., d] at table rows cs [N, 64], fp32."""
    c, s = cs[:, :32], cs[:, 32:]
    while c.dim() < x.dim():
        c, s = c[:, None], s[:, None]
    a, b = x[..., -64::2], x[..., -63::2]
    if inverse:
        s = -s
    out = x.clone()
    out[..., -64::2], out[..., -63::2] = a * c - b * s, a * s + b * c
    return out


def _rms(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _dequant_records(cache, P):
    pages = cache.shape[0]
    data = cache[:, :P * 576].reshape(pages, P, 576)
    codes = data[:, :, :448].contiguous().view(torch.float8_e4m3fn).float().reshape(pages, P, 7, 64)
    enc = cache[:, P * 576:P * 584].reshape(pages, P, 8)[:, :, :7].float()
    rope = data[:, :, 448:].contiguous().view(torch.bfloat16).float()
    nope = (codes * torch.exp2(enc - 127)[..., None]).reshape(pages, P, 448)
    return torch.cat([nope, rope], -1).reshape(pages * P, 512)


def _dequant_indexer(cache, P):
    pages = cache.shape[0]
    k = cache[:, :P * 128].contiguous().view(torch.float8_e4m3fn).float().reshape(pages, P, 128)
    sk = cache[:, P * 128:P * INDEXER_STATE].contiguous().view(torch.float32).reshape(pages, P, 1)
    return (k * sk).reshape(pages * P, 128)


class ReferenceState:
    """The reference's caches ({layer: dict swa / comp / idx / ring of fp32 rows}) and the
    shared top-k / candidate rows the latest index source wrote."""

    def __init__(self, caches):
        self.caches, self.topk, self.cand = caches, None, None

    @classmethod
    def from_caches(cls, cfg, caches):
        """Dequantized copies of the library caches ({layer: LayerCaches}) on the CPU."""
        out = {}
        for layer, c in caches.items():
            d = dict(swa=_dequant_records(c.swa.cpu(), cfg.swa_page_tokens))
            if c.comp is not None:
                P = cfg.comp_page_tokens(cfg.role(layer).ratio)
                d.update(comp=_dequant_records(c.comp.cpu(), P), idx=_dequant_indexer(c.idx.cpu(), P))
            if c.ring is not None:
                d["ring"] = c.ring.cpu().clone()
            out[layer] = d
        return cls(out)


def _f(t):
    return t.detach().cpu().float()


def reference_block(cfg, layer, w, meta, io, ref, selected=None):
    """The block's outputs (dict of fp32 CPU tensors: residual_out, post_out, comb_out,
    pre_out, layer_input, x_attn, o, and for index sources topk, logits, and for the candidate
    source cand), updating ref's caches and top-k rows as the block updates the library's.

    selected: optional (topk int32 [T, K], cand int32 [T, C] or None) that an index source
    attends with instead of its own selection: a one-ulp difference upstream can move a
    column across the top-k boundary, so a test checks the block's selection against its own
    scores and then compares the rest of the block with the same sets."""
    role = cfg.role(layer)
    r, H, T = role.ratio, cfg.num_heads, meta.num_tokens
    pos = meta.positions.cpu()
    t2r = meta.token_to_req.cpu().long()
    cs = _f(w.cos_sin)
    x = _f(io.x)
    qkv = bf16r(x @ _f(w.wqa_wkv).t())
    ql = cfg.q_lora_rank
    qr = bf16r(_rms(qkv[:, :ql], cfg.rms_norm_eps) * _f(w.q_norm))
    kv = bf16r(_rms(qkv[:, ql:], cfg.rms_norm_eps) * _f(w.kv_norm))
    q = bf16r(_rope(bf16r(qr @ _f(w.wq_b).t()).view(T, H, 512), cs[pos]))
    own = ref.caches[layer]
    swa_slot = meta.swa_slot_mapping.cpu()
    ok = swa_slot >= 0
    own["swa"][swa_slot[ok]] = record(bf16r(_rope(kv, cs[pos])))[ok]
    res = {}
    if role.owns_kv:
        _kv_source(cfg, r, w, meta, x, pos, t2r, cs, own)
    if role.owns_indexer:
        res.update(_indexer(cfg, role, w, meta, x, qr, pos, t2r, cs, ref))
        if selected is not None:
            ref.topk = selected[0].tolist()
            if selected[1] is not None:
                ref.cand = selected[1].tolist()
    o = _attention(cfg, role, w, meta, q, pos, t2r, ref)
    o = bf16r(_rope(o, cs[pos], inverse=True))
    G = cfg.o_groups
    oa = bf16r(torch.einsum("tgk,gkn->tgn", o.view(T, G, -1), _f(w.wo_a)))
    x_attn = bf16r(oa.reshape(T, -1) @ _f(w.wo_b).t())
    res.update(reference_seam(cfg, w, io, x_attn), x_attn=x_attn, o=o)
    return res


def _kv_source(cfg, r, w, meta, x, pos, t2r, cs, own):
    T = x.shape[0]
    score = (x.double() @ _f(w.wc).double().t()).float()
    qsl = meta.query_start_loc_cpu
    pooled = score[:, :512].clone()
    if r == 2:
        ring, cap, rslot = own["ring"], cfg.ring_cap, meta.ring_slot.cpu()
        for t in range(T):
            p = int(pos[t])
            if p % 2 == 0 or rslot[t] < 0:
                continue
            b = int(t2r[t])
            prev = score[t - 1] if t > qsl[b] else ring[rslot[t] // cap * cap + (p - 1) % cap]
            wts = torch.softmax(torch.stack([prev[512:], score[t, 512:]]).double(), 0).float()
            pooled[t] = wts[0] * prev[:512] + wts[1] * score[t, :512]
        for b in range(len(meta.seq_lens_cpu)):
            for t in range(max(qsl[b], qsl[b + 1] - cap), qsl[b + 1]):
                if rslot[t] >= 0:
                    ring[rslot[t]] = score[t]
    latent = bf16r(_rms(pooled, cfg.rms_norm_eps) * _f(w.c_norm))
    slot = meta.comp_slot_mapping[r].cpu()
    close = (slot >= 0) & ((pos + 1) % r == 0)
    first = (pos // r) * r
    own["comp"][slot[close]] = record(bf16r(_rope(latent, cs[first])))[close]
    k = bf16r(_rms(bf16r(latent @ _f(w.wk).t()), cfg.rms_norm_eps) * _f(w.k_norm))
    k = bf16r(_rope(k, cs[first]))
    e = _pow2_exponent(k.abs().amax(-1, keepdim=True))
    own["idx"][slot[close]] = _e4m3(k, e)[close]


def _select(values, eligible, k):
    """Ascending ids of the first min(k, |eligible|) columns ordered by value descending (NaN
    first, -0.0 = +0.0), then id ascending; -1 padded."""
    v = values.tolist()
    rank = lambda j: (v[j] == v[j], -v[j] if v[j] == v[j] else 0.0, j)  # noqa: E731
    ids = sorted(torch.nonzero(eligible).flatten().tolist(), key=rank)[:k]
    return sorted(ids) + [-1] * (k - len(ids))


def _indexer(cfg, role, w, meta, x, qr, pos, t2r, cs, ref):
    T, HI, K, B, C = x.shape[0], cfg.index_heads, cfg.index_topk, cfg.candidate_block_size, cfg.candidate_blocks
    qi = bf16r(_rope(bf16r(qr @ _f(w.wq_idx).t()).view(T, HI, 128), cs[pos]))
    w_raw = bf16r(x @ _f(w.w_proj).t())
    e = _pow2_exponent(qi.abs().amax(-1, keepdim=True))
    qd = _e4m3(qi, e).double()
    wt = w_raw.double() * (128 ** -0.5) * (HI ** -0.5)
    idx = ref.caches[role.kv_source]["idx"].double()
    P, bt = cfg.comp_page_tokens(role.ratio), meta.comp_block_table.cpu().long()
    valid = meta.is_valid_token.cpu()
    topk, cand, logits = [], [], []
    for t in range(T):
        n = int(pos[t] + 1) // role.ratio if valid[t] else 0
        j = torch.arange(n)
        keys = idx[bt[t2r[t], j // P] * P + j % P]
        lg = (torch.relu(qd[t] @ keys.t()) * wt[t][:, None]).sum(0)
        logits.append(lg)
        elig = torch.ones(n, dtype=torch.bool)
        nb = -(-n // B)
        if role.candidate_mode == CANDIDATE_RESTRICT:
            blocks = {g for g in ref.cand[t] if 0 <= g < nb}
            elig = torch.tensor([jj // B in blocks for jj in range(n)], dtype=torch.bool)
        topk.append(_select(lg, elig, K))
        if role.candidate_mode == CANDIDATE_WRITE:
            bs = [lg[g * B:(g + 1) * B].max() if not torch.isnan(lg[g * B:(g + 1) * B]).any() else float("nan")
                  for g in range(nb)]
            bs = torch.tensor(bs, dtype=torch.float64)
            if nb:
                bs[nb - 1] = float("inf")
            cand.append(_select(bs, bs != float("-inf"), C))
    ref.topk = topk
    out = dict(topk=torch.tensor(topk, dtype=torch.int32), logits=logits)
    if role.candidate_mode == CANDIDATE_WRITE:
        ref.cand = cand
        out["cand"] = torch.tensor(cand, dtype=torch.int32)
    return out


def _attention(cfg, role, w, meta, q, pos, t2r, ref):
    T, W = q.shape[0], cfg.window
    swa = ref.caches[role.layer]["swa"].double()
    sbt, Ps = meta.swa_block_table.cpu().long(), cfg.swa_page_tokens
    sink = _f(w.sink).double()
    o = torch.zeros_like(q)
    for t in range(T):
        p, b = int(pos[t]), int(t2r[t])
        win = torch.arange(max(p - W + 1, 0), p + 1)
        keys = [swa[sbt[b, win // Ps] * Ps + win % Ps]]
        if role.ratio:
            P, cbt = cfg.comp_page_tokens(role.ratio), meta.comp_block_table.cpu().long()
            sel = torch.tensor([j for j in ref.topk[t] if j >= 0], dtype=torch.long)
            keys.append(ref.caches[role.kv_source]["comp"].double()[cbt[b, sel // P] * P + sel % P])
        k = torch.cat(keys)
        s = SCALE * (q[t].double() @ k.t())
        m = torch.maximum(s.amax(1), sink)
        e = torch.exp(s - m[:, None])
        o[t] = ((e @ k) / (e.sum(1) + torch.exp(sink - m))[:, None]).float()
    return bf16r(o)


def reference_seam(cfg, w, io, x_attn, r_new=None):
    """The mHC seam given the attention output x_attn fp32 [T, hidden]: the post of this site,
    the FFN site's gates (fp64) and the FFN input (dict of fp32 CPU tensors). With r_new (the
    new residual [T, 4, hidden] some implementation stored) the gates and the FFN input are
    those of r_new: the gates are sensitive to a flipped last bit of the residual."""
    R, post, comb = _f(io.residual).double(), _f(io.post).double(), _f(io.comb).double()
    Rn = bf16r(post[:, :, None] * x_attn.double()[:, None, :] + torch.einsum("tjk,tjh->tkh", comb, R))
    res = Rn.float()
    if r_new is not None:
        Rn = _f(r_new)
    X = Rn.reshape(Rn.shape[0], -1).double()
    mix = (X @ _f(w.fn).double().t()) * torch.rsqrt((X * X).mean(1, keepdim=True) + cfg.rms_norm_eps)
    sc, base = _f(w.scale).double(), _f(w.base).double()
    pre = torch.sigmoid(mix[:, :4] * sc[0] + base[:4]) + 1e-6
    post_o = torch.sigmoid(mix[:, 4:8] * sc[1] + base[4:8]) * 2.0
    Cm = torch.softmax((mix[:, 8:] * sc[2] + base[8:]).view(-1, 4, 4), 2) + 1e-6
    Cm = Cm / (Cm.sum(1, keepdim=True) + 1e-6)
    for _ in range(19):
        Cm = Cm / (Cm.sum(2, keepdim=True) + 1e-6)
        Cm = Cm / (Cm.sum(1, keepdim=True) + 1e-6)
    # The collapse is the mHC contract's fp32 chain y = p0 R0, then fmaf(p_j, R_j, y): with
    # cancellation an fp64 sum can differ from it by more than one bf16 ulp of y. A product of
    # two fp32 values is exact in fp64, so each step rounds once to fp32, as fmaf does (short
    # of a rare double rounding, inside the callers' one-ulp allowance).
    P, Rd = _f(io.pre_mix).double(), Rn.double()
    y = (P[:, 0, None] * Rd[:, 0]).float()
    for j in range(1, 4):
        y = (P[:, j, None] * Rd[:, j] + y.double()).float()
    y = bf16r(y.double())
    li = bf16r(_rms(y.double(), cfg.rms_norm_eps) * _f(w.ffn_norm).double())
    return dict(residual_out=res, post_out=post_o.float(), comb_out=Cm.float(), pre_out=pre.float(),
                layer_input=li.float(), collapse=y.float())
