#!/usr/bin/env python3
"""libdsv4 vs plain PyTorch: every operator through the Python binding and through a PyTorch
implementation of the same contract (include/dsv4/*.h) written here, checked for agreement and timed on the same inputs.

    python3 scripts/compare_torch.py OUTFILE.jsonl [--op NAME ...] [--reps 30] [--warmup 5]
    python3 scripts/compare_torch.py --self-test-cpu    # checks only, small shapes, on CPU tensors

Timing: CUDA events on torch's current stream around each call, warm-up first, median of
--reps (>= 20) single-call samples, the same input tensors for both sides. The PyTorch side
is what a user would write without this library: dequantize-then-index for the gather, a chain
of torch ops for the index builders, gather + fp32 bmm + softmax (with the sink) + bmm for
attention, fp32 GEMM + elementwise ops + a 20-step Sinkhorn loop for the mHC gates. Where the
contract is an exact fmaf chain (mHC post, collapse) and the RoPE of the SWA writer's KV side,
the torch code evaluates each fmaf as a float64 product + sum rounded once to fp32 (exact for
these magnitudes), so that it can be compared bit for bit; that costs it some bandwidth.

Checks follow numerics.md section 8: bit-exact for insert, gather, index ops, mHC residual,
collapse, aux and fn_bcast; <= 1 bf16 ulp for the SWA writer's q and RMS-normed outputs;
attention within max abs 1e-2 * max|K| and relative L2 5e-3 of the fp32 torch result; mHC
mix within 1e-5 * rms * sum|X fn| of an fp64 projection and pre/post/comb within 1e-5 of an fp64
epilogue fed the library's own mix.

Writes one JSON object per line to OUTFILE (device, op, case, torch_us, dsv4_us, speedup,
check, ...) and prints a table. Without torch or a CUDA device it says so and exits 0. Exit
status 1 if any check failed.
"""
import argparse
import os
import json
import math
import pathlib
import shlex
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

try:
    import torch
except ImportError:
    torch = None

REC, DATA, NOPE = 584, 576, 448


# ==== shared torch pieces (the contracts, in torch) ================================================
def page_stride(P):
    return (P * REC + 575) // 576 * 576


def rand_bf16(shape, dev, gen, lo=-4, hi=4):
    """Model-like bf16: random sign and mantissa, exponent in [lo, hi]."""
    sign = torch.randint(0, 2, shape, device=dev, generator=gen, dtype=torch.int32) << 15
    e = torch.randint(lo + 127, hi + 128, shape, device=dev, generator=gen, dtype=torch.int32) << 7
    m = torch.randint(0, 128, shape, device=dev, generator=gen, dtype=torch.int32)
    return (sign | e | m).to(torch.int16).view(torch.bfloat16)


def rand_cache(pages, P, dev, gen, scales=(115, 135)):
    """Random records: finite e4m3 codes, UE8M0 scales in `scales`, bf16 RoPE values. Attention
    uses 118..122 (|K| up to ~3.5, like an RMS-normed latent, so the softmax is not one-hot)."""
    st = page_stride(P)
    c = torch.randint(0, 256, (pages, st), device=dev, generator=gen, dtype=torch.int32).to(torch.uint8)
    data = c[:, :P * DATA].view(pages, P, DATA)
    nope = data[:, :, :NOPE]
    nope[(nope & 0x7F) == 0x7F] ^= 1
    data[:, :, NOPE:] = rand_bf16((pages, P, 64), dev, gen).view(torch.uint8).view(pages, P, 128)
    c[:, P * DATA:P * REC] = torch.randint(scales[0], scales[1] + 1, (pages, P * 8), device=dev, generator=gen).to(torch.uint8)
    return c


def fmaf(a, b, c):
    """fp32 fmaf(a, b, c): float64 product and sum (exact here), rounded once to fp32."""
    return (a.double() * b.double() + c.double()).float()


def ue8m0_scale(enc):
    """2^(enc-127) by the shift into the fp32 exponent field (enc 0 -> 0, 255 -> inf)."""
    return (enc.to(torch.int32) << 23).view(torch.float32)


def t_quantize(rows):
    """bf16 [T, 512] -> the 584 record bytes as (data [T, 576], scales [T, 8]) (kvcache.h's quantization)."""
    T = rows.shape[0]
    x = rows[:, :NOPE].float().view(T, 7, 64)
    a = torch.where(torch.isnan(x), torch.zeros_like(x), x.abs()).amax(-1)
    a = torch.clamp_min(a, torch.tensor(1e-4, dtype=torch.float32, device=rows.device))
    qb = (a / 448.0).view(torch.int32)
    enc = torch.clamp((qb >> 23) + ((qb & 0x7FFFFF) != 0).to(torch.int32), 0, 255)  # smallest e+127
    v = torch.ldexp(x, (127 - enc).unsqueeze(-1).float()).clamp(-448, 448).nan_to_num(nan=448.0)
    codes = v.to(torch.float8_e4m3fn).view(torch.uint8).view(T, NOPE)
    data = torch.cat([codes, rows[:, NOPE:].contiguous().view(torch.uint8).view(T, 128)], 1)
    scales = torch.cat([enc.to(torch.uint8), torch.zeros(T, 1, dtype=torch.uint8, device=rows.device)], 1)
    return data, scales


