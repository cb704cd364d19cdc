"""A step through a chain of V4.1 attention blocks and its fp32 reference, shared by the layer
tests: synthetic metadata, random caches and weights, the library blocks and the PyTorch model
side by side, and the checks that compare them (bounds from the op contracts)."""
import torch

from deepinfer_sm80.layer import AttentionBlock, BlockIO, LayerPlan, StepState, random_caches, random_weights
from deepinfer_sm80.layer import synthetic_step
from deepinfer_sm80.layer.reference import ReferenceState, reference_block, reference_seam

# decode requests first: (context, query) with 1 + spec tokens; prefill: a fresh prompt, one
# continuing at an odd position (the ratio-2 compressor reads its ring), one long context.
MIXED = [(300, 1), (157, 6), (0, 40), (201, 37)]


def bf16_ulp(x):
    """One bf16 ulp at |x| (fp32 tensor)."""
    e = torch.frexp(x.abs().clamp(min=2.0 ** -126))[1]
    return torch.exp2((e - 8).float())


def rel_l2(got, want):
    return ((got.float() - want).norm() / want.norm().clamp(min=1e-30)).item()


class Chain:
    """Library blocks and the reference for `layers` (model order) on one step."""

    def __init__(self, cfg, layers, requests, num_decodes, *, device, seed, reuse=True, max_position=None):
        self.cfg, self.device, self.layers = cfg, torch.device(device), layers
        gen = torch.Generator().manual_seed(seed)
        self.meta, sizes = synthetic_step(cfg, requests, num_decodes=num_decodes, device=device, gen=gen)
        T = self.meta.num_tokens
        need = sorted({cfg.role(x).kv_source for x in layers if cfg.role(x).ratio} | set(layers))
        self.caches = {x: random_caches(cfg, cfg.role(x), sizes, device=device, gen=gen) for x in need}
        max_pos = max_position or max(c + q for c, q in requests) + 1
        self.weights = {x: random_weights(cfg, cfg.role(x), max_position=max_pos, device=device, gen=gen)
                        for x in layers}
        self.io = {x: BlockIO.random(T, cfg.hidden, device=device, gen=gen) for x in layers}
        slab_rows = max(c + q for c, q in requests) + cfg.window + T
        self.plan = LayerPlan(cfg, device=device, max_tokens=T, max_decode_tokens=max(self.meta.num_decode_tokens, 1),
                              max_reqs=len(requests), slab_rows=slab_rows, sm_count=0 if device != "cpu" else 108)
        self.state = StepState(self.meta, reuse=reuse)
        self.blocks = {x: AttentionBlock(cfg, x, self.weights[x], self.caches, self.plan) for x in layers}

    def reference_state(self):
        return ReferenceState.from_caches(self.cfg, self.caches)

    def run(self, layer):
        self.blocks[layer].forward(self.io[layer], self.meta, self.state)