def t_insert(rows, slots, cache, P):
    """quantize_and_insert with torch ops: byte offsets of each record, masked index_put."""
    data, scales = t_quantize(rows[:slots.shape[0]])
    pages, st = cache.shape
    ok = (slots >= 0) & (slots < pages * P)
    s = slots[ok]
    base = (s // P) * st
    p = s % P
    flat = cache.view(-1)
    ar = torch.arange(DATA, device=cache.device)
    flat[(base + p * DATA).unsqueeze(1) + ar] = data[ok]
    flat[(base + P * DATA + p * 8).unsqueeze(1) + ar[:8]] = scales[ok]
    return cache


def t_rows(cache, P, pages_valid, slot):
    """Dequantize the records of `slot` (int64, any shape, all valid) -> bf16 [..., 512]."""
    st = cache.shape[1]
    flat = cache.view(-1)
    base = (slot // P) * st
    p = slot % P
    ar = torch.arange(DATA, device=cache.device)
    rec = flat[(base + p * DATA).unsqueeze(-1) + ar]  # [..., 576]
    sc = flat[(base + P * DATA + p * 8).unsqueeze(-1) + ar[:7]]  # [..., 7]
    nope = rec[..., :NOPE].contiguous().view(torch.float8_e4m3fn).float()
    nope = (nope.unflatten(-1, (7, 64)) * ue8m0_scale(sc).unsqueeze(-1)).flatten(-2).bfloat16()
    return torch.cat([nope, rec[..., NOPE:].contiguous().view(torch.bfloat16)], -1)


def t_gather(cache, seq, table, out, P, offset=0, glen=None):
    """dequantize_and_gather: positions of each request -> slots -> dequantized rows, masked write."""
    R, M = seq.shape[0], out.shape[1]
    pages, width = cache.shape[0], table.shape[1]
    L = seq.long()
    G = L if glen is None else glen.long()
    i = torch.arange(M - offset, device=out.device)
    pos = (L - G).unsqueeze(1) + i
    write = i < G.unsqueeze(1)
    lp = torch.div(pos, P, rounding_mode="floor")
    ok = (pos >= 0) & (lp < width)
    page = table.long().gather(1, lp.clamp(0, max(width - 1, 0)))
    ok &= (page >= 0) & (page < pages)
    rows = t_rows(cache, P, pages, torch.where(ok, page * P + pos % P, torch.zeros_like(pos)))
    rows = torch.where(ok.unsqueeze(-1), rows, torch.zeros_like(rows))
    out[:R, offset:][write] = rows[write]
    return out


def t_rope_pairs(xa, xb, c, s, exact):
    if exact:  # the writer's KV side: y_a = fmaf(x_a, c, -(x_b*s)), y_b = fmaf(x_a, s, x_b*c)
        return fmaf(xa, c, -(xb * s)), fmaf(xa, s, xb * c)
    return xa * c - xb * s, xa * s + xb * c


def t_swa_write(q, kv, pos, slots, cs, cache, P, eps, heads):
    x = q[:, :heads].float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    c, s = cs[pos, :32].unsqueeze(1), cs[pos, 32:].unsqueeze(1)
    ya, yb = t_rope_pairs(y[..., NOPE::2], y[..., NOPE + 1::2], c, s, True)  # the contract's fmaf form
    y[..., NOPE::2], y[..., NOPE + 1::2] = ya, yb
    q[:, :heads] = y.bfloat16()
    q[:, heads:] = 0
    n = slots.shape[0]
    r = kv[:n].clone()
    xf = r.float()
    ka, kb = t_rope_pairs(xf[:, NOPE::2], xf[:, NOPE + 1::2], cs[pos[:n], :32], cs[pos[:n], 32:], True)
    r[:, NOPE::2], r[:, NOPE + 1::2] = ka.bfloat16(), kb.bfloat16()
    t_insert(r, slots, cache, P)
    return q, cache


def t_translate(topk, t2r, table, valid, bs):
    R, W = table.shape
    v, req = topk.long(), t2r.long()
    lp = torch.div(v, bs, rounding_mode="floor")
    okreq = (req >= 0) & (req < R)
    ok = okreq.unsqueeze(1) & (v >= 0) & (lp < W)
    page = table.long()[req.clamp(0, R - 1).unsqueeze(1), lp.clamp(0, W - 1)]
    g = torch.where(ok, page * bs + v % bs, torch.full_like(v, -1)).to(torch.int32)
    lens = torch.where(valid.bool() & okreq, ok.sum(1), torch.zeros_like(req)).to(torch.int32)
    return g, lens


def t_translate_packed(topk, t2r, table, valid, bs):
    g, lens = t_translate(topk, t2r, table, valid, bs)
    indptr = torch.cat([lens.new_zeros(1), torch.cumsum(lens, 0, dtype=torch.int32)])
    keep = torch.arange(g.shape[1], device=g.device) < lens.unsqueeze(1)
    return lens, indptr, g[keep]


def t_combine(topk, qsl, seq, gat, T, TOPK, W, ratio, M, N, v4=False):
    dev = qsl.device
    qsl = qsl.long() - qsl[0].long()
    q0, q1 = qsl[:-1], qsl[1:]
    R = q1.shape[0]
    t = torch.arange(T, device=dev)
    b = torch.searchsorted(q1, t, right=True)
    covered = b < R
    bc = b.clamp(max=R - 1)
    L, G = seq.long()[bc], gat.long()[bc]
    gs = L - G
    pos = L - (q1[bc] - q0[bc]) + (t - q0[bc])
    zero = torch.zeros_like(pos)
    tl = zero if ratio == 0 else torch.clamp(torch.div(torch.clamp(pos + 1, min=0), ratio, rounding_mode="floor"),
                                             max=TOPK)
    if v4:
        sl = torch.clamp(torch.clamp(pos + 1, min=0), max=W)
        ss = pos - sl + 1
    else:
        ss = torch.maximum(torch.maximum(pos - W + 1, zero), gs)
        sl = torch.clamp(pos - ss + 1, min=0)
    C = (TOPK + W + 127) // 128 * 128
    j = torch.arange(C, device=dev)
    inA = j < tl.unsqueeze(1)
    if TOPK:
        v = torch.nn.functional.pad(topk[:, :TOPK].long(), (0, C - TOPK), value=-1)
        va = v + M * b.unsqueeze(1)
        if not v4:
            va = torch.where((v >= 0) & (v < N), va, torch.full_like(va, -1))
    else:
        va = torch.full((T, C), -1, device=dev, dtype=torch.long)
    jb = j - tl.unsqueeze(1)
    inB = (jb >= 0) & (jb < sl.unsqueeze(1))
    vb = M * b.unsqueeze(1) + N + (ss - gs).unsqueeze(1) + jb
    out = torch.where(inA, va, torch.where(inB, vb, torch.full_like(vb, -1)))
    out = torch.where(covered.unsqueeze(1), out, torch.full_like(out, -1)).to(torch.int32)
    lens = torch.where(covered, tl + sl, zero).to(torch.int32)
    return out, lens


def t_decode_swa(t2r, pos, valid, table, W, P):
    R, width = table.shape
    req, p = t2r.long(), pos.long()
    ok = (req >= 0) & (req < R) & (p >= 0)
    n = torch.where(ok, torch.clamp(p + 1, max=W), torch.zeros_like(p))
    j = torch.arange(W, device=pos.device)
    q = (p - n + 1).unsqueeze(1) + j
    lp = torch.div(q, P, rounding_mode="floor")
    good = (j < n.unsqueeze(1)) & (lp < width)
    slot = table.long()[req.clamp(0, R - 1).unsqueeze(1), lp.clamp(0, width - 1)] * P + q % P
    out = torch.where(good, slot, torch.full_like(slot, -1)).to(torch.int32)
    return out, torch.where(valid.bool(), n, torch.zeros_like(n)).to(torch.int32)


def t_attend(q, K, valid, sink, scale):
    """fp32: softmax(scale q K^T) over valid keys with the sink in the denominator, times K."""
    s = torch.bmm(q.float(), K.transpose(1, 2)) * scale  # [T, H, n]
    s = s.masked_fill(~valid.unsqueeze(1), -math.inf)
    m = s.amax(-1, keepdim=True)
    if sink is not None:
        m = torch.maximum(m, sink.view(1, -1, 1))
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(s - m)
    den = p.sum(-1, keepdim=True)
    if sink is not None:
        den = den + torch.exp(sink.view(1, -1, 1) - m)
    out = torch.bmm(p, K) / den.clamp_min(1e-30)
    return torch.where(den > 0, out, torch.zeros_like(out))


def t_list_rows(cache, P, ids, lens):
    pages = cache.shape[0]
    j = torch.arange(ids.shape[1], device=ids.device)
    ok = (j < lens.unsqueeze(1)) & (ids >= 0) & (ids < pages * P)
    rows = t_rows(cache, P, pages, torch.where(ok, ids.long(), torch.zeros_like(ids, dtype=torch.long))).float()
    return rows.nan_to_num(nan=0.0), ok  # NaN lanes read as 0


def t_decode(q, cs, P_s, mi, ml, cc, P_c, ei, el, sink, scale):
    Km, okm = t_list_rows(cs, P_s, mi, ml)
    Ke, oke = t_list_rows(cc, P_c, ei, el)
    return t_attend(q, torch.cat([Km, Ke], 1), torch.cat([okm, oke], 1), sink, scale)


def t_prefill(q, kv, ids, lens, sink, scale):
    rows = kv.shape[0]
    j = torch.arange(ids.shape[1], device=ids.device)
    ok = (j < lens.unsqueeze(1)) & (ids >= 0) & (ids < rows)
    K = kv[torch.where(ok, ids, torch.zeros_like(ids)).long()].float()
    return t_attend(q, K, ok, sink, scale)


def t_post(x, R, post, comb):
    acc = (post.view(-1, 4, 1).double() * x.unsqueeze(1).double()).float()  # [T, k, H]
    for j in range(4):
        acc = fmaf(comb[:, j, :].unsqueeze(-1), R[:, j].unsqueeze(1), acc)
    return acc.bfloat16()


def t_collapse(R, p, w, eps, aux=False):
    y = R[:, 0].float() if p is None else (p[:, 0:1].double() * R[:, 0].double()).float()
    if p is not None:
        for j in range(1, 4):
            y = fmaf(p[:, j:j + 1], R[:, j], y)
    yb = y.bfloat16()
    out = yb
    if w is not None:
        v = yb.float()
        out = ((v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)) * w.float()).bfloat16()
    if aux:
        Rf = R.float()
        return out, ((((Rf[:, 0] + Rf[:, 1]) + Rf[:, 2]) + Rf[:, 3]) * 0.25).bfloat16()
    return out


def t_gates(X, fn, scale, base, rms_eps=1e-20, pre_eps=1e-6, sk_eps=1e-6, post_mult=2.0, iters=20):
    Xf = X.reshape(X.shape[0], -1).float()
    mix = (Xf @ fn.t()) * torch.rsqrt(Xf.pow(2).sum(1, keepdim=True) / Xf.shape[1] + rms_eps)
    pre = torch.sigmoid(mix[:, :4] * scale[0] + base[:4]) + pre_eps
    post = torch.sigmoid(mix[:, 4:8] * scale[1] + base[4:8]) * post_mult
    C = torch.softmax((mix[:, 8:] * scale[2] + base[8:]).view(-1, 4, 4), -1) + sk_eps
    C = C / (C.sum(1, keepdim=True) + sk_eps)
    for _ in range(iters - 1):
        C = C / (C.sum(2, keepdim=True) + sk_eps)
        C = C / (C.sum(1, keepdim=True) + sk_eps)
    return dict(post=post, comb=C, pre=pre, mix=mix)


def gates_fp64(mix, scale, base, pre_eps=1e-6, sk_eps=1e-6, post_mult=2.0, iters=20):
    """The epilogue in fp64, fed a given mix (the check of numerics.md section 8)."""
    m, sc, b = mix.double(), scale.double(), base.double()
    pre = torch.sigmoid(m[:, :4] * sc[0] + b[:4]) + pre_eps
    post = torch.sigmoid(m[:, 4:8] * sc[1] + b[4:8]) * post_mult
    L = (m[:, 8:] * sc[2] + b[8:]).view(-1, 4, 4)
    C = torch.exp(L - L.amax(-1, keepdim=True))
    C = C / C.sum(-1, keepdim=True) + sk_eps
    C = C / (C.sum(1, keepdim=True) + sk_eps)
    for _ in range(iters - 1):
        C = C / (C.sum(2, keepdim=True) + sk_eps)
        C = C / (C.sum(1, keepdim=True) + sk_eps)
    return dict(pre=pre, post=post, comb=C)


# ==== checks ======================================================================================
def exact(a, b, what):
    a, b = a.reshape(-1), b.reshape(-1)
    if a.dtype == torch.bfloat16:
        a, b = a.view(torch.int16), b.view(torch.int16)
    n = int((a != b).sum())
    return (n == 0), (f"{what}: bit-exact" if n == 0 else f"{what}: {n} of {a.numel()} differ")


def ulps(a, b, what, limit=1):
    def ordered(x):
        x = x.reshape(-1).view(torch.int16).to(torch.int32) & 0xFFFF
        return torch.where(x >= 0x8000, 0x8000 - x, x)
    u = int((ordered(a) - ordered(b)).abs().max()) if a.numel() else 0
    return u <= limit, f"{what}: max {u} bf16 ulp (<= {limit})"


def q_rope_close(got, ref, q_in, pos, cs, heads, eps, what):
    """q after the SWA writer: NoPE dims within 1 bf16 ulp (numerics.md section 8); RoPE
    dims within 1 ulp of the result plus 2^-16 of the un-cancelled magnitude
    rq*(|x_a c| + |x_b s|): a rotation that cancels turns the fp32 norm factor's few-ulp
    differences (reduction order) into many ulps of a tiny result, which is not an error."""
    ok_n, msg_n = ulps(got[..., :NOPE], ref[..., :NOPE], what + " NoPE")
    x = q_in[:, :heads].double()
    rq = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    c, s = cs[pos, :32].unsqueeze(1).double().abs(), cs[pos, 32:].unsqueeze(1).double().abs()
    xa, xb = (x[..., NOPE::2] * rq).abs(), (x[..., NOPE + 1::2] * rq).abs()
    mag = torch.stack((xa * c + xb * s, xa * s + xb * c), -1).flatten(-2)
    g, r = got[:, :heads, NOPE:].double(), ref[:, :heads, NOPE:].double()
    ulp = torch.ldexp(torch.ones_like(r), torch.frexp(r.abs().clamp_min(1e-38))[1] - 8)
    excess = float(((g - r).abs() - ulp - mag * 2.0 ** -16).max()) if g.numel() else 0.0
    ok_r = excess <= 0.0
    return ok_n and ok_r, f"{msg_n}; RoPE dims within 1 ulp + 2^-16 of the rotation's magnitude: {'yes' if ok_r else 'NO'}"


def attn_close(got, ref, maxk, what):
    g, r = got.double(), ref.double()
    err = float((g - r).abs().max())
    rel = float((g - r).norm() / r.norm().clamp_min(1e-300))
    ok = err <= 1e-2 * maxk and rel <= 5e-3
    return ok, f"{what}: max abs {err:.2e} (<= {1e-2 * maxk:.2e}), rel L2 {rel:.2e} (<= 5e-3)"


def gates_close(res, X, fn, scale, base, gate, what):
    Xd = X.reshape(X.shape[0], -1).double()
    F = fn.double()
    rms = torch.rsqrt(Xd.pow(2).sum(1, keepdim=True) / Xd.shape[1] + gate["rms_eps"])
    mix64, bound = (Xd @ F.t()) * rms, (Xd.abs() @ F.abs().t()) * rms
    mix_ok = bool(((res["mix"].double() - mix64).abs() <= 1e-5 * bound + 1e-30).all())
    ep = gates_fp64(res["mix"], scale, base, gate["pre_eps"], gate["sinkhorn_eps"], gate["post_mult"],
                    gate["sinkhorn_iters"])
    err = max(float((res[k].double().reshape(ep[k].shape) - ep[k]).abs().max()) for k in ("pre", "post", "comb"))
    return mix_ok and err <= 1e-5, f"{what}: mix {'within' if mix_ok else 'BEYOND'} 1e-5 bound, gates {err:.1e} (<= 1e-5)"


def merge(*checks):
    return all(c[0] for c in checks), "; ".join(c[1] for c in checks)


# ==== cases ======================================================================================
class Case:
    """One row: setup() builds inputs once; dsv4() / torch_() are the timed calls; check() runs
    both once on fresh copies and returns (ok, detail)."""

    def __init__(self, op, name, setup, dsv4, torch_, check, impl):
        self.op, self.name, self.setup, self.dsv4, self.torch_, self.check, self.impl = (
            op, name, setup, dsv4, torch_, check, impl)


def cases(d, dev, small):
    g = torch.Generator(device=dev)
    g.manual_seed(0x5EED)
    S = (lambda big, little: little) if small else (lambda big, little: big)
    out = []

    # ---- kv_insert ----
    def insert_setup(T, P=64):
        pages = (T + P - 1) // P + 2
        slots = (torch.randperm(pages * P, device=dev, generator=g)[:T]).long()
        slots[::97] = -1
        return dict(k=rand_bf16((T, 512), dev, g, -8, 6), slots=slots, cache=rand_cache(pages, P, dev, g), P=P)

    for T in (S(65536, 512), S(8192, 64)):
        def chk(s):
            a, b = s["cache"].clone(), s["cache"].clone()
            d.kv_insert(s["k"], s["slots"], a, page_tokens=s["P"])
            t_insert(s["k"], s["slots"], b, s["P"])
            return exact(a, b, "cache bytes")
        out.append(Case("kv_insert", f"T={T} P=64", lambda T=T: insert_setup(T),
                        lambda s: d.kv_insert(s["k"], s["slots"], s["cache"], page_tokens=s["P"]),
                        lambda s: t_insert(s["k"], s["slots"], s["cache"], s["P"]), chk,
                        "float8_e4m3fn cast + byte-offset index_put"))

    # ---- kv_swa_write ----
    def swa_setup(N, H, P=32, max_pos=16384):
        pages = (N + P - 1) // P + 2
        return dict(q=rand_bf16((N, H, 512), dev, g, -6, 3), kv=rand_bf16((N, 512), dev, g, -6, 3),
                    pos=torch.randint(0, max_pos, (N,), device=dev, generator=g),
                    slots=torch.randperm(pages * P, device=dev, generator=g)[:N].long(),
                    cs=torch.rand((max_pos, 64), device=dev, generator=g) * 2 - 1, cache=rand_cache(pages, P, dev, g),
                    P=P, H=H)

    for N, H in ((S(2048, 64), 64), (S(2048, 64), 32)):
        def chk(s):
            qa, qb, ca, cb = s["q"].clone(), s["q"].clone(), s["cache"].clone(), s["cache"].clone()
            d.kv_swa_write(qa, s["kv"], s["pos"], s["slots"], s["cs"], ca, page_tokens=s["P"], eps=1e-6)
            t_swa_write(qb, s["kv"], s["pos"], s["slots"], s["cs"], cb, s["P"], 1e-6, s["H"])
            return merge(exact(ca, cb, "cache bytes"),
                         q_rope_close(qa, qb, s["q"], s["pos"], s["cs"], s["H"], 1e-6, "q"))
        out.append(Case("kv_swa_write", f"T={N} H={H} P=32", lambda N=N, H=H: swa_setup(N, H),
                        lambda s: d.kv_swa_write(s["q"], s["kv"], s["pos"], s["slots"], s["cs"], s["cache"],
                                                 page_tokens=s["P"], eps=1e-6),
                        lambda s: t_swa_write(s["q"], s["kv"], s["pos"], s["slots"], s["cs"], s["cache"], s["P"],
                                              1e-6, s["H"]),
                        chk, "fp32 norm/RoPE ops (KV RoPE fmaf via fp64) + t_insert"))

    # ---- kv_gather ----
    def gather_setup(rows, reqs, P):
        per = rows // reqs
        width = (per + P - 1) // P
        pages = reqs * width + 1
        table = (1 + torch.randperm(pages - 1, device=dev, generator=g)[:reqs * width]).view(reqs, width).int()
        return dict(cache=rand_cache(pages, P, dev, g), table=table,
                    seq=torch.full((reqs,), per, dtype=torch.int32, device=dev),
                    out=torch.zeros((reqs, per, 512), dtype=torch.bfloat16, device=dev), P=P)

    for rows, reqs, P in ((S(16384, 1024), 1, 64), (S(16384, 1024), 4, 64), (S(49152, 1024), 4, 256)):
        def chk(s):
            a, b = torch.full_like(s["out"], 7.0), torch.full_like(s["out"], 7.0)
            d.kv_gather(s["cache"], s["seq"], s["table"], a, page_tokens=s["P"])
            t_gather(s["cache"], s["seq"], s["table"], b, s["P"])
            return exact(a, b, "rows")
        out.append(Case("kv_gather", f"rows={rows} R={reqs} P={P}", lambda a=(rows, reqs, P): gather_setup(*a),
                        lambda s: d.kv_gather(s["cache"], s["seq"], s["table"], s["out"], page_tokens=s["P"]),
                        lambda s: t_gather(s["cache"], s["seq"], s["table"], s["out"], s["P"]), chk,
                        "dequantize (float8 cast * 2^(enc-127)) then index, masked write"))

    # ---- index ops ----
    def translate_setup(T, K, R=16, width=2048, bs=64):
        topk = torch.randint(0, width * bs, (T, K), device=dev, generator=g, dtype=torch.int32)
        topk[:, K * 3 // 4:] = -1
        return dict(topk=topk, t2r=torch.randint(0, R, (T,), device=dev, generator=g, dtype=torch.int32),
                    table=torch.randint(0, 100000, (R, width), device=dev, generator=g, dtype=torch.int32),
                    valid=torch.rand(T, device=dev, generator=g) < 0.95, bs=bs)

    T_idx = S(8192, 256)
    for K in (512, 2048):
        def chk(s):
            a = d.topk_translate(s["topk"], s["t2r"], s["table"], s["valid"], page_tokens=s["bs"])
            b = t_translate(s["topk"], s["t2r"], s["table"], s["valid"], s["bs"])
            return merge(exact(a[0], b[0], "indices"), exact(a[1], b[1], "lens"))
        out.append(Case("topk_translate", f"T={T_idx} K={K}", lambda K=K: translate_setup(T_idx, K),
                        lambda s: d.topk_translate(s["topk"], s["t2r"], s["table"], s["valid"], page_tokens=s["bs"]),
                        lambda s: t_translate(s["topk"], s["t2r"], s["table"], s["valid"], s["bs"]), chk,
                        "gather of the block table + where + sum"))

    def chk_packed(s):
        a = d.topk_translate_packed(s["topk"], s["t2r"], s["table"], s["valid"], page_tokens=s["bs"])
        b = t_translate_packed(s["topk"], s["t2r"], s["table"], s["valid"], s["bs"])
        n = int(b[1][-1])
        return merge(exact(a[0], b[0], "lens"), exact(a[1], b[1], "indptr"), exact(a[2][:n], b[2], "packed"))
    out.append(Case("topk_translate_packed", f"T={T_idx} K=512", lambda: translate_setup(T_idx, 512),
                    lambda s: d.topk_translate_packed(s["topk"], s["t2r"], s["table"], s["valid"], page_tokens=s["bs"]),
                    lambda s: t_translate_packed(s["topk"], s["t2r"], s["table"], s["valid"], s["bs"]), chk_packed,
                    "t_translate + cumsum + boolean-mask pack"))

    def combine_setup(T, TOPK, ratio, R=4, W=128):
        qlen = torch.full((R,), T // R, dtype=torch.int64)
        qlen[-1] += T - int(qlen.sum())
        prefix = torch.randint(0, 60000, (R,), generator=torch.Generator().manual_seed(T + TOPK + ratio))
        seq = (qlen + prefix).int()
        gat = (qlen + torch.clamp(prefix, max=W - 1)).int()
        qsl = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(qlen, 0)]).int()
        N = int(seq.max()) // ratio if ratio else 0
        topk = torch.randint(0, max(N, 1), (T, TOPK), device=dev, generator=g, dtype=torch.int32) if TOPK else None
        return dict(topk=topk, qsl=qsl.to(dev), seq=seq.to(dev), gat=gat.to(dev), T=T, TOPK=TOPK, W=W, ratio=ratio,
                    M=N + W + T, N=N)

    def d_combine(s):
        return d.combine_topk_swa(s["topk"], s["qsl"], s["seq"], s["gat"], topk=s["TOPK"], window=s["W"],
                                  ratio=s["ratio"], slab_rows=s["M"], swa_row0=s["N"], num_tokens=s["T"])

    def tt_combine(s):
        return t_combine(s["topk"], s["qsl"], s["seq"], s["gat"], s["T"], s["TOPK"], s["W"], s["ratio"], s["M"],
                         s["N"])

    def chk_combine(s):
        a, b = d_combine(s), tt_combine(s)
        return merge(exact(a[0], b[0], "combined"), exact(a[1], b[1], "lens"))

    for T, TOPK, ratio in ((S(8192, 256), 512, 4), (S(8192, 256), 1024, 4), (S(1536, 256), 512, 2),
                           (S(8192, 256), 0, 0)):
        out.append(Case("combine_topk_swa", f"T={T} topk={TOPK} r={ratio} R=4",
                        lambda a=(T, TOPK, ratio): combine_setup(*a), d_combine, tt_combine, chk_combine,
                        "searchsorted + arange/where chain (three regions)"))

    def dswa_setup(T, R=64, width=512, P=64):
        return dict(t2r=torch.randint(0, R, (T,), device=dev, generator=g, dtype=torch.int32),
                    pos=torch.randint(0, width * P, (T,), device=dev, generator=g, dtype=torch.int32),
                    valid=torch.rand(T, device=dev, generator=g) < 0.95,
                    table=torch.randint(0, 100000, (R, width), device=dev, generator=g, dtype=torch.int32), P=P)

    def chk_dswa(s):
        a = d.decode_swa_indices(s["t2r"], s["pos"], s["valid"], s["table"], window=128, page_tokens=s["P"])
        b = t_decode_swa(s["t2r"], s["pos"], s["valid"], s["table"], 128, s["P"])
        return merge(exact(a[0], b[0], "indices"), exact(a[1], b[1], "lens"))
    out.append(Case("decode_swa_indices", f"T={S(2048, 128)} W=128 P=64", lambda: dswa_setup(S(2048, 128)),
                    lambda s: d.decode_swa_indices(s["t2r"], s["pos"], s["valid"], s["table"], window=128,
                                                   page_tokens=s["P"]),
                    lambda s: t_decode_swa(s["t2r"], s["pos"], s["valid"], s["table"], 128, s["P"]), chk_dswa,
                    "arange/where chain + block-table gather"))

    # ---- attention ----
    scale = 0.044194173824159216

    def decode_setup(T, H, w_main=128, w_extra=512):
        ps, pc = 32, 64
        pages_s, pages_c = T * 4 + 2, T * 8 + 2
        mi = torch.randint(0, pages_s * ps, (T, w_main), device=dev, generator=g, dtype=torch.int32)
        ei = torch.randint(0, pages_c * pc, (T, w_extra), device=dev, generator=g, dtype=torch.int32)
        ml = torch.randint(w_main // 2, w_main + 1, (T,), device=dev, generator=g, dtype=torch.int32)
        el = torch.randint(w_extra // 2, w_extra + 1, (T,), device=dev, generator=g, dtype=torch.int32)
        return dict(q=rand_bf16((T, H, 512), dev, g, -3, 1), cs=rand_cache(pages_s, ps, dev, g, (118, 122)), ps=ps,
                    mi=mi, ml=ml, cc=rand_cache(pages_c, pc, dev, g, (118, 122)), pc=pc, ei=ei, el=el,
                    sink=torch.randn(H, device=dev, generator=g))

    def d_decode(s):
        return d.sparse_mla_decode(s["q"], s["cs"], s["mi"], s["ml"], main_page_tokens=s["ps"], extra_cache=s["cc"],
                                   extra_ids=s["ei"], extra_lens=s["el"], extra_page_tokens=s["pc"], sink=s["sink"])

    def tt_decode(s):
        return t_decode(s["q"], s["cs"], s["ps"], s["mi"], s["ml"], s["cc"], s["pc"], s["ei"], s["el"], s["sink"],
                        scale)

    def chk_decode(s):
        Km, okm = t_list_rows(s["cs"], s["ps"], s["mi"], s["ml"])
        Ke, oke = t_list_rows(s["cc"], s["pc"], s["ei"], s["el"])
        maxk = float(max(Km[okm].abs().max(), Ke[oke].abs().max()))
        return attn_close(d_decode(s), tt_decode(s), maxk, "out")

    for T, H in ((64, 64), (S(8, 4), 32), (1, 64)):
        out.append(Case("sparse_mla_decode", f"T={T} H={H} w=128+512", lambda a=(T, H): decode_setup(*a), d_decode,
                        tt_decode, chk_decode, "dequantize rows + fp32 bmm + softmax with sink + bmm"))

    def prefill_setup(T, H, C=640, R=4, M=None):
        M = M or (T + 1024)
        ids = torch.randint(0, R * M, (T, C), device=dev, generator=g, dtype=torch.int32)
        return dict(q=rand_bf16((T, H, 512), dev, g, -3, 1), kv=rand_bf16((R * M, 512), dev, g, -4, 2), ids=ids,
                    lens=torch.randint(C // 2, C + 1, (T,), device=dev, generator=g, dtype=torch.int32),
                    sink=torch.randn(H, device=dev, generator=g))

    def chk_prefill(s):
        maxk = float(s["kv"].float().abs().max())
        a = d.sparse_mla_prefill(s["q"], s["kv"], s["ids"], s["lens"], sink=s["sink"])
        return attn_close(a, t_prefill(s["q"], s["kv"], s["ids"], s["lens"], s["sink"], scale), maxk, "out")

    for T, H in ((S(1024, 32), 64), (S(1024, 32), 32)):
        out.append(Case("sparse_mla_prefill", f"T={T} H={H} w=640", lambda a=(T, H): prefill_setup(*a),
                        lambda s: d.sparse_mla_prefill(s["q"], s["kv"], s["ids"], s["lens"], sink=s["sink"]),
                        lambda s: t_prefill(s["q"], s["kv"], s["ids"], s["lens"], s["sink"], scale), chk_prefill,
                        "row gather + fp32 bmm + softmax with sink + bmm"))

    # ---- mHC (H = 5120, V4.1-Flash) ----
    Hh = S(5120, 1024)
    gate = dict(rms_eps=1e-20, pre_eps=1e-6, sinkhorn_eps=1e-6, post_mult=2.0, sinkhorn_iters=20)

    def mhc_setup(T):
        K = 4 * Hh
        return dict(x=rand_bf16((T, Hh), dev, g, -6, 3), R=rand_bf16((T, 4, Hh), dev, g, -6, 3),
                    post=torch.sigmoid(torch.randn((T, 4), device=dev, generator=g)) * 2,
                    comb=torch.rand((T, 4, 4), device=dev, generator=g),
                    pre_mix=torch.sigmoid(torch.randn((T, 4), device=dev, generator=g)) + 1e-6,
                    w=(torch.rand(Hh, device=dev, generator=g) + 0.5).bfloat16(),
                    fn=torch.randn((24, K), device=dev, generator=g) / math.sqrt(K),
                    scale=torch.rand(3, device=dev, generator=g) + 0.5, base=torch.randn(24, device=dev, generator=g) * .5)

    def chk_post(s):
        a, sq = d.mhc_post(s["x"], s["R"], s["post"], s["comb"], with_sqrsum=True)
        b = t_post(s["x"], s["R"], s["post"], s["comb"])
        ref = b.double().pow(2).reshape(b.shape[0], -1).sum(1)
        rel = float(((sq.double() - ref).abs() / ref).max())
        return merge(exact(a, b, "residual"), (rel <= 1e-5, f"sqrsum rel {rel:.1e} (<= 1e-5)"))

    for T in (S(2048, 16), S(8192, 64)):
        out.append(Case("mhc_post", f"T={T} H={Hh} sqrsum", lambda T=T: mhc_setup(T),
                        lambda s: d.mhc_post(s["x"], s["R"], s["post"], s["comb"], with_sqrsum=True),
                        lambda s: (lambda r: (r, r.float().pow(2).reshape(r.shape[0], -1).sum(1)))(
                            t_post(s["x"], s["R"], s["post"], s["comb"])), chk_post,
                        "fmaf chain (fp64 product+sum, fp32 round) + bf16 cast + square-sum"))

    def chk_collapse(s):
        a, ax = d.mhc_collapse(s["R"], s["pre_mix"], s["w"], with_aux=True)
        b, bx = t_collapse(s["R"], s["pre_mix"], s["w"], 1e-20, aux=True)
        return merge(ulps(a, b, "normed out"), exact(ax, bx, "aux"))
    out.append(Case("mhc_collapse", f"T={S(2048, 16)} H={Hh} norm-aux", lambda: mhc_setup(S(2048, 16)),
                    lambda s: d.mhc_collapse(s["R"], s["pre_mix"], s["w"], with_aux=True),
                    lambda s: t_collapse(s["R"], s["pre_mix"], s["w"], 1e-20, aux=True), chk_collapse,
                    "fmaf chain + RMSNorm + stream mean in torch ops"))

    def chk_gates(s):
        a = d.mhc_gates(s["R"], s["fn"], s["scale"], s["base"], with_mix=True)
        return gates_close(a, s["R"], s["fn"], s["scale"], s["base"], gate, "gates")

    for T in (S(6, 6), S(2048, 32)):
        out.append(Case("mhc_gates", f"T={T} H={Hh}", lambda T=T: mhc_setup(T),
                        lambda s: d.mhc_gates(s["R"], s["fn"], s["scale"], s["base"]),
                        lambda s: t_gates(s["R"], s["fn"], s["scale"], s["base"]), chk_gates,
                        "fp32 GEMM + rsqrt + sigmoid + softmax + 19x2 Sinkhorn steps"))

    def d_seam(s):
        return d.mhc_seam(s["x"], s["R"], s["post"], s["comb"], s["fn"], s["scale"], s["base"], pre_mix=s["pre_mix"],
                          norm_weight=s["w"], with_mix=True)

    def tt_seam(s):
        r = t_post(s["x"], s["R"], s["post"], s["comb"])
        res = t_gates(r, s["fn"], s["scale"], s["base"])
        res.update(residual_out=r, layer_input=t_collapse(r, s["pre_mix"], s["w"], 1e-20))
        return res

    def chk_seam(s):
        a, b = d_seam(s), tt_seam(s)
        return merge(exact(a["residual_out"], b["residual_out"], "residual"),
                     ulps(a["layer_input"], b["layer_input"], "layer_input"),
                     gates_close(a, a["residual_out"], s["fn"], s["scale"], s["base"], gate, "gates"))

    for T in (1, 6, 12, S(64, 16), S(2048, 32)):
        out.append(Case("mhc_seam_v41", f"T={T} H={Hh}", lambda T=T: mhc_setup(T), d_seam, tt_seam, chk_seam,
                        "t_post + t_gates + t_collapse"))

    def d_pre(s):
        return d.mhc_pre(s["R"], s["fn"], s["scale"], s["base"], pre_mix=s["pre_mix"], norm_weight=s["w"],
                         with_mix=True)

    def tt_pre(s):
        res = t_gates(s["R"], s["fn"], s["scale"], s["base"])
        res["layer_input"] = t_collapse(s["R"], s["pre_mix"], s["w"], 1e-20)
        return res

    def chk_pre(s):
        a, b = d_pre(s), tt_pre(s)
        return merge(ulps(a["layer_input"], b["layer_input"], "layer_input"),
                     gates_close(a, s["R"], s["fn"], s["scale"], s["base"], gate, "gates"))
    out.append(Case("mhc_pre_v41", f"T={S(2048, 16)} H={Hh}", lambda: mhc_setup(S(2048, 16)), d_pre, tt_pre, chk_pre,
                    "t_gates + t_collapse"))

    def tt_bcast(s):
        H = s["fn"].shape[1] // 4
        return ((s["fn"][:, :H] + s["fn"][:, H:2 * H]) + s["fn"][:, 2 * H:3 * H]) + s["fn"][:, 3 * H:]
    out.append(Case("mhc_fn_bcast", f"H={Hh}", lambda: mhc_setup(1), lambda s: d.mhc_fn_bcast(s["fn"]), tt_bcast,
                    lambda s: exact(d.mhc_fn_bcast(s["fn"]), tt_bcast(s), "fn_bcast"), "three fp32 adds"))
    return out


# ==== timing and report ============================================================================
def time_us(fn, reps, warmup, cuda):
    for _ in range(warmup):
        fn()
    if not cuda:
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(samples)
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in ev)


def git_commit():
    if os.environ.get("DSV4_COMMIT"):  # a tree copied to a GPU machine has no .git
        return os.environ["DSV4_COMMIT"]
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except Exception:
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description="libdsv4 vs plain PyTorch: agreement and timings")
    ap.add_argument("outfile", nargs="?", help="JSON lines output file")
    ap.add_argument("--op", action="append", help="only these ops (repeatable)")
    ap.add_argument("--reps", type=int, default=30, help="timed repetitions per side (>= 20)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--self-test-cpu", action="store_true",
                    help="run the checks on small shapes with CPU tensors (binding -> C references); no timing")
    args = ap.parse_args()
    if torch is None:
        print("compare_torch: torch is not installed: nothing to compare (needs torch and a CUDA GPU)")
        return 0
    cpu = args.self_test_cpu
    if not cpu and not torch.cuda.is_available():
        print(f"compare_torch: no CUDA GPU found (torch {torch.__version__}): nothing to compare")
        return 0
    if not cpu and not args.outfile and not args.list:
        ap.error("OUTFILE is required")
    if args.reps < 20 and not cpu:
        ap.error("--reps must be >= 20")
    import deepinfer_sm80 as d

    dev = torch.device("cpu" if cpu else "cuda")
    device_name = "cpu (self-test)" if cpu else torch.cuda.get_device_name(dev)
    all_cases = [c for c in cases(d, dev, small=cpu) if not args.op or c.op in args.op]
    if args.list:
        for c in all_cases:
            print(f"{c.op:24s} {c.name}")
        return 0
    meta = dict(device=device_name, lib=d.version(), torch=torch.__version__, commit=git_commit(),
                timing="eager calls from Python: CUDA events around each call (binding/launch overhead included)",
                command=" ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]))
    rows, failed = [], 0
    fh = open(args.outfile, "w") if args.outfile else None
    t_start = time.time()
    for c in all_cases:
        row = dict(meta, op=c.op, case=c.name, torch_impl=c.impl)
        try:
            s = c.setup()
            ok, detail = c.check(s)
            row.update(check="pass" if ok else "FAIL", check_detail=detail)
            if not cpu:
                tu = time_us(lambda: c.torch_(s), args.reps, args.warmup, True)
                du = time_us(lambda: c.dsv4(s), args.reps, args.warmup, True)
                row.update(torch_us=round(tu, 3), dsv4_us=round(du, 3), speedup=round(tu / du, 3), reps=args.reps)
            s = None  # free the case's tensors before the next one
        except Exception as e:  # keep going: one broken case must not hide the others
            ok = False
            row.update(check="ERROR", check_detail=f"{type(e).__name__}: {e}")
        failed += not ok
        rows.append(row)
        if fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
        print(f"  {c.op:22s} {c.name:34s} {row['check']:5s} {row.get('torch_us', '-'):>10} "
              f"{row.get('dsv4_us', '-'):>10} {row.get('speedup', '-'):>8}  {row['check_detail']}", flush=True)
        if not cpu:
            torch.cuda.empty_cache()
    if fh:
        fh.close()
    print(f"\n{device_name}: libdsv4 {meta['lib']} @ {meta['commit']}, torch {meta['torch']}, "
          f"median of {args.reps} reps, {time.time() - t_start:.0f} s")
    print("| op | case | torch us | dsv4 us | speed-up | check |\n|---|---|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['op']} | {r['case']} | {r.get('torch_us', '-')} | {r.get('dsv4_us', '-')} | "
              f"{r.get('speedup', '-')} | {r['check']} |")
    if args.outfile:
        print(f"results: {args.outfile}")
    print(f"{len(rows) - failed} of {len(rows)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