def check_layer(chain, layer, want):
    """The library block's results of `layer` against the reference's `want`."""
    cfg, io, meta = chain.cfg, chain.io[layer], chain.meta
    T = meta.num_tokens
    a = chain.plan.acts(T)
    if "topk" in want:
        check_topk(meta.topk_buffer[:T].cpu(), want["topk"], want["logits"], f"layer {layer} top-k")
    if "cand" in want:
        got = meta.candidate_buffer[:T].cpu()
        assert torch.equal(got, want["cand"]), f"layer {layer}: candidate blocks differ in rows " \
            f"{torch.nonzero((got != want['cand']).any(1)).flatten().tolist()}"
    # Attention (sparse MLA contract): max abs <= 1e-2 max|K| (max|o| <= max|K|: the tighter
    # max|o| is used), relative L2 <= 5e-3.
    o = a["o"].float().cpu()
    assert rel_l2(o, want["o"]) <= 5e-3, f"layer {layer}: attention output rel L2 {rel_l2(o, want['o']):.2e}"
    err, bound = (o - want["o"]).abs().max().item(), 1e-2 * want["o"].abs().max().item()
    assert err <= bound, f"layer {layer}: attention output max abs {err:.3e} > {bound:.3e}"
    # x: two more bf16 GEMM outputs, each rounding by at most 2^-9 relative.
    x = a["x_attn"].float().cpu()
    err = rel_l2(x, want["x_attn"])
    assert err <= 5e-3 + 2 * 2 ** -9, f"layer {layer}: x rel L2 {err:.2e}"
    # Residual (mHC post, an fp32 fmaf chain of 5 terms): |d R| <= post * |d x| + the chain's fp32
    # roundings (5 half ulps of the terms' magnitude) + one bf16 ulp of the larger side.
    Rg, post, comb = io.residual_out.float().cpu(), io.post.cpu(), io.comb.cpu()
    mass = post[:, :, None] * x.abs()[:, None, :] + torch.einsum("tjk,tjh->tkh", comb.abs(),
                                                                  io.residual.float().cpu().abs())
    bound = post[:, :, None] * (x - want["x_attn"]).abs()[:, None, :] + 2.0 ** -21 * mass + bf16_ulp(
        torch.maximum(Rg.abs(), want["residual_out"].abs()))
    assert ((Rg - want["residual_out"]).abs() <= bound).all(), f"layer {layer}: residual_out beyond post*|dx| + 1 ulp"
    # The seam given the block's own x: gates within the mHC contract, the FFN input within 1 ulp.
    # Gates of the stored residual: the projection within 1e-5 of its absolute mass A (mHC
    # contract), carried by the gate slopes (pre: sigmoid' <= 1/4 times scale[0]; post:
    # 2 * 1/4 * scale[1]; comb: softmax' <= 1/2 times scale[2], twice for the Sinkhorn steps),
    # plus the epilogue's 1e-5.
    w = chain.weights[layer]
    seam = reference_seam(cfg, w, io, x, r_new=Rg)
    bound = 2.0 ** -21 * mass + bf16_ulp(torch.maximum(Rg.abs(), seam["residual_out"].abs()))
    assert ((Rg - seam["residual_out"]).abs() <= bound).all(), f"layer {layer}: mHC post given the block's x"
    X = Rg.reshape(T, -1).double()
    rms = torch.rsqrt((X * X).mean(1) + cfg.rms_norm_eps)
    delta = 1e-5 * (rms[:, None] * (X.abs() @ w.fn.cpu().double().abs().t())).amax(1)
    sc = w.scale.cpu().double()
    for k, slope in (("pre_out", sc[0] / 4), ("post_out", sc[1] / 2), ("comb_out", sc[2])):
        err = (getattr(io, k).cpu().double() - seam[k].double()).abs().reshape(T, -1).amax(1)
        ok = err <= slope * delta + 1e-5
        assert ok.all(), f"layer {layer}: {k} off by {err.max():.2e} from the fp64 gates " \
            f"(bound {slope * delta.max():.2e})"
    # FFN input: the collapse may round the other way (1 ulp of it, scaled by the norm's factor),
    # then the norm's own rounding (1 ulp).
    li, want_li, y = io.layer_input.float().cpu(), seam["layer_input"], seam["collapse"]
    factor = (want_li / torch.where(y == 0, torch.ones_like(y), y)).abs()
    bound = factor * bf16_ulp(y) + bf16_ulp(torch.maximum(li.abs(), want_li.abs()))
    assert ((li - want_li).abs() <= bound).all(), f"layer {layer}: FFN input beyond its rounding bound"


def check_topk(got, want, logits, what):
    """Rows equal to the reference selection; a differing row must be a near-tie: its sets
    agree within 1e-4 of the row's largest |logit| (the stand-in scores in fp32, the reference
    in fp64) around the K-th reference logit."""
    for t in torch.nonzero((got != want).any(1)).flatten().tolist():
        lg, K = logits[t], got.shape[1]
        sel = [j for j in got[t].tolist() if j >= 0]
        assert sel == sorted(sel) and all(j < 0 for j in got[t, len(sel):].tolist()), f"{what}: row {t} layout"
        ref_sel = [j for j in want[t].tolist() if j >= 0]
        assert len(sel) == len(ref_sel), f"{what}: row {t} selects {len(sel)} entries, the reference {len(ref_sel)}"
        theta = min(lg[j].item() for j in ref_sel)
        delta = 1e-4 * lg.abs().max().item()
        assert all(lg[j] >= theta - delta for j in sel), f"{what}: row {t} selected a column below the margin"
        assert all(lg[j] <= theta + delta for j in set(ref_sel) - set(sel)), f"{what}: row {t} missed a column"
        assert K >= len(sel)


def run_and_check(chain):
    """Run every layer of the chain and its reference in order; check each."""
    ref = chain.reference_state()
    for layer in chain.layers:
        chain.run(layer)
        want = reference_block(chain.cfg, layer, chain.weights[layer], chain.meta, chain.io[layer], ref)
        check_layer(chain, layer, want)
    return ref
